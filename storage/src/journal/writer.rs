//! The journal writer's bookkeeping: which rounds are written, which are
//! durable, which entries may be acknowledged, and when a checkpoint's
//! space may be placed again.
//!
//! The I/O adapter calls in this order for each round: [`JournalWriter::place`]
//! (then it issues the write), [`JournalWriter::write_completed`], and for
//! each fdatasync [`JournalWriter::sync_started`] (before it issues it) and
//! [`JournalWriter::sync_completed`]. Entries are acknowledged strictly in
//! sequence order: a round counts as durable only when a sync that started
//! after its write completed has returned, and is acknowledged only when
//! every round before it is too. Replay relies on this (see `scan`).

use std::collections::VecDeque;

use super::header::Checkpoint;
use super::ring::{JournalRing, Placement};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteState {
    InFlight,
    /// The write completed; no sync that covers it has returned.
    Completed,
    Durable,
}

#[derive(Debug)]
struct PlacedRound {
    first_sequence: u64,
    end_sequence: u64,
    state: WriteState,
}

/// Which rounds a sync covers: those whose writes had completed when it
/// was issued.
#[derive(Debug)]
#[must_use]
pub struct SyncTicket {
    covered: Vec<u64>,
}

/// The writer's state for one incarnation of a journal.
#[derive(Debug)]
pub struct JournalWriter {
    ring: JournalRing,
    /// The last header made durable.
    header: Checkpoint,
    /// A header being written.
    header_in_flight: Option<Checkpoint>,
    /// Rounds placed and not yet acknowledged, oldest first.
    rounds: VecDeque<PlacedRound>,
    /// The first sequence number not acknowledged.
    acknowledged_end: u64,
}

impl JournalWriter {
    /// A writer continuing from a durable `header` with nothing written
    /// after its checkpoint (a new journal, or one whose entries were
    /// replayed, under a new incarnation).
    pub fn new(header: Checkpoint) -> JournalWriter {
        JournalWriter {
            ring: JournalRing::new(&header),
            header,
            header_in_flight: None,
            rounds: VecDeque::new(),
            acknowledged_end: header.sequence,
        }
    }

    /// The incarnation entries are written under.
    pub fn incarnation(&self) -> u64 {
        self.header.incarnation
    }

    /// Places a round taking `bytes` whose entries start at `entry_offsets`
    /// within it, or None if the journal has no room for it now (its logs
    /// then flush directly).
    pub fn place(&mut self, bytes: u64, entry_offsets: &[u32]) -> Option<Placement> {
        let placement = self.ring.place(bytes, entry_offsets)?;
        self.rounds.push_back(PlacedRound {
            first_sequence: placement.first_sequence,
            end_sequence: placement.first_sequence + entry_offsets.len() as u64,
            state: WriteState::InFlight,
        });
        Some(placement)
    }

    /// The write of the round placed with `first_sequence` completed.
    pub fn write_completed(&mut self, first_sequence: u64) {
        let round = self
            .rounds
            .iter_mut()
            .find(|round| round.first_sequence == first_sequence)
            .expect("a placed round");
        assert_eq!(
            round.state,
            WriteState::InFlight,
            "one completion per write"
        );
        round.state = WriteState::Completed;
    }

    /// Whether any completed write waits for a sync.
    pub fn wants_sync(&self) -> bool {
        self.rounds
            .iter()
            .any(|round| round.state == WriteState::Completed)
    }

    /// Call just before issuing an fdatasync of the journal.
    pub fn sync_started(&self) -> SyncTicket {
        SyncTicket {
            covered: self
                .rounds
                .iter()
                .filter(|round| round.state == WriteState::Completed)
                .map(|round| round.first_sequence)
                .collect(),
        }
    }

    /// The fdatasync of `ticket` returned: the rounds it covered are
    /// durable. Returns the first sequence number not acknowledged; every
    /// entry before it may be acknowledged.
    pub fn sync_completed(&mut self, ticket: SyncTicket) -> u64 {
        for round in self.rounds.iter_mut() {
            if ticket.covered.contains(&round.first_sequence) {
                round.state = WriteState::Durable;
            }
        }
        while let Some(round) = self.rounds.front() {
            if round.state != WriteState::Durable {
                break;
            }
            self.acknowledged_end = round.end_sequence;
            self.rounds.pop_front();
        }
        self.acknowledged_end
    }

    /// The first sequence number not acknowledged.
    pub fn acknowledged_end(&self) -> u64 {
        self.acknowledged_end
    }

    /// A header to write once every entry before `needed` is durable in its
    /// segment, if it moves the checkpoint and no header is being written.
    /// `needed` is clamped to the acknowledged entries: a round still in
    /// flight is never released.
    pub fn checkpoint(&mut self, needed: u64) -> Option<Checkpoint> {
        if self.header_in_flight.is_some() {
            return None;
        }
        let (sequence, position) = self.ring.checkpoint_for(needed.min(self.acknowledged_end));
        if sequence <= self.header.sequence {
            return None;
        }
        let next = self.header.advanced(sequence, position);
        self.header_in_flight = Some(next);
        Some(next)
    }

    /// After a failure: a header past every entry placed, acknowledged or
    /// not (each one's segment write had completed; the caller synced the
    /// file system). It builds on the last durable header, so it replaces
    /// a header write that failed, in that write's slot.
    pub fn checkpoint_everything_placed(&mut self) -> Checkpoint {
        let (sequence, position) = self.ring.checkpoint_for(u64::MAX);
        let next = self.header.advanced(sequence, position);
        self.header_in_flight = Some(next);
        next
    }

    /// The header from [`JournalWriter::checkpoint`] is durable: its
    /// checkpoint's space may be placed again.
    pub fn header_written(&mut self) {
        let header = self.header_in_flight.take().expect("a header in flight");
        self.ring.release_before(header.sequence);
        self.header = header;
    }

    /// Bytes of the data region held by rounds not yet released.
    pub fn live_bytes(&self) -> u64 {
        self.ring.live_bytes()
    }

    /// The last durable header.
    pub fn header(&self) -> &Checkpoint {
        &self.header
    }

    /// The header the next [`JournalWriter::checkpoint`] would build on
    /// (for a crash test: one in flight may or may not have landed).
    pub fn header_in_flight(&self) -> Option<&Checkpoint> {
        self.header_in_flight.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `n` entries of 100 bytes start in their round.
    fn offsets(n: u32) -> Vec<u32> {
        (0..n).map(|i| i * 100).collect()
    }
    use crate::io::BLOCK_BYTES;
    use crate::journal::header::HEADER_REGION_BYTES;

    const BLOCK: u64 = BLOCK_BYTES as u64;

    fn writer() -> JournalWriter {
        JournalWriter::new(Checkpoint {
            counter: 0,
            incarnation: 5,
            sequence: 0,
            position: HEADER_REGION_BYTES,
            journal_bytes: HEADER_REGION_BYTES + 4 * BLOCK,
        })
    }

    #[test]
    fn a_round_is_acknowledged_only_after_every_round_before_it() {
        let mut w = writer();
        let a = w.place(BLOCK, &offsets(2)).expect("room");
        let b = w.place(BLOCK, &offsets(3)).expect("room");
        // b's write completes first and a sync covers it alone.
        w.write_completed(b.first_sequence);
        assert!(w.wants_sync());
        let covers_b = w.sync_started();
        w.write_completed(a.first_sequence);
        assert_eq!(w.sync_completed(covers_b), 0, "a is not durable");
        let covers_a = w.sync_started();
        assert_eq!(w.sync_completed(covers_a), 5);
        assert!(!w.wants_sync());
    }

    #[test]
    fn a_write_that_completes_after_its_sync_started_is_not_covered() {
        let mut w = writer();
        let a = w.place(BLOCK, &offsets(1)).expect("room");
        let early = w.sync_started();
        w.write_completed(a.first_sequence);
        assert_eq!(w.sync_completed(early), 0);
        let late = w.sync_started();
        assert_eq!(w.sync_completed(late), 1);
    }

    #[test]
    fn space_is_released_only_once_the_checkpoint_header_is_durable() {
        let mut w = writer();
        let a = w.place(3 * BLOCK, &offsets(1)).expect("room");
        assert_eq!(w.checkpoint(1), None, "nothing acknowledged yet");
        w.write_completed(a.first_sequence);
        let ticket = w.sync_started();
        w.sync_completed(ticket);
        let header = w.checkpoint(1).expect("a checkpoint past round a");
        assert_eq!((header.sequence, header.counter), (1, 1));
        assert_eq!(w.checkpoint(1), None, "one header write at a time");
        assert_eq!(
            w.place(2 * BLOCK, &offsets(1)),
            None,
            "a's space is still held"
        );
        w.header_written();
        assert_eq!(w.header().sequence, 1);
        assert_eq!(
            w.place(2 * BLOCK, &offsets(1)).map(|p| p.position),
            Some(HEADER_REGION_BYTES)
        );
    }
}
