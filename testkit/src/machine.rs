//! What the machine was doing while a benchmark ran, for the figures it prints, and which of
//! its processes a test or benchmark started.

/// The load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them ("" off Linux).
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (`None` once it is gone).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: the fields after the last ')' are fixed,
    // the state first, then the parent's id.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The processes whose parent is `pid` (started by any of its threads).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| parent_of(child) == Some(pid))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn three_numbers_on_linux() {
        let load = super::load_average();
        let numbers: Vec<Result<f64, _>> = load.split(' ').map(str::parse::<f64>).collect();
        assert!(numbers.len() == 3 && numbers.iter().all(Result::is_ok), "{load}");
    }

    #[test]
    fn a_started_child_is_found_with_its_parent() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let (me, pid) = (std::process::id(), child.id());
        assert_eq!(super::parent_of(pid), Some(me));
        assert!(super::children_of(me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(super::parent_of(pid), None, "reaped, so gone");
    }
}
