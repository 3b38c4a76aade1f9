//! A real NATS server with JetStream (the pinned `nats-server`) for the durable-job tests and
//! benchmark: on 127.0.0.1 (or the real node's bridge address, for pods) and free ports, its
//! store in a folder of its own, stopped (and the folder removed) when dropped, also when a test
//! panics.

use std::process::Command;
use std::time::Duration;

use crate::cluster::bin_dir;
use crate::served::Served;
use crate::{LOOPBACK, free_port};

/// A running NATS server.
pub struct NatsServer {
    server: Served,
    host: &'static str,
    port: u16,
    monitor: u16,
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
        let folder = Served::folder("nats", port);
        let mut command = Command::new(bin.join("nats-server"));
        command
            .args(["-js", "-a", host, "-p", &port.to_string(), "-m", &monitor.to_string()])
            .arg("-sd")
            .arg(folder.join("jetstream"))
            .args(token.map(|token| ["--auth", token]).into_iter().flatten());
        let server =
            NatsServer { server: Served::spawn("nats", folder, command), host, port, monitor };
        let health = format!("{}/healthz?js-enabled-only=true", server.monitor_url());
        server
            .server
            .until_ok("nats-server's /healthz 200", &health, Duration::from_secs(30))
            .await;
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
        self.server.pid()
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
