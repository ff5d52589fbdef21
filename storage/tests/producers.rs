//! Idempotent producers' state in the log: retried batches are recognised
//! (answered with their original offsets, not appended again), gaps and
//! fenced epochs refused, and the state survives a clean close, a crash, a
//! damaged or missing snapshot, a truncation, and a follower's copy.

mod support;

use std::path::Path;

use bytes::BytesMut;
use storage::batch::stamp_producer;
use storage::io::dma::DmaFs;
use storage::producers::{BatchMeta, SequenceError, PRODUCER_SNAPSHOTS_KEPT};
use storage::CompactionPolicy;
use storage::{LeaderEpoch, Log, LogConfig, Offset, StorageError, TimestampMs};
use support::{batch_of, copy_log, keyed, on_glommio, small_config};

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

/// What a log knows of its producers, but when it last saw them (the
/// broker's clock: a rebuilt state counts as seen at open).
fn known(log: &Log<DmaFs>) -> Vec<(i64, i16, Vec<BatchMeta>, TimestampMs)> {
    log.producers()
        .entries()
        .iter()
        .map(|(id, e)| {
            (
                *id,
                e.epoch,
                e.batches.iter().copied().collect(),
                e.last_timestamp,
            )
        })
        .collect()
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
        let before = known(&log);
        log.close().await.unwrap();
        drop(log);
        let log = open(dir.path()).await;
        assert_eq!(known(&log), before);
        retry_is_duplicate(&log, 5, 2, b).await;
        retry_is_duplicate(&log, 0, 1, a).await;
        // A crash: the log dropped without closing (everything flushed).
        let c = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap();
        log.flush().await.unwrap();
        let before = known(&log);
        drop(log);
        let log = open(dir.path()).await;
        assert_eq!(known(&log), before);
        retry_is_duplicate(&log, 10, 3, (c.base_offset, c.last_offset)).await;
        log.close().await.unwrap();
    });
}

#[test]
fn a_crash_rebuilds_the_state_from_headers_read_in_large_chunks() {
    // One 8 MiB segment holding about 3 MiB of batches of 2-26 KiB and,
    // in runs, of ~150 KiB, so the replay at open (no snapshot: no roll,
    // no clean close) reads several 1 MiB chunks with batches running
    // across their ends, and walks the large batches a header at a time.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 8 * 1024 * 1024,
        preallocate_bytes: 1024 * 1024,
        max_batch_bytes: 512 * 1024,
        max_pending_bytes: 4 * 1024 * 1024,
        ..small_config()
    };
    on_glommio(async {
        let log = Log::open(DmaFs, dir.path(), config.clone()).await.unwrap();
        let (mut seq7, mut seq8, mut bytes) = (0i32, 0i32, 0usize);
        let mut last = (Offset(0), Offset(0));
        let mut i = 0u64;
        let count_of = |i: u64| match i % 40 < 6 {
            true => 1_400 + (i as usize * 13) % 200,
            false => 20 + (i as usize * 37) % 230,
        };
        while bytes < 3 * 1024 * 1024 {
            let count = count_of(i);
            let batch = idempotent(7, 0, seq7, count, i);
            bytes += batch.len();
            let info = log.append(batch, E).await.unwrap();
            last = (info.base_offset, info.last_offset);
            seq7 += count as i32;
            if i.is_multiple_of(7) {
                // A second producer, and a batch of no producer.
                log.append(idempotent(8, 2, seq8, 3, i), E).await.unwrap();
                seq8 += 3;
                log.append(batch_of(4, 100, i, 1_000), E).await.unwrap();
            }
            if i % 16 == 15 {
                log.flush().await.unwrap();
            }
            i += 1;
        }
        log.flush().await.unwrap();
        assert_eq!(log.segment_count(), 1);
        let before = known(&log);
        assert_eq!(before.len(), 2);
        drop(log); // a crash: no close, no snapshot
        assert!(snapshots(dir.path()).is_empty());
        let log = Log::open(DmaFs, dir.path(), config).await.unwrap();
        assert_eq!(known(&log), before);
        let count = count_of(i - 1);
        let again = log
            .append(idempotent(7, 0, seq7 - count as i32, count, i - 1), E)
            .await
            .unwrap();
        assert!(again.duplicate, "the last batch's retry is recognised");
        assert_eq!((again.base_offset, again.last_offset), last);
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
        // Enough to roll the 64 KiB segments more often than snapshots
        // are kept.
        const BATCHES: u64 = 500;
        let mut last = (Offset(0), Offset(0));
        for i in 0..BATCHES {
            let info = log
                .append(idempotent(7, 0, (i * 5) as i32, 5, i), E)
                .await
                .unwrap();
            last = (info.base_offset, info.last_offset);
            if i % 10 == 0 {
                // A second producer, so the snapshots hold more than one.
                let seq = (i / 10 * 2) as i32;
                log.append(idempotent(8, 3, seq, 2, i), E).await.unwrap();
            }
            if i % 25 == 24 {
                log.flush().await.unwrap();
            }
        }
        log.flush().await.unwrap();
        assert!(log.segment_count() > 2);
        let rolled = snapshots(dir.path());
        assert!(rolled.len() >= 2, "a snapshot per roll: {rolled:?}");
        assert!(
            log.segment_count() > PRODUCER_SNAPSHOTS_KEPT + 1
                && rolled.len() <= PRODUCER_SNAPSHOTS_KEPT,
            "rolled {} segments, kept the newest snapshots only: {rolled:?}",
            log.segment_count()
        );
        let before = known(&log);
        assert_eq!(before.len(), 2);
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
        assert_eq!(known(&log), before);
        retry_is_duplicate(&log, (BATCHES as i32 - 1) * 5, BATCHES - 1, last).await;
        let next = log
            .append(idempotent(7, 0, BATCHES as i32 * 5, 1, 9_999), E)
            .await
            .unwrap();
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
        copy_log(&leader, &follower).await;
        assert_eq!(known(&follower), known(&leader));
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

/// Expiration counts on the broker's clock: a client whose clock is far
/// behind (its batches' timestamps) keeps its state while it produces, and
/// a reopened log counts its replayed producers as seen at open.
#[test]
fn expiration_counts_on_the_brokers_clock_not_the_batches_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        const EXPIRATION: i64 = 60_000;
        let now = std::rc::Rc::new(std::cell::Cell::new(10_000_000i64));
        let clock = {
            let now = now.clone();
            std::rc::Rc::new(move || TimestampMs(now.get()))
        };
        let log = Log::open_with_clock(DmaFs, dir.path(), small_config(), clock.clone())
            .await
            .unwrap();
        // Timestamps around 1_000: nine million ms behind the broker.
        log.append(idempotent(7, 0, 0, 3, 1), E).await.unwrap();
        assert_eq!(log.expire_producers(clock(), EXPIRATION), 0);
        now.set(now.get() + EXPIRATION / 2);
        log.append(idempotent(7, 0, 3, 3, 2), E).await.unwrap();
        now.set(now.get() + EXPIRATION - 1);
        assert_eq!(
            log.expire_producers(clock(), EXPIRATION),
            0,
            "seen at the second batch"
        );
        log.close().await.unwrap();

        now.set(now.get() + 10 * EXPIRATION);
        let log = Log::open_with_clock(DmaFs, dir.path(), small_config(), clock.clone())
            .await
            .unwrap();
        assert_eq!(log.expire_producers(clock(), EXPIRATION), 0, "seen at open");
        assert!(log.producers().entries().contains_key(&7));
        now.set(now.get() + EXPIRATION + 1);
        assert_eq!(log.expire_producers(clock(), EXPIRATION), 1);
        assert!(log.producers().entries().is_empty());
    });
}

/// Compaction keeps each producer's last batch, emptied if none of its
/// records survive (as Kafka's cleaner does): the state rebuilt from the
/// log alone still knows the producer's last sequence, so its next batch
/// is not refused as a gap and a retry is still recognised.
#[test]
fn compaction_keeps_a_producers_last_batch_even_when_it_empties_it() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        let pad = "x".repeat(2_000);
        let of = |keys: &[&'static str]| -> Vec<(&'static str, Option<&str>)> {
            keys.iter().map(|k| (*k, Some(pad.as_str()))).collect()
        };
        let producer_batch = |keys: &[&'static str], seq: i32| {
            let mut b = keyed(&of(keys), 1_000);
            stamp_producer(&mut b, 7, 0, seq);
            b
        };
        // A: a key nobody overwrites; B: keys a plain producer overwrites.
        log.append(producer_batch(&["only-a"], 0), E).await.unwrap();
        let b = log
            .append(producer_batch(&["k0", "k1", "k2"], 1), E)
            .await
            .unwrap();
        for i in 0..100 {
            log.append(keyed(&of(&["k0", "k1", "k2"]), 2_000 + i), E)
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        assert!(log.segment_count() > 2);
        let stats = log.compact(CompactionPolicy::default()).await.unwrap();
        assert!(stats.records_removed >= 3, "{stats:?}");
        let kept = log
            .read(b.base_offset, 1 << 20, log.log_end())
            .await
            .unwrap();
        let (header, _) =
            storage::batch::split_stored(&kept.to_bytes(), 1 << 20).unwrap()[0].clone();
        assert_eq!(
            (
                header.base_offset,
                header.records_count,
                header.last_offset()
            ),
            (b.base_offset, 0, b.last_offset),
            "B stays, empty, its offsets and sequences in its header"
        );
        let before = known(&log);
        log.close().await.unwrap();
        drop(log);
        for snapshot in snapshots(dir.path()) {
            std::fs::remove_file(snapshot).unwrap();
        }
        let log = open(dir.path()).await;
        assert_eq!(known(&log), before, "rebuilt from the log alone");
        let retry = log
            .append(producer_batch(&["k0", "k1", "k2"], 1), E)
            .await
            .unwrap();
        assert!(retry.duplicate);
        assert_eq!(
            (retry.base_offset, retry.last_offset),
            (b.base_offset, b.last_offset)
        );
        let next = log.append(producer_batch(&["k3"], 4), E).await.unwrap();
        assert!(!next.duplicate);
        log.close().await.unwrap();
    });
}

/// A log with more bytes awaiting a flush than it lets wait (32 KiB), none
/// flushed yet, so the next append waits for one; and producer 7's next
/// sequence.
async fn over_the_pending_bound(dir: &Path) -> (std::rc::Rc<Log<DmaFs>>, i32) {
    let config = LogConfig {
        max_pending_bytes: 32 * 1024,
        ..small_config()
    };
    let log = Log::open(DmaFs, dir, config).await.unwrap();
    let (mut seq, mut pending) = (0, 0);
    while pending <= 32 * 1024 {
        let batch = idempotent(7, 0, seq, 10, seq as u64);
        pending += batch.len();
        log.append(batch, E).await.unwrap();
        seq += 10;
    }
    assert_eq!(log.flushed(), Offset(0), "nothing flushed before the wait");
    (log, seq)
}

#[test]
fn a_leadership_lost_while_a_batch_waits_for_room_appends_nothing() {
    // The broker's produce path: a batch that waits for a flush to make
    // room may find its leadership gone when it wakes (the log perhaps
    // truncated to the new leader's, the client's retry sent there). The
    // question is asked after the wait: here it says "leads" until the
    // flush the batch waited for, then no more, so a check made before
    // the wait would append and fail the test.
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let (log, seq) = over_the_pending_bound(dir.path()).await;
        let end = log.log_end();
        let valid =
            storage::batch::ValidBatch::new(idempotent(7, 0, seq, 10, 99), 1 << 20).unwrap();
        let leads_until_flushed = || log.flushed() == Offset(0);
        let refused = log
            .append_valid_while(valid, E, leads_until_flushed)
            .await
            .unwrap_err();
        assert!(matches!(refused, StorageError::Fenced), "{refused:?}");
        assert!(log.flushed() > Offset(0), "the batch waited for a flush");
        assert_eq!(log.log_end(), end, "nothing appended");
        assert_eq!(log.producers().entries()[&7].last_seq(), Some(seq - 1));
        // Leading, the same batch is appended after its wait.
        let valid =
            storage::batch::ValidBatch::new(idempotent(7, 0, seq, 10, 99), 1 << 20).unwrap();
        let info = log.append_valid_while(valid, E, || true).await.unwrap();
        assert_eq!(info.base_offset, end);
        log.close().await.unwrap();
    });
}

#[test]
fn a_truncation_whose_producer_state_cannot_be_rebuilt_fails_the_log() {
    // A state still knowing the batches a truncation cut would answer
    // their retries as duplicates of records no longer in the log: if it
    // cannot be rebuilt (here a producer snapshot that cannot be read: a
    // directory where its file should be), the log serves no more.
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let log = open(dir.path()).await;
        two_batches(&log).await;
        let c = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap();
        log.flush().await.unwrap();
        std::fs::create_dir(dir.path().join(format!("{:020}.snapshot", 0))).unwrap();
        let refused = log.truncate_to(c.base_offset).await.unwrap_err();
        assert!(
            matches!(refused, StorageError::LogFailed { .. }),
            "{refused:?}"
        );
        let after = log.append(idempotent(7, 0, 10, 5, 3), E).await.unwrap_err();
        assert!(matches!(after, StorageError::LogFailed { .. }), "{after:?}");
    });
}

#[test]
fn two_copies_of_one_batch_waiting_for_room_are_stored_once() {
    // A retry can reach the leader while the first copy still waits for
    // room (a client that gave up on a request and resent it on another
    // connection): the check and the record are one step after the wait,
    // so the first copy to get room is appended and the other answered
    // as its duplicate, with its offsets.
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async {
        let (log, seq) = over_the_pending_bound(dir.path()).await;
        let end = log.log_end();
        let copy = || {
            let bytes = idempotent(7, 0, seq, 10, 99);
            storage::batch::ValidBatch::new(bytes, 1 << 20).unwrap()
        };
        let (a, b) = futures::join!(
            log.append_valid_while(copy(), E, || true),
            log.append_valid_while(copy(), E, || true)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(
            [a.duplicate, b.duplicate].iter().filter(|d| **d).count(),
            1,
            "one appended, one recognised"
        );
        assert_eq!((a.base_offset, b.base_offset), (end, end));
        assert_eq!(log.log_end(), end.plus(10), "stored once");
        log.close().await.unwrap();
    });
}
