//! The journal file over the in-memory file system: group commit, refusal,
//! failure, checkpoints and a new incarnation after a power loss.

use std::path::Path;

use bytes::Bytes;
use futures::executor::block_on;
use futures::FutureExt;

use super::entry::tests::target;
use super::file::Journal;
use super::file::Journaled::{self, Durable};
use super::header::HEADER_REGION_BYTES;
use super::scan::scan;
use crate::io::memory::MemFs;
use crate::io::BLOCK_BYTES;

const PATH: &str = "/data/journal-0";
const BLOCK: u64 = BLOCK_BYTES as u64;

fn create(fs: &MemFs, data_blocks: u64) -> Journal<MemFs> {
    let bytes = HEADER_REGION_BYTES + data_blocks * BLOCK;
    block_on(Journal::create(fs, Path::new(PATH), bytes, 64 * 1024)).unwrap()
}

fn data(tag: u8, len: usize) -> Bytes {
    Bytes::from(vec![tag; len])
}

/// The entries a power loss leaves, as (sequence, partition, data).
fn after_power_loss(fs: &MemFs) -> Vec<(u64, u32, Bytes)> {
    fs.crash();
    let image = block_on(Journal::<MemFs>::read(fs, Path::new(PATH)))
        .unwrap()
        .expect("a header");
    let found = scan(&image.bytes, &image.header);
    let entries = found.entries.iter();
    let entries = entries.map(|e| {
        (
            e.sequence,
            e.target.log.partition,
            Bytes::copy_from_slice(e.data),
        )
    });
    entries.collect()
}

#[test]
fn entries_appended_together_share_a_round_and_survive_a_power_loss() {
    let fs = MemFs::new();
    let journal = create(&fs, 64);
    let (writes_before, _) = fs.io_counts();
    let appends = (0..10u8).map(|i| journal.append(target(i as u32, 0), data(i, 100 * i as usize)));
    let results = block_on(futures::future::join_all(appends));
    let mut sequences: Vec<u64> = results
        .iter()
        .map(|r| match r {
            Journaled::Durable(sequence) => *sequence,
            Journaled::Refused => panic!("refused: {results:?}"),
        })
        .collect();
    sequences.sort();
    assert_eq!(sequences, (0..10).collect::<Vec<_>>());
    let (writes_after, _) = fs.io_counts();
    // The first appender commits its entry alone; the nine that arrive
    // while its round is in flight share the next.
    assert_eq!(writes_after - writes_before, 2, "rounds are shared");
    assert_eq!(journal.acknowledged_end(), 10);
    let found = after_power_loss(&fs);
    assert_eq!(found.len(), 10);
    for (sequence, partition, bytes) in found {
        let expected = results
            .iter()
            .position(|r| *r == Journaled::Durable(sequence))
            .expect("an acknowledged entry");
        assert_eq!(partition, expected as u32);
        assert_eq!(bytes, data(expected as u8, 100 * expected));
    }
}

#[test]
fn a_full_journal_refuses_until_a_checkpoint_frees_space() {
    let fs = MemFs::new();
    let journal = create(&fs, 4);
    let append = |tag: u8| block_on(journal.append(target(1, 0), data(tag, 3000)));
    for i in 0..4 {
        assert_eq!(append(i), Durable(i as u64), "a block each");
    }
    assert_eq!(append(9), Journaled::Refused);
    assert!(journal.wants_checkpoint());
    block_on(journal.retire_before(0)).unwrap();
    assert_eq!(journal.checkpoint_sequence(), 0, "nothing to move");
    block_on(journal.retire_before(2)).unwrap();
    assert_eq!(journal.checkpoint_sequence(), 4, "every acknowledged entry");
    assert!(!journal.wants_checkpoint());
    for i in 4..8 {
        assert_eq!(append(i), Durable(i as u64), "wrapped to the start");
    }
    assert_eq!(append(9), Journaled::Refused);
    let sequences: Vec<u64> = after_power_loss(&fs).iter().map(|e| e.0).collect();
    assert_eq!(
        sequences,
        vec![4, 5, 6, 7],
        "from the checkpoint, across the wrap"
    );
}

#[test]
fn an_entry_larger_than_a_round_is_refused() {
    let fs = MemFs::new();
    let journal = create(&fs, 64);
    assert_eq!(
        block_on(journal.append(target(1, 0), data(1, 64 * 1024))),
        Journaled::Refused
    );
    assert_eq!(
        block_on(journal.append(target(1, 0), data(1, 1000))),
        Journaled::Durable(0)
    );
}

#[test]
fn after_a_failed_write_or_sync_the_journal_refuses_everything() {
    for (fail_syncs, why) in [(false, "writing a round"), (true, "syncing a round")] {
        let fs = MemFs::new();
        let journal = create(&fs, 16);
        let append = |tag: u8| block_on(journal.append(target(1, 0), data(tag, 10)));
        assert_eq!(append(1), Durable(0));
        match fail_syncs {
            true => fs.set_fail_syncs(true),
            false => fs.set_fail_io(true),
        }
        assert_eq!(append(2), Journaled::Refused);
        fs.set_fail_syncs(false);
        fs.set_fail_io(false);
        assert_eq!(append(3), Journaled::Refused);
        assert!(journal.failed().expect("failed").contains(why));
        assert!(block_on(journal.retire_before(1)).is_err());
    }
}

#[test]
fn a_round_gathered_behind_a_failed_one_is_refused() {
    let fs = MemFs::new();
    let journal = create(&fs, 16);
    let mut first = Box::pin(journal.append(target(1, 0), data(1, 10)));
    assert_eq!(first.as_mut().now_or_never(), None, "its write in flight");
    let mut second = Box::pin(journal.append(target(2, 0), data(2, 10)));
    assert_eq!(
        second.as_mut().now_or_never(),
        None,
        "gathered in the next round"
    );
    drop(first);
    assert_eq!(block_on(second), Journaled::Refused);
    assert_eq!(journal.acknowledged_end(), 0);
}

#[test]
fn a_commit_cancelled_mid_write_fails_the_journal() {
    let fs = MemFs::new();
    let journal = create(&fs, 16);
    // Polled once: the round's write is in flight when the future is dropped.
    assert_eq!(
        journal.append(target(1, 0), data(1, 10)).now_or_never(),
        None
    );
    assert!(journal.failed().expect("failed").contains("cancelled"));
    assert_eq!(
        block_on(journal.append(target(1, 0), data(2, 10))),
        Journaled::Refused
    );
}

#[test]
fn after_replay_a_new_incarnation_never_replays_the_old_entries() {
    let fs = MemFs::new();
    let journal = create(&fs, 16);
    for i in 0..3 {
        // Rounds of a block each: entries 0, 1 and 2 in blocks 2, 3 and 4.
        assert_eq!(
            block_on(journal.append(target(1, 0), data(i, 3000))),
            Durable(i as u64)
        );
    }
    drop(journal);
    // Entry 1 torn: replay stops there, and entry 2 (whole, of the old
    // incarnation) stays on disk right where entry 2 is looked for next.
    let mut bytes = fs.contents(Path::new(PATH)).unwrap();
    bytes[3 * BLOCK_BYTES + 200] ^= 1;
    fs.set_contents(Path::new(PATH), bytes);
    let found = after_power_loss(&fs);
    assert_eq!(found.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0]);
    let image = block_on(Journal::<MemFs>::read(&fs, Path::new(PATH)))
        .unwrap()
        .expect("a header");
    let scanned = scan(&image.bytes, &image.header);
    let journal = block_on(Journal::resume(
        &fs,
        Path::new(PATH),
        &image,
        &scanned,
        64 * 1024,
    ));
    let journal = journal.unwrap();
    // The new entry 1 takes torn entry 1's block; old entry 2 follows it.
    assert_eq!(
        block_on(journal.append(target(2, 0), data(7, 3000))),
        Durable(1)
    );
    let found = after_power_loss(&fs);
    assert_eq!(
        found,
        vec![(1, 2, data(7, 3000))],
        "old entry 2 is not replayed"
    );
}

#[test]
fn a_journal_whose_size_changed_is_not_replayed_silently() {
    let fs = MemFs::new();
    let journal = create(&fs, 16);
    block_on(journal.append(target(1, 0), data(1, 10)));
    let mut bytes = fs.contents(Path::new(PATH)).unwrap();
    bytes.truncate(bytes.len() - BLOCK_BYTES);
    fs.set_contents(Path::new(PATH), bytes);
    let read = block_on(Journal::<MemFs>::read(&fs, Path::new(PATH)));
    assert_eq!(
        read.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::InvalidData)
    );
}
