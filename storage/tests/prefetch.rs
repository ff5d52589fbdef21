//! The prefetch of a sequential reader's next chunk: the next read waits
//! for it instead of reading the same bytes again, a truncation while it is
//! in flight serves none of the cut batches, and a whole log read with the
//! prefetches running in the background on O_DIRECT files reads back
//! exactly what was written.

mod support;

use std::path::Path;
use std::rc::Rc;

use futures::executor::block_on;
use storage::batch::split_stored;
use storage::io::dma::DmaFs;
use storage::io::memory::{yield_once, MemFs};
use storage::io::FileSystem;
use storage::{LeaderEpoch, Log, LogConfig, Offset};
use support::{batch_of, small_config};

/// Reads this large plan a prefetch after every read: the read-ahead
/// chunk holds one read, never the next.
const READ_BYTES: usize = 8 * 1024;

/// Offsets 0..3*batches in batches of 3 records of 1000 bytes, all flushed
/// (the cache keeps 8 KiB, so the start is on disk only).
async fn filled<FS: FileSystem>(fs: FS, dir: &Path, batches: u64) -> Rc<Log<FS>> {
    let config = LogConfig {
        read_ahead_bytes: READ_BYTES,
        ..small_config()
    };
    let log = Log::open(fs, dir, config).await.unwrap();
    for i in 0..batches {
        log.append(batch_of(3, 1000, i, 0), LeaderEpoch(0))
            .await
            .unwrap();
    }
    log.flush().await.unwrap();
    log
}

/// Yields until `fs` holds a read in flight (bounded).
async fn until_held(fs: &MemFs) {
    for _ in 0..10_000 {
        if fs.read_held() {
            return;
        }
        yield_once().await;
    }
    panic!("no read was held in flight");
}

#[test]
fn the_next_read_waits_for_the_prefetch_instead_of_reading_the_bytes_again() {
    let fs = MemFs::new();
    block_on(async {
        let log = filled(fs.clone(), Path::new("/p"), 12).await;
        let opened = fs.read_count();
        let first = log
            .read(Offset(0), READ_BYTES, log.log_end())
            .await
            .unwrap();
        let next = first.next_offset.expect("the first read took batches");
        assert_eq!(
            fs.read_count(),
            opened + 1,
            "the first read is one disk read"
        );
        let task = log
            .prefetch_task()
            .expect("a read that stopped mid-segment plans the next");
        // The chunk after it starts where its whole batches end: planned
        // when it completes, by the same task.
        assert!(
            log.prefetch_task().is_none(),
            "a planned read is handed out once"
        );

        fs.hold_next_read();
        let reader = async {
            until_held(&fs).await;
            log.read(next, READ_BYTES, log.log_end()).await.unwrap()
        };
        let releaser = async {
            until_held(&fs).await;
            for _ in 0..100 {
                yield_once().await;
            }
            assert_eq!(
                fs.read_count(),
                opened + 2,
                "the waiting read read for itself"
            );
            fs.release_read();
        };
        let ((), second, ()) = futures::join!(task, reader, releaser);

        assert_eq!(
            log.stats().prefetch_hits,
            1,
            "the second read used the prefetch"
        );
        let batches = split_stored(&second.to_bytes(), 1 << 20).unwrap();
        assert!(!batches.is_empty(), "the second read took nothing");
        assert_eq!(
            batches[0].0.base_offset, next,
            "the second read starts where the first ended"
        );
        for pair in batches.windows(2) {
            assert_eq!(pair[0].0.next_offset(), pair[1].0.base_offset);
        }
    });
}

#[test]
fn a_prefetch_in_flight_across_a_truncation_serves_no_cut_batch() {
    let fs = MemFs::new();
    block_on(async {
        let log = filled(fs.clone(), Path::new("/p"), 12).await;
        let first = log
            .read(Offset(0), READ_BYTES, log.log_end())
            .await
            .unwrap();
        let next = first.next_offset.unwrap();
        let task = log.prefetch_task().expect("a prefetch planned");
        fs.hold_next_read();
        let rewrite = async {
            until_held(&fs).await;
            // The prefetch took the old bytes; the log is cut where it starts
            // and written again in a new epoch before it completes.
            assert_eq!(log.truncate_to(next).await.unwrap(), next);
            for i in 0..12 {
                log.append(batch_of(3, 1000, 100 + i, 0), LeaderEpoch(1))
                    .await
                    .unwrap();
            }
            log.flush().await.unwrap();
            fs.release_read();
        };
        futures::join!(task, rewrite);

        let mut offset = next;
        while offset < log.log_end() {
            let out = log.read(offset, READ_BYTES, log.log_end()).await.unwrap();
            let batches = split_stored(&out.to_bytes(), 1 << 20).unwrap();
            assert!(!batches.is_empty(), "no progress at {offset:?}");
            for (header, _) in &batches {
                assert_eq!(header.base_offset, offset, "a gap or a reordering");
                assert_eq!(
                    header.leader_epoch,
                    LeaderEpoch(1),
                    "a batch the truncation cut was served at {offset:?}"
                );
                offset = header.next_offset();
            }
            if let Some(task) = log.prefetch_task() {
                task.await;
            }
        }
    });
}

#[test]
fn a_whole_log_read_with_background_prefetches_on_o_direct_files_reads_back_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p0");
    support::on_glommio(async move {
        // 300 batches of ~3 KB: about 14 segments of 64 KiB.
        let log = filled(DmaFs, &path, 300).await;
        let written = {
            let mut written = Vec::new();
            for i in 0..300 {
                written.push(batch_of(3, 1000, i, 0));
            }
            written
        };
        let mut offset = Offset(0);
        let mut batch_index = 0;
        let mut reads = 0;
        while offset < log.log_end() {
            let out = log.read(offset, READ_BYTES, log.log_end()).await.unwrap();
            reads += 1;
            if let Some(task) = log.prefetch_task() {
                glommio::spawn_local(task).detach();
            }
            for (header, batch) in split_stored(&out.to_bytes(), 1 << 20).unwrap() {
                assert_eq!(header.base_offset, offset, "a gap or a reordering");
                // The stored batch is the producer's with its offset and epoch
                // set: its records (after the 61-byte header) are the same.
                let sent = &written[batch_index];
                assert_eq!(&batch[61..], &sent[61..], "batch {batch_index} differs");
                offset = header.next_offset();
                batch_index += 1;
            }
            // Let the prefetch run while "the answer is sent".
            glommio::yield_if_needed().await;
            glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
        }
        assert_eq!(batch_index, 300);
        let stats = log.stats();
        assert!(
            stats.prefetch_hits * 2 >= reads,
            "{reads} reads, of which only {} found a prefetch",
            stats.prefetch_hits
        );
    });
}

#[test]
fn readers_at_different_positions_each_keep_their_own_window() {
    let fs = MemFs::new();
    block_on(async {
        // One segment of 300 KiB: the two readers never cross a segment's end.
        let config = LogConfig {
            read_ahead_bytes: READ_BYTES,
            segment_bytes: 1 << 20,
            ..small_config()
        };
        let log = Log::open(fs.clone(), Path::new("/p"), config)
            .await
            .unwrap();
        for i in 0..100 {
            log.append(batch_of(3, 1000, i, 0), LeaderEpoch(0))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        // Two consumers, one from the start and one from the middle, take
        // turns, as two groups replaying the partition would.
        let mut positions = [Offset(0), Offset(150)];
        let mut reads = 0;
        for _ in 0..20 {
            for position in positions.iter_mut() {
                let out = log
                    .read(*position, READ_BYTES, log.log_end())
                    .await
                    .unwrap();
                *position = out.next_offset.expect("each read takes batches");
                reads += 1;
                if let Some(task) = log.prefetch_task() {
                    task.await;
                }
            }
        }
        assert!(positions[0] < Offset(150), "the readers stayed apart");
        let hits = log.stats().prefetch_hits;
        // Every read but each reader's first found its bytes read ahead.
        assert_eq!(hits, reads - 2, "{hits} of {reads} reads found a prefetch");
    });
}

#[test]
fn a_window_whose_reader_went_away_is_dropped_after_its_idle_ages() {
    let fs = MemFs::new();
    block_on(async {
        let log = filled(fs.clone(), Path::new("/p"), 12).await;
        let first = log
            .read(Offset(0), READ_BYTES, log.log_end())
            .await
            .unwrap();
        assert_eq!(log.read_ahead_windows(), 1);
        assert_eq!(log.age_read_ahead(2), 0);
        assert_eq!(log.age_read_ahead(2), 0);
        // The reader comes back: its window is young again.
        let next = first.next_offset.unwrap();
        log.read(next, READ_BYTES, log.log_end()).await.unwrap();
        assert_eq!(log.age_read_ahead(2), 0);
        assert_eq!(log.age_read_ahead(2), 0);
        assert_eq!(log.age_read_ahead(2), 1, "idle past 2 ages: dropped");
        assert_eq!(log.read_ahead_windows(), 0);
        // Reading on still works (from the disk, planning anew).
        let again = log.read(next, READ_BYTES, log.log_end()).await.unwrap();
        assert!(again.bytes > 0);
        assert_eq!(log.read_ahead_windows(), 1);
    });
}
