//! A producer's batch checked before the log appends it, and when its
//! CRC-32C is checked: before the append, or as the append copies it.

use bytes::BytesMut;

use crate::batch::{validate, validate_but_crc, BatchHeader, CountRule, NO_SEQUENCE};
use crate::error::BatchError;
use crate::frame_memory::FrameMemory;

/// When a batch's CRC-32C is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcCheck {
    /// Already, with the rest of the batch.
    Done,
    /// By the append, on each piece of its copy into the write buffer while
    /// the piece is in cache (`batch::StreamedCrc`); a mismatch appends
    /// nothing. For a batch appended alone: a record set of several is
    /// checked whole before any of it is appended.
    OnAppend,
}

/// A producer's batch that passed [`validate`] (`CountRule::Exact`), with
/// its parsed header: proof for [`crate::Log::append_valid`], so a caller
/// that must check every batch of a request before appending any does not
/// pay for the CRC twice.
#[derive(Debug)]
pub struct ValidBatch {
    bytes: BytesMut,
    header: BatchHeader,
    /// The allocation `bytes` is a slice of, when it keeps one alive.
    frame: Option<FrameMemory>,
    crc: CrcCheck,
}

/// A [`ValidBatch`] taken apart for the append.
pub(crate) struct BatchParts {
    pub bytes: BytesMut,
    pub header: BatchHeader,
    pub frame: Option<FrameMemory>,
    pub crc: CrcCheck,
}

impl ValidBatch {
    /// Validates `bytes` as exactly one producer batch of at most
    /// `max_batch_bytes`; an idempotent one must carry a usable epoch and
    /// sequence (as Kafka refuses them, INVALID_RECORD).
    pub fn new(bytes: BytesMut, max_batch_bytes: usize) -> Result<ValidBatch, BatchError> {
        let header = validate(&bytes, max_batch_bytes, CountRule::Exact)?;
        check_producer_fields(&header)?;
        Ok(ValidBatch::checked(bytes, header, CrcCheck::Done))
    }

    /// [`ValidBatch::new`] but for the CRC, which the append checks
    /// ([`CrcCheck::OnAppend`]): for a batch appended alone. A batch
    /// refused here gets the error [`ValidBatch::new`] gives it, so a
    /// corrupt one is refused as corrupt whatever else is wrong with it.
    pub fn crc_on_append(
        bytes: BytesMut,
        max_batch_bytes: usize,
    ) -> Result<ValidBatch, BatchError> {
        let checked = validate_but_crc(&bytes, max_batch_bytes, CountRule::Exact)
            .and_then(|header| check_producer_fields(&header).map(|()| header));
        match checked {
            Ok(header) => Ok(ValidBatch::checked(bytes, header, CrcCheck::OnAppend)),
            Err(_) => ValidBatch::new(bytes, max_batch_bytes),
        }
    }

    /// Validates a batch a coordinator writes for a producer: a
    /// transactional batch with its producer's id and epoch but no
    /// sequence ([`NO_SEQUENCE`], as Kafka's TxnOffsetCommit batches),
    /// which [`ValidBatch::new`] refuses from clients. Its producer's epoch
    /// is checked on append; no sequence is.
    pub fn from_coordinator(
        bytes: BytesMut,
        max_batch_bytes: usize,
    ) -> Result<ValidBatch, BatchError> {
        let header = validate(&bytes, max_batch_bytes, CountRule::Exact)?;
        if let Some(p) = header.producer() {
            if p.epoch < 0 || p.first_seq != NO_SEQUENCE || !header.is_transactional() {
                return Err(BatchError::InvalidProducerFields {
                    producer_id: p.producer_id,
                    epoch: p.epoch,
                    first_seq: p.first_seq,
                });
            }
        }
        Ok(ValidBatch::checked(bytes, header, CrcCheck::Done))
    }

    fn checked(bytes: BytesMut, header: BatchHeader, crc: CrcCheck) -> ValidBatch {
        ValidBatch {
            bytes,
            header,
            frame: None,
            crc,
        }
    }

    /// The batch, as a slice of `frame` (the request it arrived in) that
    /// keeps it alive: the log's cache charges that memory
    /// (`frame_memory`).
    pub fn in_frame(self, frame: FrameMemory) -> ValidBatch {
        ValidBatch {
            frame: Some(frame),
            ..self
        }
    }

    /// Checks the CRC now if the append was to: for a caller about to
    /// refuse the batch for something the CRC covers, since a corrupt
    /// batch is refused as corrupt first (as Kafka does).
    pub fn check_crc(&self) -> Result<(), BatchError> {
        match self.crc {
            CrcCheck::Done => Ok(()),
            CrcCheck::OnAppend => crate::batch::check_crc(&self.bytes),
        }
    }

    /// When its CRC is checked.
    pub fn crc(&self) -> CrcCheck {
        self.crc
    }

    /// The allocation it keeps alive, if it is a slice of one.
    pub fn frame(&self) -> Option<FrameMemory> {
        self.frame
    }

    /// Its header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Its bytes, as they will be stored (before the log stamps offsets).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether it is empty (never: a valid batch has a header).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn into_parts(self) -> BatchParts {
        BatchParts {
            bytes: self.bytes,
            header: self.header,
            frame: self.frame,
            crc: self.crc,
        }
    }
}

/// An idempotent batch must carry a usable epoch and sequence.
fn check_producer_fields(header: &BatchHeader) -> Result<(), BatchError> {
    match header.producer() {
        Some(p) if p.epoch < 0 || p.first_seq < 0 => Err(BatchError::InvalidProducerFields {
            producer_id: p.producer_id,
            epoch: p.epoch,
            first_seq: p.first_seq,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build, set_flags, stamp_producer, RecordSpec, TRANSACTIONAL_FLAG};
    use crate::types::TimestampMs;

    const MAX: usize = 1 << 20;

    fn sample() -> BytesMut {
        let record = RecordSpec {
            timestamp_delta: 0,
            key: Some(b"k1".to_vec()),
            value: Some(b"hello".to_vec()),
        };
        build(TimestampMs(1_000), &[record])
    }

    #[test]
    fn an_idempotent_batch_with_a_negative_epoch_or_sequence_is_refused() {
        let mut good = sample();
        stamp_producer(&mut good, 7, 0, 0);
        assert!(ValidBatch::new(good, MAX).is_ok());
        for (epoch, first_seq) in [(-1, 0), (0, -1), (-3, -7)] {
            let mut bad = sample();
            stamp_producer(&mut bad, 7, epoch, first_seq);
            assert_eq!(
                ValidBatch::new(bad, MAX).unwrap_err(),
                BatchError::InvalidProducerFields {
                    producer_id: 7,
                    epoch,
                    first_seq
                }
            );
        }
        // Without a producer id the fields mean nothing (-1 as clients send).
        let mut plain = sample();
        stamp_producer(&mut plain, -1, -1, -1);
        assert!(ValidBatch::new(plain, MAX).is_ok());
    }

    #[test]
    fn only_a_coordinators_transactional_batch_goes_without_a_sequence() {
        let mut written = sample();
        stamp_producer(&mut written, 7, 2, NO_SEQUENCE);
        set_flags(&mut written, TRANSACTIONAL_FLAG);
        assert!(
            ValidBatch::new(written.clone(), MAX).is_err(),
            "not from a client"
        );
        assert!(ValidBatch::from_coordinator(written, MAX).is_ok());
        let mut plain = sample();
        stamp_producer(&mut plain, 7, 2, NO_SEQUENCE);
        assert!(
            ValidBatch::from_coordinator(plain, MAX).is_err(),
            "not transactional"
        );
        let mut sequenced = sample();
        stamp_producer(&mut sequenced, 7, 2, 0);
        set_flags(&mut sequenced, TRANSACTIONAL_FLAG);
        assert!(ValidBatch::from_coordinator(sequenced, MAX).is_err());
    }

    #[test]
    fn a_batch_checked_on_append_gets_every_error_but_the_crc_now() {
        let good = sample();
        let deferred = ValidBatch::crc_on_append(good.clone(), MAX).unwrap();
        assert_eq!(deferred.crc(), CrcCheck::OnAppend);
        assert_eq!(deferred.check_crc(), Ok(()));
        assert_eq!(ValidBatch::new(good, MAX).unwrap().crc(), CrcCheck::Done);

        let mut corrupt = sample();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let deferred = ValidBatch::crc_on_append(corrupt.clone(), MAX).unwrap();
        assert!(matches!(
            deferred.check_crc(),
            Err(BatchError::CrcMismatch { .. })
        ));

        // Corrupt and refusable for a field the CRC covers: refused as
        // corrupt, as the full check refuses it.
        let mut corrupt = sample();
        stamp_producer(&mut corrupt, 7, -1, 0);
        corrupt[last] ^= 1;
        let full = ValidBatch::new(corrupt.clone(), MAX).unwrap_err();
        assert!(matches!(full, BatchError::CrcMismatch { .. }));
        assert_eq!(ValidBatch::crc_on_append(corrupt, MAX).unwrap_err(), full);
        // Refusable but intact: the same error as the full check.
        let mut bad_epoch = sample();
        stamp_producer(&mut bad_epoch, 7, -1, 0);
        assert!(matches!(
            ValidBatch::crc_on_append(bad_epoch, MAX).unwrap_err(),
            BatchError::InvalidProducerFields { .. }
        ));
    }
}
