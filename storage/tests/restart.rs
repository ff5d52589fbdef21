//! A follower starting its log over at its leader's local start (tiered
//! storage): everything dropped, the log empty at the new offset, replica
//! appends from there, and all of it as it was after a reopen.

mod support;

use bytes::BytesMut;
use storage::io::dma::DmaFs;
use storage::markers::MarkerKind;
use storage::{LeaderEpoch, Log, Offset};
use support::{batch_of, log_file_names, marker_batch, on_glommio, small_config, transactional};

/// A replicated batch of `count` records at `base` in `epoch`.
fn replica_batch(base: i64, count: usize, epoch: i32) -> BytesMut {
    let mut batch = batch_of(count, 500, base as u64, 1_000);
    batch[..8].copy_from_slice(&base.to_be_bytes());
    // partitionLeaderEpoch: bytes 12..16 (not covered by the CRC).
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
    batch
}

#[test]
fn a_log_started_over_holds_only_what_comes_after_and_reopens_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let d = dir.clone();
    on_glommio(async move {
        let log = Log::open(DmaFs, &d, small_config()).await.unwrap();
        for i in 0..100 {
            log.append(batch_of(2, 1000, i, i as i64), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        assert!(log_file_names(&d).len() >= 3);
        let end = log.log_end();
        assert!(log.restart_at(end, None).await.is_err(), "at the end");
        let start = Offset(end.0 + 1000);
        log.restart_at(start, None).await.unwrap();
        assert_eq!((log.log_start(), log.log_end()), (start, start));
        assert_eq!(log_file_names(&d).len(), 0, "every old segment gone");
        assert_eq!(log.epochs().entries(), &[], "no epoch below the start");
        assert!(log.read(Offset(0), 1 << 20, start).await.is_err());
        log.append_replica(replica_batch(start.0, 5, 7))
            .await
            .unwrap();
        log.append_replica(replica_batch(start.0 + 5, 5, 7))
            .await
            .unwrap();
        log.flush().await.unwrap();
        assert_eq!(log.log_end(), Offset(start.0 + 10));
        assert_eq!(log.epochs().entries(), &[(LeaderEpoch(7), start)]);
        log.close().await.unwrap();
        let log = Log::open(DmaFs, &d, small_config()).await.unwrap();
        assert_eq!(
            (log.log_start(), log.log_end()),
            (start, Offset(start.0 + 10))
        );
        assert_eq!(log.epochs().entries(), &[(LeaderEpoch(7), start)]);
        let read = log.read(start, 1 << 20, log.log_end()).await.unwrap();
        assert_eq!(read.next_offset, Some(Offset(start.0 + 10)));
        log.close().await.unwrap();
    });
}

/// A leader's log with producer 5's transaction open from near its start
/// and producer 6 idempotent, rolled past it: the base of its newest
/// segment (where a snapshot was written at the roll) and the
/// transaction's first offset.
async fn leader_with_an_open_transaction(log: &Log<DmaFs>) -> (Offset, Offset) {
    let first = log
        .append(transactional(5, 0, 3, 0), LeaderEpoch(1))
        .await
        .unwrap()
        .base_offset;
    for i in 0..60u64 {
        let mut batch = batch_of(2, 1000, i, i as i64);
        storage::batch::stamp_producer(&mut batch, 6, 0, (2 * i) as i32);
        log.append(batch, LeaderEpoch(1)).await.unwrap();
    }
    log.flush().await.unwrap();
    let newest = log.sealed_segments().last().unwrap().last_offset.plus(1);
    (newest, first)
}

/// Starts a fresh log in `dir` over at `start` with `snapshot`: how many
/// transactions it then knows open.
async fn started_over(dir: &std::path::Path, start: Offset, snapshot: &[u8]) -> usize {
    let log = Log::open(DmaFs, dir, small_config()).await.unwrap();
    log.restart_at(start, Some(snapshot)).await.unwrap();
    let open = log.open_transactions();
    log.close().await.unwrap();
    open
}

#[test]
fn a_log_started_over_with_its_leaders_snapshot_knows_the_transaction_open_across_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    on_glommio(async move {
        let leader = Log::open(DmaFs, &root.join("leader"), small_config())
            .await
            .unwrap();
        let (start, first) = leader_with_an_open_transaction(&leader).await;
        assert!(first < start);
        let snapshot = leader.producer_snapshot(start).await.unwrap();
        let snapshot = snapshot.expect("a snapshot at the newest roll");
        assert_eq!(leader.producer_snapshot(Offset(1)).await.unwrap(), None);

        let damaged = &snapshot[..snapshot.len() - 1];
        assert_eq!(
            started_over(&root.join("f1"), start, damaged).await,
            0,
            "damaged: not used"
        );
        let elsewhere = start.plus(1);
        assert_eq!(
            started_over(&root.join("f2"), elsewhere, &snapshot).await,
            0,
            "taken elsewhere"
        );
        assert_eq!(started_over(&root.join("f3"), start, &snapshot).await, 1);

        let dir = root.join("f3");
        let follower = Log::open(DmaFs, &dir, small_config()).await.unwrap();
        assert_eq!(
            follower.open_transactions(),
            1,
            "producer 5's, from below the start, after a reopen"
        );
        let mut idempotent = replica_batch(start.0, 2, 1);
        storage::batch::stamp_producer(&mut idempotent, 6, 0, 120);
        follower.append_replica(idempotent).await.unwrap();
        follower.flush().await.unwrap();
        assert_eq!(follower.high_watermark(), start.plus(2));
        assert_eq!(
            follower.last_stable_offset(),
            start,
            "held by the open transaction"
        );
        let mut abort = marker_batch(5, MarkerKind::Abort, 1);
        abort[..8].copy_from_slice(&start.plus(2).0.to_be_bytes());
        follower.append_replica(abort).await.unwrap();
        follower.flush().await.unwrap();
        let aborted = follower
            .aborted_transactions(Offset(0), follower.log_end())
            .await
            .unwrap();
        assert_eq!(
            aborted
                .iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect::<Vec<_>>(),
            vec![(5, first)],
            "the abort covers the records below the start: a read_committed reader skips them"
        );
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

#[test]
fn snapshots_kept_for_upload_outlive_the_newest_few() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    on_glommio(async move {
        let log = Log::open(DmaFs, &dir, small_config()).await.unwrap();
        for i in 0..40 {
            log.append(batch_of(2, 1000, i, i as i64), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let first_roll = log.sealed_segments()[0].last_offset.plus(1);
        assert!(log.producer_snapshot(first_roll).await.unwrap().is_some());
        log.keep_producer_snapshots_from(Some(first_roll));
        for i in 40..200 {
            log.append(batch_of(2, 1000, i, i as i64), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let rolls = log.sealed_segments().len();
        assert!(
            rolls > storage::producers::PRODUCER_SNAPSHOTS_KEPT + 2,
            "{rolls} rolls: past the newest few snapshots kept"
        );
        for sealed in log.sealed_segments() {
            let at = sealed.last_offset.plus(1);
            assert!(
                log.producer_snapshot(at).await.unwrap().is_some(),
                "kept at {at}"
            );
        }
        log.keep_producer_snapshots_from(None);
        log.append(batch_of(2, 1000, 200, 200), LeaderEpoch(1))
            .await
            .unwrap();
        log.roll();
        log.flush().await.unwrap();
        assert!(
            log.producer_snapshot(first_roll).await.unwrap().is_none(),
            "pruned again"
        );
        log.close().await.unwrap();
    });
}
