//! The durable jobs' world for tests and the benchmark: a real NATS server, a real S3 server
//! with the buckets a pool uses, a webhook receiver that records what it is sent, and the
//! render pod's flags for them. A producer's side too: messages published straight to the
//! stream (as a product that keeps uploads in S3 does), objects put and listed over S3; and the
//! checks of what a job leaves: its manifest against the listing, its webhooks' signatures.
//! Everything listens on 127.0.0.1, or on the real node's bridge address for its pods.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures::StreamExt;
use hmac::{Hmac, Mac};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use renderpool_api::jobs::{JobId, JobStatus, Manifest, Subjects, defaults};
use renderpool_testkit::wait;
use sha2::Sha256;

use crate::LOOPBACK;
use crate::nats::NatsServer;
use crate::object_stores::Store;
use crate::render_pod::RenderPod;
use crate::tls::TestCa;
use crate::versitygw::S3Server;
use renderpool_api::jobs::Scheme;

/// The buckets: documents are read from `uploads`, outputs written to `results`; `private`
/// exists but the pods may not touch it.
pub const BUCKETS: [&str; 3] = ["uploads", "results", "private"];

/// The webhook signing secret the pods are given (a Standard Webhooks `whsec_` secret).
pub const SECRET: &str = "whsec_cmVuZGVycG9vbC10ZXN0LXdlYmhvb2stc2VjcmV0LWtleQ==";

/// A request the webhook receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Header names (lower case) and values.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Bytes,
    /// The status it was answered with.
    pub status: u16,
}

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200 to every request.
    Ok,
    /// 503 to the first request, 200 after.
    FailFirst,
}

/// A webhook receiver: plain HTTP/1.1, one request a connection.
pub struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Delivery>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Starts answering on 127.0.0.1 as `answer` says.
    pub async fn start(answer: Answer) -> Receiver {
        Receiver::start_on(LOOPBACK, answer).await
    }

    /// As [`Receiver::start`], on `host` (the real node's bridge address, for its pods).
    pub async fn start_on(host: &str, answer: Answer) -> Receiver {
        let listener = tokio::net::TcpListener::bind((host, 0))
            .await
            .unwrap_or_else(|err| panic!("webhook receiver: {err}"));
        let addr = listener.local_addr().unwrap_or_else(|err| panic!("webhook receiver: {err}"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let got = got.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let got = got.clone();
                    tokio::spawn(async move { receive(stream, got, answer).await });
                }
            })
        };
        Receiver { addr, got, task }
    }

    /// `http://HOST:PORT/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Every request so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    mut stream: tokio::net::TcpStream,
    got: Arc<Mutex<Vec<Delivery>>>,
    answer: Answer,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(n) = stream.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let length = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buffer.len() < head_end + length {
        let Ok(n) = stream.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = Bytes::copy_from_slice(&buffer[head_end..head_end + length]);
    let status = {
        let mut got = got.lock().unwrap_or_else(|p| p.into_inner());
        let status = if answer == Answer::FailFirst && got.is_empty() { 503 } else { 200 };
        got.push(Delivery { headers, body, status });
        status
    };
    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = stream.write_all(reply.as_bytes()).await;
}

/// A webhook URL that accepts connections and never answers.
pub struct Silent {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Silent {
    /// Starts listening.
    pub async fn start() -> Silent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("silent listener: {err}"));
        let addr = listener.local_addr().unwrap_or_else(|err| panic!("silent listener: {err}"));
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Silent { addr, task }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The flag that lets a pod send webhooks to private addresses.
const ALLOW_PRIVATE: &str = "--jobs-webhook-allow-private";

/// NATS, an object store and a folder for the pods' secrets.
pub struct World {
    /// The broker.
    pub nats: NatsServer,
    /// The object store.
    pub store: Store,
    secrets: tempfile::TempDir,
    /// The file holding the broker's token, when it wants one.
    pub nats_token_file: Option<std::path::PathBuf>,
    client: async_nats::Client,
    /// The pool's subjects.
    pub subjects: Subjects,
}

impl World {
    /// Starts both servers.
    pub async fn start() -> World {
        World::start_with_nats_token(None).await
    }

    /// Starts both servers, NATS wanting `token` when given (the pods read it from a file).
    pub async fn start_with_nats_token(token: Option<&str>) -> World {
        World::start_on(LOOPBACK, token).await
    }

    /// As [`World::start_with_nats_token`], both servers listening on `host` (the real node's
    /// bridge address, for its pods).
    pub async fn start_on(host: &'static str, token: Option<&str>) -> World {
        let (nats, s3) =
            tokio::join!(NatsServer::start_on(host, token), S3Server::start_on(host, &BUCKETS));
        World::with(nats, Store::S3(s3), token).await
    }

    /// NATS and the object store `scheme` names (the S3 server, or the GCS or Azure Blob
    /// emulator), on 127.0.0.1.
    pub async fn start_with_store(scheme: Scheme) -> World {
        World::beside(Store::start(scheme, &BUCKETS)).await
    }

    /// NATS and an S3 server speaking HTTPS with `ca`'s certificate, on 127.0.0.1: a pod trusts
    /// it when given the CA (`--objects-ca-file`), the world's own clients always do.
    pub async fn start_with_tls_store(ca: &TestCa) -> World {
        World::beside(async { Store::S3(S3Server::start_tls(&BUCKETS, ca).await) }).await
    }

    /// NATS on 127.0.0.1, wanting no token, started while `store` starts.
    async fn beside(store: impl Future<Output = Store>) -> World {
        let (nats, store) = tokio::join!(NatsServer::start_on(LOOPBACK, None), store);
        World::with(nats, store, None).await
    }

    async fn with(nats: NatsServer, store: Store, token: Option<&str>) -> World {
        let secrets = tempfile::tempdir().unwrap_or_else(|err| panic!("secrets folder: {err}"));
        std::fs::write(secrets.path().join("webhook-secret"), SECRET)
            .unwrap_or_else(|err| panic!("webhook secret: {err}"));
        let nats_token_file = token.map(|token| {
            let path = secrets.path().join("nats-token");
            std::fs::write(&path, format!("{token}\n"))
                .unwrap_or_else(|err| panic!("NATS token: {err}"));
            path
        });
        let options = async_nats::ConnectOptions::new();
        let options = match token {
            Some(token) => options.token(token.to_string()),
            None => options,
        };
        let client = options
            .connect(nats.url())
            .await
            .unwrap_or_else(|err| panic!("connect to {}: {err}", nats.url()));
        let subjects = Subjects::under(defaults::SUBJECT_PREFIX);
        World { nats, store, secrets, nats_token_file, client, subjects }
    }

    /// The render pod's flags for this world, then `extra`. Webhooks may go to the tests'
    /// receivers on 127.0.0.1 unless `extra` says otherwise.
    pub fn pod_flags(&self, extra: &[&str]) -> Vec<String> {
        let mut flags = vec![
            "--jobs-nats-url".to_string(),
            self.nats.url(),
            "--jobs-webhook-secret-file".into(),
            self.secrets.path().join("webhook-secret").display().to_string(),
            "--jobs-upload-url".into(),
            self.store.url("uploads", "incoming"),
        ];
        if let Some(path) = &self.nats_token_file {
            flags.extend(["--jobs-nats-token-file".to_string(), path.display().to_string()]);
        }
        if !extra.contains(&ALLOW_PRIVATE) {
            flags.extend([ALLOW_PRIVATE.to_string(), "true".into()]);
        }
        flags.extend(self.store.pod_flags(&["uploads", "results"], &["uploads", "results"]));
        flags.extend(extra.iter().map(|f| f.to_string()));
        flags
    }

    /// A render pod of this world.
    pub async fn pod(&self, extra: &[&str]) -> RenderPod {
        self.pod_binary(&crate::workspace_bin("render-pod"), extra).await
    }

    /// A render pod of this world from `binary` (a release build, for a benchmark).
    pub async fn pod_binary(&self, binary: &std::path::Path, extra: &[&str]) -> RenderPod {
        let flags = self.pod_flags(extra);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        RenderPod::start_binary(binary, &flags, &[]).await
    }

    /// Puts `bytes` at `bucket/key` of the world's store; the ETag the store gave it.
    pub async fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) -> Option<String> {
        let url = self.store.url(bucket, key);
        self.store
            .client(bucket)
            .put(&StorePath::from(key), PutPayload::from(bytes))
            .await
            .unwrap_or_else(|err| panic!("put {url}: {err}"))
            .e_tag
    }

    /// Reads `bucket/key` of the world's store.
    pub async fn get(&self, bucket: &str, key: &str) -> Bytes {
        let url = self.store.url(bucket, key);
        let store = self.store.client(bucket);
        let got = store.get(&StorePath::from(key)).await;
        let got = got.unwrap_or_else(|err| panic!("get {url}: {err}"));
        got.bytes().await.unwrap_or_else(|err| panic!("read {url}: {err}"))
    }

    /// Every object under `prefix` in `bucket` and its size.
    pub async fn list(&self, bucket: &str, prefix: &str) -> BTreeMap<String, u64> {
        let url = self.store.url(bucket, prefix);
        let store: Arc<dyn ObjectStore> = self.store.client(bucket);
        let prefix = StorePath::from(prefix);
        let listed: Vec<_> = store.list(Some(&prefix)).collect().await;
        listed
            .into_iter()
            .map(|meta| meta.unwrap_or_else(|err| panic!("list {url}: {err}")))
            .map(|meta| (meta.location.to_string(), meta.size))
            .collect()
    }

    /// JetStream, as a producer reaches it.
    pub fn jetstream(&self) -> jetstream::Context {
        jetstream::new(self.client.clone())
    }

    /// The NATS connection.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Publishes `message` to the jobs' stream with its idempotency key as `Nats-Msg-Id`;
    /// the stream sequence it got.
    pub async fn publish(&self, message: &serde_json::Value) -> u64 {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(key) = message["idempotency_key"].as_str() {
            headers.insert("Nats-Msg-Id", key);
        }
        self.publish_bytes(headers, Bytes::from(message.to_string())).await
    }

    /// Publishes raw bytes (a malformed message, say).
    pub async fn publish_bytes(&self, headers: async_nats::HeaderMap, bytes: Bytes) -> u64 {
        let ack = self
            .jetstream()
            .publish_with_headers(self.subjects.submit.clone(), headers, bytes)
            .await
            .unwrap_or_else(|err| panic!("publish: {err}"));
        ack.await.unwrap_or_else(|err| panic!("publish ack: {err}")).sequence
    }

    /// The state of job `id`, read from the state bucket as any reader of the pool may.
    pub async fn state(&self, id: &JobId) -> Option<JobStatus> {
        let kv = self
            .jetstream()
            .get_key_value(defaults::STATE_BUCKET)
            .await
            .unwrap_or_else(|err| panic!("state bucket: {err}"));
        let value =
            kv.get(id.as_str()).await.unwrap_or_else(|err| panic!("state of {id}: {err}"))?;
        Some(serde_json::from_slice(&value).unwrap_or_else(|err| panic!("state of {id}: {err}")))
    }

    /// Waits until job `id`'s state satisfies `done`; fails naming the last state seen.
    pub async fn wait_state(
        &self,
        id: &JobId,
        within: Duration,
        done: impl Fn(&JobStatus) -> bool,
    ) -> JobStatus {
        wait::until(&format!("job {id}"), within, || async {
            let state = self.state(id).await;
            match state {
                Some(state) if done(&state) => Ok(state),
                other => Err(other),
            }
        })
        .await
    }

    /// The outputs of job `id` under `prefix` in `results`, as listed.
    pub async fn outputs_of(&self, prefix: &str, id: &JobId) -> BTreeMap<String, u64> {
        self.list("results", &format!("{prefix}/{id}")).await
    }

    /// The manifest of `id` under `prefix`, read from the store, checked against the listing: every
    /// object it names is there with its size, and nothing else is.
    pub async fn check_manifest(
        &self,
        prefix: &str,
        id: &JobId,
        listed: &BTreeMap<String, u64>,
    ) -> Manifest {
        let key = format!("{prefix}/{id}/manifest.json");
        let manifest: Manifest = serde_json::from_slice(&self.get("results", &key).await)
            .unwrap_or_else(|err| panic!("{key}: {err}"));
        assert_eq!(&manifest.job, id);
        let mut named: BTreeMap<String, u64> = manifest
            .operations
            .iter()
            .flat_map(|op| op.outputs.iter())
            .map(|o| {
                let key = o.url.strip_prefix(&self.store.url("results", ""));
                let key = key.unwrap_or_else(|| panic!("an output outside results: {}", o.url));
                (key.to_string(), o.bytes)
            })
            .collect();
        let size = listed.get(&key).unwrap_or_else(|| panic!("{key} is not listed: {listed:?}"));
        named.insert(key.clone(), *size);
        assert_eq!(&named, listed, "job {id}: the manifest (left) against the listing (right)");
        manifest
    }
}

/// Standard Webhooks verification, written from the specification (independent of the pod's
/// signer): the signed content is `id.timestamp.body`, the key the base64 after `whsec_`, the
/// header a space-separated list of `v1,<base64>` signatures; the timestamp must be recent.
/// The delivery's `webhook-id`, or why it is refused.
pub fn verify(delivery: &Delivery) -> Result<String, String> {
    let header =
        |name: &str| delivery.headers.get(name).cloned().ok_or_else(|| format!("no {name} header"));
    let (id, timestamp, signatures) =
        (header("webhook-id")?, header("webhook-timestamp")?, header("webhook-signature")?);
    let sent: u64 = timestamp.parse().map_err(|_| format!("timestamp {timestamp:?}"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    if now.abs_diff(sent) > 300 {
        return Err(format!("timestamp {sent} is {} s from now", now.abs_diff(sent)));
    }
    let key = SECRET.strip_prefix("whsec_").ok_or("the secret has no whsec_ prefix")?;
    let key = STANDARD.decode(key).map_err(|e| e.to_string())?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(&delivery.body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    let matched = signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|candidate| candidate == expected);
    if matched { Ok(id) } else { Err(format!("no signature in {signatures:?} matches")) }
}

/// A job message of version 1.
pub fn message(
    key: &str,
    input: &str,
    operations: serde_json::Value,
    output: &str,
) -> serde_json::Value {
    serde_json::json!({
        "version": 1,
        "idempotency_key": key,
        "input": {"url": input},
        "operations": operations,
        "output": {"url": output},
    })
}

/// The percentile `p` (0 to 100) of `samples`, nearest rank.
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// `n` sequential page renders of `doc` through `/v1/render`, each one's latency.
pub async fn sync_renders(
    pod: &RenderPod,
    doc: &[u8],
    query: &str,
    n: usize,
    pause: Duration,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let response = pod.post(&format!("/v1/render?{query}"), doc.to_vec()).await;
        assert_eq!(response.status(), 200, "a preview during the backlog");
        response.bytes().await.unwrap_or_else(|err| panic!("render body: {err}"));
        latencies.push(started.elapsed());
        tokio::time::sleep(pause).await;
    }
    latencies
}
