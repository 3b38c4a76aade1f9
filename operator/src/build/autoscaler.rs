//! The HorizontalPodAutoscaler of a pool with `spec.autoscaling`: it targets the RenderPool's
//! /scale (so the operator, which only reads spec.replicas, never fights it) and scales on the
//! render pods' saturation, served per pod by prometheus-adapter under the names below.

use super::common::{Component, Meta};
use crate::crd::AutoscalingSpec;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec, MetricIdentifier, MetricSpec,
    MetricTarget, PodsMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Per-pod metric: busy slots over slots of one render pod, 0 to 1.
pub const BUSY_SLOT_RATIO_METRIC: &str = "renderpod_busy_slot_ratio";
/// Per-pod metric: jobs waiting in one render pod's queue.
pub const QUEUE_DEPTH_METRIC: &str = "renderpod_queue_depth";

/// The autoscaler, named like the pool, owned by it and labelled like the render pods' objects.
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
            behavior: Some(HorizontalPodAutoscalerBehavior {
                scale_down: Some(HPAScalingRules {
                    stabilization_window_seconds: Some(spec.scale_down_stabilization_seconds),
                    ..HPAScalingRules::default()
                }),
                scale_up: None,
            }),
        },
        ..HorizontalPodAutoscaler::default()
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
    use super::per_mille;

    #[test]
    fn percentages_become_canonical_fractions() {
        assert_eq!(per_mille(70), "700m");
        assert_eq!(per_mille(1), "10m");
        assert_eq!(per_mille(55), "550m");
        assert_eq!(per_mille(100), "1");
    }
}
