//! Where each round goes in the journal's data region, and when its space
//! can be written again.
//!
//! Rounds are written one after another, each from a block boundary: at
//! the aligned end of the round before, or, when the region's end is too
//! close, back at the region's start. Replay looks for the next entry in
//! exactly those places (see `scan`). A round's space is reused only once
//! a durable header names a checkpoint past its entries; until then the
//! ring refuses rounds that do not fit, and the caller flushes directly.

use std::collections::VecDeque;

use super::header::{Checkpoint, HEADER_REGION_BYTES};
use crate::io::align_up;

/// A round given its place and sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// File position of the round's first entry (block-aligned).
    pub position: u64,
    /// Sequence number of its first entry; the others follow.
    pub first_sequence: u64,
}

#[derive(Debug, Clone)]
struct LiveRound {
    position: u64,
    bytes: u64,
    first_sequence: u64,
    /// One past the sequence number of its last entry.
    end_sequence: u64,
    /// Where each entry starts, from the round's position.
    entry_offsets: Vec<u32>,
}

/// The live rounds of one journal incarnation.
#[derive(Debug)]
pub struct JournalRing {
    region_start: u64,
    region_end: u64,
    /// Rounds written and not yet released, oldest first.
    live: VecDeque<LiveRound>,
    /// Their bytes, summed as they come and go (asked after every
    /// journaled flush, over thousands of live rounds).
    live_bytes: u64,
    /// The aligned position after the last round placed.
    tail: u64,
    next_sequence: u64,
}

impl JournalRing {
    /// A ring continuing from `checkpoint` with nothing live: the next
    /// round goes where the checkpoint says replay starts.
    pub fn new(checkpoint: &Checkpoint) -> JournalRing {
        assert!(
            checkpoint.journal_bytes > HEADER_REGION_BYTES,
            "a journal with room for data"
        );
        assert_eq!(checkpoint.journal_bytes, align_up(checkpoint.journal_bytes));
        let tail = align_up(checkpoint.position);
        assert!(
            (HEADER_REGION_BYTES..=checkpoint.journal_bytes).contains(&tail),
            "a checkpoint inside the data region"
        );
        JournalRing {
            region_start: HEADER_REGION_BYTES,
            region_end: checkpoint.journal_bytes,
            live: VecDeque::new(),
            live_bytes: 0,
            tail,
            next_sequence: checkpoint.sequence,
        }
    }

    /// The sequence number the next entry gets.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// Places a round taking `bytes` (block-padded) whose entries start at
    /// `entry_offsets` within it, or None if the free space cannot hold it
    /// now.
    pub fn place(&mut self, bytes: u64, entry_offsets: &[u32]) -> Option<Placement> {
        assert!(bytes > 0 && bytes == align_up(bytes) && !entry_offsets.is_empty());
        assert!(entry_offsets.iter().all(|&at| u64::from(at) < bytes));
        let position = self.free_position_for(bytes)?;
        let first_sequence = self.next_sequence;
        self.next_sequence += entry_offsets.len() as u64;
        self.tail = position + bytes;
        self.live_bytes += bytes;
        self.live.push_back(LiveRound {
            position,
            bytes,
            first_sequence,
            end_sequence: self.next_sequence,
            entry_offsets: entry_offsets.to_vec(),
        });
        Some(Placement {
            position,
            first_sequence,
        })
    }

    fn free_position_for(&self, bytes: u64) -> Option<u64> {
        let fits_at_tail = |limit: u64| self.tail + bytes <= limit;
        let fits_at_start = |limit: u64| self.region_start + bytes <= limit;
        match self.live.front() {
            None if fits_at_tail(self.region_end) => Some(self.tail),
            None if fits_at_start(self.region_end) => Some(self.region_start),
            None => None,
            // Not wrapped: free after the tail and before the oldest round.
            Some(oldest) if self.tail > oldest.position => {
                if fits_at_tail(self.region_end) {
                    Some(self.tail)
                } else if fits_at_start(oldest.position) {
                    Some(self.region_start)
                } else {
                    None
                }
            }
            // Wrapped: free between the tail and the oldest round.
            Some(oldest) => fits_at_tail(oldest.position).then_some(self.tail),
        }
    }

    /// Where replay must start once every entry before `needed` is durable
    /// in its segment (`needed` at most the first sequence not yet
    /// acknowledged: releasing a round whose write may still be in flight
    /// would let that write land on a newer round): the sequence number
    /// and position of the entry `needed`, or of the oldest live entry if
    /// that is later, or of the next round if no entry is live.
    pub fn checkpoint_for(&self, needed: u64) -> (u64, u64) {
        match self.live.iter().find(|round| round.end_sequence > needed) {
            Some(round) if needed > round.first_sequence => {
                let at = round.entry_offsets[(needed - round.first_sequence) as usize];
                (needed, round.position + u64::from(at))
            }
            Some(round) => (round.first_sequence, round.position),
            None => (self.next_sequence, self.tail),
        }
    }

    /// Frees the rounds wholly before `sequence`, once a durable header
    /// names a checkpoint at `sequence`.
    pub fn release_before(&mut self, sequence: u64) {
        while self
            .live
            .front()
            .is_some_and(|round| round.end_sequence <= sequence)
        {
            if let Some(released) = self.live.pop_front() {
                self.live_bytes -= released.bytes;
            }
        }
    }

    /// Bytes of the data region held by live rounds.
    pub fn live_bytes(&self) -> u64 {
        debug_assert_eq!(
            self.live_bytes,
            self.live.iter().map(|round| round.bytes).sum::<u64>()
        );
        self.live_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `n` entries of 100 bytes start in their round.
    fn offsets(n: u32) -> Vec<u32> {
        (0..n).map(|i| i * 100).collect()
    }

    const BLOCK: u64 = 4096;

    fn ring(blocks: u64) -> JournalRing {
        JournalRing::new(&Checkpoint {
            counter: 0,
            incarnation: 1,
            sequence: 10,
            position: HEADER_REGION_BYTES,
            journal_bytes: HEADER_REGION_BYTES + blocks * BLOCK,
        })
    }

    #[test]
    fn rounds_follow_each_other_then_wrap_once_space_is_released() {
        let mut ring = ring(4);
        let start = HEADER_REGION_BYTES;
        let a = ring.place(2 * BLOCK, &offsets(3)).expect("room");
        assert_eq!(
            a,
            Placement {
                position: start,
                first_sequence: 10
            }
        );
        let b = ring.place(BLOCK, &offsets(1)).expect("room");
        assert_eq!(
            b,
            Placement {
                position: start + 2 * BLOCK,
                first_sequence: 13
            }
        );
        // One block left at the end: a two-block round neither fits there
        // nor before the oldest live round.
        assert_eq!(ring.place(2 * BLOCK, &offsets(1)), None);
        assert_eq!(ring.checkpoint_for(10), (10, start));
        assert_eq!(ring.checkpoint_for(12), (12, start + 200), "inside a round");
        assert_eq!(ring.checkpoint_for(13), (13, start + 2 * BLOCK));
        ring.release_before(13);
        assert_eq!(ring.live_bytes(), BLOCK);
        let c = ring
            .place(2 * BLOCK, &offsets(2))
            .expect("wraps to the start");
        assert_eq!(
            c,
            Placement {
                position: start,
                first_sequence: 14
            }
        );
        // Wrapped: only the gap before round b is free.
        assert_eq!(ring.place(BLOCK, &offsets(1)), None);
        ring.release_before(14);
        let d = ring.place(BLOCK, &offsets(1)).expect("room after c");
        assert_eq!(d.position, start + 2 * BLOCK);
        assert_eq!(ring.checkpoint_for(100), (17, start + 3 * BLOCK));
    }

    #[test]
    fn an_empty_ring_places_at_its_tail_or_the_start_and_refuses_what_never_fits() {
        let mut ring = ring(3);
        assert_eq!(ring.place(4 * BLOCK, &offsets(1)), None);
        ring.place(2 * BLOCK, &offsets(1)).expect("room");
        ring.release_before(11);
        let wrapped = ring.place(2 * BLOCK, &offsets(1)).expect("wraps");
        assert_eq!(wrapped.position, HEADER_REGION_BYTES);
        assert_eq!(wrapped.first_sequence, 11);
    }
}
