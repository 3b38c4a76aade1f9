//! Containers started by runc from an unpacked image root, the way a kubelet starts a pod's
//! container: the image's command, env, user and working dir, a read-only root, only `/tmp`
//! writable, no capabilities, an `/etc/hosts` of the runtime's. They share the host's network
//! namespace, so their servers must bind 127.0.0.1, and are deleted when dropped, also when a
//! test panics.

use crate::oci::{Image, run};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The writable `/tmp` of a container.
#[derive(Debug, Clone)]
pub enum Tmp {
    /// A tmpfs of this many MiB (a memory-backed emptyDir with a size limit).
    Memory { mib: u32 },
    /// A bind-mounted folder of the test's (a disk-backed emptyDir).
    Dir(PathBuf),
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Spec {
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub uid: u32,
    pub gid: u32,
    pub cwd: String,
    pub tmp: Tmp,
    /// CPU limit in millicores and memory limit in bytes, set on the container's own cgroup.
    pub limits: Option<(u64, u64)>,
}

impl Spec {
    /// The image's own command, env, user and working dir.
    pub fn from_image(image: &Image, tmp: Tmp) -> Spec {
        let (uid, gid) = image.user();
        let cwd = image.runtime()["WorkingDir"].as_str().filter(|d| !d.is_empty()).unwrap_or("/");
        Spec {
            args: image.command(),
            env: image.env(),
            uid,
            gid,
            cwd: cwd.into(),
            tmp,
            limits: None,
        }
    }

    /// Replaces the image's `Cmd` (what a pod's `args` do), keeping its `Entrypoint`.
    pub fn with_args(mut self, image: &Image, args: &[&str]) -> Spec {
        let entrypoint =
            image.command().len() - image.runtime()["Cmd"].as_array().map_or(0, Vec::len);
        self.args.truncate(entrypoint);
        self.args.extend(args.iter().map(|arg| arg.to_string()));
        self
    }

    /// Adds or overrides environment variables (what a pod's `env` does).
    pub fn with_env(mut self, vars: &[(&str, &str)]) -> Spec {
        for (name, value) in vars {
            self.env.retain(|entry| !entry.starts_with(&format!("{name}=")));
            self.env.push(format!("{name}={value}"));
        }
        self
    }

    fn runtime_config(&self) -> Value {
        let mut mounts = vec![
            json!({"destination": "/proc", "type": "proc", "source": "proc"}),
            json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                   "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
            json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
                   "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                   "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
            json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
                   "options": ["nosuid", "noexec", "nodev"]}),
            // The host's network namespace owns sysfs, so it is bound read-only, not mounted anew.
            json!({"destination": "/sys", "type": "bind", "source": "/sys",
                   "options": ["rbind", "nosuid", "noexec", "nodev", "ro"]}),
            json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                   "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}),
        ];
        mounts.push(match &self.tmp {
            Tmp::Memory { mib } => {
                json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777", format!("size={mib}m")]})
            }
            Tmp::Dir(dir) => json!({"destination": "/tmp", "type": "bind", "source": dir,
                "options": ["rbind", "nosuid", "nodev", "rw"]}),
        });
        let resources = self.limits.map_or(json!({}), |(millicores, memory)| {
            json!({"cpu": {"quota": millicores * 100, "period": 100_000}, "memory": {"limit": memory}})
        });
        json!({
            "ociVersion": "1.0.2",
            "process": {
                "terminal": false,
                "user": {"uid": self.uid, "gid": self.gid},
                "args": self.args,
                "env": self.env,
                "cwd": self.cwd,
                "capabilities": {"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []},
                "noNewPrivileges": true
            },
            "root": {"path": "rootfs", "readonly": true},
            "hostname": "renderpool-test",
            "mounts": mounts,
            "linux": {
                "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
                "resources": resources,
                "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                    "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
                "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
            }
        })
    }
}

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A runc container of this test process; deleted (killed first if need be) on drop.
#[derive(Debug)]
pub struct Container {
    id: String,
    state: tempfile::TempDir,
    /// Where a detached container's stdout and stderr go.
    pub log: PathBuf,
}

impl Container {
    fn prepare(bundle: &Path, spec: &Spec) -> Container {
        // The runtime's /etc/hosts, as a kubelet mounts one into every container.
        let hosts = bundle.join("hosts");
        std::fs::write(&hosts, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", hosts.display()));
        let mut config = spec.runtime_config();
        if let Some(mounts) = config["mounts"].as_array_mut() {
            mounts.push(json!({"destination": "/etc/hosts", "type": "bind", "source": hosts,
                "options": ["rbind", "ro"]}));
        }
        let path = bundle.join("config.json");
        std::fs::write(&path, config.to_string())
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
        let id = format!(
            "renderpool-test-{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        let state = tempfile::Builder::new()
            .prefix("renderpool-runc-")
            .tempdir()
            .unwrap_or_else(|err| panic!("no temporary folder: {err}"));
        Container { log: bundle.join(format!("{id}.log")), id, state }
    }

    fn runc(&self) -> Command {
        let mut command = Command::new("runc");
        command.arg("--root").arg(self.state.path());
        command
    }

    /// Starts the bundle's container in the background; its output goes to [`Container::log`].
    pub fn start(bundle: &Path, spec: &Spec) -> Container {
        let container = Container::prepare(bundle, spec);
        let log = std::fs::File::create(&container.log)
            .unwrap_or_else(|err| panic!("cannot create {}: {err}", container.log.display()));
        let err = log.try_clone().unwrap_or_else(|err| panic!("cannot clone a file handle: {err}"));
        // The container keeps runc's stdout and stderr: they must be the log file, not a pipe
        // that a runner would wait on until the container ends.
        let status = container
            .runc()
            .args(["run", "--detach", "--bundle"])
            .arg(bundle)
            .arg(&container.id)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .status()
            .unwrap_or_else(|err| panic!("cannot run runc: {err}"));
        assert!(status.success(), "runc run failed ({status}):\n{}", container.log_text());
        container
    }

    /// Starts the bundle's container in the foreground: the returned `runc run` child exits
    /// with the container's own exit status; stdout and stderr are piped.
    pub fn spawn(bundle: &Path, spec: &Spec) -> (Container, Child) {
        let container = Container::prepare(bundle, spec);
        let child = container
            .runc()
            .args(["run", "--bundle"])
            .arg(bundle)
            .arg(&container.id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start runc: {err}"));
        (container, child)
    }

    /// The container's status as runc reports it (`created`, `running`, `stopped`), or `None`
    /// once it is gone.
    pub fn status(&self) -> Option<String> {
        let output = self.runc().args(["state", &self.id]).output().ok()?;
        let state: Value = serde_json::from_slice(&output.stdout).ok()?;
        state["status"].as_str().map(String::from)
    }

    /// The container's first process, as runc reports it (a pid of this machine's namespace).
    pub fn pid(&self) -> Option<u32> {
        let output = self.runc().args(["state", &self.id]).output().ok()?;
        let state: Value = serde_json::from_slice(&output.stdout).ok()?;
        state["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok()).filter(|pid| *pid > 0)
    }

    /// Sends `signal` (e.g. `TERM`) to the container's first process.
    pub fn kill(&self, signal: &str) {
        run(self.runc().args(["kill", &self.id, signal]));
    }

    /// What a detached container wrote so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // --force kills a running container first; a container already gone is fine.
        let _ = self.runc().args(["delete", "--force", &self.id]).output();
    }
}
