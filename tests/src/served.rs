//! A server the tests start on the host (Gotenberg, NATS, the S3 gateway): a folder of its own
//! holding its log and whatever state it keeps, removed when dropped and when the test process
//! exits; its process stopped (SIGTERM, then SIGKILL) when dropped, also when a test panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{process, until_http_ok};

/// A running server child.
pub(crate) struct Served {
    pid: u32,
    folder: PathBuf,
    log: PathBuf,
    stopped: bool,
}

impl Served {
    /// The folder of server `name` listening on `port`, made now and removed at exit.
    pub(crate) fn folder(name: &str, port: u16) -> PathBuf {
        let folder =
            std::env::temp_dir().join(format!("renderpool-{name}-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&folder)
            .unwrap_or_else(|err| panic!("{}: {err}", folder.display()));
        process::remove_on_exit(folder.clone());
        folder
    }

    /// Spawns `command` with stdin closed and both outputs in `<folder>/<name>.log`.
    pub(crate) fn spawn(name: &str, folder: PathBuf, mut command: Command) -> Served {
        let log = folder.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).unwrap_or_else(|err| panic!("{}: {err}", log.display()));
        let copy = file.try_clone().unwrap_or_else(|err| panic!("{}: {err}", log.display()));
        command.stdin(Stdio::null()).stdout(copy).stderr(file);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start {name}: {err}"));
        Served { pid, folder, log, stopped: false }
    }

    /// Waits until `url` answers 2xx (`what` names the wait); panics with the server's log
    /// when it does not within `bound`.
    pub(crate) async fn until_ok(&self, what: &str, url: &str, bound: Duration) {
        if let Err(timed_out) = until_http_ok(what, url, bound).await {
            panic!("{timed_out}; its log:\n{}", self.log_text());
        }
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Its folder.
    pub(crate) fn folder_path(&self) -> &Path {
        &self.folder
    }

    /// What it logged so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it was neither stopped nor killed yet.
    pub(crate) fn running(&self) -> bool {
        !self.stopped
    }

    /// Stops it: SIGTERM, then SIGKILL if it outlives the wait.
    pub(crate) fn stop(&mut self) {
        if self.running() {
            process::signal(self.pid, libc::SIGTERM);
            self.kill();
        }
    }

    /// Kills it (SIGKILL) and waits for the exit, as a crash would end it.
    pub(crate) fn kill(&mut self) {
        if self.running() {
            process::signal(self.pid, libc::SIGKILL);
            // Never signalled again: its pid may be reused.
            self.stopped = true;
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}
