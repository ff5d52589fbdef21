//! Many partition logs flushing at once on the production I/O path
//! (glommio, O_DIRECT): past a shard's plain fdatasyncs in flight, their
//! syncs share file-system rounds, and every flushed batch reads back
//! after the logs are reopened.

mod support;

use storage::batch::{split_stored, validate, CountRule};
use storage::io::dma::{shard_sync_counts, DmaFs};
use storage::{LeaderEpoch, Log, Offset};
use support::{batch_of, on_glommio, small_config};

/// Logs flushed at once: far more than the plain fdatasyncs a shard keeps
/// in flight (16).
const LOGS: usize = 64;
const FLUSHES: u64 = 3;

#[test]
fn many_logs_flushing_at_once_share_file_system_rounds_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    let counts = on_glommio(async move {
        let mut logs = Vec::new();
        for i in 0..LOGS {
            let path = root.join(format!("p{i}"));
            let log = Log::open(DmaFs, &path, small_config()).await;
            logs.push(log.expect("open"));
        }
        for flush in 0..FLUSHES {
            for (i, log) in logs.iter().enumerate() {
                let batch = batch_of(2, 100, flush * 1000 + i as u64, 0);
                log.append(batch, LeaderEpoch(0)).await.expect("append");
            }
            let flushes = logs.iter().map(|log| log.flush());
            for flushed in futures::future::join_all(flushes).await {
                flushed.expect("flush");
            }
        }
        for log in &logs {
            assert_eq!(log.flushed(), Offset(2 * FLUSHES as i64));
        }
        shard_sync_counts()
    });
    assert!(counts.rounds >= 1, "no round was run: {counts:?}");
    assert!(
        counts.in_rounds > counts.rounds,
        "rounds cover several syncs each: {counts:?}"
    );
    assert!(counts.plain >= 16, "plain fdatasyncs first: {counts:?}");

    let root = dir.path().to_path_buf();
    on_glommio(async move {
        for i in 0..LOGS {
            let path = root.join(format!("p{i}"));
            let log = Log::open(DmaFs, &path, small_config()).await;
            let log = log.expect("reopen");
            let end = log.log_end();
            assert_eq!(end, Offset(2 * FLUSHES as i64), "log {i}");
            let read = log.read(Offset(0), 1 << 20, end).await.expect("read");
            let batches = split_stored(&read.to_bytes(), 1 << 20).expect("batches");
            assert_eq!(batches.len(), FLUSHES as usize, "log {i}");
            for (_, bytes) in &batches {
                validate(bytes, 1 << 20, CountRule::Exact).expect("a whole batch");
            }
        }
    });
}
