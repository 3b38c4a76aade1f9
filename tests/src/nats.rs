//! A real NATS server with JetStream (the pinned `nats-server`) for the durable-job tests and
//! benchmark: on 127.0.0.1 (or the real node's bridge address, for pods) and free ports, its store in a folder of its own, stopped (and the
//! folder removed) when dropped, also when a test panics.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster::bin_dir;
use crate::{LOOPBACK, free_port, process, until_http_ok};

/// A running NATS server.
pub struct NatsServer {
    pid: u32,
    host: &'static str,
    port: u16,
    monitor: u16,
    state: PathBuf,
    stopped: bool,
}

impl NatsServer {
    /// Starts `nats-server -js` on 127.0.0.1 and waits until JetStream answers on its
    /// monitoring port; with `token`, clients must present it.
    pub async fn start(token: Option<&str>) -> NatsServer {
        NatsServer::start_on(LOOPBACK, token).await
    }

    /// As [`NatsServer::start`], listening (clients and monitoring) on `host` only: 127.0.0.1,
    /// or the real node's bridge address, which its pods reach.
    pub async fn start_on(host: &'static str, token: Option<&str>) -> NatsServer {
        let bin = bin_dir().unwrap_or_else(|err| panic!("nats-server: {err}"));
        let (port, monitor) = (free_port(), free_port());
        let state =
            std::env::temp_dir().join(format!("renderpool-nats-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&state).unwrap_or_else(|err| panic!("{}: {err}", state.display()));
        process::remove_on_exit(state.clone());
        let log = std::fs::File::create(state.join("nats.log"))
            .unwrap_or_else(|err| panic!("nats log: {err}"));
        let mut command = Command::new(bin.join("nats-server"));
        command
            .args(["-js", "-a", host, "-p", &port.to_string(), "-m", &monitor.to_string()])
            .arg("-sd")
            .arg(state.join("jetstream"))
            .args(token.map(|token| ["--auth", token]).into_iter().flatten())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap_or_else(|err| panic!("nats log: {err}")))
            .stderr(log);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start nats-server: {err}"));
        let server = NatsServer { pid, host, port, monitor, state, stopped: false };
        let health = format!("{}/healthz?js-enabled-only=true", server.monitor_url());
        let up = until_http_ok("nats-server's /healthz 200", &health, Duration::from_secs(30));
        if let Err(timed_out) = up.await {
            panic!("{timed_out}; its log:\n{}", server.log_text());
        }
        server
    }

    /// `nats://HOST:PORT`.
    pub fn url(&self) -> String {
        format!("nats://{}:{}", self.host, self.port)
    }

    /// `http://HOST:MONITOR`.
    pub fn monitor_url(&self) -> String {
        format!("http://{}:{}", self.host, self.monitor)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.state.join("nats.log")).unwrap_or_default()
    }

    /// `/varz`: the server's version and counters.
    pub async fn varz(&self) -> serde_json::Value {
        self.monitor_json("/varz").await
    }

    /// `/jsz?consumers=true`: the streams and consumers, as KEDA's `nats-jetstream` scaler
    /// reads them.
    pub async fn jsz(&self) -> serde_json::Value {
        self.monitor_json("/jsz?consumers=true").await
    }

    async fn monitor_json(&self, path: &str) -> serde_json::Value {
        let url = format!("{}{path}", self.monitor_url());
        let response = reqwest::get(&url).await.unwrap_or_else(|err| panic!("GET {url}: {err}"));
        response.json().await.unwrap_or_else(|err| panic!("{url}: {err}"))
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            process::signal(self.pid, libc::SIGTERM);
            process::signal(self.pid, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
