//! Kafka's flexible encoding, as the consumer groups' records in
//! `__consumer_offsets` use it for their values: unsigned varints,
//! compact strings and arrays (length + 1, 0 for null), and a tagged-field
//! section at the end of every struct (a count, then tag, size, bytes).
//! Keys keep the classic encoding (int16-length strings).
//!
//! Reading is bounded: every length is checked against the bytes left
//! before anything is allocated.

use crate::groups::record_error::RecordError;

/// Appends flexible-encoded fields.
#[derive(Default)]
pub struct Writer {
    /// The bytes written.
    pub out: Vec<u8>,
}

impl Writer {
    pub fn i8(&mut self, v: i8) {
        self.out.push(v as u8);
    }

    pub fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn uuid(&mut self, v: &[u8; 16]) {
        self.out.extend_from_slice(v);
    }

    pub fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// A compact string (length + 1).
    pub fn string(&mut self, s: &str) {
        self.uvarint(s.len() as u64 + 1);
        self.out.extend_from_slice(s.as_bytes());
    }

    /// A compact nullable string (0 for null).
    pub fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.uvarint(0),
        }
    }

    /// Compact bytes (length + 1).
    pub fn bytes(&mut self, b: &[u8]) {
        self.uvarint(b.len() as u64 + 1);
        self.out.extend_from_slice(b);
    }

    /// A compact array's length (count + 1).
    pub fn array_len(&mut self, n: usize) {
        self.uvarint(n as u64 + 1);
    }

    /// A classic (int16-length) string, for keys.
    pub fn classic_string(&mut self, s: &str) {
        self.i16(s.len() as i16);
        self.out.extend_from_slice(s.as_bytes());
    }

    /// The tagged fields of a struct: `fields` as (tag, bytes), by tag.
    pub fn tagged(&mut self, fields: &[(u64, Vec<u8>)]) {
        self.uvarint(fields.len() as u64);
        for (tag, bytes) in fields {
            self.uvarint(*tag);
            self.uvarint(bytes.len() as u64);
            self.out.extend_from_slice(bytes);
        }
    }
}

/// Reads flexible-encoded fields from the front of a buffer.
pub struct Reader<'a> {
    pub buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if n > self.buf.len() {
            return Err(RecordError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub fn i8(&mut self) -> Result<i8, RecordError> {
        Ok(self.take(1)?[0] as i8)
    }

    pub fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }

    pub fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub fn uuid(&mut self) -> Result<[u8; 16], RecordError> {
        Ok(self.take(16)?.try_into().expect("16"))
    }

    pub fn uvarint(&mut self) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::Malformed("varint longer than 64 bits"))
    }

    /// A length read as a count of following items of at least `min_bytes`
    /// each, checked against what is left.
    fn bounded(&mut self, n: u64, min_bytes: usize) -> Result<usize, RecordError> {
        let n = usize::try_from(n).map_err(|_| RecordError::Truncated)?;
        match n.checked_mul(min_bytes.max(1)) {
            Some(need) if need <= self.buf.len() => Ok(n),
            _ => Err(RecordError::Truncated),
        }
    }

    pub fn nullable_string(&mut self) -> Result<Option<String>, RecordError> {
        let Some(len) = self.uvarint()?.checked_sub(1) else {
            return Ok(None);
        };
        let len = self.bounded(len, 1)?;
        let raw = self.take(len)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| RecordError::Malformed("string not UTF-8"))
    }

    pub fn string(&mut self) -> Result<String, RecordError> {
        self.nullable_string()?
            .ok_or(RecordError::Malformed("null where a string must be"))
    }

    /// Compact bytes (not null).
    pub fn bytes(&mut self) -> Result<&'a [u8], RecordError> {
        let Some(len) = self.uvarint()?.checked_sub(1) else {
            return Err(RecordError::Malformed("null where bytes must be"));
        };
        let len = self.bounded(len, 1)?;
        self.take(len)
    }

    /// A compact array's count, each item at least `min_bytes` long.
    pub fn array_len(&mut self, min_bytes: usize) -> Result<usize, RecordError> {
        let Some(n) = self.uvarint()?.checked_sub(1) else {
            return Err(RecordError::Malformed("null where an array must be"));
        };
        self.bounded(n, min_bytes)
    }

    pub fn classic_string(&mut self) -> Result<String, RecordError> {
        let len = self.i16()?;
        if len < 0 {
            return Err(RecordError::Malformed("negative string length"));
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec()).map_err(|_| RecordError::Malformed("string not UTF-8"))
    }

    /// A struct's tagged fields: the bytes of each known tag (`keep`),
    /// the others skipped.
    pub fn tagged(&mut self, keep: &[u64]) -> Result<Vec<(u64, &'a [u8])>, RecordError> {
        let count = self.uvarint()?;
        let count = self.bounded(count, 2)?;
        let mut kept = Vec::new();
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()?;
            let size = self.bounded(size, 1)?;
            let bytes = self.take(size)?;
            if keep.contains(&tag) {
                kept.push((tag, bytes));
            }
        }
        Ok(kept)
    }

    /// Fails unless everything was read.
    pub fn finish(&self) -> Result<(), RecordError> {
        match self.buf.is_empty() {
            true => Ok(()),
            false => Err(RecordError::Malformed("bytes left over")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_overlong_ones_are_refused() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut w = Writer::default();
            w.uvarint(v);
            let mut r = Reader { buf: &w.out };
            assert_eq!(r.uvarint(), Ok(v));
            assert!(r.buf.is_empty());
        }
        let mut w = Writer::default();
        w.uvarint(300);
        assert_eq!(w.out, [0xac, 0x02], "Kafka's own example");
        let overlong = [0xffu8; 11];
        assert!(Reader { buf: &overlong }.uvarint().is_err());
    }

    #[test]
    fn lengths_beyond_the_bytes_left_are_refused_before_allocating() {
        let mut w = Writer::default();
        w.uvarint(u32::MAX as u64); // a string of 4 GiB
        assert_eq!(
            Reader { buf: &w.out }.nullable_string(),
            Err(RecordError::Truncated)
        );
        let mut w = Writer::default();
        w.uvarint(1 << 40); // an array of 2^40 items
        assert_eq!(
            Reader { buf: &w.out }.array_len(4),
            Err(RecordError::Truncated)
        );
        let mut w = Writer::default();
        w.uvarint(1 << 40); // tagged fields
        assert_eq!(
            Reader { buf: &w.out }.tagged(&[]),
            Err(RecordError::Truncated)
        );
    }

    #[test]
    fn unknown_tags_are_skipped_and_known_ones_kept() {
        let mut w = Writer::default();
        w.tagged(&[(0, vec![1, 2]), (7, vec![3])]);
        w.i8(9);
        let mut r = Reader { buf: &w.out };
        assert_eq!(r.tagged(&[0]).unwrap(), vec![(0, &[1u8, 2][..])]);
        assert_eq!(r.i8(), Ok(9));
        r.finish().unwrap();
    }
}
