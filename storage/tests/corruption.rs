//! Corruption test: flip bytes and cut the tail of a segment at random
//! positions; recovery must keep exactly the batches before the damage,
//! never panic, and leave a log that appends and reads normally.
//!
//! A byte flip is placed where the format can see it: anywhere in a
//! batch except baseOffset and partitionLeaderEpoch, which Kafka's v2
//! format leaves outside the CRC so a broker can patch them.

mod support;

use std::path::{Path, PathBuf};

use futures::executor::block_on;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use storage::io::dma::DmaFs;
use storage::io::memory::MemFs;
use storage::io::FileSystem;
use storage::{LeaderEpoch, Log, LogConfig, Offset};
use support::batch_of;

/// One segment, so every byte of the log is in the active segment.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 20,
        index_interval_bytes: 2048,
        max_batch_bytes: 64 * 1024,
        preallocate_bytes: 64 * 1024,
        ..LogConfig::default()
    }
}

/// Batch boundaries: (start position, end position, next offset).
type Layout = Vec<(usize, usize, i64)>;

async fn write_log<FS: FileSystem>(fs: FS, dir: &Path, rng: &mut SmallRng) -> Layout {
    let log = Log::open(fs, dir, config()).await.unwrap();
    let mut layout = Vec::new();
    let mut position = 0;
    for i in 0..rng.gen_range(5..40) {
        let batch = batch_of(
            rng.gen_range(1..6),
            rng.gen_range(10..3000),
            i,
            1_000 + i as i64,
        );
        let len = batch.len();
        let info = log.append(batch, LeaderEpoch(0)).await.unwrap();
        layout.push((position, position + len, info.last_offset.0 + 1));
        position += len;
    }
    log.flush().await.unwrap();
    // No close: the reopen is a crash recovery.
    layout
}

/// What recovery must keep when the first damaged byte is at `damaged`.
fn expected_end(layout: &Layout, damaged: usize) -> i64 {
    layout
        .iter()
        .take_while(|(_, end, _)| *end <= damaged)
        .last()
        .map_or(0, |(_, _, next)| *next)
}

/// A position the format checks: not in baseOffset (0..8) or the leader epoch (12..16).
fn checked_position(layout: &Layout, rng: &mut SmallRng) -> usize {
    loop {
        let (start, end, _) = layout[rng.gen_range(0..layout.len())];
        let p = rng.gen_range(start..end);
        let within = p - start;
        if !(within < 8 || (12..16).contains(&within)) {
            return p;
        }
    }
}

async fn recover_and_check<FS: FileSystem>(fs: FS, dir: &Path, want_end: i64, ctx: &str) {
    let log = Log::open(fs, dir, config())
        .await
        .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
    assert_eq!(log.log_end(), Offset(want_end), "{ctx}: recovered log end");
    // Everything kept reads back and validates; the log takes new appends.
    for (_, batch) in support::all_batches(&log).await {
        storage::batch::validate(&batch, 1 << 20, storage::batch::CountRule::Exact)
            .unwrap_or_else(|e| panic!("{ctx}: kept an invalid batch: {e}"));
    }
    let info = log
        .append(batch_of(2, 100, 777, 5), LeaderEpoch(1))
        .await
        .unwrap();
    assert_eq!(info.base_offset, Offset(want_end), "{ctx}");
    log.flush().await.unwrap();
}

fn damage(bytes: &mut Vec<u8>, layout: &Layout, rng: &mut SmallRng) -> (usize, &'static str) {
    if rng.gen_bool(0.5) {
        let p = checked_position(layout, rng);
        bytes[p] ^= 1 << rng.gen_range(0..8);
        (p, "flip")
    } else {
        // Cut inside the data, not in the preallocated zeros after it.
        let data_end = layout.last().map_or(0, |(_, end, _)| *end);
        let p = rng.gen_range(0..=data_end.min(bytes.len()));
        bytes.truncate(p);
        (p, "cut")
    }
}

#[test]
fn recovery_keeps_exactly_the_valid_prefix_in_memory() {
    let seed = support::seed("corruption_in_memory");
    let mut rng = SmallRng::seed_from_u64(seed);
    let segment = PathBuf::from("/p/00000000000000000000.log");
    for round in 0..400 {
        let fs = MemFs::new();
        let layout = block_on(write_log(fs.clone(), Path::new("/p"), &mut rng));
        let mut bytes = fs.contents(&segment).unwrap();
        let (at, how) = damage(&mut bytes, &layout, &mut rng);
        fs.set_contents(&segment, bytes);
        let ctx = format!("seed {seed} round {round}: {how} at {at}");
        block_on(recover_and_check(
            fs,
            Path::new("/p"),
            expected_end(&layout, at),
            &ctx,
        ));
    }
}

#[test]
fn recovery_keeps_exactly_the_valid_prefix_on_real_files() {
    let seed = support::seed("corruption_real_files");
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..40 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let layout = {
            let dir = dir.clone();
            let mut r = SmallRng::seed_from_u64(rng.gen());
            support::on_glommio(async move { write_log(DmaFs, &dir, &mut r).await })
        };
        let segment = dir.join("00000000000000000000.log");
        let mut bytes = std::fs::read(&segment).unwrap();
        let (at, how) = damage(&mut bytes, &layout, &mut rng);
        std::fs::write(&segment, bytes).unwrap();
        let ctx = format!("seed {seed} round {round}: {how} at {at}");
        let want = expected_end(&layout, at);
        support::on_glommio(async move { recover_and_check(DmaFs, &dir, want, &ctx).await });
    }
}

#[test]
fn a_damaged_index_is_rebuilt_and_nothing_is_lost() {
    let seed = support::seed("damaged_index");
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..100 {
        let fs = MemFs::new();
        let small = LogConfig {
            segment_bytes: 64 * 1024,
            ..config()
        };
        let log = block_on(Log::open(fs.clone(), "/p", small.clone())).unwrap();
        for i in 0..60 {
            block_on(log.append(batch_of(3, 900, i, i as i64), LeaderEpoch(0))).unwrap();
        }
        block_on(log.close()).unwrap();
        let end = log.log_end();
        drop(log);
        // Damage the index of the first (sealed) segment or the active one.
        let names = [
            "/p/00000000000000000000.index",
            "/p/00000000000000000000.timeindex",
        ];
        let path = Path::new(names[rng.gen_range(0..names.len())]);
        let mut bytes = fs.contents(path).unwrap();
        assert!(!bytes.is_empty(), "round {round}: the index has entries");
        let p = rng.gen_range(0..bytes.len());
        if rng.gen_bool(0.5) {
            bytes[p] ^= 0xff;
        } else {
            bytes.truncate(p);
        }
        fs.set_contents(path, bytes);
        let log = block_on(Log::open(fs.clone(), "/p", small)).unwrap();
        assert_eq!(log.log_end(), end, "seed {seed} round {round}");
        // Reads at every offset still find their batch through the index.
        for offset in (0..end.0).step_by(7) {
            let out = block_on(log.read(Offset(offset), 1, end))
                .unwrap()
                .to_bytes();
            let (header, _) = storage::batch::split_stored(&out, 1 << 20).unwrap()[0].clone();
            assert!(header.base_offset.0 <= offset && offset < header.next_offset().0);
        }
    }
}
