//! A cursor over the non-flexible encoding of request versions the codec
//! does not know (Produce v0-2, OffsetCommit v1): every read bounded by
//! the body, every count backed by bytes before anything is allocated.

use super::bounds::BoundsError;

/// A cursor reading the non-flexible encoding, bounded by the body.
pub struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(body: &'a [u8]) -> Self {
        Cursor { body, at: 0 }
    }
    /// The bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.body.len() - self.at
    }
    pub fn i64(&mut self) -> Result<i64, BoundsError> {
        let b = self.take(8)?;
        Ok(i64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
    /// A nullable string: None for length -1.
    pub fn nullable_string(&mut self) -> Result<Option<&'a [u8]>, BoundsError> {
        if self.body.get(self.at..self.at + 2) == Some(&[0xff, 0xff]) {
            self.at += 2;
            return Ok(None);
        }
        self.string().map(Some)
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BoundsError> {
        if n > self.body.len() - self.at {
            return Err(BoundsError::Truncated {
                at: self.at,
                needed: n as u64,
                remaining: self.body.len() - self.at,
            });
        }
        let slice = &self.body[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }
    pub fn i16(&mut self) -> Result<i16, BoundsError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub fn i32(&mut self) -> Result<i32, BoundsError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A count, which must be backed by at least one byte per element.
    pub fn count(&mut self) -> Result<usize, BoundsError> {
        let at = self.at;
        let n = self.i32()?;
        if n < 0 {
            return Err(BoundsError::Negative(n as i64, at));
        }
        if n as usize > self.body.len() - self.at {
            return Err(BoundsError::Truncated {
                at,
                needed: n as u64,
                remaining: self.body.len() - self.at,
            });
        }
        Ok(n as usize)
    }
    pub fn string(&mut self) -> Result<&'a [u8], BoundsError> {
        let at = self.at;
        let n = self.i16()?;
        if n < 0 {
            return Err(BoundsError::Negative(n as i64, at));
        }
        self.take(n as usize)
    }
    pub fn bytes(&mut self) -> Result<(), BoundsError> {
        let n = self.i32()?;
        if n >= 0 {
            self.take(n as usize)?;
        }
        Ok(())
    }
}
