//! The reaper: a process of its own that holds the machine lock for the real node's whole life
//! and undoes the node when the test process ends, however it ends.
//!
//! The test process keeps the write end of the reaper's stdin. On a normal exit (tests done, a
//! test panicked) an exit hook stops the node's daemons, writes [`NORMAL_EXIT`] into that pipe,
//! closes it and waits for the reaper to finish; if the test process is killed outright, its
//! daemons die with it (their parent-death signal) and the kernel closes the pipe. Either way
//! the reaper reads end of file, undoes everything in the record, then releases the lock; after
//! a kill it also removes the cluster's state folder, which no exit hook will. It runs in its
//! own session, so a Ctrl-C meant for the test does not stop it half-way.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use renderpool_testkit::wait;

use super::host::{self, HARD_CODED};
use super::record::Record;
use super::teardown;
use crate::cluster::ClusterError;
use crate::{process, workspace_bin};

/// The argument that makes `local-cluster` act as the reaper.
pub const REAP_ARG: &str = "--reap-real-node";

/// What the reaper prints once it holds the lock.
const READY: &str = "ready";

/// What the exit hook tells the reaper before closing its stdin.
const NORMAL_EXIT: &[u8] = b"exit\n";

static REAPER: Mutex<Option<Child>> = Mutex::new(None);
/// The node's daemons, in start order; stopped newest first before the reaper takes over.
static DAEMONS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `local-cluster` is its own reaper; a test process uses the one cargo built beside it.
fn reaper_exe() -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) if exe.file_stem().is_some_and(|stem| stem == "local-cluster") => exe,
        _ => workspace_bin("local-cluster"),
    }
}

/// Starts the reaper and waits until it holds the machine lock; fails with its message when
/// another real node holds it.
pub(super) fn claim() -> Result<(), ClusterError> {
    let mut reaper = lock(&REAPER);
    if reaper.is_some() {
        return Err(ClusterError::RealNodeBusy(
            "this process already started its real node (after a failed start, read the error \
             that start gave; it is not retried)"
                .into(),
        ));
    }
    let mut command = Command::new(reaper_exe());
    command.arg(REAP_ARG).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let mut stdout = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| ClusterError::Setup("the reaper's stdout was not captured".into()))?,
    );
    let mut first = String::new();
    stdout.read_line(&mut first)?;
    if first.trim() != READY {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        let _ = child.wait();
        return Err(ClusterError::RealNodeBusy(format!("{}{rest}", first.trim_end())));
    }
    *reaper = Some(child);
    // SAFETY: `release` is an `extern "C" fn()` that never unwinds across the boundary. It runs
    // before the process keeper's own hook (registered earlier), so the node goes first.
    unsafe { libc::atexit(release) };
    Ok(())
}

/// Has the exit hook stop `pid` (a node daemon started by the process keeper) before the
/// reaper undoes the rest.
pub(super) fn stop_first_on_exit(pid: u32) {
    lock(&DAEMONS).push(pid);
}

extern "C" fn release() {
    for pid in lock(&DAEMONS).drain(..).rev() {
        process::signal(pid, libc::SIGTERM);
    }
    let Some(mut reaper) = lock(&REAPER).take() else { return };
    if let Some(mut stdin) = reaper.stdin.take() {
        let _ = stdin.write_all(NORMAL_EXIT);
    }
    let _ = wait::try_until_blocking("the reaper's exit", Duration::from_secs(120), || {
        !matches!(reaper.try_wait(), Ok(None))
    });
}

/// The reaper process: `local-cluster --reap-real-node`. Returns its exit code.
pub fn main() -> i32 {
    let lock_file = match take_machine_lock() {
        Ok(Some(file)) => file,
        Ok(None) => {
            println!("{}", busy_message());
            return 1;
        }
        Err(err) => {
            println!(
                "cannot take the real node's machine lock {}: {err}",
                host::lock_path().display()
            );
            return 1;
        }
    };
    // A reaper that was itself killed left its record: undo that node before a new one starts,
    // unless its test process still runs it.
    if let Ok(Some(stale)) = Record::load(&host::record_path()) {
        if teardown::runs_any(&stale) {
            println!("{}", busy_message());
            return 1;
        }
        report("an earlier real node", &teardown::undo(&stale));
    }
    let _ = std::fs::remove_file(host::record_path());
    println!("{READY}");
    let _ = std::io::stdout().flush();
    // The end of file is the signal: the test process is done, or gone.
    let mut said = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut said);
    let killed = said != NORMAL_EXIT;
    let problems = match Record::load(&host::record_path()) {
        Ok(Some(record)) => {
            let mut problems = teardown::undo(&record);
            if killed && problems.is_empty() {
                teardown::remove_dir(&record.cluster_dir, &mut problems);
            }
            problems
        }
        Ok(None) => Vec::new(),
        Err(err) => vec![err.to_string()],
    };
    report("the real node", &problems);
    if problems.is_empty() {
        let _ = std::fs::remove_file(host::record_path());
    }
    // Unlink while still holding the lock; a waiter that opened the old file notices (below).
    let _ = std::fs::remove_file(host::lock_path());
    let _ = std::fs::remove_dir(host::MACHINE_DIR);
    drop(lock_file);
    i32::from(!problems.is_empty())
}

fn report(what: &str, problems: &[String]) {
    if !problems.is_empty() {
        let _ = writeln!(
            std::io::stderr(),
            "real-node reaper: could not fully undo {what}:\n  {}",
            problems.join("\n  ")
        );
    }
}

/// The lock file, locked; `None` if another reaper holds it.
fn take_machine_lock() -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(host::MACHINE_DIR)?;
    loop {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(host::lock_path())?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            return if err.kind() == std::io::ErrorKind::WouldBlock { Ok(None) } else { Err(err) };
        }
        // The previous holder unlinks the file before it lets go: a lock on a file no longer at
        // the path guards nothing, so open the path again.
        let current = std::fs::metadata(host::lock_path());
        if current.is_ok_and(|meta| meta.ino() == file.metadata().map(|m| m.ino()).unwrap_or(0)) {
            return Ok(Some(file));
        }
        std::fs::create_dir_all(host::MACHINE_DIR)?;
    }
}

fn busy_message() -> String {
    let holder = Record::load(&host::record_path())
        .ok()
        .flatten()
        .map(|record| format!(" (its folder: {})", record.node_dir.display()))
        .unwrap_or_default();
    format!(
        "another real node runs on this machine{holder}. Only one can: containerd, the kubelet \
         and the CNI plugins use fixed host paths ({}). Let that run finish, or run this test \
         in the same test binary as the others, which share one node.",
        HARD_CODED.join(", ")
    )
}
