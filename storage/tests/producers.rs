//! Idempotent producers' state in the log: retried batches are recognised
//! (answered with their original offsets, not appended again), gaps and
//! fenced epochs refused, and the state survives a clean close, a crash, a
//! damaged or missing snapshot, a truncation, and a follower's copy.

mod support;

use std::path::Path;

use bytes::BytesMut;
use storage::batch::stamp_producer;
use storage::io::dma::DmaFs;
use storage::producers::SequenceError;
use storage::{LeaderEpoch, Log, LogConfig, Offset, StorageError};
use support::{batch_of, on_glommio, small_config};

/// `count` records of producer `pid` in `epoch` from sequence `seq`.
fn idempotent(pid: i64, epoch: i16, seq: i32, count: usize, tag: u64) -> BytesMut {
    let mut batch = batch_of(count, 100, tag, 1_000 + tag as i64);
    stamp_producer(&mut batch, pid, epoch, seq);
    batch
}

async fn open(dir: &Path) -> std::rc::Rc<Log<DmaFs>> {
    Log::open(DmaFs, dir, small_config()).await.unwrap()
}

const E: LeaderEpoch = LeaderEpoch(1);

#[test]
fn retries_are_recognised_and_gaps_and_old_epochs_refused() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        let a = log.append(idempotent(7, 0, 0, 5, 1), E).await.unwrap();
        let b = log.append(idempotent(7, 0, 5, 5, 2), E).await.unwrap();
        assert!(!a.duplicate && !b.duplicate);
        let end = log.log_end();
        // The retry of A: A's offsets, nothing appended.
        let again = log.append(idempotent(7, 0, 0, 5, 1), E).await.unwrap();
        assert!(again.duplicate);
        assert_eq!(
            (again.base_offset, again.last_offset),
            (a.base_offset, a.last_offset)
        );
        assert_eq!(log.log_end(), end);
        // A gap.
        let gap = log.append(idempotent(7, 0, 11, 1, 3), E).await.unwrap_err();
        assert!(matches!(
            gap,
            StorageError::Sequence(SequenceError::OutOfOrder {
                expected: 10,
                given: 11,
                ..
            })
        ));
        // A new epoch fences the old one.
        log.append(idempotent(7, 1, 0, 1, 4), E).await.unwrap();
        let fenced = log.append(idempotent(7, 0, 10, 1, 5), E).await.unwrap_err();
        assert!(matches!(
            fenced,
            StorageError::Sequence(SequenceError::InvalidEpoch { .. })
        ));
        // Batches without a producer are never checked.
        log.append(batch_of(2, 10, 6, 1), E).await.unwrap();
        assert_eq!(log.log_end(), end.plus(2).plus(1));
        log.close().await.unwrap();
    });
}

/// Appends A (seq 0-4) and B (5-9) of producer 7, returns their offsets.
async fn two_batches(log: &Log<DmaFs>) -> [(Offset, Offset); 2] {
    let a = log.append(idempotent(7, 0, 0, 5, 1), E).await.unwrap();
    let b = log.append(idempotent(7, 0, 5, 5, 2), E).await.unwrap();
    log.flush().await.unwrap();
    [
        (a.base_offset, a.last_offset),
        (b.base_offset, b.last_offset),
    ]
}

async fn retry_is_duplicate(log: &Log<DmaFs>, seq: i32, tag: u64, offsets: (Offset, Offset)) {
    let again = log.append(idempotent(7, 0, seq, 5, tag), E).await.unwrap();
    assert!(again.duplicate, "seq {seq} recognised");
    assert_eq!((again.base_offset, again.last_offset), offsets);
}

#[test]
fn the_state_survives_a_clean_close_and_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        let [a, b] = two_batches(&log).await;
        log.close().await.unwrap();
        drop(log);
        let log = open(dir.path()).await;
        retry_is_duplicate(&log, 5, 2, b).await;
        retry_is_duplicate(&log, 0, 1, a).await;
        // A crash: the log dropped without closing (everything flushed).
        let c = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap();
        log.flush().await.unwrap();
        drop(log);
        let log = open(dir.path()).await;
        retry_is_duplicate(&log, 10, 3, (c.base_offset, c.last_offset)).await;
        log.close().await.unwrap();
    });
}

fn snapshots(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "snapshot"))
        .collect();
    found.sort();
    found
}

#[test]
fn damaged_or_missing_snapshots_are_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        // Enough to roll the 64 KiB segments several times.
        let mut last = (Offset(0), Offset(0));
        for i in 0..300u64 {
            let info = log
                .append(idempotent(7, 0, (i * 5) as i32, 5, i), E)
                .await
                .unwrap();
            last = (info.base_offset, info.last_offset);
            if i % 25 == 24 {
                log.flush().await.unwrap();
            }
        }
        log.flush().await.unwrap();
        assert!(log.segment_count() > 2);
        let rolled = snapshots(dir.path());
        assert!(rolled.len() >= 2, "a snapshot per roll: {rolled:?}");
        log.close().await.unwrap();
        drop(log);
        // Damage the newest, remove the one before.
        let all = snapshots(dir.path());
        let newest = all.last().unwrap();
        let mut bytes = std::fs::read(newest).unwrap();
        bytes[6] ^= 0xff;
        std::fs::write(newest, &bytes).unwrap();
        std::fs::remove_file(&all[all.len() - 2]).unwrap();
        let log = open(dir.path()).await;
        retry_is_duplicate(&log, 299 * 5, 299, last).await;
        let next = log.append(idempotent(7, 0, 1500, 1, 999), E).await.unwrap();
        assert!(!next.duplicate);
        log.close().await.unwrap();
    });
}

#[test]
fn a_truncation_forgets_the_batches_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        let [_, b] = two_batches(&log).await;
        let c = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap();
        log.flush().await.unwrap();
        log.truncate_to(c.base_offset).await.unwrap();
        // C is gone: its retry is appended anew; B is still known.
        retry_is_duplicate(&log, 5, 2, b).await;
        let again = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap();
        assert!(!again.duplicate);
        assert_eq!(again.base_offset, c.base_offset);
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_copying_the_batches_knows_what_its_leader_knew() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let leader = open(&dir.path().join("leader")).await;
        two_batches(&leader).await;
        let follower = open(&dir.path().join("follower")).await;
        let bytes = leader
            .read(Offset(0), 1 << 20, leader.log_end())
            .await
            .unwrap()
            .to_bytes();
        for (_, batch) in storage::batch::split_stored(&bytes, 1 << 20).unwrap() {
            follower
                .append_replica(BytesMut::from(&batch[..]))
                .await
                .unwrap();
        }
        assert_eq!(follower.producers(), leader.producers());
        assert_eq!(follower.producers().entries()[&7].last_seq(), Some(9));
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

#[test]
fn moving_the_log_start_past_a_producer_forgets_it() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let config = LogConfig {
            high_watermark_follows_flush: true,
            ..small_config()
        };
        let log = Log::open(DmaFs, dir.path(), config).await.unwrap();
        two_batches(&log).await;
        let other = log.append(idempotent(8, 0, 0, 1, 9), E).await.unwrap();
        log.flush().await.unwrap();
        log.delete_records_below(other.base_offset).await.unwrap();
        let left: Vec<i64> = log.producers().entries().keys().copied().collect();
        assert_eq!(left, vec![8]);
        log.close().await.unwrap();
    });
}
