//! An Azure Blob Storage emulator for the durable-job tests: Microsoft's Azurite (its blob
//! service, the pinned npm package) over a folder of its own, on 127.0.0.1 and a free port, with
//! telemetry off, the emulator's well-known development account and its containers made with a
//! request signed here (object_store makes no containers). Stopped (and the folder removed) when
//! dropped, also when a test panics.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use object_store::ObjectStore;
use object_store::azure::MicrosoftAzureBuilder;
use renderpool_testkit::wait;
use sha2::Sha256;

use crate::cluster::bin_dir;
use crate::served::Served;
use crate::{LOOPBACK, free_port};

/// Azurite's development account.
pub const ACCOUNT: &str = "devstoreaccount1";
/// Its access key, the one every Azurite has (published with the emulator, no secret).
pub const ACCESS_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The Blob API version the container requests are made with.
const API_VERSION: &str = "2021-08-06";

/// A running emulator.
pub struct AzuriteServer {
    server: Served,
    port: u16,
}

impl AzuriteServer {
    /// Starts Azurite's blob service on 127.0.0.1 with `containers` made.
    pub async fn start(containers: &[&str]) -> AzuriteServer {
        let bin = bin_dir().unwrap_or_else(|err| panic!("azurite: {err}"));
        let port = free_port();
        let folder = Served::folder("azurite", port);
        std::fs::write(folder.join("access-key"), ACCESS_KEY)
            .unwrap_or_else(|err| panic!("key file: {err}"));
        let mut command = Command::new(bin.join("azurite-blob"));
        // Node.js is found on PATH; nothing else of the test's environment goes along.
        command.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command
            .args(["--blobHost", LOOPBACK, "--blobPort", &port.to_string(), "--location"])
            .arg(folder.join("data"))
            .args(["--silent", "--disableTelemetry", "--skipApiVersionCheck", "--loose"]);
        let server = AzuriteServer { server: Served::spawn("azurite", folder, command), port };
        let client = reqwest::Client::new();
        for container in containers {
            let made =
                wait::try_until("Azurite makes a container", Duration::from_secs(60), || {
                    server.make_container(&client, container)
                })
                .await;
            if let Err(timed_out) = made {
                panic!("{timed_out}; its log:\n{}", server.server.log_text());
            }
        }
        server
    }

    /// Makes `container` (201, or 409 if it is there), signed with the account's key.
    async fn make_container(
        &self,
        client: &reqwest::Client,
        container: &str,
    ) -> Result<(), String> {
        let date = httpdate::fmt_http_date(SystemTime::now());
        // Shared Key: the verb, eleven empty standard headers, the x-ms headers, the resource.
        let to_sign = format!(
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{API_VERSION}\n/{ACCOUNT}/{ACCOUNT}/{container}\nrestype:container"
        );
        let key = STANDARD.decode(ACCESS_KEY).map_err(|e| e.to_string())?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
        mac.update(to_sign.as_bytes());
        let signature = STANDARD.encode(mac.finalize().into_bytes());
        let answer = client
            .put(format!("{}/{container}?restype=container", self.endpoint()))
            .header("x-ms-date", date)
            .header("x-ms-version", API_VERSION)
            .header("authorization", format!("SharedKey {ACCOUNT}:{signature}"))
            .header("content-length", "0")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match answer.status().as_u16() {
            201 | 409 => Ok(()),
            other => Err(format!("{other}: {}", answer.text().await.unwrap_or_default())),
        }
    }

    /// The account's Blob endpoint, `http://127.0.0.1:PORT/devstoreaccount1`.
    pub fn endpoint(&self) -> String {
        format!("http://{LOOPBACK}:{}/{ACCOUNT}", self.port)
    }

    /// The file holding the account's access key.
    pub fn access_key_file(&self) -> PathBuf {
        self.server.folder_path().join("access-key")
    }

    /// A client of `container`, as a producer has one.
    pub fn client(&self, container: &str) -> Arc<dyn ObjectStore> {
        let store = MicrosoftAzureBuilder::new()
            .with_account(ACCOUNT)
            .with_access_key(ACCESS_KEY)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_container_name(container)
            .with_http_connector(render_pod::outbound::StoreConnector::default())
            .build()
            .unwrap_or_else(|err| panic!("Azure client: {err}"));
        Arc::new(store)
    }

    /// The render pod's flags that name this store (the buckets are the world's to give).
    pub fn pod_flags(&self) -> Vec<String> {
        vec![
            "--objects-azure-account".into(),
            ACCOUNT.into(),
            "--objects-azure-access-key-file".into(),
            self.access_key_file().display().to_string(),
            "--objects-azure-endpoint".into(),
            self.endpoint(),
        ]
    }
}
