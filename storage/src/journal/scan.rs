//! Reading a journal back after a crash: the entries replay must write.
//!
//! From the checkpoint, replay expects the entry with the checkpoint's
//! sequence number and then each next one. The ring puts an entry right
//! after the one before (inside a round), at the next block boundary (the
//! next round) or at the data region's start (a round that wrapped), so
//! those three places are tried, in that order. An entry counts only if it
//! is whole (its CRC matches), of the header's incarnation and carries the
//! expected sequence number; anything else (a torn round, zeros, an entry
//! of an earlier lap or an earlier run) ends the scan. An acknowledged
//! entry is never past that end, as long as the writer acknowledges a
//! round only after an fdatasync has returned that started once the
//! round's write and every earlier round's write had completed: then no
//! round before it can be torn or missing.

use super::entry::{self, DecodedEntry};
use super::header::{Checkpoint, HEADER_REGION_BYTES};
use crate::io::align_up;

/// What a scan found.
#[derive(Debug, PartialEq, Eq)]
pub struct Scanned<'a> {
    /// The entries to replay, in sequence order.
    pub entries: Vec<DecodedEntry<'a>>,
    /// The sequence number after the last entry found.
    pub next_sequence: u64,
    /// The file position after the last entry found.
    pub end: u64,
}

/// The entries of `journal` (the whole file) from `checkpoint` on.
pub fn scan<'a>(journal: &'a [u8], checkpoint: &Checkpoint) -> Scanned<'a> {
    let mut scanned = Scanned {
        entries: Vec::new(),
        next_sequence: checkpoint.sequence,
        end: checkpoint.position,
    };
    // Each entry found is a distinct sequence number at a distinct place,
    // so this bounds the loop even on a journal full of forged entries.
    let most = journal.len() / entry::HEADER_BYTES;
    while scanned.entries.len() < most {
        let Some(found) = next_entry(journal, checkpoint.incarnation, &scanned) else {
            break;
        };
        scanned.end = found.0 + found.1.encoded_len() as u64;
        scanned.next_sequence += 1;
        scanned.entries.push(found.1);
    }
    scanned
}

fn next_entry<'a>(
    journal: &'a [u8],
    incarnation: u64,
    so_far: &Scanned<'_>,
) -> Option<(u64, DecodedEntry<'a>)> {
    let places = [so_far.end, align_up(so_far.end), HEADER_REGION_BYTES];
    places.into_iter().find_map(|at| {
        let found = entry::decode(journal, usize::try_from(at).ok()?)?;
        (found.incarnation == incarnation && found.sequence == so_far.next_sequence)
            .then_some((at, found))
    })
}
