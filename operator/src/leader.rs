//! Leader election on a Lease: only the holder runs the controller; a standby waits, and takes
//! over when the holder releases the lease or stops renewing it.

use crate::controller::{self, Scope};
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
) -> Result<(), LeaseManagerError> {
    let grace = (lease.duration_seconds / 3).max(1);
    let manager = LeaseManagerBuilder::new(client.clone(), &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&lease.identity)
        .with_duration(lease.duration_seconds)
        .with_grace(grace)
        .with_field_manager(format!("renderpool-operator-lease-{}", lease.identity))
        .build()
        .await?;
    readiness.lease_ok.store(true, Ordering::Release);
    let (mut leading, task) = manager.watch().await;
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
        controller::run(
            client.clone(),
            &lease.scope,
            metrics.clone(),
            reporter,
            move || synced.synced.store(true, Ordering::Release),
            async move {
                let _ = quit_rx.await;
            },
        )
        .await;
        watcher.abort();
        metrics.set_leader(false);
        readiness.leading.store(false, Ordering::Release);
        readiness.synced.store(false, Ordering::Release);
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
    Ok(())
}
