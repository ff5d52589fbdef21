//! Shared helpers of the storage tests.
#![allow(dead_code)]

use bytes::BytesMut;
use storage::batch::{self, RecordSpec};
use storage::io::FileSystem;
use storage::markers::{self, Marker, MarkerKind};
use storage::{Log, LogConfig, Offset, TimestampMs};

/// Copies every batch of `leader` into `follower`, as a follower fetching
/// the whole log appends it.
pub async fn copy_log<FS: FileSystem>(leader: &Log<FS>, follower: &Log<FS>) {
    let bytes = leader
        .read(Offset(0), 1 << 24, leader.log_end())
        .await
        .unwrap()
        .to_bytes();
    for (_, batch) in batch::split_stored(&bytes, 1 << 20).unwrap() {
        follower
            .append_replica(BytesMut::from(&batch[..]))
            .await
            .unwrap();
    }
}

/// A producer batch of `count` records whose values encode `tag`, so every
/// batch of a test is distinct byte for byte.
pub fn batch_of(count: usize, value_bytes: usize, tag: u64, timestamp: i64) -> BytesMut {
    let records: Vec<RecordSpec> = (0..count)
        .map(|i| {
            let mut value = vec![0u8; value_bytes.max(16)];
            value[..8].copy_from_slice(&tag.to_be_bytes());
            value[8..16].copy_from_slice(&(i as u64).to_be_bytes());
            RecordSpec {
                timestamp_delta: i as i64,
                key: Some(format!("key-{}", (tag as usize + i) % 7).into_bytes()),
                value: Some(value),
            }
        })
        .collect();
    batch::build(TimestampMs(timestamp), &records)
}

/// `count` records of transactional producer `pid` (epoch 0) from
/// sequence `seq`.
pub fn transactional(pid: i64, seq: i32, count: usize, tag: u64) -> BytesMut {
    let mut batch = batch_of(count, 200, tag, 1_000 + tag as i64);
    batch::stamp_producer(&mut batch, pid, 0, seq);
    batch::set_flags(&mut batch, batch::TRANSACTIONAL_FLAG);
    batch
}

/// A COMMIT or ABORT marker of producer `pid` (epoch 0) from a coordinator
/// of `coordinator_epoch`.
pub fn marker_batch(pid: i64, kind: MarkerKind, coordinator_epoch: i32) -> BytesMut {
    let marker = Marker {
        kind,
        coordinator_epoch,
    };
    markers::build(pid, 0, marker, TimestampMs(5_000))
}

/// A keyed record batch for compaction tests.
pub fn keyed(records: &[(&str, Option<&str>)], timestamp: i64) -> BytesMut {
    let specs: Vec<RecordSpec> = records
        .iter()
        .map(|(k, v)| RecordSpec {
            timestamp_delta: 0,
            key: Some(k.as_bytes().to_vec()),
            value: v.map(|v| v.as_bytes().to_vec()),
        })
        .collect();
    batch::build(TimestampMs(timestamp), &specs)
}

/// A small configuration so tests roll segments and index often.
pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        max_batch_bytes: 32 * 1024,
        write_chunk_bytes: 16 * 1024,
        max_pending_bytes: 256 * 1024,
        preallocate_bytes: 64 * 1024,
        cache_budget_bytes: 8 * 1024,
        read_ahead_bytes: 8 * 1024,
        ..LogConfig::default()
    }
}

/// Runs a future on a glommio executor on this thread (the production I/O path).
pub fn on_glommio<T>(fut: impl std::future::Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("glommio executor (is `ulimit -l` high enough?)")
        .run(fut)
}

/// Seed for a randomized test: `SEED` from the environment or the clock,
/// printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: SEED={seed} (set SEED to replay)");
    seed
}

/// Every batch from the log start to the log end, in order, read in
/// 1 MiB steps; a read that makes no progress below the log end fails.
pub async fn all_batches<FS: storage::io::FileSystem>(
    log: &storage::Log<FS>,
) -> Vec<(storage::batch::BatchHeader, bytes::Bytes)> {
    let mut out = Vec::new();
    let mut offset = log.log_start();
    while offset < log.log_end() {
        let bytes = log
            .read(offset, 1 << 20, log.log_end())
            .await
            .unwrap()
            .to_bytes();
        let batches = storage::batch::split_stored(&bytes, 1 << 20).unwrap();
        let last = batches
            .last()
            .unwrap_or_else(|| panic!("no progress reading at {offset}"));
        offset = last.0.next_offset();
        out.extend(batches);
    }
    out
}

/// The `.log` file names of a partition directory, sorted.
pub fn log_file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}
