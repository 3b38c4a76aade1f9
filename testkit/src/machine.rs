//! What the machine was doing while a benchmark ran, for the figures it prints.

/// The load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them ("" off Linux).
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn three_numbers_on_linux() {
        let load = super::load_average();
        let numbers: Vec<Result<f64, _>> = load.split(' ').map(str::parse::<f64>).collect();
        assert!(numbers.len() == 3 && numbers.iter().all(Result::is_ok), "{load}");
    }
}
