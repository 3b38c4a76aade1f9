//! The autoscaler of a pool with `spec.autoscaling`, which targets the RenderPool's /scale (so
//! the operator, which only reads spec.replicas, never fights it). Without jobs it is a
//! HorizontalPodAutoscaler on the render pods' saturation, served per pod by prometheus-adapter
//! under the names below; with jobs a KEDA ScaledObject on the job backlog (and the saturation,
//! from Prometheus), which may take the pool to zero.

use super::common::{Component, Meta};
use crate::crd::{AutoscalingSpec, BacklogTrigger};
use crate::keda::{
    Advanced, HorizontalPodAutoscalerConfig, ScaleTargetRef, ScaledObject, ScaledObjectSpec,
    Trigger,
};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec, MetricIdentifier, MetricSpec,
    MetricTarget, PodsMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use renderpool_api::jobs::{QueueNames, defaults::CONSUMER};
use std::collections::BTreeMap;

/// Per-pod metric: busy slots over slots of one render pod, 0 to 1.
pub const BUSY_SLOT_RATIO_METRIC: &str = "renderpod_busy_slot_ratio";
/// Per-pod metric: jobs waiting in one render pod's queue.
pub const QUEUE_DEPTH_METRIC: &str = "renderpod_queue_depth";

/// The autoscaler a pool asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Autoscaler {
    /// A pool without jobs: the HPA on the busy-slot ratio.
    Hpa(HorizontalPodAutoscaler),
    /// A pool with jobs: KEDA's ScaledObject on the backlog and the busy-slot ratio.
    Keda(ScaledObject),
}

/// Seconds between KEDA's reads of the backlog: how soon a pool at zero wakes.
pub const KEDA_POLLING_SECONDS: i32 = 5;

/// The HPA, named like the pool, owned by it and labelled like the render pods' objects.
pub(super) fn autoscaler(meta: &Meta, spec: &AutoscalingSpec) -> HorizontalPodAutoscaler {
    let mut metrics =
        vec![pods_metric(BUSY_SLOT_RATIO_METRIC, per_mille(spec.target_busy_percent))];
    if let Some(depth) = spec.target_queue_depth {
        metrics.push(pods_metric(QUEUE_DEPTH_METRIC, depth.to_string()));
    }
    HorizontalPodAutoscaler {
        metadata: meta.named(Component::Render, meta.pool.clone()),
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(meta.owner.api_version.clone()),
                kind: meta.owner.kind.clone(),
                name: meta.pool.clone(),
            },
            min_replicas: Some(spec.min_replicas),
            max_replicas: spec.max_replicas,
            metrics: Some(metrics),
            // Scale-up keeps the HPA's defaults (no window, double or +4 pods per 15 s): a
            // saturated pool answers 503 until pods arrive, so nothing is gained by waiting.
            behavior: Some(behavior(spec)),
        },
        ..HorizontalPodAutoscaler::default()
    }
}

/// Scale-up keeps the HPA's defaults (no window, double or +4 pods per 15 s): a saturated pool
/// answers 503 until pods arrive, so nothing is gained by waiting.
fn behavior(spec: &AutoscalingSpec) -> HorizontalPodAutoscalerBehavior {
    HorizontalPodAutoscalerBehavior {
        scale_down: Some(HPAScalingRules {
            stabilization_window_seconds: Some(spec.scale_down_stabilization_seconds),
            ..HPAScalingRules::default()
        }),
        scale_up: None,
    }
}

/// The ScaledObject of a job pool, named like the pool: the backlog of the pool's consumer
/// (pending plus running jobs, per pod `target x slots`), and the pool's busy-slot ratio when
/// Prometheus is named. The cooldown before 1 -> 0 is the scale-down window, so a pool sleeps
/// as late as it would shed any other pod; a pod is only taken away once its jobs are done or
/// handed back by its drain. A new pool waits the same window before its first sleep: KEDA's
/// default would take its first pod away as soon as that pod had made the stream.
pub(super) fn scaled_object(
    meta: &Meta,
    spec: &AutoscalingSpec,
    backlog: &BacklogTrigger,
    queue: &str,
    slots_per_pod: u32,
) -> ScaledObject {
    let per_pod = i64::from(backlog.target_pending_jobs_per_slot)
        .saturating_mul(i64::from(slots_per_pod.max(1)));
    let names = QueueNames::of(queue);
    let nats = BTreeMap::from([
        ("natsServerMonitoringEndpoint".into(), backlog.nats_monitoring_endpoint.clone()),
        ("useHttps".into(), backlog.use_https.to_string()),
        ("account".into(), backlog.account.clone()),
        ("stream".into(), names.stream),
        ("consumer".into(), CONSUMER.into()),
        ("lagThreshold".into(), per_pod.to_string()),
        ("activationLagThreshold".into(), backlog.activation_pending_jobs.to_string()),
    ]);
    let mut triggers = vec![Trigger {
        type_: "nats-jetstream".into(),
        metric_type: "AverageValue".into(),
        metadata: nats,
    }];
    if let Some(address) = &spec.prometheus_address {
        triggers.push(busy_ratio_trigger(meta, spec, address));
    }
    let mut object = ScaledObject::new(
        &meta.pool,
        ScaledObjectSpec {
            scale_target_ref: ScaleTargetRef {
                api_version: meta.owner.api_version.clone(),
                kind: meta.owner.kind.clone(),
                name: meta.pool.clone(),
            },
            min_replica_count: spec.min_replicas,
            max_replica_count: spec.max_replicas,
            polling_interval: KEDA_POLLING_SECONDS,
            cooldown_period: spec.scale_down_stabilization_seconds,
            initial_cooldown_period: spec.scale_down_stabilization_seconds,
            advanced: Advanced {
                horizontal_pod_autoscaler_config: HorizontalPodAutoscalerConfig {
                    behavior: behavior(spec),
                },
            },
            triggers,
        },
    );
    object.metadata = meta.named(Component::Render, meta.pool.clone());
    object
}

/// The pool's busy slots over its slots, each pod's gauge averaged over 30 s as the adapter's
/// rules do, compared as the whole pool's value (replicas x value / target, the HPA's per-pod
/// average rule). With no pod there is no series and the query answers 0, so an idle pool at
/// zero stays there and only the backlog wakes it.
fn busy_ratio_trigger(meta: &Meta, spec: &AutoscalingSpec, address: &str) -> Trigger {
    let pool = format!(r#"namespace="{}",renderpool="{}""#, meta.namespace, meta.pool);
    let query = format!(
        "((sum(avg_over_time(renderpod_slots{{{pool},state=\"busy\"}}[30s])) or vector(0)) \
         / (sum(avg_over_time(renderpod_slots{{{pool}}}[30s])) > 0)) or vector(0)"
    );
    let threshold = f64::from(spec.target_busy_percent) / 100.0;
    Trigger {
        type_: "prometheus".into(),
        metric_type: "Value".into(),
        metadata: BTreeMap::from([
            ("serverAddress".into(), address.into()),
            ("query".into(), query),
            ("threshold".into(), threshold.to_string()),
        ]),
    }
}

/// A per-pod average target on one of the render pods' metrics.
fn pods_metric(name: &str, average: String) -> MetricSpec {
    MetricSpec {
        type_: "Pods".into(),
        pods: Some(PodsMetricSource {
            metric: MetricIdentifier { name: name.into(), selector: None },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(Quantity(average)),
                ..MetricTarget::default()
            },
        }),
        ..MetricSpec::default()
    }
}

/// A percentage as the fraction quantity, written as the API server stores it ("700m", "1"), so
/// the stored autoscaler compares equal to the built one.
fn per_mille(percent: i32) -> String {
    let millis = i64::from(percent).saturating_mul(10);
    if millis % 1000 == 0 { (millis / 1000).to_string() } else { format!("{millis}m") }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::test_fixtures::spec_from_yaml;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn meta() -> Meta {
        let owner = OwnerReference {
            api_version: "renderpool.dev/v1beta1".into(),
            kind: "RenderPool".into(),
            name: "batch".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        };
        Meta { pool: "batch".into(), namespace: "imports".into(), owner }
    }

    /// A job pool's ScaledObject with Prometheus named: the backlog and the ratio trigger.
    fn with_both_triggers() -> ScaledObject {
        let spec = spec_from_yaml(
            "autoscaling:\n  maxReplicas: 6\n  prometheusAddress: http://p:9090\n  \
             backlog:\n    natsMonitoringEndpoint: nats:8222",
        );
        let autoscaling = spec.autoscaling.unwrap();
        let backlog = autoscaling.backlog.clone().unwrap();
        scaled_object(&meta(), &autoscaling, &backlog, "jobs", 2)
    }

    #[test]
    fn a_job_pool_scales_on_its_consumers_backlog_per_slot_and_may_sleep() {
        let spec = spec_from_yaml(
            "autoscaling:\n  minReplicas: 0\n  maxReplicas: 6\n  scaleDownStabilizationSeconds: 60\n  \
             backlog:\n    natsMonitoringEndpoint: nats.nats.svc:8222\n    targetPendingJobsPerSlot: 3\n    \
             activationPendingJobs: 2",
        );
        let autoscaling = spec.autoscaling.unwrap_or_else(|| panic!("no autoscaling"));
        let backlog = autoscaling.backlog.clone().unwrap_or_else(|| panic!("no backlog"));
        let object = scaled_object(&meta(), &autoscaling, &backlog, "nightly-import", 4);
        assert_eq!(object.metadata.name.as_deref(), Some("batch"));
        let spec = &object.spec;
        assert_eq!((spec.min_replica_count, spec.max_replica_count), (0, 6));
        assert_eq!((spec.cooldown_period, spec.initial_cooldown_period), (60, 60));
        assert_eq!(spec.scale_target_ref.kind, "RenderPool");
        assert_eq!(spec.triggers.len(), 1, "no Prometheus named, no ratio trigger");
        let nats = &spec.triggers[0].metadata;
        assert_eq!(spec.triggers[0].type_, "nats-jetstream");
        assert_eq!(nats["stream"], "RENDERPOOL_NIGHTLY_IMPORT");
        assert_eq!(nats["consumer"], CONSUMER);
        assert_eq!(nats["account"], "$G");
        assert_eq!(nats["lagThreshold"], "12", "3 per slot x 4 slots");
        assert_eq!(nats["activationLagThreshold"], "2");
        assert_eq!(nats["natsServerMonitoringEndpoint"], "nats.nats.svc:8222");
    }

    #[test]
    fn with_prometheus_the_pools_busy_ratio_is_a_second_trigger() {
        let spec = spec_from_yaml(
            "autoscaling:\n  maxReplicas: 6\n  targetBusyPercent: 70\n  \
             prometheusAddress: http://prometheus.monitoring:9090\n  \
             backlog:\n    natsMonitoringEndpoint: nats:8222",
        );
        let autoscaling = spec.autoscaling.unwrap_or_else(|| panic!("no autoscaling"));
        let backlog = autoscaling.backlog.clone().unwrap_or_else(|| panic!("no backlog"));
        let object = scaled_object(&meta(), &autoscaling, &backlog, "jobs", 2);
        let ratio = &object.spec.triggers[1];
        assert_eq!((ratio.type_.as_str(), ratio.metric_type.as_str()), ("prometheus", "Value"));
        assert_eq!(ratio.metadata["threshold"], "0.7");
        let query = &ratio.metadata["query"];
        assert!(
            query.contains(r#"namespace="imports",renderpool="batch",state="busy""#),
            "{query}"
        );
        assert!(query.ends_with("or vector(0)"), "an empty pool reads 0: {query}");
    }

    /// The tests' KEDA is built with the scalers `tests/cluster/keda/triggers` names alone: each
    /// trigger type the operator writes must be one of them, or KEDA would answer "no scaler
    /// found" in the tests only.
    #[test]
    fn the_tests_keda_build_keeps_every_scaler_the_operator_uses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cluster/keda/triggers");
        let kept = std::fs::read_to_string(path).unwrap();
        let kept: Vec<&str> =
            kept.lines().filter(|line| !line.is_empty() && !line.starts_with('#')).collect();
        let object = with_both_triggers();
        assert_eq!(object.spec.triggers.len(), 2, "both triggers written");
        for trigger in &object.spec.triggers {
            assert!(kept.contains(&trigger.type_.as_str()), "{} not in {path}", trigger.type_);
        }
    }

    /// The shipped KEDA example (deploy/autoscaling) and the operator's trigger are two copies
    /// of one query: the same busy slots over the same slots, averaged over the same window.
    #[test]
    fn the_ratio_query_reads_what_the_shipped_keda_example_reads() {
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/autoscaling/keda-scaledobject.yaml");
        let example: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let shipped = example["spec"]["triggers"][0]["metadata"]["query"].as_str().unwrap();
        let shipped = shipped
            .replace(r#"namespace="default""#, r#"namespace="imports""#)
            .replace(r#"renderpool="previews""#, r#"renderpool="batch""#);
        let (busy, slots) = shipped.split_once(" / ").unwrap();
        let object = with_both_triggers();
        let query = &object.spec.triggers[1].metadata["query"];
        assert!(query.contains(busy.trim()), "{busy} not in {query}");
        assert!(query.contains(slots.trim()), "{slots} not in {query}");
    }

    #[test]
    fn percentages_become_canonical_fractions() {
        assert_eq!(per_mille(70), "700m");
        assert_eq!(per_mille(1), "10m");
        assert_eq!(per_mille(55), "550m");
        assert_eq!(per_mille(100), "1");
    }
}
