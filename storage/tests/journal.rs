//! Logs whose small flushes go to a shard's journal, over the in-memory
//! file system, through power losses: every acknowledged batch must come
//! back (the journal replayed into the segments before the logs open),
//! and no batch a truncation cut may come back.

mod support;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::executor::block_on;
use futures::FutureExt;
use storage::io::memory::MemFs;
use storage::io::FileSystem;
use storage::journal::entry::LogIdentity;
use storage::journal::file::Journal;
use storage::journal::recover::{open_journal, Replayed};
use storage::{LeaderEpoch, Log, Offset};
use support::{all_batches, batch_of, small_config};

const JOURNAL: &str = "/data/journal-0";
const LOG_DIR: &str = "/data/partitions/t/0";
const JOURNAL_BYTES: u64 = 8192 + 256 * 4096;

const TOPIC_ID: [u8; 16] = [9; 16];

fn locate(log: &LogIdentity) -> std::io::Result<Option<PathBuf>> {
    let ours = log.topic_id == TOPIC_ID && log.partition == 0;
    Ok(ours.then(|| PathBuf::from(LOG_DIR)))
}

/// Opens (replaying) the journal.
fn open_the_journal(fs: &MemFs) -> (Rc<Journal<MemFs>>, Replayed) {
    let opened = open_journal(fs, Path::new(JOURNAL), JOURNAL_BYTES, 64 * 1024, locate);
    let (journal, replayed) = block_on(opened).unwrap();
    (Rc::new(journal), replayed)
}

/// Opens the log on `journal`.
fn open_log(fs: &MemFs, journal: &Rc<Journal<MemFs>>) -> Rc<Log<MemFs>> {
    let log = block_on(Log::open(fs.clone(), LOG_DIR, small_config())).unwrap();
    block_on(log.use_journal(journal.clone(), TOPIC_ID, 0, 16 * 1024)).unwrap();
    log
}

/// Opens (replaying) the journal, then the log on it.
fn open(fs: &MemFs) -> (Rc<Log<MemFs>>, Replayed) {
    let (journal, replayed) = open_the_journal(fs);
    (open_log(fs, &journal), replayed)
}

/// Appends a batch of `count` records and waits until it is durable.
fn append_durable(log: &Log<MemFs>, count: usize, tag: u64) {
    let batch = batch_of(count, 100, tag, 1000 + tag as i64);
    let info = block_on(log.append(batch, LeaderEpoch(0))).unwrap();
    block_on(log.wait_flushed(Offset(info.last_offset.0 + 1))).unwrap();
}

/// The stored batches' bytes, in order.
fn batches(log: &Log<MemFs>) -> Vec<bytes::Bytes> {
    block_on(all_batches(log))
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

/// A second file system holding what `fs` holds durably now.
fn copy_after_power_loss(fs: &MemFs) -> MemFs {
    fs.crash();
    let copy = MemFs::new();
    for dir in [Path::new("/data"), Path::new(LOG_DIR)] {
        for name in fs.list(dir).unwrap() {
            let path = dir.join(name);
            copy.set_contents(&path, fs.contents(&path).unwrap());
        }
    }
    copy
}

#[test]
fn acknowledged_small_flushes_come_back_from_the_journal_after_a_power_loss() {
    let fs = MemFs::new();
    let (log, _) = open(&fs);
    append_durable(&log, 1, 0); // creates the segment: synced directly
    let fdatasyncs_before = log.stats().fdatasyncs;
    for tag in 1..40 {
        append_durable(&log, 1 + tag as usize % 5, tag);
    }
    let stats = log.stats();
    assert_eq!(
        stats.journaled_flushes,
        39 - (stats.fdatasyncs - fdatasyncs_before)
    );
    assert!(stats.journaled_flushes > 30, "{stats:?}");
    assert!(
        stats.journaled_wait_nanos > 0,
        "their wait is timed: {stats:?}"
    );
    assert!(
        stats.fdatasyncs - fdatasyncs_before < 9,
        "rolls sync directly: {stats:?}"
    );
    let acknowledged = batches(&log);
    let log_end = log.log_end();
    drop(log);

    // The segments alone lost acknowledged batches: only the journal has them.
    let without_journal = copy_after_power_loss(&fs);
    let log = block_on(Log::open(without_journal, LOG_DIR, small_config())).unwrap();
    assert!(log.log_end() < log_end, "the test must need the journal");

    let (log, replayed) = open(&fs);
    assert!(replayed.entries > 0, "{replayed:?}");
    assert_eq!(log.log_end(), log_end);
    assert_eq!(batches(&log), acknowledged);
}

#[test]
fn a_truncation_retires_the_entries_it_cut_so_they_never_come_back() {
    let fs = MemFs::new();
    let (log, _) = open(&fs);
    append_durable(&log, 1, 0);
    for tag in 1..11 {
        append_durable(&log, 1, tag);
    }
    assert!(log.stats().journaled_flushes >= 5);
    block_on(log.truncate_to(Offset(4))).unwrap();
    // Batches as large as the cut ones, so a cut one replayed right after
    // them would continue the log seamlessly.
    for tag in 100..103 {
        append_durable(&log, 1, tag);
    }
    let acknowledged = batches(&log);
    assert_eq!(log.log_end(), Offset(7));
    drop(log);
    fs.crash();
    let (log, _) = open(&fs);
    assert_eq!(log.log_end(), Offset(7), "no cut batch came back");
    assert_eq!(batches(&log), acknowledged);
}

#[test]
fn a_closed_log_leaves_no_entry_to_replay() {
    let fs = MemFs::new();
    let (log, _) = open(&fs);
    append_durable(&log, 1, 0);
    for tag in 1..6 {
        append_durable(&log, 1, tag);
    }
    assert!(log.stats().journaled_flushes > 0);
    block_on(log.close()).unwrap();
    drop(log);
    fs.crash();
    let (_, replayed) = open_the_journal(&fs);
    assert_eq!(
        replayed,
        Replayed::default(),
        "its directory may be removed and made again"
    );
}

#[test]
fn a_directory_made_again_under_the_same_name_gets_none_of_the_old_entries() {
    let fs = MemFs::new();
    let (journal, _) = open_the_journal(&fs);
    let log = open_log(&fs, &journal);
    for tag in 0..6 {
        append_durable(&log, 1, tag);
    }
    assert!(log.stats().journaled_flushes > 0);
    // Removed without a close (its entries not retired), then made again.
    drop(log);
    for name in fs.list(Path::new(LOG_DIR)).unwrap() {
        block_on(fs.remove(&Path::new(LOG_DIR).join(name))).unwrap();
    }
    let log = open_log(&fs, &journal);
    append_durable(&log, 1, 100);
    append_durable(&log, 2, 101);
    assert!(log.stats().journaled_flushes > 0);
    let acknowledged = batches(&log);
    drop(log);
    drop(journal);
    fs.crash();
    let (log, replayed) = open(&fs);
    assert!(replayed.skipped > 0, "{replayed:?}");
    assert_eq!(
        batches(&log),
        acknowledged,
        "only the new directory's batches"
    );
}

#[test]
fn a_journaled_flush_never_acknowledges_an_earlier_flush_still_syncing() {
    let fs = MemFs::new();
    let (log, _) = open(&fs);
    append_durable(&log, 1, 0);
    // A flush too large for the journal, held in its fdatasync: polled
    // through its write, then left waiting for the sync.
    let large = batch_of(1, 20 * 1024, 1, 1001);
    let info = block_on(log.append(large, LeaderEpoch(0))).unwrap();
    let large_end = Offset(info.last_offset.0 + 1);
    let mut syncing = Box::pin(log.wait_flushed(large_end));
    assert!(syncing.as_mut().now_or_never().is_none(), "writing");
    assert!(syncing.as_mut().now_or_never().is_none(), "syncing");
    // A small flush meanwhile publishes a flushed offset past the large one.
    append_durable(&log, 1, 2);
    let flushed = log.flushed();
    assert!(flushed > large_end);
    // Never resumed: the large flush's own fdatasync never runs.
    std::mem::forget(syncing);
    drop(log);
    fs.crash();
    let (log, _) = open(&fs);
    assert!(
        log.log_end() >= flushed,
        "acknowledged to {flushed}, recovered to {}",
        log.log_end()
    );
}

#[test]
fn a_round_refused_by_a_failed_write_never_replays_over_a_later_truncation() {
    // With and without an acknowledged entry of the log before the failure.
    for journaled_before in [false, true] {
        let fs = MemFs::new();
        let (log, _) = open(&fs);
        append_durable(&log, 1, 0); // creates the segment: synced directly
        if journaled_before {
            append_durable(&log, 1, 1);
        }
        // The journal's next write fails: the round is refused (the log
        // syncs its segment instead) and the journal stops.
        fs.fail_next_write_of(Path::new(JOURNAL));
        append_durable(&log, 1, 2);
        append_durable(&log, 1, 3);
        let stats = log.stats();
        assert_eq!(stats.journaled_flushes, u64::from(journaled_before));
        // The failed write reached the disk all the same, as it may.
        sync_the_journal_file(&fs);
        // A truncation (which the journal's failure must not stop), then
        // batches as large as the cut ones where they were.
        let cut = Offset(1 + i64::from(journaled_before));
        block_on(log.truncate_to(cut)).unwrap();
        append_durable(&log, 1, 102);
        append_durable(&log, 1, 103);
        let acknowledged = batches(&log);
        drop(log);
        fs.crash();
        let (log, _) = open(&fs);
        assert_eq!(batches(&log), acknowledged, "no refused entry replayed");
    }
}

#[test]
fn after_a_failed_journal_sync_rewrites_wait_for_a_restart_and_nothing_is_lost() {
    let fs = MemFs::new();
    let (log, _) = open(&fs);
    append_durable(&log, 1, 0);
    append_durable(&log, 1, 1);
    fs.fail_next_sync_of(Path::new(JOURNAL));
    append_durable(&log, 1, 2);
    append_durable(&log, 1, 3);
    sync_the_journal_file(&fs);
    let acknowledged = batches(&log);
    // A later sync might report success for writes that never reached
    // the disk: nothing is retired, so the log does not rewrite.
    assert!(block_on(log.truncate_to(Offset(2))).is_err());
    drop(log);
    fs.crash();
    let (log, replayed) = open(&fs);
    assert!(replayed.entries > 0, "{replayed:?}");
    assert_eq!(batches(&log), acknowledged);
    block_on(log.truncate_to(Offset(2))).unwrap();
    assert_eq!(log.log_end(), Offset(2), "after the restart it does");
}

/// Makes the journal file's live bytes durable (a write or sync that
/// failed may have reached the disk all the same).
fn sync_the_journal_file(fs: &MemFs) {
    block_on(async {
        let journal_file = fs.open(Path::new(JOURNAL)).await.unwrap();
        storage::io::DirectFile::fdatasync(&journal_file)
            .await
            .unwrap();
    });
}

#[test]
fn a_log_opened_again_in_the_same_run_retires_its_earlier_entries_before_a_truncation() {
    let fs = MemFs::new();
    let (journal, _) = open_the_journal(&fs);
    let log = open_log(&fs, &journal);
    append_durable(&log, 1, 0);
    for tag in 1..6 {
        append_durable(&log, 1, tag);
    }
    assert!(log.stats().journaled_flushes > 0);
    // Dropped without a close (as one that failed), opened again on the
    // same directory, then truncated and written where some of the cut
    // batches were: the others would follow them seamlessly if replayed.
    drop(log);
    let log = open_log(&fs, &journal);
    block_on(log.truncate_to(Offset(2))).unwrap();
    for tag in 102..104 {
        append_durable(&log, 1, tag);
    }
    let acknowledged = batches(&log);
    drop(log);
    drop(journal);
    fs.crash();
    let (log, _) = open(&fs);
    assert_eq!(batches(&log), acknowledged, "no cut batch came back");
}
