//! A real S3 server for the durable-job tests and benchmark: the Versity S3 Gateway (the
//! pinned `versitygw`) over a folder of its own, on 127.0.0.1 (or the real node's bridge address,
//! for pods) and a free port, with one root account whose keys are written to files (as the
//! operator mounts a Secret), stopped (and the folder removed) when dropped, also when a test
//! panics.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::bin_dir;
use crate::served::Served;
use crate::tls::TestCa;
use crate::{LOOPBACK, free_port};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use render_pod::outbound::StoreConnector;
use renderpool_testkit::wait;

/// The root account's access key id.
pub const ACCESS_KEY_ID: &str = "renderpool-test";
/// The root account's secret.
pub const SECRET_ACCESS_KEY: &str = "renderpool-test-secret";

/// A running S3 server.
pub struct S3Server {
    server: Served,
    host: &'static str,
    port: u16,
    /// `http`, or `https` when started with a certificate.
    scheme: &'static str,
    /// The tests' clients' transport: trusting the server's CA when it speaks TLS.
    connector: StoreConnector,
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
        let server = S3Server::spawn(host, buckets, None);
        let health = format!("{}/health", server.url());
        server.server.until_ok("versitygw's /health 200", &health, Duration::from_secs(30)).await;
        server
    }

    /// As [`S3Server::start`], speaking HTTPS with `ca`'s certificate for 127.0.0.1; ready once
    /// it accepts connections (the tests' HTTP client has no TLS to ask its health path with).
    pub async fn start_tls(buckets: &[&str], ca: &TestCa) -> S3Server {
        let server = S3Server::spawn(LOOPBACK, buckets, Some(ca));
        let address = format!("{LOOPBACK}:{}", server.port);
        let accepting =
            wait::try_until("versitygw accepting on its port", Duration::from_secs(30), || {
                tokio::net::TcpStream::connect(address.clone())
            })
            .await;
        if let Err(timed_out) = accepting {
            panic!("{timed_out}; its log:\n{}", server.server.log_text());
        }
        server
    }

    fn spawn(host: &'static str, buckets: &[&str], tls: Option<&TestCa>) -> S3Server {
        let bin = bin_dir().unwrap_or_else(|err| panic!("versitygw: {err}"));
        let port = free_port();
        let folder = Served::folder("s3", port);
        let root = folder.join("root");
        for bucket in buckets {
            std::fs::create_dir_all(root.join(bucket))
                .unwrap_or_else(|err| panic!("{}: {err}", root.display()));
        }
        std::fs::write(folder.join("access-key-id"), ACCESS_KEY_ID)
            .unwrap_or_else(|err| panic!("key file: {err}"));
        std::fs::write(folder.join("secret-access-key"), SECRET_ACCESS_KEY)
            .unwrap_or_else(|err| panic!("key file: {err}"));
        let mut command = Command::new(bin.join("versitygw"));
        command
            .env_clear()
            .env("ROOT_ACCESS_KEY", ACCESS_KEY_ID)
            .env("ROOT_SECRET_KEY", SECRET_ACCESS_KEY)
            .args(["--port", &format!("{host}:{port}"), "--health", "/health", "--quiet"])
            .arg("--keep-alive");
        if let Some(ca) = tls {
            command.arg("--cert").arg(ca.server_cert()).arg("--key").arg(ca.server_key());
        }
        command.arg("posix").arg(&root);
        let (scheme, connector) = match tls {
            Some(ca) => ("https", ca.connector()),
            None => ("http", StoreConnector::default()),
        };
        let server = Served::spawn("versitygw", folder, command);
        S3Server { server, host, port, scheme, connector }
    }

    /// `http://HOST:PORT` (`https://` when it speaks TLS).
    pub fn url(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }

    /// Where the object `key` of `bucket` is kept: the POSIX backend serves the files of its
    /// folder as objects.
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.server.folder_path().join("root").join(bucket).join(key)
    }

    /// The file holding the access key id.
    pub fn access_key_id_file(&self) -> PathBuf {
        self.server.folder_path().join("access-key-id")
    }

    /// The file holding the secret.
    pub fn secret_access_key_file(&self) -> PathBuf {
        self.server.folder_path().join("secret-access-key")
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// An S3 client of `bucket` (object_store's, over the S3 API: what a producer uses; its
    /// transport is the render pod's, object_store bringing none without reqwest's TLS, and
    /// trusts the server's CA when it speaks TLS).
    pub fn client(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        let store = AmazonS3Builder::new()
            .with_endpoint(self.url())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .with_access_key_id(ACCESS_KEY_ID)
            .with_secret_access_key(SECRET_ACCESS_KEY)
            .with_http_connector(self.connector.clone())
            .build()
            .unwrap_or_else(|err| panic!("S3 client: {err}"));
        Arc::new(store)
    }

    /// The render pod's flags that name this store (the buckets are the world's to give).
    pub fn pod_flags(&self) -> Vec<String> {
        vec![
            "--objects-s3-endpoint".into(),
            self.url(),
            "--objects-s3-access-key-id-file".into(),
            self.access_key_id_file().display().to_string(),
            "--objects-s3-secret-access-key-file".into(),
            self.secret_access_key_file().display().to_string(),
        ]
    }
}
