//! This pod's Office share, read from a file the operator keeps in a ConfigMap (the kubelet
//! refreshes a mounted ConfigMap within about a minute). Re-read every few seconds: a changed
//! share resizes admission without touching conversions in flight; a missing or unreadable file
//! keeps the last good share and says why, once per distinct reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::admission::Admission;
use super::metrics::OfficeMetrics;

/// Largest share accepted (far above any Gotenberg pool this runs in front of).
pub const MAX_SHARE: u32 = 10_000;

/// Why a share file was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: String, reason: String },
    /// The file does not hold a whole number of conversions.
    #[error("{path} holds {content:?}, not a whole number of conversions from 1 to {MAX_SHARE}")]
    Invalid { path: String, content: String },
}

/// Parses the file's content: a decimal count from 1 to [`MAX_SHARE`], surrounding whitespace
/// allowed.
pub fn parse(content: &str) -> Option<u32> {
    content.trim().parse::<u32>().ok().filter(|n| (1..=MAX_SHARE).contains(n))
}

/// Reads and parses the share file.
pub fn read(path: &Path) -> Result<u32, ShareError> {
    let shown = path.display().to_string();
    let content = std::fs::read_to_string(path)
        .map_err(|e| ShareError::Unreadable { path: shown.clone(), reason: e.to_string() })?;
    parse(&content).ok_or_else(|| ShareError::Invalid {
        path: shown,
        content: content.chars().take(40).collect(),
    })
}

/// Re-reads the share file every `poll`, resizing `admission` when it changes. Runs until the
/// returned task is aborted.
pub fn watch(
    path: PathBuf,
    admission: Arc<Admission>,
    metrics: Arc<OfficeMetrics>,
    poll: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_error: Option<ShareError> = None;
        loop {
            tokio::time::sleep(poll).await;
            match read(&path) {
                Ok(share) => {
                    last_error = None;
                    let current = admission.status().share;
                    if share != current {
                        tracing::info!(from = current, to = share, "Office share changed");
                        admission.resize(share);
                        metrics.share.set(i64::from(share));
                    }
                }
                Err(e) => {
                    if last_error.as_ref() != Some(&e) {
                        let kept = admission.status().share;
                        tracing::warn!(error = %e, share = kept, "keeping the last good Office share");
                        last_error = Some(e);
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_whole_counts_only() {
        assert_eq!(parse("2"), Some(2));
        assert_eq!(parse(" 3\n"), Some(3));
        for bad in ["", "0", "-1", "2.5", "two", "10001", "1 2"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn the_watcher_follows_the_file_and_keeps_the_last_good_share() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("concurrency");
        std::fs::write(&path, "2").unwrap();
        let admission = Admission::new(read(&path).unwrap(), 4);
        let metrics = Arc::new(OfficeMetrics::default());
        let task = watch(path.clone(), admission.clone(), metrics, Duration::from_millis(10));
        let wait_for = |share: u32| {
            let admission = admission.clone();
            async move {
                for _ in 0..500 {
                    if admission.status().share == share {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                false
            }
        };
        std::fs::write(&path, "3\n").unwrap();
        assert!(wait_for(3).await);
        std::fs::write(&path, "garbage").unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(admission.status().share, 3);
        std::fs::remove_file(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(admission.status().share, 3);
        std::fs::write(&path, "1").unwrap();
        assert!(wait_for(1).await);
        task.abort();
        assert!(matches!(read(&dir.path().join("none")), Err(ShareError::Unreadable { .. })));
    }
}
