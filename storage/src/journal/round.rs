//! A round: the entries one journal write and one fdatasync make durable.

use bytes::Bytes;

use super::entry::{self, EntryTarget};
use super::ring::Placement;
use crate::io::{align_up, AlignedBuf};

/// Entries gathered for the next journal write.
#[derive(Debug, Default)]
pub struct Round {
    entries: Vec<(EntryTarget, Bytes)>,
    bytes: usize,
}

impl Round {
    /// An empty round.
    pub fn new() -> Round {
        Round::default()
    }

    /// Adds a flush's data; entries keep the order they were added in.
    pub fn push(&mut self, target: EntryTarget, data: Bytes) {
        self.bytes += entry::encoded_len(data.len());
        self.entries.push((target, data));
    }

    /// Entries in the round.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the round has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where each entry starts within the round's write.
    pub fn entry_offsets(&self) -> Vec<u32> {
        let lengths = self
            .entries
            .iter()
            .map(|(_, data)| entry::encoded_len(data.len()));
        let starts = lengths.scan(0, |at, len| {
            let start = *at;
            *at += len;
            Some(start as u32)
        });
        starts.collect()
    }

    /// Bytes its entries take, unpadded.
    pub fn encoded_bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes the round's write takes: its entries, padded to whole blocks.
    pub fn padded_bytes(&self) -> usize {
        align_up(self.bytes as u64) as usize
    }

    /// The round's write: its entries numbered from the placement's first
    /// sequence, then zeros to the block's end (the pool's buffers come
    /// unzeroed, and a journal should hold no stray bytes of memory).
    pub fn encode<B: AlignedBuf>(
        &self,
        incarnation: u64,
        placement: &Placement,
        alloc: impl FnOnce(usize) -> B,
    ) -> B {
        let mut buf = alloc(self.padded_bytes());
        let out = buf.bytes_mut();
        let mut at = 0;
        for (i, (target, data)) in self.entries.iter().enumerate() {
            let sequence = placement.first_sequence + i as u64;
            entry::encode(&mut out[at..], incarnation, sequence, target, data);
            at += entry::encoded_len(data.len());
        }
        out[at..].fill(0);
        buf
    }
}
