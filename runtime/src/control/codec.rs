//! Field encoding shared by the control messages: little-endian integers, length-prefixed
//! byte strings and vectors. Every read is bounds-checked and every count is checked against
//! the bytes left before anything is allocated.

use super::msg::ControlError;

/// Appends little-endian fields to a message body.
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
}

/// Reads bounds-checked fields from a message body.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.0.len() < n {
            return Err(ControlError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub(super) fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32, ControlError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
    pub(super) fn u64(&mut self) -> Result<u64, ControlError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], ControlError> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], ControlError> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    pub(super) fn string(&mut self) -> Result<String, ControlError> {
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|_| ControlError::BadField("string is not UTF-8"))
    }
    pub(super) fn strings(&mut self) -> Result<Vec<String>, ControlError> {
        let count = self.u32()? as usize;
        // Each string takes at least its 4-byte length.
        if count > self.0.len() / 4 {
            return Err(ControlError::Truncated);
        }
        (0..count).map(|_| self.string()).collect()
    }
    pub(super) fn string_pairs(&mut self) -> Result<Vec<(String, String)>, ControlError> {
        let count = self.u32()? as usize;
        if count > self.0.len() / 8 {
            return Err(ControlError::Truncated);
        }
        (0..count)
            .map(|_| Ok((self.string()?, self.string()?)))
            .collect()
    }
    pub(super) fn u32s(&mut self) -> Result<Vec<u32>, ControlError> {
        let count = self.u32()? as usize;
        if count > self.0.len() / 4 {
            return Err(ControlError::Truncated);
        }
        (0..count).map(|_| self.u32()).collect()
    }
    pub(super) fn u64s(&mut self) -> Result<Vec<u64>, ControlError> {
        let count = self.u32()? as usize;
        if count > self.0.len() / 8 {
            return Err(ControlError::Truncated);
        }
        (0..count).map(|_| self.u64()).collect()
    }
    pub(super) fn f64s(&mut self) -> Result<Vec<f64>, ControlError> {
        let count = self.u32()? as usize;
        if count > self.0.len() / 8 {
            return Err(ControlError::Truncated);
        }
        (0..count).map(|_| self.u64().map(f64::from_bits)).collect()
    }
}
