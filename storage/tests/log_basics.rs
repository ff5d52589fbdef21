//! Behaviour of the partition log on the in-memory file system.

mod support;

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

use futures::executor::block_on;
use storage::io::memory::MemFs;
use storage::{LeaderEpoch, Log, LogConfig, Offset, StorageError, TimestampMs};
use support::{batch_of, small_config};

const DIR: &str = "/p0";

fn open(fs: &MemFs, config: LogConfig) -> Rc<Log<MemFs>> {
    block_on(Log::open(fs.clone(), DIR, config)).unwrap()
}

/// Sixty batches of three 1,000-byte records (tags 0-59, epoch 0),
/// flushed: several of `small_config`'s segments.
async fn sixty_batches_flushed(log: &Log<MemFs>) {
    for i in 0..60 {
        log.append(batch_of(3, 1000, i, 0), LeaderEpoch(0))
            .await
            .unwrap();
    }
    log.flush().await.unwrap();
}

#[test]
fn appends_get_consecutive_offsets_and_read_back_byte_for_byte() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        let mut stored = Vec::new();
        for i in 0..5u64 {
            let batch = batch_of(3, 100, i, 1_000);
            let info = log.append(batch, LeaderEpoch(4)).await.unwrap();
            assert_eq!(info.base_offset, Offset(3 * i as i64));
            assert_eq!(info.last_offset, Offset(3 * i as i64 + 2));
            stored.push(info);
        }
        log.flush().await.unwrap();
        assert_eq!(log.log_end(), Offset(15));
        assert_eq!(log.flushed(), Offset(15));
        assert_eq!(
            log.high_watermark(),
            Offset(15),
            "one node: HW follows the flush"
        );
        // Offset 4 lies inside the second batch: the read starts with it.
        let out = log.read(Offset(4), 1 << 20, Offset(15)).await.unwrap();
        let batches = storage::batch::split_stored(&out.to_bytes(), 1 << 20).unwrap();
        assert_eq!(batches.len(), 4);
        assert_eq!(batches[0].0.base_offset, Offset(3));
        assert_eq!(batches[0].0.leader_epoch, LeaderEpoch(4));
        // Patched batches still pass full validation.
        for (_, bytes) in &batches {
            storage::batch::validate(bytes, 1 << 20, storage::batch::CountRule::Exact).unwrap();
        }
    });
}

#[test]
fn reads_respect_the_bound_max_bytes_and_range() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        for i in 0..4 {
            log.append(batch_of(2, 200, i, 0), LeaderEpoch(0))
                .await
                .unwrap();
        }
        // Nothing at or above the bound.
        let out = log.read(Offset(0), 1 << 20, Offset(4)).await.unwrap();
        assert_eq!(
            storage::batch::split_stored(&out.to_bytes(), 1 << 20)
                .unwrap()
                .len(),
            2
        );
        // A bound inside a batch excludes that batch.
        let out = log.read(Offset(0), 1 << 20, Offset(3)).await.unwrap();
        assert_eq!(
            storage::batch::split_stored(&out.to_bytes(), 1 << 20)
                .unwrap()
                .len(),
            1
        );
        // max_bytes of 1 still returns one whole batch.
        let out = log.read(Offset(0), 1, Offset(8)).await.unwrap();
        assert_eq!(out.chunks.len(), 1);
        assert!(out.bytes > 1);
        assert_eq!(
            out.next_offset,
            Some(Offset(2)),
            "the read says where the next one starts"
        );
        // A read of several batches ends at the last one it returns.
        log.flush().await.unwrap();
        let whole = log.read(Offset(1), 1 << 20, Offset(8)).await.unwrap();
        assert_eq!(whole.next_offset, Some(Offset(8)));
        assert_eq!(
            log.read(Offset(8), 100, Offset(8))
                .await
                .unwrap()
                .next_offset,
            None
        );
        // At the log end: empty; past it or below the start: out of range.
        assert_eq!(log.read(Offset(8), 100, Offset(8)).await.unwrap().bytes, 0);
        assert!(matches!(
            log.read(Offset(9), 100, Offset(8)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert!(matches!(
            log.read(Offset(-1), 100, Offset(8)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
    });
}

#[test]
fn invalid_batches_are_refused_and_nothing_is_stored() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        let mut bad = batch_of(2, 50, 1, 0);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            log.append(bad, LeaderEpoch(0)).await,
            Err(StorageError::InvalidBatch(_))
        ));
        let huge = batch_of(1, 64 * 1024, 1, 0);
        assert!(matches!(
            log.append(huge, LeaderEpoch(0)).await,
            Err(StorageError::InvalidBatch(
                storage::BatchError::TooLarge { .. }
            ))
        ));
        assert_eq!(log.log_end(), Offset(0));
        log.flush().await.unwrap();
        assert_eq!(log.size_bytes(), 0);
    });
}

#[test]
fn concurrent_appenders_share_one_write_and_one_fdatasync() {
    let fs = MemFs::new();
    let log = open(&fs, LogConfig::default());
    block_on(async {
        // Create the segment file first so its creation does not count.
        log.append(batch_of(1, 10, 0, 0), LeaderEpoch(0))
            .await
            .unwrap();
        log.flush().await.unwrap();
        let (writes_before, syncs_before) = fs.io_counts();
        let appenders = (1..=20u64).map(|i| {
            let log = log.clone();
            async move {
                let info = log
                    .append(batch_of(1, 100, i, 0), LeaderEpoch(0))
                    .await
                    .unwrap();
                log.wait_flushed(info.last_offset.plus(1)).await.unwrap();
            }
        });
        futures::future::join_all(appenders).await;
        // The first appender's flush carries its own batch; the nineteen that
        // arrived while it was in flight share the next write and fdatasync.
        let (writes, syncs) = fs.io_counts();
        assert_eq!(syncs - syncs_before, 2, "twenty appends, two fdatasyncs");
        assert_eq!(
            writes - writes_before,
            2,
            "twenty appends, two direct writes"
        );
        assert_eq!(log.flushed(), Offset(21));
        // Every flush that wrote is counted by its duration.
        let stats = log.stats();
        assert_eq!(stats.flush_buckets.iter().sum::<u64>(), stats.flushes);
        assert!(stats.flushes >= 3 && stats.flush_nanos > 0);
    });
}

#[test]
fn flushes_are_bucketed_by_their_duration() {
    use std::time::Duration;
    use storage::flush_bucket;
    assert_eq!(flush_bucket(Duration::from_micros(300)), 0);
    assert_eq!(flush_bucket(Duration::from_micros(500)), 0);
    assert_eq!(flush_bucket(Duration::from_micros(700)), 1);
    assert_eq!(flush_bucket(Duration::from_millis(60)), 6, "up to 100 ms");
    let last = storage::FLUSH_BUCKET_BOUNDS_SECONDS.len();
    assert_eq!(flush_bucket(Duration::from_secs(20)), last);
}

#[test]
fn segments_roll_by_size_and_by_age() {
    let fs = MemFs::new();
    let now = Rc::new(Cell::new(1_000_000i64));
    let clock = {
        let now = now.clone();
        Rc::new(move || TimestampMs(now.get()))
    };
    let config = LogConfig {
        segment_ms: 60_000,
        ..small_config()
    };
    let log = block_on(Log::open_with_clock(fs.clone(), DIR, config, clock)).unwrap();
    block_on(async {
        for i in 0..30 {
            log.append(batch_of(4, 1000, i, 0), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let by_size = log.segment_count();
        assert!(
            by_size >= 2,
            "120 KB in 64 KiB segments: {by_size} segments"
        );
        now.set(now.get() + 60_000);
        log.append(batch_of(1, 10, 99, 0), LeaderEpoch(0))
            .await
            .unwrap();
        assert_eq!(log.segment_count(), by_size + 1, "rolled by age");
        log.flush().await.unwrap();
    });
    let names = fs.contents(Path::new("/p0/00000000000000000000.index"));
    assert!(names.is_some(), "a sealed segment has its index written");
}

#[test]
fn a_failed_fdatasync_fails_the_log_for_good() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        log.append(batch_of(1, 10, 0, 0), LeaderEpoch(0))
            .await
            .unwrap();
        log.flush().await.unwrap();
        log.append(batch_of(1, 10, 1, 0), LeaderEpoch(0))
            .await
            .unwrap();
        fs.set_fail_io(true);
        assert!(matches!(
            log.flush().await,
            Err(StorageError::LogFailed { .. })
        ));
        fs.set_fail_io(false);
        // Even with the disk healthy again, nothing more is acknowledged.
        assert!(matches!(
            log.flush().await,
            Err(StorageError::LogFailed { .. })
        ));
        assert!(matches!(
            log.append(batch_of(1, 10, 2, 0), LeaderEpoch(0)).await,
            Err(StorageError::LogFailed { .. })
        ));
        assert_eq!(log.flushed(), Offset(1));
        assert!(
            log.failure().unwrap().contains("fdatasync")
                || log.failure().unwrap().contains("write")
        );
    });
}

#[test]
fn clean_close_and_crash_both_keep_every_flushed_batch() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    let (flushed_bytes, all_bytes) = block_on(async {
        for i in 0..40 {
            log.append(batch_of(2, 700, i, i as i64), LeaderEpoch(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let flushed = log
            .read(Offset(0), usize::MAX, Offset(80))
            .await
            .unwrap()
            .to_bytes();
        for i in 40..45 {
            log.append(batch_of(2, 700, i, i as i64), LeaderEpoch(1))
                .await
                .unwrap();
        }
        let all = log
            .read(Offset(0), usize::MAX, Offset(90))
            .await
            .unwrap()
            .to_bytes();
        (flushed, all)
    });
    drop(log);
    // Crash: the unflushed five batches may vanish; the flushed ones may not.
    fs.crash();
    let log = open(&fs, small_config());
    assert!(log.log_end() >= Offset(80));
    let got = block_on(read_all(&log));
    assert_eq!(&got[..flushed_bytes.len()], &flushed_bytes[..]);
    assert_eq!(
        &all_bytes[..got.len()],
        &got[..],
        "whatever survived is a prefix"
    );
    // Clean close then reopen keeps everything appended.
    block_on(log.append(batch_of(1, 10, 99, 99), LeaderEpoch(1))).unwrap();
    let before = block_on(read_all(&log));
    block_on(log.close()).unwrap();
    drop(log);
    let log = open(&fs, small_config());
    assert_eq!(block_on(read_all(&log)), before);
}

async fn read_all(log: &Log<MemFs>) -> Vec<u8> {
    support::all_batches(log)
        .await
        .into_iter()
        .flat_map(|(_, b)| b.to_vec())
        .collect()
}

#[test]
fn lookup_by_timestamp_finds_the_first_record_at_or_after() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        // Batch i holds records at 10_000 * i + 0..5.
        for i in 0..50 {
            log.append(batch_of(5, 300, i, 10_000 * i as i64), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let end = log.log_end();
        let found = log
            .offset_for_timestamp(TimestampMs(10_000 * 17 + 3), end)
            .await
            .unwrap();
        assert_eq!(found, Some((Offset(17 * 5 + 3), TimestampMs(170_003))));
        let found = log
            .offset_for_timestamp(TimestampMs(10_000 * 17 + 7), end)
            .await
            .unwrap();
        assert_eq!(found, Some((Offset(18 * 5), TimestampMs(180_000))));
        let found = log
            .offset_for_timestamp(TimestampMs(-5), end)
            .await
            .unwrap();
        assert_eq!(found, Some((Offset(0), TimestampMs(0))));
        assert_eq!(
            log.offset_for_timestamp(TimestampMs(10_000_000), end)
                .await
                .unwrap(),
            None
        );
    });
    // And after a reopen, from the indexes on disk.
    block_on(log.close()).unwrap();
    let log = open(&fs, small_config());
    let end = log.log_end();
    let found = block_on(log.offset_for_timestamp(TimestampMs(10_000 * 33), end)).unwrap();
    assert_eq!(found, Some((Offset(33 * 5), TimestampMs(330_000))));
}

#[test]
fn truncation_cuts_at_the_containing_batch_and_appends_continue() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        sixty_batches_flushed(&log).await;
        let segments = log.segment_count();
        assert!(segments > 2);
        // 31 is inside the batch 30..33: the log ends at 30.
        assert_eq!(log.truncate_to(Offset(31)).await.unwrap(), Offset(30));
        assert_eq!(log.log_end(), Offset(30));
        assert!(log.segment_count() < segments);
        let info = log
            .append(batch_of(3, 500, 1000, 0), LeaderEpoch(1))
            .await
            .unwrap();
        assert_eq!(info.base_offset, Offset(30));
        log.flush().await.unwrap();
        let out = log.read(Offset(30), 1 << 20, log.log_end()).await.unwrap();
        let batches = storage::batch::split_stored(&out.to_bytes(), 1 << 20).unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].0.leader_epoch, LeaderEpoch(1));
    });
    drop(log);
    fs.crash();
    let log = open(&fs, small_config());
    assert_eq!(log.log_end(), Offset(33));
}

/// A disk read still in flight when the log is truncated must not leave
/// its bytes as the read-ahead chunk: once the cut offsets are written
/// again, reads from disk would serve the old batches at their offsets.
#[test]
fn a_disk_read_in_flight_across_a_truncation_serves_no_cut_batch() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        sixty_batches_flushed(&log).await;
        // Offset 30 is on disk only (the cache keeps 8 KiB): its read is
        // held in flight while the log is cut there and written again. A
        // small read, so its chunk is the last one it reads (a longer one
        // went on into the next segment, replacing the chunk).
        fs.hold_next_read();
        let slow_read = log.read(Offset(30), 4096, log.log_end());
        let rewrite = async {
            for _ in 0..10_000 {
                if fs.read_held() {
                    break;
                }
                storage::io::memory::yield_once().await;
            }
            assert!(fs.read_held(), "the read of offset 30 never went to disk");
            assert_eq!(log.truncate_to(Offset(30)).await.unwrap(), Offset(30));
            for i in 0..30 {
                log.append(batch_of(3, 1000, 1000 + i, 0), LeaderEpoch(1))
                    .await
                    .unwrap();
            }
            log.flush().await.unwrap();
            fs.release_read();
        };
        let (slow, ()) = futures::join!(slow_read, rewrite);
        let fresh = log.read(Offset(30), 1 << 20, log.log_end()).await.unwrap();
        for (what, out) in [("the held read", slow.unwrap()), ("a later read", fresh)] {
            let batches = storage::batch::split_stored(&out.to_bytes(), 1 << 20).unwrap();
            assert!(!batches.is_empty(), "{what} read nothing");
            for (header, _) in &batches {
                assert_eq!(
                    header.leader_epoch,
                    LeaderEpoch(1),
                    "{what} served a batch the truncation cut, at offset {:?}",
                    header.base_offset
                );
            }
        }
    });
}

#[test]
fn deleting_records_moves_the_start_and_survives_reopen() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        sixty_batches_flushed(&log).await;
        let segments = log.segment_count();
        assert_eq!(
            log.delete_records_below(Offset(100)).await.unwrap(),
            Offset(100)
        );
        assert!(
            log.segment_count() < segments,
            "whole segments below the start are gone"
        );
        assert!(matches!(
            log.read(Offset(99), 100, Offset(180)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        assert!(log.read(Offset(100), 100, Offset(180)).await.unwrap().bytes > 0);
        assert!(matches!(
            log.delete_records_below(Offset(181)).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
    });
    drop(log);
    fs.crash();
    let log = open(&fs, small_config());
    assert_eq!(log.log_start(), Offset(100));
}

/// A deletion (DeleteRecords, retention) while a flush's fdatasync runs
/// outside the I/O lock: the flush's publication used to be dropped as
/// stale, leaving its offsets taken but never flushed, and their waiters
/// (acks=all on a quiet partition) waited until another append came.
#[test]
fn a_deletion_during_a_flushs_fdatasync_does_not_strand_its_waiters() {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        sixty_batches_flushed(&log).await;
        let segments = log.segment_count();
        log.append(batch_of(3, 1000, 60, 0), LeaderEpoch(0))
            .await
            .unwrap();
        let end = log.log_end();
        fs.hold_next_sync();
        let delete_meanwhile = async {
            for _ in 0..10_000 {
                if fs.sync_held() {
                    break;
                }
                storage::io::memory::yield_once().await;
            }
            assert!(fs.sync_held(), "the flush never reached its fdatasync");
            log.delete_records_below(Offset(100)).await.unwrap();
            assert!(log.segment_count() < segments, "a segment was deleted");
            fs.release_sync();
        };
        // Bounded: a stranded waiter would wait forever.
        let waiter = futures::future::select(
            Box::pin(log.wait_flushed(end)),
            Box::pin(async {
                for _ in 0..100_000 {
                    storage::io::memory::yield_once().await;
                }
            }),
        );
        let (waited, ()) = futures::join!(waiter, delete_meanwhile);
        match waited {
            futures::future::Either::Left((flushed, _)) => flushed.unwrap(),
            futures::future::Either::Right(_) => {
                panic!("the offsets the held flush synced were never published as flushed")
            }
        }
    });
}

#[test]
fn a_flush_cancelled_half_way_fails_the_log_instead_of_hanging_waiters() {
    use futures::FutureExt;
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        // A first flush writes the new epoch's checkpoint (see the next test).
        log.append(batch_of(1, 10, 9, 0), LeaderEpoch(0))
            .await
            .unwrap();
        log.flush().await.unwrap();
        let info = log
            .append(batch_of(1, 10, 0, 0), LeaderEpoch(0))
            .await
            .unwrap();
        // Polled once, the flush has taken the buffered bytes and awaits its
        // write; dropping it loses them from memory.
        let flush = log.wait_flushed(info.last_offset.plus(1));
        assert!(
            flush.now_or_never().is_none(),
            "the flush awaits the device"
        );
        assert!(log.failure().unwrap().contains("cancelled"));
        assert!(matches!(
            log.wait_flushed(info.last_offset.plus(1)).await,
            Err(StorageError::LogFailed { .. })
        ));
    });
}

#[test]
fn a_flush_cancelled_while_writing_the_epoch_checkpoint_loses_nothing() {
    use futures::FutureExt;
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        let info = log
            .append(batch_of(1, 10, 0, 0), LeaderEpoch(3))
            .await
            .unwrap();
        // A new epoch: the flush first writes the checkpoint, and nothing
        // is taken from the buffers until it is written.
        let flush = log.wait_flushed(info.last_offset.plus(1));
        assert!(flush.now_or_never().is_none());
        assert_eq!(log.failure(), None, "nothing was lost");
        log.flush().await.unwrap();
    });
    drop(log);
    fs.crash();
    let log = open(&fs, small_config());
    assert_eq!(log.log_end(), Offset(1), "the record was flushed after all");
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(3)),
        Some((LeaderEpoch(3), Offset(1)))
    );
}

#[test]
fn a_cancelled_waiter_that_was_not_flushing_is_harmless() {
    use futures::FutureExt;
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    block_on(async {
        let first = log
            .append(batch_of(1, 10, 0, 0), LeaderEpoch(0))
            .await
            .unwrap();
        let mut flusher = Box::pin(log.wait_flushed(first.last_offset.plus(1)));
        assert!((&mut flusher).now_or_never().is_none());
        let second = log
            .append(batch_of(1, 10, 1, 0), LeaderEpoch(0))
            .await
            .unwrap();
        let waiter = log.wait_flushed(second.last_offset.plus(1));
        assert!(
            waiter.now_or_never().is_none(),
            "waits for the flush in flight"
        );
        flusher.await.unwrap();
        log.wait_flushed(second.last_offset.plus(1)).await.unwrap();
        assert_eq!(log.failure(), None);
        assert_eq!(log.flushed(), Offset(2));
    });
}

#[test]
fn leader_epochs_answer_offset_for_leader_epoch_and_survive_reopen_with_or_without_their_checkpoint(
) {
    let fs = MemFs::new();
    let log = open(&fs, small_config());
    // Epoch 1 writes 0..30, epoch 3 writes 30..60 (rolling segments on
    // the way), epoch 4 writes 60..90.
    block_on(async {
        for (epoch, batches) in [(1, 10), (3, 10), (4, 10)] {
            for i in 0..batches {
                log.append(batch_of(3, 1000, i, 0), LeaderEpoch(epoch))
                    .await
                    .unwrap();
            }
            log.roll();
        }
        log.flush().await.unwrap();
    });
    let answers = |log: &Log<MemFs>| {
        (0..6)
            .map(|e| log.end_offset_for_epoch(LeaderEpoch(e)))
            .collect::<Vec<_>>()
    };
    let expected = vec![
        None,
        Some((LeaderEpoch(1), Offset(30))),
        Some((LeaderEpoch(1), Offset(30))),
        Some((LeaderEpoch(3), Offset(60))),
        Some((LeaderEpoch(4), Offset(90))),
        Some((LeaderEpoch(4), Offset(90))),
    ];
    assert_eq!(answers(&log), expected);
    let checkpoint = Path::new(DIR).join("leader-epochs");
    assert!(
        fs.contents(&checkpoint).is_some(),
        "the checkpoint was written"
    );
    // After a crash: from the checkpoint.
    drop(log);
    fs.crash();
    let log = open(&fs, small_config());
    assert_eq!(answers(&log), expected, "from the checkpoint");
    // With the checkpoint damaged: from every batch header.
    drop(log);
    let mut damaged = fs.contents(&checkpoint).unwrap();
    damaged[6] ^= 0xff;
    fs.set_contents(&checkpoint, damaged);
    let log = open(&fs, small_config());
    assert_eq!(answers(&log), expected, "from the batch headers");
    // Truncation and retention cut the epochs with the log.
    block_on(async {
        log.truncate_to(Offset(45)).await.unwrap();
        log.append(batch_of(3, 1000, 0, 0), LeaderEpoch(7))
            .await
            .unwrap();
        log.flush().await.unwrap();
        log.delete_records_below(Offset(33)).await.unwrap();
    });
    let after = vec![
        None,
        None,
        None,
        Some((LeaderEpoch(3), Offset(45))),
        Some((LeaderEpoch(3), Offset(45))),
        Some((LeaderEpoch(3), Offset(45))),
    ];
    assert_eq!(answers(&log), after);
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(7)),
        Some((LeaderEpoch(7), Offset(48)))
    );
    block_on(log.close()).unwrap();
    drop(log);
    let log = open(&fs, small_config());
    assert_eq!(answers(&log), after, "after a clean reopen");
}
