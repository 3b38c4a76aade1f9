//! What the pods of a pool run and why some cannot: the slots a render pod template gives each
//! of its pods, the render pods of each ReplicaSet, and the pods that wait for a node or fail
//! to start. Pure: read from objects the watches cached.

use crate::build::RENDER_CONTAINER;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::ResourceExt;
use renderpool_api::render_pod::{self as defaults, env as var};
use renderpool_sizing::{
    Limits, SlotPolicy, parse_cpu_millis, parse_memory_bytes, plan_slots, supervisor_share,
};

/// The annotation in which the Deployment controller numbers a ReplicaSet's template.
const REVISION: &str = "deployment.kubernetes.io/revision";

/// The slots each pod made from `spec` runs: the render pod's own formula on the container's
/// limits and the environment the pod reads them with (its defaults where a variable is
/// absent). `None` for a spec the pod itself could not size.
pub fn template_slots(spec: &PodSpec) -> Option<u32> {
    let container = spec.containers.iter().find(|c| c.name == RENDER_CONTAINER)?;
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    let cpu_millis = parse_cpu_millis(&limits.get("cpu")?.0).ok()?;
    let memory_bytes = parse_memory_bytes(&limits.get("memory")?.0).ok()?;
    let value = |name: &str| {
        let var = container.env.iter().flatten().find(|e| e.name == name);
        var.and_then(|e| e.value.as_deref())
    };
    let bytes = |name: &str, default: u64| {
        value(name).map_or(Some(default), |v| parse_memory_bytes(v).ok())
    };
    let memory_per_slot = bytes(var::MEMORY_PER_SLOT, defaults::MEMORY_PER_SLOT.bytes())?;
    let max_body = bytes(var::MAX_BODY_BYTES, defaults::MAX_BODY.bytes())?;
    let office_cache = bytes(var::OFFICE_CACHE_BYTES, defaults::OFFICE_CACHE.bytes())?;
    let supervisor_overhead = match value(var::SUPERVISOR_OVERHEAD) {
        Some(v) => parse_memory_bytes(v).ok()?,
        None => supervisor_share(max_body, office_cache),
    };
    let override_slots = match value(var::SLOTS) {
        Some(v) => Some(v.parse().ok()?),
        None => None,
    };
    let policy = SlotPolicy { memory_per_slot, supervisor_overhead, override_slots };
    plan_slots(Limits { cpu_millis, memory_bytes }, policy).ok().map(|plan| plan.slots)
}

/// The render pods of one ReplicaSet of the render Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSet {
    /// The ReplicaSet's name.
    pub name: String,
    /// The Deployment controller's number for its template (higher is newer).
    pub revision: i64,
    /// Its pods (not counting those terminating).
    pub pods: i32,
    /// Those of them that are ready.
    pub ready: i32,
    /// Slots each of its pods runs, when its template can be read.
    pub slots_per_pod: Option<u32>,
}

impl PodSet {
    /// Slots its ready pods serve with.
    pub fn ready_slots(&self, fallback: u32) -> i64 {
        i64::from(self.ready.max(0)) * i64::from(self.slots_per_pod.unwrap_or(fallback))
    }
}

/// The ReplicaSets of `deployment` among `sets` that still have pods, newest first.
pub fn pod_sets(deployment: &Deployment, sets: &[ReplicaSet]) -> Vec<PodSet> {
    let uid = deployment.metadata.uid.as_deref();
    let mut found: Vec<PodSet> = sets
        .iter()
        .filter(|set| {
            set.owner_references()
                .iter()
                .any(|o| Some(o.uid.as_str()) == uid && o.controller == Some(true))
        })
        .filter_map(|set| {
            let status = set.status.as_ref()?;
            let template = set.spec.template.as_ref()?.spec.as_ref();
            let revision = set.annotations().get(REVISION).and_then(|r| r.parse().ok());
            Some(PodSet {
                name: set.name_any(),
                revision: revision.unwrap_or(0),
                pods: status.replicas,
                ready: status.ready_replicas.unwrap_or(0),
                slots_per_pod: template.and_then(template_slots),
            })
        })
        .filter(|set| set.pods > 0 || set.ready > 0)
        .collect();
    found.sort_by(|a, b| b.revision.cmp(&a.revision).then_with(|| a.name.cmp(&b.name)));
    found
}

/// Why a pod does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stuck {
    /// The scheduler found no node for it; its message says why (room, selectors, taints).
    Unschedulable(String),
    /// It is on a node but its container cannot run: the kubelet's reason
    /// (ImagePullBackOff, CrashLoopBackOff, ...) and message.
    CannotStart(String, String),
}

/// Container waiting reasons that do not pass by themselves.
const CANNOT_START: [&str; 8] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
    "RunContainerError",
];

/// Why `pod` cannot run, if it cannot; a terminating pod is going anyway.
pub fn stuck(pod: &Pod) -> Option<Stuck> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    });
    if let Some(condition) = unschedulable {
        return Some(Stuck::Unschedulable(condition.message.clone().unwrap_or_default()));
    }
    status.container_statuses.iter().flatten().find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        CANNOT_START
            .contains(&reason)
            .then(|| Stuck::CannotStart(reason.into(), waiting.message.clone().unwrap_or_default()))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::build::build;
    use crate::test_fixtures::pool_from_yaml;
    use crate::validate::validate;
    use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateWaiting, ContainerStatus, PodCondition, PodStatus,
        PodTemplateSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use std::collections::BTreeMap;

    /// The render Deployment built for `spec`, with a uid as the API server gives it.
    fn render_deployment(spec: &str) -> Deployment {
        let pool = pool_from_yaml("docs", spec);
        let plan = validate(&pool.spec).unwrap();
        let mut d = build(&pool, &plan).unwrap().render.deployment;
        d.metadata.uid = Some("deployment-uid".into());
        d
    }

    fn slots_of(spec: &str) -> Option<u32> {
        template_slots(render_deployment(spec).spec.template.spec.as_ref().unwrap())
    }

    #[test]
    fn a_template_gives_the_slots_the_operator_planned_for_its_spec() {
        for spec in [
            "cpu: '3'\nmemory: 4Gi",
            "cpu: 600m\nmemory: 868Mi",
            "cpu: '8'\nmemory: 2Gi\nmemoryPerSlot: 256Mi",
            "cpu: '2'\nmemory: 4Gi\nmaxBodySize: 1Gi",
            "cpu: 600m\nmemory: 868Mi\nslots: 2",
        ] {
            let planned = validate(&pool_from_yaml("docs", spec).spec).unwrap().slots.slots;
            assert_eq!(slots_of(spec), Some(planned), "{spec}");
        }
        assert_eq!(slots_of("cpu: 600m\nmemory: 868Mi\nslots: 2"), Some(2));
        // A template the pod could not size itself (no limits) has no figure.
        let mut bare = render_deployment("replicas: 1").spec.template.spec.unwrap();
        bare.containers[0].resources = None;
        assert_eq!(template_slots(&bare), None);
    }

    fn replica_set(
        name: &str,
        revision: &str,
        pods: i32,
        ready: i32,
        template: &PodTemplateSpec,
    ) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(BTreeMap::from([(REVISION.to_string(), revision.to_string())])),
                owner_references: Some(vec![OwnerReference {
                    uid: "deployment-uid".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: ReplicaSetSpec { template: Some(template.clone()), ..ReplicaSetSpec::default() },
            status: Some(ReplicaSetStatus {
                replicas: pods,
                ready_replicas: Some(ready),
                ..ReplicaSetStatus::default()
            }),
        }
    }

    #[test]
    fn pod_sets_are_the_deployments_own_with_pods_newest_first_with_their_own_slots() {
        let one = render_deployment("cpu: 600m\nmemory: 868Mi");
        let two = render_deployment("cpu: 600m\nmemory: 868Mi\nslots: 2");
        let mut foreign = replica_set("other-1", "9", 1, 1, &one.spec.template);
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "another".into();
        let sets = [
            replica_set("docs-render-a", "1", 1, 1, &one.spec.template),
            replica_set("docs-render-b", "2", 2, 1, &two.spec.template),
            replica_set("docs-render-old", "0", 0, 0, &one.spec.template),
            foreign,
        ];
        let found = pod_sets(&two, &sets);
        let names: Vec<(&str, i32, i32, Option<u32>)> =
            found.iter().map(|s| (s.name.as_str(), s.pods, s.ready, s.slots_per_pod)).collect();
        assert_eq!(names, [("docs-render-b", 2, 1, Some(2)), ("docs-render-a", 1, 1, Some(1))]);
        let ready: i64 = found.iter().map(|s| s.ready_slots(9)).sum();
        assert_eq!(ready, 3, "one ready pod of each: 2 + 1");
    }

    fn pod(status: PodStatus) -> Pod {
        Pod { status: Some(status), ..Pod::default() }
    }

    #[test]
    fn a_pod_the_scheduler_cannot_place_or_the_kubelet_cannot_start_is_stuck() {
        let unschedulable = pod(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("0/1 nodes are available: 1 Insufficient cpu.".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        assert_eq!(
            stuck(&unschedulable),
            Some(Stuck::Unschedulable("0/1 nodes are available: 1 Insufficient cpu.".into()))
        );
        let mut leaving = unschedulable.clone();
        leaving.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(stuck(&leaving), None, "a pod on its way out blocks nothing");
        let waiting = |reason: &str| {
            pod(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some(reason.into()),
                            message: Some("said the kubelet".into()),
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            })
        };
        assert_eq!(
            stuck(&waiting("ImagePullBackOff")),
            Some(Stuck::CannotStart("ImagePullBackOff".into(), "said the kubelet".into()))
        );
        // Starting is not stuck.
        assert_eq!(stuck(&waiting("ContainerCreating")), None);
        assert_eq!(stuck(&pod(PodStatus::default())), None);
    }
}
