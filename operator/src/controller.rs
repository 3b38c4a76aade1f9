//! The controller: watches RenderPools and their children, and runs the pipeline
//! validate -> build -> apply -> status for each pool.

use crate::apply::{ApplyError, MANAGER, Stores, apply_children};
use crate::build::{Component, MissingMetadata, build, child_name};
use crate::crd::{RenderPool, RenderPoolStatus};
use crate::metrics::Metrics;
use crate::status::{Observed, compute};
use crate::validate::{SpecError, validate};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Label every child carries; the child watches select on it.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by=renderpool-operator";
/// A periodic re-check in case a watch event was missed; it writes nothing when nothing changed.
const RESYNC: Duration = Duration::from_secs(15 * 60);
/// Longest wait between retries of a failing pool.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Shared state of every reconcile.
pub struct Context {
    client: Client,
    stores: Stores,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    /// Consecutive failures per pool, for exponential backoff.
    failures: Mutex<HashMap<String, u32>>,
}

/// Why a reconcile failed (and will be retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Writing a child failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Writing the status failed.
    #[error("writing status of RenderPool {0}: {1}")]
    Status(String, #[source] kube::Error),
    /// The object lacks server-set metadata.
    #[error(transparent)]
    Metadata(#[from] MissingMetadata),
}

impl ReconcileError {
    /// Label for the error metric.
    fn kind(&self) -> &'static str {
        match self {
            Self::Apply(_) => "apply",
            Self::Status(..) => "status",
            Self::Metadata(_) => "metadata",
        }
    }
}

/// Runs the controller until `shutdown` resolves. Call only while holding the lease.
pub async fn run(
    client: Client,
    metrics: Arc<Metrics>,
    reporter: Reporter,
    ready: impl Fn() + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (deployments, deployment_events) = child_reflector::<Deployment>(&client);
    let (services, service_events) = child_reflector::<Service>(&client);
    let (pdbs, pdb_events) = child_reflector::<PodDisruptionBudget>(&client);
    let stores = Stores { deployments, services, pdbs };
    let ctx = Arc::new(Context {
        client: client.clone(),
        stores: stores.clone(),
        metrics,
        recorder: Recorder::new(client.clone(), reporter),
        failures: Mutex::new(HashMap::new()),
    });
    let controller = Controller::new(Api::<RenderPool>::all(client), watcher::Config::default())
        .owns_stream(deployment_events)
        .owns_stream(service_events)
        .owns_stream(pdb_events)
        .graceful_shutdown_on(shutdown);
    let pools = controller.store();
    // Ready once every cache is filled: before that, a pool would look childless.
    tokio::spawn(async move {
        let synced = futures::join!(
            pools.wait_until_ready(),
            stores.deployments.wait_until_ready(),
            stores.services.wait_until_ready(),
            stores.pdbs.wait_until_ready()
        );
        if let (Ok(()), Ok(()), Ok(()), Ok(())) = synced {
            tracing::info!("caches synced");
            ready();
        }
    });
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "controller event");
            }
        })
        .await;
}

/// A reflector over the operator's children of one kind, as a trigger stream and its cache.
fn child_reflector<K>(
    client: &Client,
) -> (reflector::Store<K>, impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().labels(MANAGED_BY);
    let stream = reflector::reflector(writer, watcher(Api::<K>::all(client.clone()), config))
        .default_backoff()
        .touched_objects();
    (reader, stream)
}

async fn reconcile(pool: Arc<RenderPool>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let key = format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any());
    let result = reconcile_pool(&pool, &ctx).await;
    match &result {
        Ok(outcome) => {
            ctx.metrics.reconciled(outcome, started.elapsed());
            if let Ok(mut failures) = ctx.failures.lock() {
                failures.remove(&key);
            }
        }
        Err(err) => {
            ctx.metrics.reconciled("error", started.elapsed());
            ctx.metrics.failed(err.kind());
        }
    }
    result.map(|_| Action::requeue(RESYNC))
}

/// One pass over a pool; returns what it did, for the metrics.
async fn reconcile_pool(pool: &RenderPool, ctx: &Context) -> Result<&'static str, ReconcileError> {
    if pool.metadata.deletion_timestamp.is_some() {
        // Children go with the pool through their owner references.
        return Ok("deleting");
    }
    let namespace = pool.namespace().ok_or(MissingMetadata("namespace"))?;
    let name = pool.name_any();
    let uid = pool.uid().ok_or(MissingMetadata("uid"))?;
    let mut plan = validate(&pool.spec);
    let mut applied = Vec::new();
    if let Ok(valid) = &plan {
        let children = build(pool, valid)?;
        let stores = &ctx.stores;
        match apply_children(&ctx.client, stores, &ctx.metrics, &namespace, &name, &uid, children)
            .await
        {
            Ok(written) => applied = written,
            Err(ApplyError::Api { kind, name, source: kube::Error::Api(status), .. })
                if status.code == 400 || status.code == 422 =>
            {
                plan = Err(SpecError::Rejected(format!("{kind} {name}: {}", status.message)));
            }
            Err(err) => return Err(err.into()),
        }
    }
    let owned = |component| {
        let key = ObjectRef::new(&child_name(&name, component)).within(&namespace);
        ctx.stores
            .deployments
            .get(&key)
            .filter(|d| d.owner_references().iter().any(|o| o.uid == uid))
    };
    let (render, gotenberg) = (owned(Component::Render), owned(Component::Gotenberg));
    let status = compute(&Observed {
        pool: &name,
        generation: pool.metadata.generation,
        plan: &plan,
        render: render.as_deref(),
        gotenberg: gotenberg.as_deref(),
        previous: pool.status.as_ref(),
        now: Time(
            Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH),
        ),
    });
    let mut events = crate::events::transitions(pool.status.as_ref(), &status);
    if !applied.is_empty() {
        tracing::info!(pool = %name, namespace = %namespace, written = ?applied, "applied children");
        events.push(crate::events::applied(&applied));
    }
    let outcome = if pool.status.as_ref() != Some(&status) {
        write_status(ctx, &namespace, &name, &status).await?;
        "status"
    } else if applied.is_empty() {
        "unchanged"
    } else {
        "applied"
    };
    if let Err(err) = &plan {
        tracing::warn!(pool = %name, namespace = %namespace, reason = err.reason(), error = %err, "spec cannot be applied");
    }
    publish(ctx, pool, events).await;
    Ok(outcome)
}

async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
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
        .map_err(|e| ReconcileError::Status(format!("{namespace}/{name}"), e))?;
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

fn error_policy(pool: Arc<RenderPool>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any());
    let attempt = match ctx.failures.lock() {
        Ok(mut failures) => {
            let n = failures.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        }
        Err(_) => 1,
    };
    let delay = backoff(attempt);
    tracing::error!(pool = %key, error = %err, attempt, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// 1s, 2s, 4s, ... capped at five minutes.
fn backoff(attempt: u32) -> Duration {
    let seconds = 1u64.checked_shl(attempt.saturating_sub(1)).unwrap_or(u64::MAX);
    Duration::from_secs(seconds).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(9), Duration::from_secs(256));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(backoff(200), MAX_BACKOFF);
    }
}
