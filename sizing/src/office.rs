//! Office (Gotenberg) concurrency: LibreOffice converts one document at a time per instance.

/// Office conversions one render pod may have in flight so the Gotenberg pool is never
/// oversubscribed: `max(1, gotenberg_replicas / render_replicas)`.
pub fn office_conversions_per_pod(gotenberg_replicas: u32, render_replicas: u32) -> u32 {
    gotenberg_replicas.checked_div(render_replicas).unwrap_or(gotenberg_replicas).max(1)
}

/// Gotenberg's `--chromium-max-concurrency` from its CPU limit: whole cores, within 1..=6.
pub fn chromium_max_concurrency(cpu_millis: u64) -> u32 {
    u32::try_from(cpu_millis / 1000).unwrap_or(u32::MAX).clamp(1, 6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn office_share_divides_pool_and_never_drops_to_zero() {
        assert_eq!(office_conversions_per_pod(4, 2), 2);
        assert_eq!(office_conversions_per_pod(5, 2), 2);
        assert_eq!(office_conversions_per_pod(1, 3), 1);
        assert_eq!(office_conversions_per_pod(3, 0), 3);
    }

    #[test]
    fn chromium_concurrency_follows_cores_within_gotenberg_range() {
        assert_eq!(chromium_max_concurrency(500), 1);
        assert_eq!(chromium_max_concurrency(2500), 2);
        assert_eq!(chromium_max_concurrency(16000), 6);
    }
}
