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
            apply(read(&path), &admission, &metrics, &mut last_error);
        }
    })
}

/// What one read of the share file does: a new share resizes admission; a failed read keeps
/// the last good share, and says why once per distinct reason (`last_error` remembers it).
fn apply(
    read: Result<u32, ShareError>,
    admission: &Arc<Admission>,
    metrics: &OfficeMetrics,
    last_error: &mut Option<ShareError>,
) {
    match read {
        Ok(share) => {
            *last_error = None;
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
                *last_error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use renderpool_testkit::wait;

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
        let share_of = |want: u32| {
            let admission = admission.clone();
            async move {
                let share = admission.status().share;
                if share == want { Ok(()) } else { Err(share) }
            }
        };
        std::fs::write(&path, "3\n").unwrap();
        wait::until("a share of 3", Duration::from_secs(5), || share_of(3)).await;
        // Garbage and a missing file in between are `apply`'s to judge (below).
        std::fs::write(&path, "garbage").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "1").unwrap();
        wait::until("a share of 1", Duration::from_secs(5), || share_of(1)).await;
        task.abort();
        assert!(matches!(read(&dir.path().join("none")), Err(ShareError::Unreadable { .. })));
    }

    #[test]
    fn a_failed_read_keeps_the_last_good_share_and_a_good_one_resizes() {
        let admission = Admission::new(3, 4);
        let metrics = OfficeMetrics::default();
        let mut last_error = None;
        let garbage = ShareError::Invalid { path: "f".into(), content: "garbage".into() };
        apply(Err(garbage.clone()), &admission, &metrics, &mut last_error);
        assert_eq!((admission.status().share, last_error.as_ref()), (3, Some(&garbage)));
        let missing = ShareError::Unreadable { path: "f".into(), reason: "gone".into() };
        apply(Err(missing.clone()), &admission, &metrics, &mut last_error);
        assert_eq!((admission.status().share, last_error.as_ref()), (3, Some(&missing)));
        apply(Ok(1), &admission, &metrics, &mut last_error);
        assert_eq!((admission.status().share, metrics.share.get()), (1, 1));
        assert_eq!(last_error, None);
    }
}
