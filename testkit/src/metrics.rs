//! Reading Prometheus text exposition in tests.

/// The value of metric `name` in `text`, summed over the label sets whose line contains every
/// `needle` (0 when none does).
pub fn sum(text: &str, name: &str, needles: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split([' ', '{']).next() == Some(name))
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        + 0.0 // an empty float sum is -0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_matching_label_sets_only() {
        let text =
            "# HELP x\nx_total{result=\"ok\"} 2\nx_total{result=\"bad\"} 3\nx_total_more 9\ny 1\n";
        assert_eq!(sum(text, "x_total", &[]), 5.0);
        assert_eq!(sum(text, "x_total", &["\"ok\""]), 2.0);
        assert_eq!(sum(text, "z", &[]).to_string(), "0");
    }
}
