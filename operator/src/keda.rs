//! KEDA's ScaledObject (keda.sh/v1alpha1), the fields the operator writes and the conditions
//! it reads back: the autoscaler of a pool with durable jobs. KEDA's own CRD validates it; no
//! schema is generated here.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::jiff::Timestamp;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ScaledObject's spec.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(group = "keda.sh", version = "v1alpha1", kind = "ScaledObject", namespaced)]
#[kube(schema = "disabled", derive = "PartialEq", status = "ScaledObjectStatus")]
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
    /// Seconds after the ScaledObject's creation before KEDA may take the target to 0 when no
    /// trigger was ever active (KEDA's default, 0, lets it sleep the moment it is created).
    pub initial_cooldown_period: i32,
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

/// What KEDA reports of a ScaledObject that the operator reads: its conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ScaledObjectStatus {
    #[serde(default)]
    pub conditions: Vec<KedaCondition>,
}

/// One of KEDA's conditions (Ready, Active, Fallback, Paused).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KedaCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl ScaledObject {
    /// KEDA's reason and message while it says this ScaledObject is not Ready (its triggers
    /// fail: the pool neither wakes nor grows on its backlog). Not before `settle_seconds` after
    /// its creation: a new pool's stream exists only once its first render pod runs, and KEDA's
    /// first poll may come before that.
    pub fn not_ready(&self, now: Timestamp, settle_seconds: i64) -> Option<String> {
        let created = self.metadata.creation_timestamp.as_ref()?.0;
        if now.as_second().saturating_sub(created.as_second()) < settle_seconds {
            return None;
        }
        let conditions = &self.status.as_ref()?.conditions;
        let ready = conditions.iter().find(|c| c.type_ == "Ready" && c.status == "False")?;
        Some(format!("{}: {}", ready.reason, ready.message.trim_end_matches('.')))
    }
}

/// The HPA KEDA makes for ScaledObject `name` (KEDA names it so): it writes /scale between 1
/// and the maximum, KEDA itself between 0 and 1.
pub fn hpa_name(scaled_object: &str) -> String {
    format!("keda-hpa-{scaled_object}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scaled_object(created: i64, ready: Option<(&str, &str)>) -> ScaledObject {
        let mut object: ScaledObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "batch", "creationTimestamp":
                Timestamp::from_second(created).unwrap().to_string()},
            "spec": {"scaleTargetRef": {"apiVersion": "renderpool.dev/v1", "kind": "RenderPool",
                "name": "batch"}, "minReplicaCount": 0, "maxReplicaCount": 2,
                "pollingInterval": 5, "cooldownPeriod": 60, "initialCooldownPeriod": 60,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {}}}, "triggers": []},
            // Fields the operator does not read are ignored.
            "status": {"hpaName": "keda-hpa-batch", "conditions": [
                {"type": "Active", "status": "False", "reason": "ScalerNotActive", "message": ""}]},
        }))
        .unwrap();
        if let Some((status, reason)) = ready {
            let conditions = &mut object.status.as_mut().unwrap().conditions;
            conditions.push(KedaCondition {
                type_: "Ready".into(),
                status: status.into(),
                reason: reason.into(),
                message: "Triggers defined in ScaledObject are not working correctly".into(),
            });
        }
        object
    }

    #[test]
    fn a_scaled_object_whose_triggers_fail_is_not_ready_once_it_had_time_to_settle() {
        let now = Timestamp::from_second(1_000).unwrap();
        let failing = scaled_object(900, Some(("False", "TriggerError")));
        assert_eq!(
            failing.not_ready(now, 10).as_deref(),
            Some("TriggerError: Triggers defined in ScaledObject are not working correctly")
        );
        assert_eq!(scaled_object(995, Some(("False", "TriggerError"))).not_ready(now, 10), None);
        assert_eq!(
            scaled_object(900, Some(("True", "ScaledObjectReady"))).not_ready(now, 10),
            None
        );
        assert_eq!(
            scaled_object(900, Some(("Unknown", "ScaledObjectCheckFailed"))).not_ready(now, 10),
            None
        );
        assert_eq!(scaled_object(900, None).not_ready(now, 10), None, "no Ready condition yet");
    }
}
