//! One namespace per test, so tests can share a cluster without seeing each other's objects.

use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use renderpool_testkit::wait;

use super::{Cluster, ClusterError};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace created for one test; deleting it on drop lets the cluster's garbage collection
/// remove everything the test made.
pub struct TestNamespace {
    name: String,
    delete: std::process::Command,
}

impl TestNamespace {
    pub(super) async fn create(cluster: &Cluster, prefix: &str) -> Result<Self, ClusterError> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let client = cluster.client().await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
        }))
        .map_err(|err| ClusterError::Setup(format!("namespace {name}: {err}")))?;
        namespaces.create(&PostParams::default(), &namespace).await?;
        let mut delete = cluster.kubectl();
        delete.args(["delete", "namespace", &name, "--wait=false", "--ignore-not-found"]);
        let guard = TestNamespace { name, delete };

        // Pods cannot be admitted before the service-account controller made `default`.
        let accounts: Api<ServiceAccount> = Api::namespaced(client, &guard.name);
        let what = format!("the default ServiceAccount in {}", guard.name);
        wait::try_until(&what, Duration::from_secs(30), || async {
            match accounts.get_opt("default").await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err("none yet".to_string()),
                Err(err) => Err(err.to_string()),
            }
        })
        .await
        .map_err(|timed_out| ClusterError::Setup(timed_out.to_string()))?;
        Ok(guard)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = self.delete.stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}
