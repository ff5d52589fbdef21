//! Transactions in the log: transactional batches open their producer's
//! transaction, COMMIT and ABORT markers end it, the last stable offset
//! waits for the earliest open one (and for a marker to fall below the
//! high watermark), aborted transactions are found for a read_committed
//! read; all of it survives a clean close, a crash across segment rolls,
//! a truncation below a marker, and a follower's copy.

mod support;

use std::path::Path;

use bytes::BytesMut;
use storage::batch::{set_flags, stamp_producer, TRANSACTIONAL_FLAG};
use storage::io::dma::DmaFs;
use storage::markers::{self, Marker, MarkerKind};
use storage::transactions::TxnError;
use storage::CompactionPolicy;
use storage::{LeaderEpoch, Log, Offset, StorageError, TimestampMs};
use support::{batch_of, copy_log, keyed, marker_batch, on_glommio, small_config, transactional};

const E: LeaderEpoch = LeaderEpoch(1);

fn marker(pid: i64, kind: MarkerKind) -> BytesMut {
    marker_batch(pid, kind, 1)
}

async fn open(dir: &Path) -> std::rc::Rc<Log<DmaFs>> {
    Log::open(DmaFs, dir, small_config()).await.unwrap()
}

/// What a read_committed reader is told: (LSO, aborted (producer, first
/// offset) over the whole log).
async fn committed_view(log: &Log<DmaFs>) -> (Offset, Vec<(i64, Offset)>) {
    let aborted = log
        .aborted_transactions(Offset(0), log.log_end())
        .await
        .unwrap()
        .iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    (log.last_stable_offset(), aborted)
}

/// Producer 1 commits, producer 2 aborts, producer 3 stays open, with
/// enough records that the segments roll (snapshots at each roll):
/// returns each transaction's first offset.
async fn three_transactions(log: &Log<DmaFs>) -> [Offset; 3] {
    let mut firsts = [Offset(0); 3];
    let mut seqs = [0i32; 3];
    for round in 0..30u64 {
        for pid in 1..=3i64 {
            let i = (pid - 1) as usize;
            let batch = transactional(pid, seqs[i], 20, round * 3 + pid as u64);
            let info = log.append(batch, E).await.unwrap();
            if round == 0 {
                firsts[i] = info.base_offset;
            }
            seqs[i] += 20;
        }
    }
    log.append(marker(1, MarkerKind::Commit), E).await.unwrap();
    log.append(marker(2, MarkerKind::Abort), E).await.unwrap();
    log.flush().await.unwrap();
    firsts
}

#[test]
fn the_lso_and_the_aborted_transactions_follow_the_markers() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.set_high_watermark(Offset(0));
        let [_, second, third] = three_transactions(&log).await;
        assert!(
            log.segment_count() > 2,
            "the transactions cross segment rolls"
        );
        log.set_high_watermark(log.log_end());
        let (lso, aborted) = committed_view(&log).await;
        assert_eq!(lso, third, "producer 3 is open");
        assert_eq!(aborted, vec![(2, second)]);
        // Producer 3 may not write outside its transaction.
        let mut plain = batch_of(1, 10, 99, 1);
        stamp_producer(&mut plain, 3, 0, 600);
        let refused = log.append(plain, E).await.unwrap_err();
        assert!(matches!(
            refused,
            StorageError::Transaction(TxnError::OutsideOpenTransaction { producer_id: 3 })
        ));
        // Its commit makes everything stable once the HW passes the marker.
        let end = log.append(marker(3, MarkerKind::Commit), E).await.unwrap();
        assert_eq!(log.last_stable_offset(), third, "marker not below the HW");
        log.set_high_watermark(end.base_offset.plus(1));
        assert_eq!(log.last_stable_offset(), log.log_end());
        // A retried marker decides nothing.
        log.append(marker(3, MarkerKind::Abort), E).await.unwrap();
        log.set_high_watermark(log.log_end());
        assert_eq!(
            committed_view(&log).await,
            (log.log_end(), vec![(2, second)])
        );
        log.close().await.unwrap();
    });
}

#[test]
fn transactions_survive_a_clean_close_a_crash_and_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        let [first, second, third] = three_transactions(&log).await;
        log.set_high_watermark(log.log_end());
        let before = committed_view(&log).await;
        assert_eq!(before, (third, vec![(2, second)]));
        assert!(first < second);
        log.close().await.unwrap();

        // A clean close: the snapshot at the log end holds it all.
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(committed_view(&log).await, before, "after a clean close");
        // A crash after the snapshot at the log end was lost: the newest
        // left is a roll's, below the markers, which are read back.
        let end_snapshot = dir.path().join(format!("{:020}.snapshot", log.log_end().0));
        drop(log);
        std::fs::remove_file(end_snapshot).unwrap();
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(
            committed_view(&log).await,
            before,
            "after a crash and a replay"
        );

        // Truncating below producer 2's ABORT marker reopens its transaction.
        let abort_at = log.log_end().plus(-1);
        log.truncate_to(abort_at).await.unwrap();
        log.set_high_watermark(log.log_end());
        let (lso, aborted) = committed_view(&log).await;
        assert_eq!(lso, second, "producer 2 is open again");
        assert!(aborted.is_empty(), "its abort was cut");
        log.close().await.unwrap();
    });
}

#[test]
fn a_follower_copy_knows_the_leaders_transactions() {
    let (leader_dir, follower_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    on_glommio(async {
        let leader = open(leader_dir.path()).await;
        three_transactions(&leader).await;
        leader.set_high_watermark(leader.log_end());
        let follower = open(follower_dir.path()).await;
        copy_log(&leader, &follower).await;
        follower.set_high_watermark(follower.log_end());
        assert_eq!(
            committed_view(&follower).await,
            committed_view(&leader).await
        );
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

/// `key = value` in a transactional batch of producer `pid`.
fn transactional_value(pid: i64, key: &str, value: &str) -> BytesMut {
    let mut batch = keyed(&[(key, Some(value))], 1_000);
    stamp_producer(&mut batch, pid, 0, 0);
    set_flags(&mut batch, TRANSACTIONAL_FLAG);
    batch
}

#[test]
fn compaction_removes_aborted_records_which_never_supersede_committed_ones() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.append(transactional_value(1, "k", "committed"), E)
            .await
            .unwrap();
        log.append(marker(1, MarkerKind::Commit), E).await.unwrap();
        log.append(transactional_value(2, "k", "aborted"), E)
            .await
            .unwrap();
        log.append(marker(2, MarkerKind::Abort), E).await.unwrap();
        for tag in 0..40 {
            log.append(batch_of(20, 200, tag, 3_000), E).await.unwrap();
        }
        log.roll();
        log.flush().await.unwrap();
        log.set_high_watermark(log.log_end());
        let before = committed_view(&log).await;
        assert_eq!(
            before.1.len(),
            1,
            "producer 2's abort, in a sealed segment's index"
        );
        let stats = log.compact(CompactionPolicy::default()).await.unwrap();
        assert!(stats.records_removed > 0);
        assert_eq!(
            committed_view(&log).await,
            before,
            "the index outlives the rewrite"
        );
        let bytes = log
            .read(Offset(0), 1 << 24, log.log_end())
            .await
            .unwrap()
            .to_bytes();
        let mut values_of_k = Vec::new();
        for (header, batch) in storage::batch::split_stored(&bytes, 1 << 20).unwrap() {
            for record in storage::batch::records(&batch, header).unwrap() {
                let record = record.unwrap();
                if record.key == Some(b"k".as_slice()) && !header.is_control() {
                    values_of_k.push(String::from_utf8_lossy(record.value.unwrap()).to_string());
                }
            }
        }
        assert_eq!(
            values_of_k,
            ["committed"],
            "the aborted value is gone, the committed one kept"
        );
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(committed_view(&log).await, before, "and a reopen");
        log.close().await.unwrap();
    });
}

#[test]
fn an_open_transaction_keeps_its_producer_and_the_lso_never_falls_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.append(transactional(9, 0, 5, 1), E).await.unwrap();
        for tag in 0..20 {
            log.append(batch_of(20, 200, 10 + tag, 2_000), E)
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        log.set_high_watermark(log.log_end());
        assert_eq!(log.last_stable_offset(), Offset(0), "producer 9 is open");
        // Expiration counts from the broker's clock; an open transaction's
        // producer is kept however long it is silent, as Kafka keeps it.
        assert_eq!(log.expire_producers(TimestampMs(i64::MAX), 1), 0);
        assert!(log.producers().entries().contains_key(&9));
        // Records deleted past the open transaction's start: the LSO
        // follows the log start rather than point below it.
        let start = log.delete_records_below(Offset(100)).await.unwrap();
        assert!(start > Offset(0));
        assert_eq!(log.last_stable_offset(), start);
        log.close().await.unwrap();
    });
}

/// A marker of producer `pid` at `epoch` from a coordinator of
/// `coordinator_epoch`.
fn marker_at(pid: i64, epoch: i16, coordinator_epoch: i32, kind: MarkerKind) -> BytesMut {
    let marker = Marker {
        kind,
        coordinator_epoch,
    };
    markers::build(pid, epoch, marker, TimestampMs(5_000))
}

#[test]
fn markers_fence_older_epochs_and_older_coordinators_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.append(transactional(4, 0, 3, 1), E).await.unwrap();
        // The coordinator aborts with a bumped epoch (a fence, or
        // transaction.version 2): the producer's epoch follows the marker.
        log.append(marker_at(4, 1, 7, MarkerKind::Abort), E)
            .await
            .unwrap();
        assert_eq!(log.producers().entries()[&4].epoch, 1);
        let mut zombie = batch_of(1, 10, 2, 1);
        stamp_producer(&mut zombie, 4, 0, 3);
        set_flags(&mut zombie, TRANSACTIONAL_FLAG);
        let refused = log.append(zombie, E).await.unwrap_err();
        assert!(
            matches!(refused, StorageError::Sequence(_)),
            "the old epoch's late batch: {refused:?}"
        );
        // A crash: no snapshot at the end, so the reopened log replays
        // the marker from the segment, its coordinator epoch with it.
        log.flush().await.unwrap();
        drop(log);

        let log = open(dir.path()).await;
        let end = log.log_end();
        let older_epoch = log.append(marker_at(4, 0, 7, MarkerKind::Commit), E).await;
        assert!(matches!(
            older_epoch,
            Err(StorageError::Transaction(
                TxnError::MarkerOfOlderEpoch { .. }
            ))
        ));
        let older_coordinator = log.append(marker_at(4, 1, 6, MarkerKind::Commit), E).await;
        assert!(matches!(
            older_coordinator,
            Err(StorageError::Transaction(
                TxnError::CoordinatorFenced { .. }
            ))
        ));
        assert_eq!(log.log_end(), end, "nothing appended");
        log.append(marker_at(4, 1, 7, MarkerKind::Commit), E)
            .await
            .unwrap();
        log.close().await.unwrap();
    });
}

#[test]
fn a_replayed_marker_never_lowers_the_epoch_of_batches_after_it() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.append(transactional(6, 0, 2, 1), E).await.unwrap();
        log.append(marker_at(6, 0, 1, MarkerKind::Commit), E)
            .await
            .unwrap();
        // The producer restarts at epoch 1, in the same segment.
        let mut first = batch_of(5, 10, 2, 1);
        stamp_producer(&mut first, 6, 1, 0);
        log.append(first.clone(), E).await.unwrap();
        log.flush().await.unwrap();
        drop(log); // a crash: replayed from the segment, marker after batches

        let log = open(dir.path()).await;
        assert_eq!(log.producers().entries()[&6].epoch, 1);
        let retry = log.append(first, E).await.unwrap();
        assert!(retry.duplicate, "its retry is still recognised");
        let mut next = batch_of(1, 10, 3, 1);
        stamp_producer(&mut next, 6, 1, 5);
        assert!(!log.append(next, E).await.unwrap().duplicate);
        log.close().await.unwrap();
    });
}

#[test]
fn a_transaction_open_from_below_a_moved_log_start_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        log.append(transactional(8, 0, 5, 1), E).await.unwrap();
        for tag in 0..5 {
            log.append(batch_of(10, 50, 10 + tag, 2_000), E)
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        log.set_high_watermark(log.log_end());
        let start = log.delete_records_below(Offset(30)).await.unwrap();
        assert!(start > Offset(0), "past the transaction's first batch");
        assert_eq!(log.last_stable_offset(), start, "producer 8 is open");
        log.flush().await.unwrap();
        drop(log); // a crash: no close, no snapshot but the one kept for it

        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(
            log.last_stable_offset(),
            log.log_start(),
            "still open after the crash: replay from the start alone would have lost it"
        );
        log.close().await.unwrap();
    });
}

/// Every file of `from` copied into `to`.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn an_abort_in_a_segment_being_truncated_survives_a_crash_mid_truncation() {
    let (dir, before) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    on_glommio(async {
        // Producer 1 aborts in segment A; A is sealed (its aborts go to its
        // index file) and the log closed with the next segment empty, so
        // the snapshot at A's end, written after the seal, lacks them.
        let log = open(dir.path()).await;
        let first = log.append(transactional(1, 0, 5, 1), E).await.unwrap();
        log.append(marker(1, MarkerKind::Abort), E).await.unwrap();
        for tag in 0..5 {
            log.append(batch_of(5, 100, 10 + tag, 2_000), E)
                .await
                .unwrap();
        }
        let a_end = log.log_end();
        log.roll();
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        let expected = vec![(1, first.base_offset)];
        assert_eq!(committed_view(&log).await.1, expected);
        // A truncation into A after the marker; the crash comes after the
        // later segment's files went, before A was cut.
        copy_dir(dir.path(), before.path());
        log.truncate_to(a_end.plus(-3)).await.unwrap();
        drop(log);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        copy_dir(before.path(), dir.path());
        let next_segment = format!("{:020}", a_end.0);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with(&next_segment) && !name.ends_with(".snapshot") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(
            log.log_end(),
            a_end,
            "A is whole, the segment after it gone"
        );
        assert_eq!(
            committed_view(&log).await.1,
            expected,
            "the abort is still known"
        );
        // And once the truncation is done over, and the log reopened.
        log.truncate_to(a_end.plus(-3)).await.unwrap();
        log.close().await.unwrap();
        let log = open(dir.path()).await;
        log.set_high_watermark(log.log_end());
        assert_eq!(
            committed_view(&log).await.1,
            expected,
            "after the truncation"
        );
        log.close().await.unwrap();
    });
}
