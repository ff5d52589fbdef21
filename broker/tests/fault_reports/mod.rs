//! What the fault test prints so that a failed run explains itself: the
//! timeline of faults, and each stored batch's header (offsets, leader
//! epoch, producer id, epoch, first sequence) for the values stored twice
//! or lost.

use std::collections::HashMap;
use std::time::Instant;

use bytes::Bytes;

/// What happened when, from the start of the faults: the nemesis's kills,
/// pauses and restarts, printed with the verdict so a failure explains
/// itself.
pub struct Timeline {
    /// When the faults began.
    pub started: Instant,
    /// Each event with its time.
    pub events: Vec<String>,
}

impl Timeline {
    /// A timeline starting now.
    pub fn new() -> Timeline {
        Timeline {
            started: Instant::now(),
            events: Vec::new(),
        }
    }

    /// Notes `what` at the time elapsed.
    pub fn note(&mut self, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        self.events.push(format!("{at:8.3}s {what}"));
    }
}

/// Prints each value stored more than once: where (partition, offset)
/// and the batch holding each copy (its leader epoch, and the producer id,
/// epoch and sequence that the duplicate check compares), so a duplicate
/// can be traced to its cause from the test's output alone.
pub fn report_duplicates(
    occurrences: &HashMap<Bytes, Vec<(i32, i64)>>,
    batches: &[Vec<BatchInfo>],
) {
    let holding = |partition: i32, offset: i64| describe_batch(batches, partition, offset);
    let mut duplicated: Vec<_> = occurrences.iter().filter(|(_, at)| at.len() > 1).collect();
    duplicated.sort_by_key(|(_, at)| at[0]);
    for (value, at) in duplicated.iter().take(50) {
        let copies: Vec<String> = at
            .iter()
            .map(|(p, o)| format!("partition {p} offset {o} in {}", holding(*p, *o)))
            .collect();
        println!("DUPLICATE {value:?}: {}", copies.join("; "));
    }
    if duplicated.len() > 50 {
        println!("... and {} more duplicated values", duplicated.len() - 50);
    }
}

/// The batch the drain read holding `offset` of `partition`: its offsets,
/// leader epoch, producer id, epoch and first sequence.
pub fn describe_batch(batches: &[Vec<BatchInfo>], partition: i32, offset: i64) -> String {
    batches[partition as usize]
        .iter()
        .find(|b| b.base_offset <= offset && offset <= b.last_offset)
        .map_or("no batch read".to_string(), |b| {
            format!(
                "batch {}..={} leader epoch {} producer {} epoch {} first sequence {}",
                b.base_offset,
                b.last_offset,
                b.leader_epoch,
                b.producer_id,
                b.producer_epoch,
                b.base_sequence
            )
        })
}

/// One stored batch's header, as the drain read it: what a duplicate
/// report names.
#[derive(Clone, Copy)]
pub struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl BatchInfo {
    /// The headers of the whole batches in fetched `bytes`.
    pub fn all_in(bytes: &[u8]) -> Vec<BatchInfo> {
        let field = |at: usize, n: usize| -> i64 {
            bytes[at..at + n]
                .iter()
                .fold(0i64, |v, b| (v << 8) | *b as i64)
        };
        let mut out = Vec::new();
        let mut at = 0;
        while at + 61 <= bytes.len() {
            let total = 12 + field(at + 8, 4) as usize;
            if at + total > bytes.len() {
                break;
            }
            let base_offset = field(at, 8);
            out.push(BatchInfo {
                base_offset,
                last_offset: base_offset + field(at + 23, 4) as i32 as i64,
                leader_epoch: field(at + 12, 4) as i32,
                producer_id: field(at + 43, 8),
                producer_epoch: field(at + 51, 2) as i16,
                base_sequence: field(at + 53, 4) as i32,
            });
            at += total;
        }
        out
    }
}
