//! A real `render-pod serve` process for integration tests and benchmarks: started on 127.0.0.1
//! with an ephemeral port, killed (with its workers) when the guard drops, also on panic;
//! cgroup v1 cpu and memory groups (`renderpool_testkit::cgroup`) to start it in; and the test documents (from
//! `renderpool_testkit`).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod raw;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use renderpool_testkit::{bombs, corpus, metrics, wait};

/// The test documents' folder (see `renderpool_testkit::corpus`).
pub fn corpus() -> PathBuf {
    corpus::dir().to_path_buf()
}

/// A corpus file's bytes.
pub fn doc(name: &str) -> Vec<u8> {
    corpus::read(name)
}

/// The corpus manifest: every file's entry by name.
pub fn manifest() -> serde_json::Value {
    serde_json::Value::Object(corpus::manifest().clone())
}

/// A render of several seconds: a 1200 dpi gnuplot page, a 540 MB bitmap.
pub const SLOW_RENDER: &str = "/v1/render?page=1&dpi=1200";

/// The flags that allow [`SLOW_RENDER`]: pixels past the default limit, and a worker memory
/// ceiling that holds its bitmap.
pub const ALLOW_SLOW_RENDER: [&str; 4] = ["--max-pixels", "400000000", "--memory-per-slot", "1Gi"];

/// A service whose upload budget holds one largest body, as by default (16 MiB of 16 here,
/// 100 of 100 there), with the rate floor raised (768 KiB/s) so that such a body sent at the
/// floor arrives in about 20 s, within the job deadline.
pub const ONE_LARGEST_BODY: [&str; 10] = [
    "--slots",
    "1",
    "--upload-budget",
    "16Mi",
    "--max-body-bytes",
    "16Mi",
    "--body-min-rate",
    "768Ki",
    "--job-deadline-ms",
    "60000",
];

/// The largest body [`ONE_LARGEST_BODY`] accepts.
pub const LARGEST_BODY: usize = 16 << 20;
/// The body rate floor of [`ONE_LARGEST_BODY`], in bytes per second.
pub const FLOOR_RATE: u64 = 768 << 10;

/// The memory of a pod of two 384 MiB slots (`--memory-per-slot 384Mi`) beside the
/// supervisor's default share (296 MiB): 1088 MiB, 24 MiB to spare.
pub const TWO_SLOT_POD_MEMORY: u64 = 1088 << 20;

/// A one-page PDF of exactly `len` bytes (padded with noise).
pub fn pdf_of_len(len: usize) -> Vec<u8> {
    let probe = len.saturating_sub(4096);
    let overhead = bombs::padded_page(probe).len() - probe;
    let pdf = bombs::padded_page(len - overhead);
    assert_eq!(pdf.len(), len);
    pdf
}

/// Pages per second through `server` (the service bench's path): `concurrency` clients render
/// pages 1 to `pages` of `bytes` at 150 dpi PNG `passes` times over, one upload per page, and
/// read every answer.
pub async fn render_throughput(
    server: &Arc<Server>,
    bytes: &Arc<Vec<u8>>,
    pages: u32,
    concurrency: usize,
    passes: u32,
) -> f64 {
    let pages: Vec<u32> = (0..passes).flat_map(|_| 1..=pages).collect();
    let total = pages.len();
    let queue = Arc::new(Mutex::new(pages));
    let start = std::time::Instant::now();
    let clients: Vec<_> = (0..concurrency)
        .map(|_| {
            let (server, bytes, queue) = (server.clone(), bytes.clone(), queue.clone());
            tokio::spawn(async move {
                loop {
                    let Some(page) = queue.lock().unwrap().pop() else { return };
                    let response = server
                        .post(&format!("/v1/render?page={page}&dpi=150"), bytes.to_vec())
                        .await;
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

/// One flag list: `flags`, then `more`.
pub fn flags<'a>(flags: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    flags.iter().chain(more).copied().collect()
}

/// The built binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_render-pod")
}

/// A running server.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    logs: Arc<Mutex<Vec<String>>>,
    pub client: reqwest::Client,
}

impl Server {
    /// `render-pod serve` with extra flags.
    pub fn start(flags: &[&str]) -> Server {
        let mut cmd = Command::new(binary());
        cmd.args(serve_args(flags));
        Self::spawn(cmd)
    }

    /// Starts a prepared command (e.g. a wrapper that enters a cgroup first) whose process ends
    /// up exec'ing `render-pod serve` with [`serve_args`].
    pub fn spawn(mut cmd: Command) -> Server {
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                        && let Some(addr) = v.get("listen").and_then(|a| a.as_str())
                    {
                        let _ = tx.send(addr.to_string());
                    }
                    eprintln!("[server] {line}");
                    logs.lock().unwrap().push(line);
                }
            });
        }
        let mut server = Server {
            child,
            base: String::new(),
            logs,
            // The server closes a keep-alive connection idle past its header read timeout (1 s
            // the shortest a test gives it); a pooled connection reused as it closes answers
            // with a reset, so none is kept idle that long.
            client: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_millis(500))
                .build()
                .unwrap(),
        };
        let addr =
            rx.recv_timeout(Duration::from_secs(30)).expect("server never said where it listens");
        server.base = format!("http://{addr}");
        server
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Log lines so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `/readyz` as JSON (whatever its status).
    pub async fn readyz(&self) -> serde_json::Value {
        self.client.get(self.url("/readyz")).send().await.unwrap().json().await.unwrap()
    }

    /// Waits until every slot has a live worker; returns the `/readyz` body.
    pub async fn wait_ready(&self) -> serde_json::Value {
        wait::until("every slot with a live worker", Duration::from_secs(30), || async {
            let body: serde_json::Value = self
                .client
                .get(self.url("/readyz"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            let ready = body["ready"] == true && body["engine"]["alive"] == body["engine"]["slots"];
            if ready { Ok(body) } else { Err(body.to_string()) }
        })
        .await
    }

    /// Worker pids from `/readyz`, by slot (`None` while restarting).
    pub async fn worker_pids(&self) -> Vec<Option<u64>> {
        let body = self.readyz().await;
        body["engine"]["workers"].as_array().unwrap().iter().map(|w| w["pid"].as_u64()).collect()
    }

    /// POSTs a document to `path_and_query`.
    pub async fn post(&self, path_and_query: &str, body: Vec<u8>) -> reqwest::Response {
        self.client
            .post(self.url(path_and_query))
            .header("content-type", "application/pdf")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Posts like a well-behaved client: a 503 is retried after its `Retry-After`, for at most
    /// 15 s. Right after a worker was replaced, jobs that expired in the queue hold their places
    /// until the new worker drains them, and the pod says so with 503 + Retry-After.
    pub async fn post_honouring_retry_after(&self, path: &str, body: Vec<u8>) -> reqwest::Response {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let response = self.post(path, body.clone()).await;
            if response.status() != 503 || std::time::Instant::now() > give_up {
                return response;
            }
            let wait: u64 = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .expect("a 503 carries Retry-After");
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
        }
    }

    /// The `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        self.client.get(self.url("/metrics")).send().await.unwrap().text().await.unwrap()
    }

    /// A metric's value summed over label sets whose line contains every `needle`; a metric
    /// with no such series fails the test, naming the series that are there.
    pub async fn metric(&self, name: &str, needles: &[&str]) -> f64 {
        metrics::sum(&self.metrics_text().await, name, needles)
    }

    /// Waits until [`Server::metric`] reaches `at_least` (work after a reply, such as a
    /// recycle, lands a moment later); returns the value.
    pub async fn wait_metric(&self, name: &str, needles: &[&str], at_least: f64) -> f64 {
        self.wait_metric_until(name, needles, &format!("at least {at_least}"), |v| v >= at_least)
            .await
    }

    /// Waits until [`Server::metric`] is `value`.
    pub async fn wait_metric_at(&self, name: &str, needles: &[&str], value: f64) {
        self.wait_metric_until(name, needles, &format!("at {value}"), |v| v == value).await;
    }

    async fn wait_metric_until(
        &self,
        name: &str,
        needles: &[&str],
        condition: &str,
        holds: impl Fn(f64) -> bool,
    ) -> f64 {
        let what = format!("{name} {needles:?} {condition}");
        wait::until(&what, Duration::from_secs(20), || async {
            match metrics::value(&self.metrics_text().await, name, needles) {
                Ok(v) if holds(v) => Ok(v),
                seen => Err(seen.map_err(|absent| absent.to_string())),
            }
        })
        .await
    }

    /// Sends a signal to the server process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid() as i32, signal) }, 0);
    }

    /// Waits for the server to exit.
    pub fn wait_exit(&mut self, bound: Duration) -> std::process::ExitStatus {
        let child = &mut self.child;
        wait::until_blocking("the server's exit", bound, || child.try_wait().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Workers die with the server (PR_SET_PDEATHSIG).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve` on an ephemeral localhost port with JSON logs, plus `flags`.
pub fn serve_args(flags: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["serve", "--listen", "127.0.0.1:0", "--log-format", "json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !flags.contains(&"--drain-delay-ms") {
        args.extend(["--drain-delay-ms".to_string(), "100".to_string()]);
    }
    args.extend(flags.iter().map(|s| s.to_string()));
    args
}

/// Sends `signal` to `pid`.
pub fn kill(pid: u64, signal: i32) {
    // SAFETY: kill(2) on a worker pid the server reported.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0, "kill {pid}");
}

/// The JSON error body's code.
pub async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap();
    (status, body["error"]["code"].as_str().unwrap_or_default().to_string())
}

pub use renderpool_testkit::cgroup::Group;

/// `render-pod serve` started inside a cgroup.
pub trait ServeIn {
    fn serve(&self, flags: &[&str]) -> Server;
}

impl ServeIn for Group {
    /// A shell enters the group, then execs the binary: the server and its workers are born in
    /// it.
    fn serve(&self, flags: &[&str]) -> Server {
        let procs = self.procs();
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$0\" \"$@\"", procs.display()))
            .arg(binary())
            .args(serve_args(flags));
        Server::spawn(cmd)
    }
}
