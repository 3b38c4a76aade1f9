//! Reading Prometheus text exposition in tests.
//!
//! A metric that is not in the text is an error, never a zero: a renamed metric, or a labelled
//! counter whose label set was never created, must fail the assertion that reads it, not pass an
//! `== 0` by accident. The error names the series of that metric and every metric present.

use std::collections::BTreeSet;

/// No series of a metric matched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no series of {name} with {needles:?} in the exposition; its series: {series:?}; metrics present: {present:?}"
)]
pub struct Absent {
    /// The metric asked for.
    pub name: String,
    /// The label fragments every matching line had to contain.
    pub needles: Vec<String>,
    /// The series (whole sample lines) of `name` that were there, whatever their labels.
    pub series: Vec<String>,
    /// Every metric name in the text.
    pub present: BTreeSet<String>,
}

/// Sample lines: (metric name, the whole line, its value).
fn samples(text: &str) -> impl Iterator<Item = (&str, &str, Option<f64>)> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).map(|l| {
        let name = l.split([' ', '{']).next().unwrap_or_default();
        (name, l, l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
    })
}

/// The value of metric `name` in `text`, summed over the series whose line contains every
/// `needle` (label fragments such as `reason="crash"`); [`Absent`] when no series matches.
pub fn value(text: &str, name: &str, needles: &[&str]) -> Result<f64, Absent> {
    let matching: Vec<f64> = samples(text)
        .filter(|(n, line, _)| *n == name && needles.iter().all(|needle| line.contains(needle)))
        .filter_map(|(_, _, value)| value)
        .collect();
    if matching.is_empty() {
        return Err(Absent {
            name: name.to_string(),
            needles: needles.iter().map(|n| n.to_string()).collect(),
            series: samples(text).filter(|(n, ..)| *n == name).map(|(_, l, _)| l.into()).collect(),
            present: samples(text).map(|(n, ..)| n.to_string()).collect(),
        });
    }
    // An empty float sum is -0; a non-empty one of zeros is +0 only when started from +0.
    Ok(matching.into_iter().fold(0.0, |sum, v| sum + v))
}

/// [`value`], panicking with the [`Absent`] message when no series matches.
#[track_caller]
pub fn sum(text: &str, name: &str, needles: &[&str]) -> f64 {
    value(text, name, needles).unwrap_or_else(|absent| panic!("{absent}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TEXT: &str = "# HELP x_total x\n# TYPE x_total counter\nx_total{result=\"ok\"} 2\n\
                        x_total{result=\"bad\"} 3\nx_total_more 9\ny 0\n# EOF\n";

    #[test]
    fn sums_matching_label_sets_only() {
        assert_eq!(value(TEXT, "x_total", &[]), Ok(5.0));
        assert_eq!(value(TEXT, "x_total", &["\"ok\""]), Ok(2.0));
        assert_eq!(sum(TEXT, "y", &[]).to_string(), "0", "a present zero is +0");
    }

    #[test]
    fn an_absent_metric_is_an_error_naming_what_is_there() {
        let absent = value(TEXT, "z_total", &[]).unwrap_err();
        assert!(absent.series.is_empty());
        let present: Vec<&str> = absent.present.iter().map(String::as_str).collect();
        assert_eq!(present, ["x_total", "x_total_more", "y"]);
        let message = absent.to_string();
        assert!(message.contains("z_total") && message.contains("x_total_more"), "{message}");
    }

    #[test]
    fn a_label_set_never_created_is_absent_not_zero() {
        let absent = value(TEXT, "x_total", &["result=\"lost\""]).unwrap_err();
        assert_eq!(absent.series, ["x_total{result=\"ok\"} 2", "x_total{result=\"bad\"} 3"]);
        assert!(absent.to_string().contains("result=\\\"lost\\\""), "{absent}");
    }

    #[test]
    #[should_panic(expected = "no series of renamed_total")]
    fn sum_panics_on_an_absent_metric() {
        sum(TEXT, "renamed_total", &[]);
    }
}
