//! Bit flips, the papers' model of silent data corruption.
//!
//! # Bit numbering
//! Bits are numbered within each floating-point value from 0 = the least significant mantissa bit:
//!
//! | type | mantissa | exponent | sign |
//! |------|----------|----------|------|
//! | f64  | 0-51     | 52-62    | 63   |
//! | f32  | 0-22     | 23-30    | 31   |
//!
//! The gossip paper (000) plots bit positions 0..63 of a double on this same axis; its text's
//! "56th bit" (Fig. 1) and "bit number 55" are read as positions 56 and 55 here. Both readings of
//! an ordinal (0- or 1-based) land in the exponent, which is the behaviour that figure shows. For
//! single precision (000 Sec. 6, Fig. 13: "32 bit positions") the "31st bit" is position 31, the
//! sign. Within a message, element `e` of the payload occupies bytes `e*size..(e+1)*size` in
//! little-endian order, so bit `b` of element `e` is bit `b % 8` of byte `e*size + b/8`.

/// Flips bit `bit` (0 = least significant mantissa bit, 63 = sign) of a double.
/// Returns the value unchanged when `bit > 63`.
#[inline]
pub fn flip_f64(value: f64, bit: u32) -> f64 {
    if bit > 63 {
        return value;
    }
    f64::from_bits(value.to_bits() ^ (1u64 << bit))
}

/// Flips bit `bit` (0 = least significant mantissa bit, 31 = sign) of a single.
/// Returns the value unchanged when `bit > 31`.
#[inline]
pub fn flip_f32(value: f32, bit: u32) -> f32 {
    if bit > 31 {
        return value;
    }
    f32::from_bits(value.to_bits() ^ (1u32 << bit))
}

/// Flips bit `bit` of element `elem` (of `elem_bytes` bytes) in a little-endian byte buffer.
/// Returns false, changing nothing, when the position lies outside the buffer or the element.
pub fn flip_in_bytes(bytes: &mut [u8], elem_bytes: usize, elem: usize, bit: u32) -> bool {
    if elem_bytes == 0 || bit as usize >= elem_bytes * 8 {
        return false;
    }
    let byte = elem * elem_bytes + bit as usize / 8;
    match bytes.get_mut(byte) {
        Some(b) => {
            *b ^= 1 << (bit % 8);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_exponent_positions() {
        assert_eq!(flip_f64(1.5, 63), -1.5);
        assert_eq!(flip_f64(1.0, 52), 0.5);
        assert_eq!(flip_f32(1.5, 31), -1.5);
        assert_eq!(flip_f32(1.0, 23), 0.5);
        assert_eq!(flip_f64(2.0, 99), 2.0);
    }

    #[test]
    fn byte_flip_matches_value_flip() {
        let values = [1.25f64, -3.0];
        for bit in 0..64 {
            let mut bytes = bytemuck::cast_slice::<f64, u8>(&values).to_vec();
            assert!(flip_in_bytes(&mut bytes, 8, 1, bit));
            let flipped: &[f64] = bytemuck::cast_slice(&bytes);
            assert_eq!(flipped[0], 1.25);
            assert_eq!(flipped[1].to_bits(), flip_f64(-3.0, bit).to_bits());
        }
        let mut short = vec![0u8; 8];
        assert!(!flip_in_bytes(&mut short, 8, 1, 0));
        assert!(!flip_in_bytes(&mut short, 4, 0, 32));
    }
}
