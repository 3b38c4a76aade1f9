//! Kubernetes resource quantities ("1500m", "0.5", "4Gi", "1G") as plain integers.

/// A quantity string that is not a valid CPU or memory amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} quantity {value:?}: {why}")]
pub struct QuantityError {
    kind: &'static str,
    value: String,
    why: &'static str,
}

/// Parses a CPU quantity into millicores ("250m" = 250, "1.5" = 1500, "2" = 2000).
pub fn parse_cpu_millis(value: &str) -> Result<u64, QuantityError> {
    let err = |why| QuantityError { kind: "cpu", value: value.to_string(), why };
    let trimmed = value.trim();
    if let Some(millis) = trimmed.strip_suffix('m') {
        return millis.parse::<u64>().map_err(|_| err("expected whole millicores before 'm'"));
    }
    let cores =
        parse_decimal(trimmed).ok_or_else(|| err("expected a number of cores or millicores"))?;
    scale(cores, 1000).ok_or_else(|| err("out of range"))
}

/// Parses a memory quantity into bytes ("512Mi", "4Gi", "1G", "1e9", "1000").
pub fn parse_memory_bytes(value: &str) -> Result<u64, QuantityError> {
    let err = |why| QuantityError { kind: "memory", value: value.to_string(), why };
    let trimmed = value.trim();
    const SUFFIXES: [(&str, u64); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(suffix, mult)| trimmed.strip_suffix(suffix).map(|n| (n, *mult)))
        .unwrap_or((trimmed, 1));
    if let Some((mantissa, exponent)) = number.split_once(['e', 'E']) {
        let mantissa = parse_decimal(mantissa).ok_or_else(|| err("bad mantissa"))?;
        let exponent: u32 = exponent.parse().map_err(|_| err("bad exponent"))?;
        let factor = 10u64.checked_pow(exponent).ok_or_else(|| err("out of range"))?;
        return scale(mantissa, factor).ok_or_else(|| err("out of range"));
    }
    let amount = parse_decimal(number)
        .ok_or_else(|| err("expected a number with an optional suffix like Mi or G"))?;
    scale(amount, multiplier).ok_or_else(|| err("out of range"))
}

/// A non-negative decimal as (integer digits, fraction digits, fraction length).
type Decimal = (u64, u64, u32);

fn parse_decimal(s: &str) -> Option<Decimal> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let all_digits = |p: &str| p.chars().all(|c| c.is_ascii_digit());
    if !all_digits(int) || !all_digits(frac) || frac.len() > 18 {
        return None;
    }
    let int_value = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_value = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    Some((int_value, frac_value, u32::try_from(frac.len()).ok()?))
}

/// `decimal * factor`, rounded up: a limit of 0.0001 cores is still more than nothing.
fn scale((int, frac, frac_len): Decimal, factor: u64) -> Option<u64> {
    let whole = int.checked_mul(factor)?;
    let denominator = 10u128.pow(frac_len);
    let part = (u128::from(frac) * u128::from(factor)).div_ceil(denominator);
    whole.checked_add(u64::try_from(part).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_forms() {
        assert_eq!(parse_cpu_millis("250m"), Ok(250));
        assert_eq!(parse_cpu_millis("1.5"), Ok(1500));
        assert_eq!(parse_cpu_millis("3"), Ok(3000));
        assert_eq!(parse_cpu_millis("0.1"), Ok(100));
        assert!(parse_cpu_millis("1.5m").is_err());
        assert!(parse_cpu_millis("two").is_err());
        assert!(parse_cpu_millis("").is_err());
    }

    #[test]
    fn memory_forms() {
        assert_eq!(parse_memory_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_memory_bytes("4Gi"), Ok(4 << 30));
        assert_eq!(parse_memory_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(parse_memory_bytes("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_memory_bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(parse_memory_bytes("1000"), Ok(1000));
        assert!(parse_memory_bytes("4GB").is_err());
        assert!(parse_memory_bytes("-1Gi").is_err());
        assert!(parse_memory_bytes("99999999Ei").is_err());
    }
}
