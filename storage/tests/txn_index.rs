//! The aborted-transaction index per segment against a model: random
//! transactional batches, commits, aborts and stray markers across segment
//! rolls, with clean closes, crashes, truncations, records deleted, and
//! index files damaged or lost between opens. Every read_committed lookup
//! answers what the model says, as does the last stable offset; memory
//! holds only the aborts of the segment without an index file (the active
//! one), and every other segment has its file.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::io::dma::DmaFs;
use storage::markers::MarkerKind;
use storage::{LeaderEpoch, Log, Offset};
use support::{batch_of, marker_batch, on_glommio, seed, small_config, transactional};

const E: LeaderEpoch = LeaderEpoch(1);

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A transactional batch of this producer.
    Batch(i64),
    /// A marker of this producer: abort (else commit).
    Marker(i64, bool),
    /// A batch of no producer.
    Plain,
}

/// An aborted transaction: producer, first offset, marker offset.
type Aborted = (i64, Offset, Offset);

/// What the log holds, by each batch's first offset.
#[derive(Default)]
struct Model {
    events: BTreeMap<Offset, Event>,
}

impl Model {
    /// The open transactions (producer to first offset) and the aborted
    /// ones (producer, first offset, marker offset), in marker order.
    fn replay(&self) -> (BTreeMap<i64, Offset>, Vec<Aborted>) {
        let (mut open, mut aborted) = (BTreeMap::new(), Vec::new());
        for (&at, event) in &self.events {
            match *event {
                Event::Batch(pid) => {
                    open.entry(pid).or_insert(at);
                }
                Event::Marker(pid, abort) => {
                    if let Some(first) = open.remove(&pid) {
                        if abort {
                            aborted.push((pid, first, at));
                        }
                    }
                }
                Event::Plain => {}
            }
        }
        (open, aborted)
    }

    /// The transactions that started below `offset`: the last marker that
    /// decided one at or past it, and whether one is still open.
    fn spanning(&self, offset: Offset) -> (Option<Offset>, bool) {
        let (mut open, mut last_marker) = (BTreeMap::new(), None);
        for (&at, event) in &self.events {
            match *event {
                Event::Batch(pid) => {
                    open.entry(pid).or_insert(at);
                }
                Event::Marker(pid, _) => {
                    let first = open.remove(&pid);
                    if at >= offset && first.is_some_and(|first| first < offset) {
                        last_marker = Some(at);
                    }
                }
                Event::Plain => {}
            }
        }
        (last_marker, open.values().any(|first| *first < offset))
    }

    fn aborted(&self, from: Offset, upper: Offset) -> Vec<(i64, Offset)> {
        let (_, aborted) = self.replay();
        aborted
            .into_iter()
            .filter(|(_, first, marker)| *marker >= from && *first < upper)
            .map(|(pid, first, _)| (pid, first))
            .collect()
    }
}

/// The driver: the log, the model, each producer's next sequence, and the
/// producers that may write no more batches (their sequences were cut).
struct Run {
    rng: StdRng,
    seed: u64,
    /// None only while it is reopened.
    log: Option<Rc<Log<DmaFs>>>,
    model: Model,
    next_seq: BTreeMap<i64, i32>,
    frozen: BTreeSet<i64>,
    next_pid: i64,
    tag: u64,
}

impl Run {
    fn log(&self) -> &Log<DmaFs> {
        self.log.as_ref().expect("the log is open")
    }

    async fn append_transactional(&mut self) {
        let (open, _) = self.model.replay();
        let writable: Vec<i64> = open
            .keys()
            .copied()
            .filter(|p| !self.frozen.contains(p))
            .collect();
        let pid = match writable.is_empty() || self.rng.gen_bool(0.3) {
            true => {
                self.next_pid += 1;
                self.next_pid
            }
            false => writable[self.rng.gen_range(0..writable.len())],
        };
        let count = self.rng.gen_range(1..=5);
        let seq = self.next_seq.entry(pid).or_insert(0);
        self.tag += 1;
        let batch = transactional(pid, *seq, count, self.tag);
        *seq += count as i32;
        let info = self.log().append(batch, E).await.unwrap();
        self.model
            .events
            .insert(info.base_offset, Event::Batch(pid));
    }

    async fn append_plain(&mut self) {
        self.tag += 1;
        let batch = batch_of(self.rng.gen_range(1..=5), 100, self.tag, 1_000);
        let info = self.log().append(batch, E).await.unwrap();
        self.model.events.insert(info.base_offset, Event::Plain);
    }

    /// A marker of an open transaction, or now and then of a producer
    /// with none open here (a retry: it decides nothing).
    async fn append_marker(&mut self) {
        let (open, _) = self.model.replay();
        let pids: Vec<i64> = open.keys().copied().collect();
        let pid = match pids.is_empty() || self.rng.gen_bool(0.1) {
            true => self.rng.gen_range(1..=self.next_pid.max(1)),
            false => pids[self.rng.gen_range(0..pids.len())],
        };
        let abort = self.rng.gen_bool(0.6);
        let kind = [MarkerKind::Commit, MarkerKind::Abort][abort as usize];
        let info = self
            .log()
            .append(marker_batch(pid, kind, 1), E)
            .await
            .unwrap();
        self.model
            .events
            .insert(info.base_offset, Event::Marker(pid, abort));
    }

    async fn reopen(&mut self, dir: &Path) {
        let crash = self.rng.gen_bool(0.5);
        if crash {
            self.log().flush().await.unwrap();
        } else {
            self.log().close().await.unwrap();
        }
        let start = self.log().log_start();
        self.log = None;
        if crash {
            self.damage(dir, start);
        }
        self.log = Some(Log::open(DmaFs, dir, small_config()).await.unwrap());
    }

    /// Removes or spoils one index file, or the newest producer snapshot.
    /// Not while a transaction spans the log start: its first batch is
    /// gone, so only the files that were written while it was known (the
    /// snapshots, the index files) know it; lose one and a replay cannot
    /// say where it began, nor that others aborted meanwhile were not yet
    /// stable. That is data lost, not recovered.
    fn damage(&mut self, dir: &Path, start: Offset) {
        if self.model.spanning(start) != (None, false) {
            return;
        }
        let indexes = names_with(dir, ".txnindex");
        let what = self.rng.gen_range(0..6);
        if std::env::var("TRACE").is_ok() {
            eprintln!("damage {what} among {indexes:?}");
        }
        match what {
            0 if !indexes.is_empty() => {
                let name = &indexes[self.rng.gen_range(0..indexes.len())];
                std::fs::remove_file(dir.join(name)).unwrap();
            }
            1 if !indexes.is_empty() => {
                let name = &indexes[self.rng.gen_range(0..indexes.len())];
                std::fs::write(dir.join(name), b"TXI1 spoiled").unwrap();
            }
            2 => {
                if let Some(newest) = names_with(dir, ".snapshot").last() {
                    std::fs::remove_file(dir.join(newest)).unwrap();
                }
            }
            3 | 4 => unmake_empty_newest_segment(dir),
            _ => {}
        }
    }

    /// Truncates, never below a marker of a transaction that started
    /// below the log start: no replica can rebuild such a transaction (its
    /// first batches are gone, and the snapshots only keep what was open),
    /// and replication never truncates below the high watermark anyway.
    /// Now and then a crash in the middle: right after the later
    /// segments were removed, before the cut segment was cut (its index
    /// file and every snapshot still there). Not while a transaction spans
    /// the log start: only the state before the cut knew it was open.
    async fn truncate(&mut self, dir: &Path) {
        let (start, end) = (self.log().log_start(), self.log().log_end());
        let (last_marker, open_below) = self.model.spanning(start);
        let lowest = last_marker.map_or(start, |marker| marker.plus(1));
        if lowest > end {
            return;
        }
        let to = Offset(self.rng.gen_range(lowest.0..=end.0));
        // Their sequences will be cut: they may still get markers.
        self.frozen.extend(1..=self.next_pid);
        let crash = self.rng.gen_bool(0.5) && last_marker.is_none() && !open_below;
        if !crash {
            let new_end = self.log().truncate_to(to).await.unwrap();
            self.model.events.split_off(&new_end);
            return;
        }
        self.log().flush().await.unwrap();
        let before = tempfile::tempdir().unwrap();
        copy_files(dir, before.path());
        self.log().truncate_to(to).await.unwrap();
        self.log = None;
        // The cut segment and the earlier ones as they were, none after.
        let cut_base = names_with(before.path(), ".log")
            .iter()
            .map(|n| base_of(n))
            .filter(|b| *b <= to)
            .max();
        let later = names_with(before.path(), ".log")
            .iter()
            .map(|n| base_of(n))
            .find(|b| Some(*b) > cut_base);
        for name in names_with(dir, "") {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        copy_files(before.path(), dir);
        if let Some(later) = later {
            for name in names_with(dir, "") {
                if name.as_bytes()[0].is_ascii_digit()
                    && base_of(&name) >= later
                    && !name.ends_with(".snapshot")
                {
                    std::fs::remove_file(dir.join(name)).unwrap();
                }
            }
            self.model.events.split_off(&later);
        }
        self.log = Some(Log::open(DmaFs, dir, small_config()).await.unwrap());
    }

    async fn delete_records(&mut self) {
        self.log().flush().await.unwrap();
        let (start, hw) = (self.log().log_start(), self.log().high_watermark());
        let below = Offset(self.rng.gen_range(start.0..=hw.0));
        self.log().delete_records_below(below).await.unwrap();
        if std::env::var("TRACE").is_ok() {
            let dir = self.log().dir().to_path_buf();
            eprintln!(
                "deleted below {below}: snapshots {:?}",
                names_with(&dir, ".snapshot")
            );
        }
    }

    /// Random lookups against the model.
    async fn check_lookups(&mut self, step: usize) {
        let (start, end) = (self.log().log_start(), self.log().log_end());
        for _ in 0..3 {
            let from = Offset(self.rng.gen_range(start.0..=end.0));
            let upper = Offset(self.rng.gen_range(from.0..=end.0 + 1));
            let told: Vec<(i64, Offset)> = self
                .log()
                .aborted_transactions(from, upper)
                .await
                .unwrap()
                .iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect();
            let seed = self.seed;
            let expected = self.model.aborted(from, upper);
            assert_eq!(told, expected, "SEED={seed} step {step}: [{from}, {upper})");
        }
    }

    /// Once everything is flushed: the LSO is the model's, every segment
    /// but the newest has its index file, and memory holds exactly the
    /// aborts past the last segment with a file.
    async fn check_at_rest(&mut self, dir: &Path, step: usize) {
        self.log().flush().await.unwrap();
        let (start, end) = (self.log().log_start(), self.log().log_end());
        let (open, aborted) = self.model.replay();
        let lso = open.values().min().map_or(end, |first| *first.max(&start));
        let seed = self.seed;
        assert_eq!(
            self.log().last_stable_offset(),
            lso,
            "SEED={seed} step {step}"
        );
        let logs = names_with(dir, ".log");
        let indexes: BTreeSet<String> = names_with(dir, ".txnindex").into_iter().collect();
        let indexed = |name: &String| indexes.contains(&name.replace(".log", ".txnindex"));
        let older = &logs[..logs.len().saturating_sub(1)];
        assert!(
            older.iter().all(indexed),
            "SEED={seed} step {step}: a sealed segment without its index: {logs:?} {indexes:?}"
        );
        let held_from = match logs.last() {
            Some(newest) if !indexed(newest) => base_of(newest),
            _ => end,
        };
        let expected = aborted
            .iter()
            .filter(|(_, _, marker)| *marker >= held_from.max(start))
            .count();
        let held = self.log().producers().transactions().aborted_held();
        assert_eq!(
            held, expected,
            "SEED={seed} step {step}: aborts held in memory"
        );
    }
}

/// A crash after a roll's seal, before the next segment's file was made:
/// the newest segment file goes if it is empty, and the snapshot at its
/// base (that flush writes it after the seal).
fn unmake_empty_newest_segment(dir: &Path) {
    let logs = names_with(dir, ".log");
    let Some(newest) = logs.last().filter(|_| logs.len() > 1) else {
        return;
    };
    if std::fs::metadata(dir.join(newest)).unwrap().len() > 0 {
        return;
    }
    let stem = &newest[..20];
    for name in names_with(dir, "") {
        if name.starts_with(stem) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
    }
}

/// Copies every file of `from` into `to`.
fn copy_files(from: &Path, to: &Path) {
    for name in names_with(from, "") {
        std::fs::copy(from.join(&name), to.join(&name)).unwrap();
    }
}

/// The offset a segment file is named by.
fn base_of(name: &str) -> Offset {
    Offset(name[..20].parse().unwrap())
}

/// The names of `dir`'s files ending in `suffix`, sorted.
fn names_with(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

async fn run(dir: &Path, seed: u64, steps: usize) {
    let mut run = Run {
        rng: StdRng::seed_from_u64(seed),
        seed,
        log: Some(Log::open(DmaFs, dir, small_config()).await.unwrap()),
        model: Model::default(),
        next_seq: BTreeMap::new(),
        frozen: BTreeSet::new(),
        next_pid: 0,
        tag: 0,
    };
    let trace = std::env::var("TRACE").is_ok();
    for step in 0..steps {
        let op = run.rng.gen_range(0..100);
        if trace {
            let log = run.log();
            eprintln!(
                "step {step}: op {op}, log [{}, {}) events {:?}",
                log.log_start(),
                log.log_end(),
                run.model.events.iter().rev().take(3).collect::<Vec<_>>()
            );
        }
        match op {
            0..=34 => run.append_transactional().await,
            35..=49 => run.append_plain().await,
            50..=71 => run.append_marker().await,
            72..=79 => run.log().roll(),
            80..=85 => run.log().flush().await.unwrap(),
            86..=90 => run.reopen(dir).await,
            91..=95 => run.truncate(dir).await,
            _ => run.delete_records().await,
        }
        run.check_lookups(step).await;
        if step % 10 == 9 {
            run.check_at_rest(dir, step).await;
        }
    }
    run.log().close().await.unwrap();
}

#[test]
fn aborted_transaction_lookups_match_a_model_across_rolls_reopens_truncations_and_damage() {
    let seed = seed("txn_index");
    for round in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        on_glommio(run(&path, seed.wrapping_add(round), 300));
    }
}
