//! What one body reserves of the upload budget (the accounting is `crate::byte_budget`, the
//! budgets' default sizes `renderpool_sizing::byte_budget`): request bodies reserve their bytes
//! before they are read, so the uploads the supervisor holds at once never add up past the
//! budget. One body reserves at most a share of it when admitted (the rest as its bytes
//! arrive), so a slow sender of a large body cannot hold the whole budget while it trickles in.

/// The default `--upload-admit-share`: a body declared larger than a quarter of the budget
/// holds that quarter when admitted, and the rest only as it arrives. Uploads of up to a
/// quarter (every ordinary document) keep the promise that an admitted body always fits; three
/// slow largest senders at once still leave a quarter for everyone else.
pub const ADMIT_SHARE: f64 = 0.25;

/// Bytes of a budget of `total` one body reserves at most when admitted: `share` of it
/// (0 to 1), rounded down. Float to int casts saturate, so no `total` wraps.
pub fn admit_bytes(total: u64, share: f64) -> u64 {
    (total as f64 * share.clamp(0.0, 1.0)) as u64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_body_is_admitted_with_its_share_of_the_budget() {
        let mib = 1u64 << 20;
        assert_eq!(admit_bytes(100 * mib, ADMIT_SHARE), 25 * mib);
        assert_eq!(admit_bytes(100 * mib, 1.0), 100 * mib);
        assert_eq!(admit_bytes(7, 0.5), 3, "rounded down");
        assert_eq!(admit_bytes(u64::MAX, 1.0), u64::MAX, "saturates");
        assert_eq!(admit_bytes(100, 2.0), 100, "never past the budget");
    }
}
