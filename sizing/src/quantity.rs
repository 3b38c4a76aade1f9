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
        return match parse_decimal(millis) {
            Ok((whole, 0, 0)) => Ok(whole),
            Err(BadDecimal::Range) => Err(err("out of range")),
            _ => Err(err("expected whole millicores before 'm'")),
        };
    }
    let cores = parse_decimal(trimmed).map_err(|bad| match bad {
        BadDecimal::Syntax => err("expected a number of cores or millicores"),
        BadDecimal::Range => err("out of range"),
    })?;
    scale(cores, 1000).ok_or_else(|| err("out of range"))
}

/// Parses a memory quantity into bytes ("512Mi", "4Gi", "1G", "1e9", "1000").
pub fn parse_memory_bytes(value: &str) -> Result<u64, QuantityError> {
    let err = |why| QuantityError { kind: "memory", value: value.to_string(), why };
    let trimmed = value.trim();
    let binary = BINARY_SI.iter().map(|(suffix, power)| (*suffix, 1u64 << power));
    // Bytes are whole: "m" (milli) is no memory suffix.
    let decimal = DECIMAL_SI
        .iter()
        .filter_map(|(suffix, power)| Some((*suffix, 10u64.pow(u32::try_from(*power).ok()?))));
    let (number, multiplier) = binary
        .chain(decimal)
        .find_map(|(suffix, mult)| trimmed.strip_suffix(suffix).map(|n| (n, mult)))
        .unwrap_or((trimmed, 1));
    if let Some((mantissa, exponent)) = number.split_once(['e', 'E']) {
        let mantissa = parse_decimal(mantissa).map_err(|bad| match bad {
            BadDecimal::Syntax => err("bad mantissa"),
            BadDecimal::Range => err("out of range"),
        })?;
        let exponent: u32 = exponent.parse().map_err(|_| err("bad exponent"))?;
        let factor = 10u64.checked_pow(exponent).ok_or_else(|| err("out of range"))?;
        return scale(mantissa, factor).ok_or_else(|| err("out of range"));
    }
    let amount = parse_decimal(number).map_err(|bad| match bad {
        BadDecimal::Syntax => err("expected a number with an optional suffix like Mi or G"),
        BadDecimal::Range => err("out of range"),
    })?;
    scale(amount, multiplier).ok_or_else(|| err("out of range"))
}

/// Parses a decimal SI quantity into a number ("833m" = 0.833, "1", "2.5", "2k" = 2000), as the
/// custom metrics API reports a metric's value (prometheus-adapter writes milli-quantities). A
/// suffix outside [`DECIMAL_SI`] (binary ones, "u", "n") is refused, not guessed.
pub fn parse_decimal_si(value: &str) -> Result<f64, QuantityError> {
    let err = |why| QuantityError { kind: "decimal", value: value.to_string(), why };
    let trimmed = value.trim();
    let (number, power) = DECIMAL_SI
        .iter()
        .find_map(|(suffix, power)| trimmed.strip_suffix(suffix).map(|n| (n, *power)))
        .unwrap_or((trimmed, 0));
    let (int, frac, frac_len) = parse_decimal(number).map_err(|bad| match bad {
        BadDecimal::Syntax => {
            err("expected a number with an optional suffix m, k, M, G, T, P or E")
        }
        BadDecimal::Range => err("out of range"),
    })?;
    let digits = frac_len.try_into().map_err(|_| err("out of range"))?;
    let number = int as f64 + frac as f64 / 10f64.powi(digits);
    // Dividing by a power of ten keeps "500m" exactly 0.5.
    Ok(if power < 0 { number / 10f64.powi(-power) } else { number * 10f64.powi(power) })
}

/// Kubernetes' decimal SI suffixes and their powers of ten.
const DECIMAL_SI: [(&str, i32); 7] =
    [("m", -3), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
/// Kubernetes' binary suffixes and their powers of two.
const BINARY_SI: [(&str, u32); 6] =
    [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

/// A non-negative decimal as (integer digits, fraction digits, fraction length).
type Decimal = (u64, u64, u32);

/// Why a decimal could not be read: not a number at all, or one too large for 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadDecimal {
    Syntax,
    Range,
}

fn parse_decimal(s: &str) -> Result<Decimal, BadDecimal> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(BadDecimal::Syntax);
    }
    let all_digits = |p: &str| p.chars().all(|c| c.is_ascii_digit());
    if !all_digits(int) || !all_digits(frac) {
        return Err(BadDecimal::Syntax);
    }
    if frac.len() > 18 {
        return Err(BadDecimal::Range);
    }
    let digits =
        |p: &str| if p.is_empty() { Ok(0) } else { p.parse().map_err(|_| BadDecimal::Range) };
    let frac_len = u32::try_from(frac.len()).map_err(|_| BadDecimal::Range)?;
    Ok((digits(int)?, digits(frac)?, frac_len))
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
    #![allow(clippy::unwrap_used)]
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

    #[test]
    fn decimal_si_forms() {
        assert_eq!(parse_decimal_si("0"), Ok(0.0));
        assert_eq!(parse_decimal_si("1"), Ok(1.0));
        assert_eq!(parse_decimal_si("500m"), Ok(0.5));
        assert_eq!(parse_decimal_si("250m"), Ok(0.25));
        assert_eq!(parse_decimal_si("2k"), Ok(2000.0));
        assert_eq!(parse_decimal_si("1.5M"), Ok(1_500_000.0));
        assert!((parse_decimal_si("833m").unwrap() - 0.833).abs() < 1e-12);
        // Binary, micro and nano suffixes are no decimal SI this parser knows; a bare suffix
        // or a sign is no number.
        for bad in ["1Ki", "333u", "5n", "m", "", "-1", "1e3"] {
            assert!(parse_decimal_si(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn figures_past_64_bits_are_out_of_range_not_wrapped() {
        assert_eq!(parse_memory_bytes("18446744073709551615"), Ok(u64::MAX));
        let why = |r: Result<u64, QuantityError>| r.unwrap_err().why;
        assert_eq!(why(parse_memory_bytes("18446744073709551616")), "out of range");
        assert_eq!(why(parse_memory_bytes("16Ei")), "out of range");
        assert_eq!(why(parse_memory_bytes("1e20")), "out of range");
        assert_eq!(why(parse_cpu_millis("18446744073709551615")), "out of range");
        assert_eq!(why(parse_cpu_millis("99999999999999999999m")), "out of range");
        assert_eq!(why(parse_cpu_millis("0.1234567890123456789")), "out of range");
        assert_eq!(parse_cpu_millis("5000000"), Ok(5_000_000_000));
        assert_eq!(why(parse_cpu_millis("1.5m")), "expected whole millicores before 'm'");
        assert_eq!(why(parse_cpu_millis("-1")), "expected a number of cores or millicores");
    }
}
