//! A real Gotenberg for tests and benchmarks: its LibreOffice-only command over Debian's
//! LibreOffice, started with exactly the arguments the operator puts in its Deployment (so the
//! operator's flags are proven by the binary, not by string comparison), bound to 127.0.0.1 and a
//! free port through the environment (Gotenberg lets `API_BIND_IP`/`API_PORT` override flags),
//! and stopped with its LibreOffice afterwards, also when a test panics.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster::bin_dir;
use crate::served::Served;
use crate::{free_port, repo_root, rss_bytes};
use renderpool_testkit::machine;

/// How the unoconverter runs unoconv: the command line of one conversion in LibreOffice.
const UNOCONV: &str = "/usr/bin/python3 /usr/bin/unoconv ";

/// The User-Agent of the unoconverter watchdog's restart conversions
/// (`images/gotenberg/unoconverter`).
const WATCHDOG_AGENT: &str = "renderpool-unoconverter-watchdog";

/// Prometheus gauge of requests inside Gotenberg (running plus queued for LibreOffice).
pub const QUEUE_GAUGE: &str = "gotenberg_libreoffice_requests_queue_size";

/// A running Gotenberg.
pub struct Gotenberg {
    server: Served,
    port: u16,
    /// Where its LibreOffice makes its pipes while /tmp is read-only (`OSL_SOCKET_PATH`).
    pipe_folder: PathBuf,
}

/// One line of Gotenberg's JSON access log.
#[derive(Debug, Clone)]
pub struct Access {
    /// HTTP status (499: the client went away).
    pub status: u16,
    /// Request body bytes.
    pub bytes_in: u64,
    /// When the request arrived.
    pub started: f64,
    /// When it was answered (seconds since the epoch).
    pub ended: f64,
}

impl Gotenberg {
    /// Starts `gotenberg-libreoffice` with `args` as the operator builds them: the first is the
    /// image's command (`gotenberg`) and is replaced by the local binary, the rest are passed as
    /// they are. Waits until `/health` says LibreOffice is up.
    pub async fn start(args: &[String]) -> Gotenberg {
        let flags = match args.first() {
            Some(command) if !command.starts_with('-') => &args[1..],
            _ => args,
        };
        let bin = bin_dir().unwrap_or_else(|err| panic!("Gotenberg binaries: {err}"));
        let port = free_port();
        let state = Served::folder("gotenberg", port);
        let environment = environment(&state, &bin);
        let pipe_folder = environment
            .iter()
            .find(|(key, _)| key == "OSL_SOCKET_PATH")
            .map(|(_, folder)| PathBuf::from(folder))
            .unwrap_or_else(|| panic!("scripts/gotenberg-env.sh names no OSL_SOCKET_PATH"));
        // Its LibreOffice's pipes in its folder, not in /tmp.
        let mut command = Command::new(repo_root().join("scripts/read-only-tmp.sh"));
        command
            .arg(&state)
            .arg(bin.join("gotenberg-libreoffice"))
            .args(flags)
            .envs(environment)
            .env("API_BIND_IP", "127.0.0.1")
            .env("API_PORT", port.to_string())
            // The queue gauge is sampled by Gotenberg itself; 100 ms lets tests follow it.
            .env("PROMETHEUS_COLLECT_INTERVAL", "100ms")
            .env("LOG_STD_FORMAT", "json");
        let server = Served::spawn("gotenberg", state, command);
        let gotenberg = Gotenberg { server, port, pipe_folder };
        let health = format!("{}/health", gotenberg.url());
        gotenberg
            .server
            .until_ok("Gotenberg's /health 200", &health, Duration::from_secs(60))
            .await;
        gotenberg
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Everything Gotenberg logged so far.
    pub fn log_text(&self) -> String {
        self.server.log_text()
    }

    /// The conversion requests Gotenberg answered so far, from its access log (the
    /// unoconverter watchdog's own, which restart LibreOffice, are [`Gotenberg::restarts`]).
    pub fn conversions(&self) -> Vec<Access> {
        self.access(|agent| agent != WATCHDOG_AGENT)
    }

    /// The conversions the unoconverter's watchdog sent after killing a LibreOffice that was
    /// still busy with an abandoned conversion (so that Gotenberg starts a new one at once).
    pub fn restarts(&self) -> Vec<Access> {
        self.access(|agent| agent == WATCHDOG_AGENT)
    }

    fn access(&self, agent: impl Fn(&str) -> bool) -> Vec<Access> {
        self.log_text()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|v| v["log_type"] == "access" && v["path"] == "/forms/libreoffice/convert")
            .filter(|v| agent(v["user_agent"].as_str().unwrap_or_default()))
            .map(|v| {
                let ended = v["ts"].as_f64().unwrap_or(0.0);
                let latency = v["latency"].as_f64().unwrap_or(0.0) / 1e9;
                Access {
                    status: u16::try_from(v["status"].as_u64().unwrap_or(0)).unwrap_or(0),
                    bytes_in: v["bytes_in"].as_u64().unwrap_or(0),
                    started: ended - latency,
                    ended,
                }
            })
            .collect()
    }

    /// Gotenberg, its LibreOffice and the unoconverter of a conversion in progress: every process
    /// that is Gotenberg, its child, or names its state folder (LibreOffice runs in a process
    /// group of its own). Pairs of pid and command line.
    pub fn processes(&self) -> Vec<(u32, String)> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let state = self.server.folder_path().to_string_lossy().to_string();
        let me = self.server.pid();
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                let ours =
                    pid == me || machine::parent_of(pid) == Some(me) || cmdline.contains(&state);
                ours.then_some((pid, cmdline))
            })
            .collect()
    }

    /// Conversions LibreOffice is running now: unoconv processes under Gotenberg (the
    /// unoconverter wrapper's own shells and its watchdog are not counted).
    pub fn converting(&self) -> usize {
        self.processes().iter().filter(|(_, cmdline)| cmdline.contains(UNOCONV)).count()
    }

    /// The LibreOffice processes (`soffice.bin`) Gotenberg runs now.
    pub fn libreoffice(&self) -> Vec<u32> {
        self.processes()
            .into_iter()
            .filter(|(_, cmdline)| cmdline.contains("soffice.bin"))
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Whether it runs in a mount namespace of its own, the one `scripts/read-only-tmp.sh`
    /// makes where it may.
    pub fn has_mount_namespace(&self) -> bool {
        let namespace = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        let theirs = namespace(&self.server.pid().to_string());
        theirs.is_some() && theirs != namespace("self")
    }

    /// LibreOffice's single-instance pipes (`OSL_PIPE_*`) in the folder `OSL_SOCKET_PATH`
    /// names, where they go when /tmp is read-only.
    pub fn libreoffice_pipes(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.pipe_folder) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("OSL_PIPE_"))
            .map(|e| e.path())
            .collect()
    }

    /// Resident memory of Gotenberg and everything it runs, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        self.processes().iter().filter_map(|(pid, _)| rss_bytes(*pid)).sum()
    }

    /// Kills Gotenberg and its LibreOffice at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.server.kill();
        self.sweep();
    }

    /// LibreOffice survives a killed Gotenberg (own process group): kill what names our folder.
    fn sweep(&self) {
        for (pid, _) in self.processes() {
            // SAFETY: plain kill(2) on a process that names this instance's state folder.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

impl Drop for Gotenberg {
    fn drop(&mut self) {
        if self.server.running() {
            // SIGTERM lets Gotenberg stop LibreOffice itself; whatever is left is killed.
            self.server.stop();
            self.sweep();
        }
    }
}

/// The environment `scripts/gotenberg-env.sh` gives a local Gotenberg (the one copy of it).
fn environment(state: &std::path::Path, bin: &std::path::Path) -> Vec<(String, String)> {
    let script = repo_root().join("scripts/gotenberg-env.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(state)
        .arg(bin)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|err| panic!("{}: {err}", script.display()));
    assert!(output.status.success(), "{} failed", script.display());
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Requests inside the Gotenberg at `url` now (running and queued for LibreOffice), from its own
/// Prometheus metrics.
pub async fn queue_size_at(url: &str) -> Option<f64> {
    let text = reqwest::get(format!("{url}/prometheus/metrics")).await.ok()?.text().await.ok()?;
    text.lines()
        .find(|line| line.split(' ').next() == Some(QUEUE_GAUGE))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}
