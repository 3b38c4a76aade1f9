//! The real `render-pod serve` binary as a test process: on 127.0.0.1 and a free port, JSON logs
//! to a file, stopped when dropped (and with the test process, also on panic).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use renderpool_testkit::metrics;

use crate::{free_port, process, until_http_ok, workspace_bin};

/// A running render pod.
pub struct RenderPod {
    pid: u32,
    port: u16,
    log: PathBuf,
    /// A client for its API.
    pub client: reqwest::Client,
}

impl RenderPod {
    /// `render-pod serve` with `flags` and `env`, once `/readyz` says a slot is up.
    pub async fn start(flags: &[&str], env: &[(&str, &str)]) -> RenderPod {
        RenderPod::start_binary(&workspace_bin("render-pod"), flags, env).await
    }

    /// [`RenderPod::start`] of the binary at `binary` (a release build, for a benchmark).
    pub async fn start_binary(
        binary: &std::path::Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> RenderPod {
        let port = free_port();
        let log = std::env::temp_dir()
            .join(format!("renderpool-render-pod-{}-{port}.log", std::process::id()));
        process::remove_on_exit(log.clone());
        let file =
            std::fs::File::create(&log).unwrap_or_else(|err| panic!("{}: {err}", log.display()));
        let mut command = Command::new(binary);
        command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--log-format", "json"])
            .args(["--drain-delay-ms", "100"])
            .args(flags)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap_or_else(|err| panic!("render-pod log: {err}")))
            .stderr(file);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start render-pod: {err}"));
        let pod = RenderPod { pid, port, log, client: reqwest::Client::new() };
        let readyz = pod.url("/readyz");
        let ready = until_http_ok("render-pod's /readyz 200", &readyz, Duration::from_secs(30));
        if let Err(timed_out) = ready.await {
            panic!("{timed_out}; its log:\n{}", pod.log_text());
        }
        pod
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends SIGTERM and waits (up to 10 s) for it to drain and exit.
    pub fn terminate(&self) {
        process::signal(self.pid, libc::SIGTERM);
    }

    /// How it exited, once it has.
    pub fn exit_status(&self) -> Option<std::process::ExitStatus> {
        process::exit_status(self.pid)
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// POSTs `body` to `path_and_query`.
    pub async fn post(&self, path_and_query: &str, body: Vec<u8>) -> reqwest::Response {
        self.client
            .post(self.url(path_and_query))
            .body(body)
            .send()
            .await
            .unwrap_or_else(|err| panic!("POST {path_and_query}: {err}"))
    }

    /// `/readyz` as JSON.
    pub async fn readyz(&self) -> serde_json::Value {
        let response = self.client.get(self.url("/readyz")).send().await;
        let response = response.unwrap_or_else(|err| panic!("GET /readyz: {err}"));
        response.json().await.unwrap_or_else(|err| panic!("/readyz body: {err}"))
    }

    /// The `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        let response = self.client.get(self.url("/metrics")).send().await;
        match response {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(err) => panic!("GET /metrics: {err}"),
        }
    }

    /// A metric summed over the label sets whose line contains every `needle`; a metric with no
    /// such series fails the test, naming the series that are there.
    pub async fn metric(&self, name: &str, needles: &[&str]) -> f64 {
        metrics::sum(&self.metrics_text().await, name, needles)
    }
}

impl Drop for RenderPod {
    fn drop(&mut self) {
        // Its workers die with it (PR_SET_PDEATHSIG).
        process::signal(self.pid, libc::SIGKILL);
    }
}

/// An error answer's status and `error.code`.
pub async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    (status, body["error"]["code"].as_str().unwrap_or_default().to_string())
}
