//! A batch's CRC checked as the log copies it into the write buffer
//! (`Log::append`): a corrupt batch, wherever its damage lies, appends
//! nothing and changes nothing, and is refused as corrupt whatever else
//! would refuse or deduplicate it.

mod support;

use std::rc::Rc;

use bytes::BytesMut;
use futures::executor::block_on;
use storage::batch::{self, stamp_producer};
use storage::io::memory::MemFs;
use storage::write_buffer::CHECK_STEP_BYTES;
use storage::{BatchError, LeaderEpoch, Log, LogConfig, Offset, StorageError};
use support::{all_batches, batch_of, small_config};

/// The first byte of a batch its CRC covers (attributes).
const CRC_COVERED_FROM: usize = 21;

/// Batches of several checking steps, in a log whose write chunks are
/// smaller than a step.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        max_batch_bytes: 512 * 1024,
        max_pending_bytes: 4 << 20,
        write_chunk_bytes: 32 * 1024,
        ..small_config()
    }
}

fn open(fs: &MemFs, config: LogConfig) -> Rc<Log<MemFs>> {
    block_on(Log::open(fs.clone(), "/p0", config)).unwrap()
}

fn flipped(batch: &BytesMut, at: usize) -> BytesMut {
    let mut corrupt = batch.clone();
    corrupt[at] ^= 0x40;
    corrupt
}

fn is_crc_mismatch<T: std::fmt::Debug>(result: &Result<T, StorageError>) -> bool {
    matches!(
        result,
        Err(StorageError::InvalidBatch(BatchError::CrcMismatch { .. }))
    )
}

/// What a refused append must leave as it was.
#[derive(Debug, PartialEq)]
struct Visible {
    log_end: Offset,
    epochs: storage::epochs::EpochCache,
    appended_batches: u64,
    segments: usize,
    buffered: Vec<u8>,
}

async fn visible(log: &Log<MemFs>) -> Visible {
    let bytes = all_batches(log).await;
    Visible {
        log_end: log.log_end(),
        epochs: log.epochs(),
        appended_batches: log.stats().appended_batches,
        segments: log.segment_count(),
        buffered: bytes.into_iter().flat_map(|(_, b)| b.to_vec()).collect(),
    }
}

#[test]
fn a_batch_corrupt_anywhere_appends_nothing_and_the_next_takes_its_offset() {
    let fs = MemFs::new();
    let log = open(&fs, config());
    block_on(async {
        log.append(batch_of(3, 100, 1, 1_000), LeaderEpoch(1))
            .await
            .unwrap();
        // About 3.5 steps: the damage lands in the first, a middle and the
        // last piece the write buffer shows the check, and at their seams.
        let big = batch_of(7, 32_000, 2, 2_000);
        assert!(big.len() > 3 * CHECK_STEP_BYTES && big.len() < 4 * CHECK_STEP_BYTES);
        let places = [
            CRC_COVERED_FROM,
            batch::HEADER_BYTES + 3,
            CHECK_STEP_BYTES - 1,
            CHECK_STEP_BYTES,
            2 * CHECK_STEP_BYTES + 17,
            big.len() - 1,
        ];
        for at in places {
            let before = visible(&log).await;
            let refused = log.append(flipped(&big, at), LeaderEpoch(2)).await;
            assert!(is_crc_mismatch(&refused), "damage at {at}: {refused:?}");
            assert_eq!(visible(&log).await, before, "damage at {at}");
        }
        let info = log.append(big.clone(), LeaderEpoch(2)).await.unwrap();
        assert_eq!(
            info.base_offset,
            Offset(3),
            "the next batch takes the offset"
        );
        log.flush().await.unwrap();
        drop(log);
    });
    // What reached the disk is the two good batches, whole.
    let log = open(&fs, config());
    let stored = block_on(all_batches(&log));
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].0.base_offset, Offset(3));
    assert_eq!(stored[1].1.len(), batch_of(7, 32_000, 2, 2_000).len());
    assert_eq!(log.log_end(), Offset(10));
}

#[test]
fn a_corrupt_batch_that_would_roll_the_segment_rolls_nothing() {
    let fs = MemFs::new();
    let config = LogConfig {
        segment_bytes: 40 * 1024,
        max_batch_bytes: 32 * 1024,
        ..config()
    };
    let log = open(&fs, config.clone());
    block_on(async {
        log.append(batch_of(1, 30_000, 1, 1_000), LeaderEpoch(1))
            .await
            .unwrap();
        let next = batch_of(1, 30_000, 2, 2_000);
        let before = visible(&log).await;
        let refused = log
            .append(flipped(&next, next.len() / 2), LeaderEpoch(2))
            .await;
        assert!(is_crc_mismatch(&refused), "{refused:?}");
        assert_eq!(visible(&log).await, before);
        log.append(next, LeaderEpoch(2)).await.unwrap();
        log.close().await.unwrap();
    });
    let log = open(&fs, config);
    let stored = block_on(all_batches(&log));
    let bases: Vec<Offset> = stored.iter().map(|(h, _)| h.base_offset).collect();
    assert_eq!(bases, [Offset(0), Offset(1)]);
}

/// An idempotent producer's batch: `count` records of producer 7 from `seq`.
fn idempotent(seq: i32, count: usize, tag: u64) -> BytesMut {
    let mut batch = batch_of(count, 200, tag, 1_000);
    stamp_producer(&mut batch, 7, 0, seq);
    batch
}

#[test]
fn a_corrupt_idempotent_batch_is_refused_as_corrupt_before_its_sequence_is_looked_at() {
    let fs = MemFs::new();
    let log = open(&fs, config());
    block_on(async {
        let first = idempotent(0, 5, 1);
        let appended = log.append(first.clone(), LeaderEpoch(1)).await.unwrap();
        let last = first.len() - 1;
        // A retry of the appended batch, damaged on the way: not answered
        // as the duplicate it looks like.
        let retry = log.append(flipped(&first, last), LeaderEpoch(1)).await;
        assert!(is_crc_mismatch(&retry), "{retry:?}");
        // Damaged and out of order: corrupt, not out of order.
        let gap = idempotent(9, 5, 2);
        let out_of_order = log.append(flipped(&gap, last), LeaderEpoch(1)).await;
        assert!(is_crc_mismatch(&out_of_order), "{out_of_order:?}");
        // Damaged and next in sequence: refused, and the producer's
        // sequence did not move, so the intact batch goes in.
        let second = idempotent(5, 5, 3);
        let next = log.append(flipped(&second, last), LeaderEpoch(1)).await;
        assert!(is_crc_mismatch(&next), "{next:?}");
        let info = log.append(second, LeaderEpoch(1)).await.unwrap();
        assert!(!info.duplicate);
        assert_eq!(info.base_offset, Offset(5));
        // The intact retry of the first is still a duplicate of it.
        let again = log.append(first, LeaderEpoch(1)).await.unwrap();
        assert!(again.duplicate);
        assert_eq!(again.base_offset, appended.base_offset);
    });
}
