//! The controller: watches RenderPools and their children, and runs the pipeline
//! validate -> build -> apply -> status for each pool.

use crate::apply::{ApplyError, MANAGER, Stores, Target, apply_children};
use crate::build::{Component, MissingMetadata, build, child_name};
use crate::crd::{RenderPool, RenderPoolStatus};
use crate::metrics::Metrics;
use crate::ownership::owned_by;
use crate::pool_figures;
use crate::status::{NAME_CONFLICT, Observed, compute, last_error, name_conflict};
use crate::trace::reconcile_span;
use crate::validate::{SpecError, validate};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use renderpool_runtime::pacing::Backoff;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// Label every child carries; the child watches select on it.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by=renderpool-operator";
/// A periodic re-check in case a watch event was missed; it writes nothing when nothing changed.
const RESYNC: Duration = Duration::from_secs(15 * 60);
/// How often a pool with spec.jobs is passed over anyway: its backlog in status changes without
/// any object changing.
const BACKLOG_REFRESH: Duration = Duration::from_secs(30);
/// First wait before retrying a failing pool; it doubles with each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between retries of a failing pool.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How soon a pool whose child names are taken looks again: the objects holding them carry no
/// owner reference to the pool, so freeing a name sends the pool no watch event.
const CONFLICT_RECHECK: Duration = Duration::from_secs(30);
/// How soon a pool whose autoscaler changes hands looks again for the old one to be gone.
const HANDOVER_RECHECK: Duration = Duration::from_secs(2);

/// Which namespaces the operator watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (a ClusterRole grants the rights).
    Cluster,
    /// Only these (a Role in each grants the rights); one watch per namespace and kind.
    Namespaces(Vec<String>),
}

impl Scope {
    /// The namespaces to watch, `None` standing for all of them.
    fn namespaces(&self) -> Vec<Option<&str>> {
        match self {
            Self::Cluster => vec![None],
            Self::Namespaces(names) => names.iter().map(|n| Some(n.as_str())).collect(),
        }
    }
}

/// Shared state of every reconcile in one watched scope.
pub struct Context {
    client: Client,
    stores: Stores,
    /// What runs: the pools' ReplicaSets and pods, which status reads and nothing writes.
    running: Running,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    /// The backoff of each pool failing now (gone at its next success).
    failures: Mutex<HashMap<String, Backoff>>,
    /// The status this operator last wrote for each pool, by uid. The watch cache may still
    /// hold the one before it; judged against that, a reconcile right after a write would see
    /// a change that is not one (a condition's transition time moved) and write again.
    written: Mutex<HashMap<String, RenderPoolStatus>>,
}

/// Reflector caches of what the children run: the Deployments' ReplicaSets and their pods
/// (found by the operator's label, like the children).
#[derive(Clone)]
struct Running {
    replica_sets: reflector::Store<ReplicaSet>,
    pods: reflector::Store<Pod>,
}

impl Running {
    /// The ReplicaSets and pods of pool `name` in `namespace`.
    fn of(&self, namespace: &str, name: &str) -> (Vec<ReplicaSet>, Vec<Pod>) {
        fn pick<K: Resource + Clone>(
            store: &reflector::Store<K>,
            namespace: &str,
            name: &str,
        ) -> Vec<K>
        where
            K::DynamicType: std::hash::Hash + Eq + Clone,
        {
            store
                .state()
                .iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
                .filter(|o| {
                    o.meta().labels.as_ref().and_then(|l| l.get(INSTANCE)).map(String::as_str)
                        == Some(name)
                })
                .map(|o| K::clone(o))
                .collect()
        }
        (pick(&self.replica_sets, namespace, name), pick(&self.pods, namespace, name))
    }
}

/// The label naming the pool a child, ReplicaSet or pod belongs to.
const INSTANCE: &str = "app.kubernetes.io/instance";

/// The pool a ReplicaSet or pod belongs to, by its labels.
fn pool_of<K: Resource>(object: K) -> Option<ObjectRef<RenderPool>> {
    let name = object.meta().labels.as_ref()?.get(INSTANCE)?;
    Some(ObjectRef::new(name).within(object.meta().namespace.as_deref()?))
}

/// Why a reconcile failed (and will be retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Writing a child failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Writing the status failed (logged in the reconcile's span, which names the pool).
    #[error("writing the pool's status: {0}")]
    Status(#[source] kube::Error),
    /// The object lacks server-set metadata.
    #[error(transparent)]
    Metadata(#[from] MissingMetadata),
}

impl ReconcileError {
    /// Label for the error metric.
    fn kind(&self) -> &'static str {
        match self {
            Self::Apply(_) => "apply",
            Self::Status(_) => "status",
            Self::Metadata(_) => "metadata",
        }
    }
}

/// The caches did not fill in time: a watch that keeps failing (a right missing, an API server
/// connection that hangs). A leader in that state reconciles nothing and is never ready, so it
/// gives up rather than hold the lease.
#[derive(Debug, thiserror::Error)]
#[error("caches not synced after {}s: {}", .after.as_secs(), .pending.join(", "))]
pub struct SyncTimeout {
    /// How long it waited.
    pub after: Duration,
    /// The caches still empty, as `Kind` or `Kind in namespace`.
    pub pending: Vec<String>,
}

/// Runs the controller over `scope` until `shutdown` resolves, calling `ready` once every cache
/// is filled; fails if that takes longer than `sync_timeout`. Call only while holding the lease.
pub async fn run(
    client: Client,
    scope: &Scope,
    metrics: Arc<Metrics>,
    reporter: Reporter,
    ready: impl Fn() + Send + 'static,
    sync_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), SyncTimeout> {
    let shutdown = shutdown.shared();
    let recorder = Recorder::new(client.clone(), reporter);
    let mut caches = Vec::new();
    let mut controllers = Vec::new();
    for namespace in scope.namespaces() {
        let (deployments, deployment_events) =
            labelled_reflector::<Deployment>(&client, namespace, true);
        let (services, service_events) = labelled_reflector::<Service>(&client, namespace, true);
        let (pdbs, pdb_events) =
            labelled_reflector::<PodDisruptionBudget>(&client, namespace, true);
        let (config_maps, config_map_events) =
            labelled_reflector::<ConfigMap>(&client, namespace, true);
        let (network_policies, network_policy_events) =
            labelled_reflector::<NetworkPolicy>(&client, namespace, true);
        let (autoscalers, autoscaler_events) =
            labelled_reflector::<HorizontalPodAutoscaler>(&client, namespace, true);
        let stores =
            Stores { deployments, services, pdbs, config_maps, network_policies, autoscalers };
        let (replica_sets, replica_set_events) =
            labelled_reflector::<ReplicaSet>(&client, namespace, false);
        let (pods, pod_events) = labelled_reflector::<Pod>(&client, namespace, false);
        let running = Running { replica_sets, pods };
        let ctx = Arc::new(Context {
            client: client.clone(),
            stores: stores.clone(),
            running: running.clone(),
            metrics: metrics.clone(),
            recorder: recorder.clone(),
            failures: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        });
        let controller =
            Controller::new(api::<RenderPool>(&client, namespace), watcher::Config::default())
                .owns_stream(deployment_events)
                .owns_stream(service_events)
                .owns_stream(pdb_events)
                .owns_stream(config_map_events)
                .owns_stream(network_policy_events)
                .owns_stream(autoscaler_events)
                .watches_stream(replica_set_events, pool_of)
                .watches_stream(pod_events, pool_of)
                .graceful_shutdown_on(shutdown.clone());
        caches.push(Caches { namespace, pools: controller.store(), stores, running });
        controllers.push(
            controller
                .run(reconcile, error_policy, ctx)
                .for_each(|result| async move {
                    if let Err(err) = result {
                        tracing::debug!(error = %err, "controller event");
                    }
                })
                .boxed(),
        );
    }
    // The pool gauges read the pool caches while this leader runs; they go with it.
    let pool_caches: Vec<_> = caches.iter().map(|c| c.pools.clone()).collect();
    let _pools_exported = metrics.export_pools(move || pool_figures::of_stores(&pool_caches));
    // Ready once every cache is filled: before that, a pool would look childless.
    let watchdog = async {
        let filled = futures::future::join_all(caches.iter().map(Caches::filled));
        match tokio::time::timeout(sync_timeout, filled).await {
            Ok(filled) => {
                if filled.into_iter().all(|ok| ok) {
                    tracing::info!("caches synced");
                    ready();
                }
                // Synced, or the controllers ended (their writers dropped): nothing to watch.
                std::future::pending::<SyncTimeout>().await
            }
            Err(_) => SyncTimeout {
                after: sync_timeout,
                pending: caches.iter().flat_map(Caches::pending).collect(),
            },
        }
    };
    tokio::select! {
        _ = futures::future::join_all(controllers) => Ok(()),
        timeout = watchdog => Err(timeout),
    }
}

/// The caches of one watched namespace (`None`: all of them).
struct Caches<'a> {
    namespace: Option<&'a str>,
    pools: reflector::Store<RenderPool>,
    stores: Stores,
    running: Running,
}

impl Caches<'_> {
    /// Waits until every cache has its first full list; false if a writer went away first.
    async fn filled(&self) -> bool {
        let (stores, running) = (&self.stores, &self.running);
        let filled = futures::join!(
            self.pools.wait_until_ready(),
            stores.deployments.wait_until_ready(),
            stores.services.wait_until_ready(),
            stores.pdbs.wait_until_ready(),
            stores.config_maps.wait_until_ready(),
            stores.network_policies.wait_until_ready(),
            stores.autoscalers.wait_until_ready(),
            running.replica_sets.wait_until_ready(),
            running.pods.wait_until_ready()
        );
        matches!(filled, (Ok(()), Ok(()), Ok(()), Ok(()), Ok(()), Ok(()), Ok(()), Ok(()), Ok(())))
    }

    /// The kinds whose cache has not had its first full list yet, named for a log line.
    fn pending(&self) -> Vec<String> {
        let stores = &self.stores;
        let kinds = [
            ("RenderPool", unsynced(&self.pools)),
            ("Deployment", unsynced(&stores.deployments)),
            ("Service", unsynced(&stores.services)),
            ("PodDisruptionBudget", unsynced(&stores.pdbs)),
            ("ConfigMap", unsynced(&stores.config_maps)),
            ("NetworkPolicy", unsynced(&stores.network_policies)),
            ("HorizontalPodAutoscaler", unsynced(&stores.autoscalers)),
            ("ReplicaSet", unsynced(&self.running.replica_sets)),
            ("Pod", unsynced(&self.running.pods)),
        ];
        let place = self.namespace.map(|ns| format!(" in {ns}")).unwrap_or_default();
        kinds
            .into_iter()
            .filter(|(_, unsynced)| *unsynced)
            .map(|(kind, _)| format!("{kind}{place}"))
            .collect()
    }
}

/// Whether `store` has yet to receive its first full list (checked without waiting).
fn unsynced<K>(store: &reflector::Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    !matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// A reflector over the objects of one kind that carry the operator's label (its children,
/// and the ReplicaSets and pods they run), as a trigger stream and its cache. Only a child's
/// converge check needs managedFields: with `keep_managed_fields` false they are dropped.
fn labelled_reflector<K>(
    client: &Client,
    namespace: Option<&str>,
    keep_managed_fields: bool,
) -> (reflector::Store<K>, impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().labels(MANAGED_BY);
    let watch = watcher(api::<K>(client, namespace), config).modify(move |object| {
        if !keep_managed_fields {
            object.managed_fields_mut().clear();
        }
    });
    let stream = reflector::reflector(writer, watch).default_backoff().touched_objects();
    (reader, stream)
}

/// One reconcile, in its own span (pool, namespace, trace id). A failure is logged and retried
/// here, inside that span, so kube-runtime's error policy never sees one.
async fn reconcile(pool: Arc<RenderPool>, ctx: Arc<Context>) -> Result<Action, Infallible> {
    let span = reconcile_span(&pool.name_any(), &pool.namespace().unwrap_or_default());
    Ok(reconcile_and_retry(&pool, &ctx).instrument(span).await)
}

async fn reconcile_and_retry(pool: &RenderPool, ctx: &Context) -> Action {
    let started = Instant::now();
    let key = format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any());
    match reconcile_pool(pool, ctx).await {
        Ok(outcome) => {
            tracing::debug!(outcome, "reconciled");
            ctx.metrics.reconciled(outcome, started.elapsed());
            if let Ok(mut failures) = ctx.failures.lock() {
                failures.remove(&key);
            }
            match outcome {
                "conflict" => Action::requeue(CONFLICT_RECHECK),
                "handover" => Action::requeue(HANDOVER_RECHECK),
                _ if pool.spec.jobs.is_some() => Action::requeue(BACKLOG_REFRESH),
                _ => Action::requeue(RESYNC),
            }
        }
        Err(err) => {
            ctx.metrics.reconciled("error", started.elapsed());
            ctx.metrics.failed(err.kind());
            let (attempt, delay) = match ctx.failures.lock() {
                Ok(mut failures) => {
                    let backoff = failures.entry(key).or_insert_with(reconcile_backoff);
                    let delay = backoff.next_delay();
                    (backoff.attempts(), delay)
                }
                Err(_) => (1, FIRST_BACKOFF),
            };
            tracing::error!(error = %err, attempt, retry_in = ?delay, "reconcile failed");
            Action::requeue(delay)
        }
    }
}

/// One pass over a pool; returns what it did, for the metrics.
async fn reconcile_pool(pool: &RenderPool, ctx: &Context) -> Result<&'static str, ReconcileError> {
    if pool.metadata.deletion_timestamp.is_some() {
        if let (Some(uid), Ok(mut written)) = (pool.uid(), ctx.written.lock()) {
            written.remove(&uid);
        }
        // Children go with the pool through their owner references, which only its own
        // children carry: objects it found under its names were never given one.
        return Ok("deleting");
    }
    let namespace = pool.namespace().ok_or(MissingMetadata("namespace"))?;
    let name = pool.name_any();
    let uid = pool.uid().ok_or(MissingMetadata("uid"))?;
    let mut plan = validate(&pool.spec);
    let mut applied = Vec::new();
    let mut conflicts = Vec::new();
    let mut generations = (None, None);
    let mut refused = None;
    let mut handing_over = false;
    let mut keda_not_ready = None;
    // Whole seconds, as the status writes its times.
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH);
    if let Ok(valid) = &plan {
        let children = build(pool, valid)?;
        let target = Target {
            client: &ctx.client,
            stores: &ctx.stores,
            metrics: &ctx.metrics,
            namespace: &namespace,
            now,
        };
        match apply_children(&target, &name, &uid, children).await {
            Ok(done) => {
                let generation = |component| done.generation_of(&child_name(&name, component));
                generations = (generation(Component::Render), generation(Component::Gotenberg));
                (applied, conflicts) = (done.written, done.conflicts);
                handing_over = done.handing_over;
                keda_not_ready = done.keda_not_ready;
                if done.keda_missing {
                    plan = Err(SpecError::KedaMissing);
                }
            }
            Err(ApplyError { kind, name, source: kube::Error::Api(status), .. })
                if status.code == 400 || status.code == 422 =>
            {
                plan = Err(SpecError::Rejected(format!("{kind} {name}: {}", status.message)));
            }
            // Recorded in the status below, then retried with backoff.
            Err(err) => refused = Some(err),
        }
    }
    let last_error = match (&plan, &refused) {
        (Err(err), _) => Some(last_error(err.reason(), &err.to_string())),
        (Ok(_), Some(err)) => Some(last_error(refusal_reason(err), &refusal_message(err))),
        (Ok(_), None) if !conflicts.is_empty() => {
            Some(last_error(NAME_CONFLICT, &name_conflict(&conflicts)))
        }
        (Ok(_), None) => None,
    };
    let owned = |component| {
        let key = ObjectRef::new(&child_name(&name, component)).within(&namespace);
        ctx.stores.deployments.get(&key).filter(|d| owned_by(d.meta(), &uid))
    };
    let (render, gotenberg) = (owned(Component::Render), owned(Component::Gotenberg));
    let (replica_sets, pods) = ctx.running.of(&namespace, &name);
    let jobs = match (&pool.spec.jobs, &plan) {
        (Some(_), Ok(_)) => crate::backlog::read(&name, &pods).await,
        _ => None,
    };

    // What this operator wrote last is newer than the cache whenever the two differ.
    let previous = ctx.written.lock().ok().and_then(|w| w.get(&uid).cloned());
    let previous = previous.as_ref().or(pool.status.as_ref());
    let status = compute(&Observed {
        pool: &name,
        generation: pool.metadata.generation,
        plan: &plan,
        render: render.as_deref(),
        applied_generations: generations,
        gotenberg: gotenberg.as_deref(),
        replica_sets: &replica_sets,
        pods: &pods,
        conflicts: &conflicts,
        previous,
        last_error,
        jobs,
        keda_not_ready: keda_not_ready.as_deref(),
        now: Time(now),
    });
    let mut events = crate::events::transitions(previous, &status);
    if !applied.is_empty() {
        tracing::info!(written = ?applied, "applied children");
        events.push(crate::events::applied(&applied));
    }
    let changed = previous != Some(&status);
    if changed && let Err(err) = write_status(ctx, &namespace, &name, &uid, &status).await {
        // A refused child is the error to retry on; a status that could not say so is logged.
        return Err(match refused {
            Some(refused) => {
                tracing::warn!(error = %err, "could not record the failure in status");
                refused.into()
            }
            None => err,
        });
    }
    if let Err(err) = &plan {
        tracing::warn!(reason = err.reason(), error = %err, "spec cannot be applied");
    }
    if !conflicts.is_empty() {
        tracing::warn!(
            ?conflicts,
            "child names held by objects the pool does not own; left untouched"
        );
    }
    publish(ctx, pool, events).await;
    if let Some(refused) = refused {
        return Err(refused.into());
    }
    Ok(if !conflicts.is_empty() {
        "conflict"
    } else if handing_over {
        "handover"
    } else if changed {
        "status"
    } else if applied.is_empty() {
        "unchanged"
    } else {
        "applied"
    })
}

/// The API server's own reason for refusing a write (Forbidden, Conflict, ...), when it gave one.
fn refusal_reason(err: &ApplyError) -> &str {
    match &err.source {
        kube::Error::Api(status) if !status.reason.is_empty() => &status.reason,
        _ => "ApplyFailed",
    }
}

/// What was refused and the API server's words for it, without the client's debug dump.
fn refusal_message(err: &ApplyError) -> String {
    let what = format!("{} {} {}/{}", err.action, err.kind, err.namespace, err.name);
    match &err.source {
        kube::Error::Api(status) => format!("{what}: {}", status.message),
        other => format!("{what}: {other}"),
    }
}

async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    uid: &str,
    status: &RenderPoolStatus,
) -> Result<(), ReconcileError> {
    let api: Api<RenderPool> = Api::namespaced(ctx.client.clone(), namespace);
    // Server-side apply of /status needs apiVersion and kind beside the status.
    let body = serde_json::json!({
        "apiVersion": RenderPool::api_version(&()),
        "kind": RenderPool::kind(&()),
        "status": status,
    });
    ctx.metrics.write("RenderPool", "status");
    api.patch_status(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body))
        .await
        .map_err(ReconcileError::Status)?;
    if let Ok(mut written) = ctx.written.lock() {
        written.insert(uid.to_string(), status.clone());
    }
    Ok(())
}

/// Events are for people; failing to publish one must not fail the reconcile.
async fn publish(ctx: &Context, pool: &RenderPool, events: Vec<kube::runtime::events::Event>) {
    let reference = pool.object_ref(&());
    for event in events {
        ctx.metrics.write("Event", "create");
        if let Err(err) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(reason = %event.reason, error = %err, "could not publish event");
        }
    }
}

/// kube-runtime's hook for failed reconciles: there are none, [`reconcile`] retries its own.
fn error_policy(_: Arc<RenderPool>, never: &Infallible, _: Arc<Context>) -> Action {
    match *never {}
}

/// 1 s, 2 s, 4 s, ... capped at five minutes.
fn reconcile_backoff() -> Backoff {
    Backoff::exponential(FIRST_BACKOFF, MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_error_kind_is_one_the_metrics_export_at_zero() {
        let status = kube::core::Status::failure("gone", "NotFound").with_code(404).boxed();
        let errors = [
            ReconcileError::Apply(ApplyError {
                action: "apply",
                kind: "Deployment".into(),
                namespace: "docs".into(),
                name: "p-render".into(),
                source: kube::Error::Api(status.clone()),
            }),
            ReconcileError::Status(kube::Error::Api(status)),
            ReconcileError::Metadata(MissingMetadata("uid")),
        ];
        let kinds: Vec<&str> = errors.iter().map(ReconcileError::kind).collect();
        assert_eq!(kinds, crate::metrics::RECONCILE_ERROR_KINDS);
    }

    #[test]
    fn a_failing_pool_waits_twice_as_long_each_time_up_to_five_minutes() {
        let mut backoff = reconcile_backoff();
        let waits: Vec<u64> = (0..10).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(backoff.attempts(), 10);
    }

    #[test]
    fn a_refused_write_becomes_a_short_last_error_with_the_servers_reason() {
        let message = format!("deployments.apps \"p-render\" is forbidden: {}", "x".repeat(400));
        let status = kube::core::Status::failure(&message, "Forbidden").with_code(403).boxed();
        let err = ApplyError {
            action: "apply",
            kind: "Deployment".into(),
            namespace: "docs".into(),
            name: "p-render".into(),
            source: kube::Error::Api(status),
        };
        let recorded = last_error(refusal_reason(&err), &refusal_message(&err));
        assert_eq!(recorded.reason, "Forbidden");
        assert!(recorded.message.starts_with("apply Deployment docs/p-render: deployments.apps"));
        assert_eq!(recorded.message.chars().count(), crate::status::LAST_ERROR_CHARS + 3);
        assert!(!recorded.message.contains("ErrorResponse"), "no debug dump: {}", recorded.message);
    }
}
