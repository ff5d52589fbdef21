//! The journal's rules against a model. Random rounds are placed by the
//! writer, their writes complete out of order, syncs issued at random
//! moments make the writes completed before them durable, checkpoints
//! release space, and power losses keep a random part of every write not
//! yet durable, sector by sector (and maybe a header write in flight).
//! After each loss the scan must find every entry the writer acknowledged
//! past the checkpoint, in order and intact, and nothing that was not
//! written; then recovery starts a new incarnation on the same bytes.

use std::collections::BTreeMap;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::entry::{EntryTarget, LogIdentity};
use super::header::{Checkpoint, HEADER_REGION_BYTES};
use super::round::Round;
use super::scan::{scan, Scanned};
use super::writer::{JournalWriter, SyncTicket};
use crate::io::{align_up, BLOCK_BYTES};
use crate::types::Offset;

/// The unit a torn write keeps or loses.
const SECTOR: usize = 512;

#[derive(Debug, Clone)]
struct Expected {
    target: EntryTarget,
    data: Bytes,
}

#[derive(Debug)]
struct SimRound {
    first_sequence: u64,
    position: usize,
    bytes: Vec<u8>,
    completed: bool,
    durable: bool,
}

#[derive(Debug, Default)]
struct Coverage {
    rounds: u64,
    wraps: u64,
    refused: u64,
    checkpoints: u64,
    syncs_overtaken: u64,
    crashes_with_acknowledged: u64,
    headers_in_flight: u64,
    unacknowledged_found: u64,
}

impl Coverage {
    fn add(&mut self, other: &Coverage) {
        self.rounds += other.rounds;
        self.wraps += other.wraps;
        self.refused += other.refused;
        self.checkpoints += other.checkpoints;
        self.syncs_overtaken += other.syncs_overtaken;
        self.crashes_with_acknowledged += other.crashes_with_acknowledged;
        self.headers_in_flight += other.headers_in_flight;
        self.unacknowledged_found += other.unacknowledged_found;
    }
}

struct Sim {
    rng: StdRng,
    /// What a power loss keeps of the file: every write made durable.
    durable: Vec<u8>,
    writer: JournalWriter,
    /// Rounds not yet acknowledged, oldest first.
    rounds: Vec<SimRound>,
    /// A sync issued and not yet returned, and the rounds it covers.
    sync_in_flight: Option<(SyncTicket, Vec<u64>)>,
    /// Every entry written at or past the durable header's checkpoint.
    written: BTreeMap<u64, Expected>,
    coverage: Coverage,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let journal_bytes = HEADER_REGION_BYTES + rng.gen_range(4..40) * BLOCK_BYTES as u64;
        let header = Checkpoint {
            counter: 0,
            incarnation: rng.gen(),
            sequence: 0,
            position: HEADER_REGION_BYTES,
            journal_bytes,
        };
        // Unwritten space of a preallocated file reads as zeros.
        let mut durable = vec![0; journal_bytes as usize];
        write_header(&mut durable, &header);
        Sim {
            rng,
            durable,
            writer: JournalWriter::new(header),
            rounds: Vec::new(),
            sync_in_flight: None,
            written: BTreeMap::new(),
            coverage: Coverage::default(),
        }
    }

    fn step(&mut self) {
        match self.rng.gen_range(0..100) {
            0..=34 => self.append_round(),
            35..=59 => self.complete_a_write(),
            60..=69 => self.start_sync(),
            70..=79 => self.finish_sync(),
            80..=89 => self.start_checkpoint(),
            90..=96 => self.finish_checkpoint(),
            _ => self.crash_and_recover(),
        }
    }

    fn append_round(&mut self) {
        let mut round = Round::new();
        let mut planned = Vec::new();
        for _ in 0..self.rng.gen_range(1..=6) {
            let target = EntryTarget {
                log: LogIdentity {
                    topic_id: [self.rng.gen_range(0..3); 16],
                    partition: self.rng.gen_range(0..8),
                    directory: self.rng.gen(),
                },
                segment: Offset(self.rng.gen_range(0..1000)),
                position: self.rng.gen_range(0..1 << 30),
            };
            let len = self.rng.gen_range(0..=2500);
            let data: Bytes = (0..len).map(|_| self.rng.gen::<u8>()).collect();
            round.push(target, data.clone());
            planned.push(Expected { target, data });
        }
        let tail_before = self.rounds.last().map(|r| r.position + r.bytes.len());
        let Some(placement) = self
            .writer
            .place(round.padded_bytes() as u64, &round.entry_offsets())
        else {
            self.coverage.refused += 1;
            return;
        };
        self.coverage.rounds += 1;
        if tail_before.is_some_and(|tail| (placement.position as usize) < tail) {
            self.coverage.wraps += 1;
        }
        // Buffers come unzeroed, as from a pool.
        let bytes = round.encode(self.writer.incarnation(), &placement, |n| vec![0xA5; n]);
        assert_eq!(bytes.len() % BLOCK_BYTES, 0);
        for (i, entry) in planned.into_iter().enumerate() {
            self.written
                .insert(placement.first_sequence + i as u64, entry);
        }
        self.rounds.push(SimRound {
            first_sequence: placement.first_sequence,
            position: placement.position as usize,
            bytes,
            completed: false,
            durable: false,
        });
    }

    fn complete_a_write(&mut self) {
        let in_flight: Vec<usize> = (0..self.rounds.len())
            .filter(|&i| !self.rounds[i].completed)
            .collect();
        if in_flight.is_empty() {
            return;
        }
        let round = &mut self.rounds[in_flight[self.rng.gen_range(0..in_flight.len())]];
        round.completed = true;
        self.writer.write_completed(round.first_sequence);
    }

    fn start_sync(&mut self) {
        if self.sync_in_flight.is_some() {
            return;
        }
        let ticket = self.writer.sync_started();
        let covered = self
            .rounds
            .iter()
            .filter(|r| r.completed && !r.durable)
            .map(|r| r.first_sequence)
            .collect();
        self.sync_in_flight = Some((ticket, covered));
    }

    /// The sync returns: the writes it covered are durable.
    fn finish_sync(&mut self) {
        let Some((ticket, covered)) = self.sync_in_flight.take() else {
            return;
        };
        for round in self.rounds.iter_mut() {
            if covered.contains(&round.first_sequence) {
                round.durable = true;
                let end = round.position + round.bytes.len();
                self.durable[round.position..end].copy_from_slice(&round.bytes);
            }
        }
        let acknowledged_end = self.writer.sync_completed(ticket);
        if self
            .rounds
            .iter()
            .any(|r| r.durable && r.first_sequence >= acknowledged_end)
        {
            self.coverage.syncs_overtaken += 1;
        }
        self.rounds.retain(|r| r.first_sequence >= acknowledged_end);
    }

    /// Some entries became durable in their segments; the writer issues a
    /// header naming a new checkpoint (it clamps to what it acknowledged).
    fn start_checkpoint(&mut self) {
        let from = self.writer.header().sequence;
        let needed = self
            .rng
            .gen_range(from..=self.writer.acknowledged_end() + 3);
        let _ = self.writer.checkpoint(needed);
    }

    /// The header's write and sync returned: its space is released.
    fn finish_checkpoint(&mut self) {
        let Some(&header) = self.writer.header_in_flight() else {
            return;
        };
        write_header(&mut self.durable, &header);
        self.writer.header_written();
        self.written
            .retain(|&sequence, _| sequence >= header.sequence);
        self.coverage.checkpoints += 1;
    }

    fn crash_and_recover(&mut self) {
        let mut image = self.durable.clone();
        for round in &self.rounds {
            if !round.durable {
                tear_into(&mut self.rng, &mut image, round.position, &round.bytes);
            }
        }
        let mut expected_header = *self.writer.header();
        if let Some(&in_flight) = self.writer.header_in_flight() {
            self.coverage.headers_in_flight += 1;
            if self.rng.gen_bool(0.5) {
                write_header(&mut image, &in_flight);
                expected_header = in_flight;
            }
        }
        let header =
            Checkpoint::read(&image[..HEADER_REGION_BYTES as usize]).expect("a valid header copy");
        assert_eq!(
            header, expected_header,
            "the last header written is current"
        );
        let found = scan(&image, &header);
        self.check(&header, &found);
        let next = Checkpoint {
            counter: header.counter + 1,
            incarnation: self.rng.gen(),
            sequence: found.next_sequence,
            position: align_up(found.end),
            journal_bytes: header.journal_bytes,
        };
        // Replay wrote every entry found into its segment and synced it.
        write_header(&mut image, &next);
        self.durable = image;
        self.writer = JournalWriter::new(next);
        self.rounds.clear();
        self.sync_in_flight = None;
        self.written.clear();
    }

    fn check(&mut self, header: &Checkpoint, found: &Scanned<'_>) {
        let acknowledged_end = self.writer.acknowledged_end();
        assert!(
            found.next_sequence >= acknowledged_end,
            "acknowledged entries up to {acknowledged_end} but the scan stopped at {}",
            found.next_sequence
        );
        if acknowledged_end > header.sequence {
            self.coverage.crashes_with_acknowledged += 1;
        }
        for (i, entry) in found.entries.iter().enumerate() {
            let sequence = header.sequence + i as u64;
            let expected = self.written.get(&sequence).expect("only entries written");
            assert_eq!(entry.sequence, sequence);
            assert_eq!(entry.incarnation, header.incarnation);
            assert_eq!(entry.target, expected.target, "entry {sequence}");
            assert_eq!(entry.data, &expected.data[..], "entry {sequence}");
            if sequence >= acknowledged_end {
                self.coverage.unacknowledged_found += 1;
            }
        }
    }
}

/// Keeps each sector of a write not yet durable, or not: all, none, or
/// each with even odds.
fn tear_into(rng: &mut StdRng, image: &mut [u8], position: usize, bytes: &[u8]) {
    let keep: f64 = [0.0, 0.5, 1.0][rng.gen_range(0..3)];
    for (i, sector) in bytes.chunks(SECTOR).enumerate() {
        if rng.gen_bool(keep) {
            let at = position + i * SECTOR;
            image[at..at + sector.len()].copy_from_slice(sector);
        }
    }
}

fn write_header(file: &mut [u8], header: &Checkpoint) {
    let at = header.copy_position() as usize;
    header.encode(&mut file[at..at + BLOCK_BYTES]);
}

#[test]
fn every_acknowledged_entry_survives_any_power_loss_in_order() {
    let seed = crate::test_seed();
    let mut total = Coverage::default();
    for run in 0..40 {
        let mut sim = Sim::new(seed.wrapping_add(run));
        for _ in 0..3000 {
            sim.step();
        }
        total.add(&sim.coverage);
    }
    println!("{total:?}");
    // Every path the model means to cross was crossed.
    assert!(total.wraps > 100, "{total:?}");
    assert!(total.refused > 100, "{total:?}");
    assert!(total.syncs_overtaken > 100, "{total:?}");
    assert!(total.crashes_with_acknowledged > 100, "{total:?}");
    assert!(total.headers_in_flight > 50, "{total:?}");
    assert!(total.unacknowledged_found > 10, "{total:?}");
}
