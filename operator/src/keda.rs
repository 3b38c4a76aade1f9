//! KEDA's ScaledObject (keda.sh/v1alpha1), the fields the operator writes: the autoscaler of a
//! pool with durable jobs. KEDA's own CRD validates it; no schema is generated here.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ScaledObject's spec.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(group = "keda.sh", version = "v1alpha1", kind = "ScaledObject", namespaced)]
#[kube(schema = "disabled", derive = "PartialEq")]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    /// What KEDA scales, through its /scale subresource.
    pub scale_target_ref: ScaleTargetRef,
    /// Fewest replicas; 0 lets KEDA take the target to zero when no trigger is active.
    pub min_replica_count: i32,
    /// Most replicas.
    pub max_replica_count: i32,
    /// Seconds between KEDA's checks of the triggers (what wakes a pool at zero).
    pub polling_interval: i32,
    /// Seconds with no active trigger before KEDA takes the target from 1 to 0.
    pub cooldown_period: i32,
    /// The HPA KEDA makes.
    pub advanced: Advanced,
    /// What the replica count follows.
    pub triggers: Vec<Trigger>,
}

/// A target with a /scale subresource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// `spec.advanced`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Advanced {
    pub horizontal_pod_autoscaler_config: HorizontalPodAutoscalerConfig,
}

/// `spec.advanced.horizontalPodAutoscalerConfig`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HorizontalPodAutoscalerConfig {
    pub behavior: HorizontalPodAutoscalerBehavior,
}

/// One scaler: its type, how its value is compared (`metricType`) and its settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    #[serde(rename = "type")]
    pub type_: String,
    /// `AverageValue` (per replica) or `Value` (the whole target's).
    pub metric_type: String,
    pub metadata: BTreeMap<String, String>,
}

/// The HPA KEDA makes for ScaledObject `name` (KEDA names it so): it writes /scale between 1
/// and the maximum, KEDA itself between 0 and 1.
pub fn hpa_name(scaled_object: &str) -> String {
    format!("keda-hpa-{scaled_object}")
}
