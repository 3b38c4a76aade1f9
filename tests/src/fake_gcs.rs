//! A Google Cloud Storage emulator for the durable-job tests: the pinned fake-gcs-server (served
//! by `tests/cluster/fake-gcs-server/main.go`, which lets it take the XML API's plain PUT) over a
//! folder of its own, on 127.0.0.1 and a free port, with the buckets made through its JSON API.
//! No GCS is reachable from a test, so this is the nearest thing; it speaks the JSON and XML APIs
//! object_store uses, but answers a conditional GET (`If-None-Match`) in full, as GCS does not.
//! The pods and the producer reach it through a service account file that names it
//! (`gcs_base_url`, no OAuth), the way object_store is pointed at an emulator. Stopped (and the
//! folder removed) when dropped, also when a test panics.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::gcp::GoogleCloudStorageBuilder;

use crate::cluster::bin_dir;
use crate::served::Served;
use crate::{LOOPBACK, free_port};

/// A running emulator.
pub struct GcsServer {
    server: Served,
    port: u16,
}

impl GcsServer {
    /// Starts the emulator on 127.0.0.1 with `buckets` made, once it answers its health path.
    pub async fn start(buckets: &[&str]) -> GcsServer {
        let bin = bin_dir().unwrap_or_else(|err| panic!("fake-gcs-server: {err}"));
        let port = free_port();
        let folder = Served::folder("gcs", port);
        let url = format!("http://{LOOPBACK}:{port}");
        let key = serde_json::json!({
            "gcs_base_url": url,
            "disable_oauth": true,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        });
        std::fs::write(folder.join("service-account.json"), key.to_string())
            .unwrap_or_else(|err| panic!("service account file: {err}"));
        let mut command = Command::new(bin.join("fake-gcs-server"));
        command.env_clear().args(["-host", LOOPBACK, "-port", &port.to_string(), "-root"]);
        command.arg(folder.join("root"));
        let server = GcsServer { server: Served::spawn("fake-gcs-server", folder, command), port };
        let health = format!("{url}/_internal/healthcheck");
        server
            .server
            .until_ok("fake-gcs-server's health 200", &health, Duration::from_secs(30))
            .await;
        let client = reqwest::Client::new();
        for bucket in buckets {
            let made = client
                .post(format!("{url}/storage/v1/b?project=renderpool-test"))
                .json(&serde_json::json!({"name": bucket}))
                .send()
                .await
                .unwrap_or_else(|err| panic!("make bucket {bucket}: {err}"));
            assert!(made.status().is_success(), "make bucket {bucket}: {}", made.status());
        }
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    /// The service account file that points a client at this emulator.
    pub fn service_account_file(&self) -> PathBuf {
        self.server.folder_path().join("service-account.json")
    }

    /// A client of `bucket`, as a producer has one.
    pub fn client(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = GoogleCloudStorageBuilder::new()
            .with_service_account_path(self.service_account_file().display().to_string())
            .with_bucket_name(bucket)
            .with_http_connector(render_pod::outbound::StoreConnector::default())
            .build()
            .unwrap_or_else(|err| panic!("GCS client: {err}"));
        Arc::new(store)
    }

    /// The render pod's flags that name this store (the buckets are the world's to give).
    pub fn pod_flags(&self) -> Vec<String> {
        vec![
            "--objects-gcs-service-account-file".into(),
            self.service_account_file().display().to_string(),
        ]
    }
}
