//! Validation: turns a spec into checked, parsed figures, or an error a person can act on.
//!
//! The CRD's schema and CEL rules refuse what can be checked without the sizing formula
//! (quantity syntax and ceilings, number ranges, replicas vs officeConcurrency, the Gotenberg
//! timeout against the job deadline); the same bounds are checked here again, so a RenderPool
//! stored under an older CRD becomes Degraded instead of reaching the arithmetic. What needs the
//! formula (does the memory hold one slot?) is only checked here, and reported as Degraded.
//! So is the render pods' termination grace period against node autoscalers' drain limit, which
//! the CRD also refuses.

mod jobs;

use crate::crd::bounds::{self, Bound};
use crate::crd::{AutoscalingSpec, RenderPoolSpec, RolloutSpec};
use renderpool_api::render_pod::OFFICE_CACHE;
use renderpool_sizing::{
    Limits, MIB, QuantityError, SizingError, SlotPlan, SlotPolicy, office_conversions_per_pod,
    parse_cpu_millis, parse_memory_bytes, plan_slots, supervisor_share,
};

/// Room for the multipart framing around the one file a render pod sends Gotenberg.
const MULTIPART_MARGIN: u64 = MIB;
/// Gotenberg's scratch space beyond the uploads it holds: LibreOffice's profile.
const PROFILE_SPACE: u64 = 256 * MIB;
/// Uploads Gotenberg's scratch space holds: the input, the PDF, and copies while converting.
const SCRATCH_UPLOADS: u64 = 4;

/// A spec the operator cannot build a pool from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A quantity the sizing code cannot read (the CRD's rules normally catch these first).
    #[error("{field}: {source}")]
    Quantity {
        /// Spec field path.
        field: &'static str,
        /// What was wrong with it.
        source: QuantityError,
    },
    /// The sizing arithmetic cannot work with the figures (they add up past 64 bits).
    #[error("render pod sizing: {0}")]
    Sizing(#[from] SizingError),
    /// A quantity that must be above zero is zero (the CRD's rules normally refuse it first).
    #[error("{field} {value} must be greater than zero")]
    Zero {
        /// Spec field path.
        field: &'static str,
        /// The quantity as written.
        value: String,
    },
    /// spec.memory cannot hold the supervisor and one slot: named with the figures as written.
    #[error(
        "spec.memory {memory} cannot hold one slot: it needs at least {needed_mib} MiB, \
         spec.memoryPerSlot {memory_per_slot} plus the supervisor's {overhead_mib} MiB (an \
         upload and an answer of spec.maxBodySize {max_body_size}, the Office cache, its rest); \
         raise spec.memory, or lower spec.memoryPerSlot or spec.maxBodySize"
    )]
    MemoryTooSmall {
        /// spec.memory as written.
        memory: String,
        /// spec.memoryPerSlot as written.
        memory_per_slot: String,
        /// spec.maxBodySize as written: the supervisor's share holds two of it.
        max_body_size: String,
        /// The least memory that holds one slot.
        needed_mib: u64,
        /// The supervisor's share (its body limit and the Office cache).
        overhead_mib: u64,
    },
    /// A figure outside its bounds (the CRD's rules normally refuse these first).
    #[error("{field} is {value}; it must be {allowed}")]
    OutOfRange {
        /// Spec field path.
        field: &'static str,
        /// The figure as given.
        value: String,
        /// What is allowed, in words.
        allowed: String,
    },
    /// The render pods' termination grace period is past what node autoscalers wait for.
    #[error(
        "the render pods' termination grace period would be {seconds} s (preStopSeconds + \
         drainDelayMs + jobDeadlineMs + {margin} s); cluster-autoscaler kills a pod it drains \
         after {max} s, so lower spec.jobDeadlineMs, spec.drainDelayMs or spec.preStopSeconds",
        margin = bounds::GRACE_MARGIN_SECONDS,
        max = bounds::MAX_GRACE_SECONDS
    )]
    GracePeriodTooLong {
        /// The grace period the spec asks for.
        seconds: i64,
    },
    /// spec.clients or spec.scrapers that would not mean what it says (the CRD's rules
    /// normally refuse these first): an empty list of clients would admit every pod.
    #[error("{field} {problem}")]
    Access {
        /// Spec field path.
        field: String,
        /// What is wrong with it and what to do.
        problem: &'static str,
    },
    /// spec.rollout allows neither a surge pod nor a missing one (the CRD's rules normally
    /// refuse it first).
    #[error(
        "spec.rollout.maxSurge 0 and spec.rollout.maxUnavailable 0 would never replace a pod: \
         set maxSurge 1 (needs room for one more pod) or maxUnavailable 1 (one pod less meanwhile)"
    )]
    RolloutStandsStill,
    /// spec.jobs that the render pods would refuse at start (the CRD's rules normally refuse
    /// these first).
    #[error("{field} {problem}")]
    Jobs {
        /// Spec field path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A job pool's autoscaler is a KEDA ScaledObject, and the cluster has no KEDA.
    #[error(
        "spec.autoscaling with spec.jobs is run by a KEDA ScaledObject, and this cluster has no \
         KEDA (the API server serves no scaledobjects.keda.sh): install KEDA v2, or remove \
         spec.autoscaling to scale the pool by hand; an HPA the pool had is kept meanwhile"
    )]
    KedaMissing,
    /// The API server refused a child built from this spec (e.g. a malformed toleration).
    #[error("the API server refused {0}; correct the RenderPool spec")]
    Rejected(String),
}

impl SpecError {
    /// Short PascalCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Quantity { .. } => "InvalidQuantity",
            Self::Sizing(SizingError::MemoryTooSmall { .. }) | Self::MemoryTooSmall { .. } => {
                "MemoryTooSmallForOneSlot"
            }
            Self::Sizing(SizingError::Zero(_)) | Self::Zero { .. } => "ZeroSizing",
            Self::Sizing(SizingError::TooLarge(_)) | Self::OutOfRange { .. } => "OutOfRange",
            Self::RolloutStandsStill => "RolloutStandsStill",
            Self::GracePeriodTooLong { .. } => "GracePeriodTooLong",
            Self::Access { .. } => "InvalidClients",
            Self::Jobs { .. } => "InvalidJobs",
            Self::KedaMissing => "KedaMissing",
            Self::Rejected(_) => "ChildRejected",
        }
    }
}

/// The figures every child is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPlan {
    /// Render pod CPU limit in millicores.
    pub cpu_millis: u64,
    /// Render pod memory limit in bytes.
    pub memory_bytes: u64,
    /// Slot plan from the shared formula.
    pub slots: SlotPlan,
    /// Render replicas wanted.
    pub replicas: i32,
    /// Seconds the kubelet gives a stopping render pod before SIGKILL.
    pub grace_period_seconds: i64,
    /// Gotenberg figures, when the pool has one.
    pub gotenberg: Option<GotenbergPlan>,
    /// spec.clients is set: a NetworkPolicy admits only them (and the scrapers).
    pub clients_only: bool,
    /// How both Deployments replace their pods (spec.rollout or its default).
    pub rollout: RolloutSpec,
}

/// The checked figures of the Gotenberg pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GotenbergPlan {
    /// Gotenberg replicas, i.e. Office conversions the pool runs at once.
    pub replicas: i32,
    /// Office conversions one render pod may have in flight (the `<pool>-office` ConfigMap).
    pub office_per_pod: u32,
    /// Seconds one request may take, queueing included; also the graceful-shutdown wait.
    pub timeout_seconds: u32,
    /// Largest multipart body Gotenberg accepts: the render pod's upload limit plus framing.
    pub body_limit_bytes: u64,
    /// Size limit of Gotenberg's disk-backed /tmp.
    pub scratch_bytes: u64,
}

impl PoolPlan {
    /// Slots of the whole pool when every replica is ready.
    pub fn total_slots(&self) -> i32 {
        self.slots_of(self.replicas)
    }

    /// Slots of `pods` render pods.
    pub fn slots_of(&self, pods: i32) -> i32 {
        i32::try_from(self.slots.slots).unwrap_or(i32::MAX).saturating_mul(pods.max(0))
    }
}

/// Checks a spec and derives its figures with the shared sizing code.
pub fn validate(spec: &RenderPoolSpec) -> Result<PoolPlan, SpecError> {
    check_bounds(spec.bounded_numbers())?;
    check_access(spec)?;
    if let Some(jobs) = &spec.jobs {
        jobs::check(jobs)?;
    }
    if let Some(autoscaling) = &spec.autoscaling {
        check_autoscaling(autoscaling, spec.queue_depth, spec.jobs.is_some())?;
    }
    let rollout = spec.rollout.unwrap_or_default();
    if rollout.max_surge == 0 && rollout.max_unavailable == 0 {
        return Err(SpecError::RolloutStandsStill);
    }
    let grace_period_seconds = grace_period_seconds(spec);
    if grace_period_seconds > bounds::MAX_GRACE_SECONDS {
        return Err(SpecError::GracePeriodTooLong { seconds: grace_period_seconds });
    }
    let cpu_millis = cpu(&spec.cpu, "spec.cpu", bounds::RENDER_CPU_CORES)?;
    let memory_bytes = memory(&spec.memory, "spec.memory", bounds::MEMORY_MIB * MIB)?;
    let memory_per_slot =
        memory(&spec.memory_per_slot, "spec.memoryPerSlot", bounds::MEMORY_MIB * MIB)?;
    let max_body_bytes = memory(&spec.max_body_size, "spec.maxBodySize", bounds::BODY_MIB * MIB)?;
    let override_slots = spec.slots.map(|n| n.unsigned_abs());
    let slots = plan_slots(
        Limits { cpu_millis, memory_bytes },
        SlotPolicy {
            memory_per_slot,
            // The render pod derives the same share from the same body limit.
            supervisor_overhead: supervisor_share(max_body_bytes, OFFICE_CACHE.bytes()),
            override_slots,
        },
    )
    .map_err(|err| match err {
        SizingError::MemoryTooSmall { needed_mib, overhead_mib, .. } => SpecError::MemoryTooSmall {
            memory: spec.memory.clone(),
            memory_per_slot: spec.memory_per_slot.clone(),
            max_body_size: spec.max_body_size.clone(),
            needed_mib,
            overhead_mib,
        },
        other => SpecError::Sizing(other),
    })?;
    let replicas = spec.replicas;
    let gotenberg = if spec.gotenberg.enabled {
        let g = &spec.gotenberg;
        let wanted = g.replicas.or(g.office_concurrency).unwrap_or(1);
        // Only checked here: Gotenberg's resources feed no formula, but a bad one must not reach
        // the Deployment.
        cpu(&g.cpu, "spec.gotenberg.cpu", bounds::GOTENBERG_CPU_CORES)?;
        memory(&g.memory, "spec.gotenberg.memory", bounds::MEMORY_MIB * MIB)?;
        Some(GotenbergPlan {
            replicas: wanted,
            office_per_pod: office_conversions_per_pod(
                wanted.unsigned_abs(),
                replicas.unsigned_abs(),
            ),
            timeout_seconds: gotenberg_timeout(spec)?,
            body_limit_bytes: max_body_bytes + MULTIPART_MARGIN,
            scratch_bytes: (SCRATCH_UPLOADS * max_body_bytes + PROFILE_SPACE).next_multiple_of(MIB),
        })
    } else {
        None
    };
    Ok(PoolPlan {
        cpu_millis,
        memory_bytes,
        slots,
        replicas,
        grace_period_seconds,
        gotenberg,
        clients_only: spec.clients.is_some(),
        rollout,
    })
}

/// spec.clients and spec.scrapers as the NetworkPolicy needs them: a peer names pods or
/// namespaces (a peer with neither is refused by the API server), a list of clients is not
/// empty (a rule with no peers admits every pod), and scrapers come with clients.
fn check_access(spec: &RenderPoolSpec) -> Result<(), SpecError> {
    if spec.clients.as_ref().is_some_and(Vec::is_empty) {
        return Err(SpecError::Access {
            field: "spec.clients".into(),
            problem: "is empty, which would admit every pod: name the pods that may call the \
                      pool, or omit spec.clients to leave it open",
        });
    }
    if spec.scrapers.is_some() && spec.clients.is_none() {
        return Err(SpecError::Access {
            field: "spec.scrapers".into(),
            problem: "needs spec.clients: without clients every pod may reach the pool",
        });
    }
    for (field, list) in [("spec.clients", &spec.clients), ("spec.scrapers", &spec.scrapers)] {
        for (i, peer) in list.iter().flatten().enumerate() {
            if peer.pod_selector.is_none() && peer.namespace_selector.is_none() {
                return Err(SpecError::Access {
                    field: format!("{field}[{i}]"),
                    problem: "names no pods: give podSelector, namespaceSelector or both",
                });
            }
        }
    }
    Ok(())
}

/// preStop, drain, one full job and a margin, each in whole seconds rounded up, so a job that
/// started just before shutdown still finishes. Gotenberg's (preStop, its timeout of at most the
/// job deadline, a margin) is never longer, so this one is what node autoscalers must wait for.
fn grace_period_seconds(spec: &RenderPoolSpec) -> i64 {
    let drain = spec.drain_delay_ms.max(0).saturating_add(999) / 1000;
    let deadline = spec.job_deadline_ms.max(0).saturating_add(999) / 1000;
    // Each term is bounded by the bounds check; saturation only guards the arithmetic itself.
    spec.pre_stop_seconds
        .max(0)
        .saturating_add(drain)
        .saturating_add(deadline)
        .saturating_add(bounds::GRACE_MARGIN_SECONDS)
}

/// The autoscaler's floor under its ceiling, its queue target within what a pod can queue, and
/// zero pods and the backlog trigger only with jobs (its figures' own bounds are in
/// [`RenderPoolSpec::bounded_numbers`]).
fn check_autoscaling(
    a: &AutoscalingSpec,
    queue_depth: i32,
    with_jobs: bool,
) -> Result<(), SpecError> {
    if a.min_replicas > a.max_replicas {
        return Err(SpecError::OutOfRange {
            field: "spec.autoscaling.minReplicas",
            value: a.min_replicas.to_string(),
            allowed: format!("at most spec.autoscaling.maxReplicas ({})", a.max_replicas),
        });
    }
    if a.min_replicas == 0 && !with_jobs {
        return Err(SpecError::OutOfRange {
            field: "spec.autoscaling.minReplicas",
            value: "0".into(),
            allowed: "at least 1 without spec.jobs: a pool at zero pods has no pod to answer a \
                      synchronous request, so only a job backlog may wake it"
                .into(),
        });
    }
    if a.backlog.is_some() != with_jobs {
        return Err(SpecError::Jobs {
            field: "spec.autoscaling.backlog".into(),
            problem: if with_jobs {
                "is required with spec.jobs: it names the NATS monitoring endpoint KEDA reads \
                 the job backlog from"
            } else {
                "needs spec.jobs: without jobs there is no backlog to scale on"
            }
            .into(),
        });
    }
    match a.target_queue_depth {
        Some(target) if target > queue_depth => Err(SpecError::OutOfRange {
            field: "spec.autoscaling.targetQueueDepth",
            value: target.to_string(),
            allowed: format!("at most spec.queueDepth ({queue_depth}), what a pod can queue"),
        }),
        _ => Ok(()),
    }
}

/// Every whole-number field within the bounds the CRD declares for it.
/// The first field outside its bound, as an error naming it.
fn check_bounds<const N: usize>(
    fields: [(&'static str, Option<i64>, Bound); N],
) -> Result<(), SpecError> {
    for (field, value, bound) in fields {
        if let Some(value) = value.filter(|v| !bound.contains(*v)) {
            return Err(SpecError::OutOfRange {
                field,
                value: value.to_string(),
                allowed: format!("between {} and {}", bound.min, bound.max),
            });
        }
    }
    Ok(())
}

/// Gotenberg's request timeout: as given, or the job deadline in whole seconds rounded up. A
/// render pod stops waiting at its deadline, so Gotenberg must not work on past it.
fn gotenberg_timeout(spec: &RenderPoolSpec) -> Result<u32, SpecError> {
    // Both are within their bounds here (check_bounds), so neither conversion can fail.
    let deadline_seconds = u32::try_from(spec.job_deadline_ms.max(0).unsigned_abs().div_ceil(1000))
        .unwrap_or(u32::MAX);
    match spec.gotenberg.timeout_seconds {
        None => Ok(deadline_seconds),
        Some(t) if i64::from(t) * 1000 <= spec.job_deadline_ms => Ok(t.unsigned_abs()),
        Some(t) => Err(SpecError::OutOfRange {
            field: "spec.gotenberg.timeoutSeconds",
            value: t.to_string(),
            allowed: format!("at most spec.jobDeadlineMs ({} ms)", spec.job_deadline_ms),
        }),
    }
}

fn cpu(value: &str, field: &'static str, max_cores: u64) -> Result<u64, SpecError> {
    match parse_cpu_millis(value) {
        Ok(0) => Err(SpecError::Zero { field, value: value.into() }),
        Ok(m) if m > max_cores * 1000 => Err(SpecError::OutOfRange {
            field,
            value: value.into(),
            allowed: format!("at most {max_cores} cores"),
        }),
        Ok(m) => Ok(m),
        Err(source) => Err(SpecError::Quantity { field, source }),
    }
}

fn memory(value: &str, field: &'static str, max_bytes: u64) -> Result<u64, SpecError> {
    match parse_memory_bytes(value) {
        Ok(0) => Err(SpecError::Zero { field, value: value.into() }),
        Ok(b) if b > max_bytes => Err(SpecError::OutOfRange {
            field,
            value: value.into(),
            allowed: format!("at most {} MiB", max_bytes / MIB),
        }),
        Ok(b) => Ok(b),
        Err(source) => Err(SpecError::Quantity { field, source }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::test_fixtures::spec_from_yaml;

    #[test]
    fn three_cores_four_gib_is_cpu_bound_at_three_slots() {
        let plan = validate(&spec_from_yaml("cpu: '3'\nmemory: 4Gi\nreplicas: 2")).unwrap();
        // cpu 3 cores -> 3; memory (4096 - 296) / 512 = 7.4 -> 7; min = 3
        assert_eq!((plan.slots.slots, plan.slots.cpu_slots, plan.slots.memory_slots), (3, 3, 7));
        assert_eq!(plan.total_slots(), 6);
        assert_eq!(plan.slots_of(1), 3);
        assert_eq!(plan.cpu_millis, 3000);
    }

    #[test]
    fn memory_too_small_names_the_fields_to_change() {
        let err = validate(&spec_from_yaml("cpu: '2'\nmemory: 600Mi")).unwrap_err();
        assert_eq!(err.reason(), "MemoryTooSmallForOneSlot");
        let text = err.to_string();
        assert_eq!(
            text,
            "spec.memory 600Mi cannot hold one slot: it needs at least 808 MiB, \
             spec.memoryPerSlot 512Mi plus the supervisor's 296 MiB (an upload and an answer of \
             spec.maxBodySize 100Mi, the Office cache, its rest); raise spec.memory, or lower \
             spec.memoryPerSlot or spec.maxBodySize"
        );
    }

    #[test]
    fn bad_quantity_is_a_typed_error_with_its_field() {
        let err = validate(&spec_from_yaml("memoryPerSlot: lots")).unwrap_err();
        assert_eq!(err.reason(), "InvalidQuantity");
        assert!(err.to_string().starts_with("spec.memoryPerSlot: invalid memory quantity"));
        let err = validate(&spec_from_yaml("cpu: '0'")).unwrap_err();
        assert_eq!(err.reason(), "ZeroSizing");
        // One message, for the field given, with its value: no advice about another field.
        assert_eq!(err.to_string(), "spec.cpu 0 must be greater than zero");
        let err = validate(&spec_from_yaml("memoryPerSlot: 0Mi")).unwrap_err();
        assert_eq!(err.to_string(), "spec.memoryPerSlot 0Mi must be greater than zero");
    }

    #[test]
    fn figures_past_the_bounds_are_refused_with_their_field() {
        for (yaml, field) in [
            ("memoryPerSlot: '18446744073709551615'", "spec.memoryPerSlot"),
            ("memory: '18446744073709551615'", "spec.memory"),
            ("cpu: '5000000'", "spec.cpu"),
            ("gotenberg:\n  cpu: '1000'", "spec.gotenberg.cpu"),
            ("maxBodySize: 2Gi", "spec.maxBodySize"),
            ("jobDeadlineMs: 0", "spec.jobDeadlineMs"),
            ("jobDeadlineMs: -5", "spec.jobDeadlineMs"),
            ("preStopSeconds: -1", "spec.preStopSeconds"),
            ("drainDelayMs: -1", "spec.drainDelayMs"),
            ("queueDepth: 0", "spec.queueDepth"),
            ("replicas: -1", "spec.replicas"),
            ("slots: 0", "spec.slots"),
            ("gotenberg:\n  timeoutSeconds: 0", "spec.gotenberg.timeoutSeconds"),
            ("gotenberg:\n  replicas: 0", "spec.gotenberg.replicas"),
            (
                "jobDeadlineMs: 10000\ngotenberg:\n  timeoutSeconds: 11",
                "spec.gotenberg.timeoutSeconds",
            ),
        ] {
            let err = validate(&spec_from_yaml(yaml)).unwrap_err();
            assert_eq!(err.reason(), "OutOfRange", "{yaml}: {err}");
            assert!(err.to_string().starts_with(field), "{yaml}: {err}");
        }
        // A quantity past 64 bits is unreadable rather than wrapped.
        let err = validate(&spec_from_yaml("memoryPerSlot: '18446744073709551616'")).unwrap_err();
        assert_eq!(err.reason(), "InvalidQuantity");
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn bad_autoscaling_is_refused_with_its_field() {
        for (yaml, field) in [
            ("minReplicas: 5\n  maxReplicas: 4", "spec.autoscaling.minReplicas"),
            ("minReplicas: 0\n  maxReplicas: 4", "spec.autoscaling.minReplicas"),
            ("maxReplicas: 0", "spec.autoscaling.maxReplicas"),
            ("maxReplicas: 1001", "spec.autoscaling.maxReplicas"),
            ("maxReplicas: 4\n  targetBusyPercent: 0", "spec.autoscaling.targetBusyPercent"),
            ("maxReplicas: 4\n  targetBusyPercent: 101", "spec.autoscaling.targetBusyPercent"),
            ("maxReplicas: 4\n  targetQueueDepth: 0", "spec.autoscaling.targetQueueDepth"),
            ("maxReplicas: 4\n  targetQueueDepth: 65", "spec.autoscaling.targetQueueDepth"),
            (
                "maxReplicas: 4\n  scaleDownStabilizationSeconds: 3601",
                "spec.autoscaling.scaleDownStabilizationSeconds",
            ),
        ] {
            let err = validate(&spec_from_yaml(&format!("autoscaling:\n  {yaml}"))).unwrap_err();
            assert_eq!(err.reason(), "OutOfRange", "{yaml}: {err}");
            assert!(err.to_string().starts_with(field), "{yaml}: {err}");
        }
        // The backlog trigger belongs to job pools only.
        let yaml =
            "autoscaling:\n  maxReplicas: 4\n  backlog:\n    natsMonitoringEndpoint: nats:8222";
        let err = validate(&spec_from_yaml(yaml)).unwrap_err();
        assert_eq!(err.reason(), "InvalidJobs", "{err}");
        assert!(err.to_string().starts_with("spec.autoscaling.backlog needs spec.jobs"), "{err}");
        let err = validate(&spec_from_yaml("autoscaling:\n  minReplicas: 5\n  maxReplicas: 4"))
            .unwrap_err();
        assert!(err.to_string().contains("at most spec.autoscaling.maxReplicas (4)"), "{err}");
        // The default queue holds 64: a target of 64 can be reached.
        let plan =
            validate(&spec_from_yaml("autoscaling:\n  maxReplicas: 4\n  targetQueueDepth: 64"));
        assert!(plan.is_ok());
    }

    #[test]
    fn a_grace_period_past_node_autoscalers_drain_limit_is_refused() {
        // 5 preStop + 1 drain + 595 deadline + 5 margin = 606 s.
        let err = validate(&spec_from_yaml("jobDeadlineMs: 595000")).unwrap_err();
        assert_eq!(err.reason(), "GracePeriodTooLong");
        let text = err.to_string();
        assert!(text.contains("would be 606 s"), "{text}");
        assert!(text.contains("after 600 s") && text.contains("spec.jobDeadlineMs"), "{text}");
        // 5 + 1 + 589 + 5 = 600 s is the most allowed.
        assert_eq!(
            validate(&spec_from_yaml("jobDeadlineMs: 589000")).unwrap().grace_period_seconds,
            600
        );
    }

    #[test]
    fn office_concurrency_becomes_gotenberg_replicas_shared_by_render_pods() {
        let plan =
            validate(&spec_from_yaml("replicas: 3\ngotenberg:\n  officeConcurrency: 7")).unwrap();
        let g = plan.gotenberg.unwrap();
        // 7 Gotenberg replicas over 3 render pods: 7 / 3 = 2 each
        assert_eq!((g.replicas, g.office_per_pod), (7, 2));
        let plan = validate(&spec_from_yaml("gotenberg:\n  enabled: false")).unwrap();
        assert_eq!(plan.gotenberg, None);
    }

    #[test]
    fn gotenberg_timeout_and_limits_follow_the_render_pods() {
        let g = validate(&spec_from_yaml("jobDeadlineMs: 20500")).unwrap().gotenberg.unwrap();
        // 20.5 s rounded up; 100Mi upload + 1Mi framing; 4 x 100Mi + 256Mi scratch.
        assert_eq!(g.timeout_seconds, 21);
        assert_eq!(g.body_limit_bytes, 101 * MIB);
        assert_eq!(g.scratch_bytes, 656 * MIB);
        let spec = "jobDeadlineMs: 20000\nmaxBodySize: 10M\ngotenberg:\n  timeoutSeconds: 20";
        let g = validate(&spec_from_yaml(spec)).unwrap().gotenberg.unwrap();
        assert_eq!(g.timeout_seconds, 20);
        assert_eq!(g.body_limit_bytes, 10_000_000 + MIB);
        // 40 MB + 256 MiB, rounded up to a whole MiB.
        assert_eq!(g.scratch_bytes, 295 * MIB);
    }

    #[test]
    fn a_rollout_defaults_to_surge_and_one_that_cannot_move_is_refused() {
        let plan = validate(&spec_from_yaml("replicas: 2")).unwrap();
        assert_eq!(plan.rollout, RolloutSpec { max_surge: 1, max_unavailable: 0 });
        let plan = validate(&spec_from_yaml("rollout:\n  maxSurge: 0\n  maxUnavailable: 1"));
        assert_eq!(plan.unwrap().rollout, RolloutSpec { max_surge: 0, max_unavailable: 1 });
        // maxUnavailable alone keeps the surge default.
        let plan = validate(&spec_from_yaml("rollout:\n  maxUnavailable: 1")).unwrap();
        assert_eq!(plan.rollout, RolloutSpec { max_surge: 1, max_unavailable: 1 });
        let err = validate(&spec_from_yaml("rollout:\n  maxSurge: 0")).unwrap_err();
        assert_eq!(err.reason(), "RolloutStandsStill");
        assert!(err.to_string().starts_with("spec.rollout.maxSurge 0 and"), "{err}");
        let err = validate(&spec_from_yaml("rollout:\n  maxSurge: -1")).unwrap_err();
        assert_eq!(err.to_string(), "spec.rollout.maxSurge is -1; it must be between 0 and 1000");
    }

    #[test]
    fn clients_that_would_not_restrict_are_refused_with_their_field() {
        for (yaml, field) in [
            ("clients: []", "spec.clients is empty"),
            ("scrapers:\n- podSelector: {}", "spec.scrapers needs spec.clients"),
            ("clients:\n- podSelector: {}\n- {}", "spec.clients[1] names no pods"),
            ("clients:\n- podSelector: {}\nscrapers:\n- {}", "spec.scrapers[0] names no pods"),
        ] {
            let err = validate(&spec_from_yaml(yaml)).unwrap_err();
            assert_eq!(err.reason(), "InvalidClients", "{yaml}: {err}");
            assert!(err.to_string().starts_with(field), "{yaml}: {err}");
        }
        assert!(!validate(&spec_from_yaml("replicas: 1")).unwrap().clients_only);
        let only = "clients:\n- namespaceSelector: {matchLabels: {team: web}}\nscrapers: []";
        assert!(validate(&spec_from_yaml(only)).unwrap().clients_only);
    }
}
