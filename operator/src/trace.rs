//! The span of one reconcile: every line logged while a pool is reconciled carries the pool,
//! its namespace and a trace id that tells this pass's lines from the next one's.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::Span;

/// The span one reconcile of pool `name` in `namespace` runs in.
pub fn reconcile_span(name: &str, namespace: &str) -> Span {
    tracing::info_span!("reconcile", pool = %name, namespace = %namespace, trace_id = %trace_id())
}

/// A fresh trace id in the W3C Trace Context form (32 lowercase hex digits, never all zero).
/// Random across processes (std's hasher keys are seeded by the OS) and distinct within one (a
/// counter is what gets hashed), without a random-number crate for it.
pub fn trace_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let keys = RandomState::new();
    let (high, low) = (keys.hash_one(n), keys.hash_one(!n));
    let id = format!("{high:016x}{low:016x}");
    if id.bytes().all(|b| b == b'0') { format!("{n:032x}") } else { id }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use renderpool_runtime::logging::{LogFormat, subscriber};
    use std::collections::HashSet;
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::EnvFilter;

    #[test]
    fn trace_ids_are_32_hex_digits_and_never_repeat() {
        let ids: Vec<String> = (0..1000).map(|_| trace_id()).collect();
        for id in &ids {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
        }
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    }

    /// Lines written by a subscriber, kept for the test to read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the operator's subscriber in `format` writes for two lines logged in one reconcile
    /// span and one in the next.
    fn logged(format: LogFormat) -> Vec<String> {
        let out = Captured::default();
        let sink = out.clone();
        let log = subscriber(format, EnvFilter::new("debug"), move || sink.clone(), false);
        tracing::subscriber::with_default(log, || {
            reconcile_span("docs", "previews").in_scope(|| {
                tracing::info!(written = 2, "applied children");
                tracing::warn!("spec cannot be applied");
            });
            reconcile_span("docs", "previews").in_scope(|| tracing::debug!("reconciled"));
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn json_lines_carry_the_pool_namespace_and_one_trace_id_per_reconcile() {
        let lines = logged(LogFormat::Json);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        let spans: Vec<serde_json::Value> = lines
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["span"].clone())
            .collect();
        for span in &spans {
            assert_eq!(span["name"], "reconcile", "{span}");
            assert_eq!((&span["pool"], &span["namespace"]), (&"docs".into(), &"previews".into()));
            assert_eq!(span["trace_id"].as_str().unwrap().len(), 32, "{span}");
        }
        assert_eq!(spans[0]["trace_id"], spans[1]["trace_id"], "one reconcile, one trace id");
        assert_ne!(spans[1]["trace_id"], spans[2]["trace_id"], "the next reconcile, another");
        let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!((&first["message"], &first["written"]), (&"applied children".into(), &2.into()));
    }

    #[test]
    fn text_lines_carry_the_pool_namespace_and_trace_id() {
        let lines = logged(LogFormat::Text);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        for line in &lines {
            let fields = line
                .split_once("reconcile{")
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(fields, _)| fields)
                .unwrap_or_else(|| panic!("no reconcile span in {line}"));
            let id = fields.split_once("trace_id=").unwrap().1;
            assert!(fields.starts_with("pool=docs namespace=previews trace_id="), "{line}");
            assert_eq!(id.len(), 32, "{line}");
        }
    }
}
