//! A real S3 server for the durable-job tests and benchmark: the Versity S3 Gateway (the
//! pinned `versitygw`) over a folder of its own, on 127.0.0.1 (or the real node's bridge address,
//! for pods) and a free port, with one root
//! account whose keys are written to files (as the operator mounts a Secret), stopped (and the
//! folder removed) when dropped, also when a test panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bin_dir;
use crate::{LOOPBACK, free_port, process, until_http_ok};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;

/// The root account's access key id.
pub const ACCESS_KEY_ID: &str = "renderpool-test";
/// The root account's secret.
pub const SECRET_ACCESS_KEY: &str = "renderpool-test-secret";

/// A running S3 server.
pub struct S3Server {
    pid: u32,
    host: &'static str,
    port: u16,
    state: PathBuf,
    stopped: bool,
}

impl S3Server {
    /// Starts the gateway on 127.0.0.1 with `buckets` made (a bucket of the POSIX backend is a
    /// folder), and waits until it answers on its health path.
    pub async fn start(buckets: &[&str]) -> S3Server {
        S3Server::start_on(LOOPBACK, buckets).await
    }

    /// As [`S3Server::start`], listening on `host` only: 127.0.0.1, or the real node's bridge
    /// address, which its pods reach.
    pub async fn start_on(host: &'static str, buckets: &[&str]) -> S3Server {
        let bin = bin_dir().unwrap_or_else(|err| panic!("versitygw: {err}"));
        let port = free_port();
        let state =
            std::env::temp_dir().join(format!("renderpool-s3-{}-{port}", std::process::id()));
        let root = state.join("root");
        for bucket in buckets {
            std::fs::create_dir_all(root.join(bucket))
                .unwrap_or_else(|err| panic!("{}: {err}", root.display()));
        }
        process::remove_on_exit(state.clone());
        std::fs::write(state.join("access-key-id"), ACCESS_KEY_ID)
            .unwrap_or_else(|err| panic!("key file: {err}"));
        std::fs::write(state.join("secret-access-key"), SECRET_ACCESS_KEY)
            .unwrap_or_else(|err| panic!("key file: {err}"));
        let log = std::fs::File::create(state.join("versitygw.log"))
            .unwrap_or_else(|err| panic!("versitygw log: {err}"));
        let mut command = Command::new(bin.join("versitygw"));
        command
            .env_clear()
            .env("ROOT_ACCESS_KEY", ACCESS_KEY_ID)
            .env("ROOT_SECRET_KEY", SECRET_ACCESS_KEY)
            .args(["--port", &format!("{host}:{port}"), "--health", "/health", "--quiet"])
            .arg("--keep-alive")
            .arg("posix")
            .arg(&root)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap_or_else(|err| panic!("versitygw log: {err}")))
            .stderr(log);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start versitygw: {err}"));
        let server = S3Server { pid, host, port, state, stopped: false };
        let health = format!("{}/health", server.url());
        let up = until_http_ok("versitygw's /health 200", &health, Duration::from_secs(30));
        if let Err(timed_out) = up.await {
            panic!("{timed_out}; its log:\n{}", server.log_text());
        }
        server
    }

    /// `http://HOST:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// The file holding the access key id.
    pub fn access_key_id_file(&self) -> PathBuf {
        self.state.join("access-key-id")
    }

    /// The file holding the secret.
    pub fn secret_access_key_file(&self) -> PathBuf {
        self.state.join("secret-access-key")
    }

    /// The folder holding the buckets.
    pub fn root(&self) -> &Path {
        &self.state
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.state.join("versitygw.log")).unwrap_or_default()
    }

    /// An S3 client of `bucket` (object_store's, over the S3 API: what a producer uses; its
    /// transport is the render pod's, object_store bringing none without reqwest's TLS).
    pub fn client(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_endpoint(self.url())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .with_access_key_id(ACCESS_KEY_ID)
            .with_secret_access_key(SECRET_ACCESS_KEY)
            .with_http_connector(render_pod::outbound::StoreConnector)
            .build()
            .unwrap_or_else(|err| panic!("S3 client: {err}"));
        Arc::new(store)
    }

    /// The render pod's flags for this server: endpoint, key files, and the buckets it may read
    /// and write.
    pub fn pod_flags(&self, read: &[&str], write: &[&str]) -> Vec<String> {
        vec![
            "--objects-s3-endpoint".into(),
            self.url(),
            "--objects-s3-access-key-id-file".into(),
            self.access_key_id_file().display().to_string(),
            "--objects-s3-secret-access-key-file".into(),
            self.secret_access_key_file().display().to_string(),
            "--objects-read-buckets".into(),
            read.join(","),
            "--objects-write-buckets".into(),
            write.join(","),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            process::signal(self.pid, libc::SIGTERM);
            process::signal(self.pid, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
