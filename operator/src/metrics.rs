//! Prometheus metrics: reconciles, errors, duration, writes and leadership, and each pool's
//! stored status (conditions, pods, slots) read at every scrape from a source the controller
//! lends while it leads.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

type Labels = Vec<(String, String)>;

/// Every kind of failed reconcile (`renderpool_operator_reconcile_errors_total{kind}`), each
/// exported at 0 from the start: a dashboard or a rate shows 0 rather than no data.
pub const RECONCILE_ERROR_KINDS: [&str; 3] = ["apply", "status", "metadata"];

/// One pool's stored status, as the pool gauges export it (labels `namespace`, `renderpool`:
/// the names the render pods' scrape job gives their series, so the two join).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolFigures {
    /// The pool's namespace.
    pub namespace: String,
    /// The pool's name.
    pub name: String,
    /// Its conditions: type, status (`True`, `False`, `Unknown`) and reason.
    pub conditions: Vec<(String, String, String)>,
    /// Pods by component (`render`, `gotenberg`) and state (`wanted`, `ready`).
    pub pods: Vec<(&'static str, &'static str, i64)>,
    /// Slots by state (`ready`, `total`), when the spec could be sized.
    pub slots: Vec<(&'static str, i64)>,
}

/// What lists the pools at scrape time.
type PoolSource = Box<dyn Fn() -> Vec<PoolFigures> + Send + Sync>;

/// The source lent by the leading controller, and the id of the loan.
#[derive(Default)]
struct Lent {
    id: u64,
    source: Option<PoolSource>,
}

/// The pool gauges: encoded from the lent source at each scrape, so they always say what the
/// stored statuses say, and a deleted pool (or a lost lease) leaves no stale series.
#[derive(Default)]
struct PoolGauges {
    lent: Mutex<Lent>,
    loans: AtomicU64,
}

impl std::fmt::Debug for PoolGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lent = self.lent.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("PoolGauges").field("lent", &lent.source.is_some()).finish()
    }
}

impl Collector for PoolGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pools = {
            let lent = self.lent.lock().unwrap_or_else(PoisonError::into_inner);
            match &lent.source {
                Some(source) => source(),
                None => return Ok(()),
            }
        };
        let conditions = Family::<Labels, Gauge>::default();
        let pods = Family::<Labels, Gauge>::default();
        let slots = Family::<Labels, Gauge>::default();
        for pool in &pools {
            let labels = |more: &[(&str, &str)]| -> Labels {
                [("namespace", pool.namespace.as_str()), ("renderpool", pool.name.as_str())]
                    .iter()
                    .chain(more)
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect()
            };
            for (type_, status, reason) in &pool.conditions {
                let set = labels(&[("condition", type_), ("status", status), ("reason", reason)]);
                conditions.get_or_create(&set).set(1);
            }
            for (component, state, value) in &pool.pods {
                pods.get_or_create(&labels(&[("component", component), ("state", state)]))
                    .set(*value);
            }
            for (state, value) in &pool.slots {
                slots.get_or_create(&labels(&[("state", state)])).set(*value);
            }
        }
        for (name, help, family) in [
            (
                "pool_condition",
                "1 for each condition of each RenderPool, with its status and reason",
                &conditions,
            ),
            ("pool_pods", "Pods each RenderPool wants and has ready, by component", &pods),
            ("pool_slots", "Slots of each RenderPool: ready now, and in all when ready", &slots),
        ] {
            if !family.is_empty() {
                family.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    family.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

/// The pool gauges' source stays lent while this lives; dropping it withdraws it.
#[must_use = "the pool gauges go when this is dropped"]
pub struct PoolsExported {
    gauges: Arc<PoolGauges>,
    id: u64,
}

impl Drop for PoolsExported {
    fn drop(&mut self) {
        let mut lent = self.gauges.lent.lock().unwrap_or_else(PoisonError::into_inner);
        // A later loan replaced this one: it is not this guard's to withdraw.
        if lent.id == self.id {
            lent.source = None;
        }
    }
}

/// The operator's metrics and the registry that renders them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    duration: Histogram,
    writes: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
    leader: Gauge,
    pools: Arc<PoolGauges>,
}

impl Default for Metrics {
    fn default() -> Self {
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        for kind in RECONCILE_ERROR_KINDS {
            drop(errors.get_or_create(&vec![("kind".into(), kind.into())]));
        }
        let writes = Family::<Labels, Counter>::default();
        let requests = Family::<Labels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let leader = Gauge::default();
        let mut registry = Registry::with_prefix("renderpool_operator");
        registry.register("reconciles", "Reconciles by outcome", reconciles.clone());
        registry.register("reconcile_errors", "Failed reconciles by error kind", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            duration.clone(),
        );
        registry.register(
            "api_writes",
            "Write requests sent to the API server, by kind and verb",
            writes.clone(),
        );
        registry.register(
            "api_requests",
            "Every request the kube client sent (reads, watches, writes, lease renewals), by verb",
            requests.clone(),
        );
        registry.register("leader", "1 while this process holds the lease", leader.clone());
        let pools = Arc::new(PoolGauges::default());
        registry.register_collector(Box::new(pools.clone()));
        Self { registry, reconciles, errors, duration, writes, requests, leader, pools }
    }
}

impl Metrics {
    /// Records one finished reconcile.
    pub fn reconciled(&self, outcome: &str, took: Duration) {
        self.reconciles.get_or_create(&vec![("outcome".into(), outcome.into())]).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// Records one failed reconcile; `kind` is one of [`RECONCILE_ERROR_KINDS`].
    pub fn failed(&self, kind: &str) {
        debug_assert!(
            RECONCILE_ERROR_KINDS.contains(&kind),
            "{kind} is not a reconcile error kind"
        );
        self.errors.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    /// Records one write request (apply, delete, status, event).
    pub fn write(&self, kind: &str, verb: &str) {
        self.writes
            .get_or_create(&vec![("kind".into(), kind.into()), ("verb".into(), verb.into())])
            .inc();
    }

    /// Records one request sent by the kube client.
    pub fn request(&self, verb: &str) {
        self.requests.get_or_create(&vec![("verb".into(), verb.into())]).inc();
    }

    /// Records whether this process leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Exports the pools `source` lists at each scrape (`renderpool_operator_pool_*`) until the
    /// returned guard is dropped. Only the leader lends one: a standby exports no pool.
    pub fn export_pools(
        &self,
        source: impl Fn() -> Vec<PoolFigures> + Send + Sync + 'static,
    ) -> PoolsExported {
        let id = self.pools.loans.fetch_add(1, Ordering::Relaxed) + 1;
        let mut lent = self.pools.lent.lock().unwrap_or_else(PoisonError::into_inner);
        *lent = Lent { id, source: Some(Box::new(source)) };
        PoolsExported { gauges: self.pools.clone(), id }
    }

    /// The text exposition format.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn writes_and_reconciles_are_rendered_with_labels() {
        let m = Metrics::default();
        m.write("Deployment", "apply");
        m.write("Deployment", "apply");
        m.reconciled("applied", Duration::from_millis(3));
        m.set_leader(true);
        let text = m.render().unwrap();
        assert!(
            text.contains(
                r#"renderpool_operator_api_writes_total{kind="Deployment",verb="apply"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"renderpool_operator_reconciles_total{outcome="applied"} 1"#));
        assert!(text.contains("renderpool_operator_leader 1"));
        assert!(text.contains("renderpool_operator_reconcile_duration_seconds_count 1"));
    }

    #[test]
    fn every_error_kind_is_exported_at_zero_before_any_error() {
        let m = Metrics::default();
        m.failed("status");
        let text = m.render().unwrap();
        for kind in RECONCILE_ERROR_KINDS {
            let want = if kind == "status" { 1 } else { 0 };
            let line =
                format!("renderpool_operator_reconcile_errors_total{{kind=\"{kind}\"}} {want}");
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }

    fn degraded_pool() -> PoolFigures {
        PoolFigures {
            namespace: "docs".into(),
            name: "previews".into(),
            conditions: vec![
                ("Ready".into(), "False".into(), "MemoryTooSmallForOneSlot".into()),
                ("Degraded".into(), "True".into(), "MemoryTooSmallForOneSlot".into()),
            ],
            pods: vec![("render", "wanted", 2), ("render", "ready", 1)],
            slots: vec![],
        }
    }

    #[test]
    fn lent_pools_are_exported_at_each_scrape_and_withdrawn_with_the_guard() {
        let m = Metrics::default();
        assert!(!m.render().unwrap().contains("renderpool_operator_pool_"), "nothing lent yet");
        let listed = Arc::new(Mutex::new(vec![degraded_pool()]));
        let source = listed.clone();
        let exported = m.export_pools(move || source.lock().unwrap().clone());
        let text = m.render().unwrap();
        for line in [
            r#"renderpool_operator_pool_condition{namespace="docs",renderpool="previews",condition="Degraded",status="True",reason="MemoryTooSmallForOneSlot"} 1"#,
            r#"renderpool_operator_pool_condition{namespace="docs",renderpool="previews",condition="Ready",status="False",reason="MemoryTooSmallForOneSlot"} 1"#,
            r#"renderpool_operator_pool_pods{namespace="docs",renderpool="previews",component="render",state="wanted"} 2"#,
            r#"renderpool_operator_pool_pods{namespace="docs",renderpool="previews",component="render",state="ready"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(!text.contains("renderpool_operator_pool_slots"), "no slots, no family: {text}");
        // A pool gone from the source is gone from the next scrape.
        listed.lock().unwrap().clear();
        assert!(!m.render().unwrap().contains("renderpool_operator_pool_"));
        listed.lock().unwrap().push(degraded_pool());
        drop(exported);
        assert!(!m.render().unwrap().contains("renderpool_operator_pool_"), "withdrawn");
    }

    #[test]
    fn an_older_guard_does_not_withdraw_a_newer_loan() {
        let m = Metrics::default();
        let first = m.export_pools(Vec::new);
        let _second = m.export_pools(|| vec![degraded_pool()]);
        drop(first);
        assert!(m.render().unwrap().contains("renderpool_operator_pool_condition{"));
    }
}
