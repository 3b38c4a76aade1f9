//! Little-endian integers read from untrusted bytes: `None` past the end, never a panic.

/// The `u16` at `at`.
pub fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    let raw = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([raw[0], raw[1]]))
}

/// The `u32` at `at`.
pub fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw))
}

/// The `u64` at `at`.
pub fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let raw: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_stops_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(u16_at(&b, 0), Some(0x0201));
        assert_eq!(u32_at(&b, 4), Some(0x0807_0605));
        assert_eq!(u64_at(&b, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(u16_at(&b, 7), None);
        assert_eq!(u32_at(&b, usize::MAX), None);
    }
}
