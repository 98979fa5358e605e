//! Eight bytes at a time ("SIMD within a register"): the scans of the readers, where a library
//! search costs more to set up than the few bytes of a key, a string or a line take to scan.

pub(crate) const ONES: u64 = 0x0101_0101_0101_0101;
pub(crate) const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Eight bytes from `bytes[at..]`, or `None` near the end.
pub(crate) fn chunk(bytes: &[u8], at: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// The high bit of each byte of `x` that is zero, exact up to the first such byte.
pub(crate) fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The first `byte` at or after `at`, or the end of `bytes`.
pub(crate) fn find_byte(bytes: &[u8], mut at: usize, byte: u8) -> usize {
    while let Some(x) = chunk(bytes, at) {
        let found = zero_bytes(x ^ (ONES * u64::from(byte)));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    bytes[at.min(bytes.len())..].iter().position(|&b| b == byte).map_or(bytes.len(), |i| at + i)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn find_byte_finds_what_a_byte_by_byte_search_finds(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b':'), any::<u8>()], 0..40),
            at in 0usize..44,
            byte in prop_oneof![Just(b'\n'), Just(b':'), any::<u8>()],
        ) {
            let expected = bytes.iter().enumerate().skip(at).find(|(_, b)| **b == byte).map_or(bytes.len(), |(i, _)| i);
            prop_assert_eq!(super::find_byte(&bytes, at, byte), expected);
        }
    }
}
