//! The `RenderPool` custom resource: its spec, status and the CRD generated from them.
//!
//! Doc comments on fields become the `kubectl explain` text, so they are written for the person
//! who writes a RenderPool, not for the reader of this code.

use k8s_openapi::api::core::v1::{Affinity, Toleration, TopologySpreadConstraint};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, CustomResourceExt, KubeSchema, Resource};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod bounds;
mod defaults;
mod jobs;

pub use jobs::{
    AzureStoreSpec, GcsStoreSpec, JobsSpec, NatsCredentialsRef, NatsSpec, ObjectStoreSpec,
    S3CredentialsRef, StreamSpec,
};

/// A pool of render pods (PDF page images, text, watermarks) with its Gotenberg pool for Office
/// to PDF, sized from the resources given here.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "renderpool.dev",
    version = "v1beta1",
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
        description = "PDFium worker processes per render pod of the current spec"
    ),
    printcolumn(
        name = "Ready Slots",
        type_ = "integer",
        json_path = ".status.readySlots",
        description = "Slots of the render pods that are ready now, each with its own spec's"
    ),
    printcolumn(
        name = "Total Slots",
        type_ = "integer",
        json_path = ".status.totalSlots",
        description = "Slots of the whole pool once every replica runs the current spec"
    ),
    printcolumn(
        name = "Office",
        type_ = "integer",
        json_path = ".status.gotenbergReadyReplicas",
        description = "Gotenberg replicas ready: Office conversions the pool can run at once"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Backlog",
        type_ = "integer",
        json_path = ".status.jobs.pending",
        description = "Jobs in the pool's stream, queued or running (with spec.jobs)",
        priority = 1
    ),
    printcolumn(
        name = "Last Error",
        type_ = "string",
        json_path = ".status.lastError.reason",
        description = "Why the last pass failed or the pods cannot run, while it lasts"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = bounds::name_fits_children()
)]
#[x_kube(validation = bounds::slot_fits_pod())]
#[x_kube(validation = bounds::gotenberg_timeout_within_deadline())]
#[x_kube(validation = bounds::queue_target_within_queue())]
#[x_kube(validation = bounds::grace_fits_node_autoscalers())]
#[x_kube(validation = bounds::zero_needs_jobs())]
#[x_kube(validation = bounds::backlog_with_jobs())]
#[x_kube(validation = Rule::new("!has(self.scrapers) || has(self.clients)")
    .message("spec.scrapers needs spec.clients: without clients every pod may reach the pool"))]
#[serde(rename_all = "camelCase")]
pub struct RenderPoolSpec {
    /// Number of render pods. Also set through the /scale subresource (kubectl scale, HPA, KEDA);
    /// a change scales the pods without replacing them. With autoscaling set, this belongs to
    /// the autoscaler: leave it out of the manifests you re-apply, or each apply resets it.
    #[serde(default = "defaults::replicas")]
    #[schemars(range(min = bounds::REPLICAS.min, max = bounds::REPLICAS.max))]
    pub replicas: i32,

    /// Container image of the render pod.
    #[serde(default = "defaults::image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// Image pull policy of the render pod: Always, IfNotPresent or Never.
    #[serde(default)]
    pub image_pull_policy: PullPolicy,

    /// CPU of one render pod, requests = limits (e.g. "2", "1500m"), at most 256 cores. Whole
    /// cores become slots.
    #[serde(default = "defaults::cpu")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::cpu("cpu", bounds::RENDER_CPU_CORES, "2"))]
    pub cpu: String,

    /// Memory of one render pod, requests = limits (e.g. "4Gi"), at most 1Ti. Must hold the
    /// supervisor's share (32Mi + a 64Mi Office cache + 2 x maxBodySize for its upload and
    /// answer budgets, at least 128Mi; 296Mi by default) plus memoryPerSlot for at least one
    /// slot.
    #[serde(default = "defaults::memory")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::memory("memory", bounds::MEMORY_MIB, "4Gi"))]
    pub memory: String,

    /// Memory budget of one slot (one PDFium worker process); a worker past it is recycled.
    /// Smaller than memory.
    #[serde(default = "defaults::memory_per_slot")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::memory("memoryPerSlot", bounds::MEMORY_MIB, "512Mi"))]
    pub memory_per_slot: String,

    /// Slots per pod. Omit to derive them from cpu and memory (the usual case); a number here
    /// overrides the derived count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::SLOTS.min, max = bounds::SLOTS.max))]
    pub slots: Option<i32>,

    /// Jobs a render pod queues before it answers 503 with Retry-After.
    #[serde(default = "defaults::queue_depth")]
    #[schemars(range(min = bounds::QUEUE_DEPTH.min, max = bounds::QUEUE_DEPTH.max))]
    pub queue_depth: i32,

    /// Deadline of one job from its arrival, in milliseconds (an Office conversion included);
    /// the pod's termination grace period is derived from it so in-flight jobs finish on
    /// scale-in. preStopSeconds + drainDelayMs + jobDeadlineMs + 5 s may not exceed 600 s, the
    /// longest cluster-autoscaler waits for a pod it drains.
    #[serde(default = "defaults::job_deadline_ms")]
    #[schemars(range(min = bounds::JOB_DEADLINE_MS.min, max = bounds::JOB_DEADLINE_MS.max))]
    pub job_deadline_ms: i64,

    /// Seconds a render or Gotenberg pod keeps serving after it is marked for deletion (preStop
    /// sleep), so load balancers stop sending work before shutdown starts. 0 leaves the hook out.
    #[serde(default = "defaults::pre_stop_seconds")]
    #[schemars(range(min = bounds::PRE_STOP_SECONDS.min, max = bounds::PRE_STOP_SECONDS.max))]
    pub pre_stop_seconds: i64,

    /// Milliseconds the render pod waits after SIGTERM with readiness false before it stops
    /// taking new work.
    #[serde(default = "defaults::drain_delay_ms")]
    #[schemars(range(min = bounds::DRAIN_DELAY_MS.min, max = bounds::DRAIN_DELAY_MS.max))]
    pub drain_delay_ms: i64,

    /// Largest upload a render pod accepts (e.g. "100Mi"), at most 1Gi; Gotenberg's body limit
    /// and scratch space follow from it.
    #[serde(default = "defaults::max_body_size")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::memory("maxBodySize", bounds::BODY_MIB, "100Mi"))]
    pub max_body_size: String,

    /// Node labels the render and Gotenberg pods must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Tolerations of the render and Gotenberg pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,

    /// Affinity of the render and Gotenberg pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Topology spread of the render and Gotenberg pods. Omit to spread each kind across nodes
    /// (kubernetes.io/hostname, maxSkew 1, ScheduleAnyway). Given constraints apply to both
    /// kinds as written: add matchLabelKeys [app.kubernetes.io/component] so each kind spreads
    /// on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// PriorityClass of the render and Gotenberg pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Keep node autoscalers from taking the render pods' nodes away on their own initiative
    /// (Karpenter's consolidation and drift: the pods get karpenter.sh/do-not-disrupt;
    /// cluster-autoscaler's scale-down: safe-to-evict false). Off by default: such a node is
    /// drained, and each render pod on it finishes or hands back its running job within the
    /// grace period (the job runs again on another pod; nothing is lost, the work done so far
    /// is). On, a busy node stays until the pods leave by a scale-in or a rollout; with
    /// autoscaling.minReplicas 0 a job pool holds nodes only while it has jobs, so this keeps
    /// long jobs from being restarted without pinning idle nodes.
    #[serde(default)]
    pub do_not_disrupt: bool,

    /// The Gotenberg pool that converts Office documents to PDF.
    #[serde(default)]
    pub gotenberg: GotenbergSpec,

    /// Scale the render pods on their saturation: the operator keeps a HorizontalPodAutoscaler
    /// named like the pool that sets replicas through /scale. With spec.jobs it keeps a KEDA
    /// ScaledObject named like the pool instead, which also scales on the job backlog and may
    /// take the pool to zero pods (KEDA must be installed; without its CRD the pool is Degraded,
    /// reason KedaMissing). Omit to scale by hand (the operator then deletes the autoscaler it
    /// made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,

    /// The pods that may call the render pods. Given, the operator keeps a NetworkPolicy named
    /// <pool>-render that admits to the render pods' port only these pods (and spec.scrapers),
    /// and status condition Restricted is True. Omitted, the render pods are open to every pod
    /// that can reach them (Restricted is False, reason OpenToAllPods) and the operator deletes
    /// the policy it made. The cluster's network plugin enforces the policy (Calico, Cilium,
    /// ...); with a plugin that ignores NetworkPolicies it changes nothing. The kubelet's probes
    /// are not affected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub clients: Option<Vec<PeerSelector>>,

    /// The pods that may scrape the render pods' /metrics (Prometheus, an OpenTelemetry
    /// collector) when spec.clients is set. /metrics is on the API's port, so a scraper reaches
    /// the /v1 routes too: set spec.auth to keep them to the clients holding the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100))]
    pub scrapers: Option<Vec<PeerSelector>>,

    /// Bearer-token authentication of the render pods' /v1 routes. Omit to let every pod that
    /// reaches them call them; /healthz, /readyz, /metrics and /openapi.json never ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// How the render and Gotenberg pods are replaced when their template changes (image,
    /// resources, most spec fields; a scale replaces none). Omit for maxSurge 1 and
    /// maxUnavailable 0: each new pod starts before an old one stops, so capacity never drops,
    /// but a node must have room for one more pod. On nodes without that room (the new pod
    /// stays Pending, and status says Unschedulable) set maxSurge 0 and maxUnavailable 1: each
    /// old pod stops (finishing its work) before its replacement starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,

    /// Durable jobs (POST /v1/jobs) through a NATS JetStream stream, with documents and results
    /// in an S3-compatible object store. Omit to run without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobsSpec>,
}

/// The rolling replacement of the render and Gotenberg pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = bounds::rollout_moves())]
pub struct RolloutSpec {
    /// Pods started above the replica count while old ones still run. 0 needs no room beyond
    /// the pool's own pods.
    #[serde(default = "defaults::max_surge")]
    #[schemars(range(min = bounds::ROLLOUT_PODS.min, max = bounds::ROLLOUT_PODS.max))]
    pub max_surge: i32,

    /// Pods that may be missing from the replica count while they are replaced: their
    /// capacity is gone meanwhile (and with one Gotenberg pod, Office conversion). At least 1
    /// when maxSurge is 0.
    #[serde(default)]
    #[schemars(range(min = bounds::ROLLOUT_PODS.min, max = bounds::ROLLOUT_PODS.max))]
    pub max_unavailable: i32,
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self { max_surge: defaults::max_surge(), max_unavailable: 0 }
    }
}

/// Pods that may reach the render pods, by the labels of the pods and of their namespaces.
/// With both selectors, the pods matching podSelector in the namespaces matching
/// namespaceSelector.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.podSelector) || has(self.namespaceSelector)")
    .message("give podSelector, namespaceSelector or both"))]
pub struct PeerSelector {
    /// Labels of the pods. Alone, it selects pods in the pool's namespace; {} selects all of
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,

    /// Labels of the namespaces (e.g. kubernetes.io/metadata.name: web). Alone, it selects every
    /// pod in those namespaces; {} selects every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

/// Bearer-token authentication of the /v1 routes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// The Secret in the pool's namespace and its key holding the token. Each render pod mounts
    /// it read-only and answers a /v1 request without the header Authorization: Bearer <token>
    /// with 401 unauthorized; whitespace around the token is not part of it. A changed Secret
    /// takes effect without a restart once the kubelet updates the mounted copy (within about a
    /// minute), so rotate by letting clients send the new token only after that. Render pods
    /// wait in ContainerCreating while the Secret or the key is missing.
    pub token_secret_ref: SecretKeyRef,
}

/// A key of a Secret in the pool's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"))]
    pub name: String,

    /// The key in the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

/// The autoscaler of the render pods. While it is set, spec.replicas belongs to the autoscaler:
/// the operator never writes it, and a manifest re-applied with replicas in it resets the count.
/// Gotenberg replicas do not autoscale; each render pod's Office share follows the render count.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = bounds::min_within_max())]
pub struct AutoscalingSpec {
    /// Fewest render pods the autoscaler keeps. 0 only with spec.jobs: the pool then sleeps
    /// with no pod while no job is pending and wakes on the first one; a synchronous request
    /// meanwhile finds no pod at all (the Service has no endpoints), not a 503.
    #[serde(default = "defaults::min_replicas")]
    #[schemars(range(
        min = bounds::AUTOSCALING_MIN_REPLICAS.min,
        max = bounds::AUTOSCALING_MIN_REPLICAS.max
    ))]
    pub min_replicas: i32,

    /// Most render pods the autoscaler may run; at least minReplicas.
    #[schemars(range(
        min = bounds::AUTOSCALING_REPLICAS.min,
        max = bounds::AUTOSCALING_REPLICAS.max
    ))]
    pub max_replicas: i32,

    /// Busy slots over slots the autoscaler aims for, in percent, averaged over the render pods
    /// (the per-pod metric renderpod_busy_slot_ratio from prometheus-adapter). Above it pods are
    /// added, below it they are removed after the stabilisation window.
    #[serde(default = "defaults::target_busy_percent")]
    #[schemars(range(min = bounds::TARGET_BUSY_PERCENT.min, max = bounds::TARGET_BUSY_PERCENT.max))]
    pub target_busy_percent: i32,

    /// Jobs waiting per render pod the autoscaler aims for, averaged over the pods (the per-pod
    /// metric renderpod_queue_depth), at most queueDepth. Optional: when set, the autoscaler
    /// follows whichever of the two targets asks for more pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::TARGET_QUEUE_DEPTH.min, max = bounds::TARGET_QUEUE_DEPTH.max))]
    pub target_queue_depth: Option<i32>,

    /// Seconds the load must stay low before the autoscaler removes pods (the highest
    /// recommendation of that window wins), so a lull between bursts does not shed capacity.
    /// Scale-up is not delayed. With backlog and minReplicas 0, also the seconds with no
    /// pending job before the pool goes to zero pods, and a new pool's time before its first.
    #[serde(default = "defaults::scale_down_stabilization_seconds")]
    #[schemars(range(
        min = bounds::SCALE_DOWN_STABILIZATION_SECONDS.min,
        max = bounds::SCALE_DOWN_STABILIZATION_SECONDS.max
    ))]
    pub scale_down_stabilization_seconds: i32,

    /// The job backlog trigger, required with spec.jobs (and refused without): KEDA reads the
    /// pool's consumer on the NATS monitoring endpoint and adds pods while more jobs are
    /// pending (queued or running) than the target per slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<BacklogTrigger>,

    /// With spec.jobs: the Prometheus server (http:// or https://) KEDA asks for the pool's
    /// busy-slot ratio, so synchronous load still scales the pool (toward targetBusyPercent).
    /// Prometheus must scrape the render pods with the labels of
    /// deploy/autoscaling/prometheus-scrape.yaml. Omit to scale a job pool on its backlog alone.
    /// Ignored without spec.jobs (the HPA reads the ratio through prometheus-adapter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')")
        .message("autoscaling.prometheusAddress must start with http:// or https://"))]
    pub prometheus_address: Option<String>,
}

/// Where KEDA reads the job backlog, and how many pending jobs a slot should have.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BacklogTrigger {
    /// The NATS server's monitoring endpoint as host:port (its -m port, e.g.
    /// nats.nats.svc:8222), where KEDA reads /jsz; the pool's stream and its consumer render
    /// follow from spec.jobs.queue.
    #[schemars(length(min = 1, max = 1024))]
    #[schemars(pattern(r"^[^/\s]+:[0-9]{1,5}$"))]
    pub nats_monitoring_endpoint: String,

    /// Read the monitoring endpoint over https.
    #[serde(default)]
    pub use_https: bool,

    /// The NATS account holding the stream; $G is the account of a server without accounts.
    #[serde(default = "defaults::nats_account")]
    #[schemars(length(min = 1, max = 256))]
    pub account: String,

    /// Pending jobs (queued plus running) per render slot the pool aims for: KEDA wants
    /// pending / (target x slots per pod) pods.
    #[serde(default = "defaults::target_pending_jobs_per_slot")]
    #[schemars(range(
        min = bounds::TARGET_PENDING_JOBS_PER_SLOT.min,
        max = bounds::TARGET_PENDING_JOBS_PER_SLOT.max
    ))]
    pub target_pending_jobs_per_slot: i32,

    /// Pending jobs above which a pool at zero wakes (KEDA's activation threshold, apart from
    /// the scaling target): 0 wakes it on the first job.
    #[serde(default)]
    #[schemars(range(
        min = bounds::ACTIVATION_PENDING_JOBS.min,
        max = bounds::ACTIVATION_PENDING_JOBS.max
    ))]
    pub activation_pending_jobs: i32,
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

impl RenderPoolSpec {
    /// Every whole-number field with its bound, by its path: validation checks them again, for
    /// a RenderPool stored under an older CRD. A new bounded field is added here.
    pub fn bounded_numbers(&self) -> [(&'static str, Option<i64>, bounds::Bound); 24] {
        let g = &self.gotenberg;
        let optional = |v: Option<i32>| v.map(i64::from);
        let rollout = self.rollout;
        let jobs = self.jobs.as_ref();
        let stream = jobs.map(|j| j.stream);
        let autoscaling = self.autoscaling.as_ref();
        let scaling = |field: fn(&AutoscalingSpec) -> i32| optional(autoscaling.map(field));
        let backlog = autoscaling.and_then(|a| a.backlog.as_ref());
        [
            ("spec.replicas", Some(self.replicas.into()), bounds::REPLICAS),
            ("spec.slots", optional(self.slots), bounds::SLOTS),
            ("spec.queueDepth", Some(self.queue_depth.into()), bounds::QUEUE_DEPTH),
            ("spec.jobDeadlineMs", Some(self.job_deadline_ms), bounds::JOB_DEADLINE_MS),
            ("spec.preStopSeconds", Some(self.pre_stop_seconds), bounds::PRE_STOP_SECONDS),
            ("spec.drainDelayMs", Some(self.drain_delay_ms), bounds::DRAIN_DELAY_MS),
            ("spec.gotenberg.replicas", optional(g.replicas), bounds::GOTENBERG_REPLICAS),
            (
                "spec.gotenberg.officeConcurrency",
                optional(g.office_concurrency),
                bounds::GOTENBERG_REPLICAS,
            ),
            ("spec.gotenberg.restartAfter", Some(g.restart_after.into()), bounds::RESTART_AFTER),
            ("spec.gotenberg.queueSize", Some(g.queue_size.into()), bounds::QUEUE_SIZE),
            ("spec.gotenberg.timeoutSeconds", optional(g.timeout_seconds), bounds::TIMEOUT_SECONDS),
            ("spec.rollout.maxSurge", optional(rollout.map(|r| r.max_surge)), bounds::ROLLOUT_PODS),
            (
                "spec.rollout.maxUnavailable",
                optional(rollout.map(|r| r.max_unavailable)),
                bounds::ROLLOUT_PODS,
            ),
            (
                "spec.jobs.stream.maxMessages",
                stream.map(|s| s.max_messages),
                bounds::STREAM_MAX_MESSAGES,
            ),
            (
                "spec.jobs.stream.maxAgeSeconds",
                stream.map(|s| s.max_age_seconds),
                bounds::STREAM_MAX_AGE_SECONDS,
            ),
            (
                "spec.jobs.ackWaitSeconds",
                optional(jobs.map(|j| j.ack_wait_seconds)),
                bounds::ACK_WAIT_SECONDS,
            ),
            (
                "spec.jobs.maxDeliveries",
                optional(jobs.map(|j| j.max_deliveries)),
                bounds::MAX_DELIVERIES,
            ),
            (
                "spec.autoscaling.minReplicas",
                scaling(|a| a.min_replicas),
                bounds::AUTOSCALING_MIN_REPLICAS,
            ),
            (
                "spec.autoscaling.maxReplicas",
                scaling(|a| a.max_replicas),
                bounds::AUTOSCALING_REPLICAS,
            ),
            (
                "spec.autoscaling.targetBusyPercent",
                scaling(|a| a.target_busy_percent),
                bounds::TARGET_BUSY_PERCENT,
            ),
            (
                "spec.autoscaling.targetQueueDepth",
                optional(autoscaling.and_then(|a| a.target_queue_depth)),
                bounds::TARGET_QUEUE_DEPTH,
            ),
            (
                "spec.autoscaling.scaleDownStabilizationSeconds",
                scaling(|a| a.scale_down_stabilization_seconds),
                bounds::SCALE_DOWN_STABILIZATION_SECONDS,
            ),
            (
                "spec.autoscaling.backlog.targetPendingJobsPerSlot",
                optional(backlog.map(|b| b.target_pending_jobs_per_slot)),
                bounds::TARGET_PENDING_JOBS_PER_SLOT,
            ),
            (
                "spec.autoscaling.backlog.activationPendingJobs",
                optional(backlog.map(|b| b.activation_pending_jobs)),
                bounds::ACTIVATION_PENDING_JOBS,
            ),
        ]
    }
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

/// Which Gotenberg command the image runs; the flags differ between the two.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum GotenbergFlavor {
    /// The LibreOffice-only build (ghcr.io/renderpool/gotenberg-libreoffice): no Chromium at
    /// all, so no HTML or URL conversion routes.
    #[default]
    #[serde(rename = "libreoffice")]
    LibreOffice,
    /// The official image (gotenberg/gotenberg): the operator turns its Chromium routes off,
    /// since HTML and URL conversion would let a document reach other services.
    #[serde(rename = "full")]
    Full,
}

/// Gotenberg: one LibreOffice conversion at a time per replica, so replicas = Office concurrency.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.replicas) && has(self.officeConcurrency))")
    .message(Message::Expression(r#""gotenberg.replicas %d and gotenberg.officeConcurrency %d both set the Gotenberg replicas: keep one".format([self.replicas, self.officeConcurrency])"#.into())))]
pub struct GotenbergSpec {
    /// Run a Gotenberg pool for Office to PDF: a Deployment, Service, PodDisruptionBudget and
    /// NetworkPolicy named <pool>-gotenberg, and the ConfigMap <pool>-office holding each render
    /// pod's share of conversions. When false none of these exist and render pods refuse Office
    /// input.
    #[serde(default = "defaults::enabled")]
    pub enabled: bool,

    /// Which Gotenberg the image runs: libreoffice (the LibreOffice-only build, the default) or
    /// full (the official image, whose Chromium routes are turned off). Must match the image.
    #[serde(default)]
    pub flavor: GotenbergFlavor,

    /// Gotenberg container image; the default is the LibreOffice-only build. For the official
    /// gotenberg/gotenberg image set flavor to full.
    #[serde(default = "defaults::gotenberg_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// Gotenberg replicas. Give this or officeConcurrency; both omitted means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::GOTENBERG_REPLICAS.min, max = bounds::GOTENBERG_REPLICAS.max))]
    pub replicas: Option<i32>,

    /// Office conversions the whole pool may run at once; becomes the replica count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::GOTENBERG_REPLICAS.min, max = bounds::GOTENBERG_REPLICAS.max))]
    pub office_concurrency: Option<i32>,

    /// CPU of one Gotenberg pod, requests = limits, at most 64 cores.
    #[serde(default = "defaults::gotenberg_cpu")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::cpu("gotenberg.cpu", bounds::GOTENBERG_CPU_CORES, "1"))]
    pub cpu: String,

    /// Memory of one Gotenberg pod, requests = limits, at most 1Ti. LibreOffice idles near 800Mi
    /// and a large presentation can take over 2Gi.
    #[serde(default = "defaults::gotenberg_memory")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = bounds::memory("gotenberg.memory", bounds::MEMORY_MIB, "2Gi"))]
    pub memory: String,

    /// Conversions after which LibreOffice is restarted (--libreoffice-restart-after; 0 never).
    #[serde(default = "defaults::restart_after")]
    #[schemars(range(min = bounds::RESTART_AFTER.min, max = bounds::RESTART_AFTER.max))]
    pub restart_after: i32,

    /// LibreOffice queue per replica, counting the running request (--libreoffice-max-queue-size);
    /// past it Gotenberg answers 429 at once.
    #[serde(default = "defaults::queue_size")]
    #[schemars(range(min = bounds::QUEUE_SIZE.min, max = bounds::QUEUE_SIZE.max))]
    pub queue_size: i32,

    /// Seconds Gotenberg gives one request, queueing included (--api-timeout); also how long a
    /// stopping Gotenberg pod waits for its conversion. Omit to use the job deadline
    /// (jobDeadlineMs rounded up to whole seconds); a value may not exceed it, since a render pod
    /// stops waiting for a conversion at its job deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::TIMEOUT_SECONDS.min, max = bounds::TIMEOUT_SECONDS.max))]
    pub timeout_seconds: Option<i32>,
}

impl Default for GotenbergSpec {
    fn default() -> Self {
        Self {
            enabled: defaults::enabled(),
            flavor: GotenbergFlavor::default(),
            image: defaults::gotenberg_image(),
            replicas: None,
            office_concurrency: None,
            cpu: defaults::gotenberg_cpu(),
            memory: defaults::gotenberg_memory(),
            restart_after: defaults::restart_after(),
            queue_size: defaults::queue_size(),
            timeout_seconds: None,
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
    /// Slots (PDFium worker processes) of each render pod of the current spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_pod: Option<i32>,
    /// spec.replicas x slotsPerPod: the pool's slots once every replica runs the current spec
    /// and is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_slots: Option<i32>,
    /// The slots serving now: those of the render pods that are ready, each pod counted with
    /// the slots of the spec it runs (during a rollout, pods of the previous spec may have
    /// another count; see replicaSets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_slots: Option<i32>,
    /// While render pods of more than one spec run (a rollout), the pods of each ReplicaSet,
    /// newest first, with the slots each of its pods runs; absent when one spec runs them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_sets: Vec<ReplicaSetStatus>,
    /// Which limit decided the slot count, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_reason: Option<String>,
    /// Office conversions each render pod may have in flight: its share of the Gotenberg
    /// replicas, kept in the ConfigMap <pool>-office.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub office_concurrency_per_pod: Option<i32>,
    /// Gotenberg replicas wanted (0 when disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gotenberg_replicas: Option<i32>,
    /// Gotenberg replicas that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gotenberg_ready_replicas: Option<i32>,
    /// Why the last pass over this pool failed, or why its pods cannot run or its rollout
    /// cannot progress (Unschedulable, CannotStart, RolloutStuck), or why KEDA cannot scale it
    /// on its job backlog (BacklogUnreadable); absent once that is over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// With spec.jobs, the pool's job backlog as a ready render pod last read it from the
    /// stream; absent while no render pod can tell it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobsStatus>,
    /// Ready, Progressing, Degraded and Restricted (whether only spec.clients may call the
    /// render pods), with reasons and messages.
    #[serde(default)]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

/// The durable jobs of the pool.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct JobsStatus {
    /// Jobs in the pool's NATS stream: queued, or taken by a render pod and not yet ended. Read
    /// by the render pods every 10 s and copied here every 30 s. The operator asks the render
    /// pods' /readyz for it: with spec.clients, list the operator's pods in spec.scrapers, or
    /// the policy keeps it from asking and this stays absent.
    pub pending: i64,
}

/// The render pods of one ReplicaSet of the render Deployment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetStatus {
    /// The ReplicaSet's name.
    pub name: String,
    /// Its pods run the current spec.
    pub current: bool,
    /// Its pods.
    pub replicas: i32,
    /// Its pods that are ready.
    pub ready_replicas: i32,
    /// Slots each of its pods runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_pod: Option<i32>,
}

/// A failure a person can act on: a refused spec, a write the API server refused, or pods that
/// cannot run.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct LastError {
    /// Short PascalCase reason, e.g. MemoryTooSmallForOneSlot or Forbidden.
    pub reason: String,
    /// What went wrong, in at most a few hundred characters.
    pub message: String,
}

/// Older names of the stored version's schema, still served so manifests and clients written
/// for them keep working. Each has exactly the stored version's schema, so the API server
/// converts between them by renaming the apiVersion alone (conversion strategy None, no
/// webhook); a version whose schema differed would need a conversion webhook.
pub const DEPRECATED_VERSIONS: [&str; 1] = ["v1alpha1"];

/// The CRD as installed: generated from the types (the version they carry is the one stored),
/// with [`DEPRECATED_VERSIONS`] served beside it, and doc-comment line breaks joined so
/// `kubectl explain` reflows the text instead of breaking it mid-sentence.
pub fn definition() -> Result<CustomResourceDefinition, serde_json::Error> {
    let mut crd = RenderPool::crd();
    if let Some(stored) = crd.spec.versions.first().cloned() {
        crd.spec.versions.extend(DEPRECATED_VERSIONS.map(|name| CustomResourceDefinitionVersion {
            name: name.into(),
            storage: false,
            deprecated: Some(true),
            deprecation_warning: Some(format!(
                "renderpool.dev/{name} RenderPool is deprecated; use {}: the same fields",
                RenderPool::api_version(&())
            )),
            ..stored.clone()
        }));
    }
    crd.spec.conversion = Some(CustomResourceConversion { strategy: "None".into(), webhook: None });
    let mut value = serde_json::to_value(crd)?;
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
    fn the_job_deadline_explains_the_grace_period_with_the_bounds_the_operator_uses() {
        let schema = serde_json::to_value(schemars::schema_for!(RenderPoolSpec)).unwrap();
        let text = schema["properties"]["jobDeadlineMs"]["description"].as_str().unwrap();
        let sum = format!(
            "jobDeadlineMs + {} s may not exceed {} s",
            bounds::GRACE_MARGIN_SECONDS,
            bounds::MAX_GRACE_SECONDS
        );
        assert!(text.replace('\n', " ").contains(&sum), "{text}");
    }

    #[test]
    fn crd_has_scale_status_and_short_name() {
        let crd = definition().unwrap();
        assert_eq!(crd.spec.names.short_names, Some(vec!["rp".to_string()]));
        for version in &crd.spec.versions {
            let sub = version.subresources.clone().unwrap();
            assert!(sub.status.is_some(), "{}", version.name);
            let scale = sub.scale.unwrap();
            assert_eq!(scale.label_selector_path.as_deref(), Some(".status.selector"));
            assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        }
    }

    #[test]
    fn v1beta1_is_stored_and_v1alpha1_is_served_deprecated_with_the_same_schema() {
        let crd = definition().unwrap();
        let names: Vec<(&str, bool, bool)> =
            crd.spec.versions.iter().map(|v| (v.name.as_str(), v.served, v.storage)).collect();
        assert_eq!(names, [("v1beta1", true, true), ("v1alpha1", true, false)]);
        assert_eq!(RenderPool::api_version(&()), "renderpool.dev/v1beta1");
        let (stored, old) = (&crd.spec.versions[0], &crd.spec.versions[1]);
        // Identical schemas and columns: what makes conversion strategy None lossless.
        assert_eq!(stored.schema, old.schema);
        assert_eq!(stored.additional_printer_columns, old.additional_printer_columns);
        assert_eq!(stored.subresources, old.subresources);
        assert_eq!(crd.spec.conversion.as_ref().unwrap().strategy, "None");
        assert_eq!(old.deprecated, Some(true));
        assert_eq!(
            old.deprecation_warning.as_deref(),
            Some(
                "renderpool.dev/v1alpha1 RenderPool is deprecated; use renderpool.dev/v1beta1: \
                 the same fields"
            )
        );
        assert_eq!((stored.deprecated, &stored.deprecation_warning), (None, &None));
    }
}
