//! The `RenderPool` custom resource: its spec, status and the CRD generated from them.
//!
//! Doc comments on fields become the `kubectl explain` text, so they are written for the person
//! who writes a RenderPool, not for the reader of this code.

use k8s_openapi::api::core::v1::{Affinity, Toleration, TopologySpreadConstraint};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A pool of render pods (PDF page images, text, watermarks) with its Gotenberg pool for Office
/// to PDF, sized from the resources given here.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "renderpool.dev",
    version = "v1alpha1",
    kind = "RenderPool",
    plural = "renderpools",
    shortname = "rp",
    namespaced,
    status = "RenderPoolStatus",
    derive = "PartialEq",
    doc = "A pool of render pods with its Gotenberg pool, sized from the resources in its spec.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Slots/Pod",
        type_ = "integer",
        json_path = ".status.slotsPerPod",
        description = "PDFium worker processes per render pod"
    ),
    printcolumn(
        name = "Total Slots",
        type_ = "integer",
        json_path = ".status.totalSlots",
        description = "Slots of the whole pool when every replica is ready"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("size(self.metadata.name) <= 50").message(
        "metadata.name must be at most 50 characters: child names append '-gotenberg' and \
         Service names are limited to 63"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RenderPoolSpec {
    /// Number of render pods. Also set through the /scale subresource (kubectl scale, HPA, KEDA).
    #[serde(default = "defaults::replicas")]
    #[schemars(range(min = 0, max = 1000))]
    pub replicas: i32,

    /// Container image of the render pod.
    #[serde(default = "defaults::image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// Image pull policy of the render pod: Always, IfNotPresent or Never.
    #[serde(default)]
    pub image_pull_policy: PullPolicy,

    /// CPU of one render pod, requests = limits (e.g. "2", "1500m"). Whole cores become slots.
    #[serde(default = "defaults::cpu")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("cpu must be a positive quantity such as \"2\" or \"1500m\""))]
    pub cpu: String,

    /// Memory of one render pod, requests = limits (e.g. "4Gi"). Must hold 128Mi for the
    /// supervisor plus memoryPerSlot for at least one slot.
    #[serde(default = "defaults::memory")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("memory must be a positive quantity such as \"4Gi\""))]
    pub memory: String,

    /// Memory budget of one slot (one PDFium worker process); a worker past it is recycled.
    #[serde(default = "defaults::memory_per_slot")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("memoryPerSlot must be a positive quantity such as \"512Mi\""))]
    pub memory_per_slot: String,

    /// Slots per pod. Omit to derive them from cpu and memory (the usual case); a number here
    /// overrides the derived count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub slots: Option<i32>,

    /// Jobs a render pod queues before it answers 503 with Retry-After.
    #[serde(default = "defaults::queue_depth")]
    #[schemars(range(min = 1, max = 100000))]
    pub queue_depth: i32,

    /// Deadline of one job from its arrival, in milliseconds; the pod's termination grace period
    /// is derived from it so in-flight jobs finish on scale-in.
    #[serde(default = "defaults::job_deadline_ms")]
    #[schemars(range(min = 100, max = 600000))]
    pub job_deadline_ms: i64,

    /// Seconds the pod keeps serving after it is marked for deletion (preStop sleep), so load
    /// balancers stop sending work before shutdown starts.
    #[serde(default = "defaults::pre_stop_seconds")]
    #[schemars(range(min = 0, max = 120))]
    pub pre_stop_seconds: i64,

    /// Milliseconds the render pod waits after SIGTERM with readiness false before it stops
    /// taking new work.
    #[serde(default = "defaults::drain_delay_ms")]
    #[schemars(range(min = 0, max = 120000))]
    pub drain_delay_ms: i64,

    /// Node labels the render pods must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Tolerations of the render pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,

    /// Affinity of the render pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Topology spread of the render pods. Omit to spread across nodes
    /// (kubernetes.io/hostname, maxSkew 1, ScheduleAnyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// PriorityClass of the render pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// The Gotenberg pool that converts Office documents to PDF.
    #[serde(default)]
    pub gotenberg: GotenbergSpec,
}

/// Kubernetes image pull policy.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum PullPolicy {
    /// Pull on every start.
    Always,
    /// Pull when the node lacks the image.
    #[default]
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The value Kubernetes expects in a container spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// Gotenberg: one LibreOffice conversion at a time per replica, so replicas = Office concurrency.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.replicas) && has(self.officeConcurrency))")
    .message("set gotenberg.replicas or gotenberg.officeConcurrency, not both"))]
pub struct GotenbergSpec {
    /// Run a Gotenberg pool for Office to PDF. When false, render pods refuse Office input.
    #[serde(default = "defaults::enabled")]
    pub enabled: bool,

    /// Gotenberg container image.
    #[serde(default = "defaults::gotenberg_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// Gotenberg replicas. Give this or officeConcurrency; both omitted means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 500))]
    pub replicas: Option<i32>,

    /// Office conversions the whole pool may run at once; becomes the replica count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 500))]
    pub office_concurrency: Option<i32>,

    /// CPU of one Gotenberg pod, requests = limits; Chromium concurrency follows its whole cores.
    #[serde(default = "defaults::gotenberg_cpu")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("gotenberg.cpu must be a positive quantity such as \"1\""))]
    pub cpu: String,

    /// Memory of one Gotenberg pod, requests = limits. LibreOffice idles near 800Mi and a large
    /// presentation can take over 2Gi.
    #[serde(default = "defaults::gotenberg_memory")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("gotenberg.memory must be a positive quantity such as \"2Gi\""))]
    pub memory: String,

    /// Conversions after which LibreOffice is restarted (--libreoffice-restart-after).
    #[serde(default = "defaults::restart_after")]
    #[schemars(range(min = 0, max = 100000))]
    pub restart_after: i32,

    /// LibreOffice queue per replica, counting the running request (--libreoffice-max-queue-size);
    /// past it Gotenberg answers 429 at once.
    #[serde(default = "defaults::queue_size")]
    #[schemars(range(min = 1, max = 1000))]
    pub queue_size: i32,

    /// Seconds one request may take, queueing included (--api-timeout).
    #[serde(default = "defaults::timeout_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: i32,
}

impl Default for GotenbergSpec {
    fn default() -> Self {
        Self {
            enabled: defaults::enabled(),
            image: defaults::gotenberg_image(),
            replicas: None,
            office_concurrency: None,
            cpu: defaults::gotenberg_cpu(),
            memory: defaults::gotenberg_memory(),
            restart_after: defaults::restart_after(),
            queue_size: defaults::queue_size(),
            timeout_seconds: defaults::timeout_seconds(),
        }
    }
}

/// What the operator observed and derived; written only when it changes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RenderPoolStatus {
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Render pods that exist (from the render Deployment).
    #[serde(default)]
    pub replicas: i32,
    /// Render pods that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Label selector of the render pods, as a string for the /scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Slots (PDFium worker processes) per render pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_pod: Option<i32>,
    /// spec.replicas x slotsPerPod: the pool's slots when every replica is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_slots: Option<i32>,
    /// Which limit decided the slot count, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_reason: Option<String>,
    /// Office conversions each render pod may have in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub office_concurrency_per_pod: Option<i32>,
    /// Gotenberg replicas wanted (0 when disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gotenberg_replicas: Option<i32>,
    /// Gotenberg replicas that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gotenberg_ready_replicas: Option<i32>,
    /// Ready, Progressing and Degraded, with reasons and messages.
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// Default values, shared by serde (missing fields) and the schema (`kubectl explain`).
mod defaults {
    pub fn replicas() -> i32 {
        2
    }
    pub fn image() -> String {
        "ghcr.io/renderpool/render-pod:0.1.0".into()
    }
    pub fn cpu() -> String {
        "2".into()
    }
    pub fn memory() -> String {
        "2Gi".into()
    }
    pub fn memory_per_slot() -> String {
        "512Mi".into()
    }
    pub fn queue_depth() -> i32 {
        64
    }
    pub fn job_deadline_ms() -> i64 {
        30_000
    }
    pub fn pre_stop_seconds() -> i64 {
        5
    }
    pub fn drain_delay_ms() -> i64 {
        1_000
    }
    pub fn enabled() -> bool {
        true
    }
    pub fn gotenberg_image() -> String {
        "gotenberg/gotenberg:8.36.0".into()
    }
    pub fn gotenberg_cpu() -> String {
        "1".into()
    }
    pub fn gotenberg_memory() -> String {
        "2Gi".into()
    }
    pub fn restart_after() -> i32 {
        10
    }
    pub fn queue_size() -> i32 {
        2
    }
    pub fn timeout_seconds() -> i32 {
        30
    }
}

/// The CRD as installed: generated from the types, with doc-comment line breaks joined so
/// `kubectl explain` reflows the text instead of breaking it mid-sentence.
pub fn definition() -> Result<CustomResourceDefinition, serde_json::Error> {
    let mut value = serde_json::to_value(RenderPool::crd())?;
    join_description_lines(&mut value);
    serde_json::from_value(value)
}

fn join_description_lines(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match child {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|paragraph| paragraph.replace('\n', " "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => join_description_lines(child),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(join_description_lines),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn descriptions_are_reflowed_but_keep_paragraphs() {
        let mut v = serde_json::json!({"a": {"description": "one\ntwo\n\nthree"}, "b": [{"description": "x\ny"}]});
        join_description_lines(&mut v);
        assert_eq!(v["a"]["description"], "one two\n\nthree");
        assert_eq!(v["b"][0]["description"], "x y");
    }

    #[test]
    fn crd_has_scale_status_and_short_name() {
        let crd = definition().unwrap();
        assert_eq!(crd.spec.names.short_names, Some(vec!["rp".to_string()]));
        let version = &crd.spec.versions[0];
        let sub = version.subresources.clone().unwrap();
        assert!(sub.status.is_some());
        let scale = sub.scale.unwrap();
        assert_eq!(scale.label_selector_path.as_deref(), Some(".status.selector"));
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    }
}
