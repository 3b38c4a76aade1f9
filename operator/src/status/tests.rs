#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::test_fixtures::spec_from_yaml;
use crate::validate::validate;
use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
use k8s_openapi::jiff::Timestamp;

fn deployment(desired: i32, ready: i32) -> Deployment {
    let mut d = Deployment {
        spec: DeploymentSpec { replicas: Some(desired), ..DeploymentSpec::default() },
        status: Some(DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(desired),
            updated_replicas: Some(desired),
            ready_replicas: Some(ready),
            ..DeploymentStatus::default()
        }),
        ..Deployment::default()
    };
    d.metadata.generation = Some(1);
    d
}

/// `d` as the Deployment controller leaves it once its progress deadline passed.
fn past_deadline(mut d: Deployment) -> Deployment {
    d.status.as_mut().unwrap().conditions =
        Some(vec![k8s_openapi::api::apps::v1::DeploymentCondition {
            type_: Some("Progressing".into()),
            status: Some("False".into()),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        }]);
    d
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn cond<'a>(s: &'a RenderPoolStatus, type_: &str) -> &'a Condition {
    s.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

/// Pool `docs` (generation 1) with `plan`, seen at second 1 with no children, conflicts,
/// stored status or error: each test sets what it varies on top.
fn seen(plan: &Result<PoolPlan, SpecError>) -> Observed<'_> {
    Observed {
        pool: "docs",
        generation: Some(1),
        plan,
        render: None,
        applied_generations: (None, None),
        gotenberg: None,
        conflicts: &[],
        replica_sets: &[],
        pods: &[],
        previous: None,
        last_error: None,
        jobs: None,
        keda_not_ready: None,
        now: at(1),
    }
}

#[test]
fn ready_pool_reports_slot_figures_and_selector() {
    let plan = validate(&spec_from_yaml("replicas: 3\ncpu: '2'\nmemory: 1Gi")).unwrap();
    let plan = Ok(plan);
    let (render, gotenberg) = (deployment(3, 3), deployment(1, 1));
    let s = compute(&Observed {
        generation: Some(4),
        render: Some(&render),
        gotenberg: Some(&gotenberg),
        now: at(100),
        ..seen(&plan)
    });
    // 2 CPU -> 2; (1024 - 296) / 512 = 1.4 -> 1 slot per pod, 3 in all
    assert_eq!((s.slots_per_pod, s.total_slots, s.ready_slots), (Some(1), Some(3), Some(3)));
    assert_eq!(s.last_error, None);
    assert_eq!((s.replicas, s.ready_replicas), (3, 3));
    assert_eq!((s.gotenberg_replicas, s.gotenberg_ready_replicas), (Some(1), Some(1)));
    assert_eq!(s.observed_generation, Some(4));
    assert!(s.selector.as_ref().unwrap().contains("app.kubernetes.io/instance=docs"));
    let ready = cond(&s, READY);
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "PoolReady"));
    assert_eq!(cond(&s, PROGRESSING).status, "False");
    assert_eq!(cond(&s, DEGRADED).status, "False");
}

#[test]
fn a_pool_whose_backlog_keda_cannot_read_is_degraded_and_still_ready() {
    let plan = Ok(validate(&spec_from_yaml("replicas: 1\ncpu: '1'\nmemory: 1Gi")).unwrap());
    let (render, gotenberg) = (deployment(1, 1), deployment(1, 1));
    let keda = "TriggerError: Triggers defined in ScaledObject are not working correctly";
    let s = compute(&Observed {
        render: Some(&render),
        gotenberg: Some(&gotenberg),
        keda_not_ready: Some(keda),
        ..seen(&plan)
    });
    let degraded = cond(&s, DEGRADED);
    assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", BACKLOG_UNREADABLE));
    assert!(degraded.message.contains(keda), "{}", degraded.message);
    assert!(
        degraded.message.contains("kubectl describe scaledobject docs"),
        "{}",
        degraded.message
    );
    assert_eq!(s.last_error.as_ref().map(|e| e.reason.as_str()), Some(BACKLOG_UNREADABLE));
    // Its pods serve all the same.
    assert_eq!(cond(&s, READY).status, "True");
}

#[test]
fn transition_time_moves_only_when_the_condition_flips() {
    let plan = Ok(validate(&spec_from_yaml("replicas: 2")).unwrap());
    let observe = |render: &Deployment, previous: Option<&RenderPoolStatus>, now| {
        let g = deployment(1, 1);
        compute(&Observed {
            render: Some(render),
            gotenberg: Some(&g),
            previous,
            now,
            ..seen(&plan)
        })
    };
    let first = observe(&deployment(2, 1), None, at(100));
    assert_eq!(cond(&first, READY).status, "False");
    assert_eq!(cond(&first, READY).reason, "PodsNotReady");
    // Same observation later: identical status, so nothing would be written.
    let again = observe(&deployment(2, 1), Some(&first), at(200));
    assert_eq!(again, first);
    let ready = observe(&deployment(2, 2), Some(&again), at(300));
    assert_eq!(cond(&ready, READY).last_transition_time, at(300));
    assert_eq!(cond(&ready, DEGRADED).last_transition_time, at(100));
}

#[test]
fn bad_spec_is_degraded_with_the_sizing_message() {
    let plan = validate(&spec_from_yaml("memory: 600Mi"));
    // The refused spec is the error, whatever the pods left from the last spec do.
    let failure = last_error("MemoryTooSmallForOneSlot", "spec.memory 600Mi cannot hold one slot");
    let pods = [unschedulable("p", "render")];
    let s = compute(&Observed {
        generation: Some(2),
        pods: &pods,
        last_error: Some(failure.clone()),
        ..seen(&plan)
    });
    let degraded = cond(&s, DEGRADED);
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "MemoryTooSmallForOneSlot")
    );
    assert!(degraded.message.contains("needs at least 808 MiB"), "{}", degraded.message);
    assert_eq!(cond(&s, READY).status, "False");
    assert_eq!(s.slots_per_pod, None);
    assert!(s.selector.is_some(), "/scale keeps working on a degraded pool");
    assert_eq!(s.last_error, Some(failure));
}

#[test]
fn stuck_rollout_is_degraded_and_missing_children_are_progressing() {
    let plan = Ok(validate(&spec_from_yaml("gotenberg:\n  enabled: false")).unwrap());
    let stuck = past_deadline(deployment(2, 1));
    let base = |render| Observed { render, ..seen(&plan) };
    let s = compute(&base(Some(&stuck)));
    assert_eq!(cond(&s, DEGRADED).reason, "RolloutStuck");
    assert_eq!(s.gotenberg_replicas, Some(0));
    let s = compute(&base(None));
    assert_eq!(cond(&s, PROGRESSING).reason, "Creating");
    assert_eq!(cond(&s, READY).reason, "ChildrenMissing");
}

#[test]
fn ready_slots_count_only_ready_pods_and_the_last_error_is_kept() {
    let plan = Ok(validate(&spec_from_yaml("replicas: 4\ncpu: '3'\nmemory: 4Gi")).unwrap());
    let (render, gotenberg) = (deployment(4, 1), deployment(1, 0));
    let failure = LastError { reason: "Forbidden".into(), message: "apply Deployment: no".into() };
    let s = compute(&Observed {
        render: Some(&render),
        gotenberg: Some(&gotenberg),
        last_error: Some(failure.clone()),
        ..seen(&plan)
    });
    // 3 slots per pod; one of four pods ready.
    assert_eq!((s.ready_slots, s.total_slots), (Some(3), Some(12)));
    assert_eq!(s.gotenberg_ready_replicas, Some(0));
    assert_eq!(s.last_error, Some(failure));
}

#[test]
fn a_name_held_by_another_object_degrades_the_pool_naming_each_object() {
    let plan = Ok(validate(&spec_from_yaml("gotenberg:\n  enabled: false")).unwrap());
    let render = deployment(2, 2);
    let observe = |conflicts: &[String]| {
        compute(&Observed { render: Some(&render), conflicts, ..seen(&plan) })
    };
    let one = observe(&["Service docs-render".into()]);
    for type_ in [READY, PROGRESSING, DEGRADED] {
        assert_eq!(cond(&one, type_).reason, NAME_CONFLICT, "{type_}");
    }
    assert_eq!(cond(&one, DEGRADED).status, "True");
    assert_eq!(cond(&one, READY).status, "False", "all render pods ready, but not its Service");
    assert_eq!(
        cond(&one, DEGRADED).message,
        "Service docs-render already exists and is not owned by this RenderPool, so the \
         operator leaves it untouched and does not create that child; delete or rename it, or \
         give the pool another name"
    );
    let two = observe(&["HorizontalPodAutoscaler docs".into(), "Service docs-render".into()]);
    assert!(
        cond(&two, DEGRADED).message.starts_with(
            "HorizontalPodAutoscaler docs and Service docs-render already exist and are not owned"
        ),
        "{}",
        cond(&two, DEGRADED).message
    );
    let three = ["A a".to_string(), "B b".into(), "C c".into()];
    assert!(name_conflict(&three).starts_with("A a, B b and C c already exist"));
    assert_eq!(cond(&observe(&[]), DEGRADED).reason, "AsExpected");
}

/// A render Deployment in the middle of a rollout: generation 2 (observed or not), `updated` of
/// `desired` on it, every pod ready (the previous spec's serve).
fn rolling(desired: i32, updated: i32, observed: i64) -> Deployment {
    let mut d = deployment(desired, desired);
    d.metadata.generation = Some(2);
    let status = d.status.as_mut().unwrap();
    status.observed_generation = Some(observed);
    status.updated_replicas = Some(updated);
    d
}

/// The status of pool `docs` (generation 7) with `spec`, seen in one pass.
fn observe_pool(
    spec: &str,
    render: &Deployment,
    gotenberg: Option<&Deployment>,
    applied: Option<i64>,
) -> RenderPoolStatus {
    observe_all(spec, render, gotenberg, applied, &[], &[])
}

/// [`observe_pool`] with the ReplicaSets and pods that run.
fn observe_all(
    spec: &str,
    render: &Deployment,
    gotenberg: Option<&Deployment>,
    applied: Option<i64>,
    replica_sets: &[ReplicaSet],
    pods: &[Pod],
) -> RenderPoolStatus {
    let plan = Ok(validate(&spec_from_yaml(spec)).unwrap());
    compute(&Observed {
        generation: Some(7),
        render: Some(render),
        applied_generations: (applied, None),
        gotenberg,
        replica_sets,
        pods,
        ..seen(&plan)
    })
}

fn observe_rollout(render: &Deployment, applied: Option<i64>) -> RenderPoolStatus {
    observe_pool("replicas: 2\ngotenberg:\n  enabled: false", render, None, applied)
}

#[test]
fn ready_waits_for_the_current_spec_while_the_previous_ones_pods_serve() {
    // Every condition says which generation of the pool it describes.
    let s = observe_rollout(&rolling(2, 0, 1), None);
    assert!(s.conditions.iter().all(|c| c.observed_generation == Some(7)), "{s:?}");
    // The Deployment controller has not seen the new template yet: old pods all ready.
    let ready = cond(&s, READY);
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RollingOut"));
    assert_eq!(
        ready.message,
        "2 of 2 render pods ready (0 on the current spec); pods of the previous spec serve \
         meanwhile"
    );
    assert_eq!(cond(&s, PROGRESSING).status, "True");
    // Seen, one new pod so far.
    let s = observe_rollout(&rolling(2, 1, 2), None);
    assert_eq!(cond(&s, READY).reason, "RollingOut");
    assert!(
        cond(&s, READY).message.starts_with("2 of 2 render pods ready (1 on the current spec)")
    );
    // Done: every pod on the current spec and ready.
    let s = observe_rollout(&rolling(2, 2, 2), None);
    assert_eq!(
        (cond(&s, READY).status.as_str(), cond(&s, READY).reason.as_str()),
        ("True", "PoolReady")
    );
}

#[test]
fn a_deployment_this_pass_applied_is_not_taken_for_done_from_the_cache() {
    // The cache shows the finished rollout of generation 1; the apply just made generation 2.
    let cached = deployment(2, 2);
    let s = observe_rollout(&cached, Some(2));
    assert_eq!(cond(&s, READY).reason, "RollingOut");
    assert_eq!(cond(&s, PROGRESSING).reason, "RollingOut");
    // An apply the server found nothing to change in keeps the generation: still ready.
    let s = observe_rollout(&cached, Some(1));
    assert_eq!(cond(&s, READY).reason, "PoolReady");
}

#[test]
fn a_stuck_rollout_shows_in_ready_the_status_column() {
    let stuck = past_deadline(rolling(2, 1, 2));
    let s = observe_rollout(&stuck, None);
    let ready = cond(&s, READY);
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RolloutStuck"));
    assert_eq!(cond(&s, DEGRADED).reason, "RolloutStuck");
}

#[test]
fn counts_take_the_right_number() {
    let g = deployment(1, 1);
    let observe = |render: &Deployment| {
        observe_pool("replicas: 1\ncpu: '1'\nmemory: 1Gi", render, Some(&g), None)
    };
    let s = observe(&deployment(1, 1));
    assert_eq!(
        cond(&s, READY).message,
        "1 render pod with 1 slot (1 slot in all); 1 gotenberg pod, 1 Office conversion per \
         render pod"
    );
    let s = observe(&deployment(1, 0));
    assert_eq!(
        cond(&s, READY).message,
        "0 of 1 render pod ready, 1 of 1 gotenberg pod ready; check the pods' events if this \
         persists"
    );
    assert_eq!(
        (count(0, "slot", "slots"), count(2u32, "slot", "slots")),
        ("0 slots".into(), "2 slots".into())
    );
}

#[test]
fn restricted_says_whether_only_the_clients_reach_the_pool() {
    let render = deployment(2, 2);
    let observe = |spec: &str, conflicts: &[String], previous: Option<&RenderPoolStatus>| {
        let plan = validate(&spec_from_yaml(spec));
        compute(&Observed {
            generation: Some(3),
            render: Some(&render),
            conflicts,
            previous,
            ..seen(&plan)
        })
    };
    let open = observe("gotenberg:\n  enabled: false", &[], None);
    let c = cond(&open, RESTRICTED);
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "OpenToAllPods"));
    assert!(c.message.contains("set spec.clients"), "{}", c.message);
    // Open is no fault: the pool is still ready.
    assert_eq!(cond(&open, READY).status, "True");

    let clients = "gotenberg:\n  enabled: false\nclients:\n- podSelector: {}";
    let only = observe(clients, &[], None);
    let c = cond(&only, RESTRICTED);
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "ClientsOnly"));
    assert!(c.message.starts_with("NetworkPolicy docs-render admits only"), "{}", c.message);
    assert_eq!(c.observed_generation, Some(3));

    // Someone else's policy under the name: not restricted, and why.
    let taken = observe(clients, &["NetworkPolicy docs-render".into()], None);
    let c = cond(&taken, RESTRICTED);
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", NAME_CONFLICT));
    assert!(c.message.starts_with("NetworkPolicy docs-render already exists"), "{}", c.message);
    // Another child's conflict leaves the policy, and the condition, as they are.
    let other = observe(clients, &["Service docs-render".into()], None);
    assert_eq!(cond(&other, RESTRICTED).reason, "ClientsOnly");

    // A spec that cannot be applied changes no policy: the stored condition stays, time and all.
    let refused = observe("clients: []", &[], Some(&only));
    assert_eq!(cond(&refused, RESTRICTED), cond(&only, RESTRICTED));
    assert_eq!(cond(&refused, DEGRADED).reason, "InvalidClients");
    let never = observe("clients: []", &[], None);
    assert!(never.conditions.iter().all(|c| c.type_ != RESTRICTED));
}

/// The render pod template built for `spec`.
fn template(spec: &str) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    let pool = crate::test_fixtures::pool_from_yaml("docs", spec);
    let plan = validate(&pool.spec).unwrap();
    crate::build::build(&pool, &plan).unwrap().render.deployment.spec.template
}

/// A ReplicaSet of the render Deployment (uid `render-uid`) with `pods`, `ready` of them ready.
fn replica_set(name: &str, revision: i64, pods: i32, ready: i32, spec: &str) -> ReplicaSet {
    use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let mut set = ReplicaSet {
        spec: ReplicaSetSpec { template: Some(template(spec)), ..ReplicaSetSpec::default() },
        status: Some(ReplicaSetStatus {
            replicas: pods,
            ready_replicas: Some(ready),
            ..ReplicaSetStatus::default()
        }),
        ..ReplicaSet::default()
    };
    set.metadata.name = Some(name.into());
    set.metadata.annotations =
        Some([("deployment.kubernetes.io/revision".to_string(), revision.to_string())].into());
    set.metadata.owner_references = Some(vec![OwnerReference {
        uid: "render-uid".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    set
}

/// A pod of `component` that the scheduler could not place.
fn unschedulable(name: &str, component: &str) -> Pod {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    let mut pod = Pod {
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some(
                    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
                     available: 1 No preemption victims found for incoming pod."
                        .into(),
                ),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
        ..Pod::default()
    };
    pod.metadata.name = Some(name.into());
    pod.metadata.labels =
        Some([("app.kubernetes.io/component".to_string(), component.to_string())].into());
    pod
}

/// Pool `docs` (generation 7) with `spec`, its render Deployment `render` and what runs.
fn observe_running(
    spec: &str,
    render: &Deployment,
    sets: &[ReplicaSet],
    pods: &[Pod],
) -> RenderPoolStatus {
    observe_all(spec, render, None, None, sets, pods)
}

const ONE_SLOT: &str = "cpu: 600m\nmemory: 868Mi\ngotenberg:\n  enabled: false";
const TWO_SLOTS: &str = "cpu: 600m\nmemory: 868Mi\nslots: 2\ngotenberg:\n  enabled: false";

#[test]
fn ready_slots_are_those_of_the_ready_pods_each_with_its_own_templates_slots() {
    // slots: 2 applied to two one-slot pods: the new template's first pod is not ready yet.
    let mut render = rolling(2, 1, 2);
    render.metadata.uid = Some("render-uid".into());
    render.status.as_mut().unwrap().replicas = Some(3);
    let sets = [
        replica_set("docs-render-new", 2, 1, 0, TWO_SLOTS),
        replica_set("docs-render-old", 1, 2, 2, ONE_SLOT),
    ];
    let s = observe_running(TWO_SLOTS, &render, &sets, &[]);
    assert_eq!(s.slots_per_pod, Some(2), "the current spec's");
    assert_eq!(s.total_slots, Some(4), "once both pods run it");
    assert_eq!(s.ready_slots, Some(2), "two ready one-slot pods serve, not 2 x 2");
    let listed: Vec<(&str, bool, i32, i32, Option<i32>)> = s
        .replica_sets
        .iter()
        .map(|r| (r.name.as_str(), r.current, r.replicas, r.ready_replicas, r.slots_per_pod))
        .collect();
    assert_eq!(
        listed,
        [("docs-render-new", true, 1, 0, Some(2)), ("docs-render-old", false, 2, 2, Some(1))]
    );
    // The new pod ready, one old pod gone: 2 + 1.
    let sets = [
        replica_set("docs-render-new", 2, 1, 1, TWO_SLOTS),
        replica_set("docs-render-old", 1, 1, 1, ONE_SLOT),
    ];
    assert_eq!(observe_running(TWO_SLOTS, &render, &sets, &[]).ready_slots, Some(3));
    // At rest one ReplicaSet runs every pod, and none is listed.
    let sets = [replica_set("docs-render-new", 2, 2, 2, TWO_SLOTS)];
    let mut done = rolling(2, 2, 2);
    done.metadata.uid = Some("render-uid".into());
    let s = observe_running(TWO_SLOTS, &done, &sets, &[]);
    assert_eq!(s.ready_slots, Some(4));
    assert!(s.replica_sets.is_empty());
}

#[test]
fn a_surge_pod_with_no_room_says_so_at_once_with_the_strategy_that_fits() {
    // A template change on a full node: the surge pod waits, the two old pods serve.
    let mut render = rolling(2, 1, 2);
    render.status.as_mut().unwrap().replicas = Some(3);
    let pending = [unschedulable("docs-render-7d9f-x2x4q", "render")];
    let s = observe_running(ONE_SLOT, &render, &[], &pending);
    let ready = cond(&s, READY);
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", UNSCHEDULABLE));
    assert_eq!(
        ready.message,
        "2 of 2 render pods ready (1 on the current spec); render pod docs-render-7d9f-x2x4q \
         cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes \
         are available: 1 No preemption victims found for incoming pod. The rollout starts each \
         new pod before it stops an old one (spec.rollout maxSurge 1, maxUnavailable 0) and no \
         node has room for it: set spec.rollout maxSurge 0 and maxUnavailable 1 to replace the \
         pods one at a time in place, or make room on a node; the previous spec's pods serve \
         meanwhile"
    );
    for type_ in [PROGRESSING, DEGRADED] {
        assert_eq!(cond(&s, type_).reason, UNSCHEDULABLE, "{type_}");
        assert_eq!(cond(&s, type_).message, ready.message, "one message for one problem");
    }
    assert_eq!(
        (cond(&s, PROGRESSING).status.as_str(), cond(&s, DEGRADED).status.as_str()),
        ("False", "True")
    );
    // The LAST ERROR column: the same, cut to its length.
    let last = s.last_error.clone().unwrap();
    assert_eq!(last.reason, UNSCHEDULABLE);
    assert!(ready.message.starts_with(last.message.trim_end_matches("...")));
    assert!(last.message.chars().count() <= LAST_ERROR_CHARS + 3);

    // Read before the Deployment controller saw the new template (its counts still the old
    // template's: 2 pods, 2 updated): the same advice, not the one for a pod that fits nowhere.
    let unseen = rolling(2, 2, 1);
    let s = observe_running(ONE_SLOT, &unseen, &[], &pending);
    let message = &cond(&s, READY).message;
    assert!(message.contains("(0 on the current spec)"), "{message}");
    assert!(message.contains("set spec.rollout maxSurge 0 and maxUnavailable 1"), "{message}");
    // Replacing in place, a pod that finds no node is not a surge pod: other advice.
    let in_place = format!("{ONE_SLOT}\nrollout:\n  maxSurge: 0\n  maxUnavailable: 1");
    let s = observe_running(&in_place, &render, &[], &pending);
    let message = &cond(&s, READY).message;
    assert!(
        message.ends_with("Make room on a node, or lower spec.replicas, spec.cpu or spec.memory"),
        "{message}"
    );
    // Several at once: one message naming each.
    let two = [unschedulable("a", "render"), unschedulable("b", "render")];
    let s = observe_running(ONE_SLOT, &render, &[], &two);
    assert!(cond(&s, READY).message.contains("; render pods a and b cannot be scheduled: 0/1"));
    // Pods of another component, or none stuck: the usual rollout status.
    let s = observe_running(ONE_SLOT, &render, &[], &[unschedulable("g", "gotenberg")]);
    assert_eq!(cond(&s, READY).reason, "RollingOut");
    assert_eq!(s.last_error, None);
}

#[test]
fn a_pod_that_cannot_start_names_its_reason_and_where_to_look() {
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus};
    let mut failing = unschedulable("docs-render-1", "render");
    let status = failing.status.as_mut().unwrap();
    status.conditions = None;
    status.container_statuses = Some(vec![ContainerStatus {
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ErrImageNeverPull".into()),
                message: Some(
                    "Container image \"x:9\" is not present with pull policy of Never".into(),
                ),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }]);
    let s = observe_running(ONE_SLOT, &deployment(2, 1), &[], &[failing]);
    let ready = cond(&s, READY);
    assert_eq!(ready.reason, CANNOT_START);
    assert_eq!(
        ready.message,
        "1 of 2 render pods ready; render pod docs-render-1 cannot start: ErrImageNeverPull: \
         Container image \"x:9\" is not present with pull policy of Never; check spec.image and \
         the image pull policy"
    );
    assert_eq!(s.last_error.unwrap().reason, CANNOT_START);
}

#[test]
fn a_rollout_past_its_deadline_is_the_last_error() {
    let s = observe_rollout(&past_deadline(rolling(2, 1, 2)), None);
    let last = s.last_error.unwrap();
    assert_eq!(last.reason, "RolloutStuck");
    assert!(
        last.message.starts_with("render rollout exceeded its progress deadline"),
        "{}",
        last.message
    );
}

#[test]
fn the_backlog_a_pod_told_is_the_status_and_none_leaves_it_out() {
    let plan = Ok(validate(&spec_from_yaml("replicas: 1")).unwrap());
    let told = compute(&Observed { jobs: Some(JobsStatus { pending: 7 }), ..seen(&plan) });
    assert_eq!(told.jobs, Some(JobsStatus { pending: 7 }));
    let value = serde_json::to_value(&told).unwrap();
    assert_eq!(value["jobs"], serde_json::json!({"pending": 7}));
    let untold = serde_json::to_value(compute(&seen(&plan))).unwrap();
    assert_eq!(untold.get("jobs"), None, "absent, not zero, while no pod told it");
}
