//! Child processes that cannot outlive the test process.
//!
//! Every child gets `PR_SET_PDEATHSIG(SIGKILL)`, which fires when the *thread* that spawned it
//! ends, so children are spawned from one keeper thread that lives as long as the process. An
//! `atexit` hook stops them politely and removes their state folders and logs on a normal exit;
//! the death signal covers a test binary that is killed outright.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use renderpool_testkit::wait;

type SpawnRequest = (Command, Sender<std::io::Result<u32>>);

struct Registry {
    children: Vec<Child>,
    /// State folders and log files.
    leftovers: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { children: Vec::new(), leftovers: Vec::new() });
static KEEPER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();

fn keeper() -> &'static Mutex<Sender<SpawnRequest>> {
    KEEPER.get_or_init(|| {
        let (tx, rx) = channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("process-keeper".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(spawn_here(&mut command));
                }
                // The sender lives in a static, so this loop never ends while the process runs.
            })
            .unwrap_or_else(|err| panic!("cannot start the process keeper thread: {err}"));
        // SAFETY: `stop_all` is an `extern "C" fn()` that never unwinds across the boundary.
        unsafe { libc::atexit(stop_all) };
        Mutex::new(tx)
    })
}

fn spawn_here(command: &mut Command) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    let pid = child.id();
    lock().children.push(child);
    Ok(pid)
}

fn lock() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts `command` as a child that is stopped when the test process exits; returns its pid.
pub(crate) fn spawn(command: Command) -> std::io::Result<u32> {
    let (tx, rx) = channel();
    keeper()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((command, tx))
        .map_err(|_| std::io::Error::other("process keeper thread is gone"))?;
    rx.recv().map_err(|_| std::io::Error::other("process keeper thread is gone"))?
}

/// Sends `signal` to the child with `pid`, then waits up to 10 s for it to exit.
pub(crate) fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: plain kill(2) on a pid this module spawned and has not reaped yet.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
    let what = format!("process {pid} to exit");
    // One that outlives this wait is left to the exit handler's SIGKILL.
    let _ = wait::try_until_blocking(&what, Duration::from_secs(10), || {
        let mut registry = lock();
        let running = registry
            .children
            .iter_mut()
            .find(|child| child.id() == pid)
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)));
        !running
    });
}

/// How the child with `pid` ended, or `None` while it runs (or if this module did not spawn it).
pub(crate) fn exit_status(pid: u32) -> Option<std::process::ExitStatus> {
    let mut registry = lock();
    let child = registry.children.iter_mut().find(|child| child.id() == pid)?;
    child.try_wait().ok().flatten()
}

/// Removes `path`, a folder or a file, when the test process exits (after its processes are
/// stopped).
pub(crate) fn remove_on_exit(path: PathBuf) {
    lock().leftovers.push(path);
}

extern "C" fn stop_all() {
    let mut registry = lock();
    for child in &registry.children {
        // SAFETY: plain kill(2) on a pid we spawned.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for child in &mut registry.children {
        let left = deadline.saturating_duration_since(Instant::now());
        let what = format!("process {} to exit on SIGTERM", child.id());
        let _ = wait::try_until_blocking(&what, left, || !matches!(child.try_wait(), Ok(None)));
        let _ = child.kill();
        let _ = child.wait();
    }
    for path in registry.leftovers.drain(..) {
        // Never delete through a mount (a bind mount would take the files it shows with it).
        if path.is_dir() && !crate::mounts::any_under(&path) {
            let _ = std::fs::remove_dir_all(path);
        } else if path.is_file() {
            let _ = std::fs::remove_file(path);
        }
    }
}
