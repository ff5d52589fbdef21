//! A partition's remote log as its manifest lists it: the sealed segments
//! uploaded to the object store, in offset order. Sans I/O: the records
//! of the manifest object, and the rules of what is uploaded next, what
//! local retention may delete, where a remote read goes and what total
//! retention drops.
//!
//! The manifest is written after the objects it names (a crash
//! mid-upload leaves objects no entry points at, never an entry without
//! its objects), and an object's name is a function of what it holds
//! (the segment's base offset and its bytes' CRC-32C), so uploading a
//! segment again after a crash writes the same names: uploads are
//! idempotent and resumable. A new leader continues from the manifest:
//! its segments may be cut at other offsets than its predecessor's, so a
//! segment is uploaded once it holds offsets past the manifest's end, and
//! serves only those (`first_served`); nothing is uploaded twice under
//! another name for the same offsets.

use crate::{LeaderEpoch, Offset, TimestampMs};

/// One uploaded segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSegment {
    /// The segment's base offset (as the local segment file is named).
    pub base_offset: Offset,
    /// The first offset reads are served from this segment (past the
    /// previous entry's last offset).
    pub first_served: Offset,
    /// Its last offset.
    pub last_offset: Offset,
    /// Its largest record timestamp (for time retention and lookups).
    pub max_timestamp: TimestampMs,
    /// The segment file's bytes.
    pub size_bytes: u64,
    /// The CRC-32C of the segment file's bytes (checked when downloaded).
    pub crc: u32,
    /// The leader epochs its batches were written in: (epoch, first
    /// offset), as the leader epoch checkpoint covering it says.
    pub epochs: Vec<(LeaderEpoch, Offset)>,
    /// The epoch of the leader that uploaded it.
    pub uploaded_by: LeaderEpoch,
}

impl RemoteSegment {
    /// The objects' names' stem: the base offset and the bytes' CRC, so
    /// the same segment always gets the same names.
    pub fn object_stem(&self) -> String {
        format!("{:020}-{:08x}", self.base_offset.0, self.crc)
    }
}

/// A sealed local segment the leader could upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedSegment {
    /// Its base offset.
    pub base_offset: Offset,
    /// Its last offset.
    pub last_offset: Offset,
}

/// Why a segment is not added to the manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// It serves no offset past the manifest's end.
    #[error("segment {0}..={1} holds nothing past the remote log's end {2}")]
    NothingNew(i64, i64, i64),
    /// It would leave a gap after the manifest's end.
    #[error("segment from {0} would leave a gap after the remote log's end {1}")]
    Gap(i64, i64),
    /// Its offsets are not in order.
    #[error("segment {0}..={1} is not a range of offsets")]
    Malformed(i64, i64),
}

/// A partition's manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The segments, in offset order, their served ranges contiguous.
    segments: Vec<RemoteSegment>,
    /// The last offset ever uploaded (kept when retention drops every
    /// segment: what is below it is not uploaded again).
    end: Option<Offset>,
}

/// The manifest object's magic and version.
const MAGIC: &[u8; 4] = b"RLM1";

impl Manifest {
    /// The segments, in offset order.
    pub fn segments(&self) -> &[RemoteSegment] {
        &self.segments
    }

    /// The last offset ever uploaded, if any.
    pub fn last_offset(&self) -> Option<Offset> {
        self.end
    }

    /// The first offset the remote log serves, if any.
    pub fn start_offset(&self) -> Option<Offset> {
        self.segments.first().map(|s| s.first_served)
    }

    /// The sealed segments to upload next, in order: those holding
    /// offsets past the manifest's end, all below the high watermark
    /// (their records are committed).
    pub fn to_upload(
        &self,
        sealed: &[SealedSegment],
        high_watermark: Offset,
    ) -> Vec<SealedSegment> {
        let uploaded = self.last_offset();
        let past = |s: &&SealedSegment| uploaded.is_none_or(|end| s.last_offset > end);
        let committed = |s: &&SealedSegment| s.last_offset < high_watermark;
        sealed
            .iter()
            .filter(past)
            .filter(committed)
            .copied()
            .collect()
    }

    /// Adds an uploaded segment (its objects written first): it serves
    /// its offsets past the manifest's end, which it must reach without a
    /// gap (a remote log that does not start at a segment's base: the
    /// first one's offsets all served).
    pub fn add(&mut self, mut segment: RemoteSegment) -> Result<(), ManifestError> {
        let (base, last) = (segment.base_offset.0, segment.last_offset.0);
        if last < base {
            return Err(ManifestError::Malformed(base, last));
        }
        match self.last_offset() {
            None => segment.first_served = segment.base_offset,
            Some(end) if last <= end.0 => return Err(ManifestError::NothingNew(base, last, end.0)),
            Some(end) if base > end.0 + 1 => return Err(ManifestError::Gap(base, end.0)),
            Some(end) => segment.first_served = Offset(end.0 + 1),
        }
        self.end = Some(segment.last_offset);
        self.segments.push(segment);
        Ok(())
    }

    /// Whether local retention may delete a local segment ending at
    /// `last_offset`: only once the remote log holds it.
    pub fn holds_through(&self, last_offset: Offset) -> bool {
        self.last_offset().is_some_and(|end| last_offset <= end)
    }

    /// The segment serving `offset`, if the remote log holds it.
    pub fn locate(&self, offset: Offset) -> Option<&RemoteSegment> {
        let at = self.segments.partition_point(|s| s.last_offset < offset);
        self.segments
            .get(at)
            .filter(|s| s.first_served <= offset && offset <= s.last_offset)
    }

    /// DeleteRecords: the remote log serves nothing below `start` any
    /// more. Segments wholly below it go (returned: the manifest without
    /// them is written first, their objects deleted after), the one
    /// holding it serves from it, and nothing below it is uploaded later
    /// (the end moves up to just below it when every segment went and the
    /// end was lower).
    pub fn trim_start(&mut self, start: Offset) -> Vec<RemoteSegment> {
        let below = self.segments.partition_point(|s| s.last_offset < start);
        let dropped: Vec<RemoteSegment> = self.segments.drain(..below).collect();
        if let Some(first) = self.segments.first_mut() {
            first.first_served = first.first_served.max(start);
        }
        let floor = Offset(start.0 - 1);
        if floor.0 >= 0 && self.end.is_none_or(|end| end < floor) {
            self.end = Some(floor);
        }
        dropped
    }

    /// Total retention: drops the oldest segments while the remote log
    /// (with `local_bytes` held only locally above it) is over
    /// `retention_bytes`, or their newest record is older than
    /// `retention_ms` at `now` (None: no such limit). Returns them: the
    /// manifest without them is written first, their objects deleted
    /// after (so no entry points at a deleted object).
    pub fn expire(
        &mut self,
        (retention_bytes, retention_ms): (Option<u64>, Option<i64>),
        local_bytes: u64,
        now: TimestampMs,
    ) -> Vec<RemoteSegment> {
        let mut total: u64 = self.segments.iter().map(|s| s.size_bytes).sum::<u64>() + local_bytes;
        let mut dropped = 0;
        for segment in &self.segments {
            let over_size = retention_bytes.is_some_and(|limit| total > limit);
            let too_old =
                retention_ms.is_some_and(|ms| segment.max_timestamp.0 < now.0.saturating_sub(ms));
            if !(over_size || too_old) {
                break;
            }
            total -= segment.size_bytes;
            dropped += 1;
        }
        self.segments.drain(..dropped).collect()
    }

    /// The manifest object's bytes: magic, the last offset uploaded (-1:
    /// none), count, each segment, CRC-32C.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.end.map_or(-1, |e| e.0).to_be_bytes());
        out.extend_from_slice(&(self.segments.len() as u32).to_be_bytes());
        for s in &self.segments {
            for value in [
                s.base_offset.0,
                s.first_served.0,
                s.last_offset.0,
                s.max_timestamp.0,
            ] {
                out.extend_from_slice(&value.to_be_bytes());
            }
            out.extend_from_slice(&s.size_bytes.to_be_bytes());
            out.extend_from_slice(&s.crc.to_be_bytes());
            out.extend_from_slice(&s.uploaded_by.0.to_be_bytes());
            out.extend_from_slice(&(s.epochs.len() as u32).to_be_bytes());
            for (epoch, start) in &s.epochs {
                out.extend_from_slice(&epoch.0.to_be_bytes());
                out.extend_from_slice(&start.0.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a manifest object, or None if it is damaged or its
    /// segments are not in order (each serving from the previous one's
    /// last offset on, within its own offsets, the last one ending at
    /// the last offset uploaded).
    pub fn decode(bytes: &[u8]) -> Option<Manifest> {
        if bytes.len() < 20 || &bytes[..4] != MAGIC {
            return None;
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = Reader { buf: &body[4..] };
        let end = Some(Offset(r.i64()?)).filter(|e| e.0 >= 0);
        let count = r.u32()? as usize;
        // Each segment takes at least 52 bytes: a count past them is forged.
        if count > r.buf.len() / 52 {
            return None;
        }
        let mut segments: Vec<RemoteSegment> = Vec::with_capacity(count);
        for _ in 0..count {
            let s = r.segment()?;
            let in_order = segments
                .last()
                .is_none_or(|previous| s.first_served.0 == previous.last_offset.0 + 1);
            let within = s.base_offset <= s.first_served && s.first_served <= s.last_offset;
            if !(in_order && within) {
                return None;
            }
            segments.push(s);
        }
        let ends_at_end = segments.last().is_none_or(|s| Some(s.last_offset) == end);
        (r.buf.is_empty() && ends_at_end).then_some(Manifest { segments, end })
    }
}

/// Reads big-endian fields off the front of a buffer.
struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.buf.split_first_chunk::<N>()?;
        self.buf = rest;
        Some(*head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }

    fn segment(&mut self) -> Option<RemoteSegment> {
        let (base, first_served, last, max_timestamp) =
            (self.i64()?, self.i64()?, self.i64()?, self.i64()?);
        let size_bytes = self.take().map(u64::from_be_bytes)?;
        let crc = self.u32()?;
        let uploaded_by = LeaderEpoch(self.i32()?);
        let count = self.u32()? as usize;
        if count > self.buf.len() / 12 {
            return None;
        }
        let mut epochs = Vec::with_capacity(count);
        for _ in 0..count {
            epochs.push((LeaderEpoch(self.i32()?), Offset(self.i64()?)));
        }
        Some(RemoteSegment {
            base_offset: Offset(base),
            first_served: Offset(first_served),
            last_offset: Offset(last),
            max_timestamp: TimestampMs(max_timestamp),
            size_bytes,
            crc,
            epochs,
            uploaded_by,
        })
    }
}

#[cfg(test)]
mod tests;
