//! Parsers for the cgroup limit files (pure: the caller reads the files).

/// A cgroup memory figure at or above this is the kernel's "no limit" (v1 writes i64::MAX rounded
/// down to a page, v2 writes "max").
const UNLIMITED_MEMORY_FLOOR: u64 = 1 << 62;

/// A limit file whose content is not what the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected content {content:?} in {file}")]
pub struct ValueError {
    /// The file name, e.g. `cpu.max`.
    pub file: &'static str,
    /// What it held.
    pub content: String,
}

fn bad(file: &'static str, content: &str) -> ValueError {
    ValueError { file, content: content.trim().to_string() }
}

/// cgroup v2 `cpu.max` ("max 100000" or "150000 100000") as millicores; `None` is unlimited.
pub fn cpu_max_v2(content: &str) -> Result<Option<u64>, ValueError> {
    let mut fields = content.split_whitespace();
    let (Some(quota), period) = (fields.next(), fields.next()) else {
        return Err(bad("cpu.max", content));
    };
    if quota == "max" {
        return Ok(None);
    }
    let quota: u64 = quota.parse().map_err(|_| bad("cpu.max", content))?;
    let period: u64 = match period {
        Some(p) => p.parse().map_err(|_| bad("cpu.max", content))?,
        None => 100_000,
    };
    quota_to_millis(quota, period).map(Some).ok_or_else(|| bad("cpu.max", content))
}

/// cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` as millicores; quota -1 is unlimited.
pub fn cpu_quota_v1(quota: &str, period: &str) -> Result<Option<u64>, ValueError> {
    let quota: i64 = quota.trim().parse().map_err(|_| bad("cpu.cfs_quota_us", quota))?;
    if quota < 0 {
        return Ok(None);
    }
    let period_value: u64 = period.trim().parse().map_err(|_| bad("cpu.cfs_period_us", period))?;
    quota_to_millis(quota.unsigned_abs(), period_value)
        .map(Some)
        .ok_or_else(|| bad("cpu.cfs_period_us", period))
}

/// `quota / period` cores in millicores; a zero period is malformed.
fn quota_to_millis(quota: u64, period: u64) -> Option<u64> {
    quota.checked_mul(1000)?.checked_div(period)
}

/// v2 `memory.max` ("max" or bytes) or v1 `memory.limit_in_bytes`; `None` is unlimited.
pub fn memory_limit(file: &'static str, content: &str) -> Result<Option<u64>, ValueError> {
    let trimmed = content.trim();
    if trimmed == "max" {
        return Ok(None);
    }
    let bytes: u64 = trimmed.parse().map_err(|_| bad(file, content))?;
    Ok((bytes < UNLIMITED_MEMORY_FLOOR).then_some(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn v2_cpu_max() {
        assert_eq!(cpu_max_v2("max 100000\n"), Ok(None));
        assert_eq!(cpu_max_v2("150000 100000\n"), Ok(Some(1500)));
        assert_eq!(cpu_max_v2("50000 50000"), Ok(Some(1000)));
        assert!(cpu_max_v2("").is_err());
        assert!(cpu_max_v2("lots 100000").is_err());
        assert!(cpu_max_v2("1000 0").is_err());
    }

    #[test]
    fn v1_cpu_quota() {
        assert_eq!(cpu_quota_v1("-1\n", "100000\n"), Ok(None));
        assert_eq!(cpu_quota_v1("250000\n", "100000\n"), Ok(Some(2500)));
        assert!(cpu_quota_v1("x", "100000").is_err());
        assert!(cpu_quota_v1("1000", "0").is_err());
    }

    #[test]
    fn memory_values() {
        assert_eq!(memory_limit("memory.max", "max\n"), Ok(None));
        assert_eq!(memory_limit("memory.max", "1073741824\n"), Ok(Some(1 << 30)));
        assert_eq!(memory_limit("memory.limit_in_bytes", "9223372036854771712\n"), Ok(None));
        assert!(memory_limit("memory.max", "1G").is_err());
    }
}
