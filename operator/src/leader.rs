//! Leader election on a Lease: only the holder runs the controller; a standby waits, and takes
//! over when the holder releases the lease or stops renewing it.

use crate::controller::{self, Scope, SyncTimeout};
use crate::metrics::Metrics;
use kube::Client;
use kube::runtime::events::Reporter;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Where the lease lives and who this process is.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This process's identity in the Lease.
    pub identity: String,
    /// Seconds a lease stays valid without renewal (a crashed leader is replaced after this).
    pub duration_seconds: u64,
    /// The namespaces the leader reconciles.
    pub scope: Scope,
    /// How long a new leader may take to fill its caches before it gives the lease up.
    pub sync_timeout: Duration,
}

/// Longest wait for the Lease to be read or created at start-up: the client has no read timeout,
/// and a process stuck here is neither ready nor competing.
const LEASE_SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why leader election ended other than by a shutdown.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Reading, creating or renewing the Lease failed.
    #[error("lease {name}: {source}")]
    Lease {
        name: String,
        #[source]
        source: LeaseManagerError,
    },
    /// The Lease could not be read or created in time.
    #[error("lease {name}: no answer from the API server after {}s", LEASE_SETUP_TIMEOUT.as_secs())]
    LeaseSetupTimeout { name: String },
    /// As leader, the caches did not fill; the lease was released so a standby can lead.
    #[error(transparent)]
    Sync(#[from] SyncTimeout),
}

/// Readiness: the lease manager works, and, when leading, the caches are synced.
#[derive(Debug, Default)]
pub struct Readiness {
    lease_ok: AtomicBool,
    leading: AtomicBool,
    synced: AtomicBool,
}

impl Readiness {
    /// What /readyz answers.
    pub fn ready(&self) -> bool {
        self.lease_ok.load(Ordering::Acquire)
            && (!self.leading.load(Ordering::Acquire) || self.synced.load(Ordering::Acquire))
    }
}

/// Competes for the lease and runs the controller while holding it, until `stop` turns true.
pub async fn run(
    client: Client,
    lease: LeaseConfig,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), LeaderError> {
    let grace = (lease.duration_seconds / 3).max(1);
    let build = LeaseManagerBuilder::new(client.clone(), &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&lease.identity)
        .with_duration(lease.duration_seconds)
        .with_grace(grace)
        .with_field_manager(format!("renderpool-operator-lease-{}", lease.identity))
        .build();
    let manager = tokio::time::timeout(LEASE_SETUP_TIMEOUT, build)
        .await
        .map_err(|_| LeaderError::LeaseSetupTimeout { name: lease.name.clone() })?
        .map_err(|source| LeaderError::Lease { name: lease.name.clone(), source })?;
    readiness.lease_ok.store(true, Ordering::Release);
    let (mut leading, task) = manager.watch().await;
    let mut outcome = Ok(());
    tracing::info!(lease = %lease.name, namespace = %lease.namespace, identity = %lease.identity, "waiting for the lease");
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            changed = leading.wait_for(|l| *l) => if changed.is_err() { break },
        }
        tracing::info!(identity = %lease.identity, "acquired the lease; starting the controller");
        metrics.set_leader(true);
        readiness.leading.store(true, Ordering::Release);
        let (quit, quit_rx) = oneshot::channel::<()>();
        let (mut lost, mut stopping) = (leading.clone(), stop.clone());
        let watcher = tokio::spawn(async move {
            tokio::select! {
                _ = lost.wait_for(|l| !*l) => tracing::warn!("lost the lease; stopping the controller"),
                _ = stopping.wait_for(|s| *s) => tracing::info!("shutting down the controller"),
            }
            let _ = quit.send(());
        });
        let synced = readiness.clone();
        let reporter = Reporter {
            controller: "renderpool-operator".into(),
            instance: Some(lease.identity.clone()),
        };
        let ran = controller::run(
            client.clone(),
            &lease.scope,
            metrics.clone(),
            reporter,
            move || synced.synced.store(true, Ordering::Release),
            lease.sync_timeout,
            async move {
                let _ = quit_rx.await;
            },
        )
        .await;
        watcher.abort();
        metrics.set_leader(false);
        readiness.leading.store(false, Ordering::Release);
        readiness.synced.store(false, Ordering::Release);
        if let Err(timeout) = ran {
            // Exiting restarts the process with fresh connections; meanwhile a standby leads.
            tracing::error!(error = %timeout, "giving up the lease");
            outcome = Err(timeout.into());
            break;
        }
        if *stop.borrow() {
            break;
        }
    }
    // Closing the channel makes the manager release the lease, so a standby takes over at once.
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Err(err))) => tracing::warn!(error = %err, "releasing the lease failed"),
        Err(_) => tracing::warn!("releasing the lease timed out"),
        _ => tracing::info!("lease released"),
    }
    outcome
}
