//! The pool's job backlog for `status.jobs`: the operator has no NATS credentials (it never
//! reads a Secret), so it asks a ready render pod, which reads its stream every few seconds and
//! shows the figure in its `/readyz` body.

use crate::build::{Component, selector_labels};
use crate::crd::JobsStatus;
use k8s_openapi::api::core::v1::Pod;
use renderpool_api::render_pod::{JobsBacklog, PORT, READYZ_JOBS};
use std::time::Duration;

/// How long the operator waits for a pod's `/readyz`.
const TIMEOUT: Duration = Duration::from_secs(2);
/// A reading older than this is not shown: that pod has lost its broker.
const MAX_AGE_MS: u64 = 60_000;

/// The backlog as a render pod of `pool` among `pods` tells it; `None` when no ready render
/// pod answers with a fresh figure (each failure is logged).
pub async fn read(pool: &str, pods: &[Pod]) -> Option<JobsStatus> {
    for url in readyz_urls(pool, pods) {
        match crate::probe::get(&url, TIMEOUT).await {
            Ok(body) => match fresh(&body) {
                Some(status) => return Some(status),
                None => tracing::debug!(%url, "no fresh job backlog in /readyz"),
            },
            Err(err) => tracing::debug!(error = %err, "could not read the job backlog"),
        }
    }
    None
}

/// The `/readyz` address of the first few ready render pods of `pool` among `pods`, by name
/// (a stable order).
fn readyz_urls(pool: &str, pods: &[Pod]) -> Vec<String> {
    let render = selector_labels(pool, Component::Render);
    let mut ready: Vec<(&str, &str)> = pods
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            render.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let status = p.status.as_ref()?;
            let conditions = status.conditions.as_ref()?;
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())?;
            Some((p.metadata.name.as_deref()?, status.pod_ip.as_deref()?))
        })
        .collect();
    ready.sort_unstable();
    ready
        .into_iter()
        .map(|(_, ip)| {
            let host = if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() };
            format!("http://{host}:{PORT}/readyz")
        })
        .take(2)
        .collect()
}

/// The backlog in a `/readyz` body, if it is there and fresh.
fn fresh(body: &str) -> Option<JobsStatus> {
    let mut value: serde_json::Value = serde_json::from_str(body).ok()?;
    let backlog: JobsBacklog = serde_json::from_value(value.get_mut(READYZ_JOBS)?.take()).ok()?;
    (backlog.age_ms <= MAX_AGE_MS)
        .then(|| JobsStatus { pending: i64::try_from(backlog.pending).unwrap_or(i64::MAX) })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn pod(name: &str, component: Component, ip: &str, ready: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": selector_labels("docs", component)},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    #[test]
    fn only_ready_render_pods_are_asked_in_name_order() {
        let pods = [
            pod("docs-render-b", Component::Render, "10.0.0.2", "True"),
            pod("docs-gotenberg-a", Component::Gotenberg, "10.0.0.9", "True"),
            pod("docs-render-c", Component::Render, "10.0.0.3", "False"),
            pod("docs-render-a", Component::Render, "fd00::1", "True"),
        ];
        assert_eq!(readyz_urls("other", &pods), Vec::<String>::new());
        assert_eq!(
            readyz_urls("docs", &pods),
            ["http://[fd00::1]:8080/readyz", "http://10.0.0.2:8080/readyz"]
        );
    }

    #[test]
    fn a_fresh_figure_is_taken_and_a_stale_or_missing_one_is_not() {
        let body = |jobs: serde_json::Value| json!({"ready": true, "jobs": jobs}).to_string();
        assert_eq!(
            fresh(&body(json!({"pending": 12, "age_ms": 3_000}))),
            Some(JobsStatus { pending: 12 })
        );
        assert_eq!(fresh(&body(json!({"pending": 12, "age_ms": 61_000}))), None);
        assert_eq!(fresh(&json!({"ready": true}).to_string()), None);
        assert_eq!(fresh("not json"), None);
    }
}
