//! Status from the plan and the observed Deployments, ReplicaSets and pods: pure,
//! deterministic, and stable across passes (a condition's transition time changes only when its
//! status does), so writing it never triggers another write. It describes what serves: ready
//! slots are those of the pods that are ready (each ReplicaSet's pods with their own template's
//! slots), and a pod that cannot be scheduled or started is named, with what to do, as soon as
//! the watches see it.

mod pods;

use crate::build::{Component, child_name, selector_string};
use crate::crd::{JobsStatus, LastError, RenderPoolStatus, ReplicaSetStatus, RolloutSpec};
use crate::validate::{PoolPlan, SpecError};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use pods::{PodSet, Stuck, pod_sets, stuck};
use renderpool_sizing::count;

/// Longest message kept in `status.lastError`.
pub const LAST_ERROR_CHARS: usize = 300;

/// Condition types the operator writes.
pub const READY: &str = "Ready";
/// See [`READY`].
pub const PROGRESSING: &str = "Progressing";
/// See [`READY`].
pub const DEGRADED: &str = "Degraded";
/// Whether only spec.clients may reach the render pods.
pub const RESTRICTED: &str = "Restricted";

/// Everything the status is computed from.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The pool's name.
    pub pool: &'a str,
    /// The pool's metadata.generation.
    pub generation: Option<i64>,
    /// The validation outcome.
    pub plan: &'a Result<PoolPlan, SpecError>,
    /// The render Deployment as last seen, if it exists.
    pub render: Option<&'a Deployment>,
    /// The generations the API server gave the Deployments (render, Gotenberg) this pass
    /// wrote: the cache still shows them as before the write, and a rollout is finished only
    /// once the Deployment controller has observed the written generation.
    pub applied_generations: (Option<i64>, Option<i64>),
    /// The Gotenberg Deployment as last seen, if it exists.
    pub gotenberg: Option<&'a Deployment>,
    /// ReplicaSets of the pool's namespace as last seen (the render Deployment's own are
    /// picked by their owner).
    pub replica_sets: &'a [ReplicaSet],
    /// The pool's pods (render and Gotenberg) as last seen.
    pub pods: &'a [Pod],
    /// Children not written because an object the pool does not own has the name (`Kind name`).
    pub conflicts: &'a [String],
    /// The status currently stored, for transition times.
    pub previous: Option<&'a RenderPoolStatus>,
    /// Why this pass failed, if it did (a refused spec or a refused write).
    pub last_error: Option<LastError>,
    /// The job backlog a render pod told this pass (with spec.jobs).
    pub jobs: Option<JobsStatus>,
    /// KEDA's words while it says the pool's ScaledObject is not Ready.
    pub keda_not_ready: Option<&'a str>,
    /// Transition time for conditions that change now (whole seconds).
    pub now: Time,
}

/// Rollout state of one Deployment against what it should run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rollout {
    desired: i32,
    current: i32,
    updated: i32,
    ready: i32,
    /// The Deployment controller has seen the latest spec.
    observed: bool,
    /// The Deployment controller gave up (progress deadline exceeded).
    stuck: bool,
}

impl Rollout {
    fn of(deployment: &Deployment, applied_generation: Option<i64>) -> Self {
        let status = deployment.status.clone().unwrap_or_default();
        let stuck = status.conditions.unwrap_or_default().iter().any(|c| {
            c.type_.as_deref() == Some("Progressing")
                && c.status.as_deref() == Some("False")
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        });
        Self {
            desired: deployment.spec.replicas.unwrap_or(1),
            current: status.replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            ready: status.ready_replicas.unwrap_or(0),
            observed: status.observed_generation
                >= deployment.metadata.generation.max(applied_generation),
            stuck,
        }
    }

    fn complete(&self) -> bool {
        self.observed
            && self.updated == self.desired
            && self.ready >= self.desired
            && self.current == self.desired
    }
}

/// Computes the status to store.
pub fn compute(o: &Observed<'_>) -> RenderPoolStatus {
    let render = o.render.map(|d| Rollout::of(d, o.applied_generations.0));
    let gotenberg = o.gotenberg.map(|d| Rollout::of(d, o.applied_generations.1));
    let wants_gotenberg = matches!(o.plan, Ok(p) if p.gotenberg.is_some());
    let sets = o.render.map(|d| pod_sets(d, o.replica_sets)).unwrap_or_default();
    let (ready, progressing, degraded) = conditions(o, render, gotenberg, wants_gotenberg);
    // A rollout that cannot move is an error a person must act on, like a refused spec.
    let rollout_error = (degraded.0 && o.plan.is_ok() && o.conflicts.is_empty())
        .then(|| last_error(degraded.1, &degraded.2));
    let plan = o.plan.as_ref().ok();
    RenderPoolStatus {
        observed_generation: o.generation,
        replicas: render.map_or(0, |r| r.current),
        ready_replicas: render.map_or(0, |r| r.ready),
        selector: Some(selector_string(o.pool, Component::Render)),
        slots_per_pod: plan.map(|p| i32::try_from(p.slots.slots).unwrap_or(i32::MAX)),
        total_slots: plan.map(PoolPlan::total_slots),
        ready_slots: plan.map(|p| ready_slots(p, render, &sets)),
        replica_sets: replica_sets(render, &sets),
        slot_reason: plan.map(|p| p.slots.reason.clone()),
        office_concurrency_per_pod: plan
            .and_then(|p| p.gotenberg)
            .map(|g| i32::try_from(g.office_per_pod).unwrap_or(i32::MAX)),
        gotenberg_replicas: plan.map(|p| p.gotenberg.map_or(0, |g| g.replicas)),
        gotenberg_ready_replicas: plan.map(|_| gotenberg.map_or(0, |g| g.ready)),
        last_error: o.last_error.clone().or(rollout_error),
        jobs: o.jobs,
        conditions: [
            Some(condition(o, READY, ready)),
            Some(condition(o, PROGRESSING, progressing)),
            Some(condition(o, DEGRADED, degraded)),
            restricted(o),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

/// The slots of the render pods that are ready: each ReplicaSet's ready pods times the slots its
/// own template gives a pod, so pods of a previous spec count with what they run. Before the
/// ReplicaSets are seen, the current spec's slots for the Deployment's ready pods.
fn ready_slots(plan: &PoolPlan, render: Option<Rollout>, sets: &[PodSet]) -> i32 {
    if sets.is_empty() {
        return plan.slots_of(render.map_or(0, |r| r.ready));
    }
    let sum: i64 = sets.iter().map(|set| set.ready_slots(plan.slots.slots)).sum();
    i32::try_from(sum).unwrap_or(i32::MAX)
}

/// Each ReplicaSet's render pods while more than one template runs; none at rest.
fn replica_sets(render: Option<Rollout>, sets: &[PodSet]) -> Vec<ReplicaSetStatus> {
    if sets.len() < 2 {
        return Vec::new();
    }
    // The newest template is the current spec's once the Deployment controller has seen it.
    let observed = render.is_some_and(|r| r.observed);
    sets.iter()
        .enumerate()
        .map(|(i, set)| ReplicaSetStatus {
            name: set.name.clone(),
            current: observed && i == 0,
            replicas: set.pods,
            ready_replicas: set.ready,
            slots_per_pod: set.slots_per_pod.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        })
        .collect()
}

/// The `status.lastError` of a failure, its message cut to a readable length.
pub fn last_error(reason: &str, message: &str) -> LastError {
    let mut short: String = message.chars().take(LAST_ERROR_CHARS).collect();
    if short.len() < message.len() {
        short.push_str("...");
    }
    LastError { reason: reason.into(), message: short }
}

/// `Restricted`: True while the NetworkPolicy from spec.clients applies, False when the pool is
/// open to every pod or the policy's name is someone else's. A spec that cannot be applied
/// leaves the policy as it is, and so the condition as stored.
fn restricted(o: &Observed<'_>) -> Option<Condition> {
    let plan = match o.plan {
        Ok(plan) => plan,
        Err(_) => {
            let previous = o.previous?.conditions.iter().find(|c| c.type_ == RESTRICTED)?;
            return Some(previous.clone());
        }
    };
    let policy = format!(
        "{} {}",
        <NetworkPolicy as kube::Resource>::kind(&()),
        child_name(o.pool, Component::Render)
    );
    let verdict = if !plan.clients_only {
        (
            false,
            "OpenToAllPods",
            "spec.clients is not set: every pod that can reach the render pods may call them;              set spec.clients to admit only the pool's clients"
                .into(),
        )
    } else if o.conflicts.contains(&policy) {
        (false, NAME_CONFLICT, name_conflict(std::slice::from_ref(&policy)))
    } else {
        (
            true,
            "ClientsOnly",
            format!(
                "{policy} admits only spec.clients and spec.scrapers to the render pods, where                  the cluster's network plugin enforces NetworkPolicies"
            ),
        )
    };
    Some(condition(o, RESTRICTED, verdict))
}

/// Reason of the conditions and `lastError` while another object holds a child's name.
pub const NAME_CONFLICT: &str = "NameConflict";

/// What a person reads when objects they (or another controller) made hold the pool's child
/// names: which, that they are left alone, and the ways out.
pub fn name_conflict(conflicts: &[String]) -> String {
    let (verb, not) = if conflicts.len() == 1 { ("exists", "is") } else { ("exist", "are") };
    format!(
        "{} already {verb} and {not} not owned by this RenderPool, so the operator leaves {} \
         untouched and does not create {}; delete or rename {}, or give the pool another name",
        join_and(conflicts),
        if conflicts.len() == 1 { "it" } else { "them" },
        if conflicts.len() == 1 { "that child" } else { "those children" },
        if conflicts.len() == 1 { "it" } else { "them" },
    )
}

/// "a", "a and b", "a, b and c".
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A condition's truth value, reason and message before timestamps are attached.
type Verdict = (bool, &'static str, String);

fn conditions(
    o: &Observed<'_>,
    render: Option<Rollout>,
    gotenberg: Option<Rollout>,
    wants_gotenberg: bool,
) -> (Verdict, Verdict, Verdict) {
    let plan = match o.plan {
        Ok(plan) => plan,
        Err(err) => {
            let message =
                format!("spec cannot be applied: {err}. Running pods are left as they are.");
            return (
                (false, err.reason(), message.clone()),
                (false, err.reason(), "waiting for a corrected spec".into()),
                (true, err.reason(), message),
            );
        }
    };
    if !o.conflicts.is_empty() {
        let message = name_conflict(o.conflicts);
        return (
            (false, NAME_CONFLICT, message.clone()),
            (false, NAME_CONFLICT, "the pool cannot be completed while its names are taken".into()),
            (true, NAME_CONFLICT, message),
        );
    }
    let mut missing = Vec::new();
    if render.is_none() {
        missing.push("render Deployment");
    }
    if wants_gotenberg && gotenberg.is_none() {
        missing.push("gotenberg Deployment");
    }
    if !missing.is_empty() {
        let message = format!("waiting for {} to be created", missing.join(" and "));
        return (
            (false, "ChildrenMissing", message.clone()),
            (true, "Creating", message),
            (false, "AsExpected", "children are being created".into()),
        );
    }
    let parts: Vec<(&str, Rollout)> = [("render", render), ("gotenberg", gotenberg)]
        .into_iter()
        .filter_map(|(name, r)| r.map(|r| (name, r)))
        .filter(|(name, _)| *name == "render" || wants_gotenberg)
        .collect();
    let summary = parts
        .iter()
        .map(|(name, r)| {
            let pods = count(r.desired, &format!("{name} pod"), &format!("{name} pods"));
            let mut part = format!("{} of {pods} ready", r.ready);
            if !r.observed || r.updated < r.desired {
                let updated = if r.observed { r.updated } else { 0 };
                part.push_str(&format!(" ({updated} on the current spec)"));
            }
            part
        })
        .collect::<Vec<_>>()
        .join(", ");
    let stuck: Vec<&str> = parts.iter().filter(|(_, r)| r.stuck).map(|(n, _)| *n).collect();
    let complete = parts.iter().all(|(_, r)| r.complete());
    let all_ready = parts.iter().all(|(_, r)| r.ready >= r.desired);
    let rollouts = parts.iter().map(|(name, r)| (*name, *r)).collect::<Vec<_>>();
    if !(all_ready && complete)
        && let Some((reason, problem)) = blocked(o.pods, &rollouts, plan.rollout)
    {
        let message = format!("{summary}; {problem}");
        return (
            (false, reason, message.clone()),
            (false, reason, message.clone()),
            (true, reason, message),
        );
    }
    let ready = if all_ready && complete {
        let each = if plan.replicas == 1 { "" } else { " each" };
        let message = format!(
            "{} with {}{each} ({} in all); {}",
            count(plan.replicas, "render pod", "render pods"),
            count(plan.slots.slots, "slot", "slots"),
            count(plan.total_slots(), "slot", "slots"),
            plan.gotenberg.map_or("Office conversion disabled".into(), |g| format!(
                "{}, {} per render pod",
                count(g.replicas, "gotenberg pod", "gotenberg pods"),
                count(g.office_per_pod, "Office conversion", "Office conversions")
            ))
        );
        (true, "PoolReady", message)
    } else if !stuck.is_empty() {
        (false, "RolloutStuck", format!("{summary}; the rollout exceeded its progress deadline"))
    } else if all_ready {
        // Pods of the previous spec serve, but the current one is not yet what runs: a
        // `kubectl wait --for=condition=Ready` after an apply waits for it.
        (false, "RollingOut", format!("{summary}; pods of the previous spec serve meanwhile"))
    } else {
        (false, "PodsNotReady", format!("{summary}; check the pods' events if this persists"))
    };
    let progressing = if complete {
        (false, "RolloutComplete", summary.clone())
    } else {
        (true, "RollingOut", summary.clone())
    };
    let degraded = if !stuck.is_empty() {
        let message = format!(
            "{} rollout exceeded its progress deadline ({summary}): look for pods that cannot be \
             scheduled (kubectl describe pods) or fail to start",
            stuck.join(" and ")
        );
        (true, "RolloutStuck", message)
    } else if let Some(keda) = o.keda_not_ready {
        let message = format!(
            "KEDA cannot read the pool's job backlog, so the pool neither grows on it nor wakes \
             from zero: {keda}. kubectl describe scaledobject {} shows the scaler's error (a \
             wrong backlog.natsMonitoringEndpoint or account, or a stream that no longer exists)",
            o.pool
        );
        (true, BACKLOG_UNREADABLE, message)
    } else {
        (false, "AsExpected", "no problem found".into())
    };
    (ready, progressing, degraded)
}

/// Reason of Degraded while KEDA says it cannot read the pool's backlog.
pub const BACKLOG_UNREADABLE: &str = "BacklogUnreadable";
/// Reason of the conditions while a pod of the pool finds no node.
pub const UNSCHEDULABLE: &str = "Unschedulable";
/// Reason of the conditions while a pod of the pool is on a node but its container cannot run.
pub const CANNOT_START: &str = "CannotStart";

/// The pods of `rollouts`' components that cannot run, as one reason and one message saying
/// which pods, why, and what to do; unschedulable pods first.
fn blocked(
    pods: &[Pod],
    rollouts: &[(&str, Rollout)],
    strategy: RolloutSpec,
) -> Option<(&'static str, String)> {
    let mut cannot_start = None;
    for (component, rollout) in rollouts {
        let mut unschedulable = Vec::new();
        let of_component = pods.iter().filter(|pod| {
            pod.labels().get("app.kubernetes.io/component").map(String::as_str) == Some(*component)
        });
        for pod in of_component {
            match stuck(pod) {
                Some(Stuck::Unschedulable(why)) => unschedulable.push((pod.name_any(), why)),
                Some(Stuck::CannotStart(reason, why)) if cannot_start.is_none() => {
                    cannot_start =
                        Some(cannot_start_message(component, &pod.name_any(), &reason, &why));
                }
                _ => {}
            }
        }
        if let Some((_, why)) = unschedulable.first() {
            let names: Vec<String> = unschedulable.iter().map(|(name, _)| name.clone()).collect();
            let noun = if names.len() == 1 { "pod" } else { "pods" };
            let mut message = format!(
                "{component} {noun} {} cannot be scheduled: {}",
                join_and(&names),
                why.trim_end_matches('.')
            );
            // Old pods still run beside the new ones: a surge pod is what waits. Until the
            // Deployment controller has seen the new template, its updated count is the old
            // one's (the summary shows 0 on the current spec for the same reason).
            let updated = if rollout.observed { rollout.updated } else { 0 };
            let surging = rollout.current > updated && strategy.max_surge > 0;
            message.push_str(&if surging {
                format!(
                    ". The rollout starts each new pod before it stops an old one \
                     (spec.rollout maxSurge {}, maxUnavailable {}) and no node has room for it: \
                     set spec.rollout maxSurge 0 and maxUnavailable 1 to replace the pods one at \
                     a time in place, or make room on a node; the previous spec's pods serve \
                     meanwhile",
                    strategy.max_surge, strategy.max_unavailable
                )
            } else if *component == Component::Gotenberg.as_str() {
                ". Make room on a node, or lower the Gotenberg replicas, spec.gotenberg.cpu or \
                 spec.gotenberg.memory"
                    .into()
            } else {
                ". Make room on a node, or lower spec.replicas, spec.cpu or spec.memory".into()
            });
            return Some((UNSCHEDULABLE, message));
        }
    }
    cannot_start.map(|message| (CANNOT_START, message))
}

/// "render pod p-1 cannot start: ImagePullBackOff: ...", and where to look.
fn cannot_start_message(component: &str, pod: &str, reason: &str, why: &str) -> String {
    let image = if component == Component::Gotenberg.as_str() {
        "spec.gotenberg.image"
    } else {
        "spec.image"
    };
    let hint = match reason {
        "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" | "InvalidImageName" => {
            format!("check {image} and the image pull policy")
        }
        "CrashLoopBackOff" => format!("its log says why: kubectl logs {pod} --previous"),
        _ => format!("kubectl describe pod {pod} says more"),
    };
    let why = why.trim_end_matches('.');
    let why = if why.is_empty() { String::new() } else { format!(": {why}") };
    format!("{component} pod {pod} cannot start: {reason}{why}; {hint}")
}

fn condition(o: &Observed<'_>, type_: &str, (truth, reason, message): Verdict) -> Condition {
    let status = if truth { "True" } else { "False" };
    let previous = o
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status);
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: o.generation,
        last_transition_time: previous
            .map_or_else(|| o.now.clone(), |c| c.last_transition_time.clone()),
    }
}

/// True when the stored condition `type_` is `True`.
pub fn is_true(status: Option<&RenderPoolStatus>, type_: &str) -> bool {
    status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests;
