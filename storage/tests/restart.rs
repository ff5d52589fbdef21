//! A follower starting its log over at its leader's local start (tiered
//! storage): everything dropped, the log empty at the new offset, replica
//! appends from there, and all of it as it was after a reopen.

mod support;

use bytes::BytesMut;
use storage::io::dma::DmaFs;
use storage::{LeaderEpoch, Log, Offset};
use support::{batch_of, log_file_names, on_glommio, small_config};

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
        assert!(log.restart_at(end).await.is_err(), "at the end");
        let start = Offset(end.0 + 1000);
        log.restart_at(start).await.unwrap();
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
