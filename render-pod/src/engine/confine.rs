//! What a worker is held to from its first instruction, set in the child between fork and exec:
//! it dies with its supervisor, runs niced, has a hard memory ceiling, and is the kernel's first
//! choice when the pod runs out of memory.
//!
//! # Why the ceiling is `RLIMIT_DATA`
//!
//! The ceiling must hold on cgroup v1 and v2 and in an unprivileged pod, where the container's
//! cgroup is mounted read-only and no per-worker group can be made. A resource limit needs no
//! privilege and no cgroup at all, and it makes the *allocation* fail inside the worker (malloc
//! returns NULL, mmap and brk return ENOMEM) instead of leaving the choice of victim to the
//! kernel. Of the two limits, `RLIMIT_AS` counts every mapping: libpdfium's and libc's text,
//! reserved but never touched address space. `RLIMIT_DATA` counts writable private memory only
//! (heap, anonymous mappings, the writable parts of the libraries), which is what a runaway
//! document grows; it is enforced since Linux 4.7 unless the kernel was booted with
//! `ignore_rlimit_data`. This PDFium build (pypdfium2 5.15.2, PDFium 8149) allocates through
//! glibc malloc, not PartitionAlloc, so it reserves no large address space either way (figures
//! in docs/limits.md). Memory counted but never touched (a calloc'd bitmap not yet drawn on) makes
//! the limit stricter than resident memory, never looser, so the sum of the workers' ceilings
//! (slots x memory per slot) plus the supervisor's overhead stays within the pod's limit.

use std::io;

/// The worker's `oom_score_adj`: the highest, so that when the pod's memory runs out anyway the
/// kernel kills a worker (one job lost) and not the supervisor (every job lost). Raising it needs
/// no privilege.
pub const WORKER_OOM_SCORE_ADJ: i32 = 1000;

/// What the supervisor asks for itself when its score is higher. Lowering needs
/// CAP_SYS_RESOURCE, which pods rarely have: then the workers' +1000 alone decides, as the
/// kernel picks the highest `rss + oom_score_adj x memory / 1000`. Not -1000, which would
/// exempt a leaking supervisor entirely.
pub const SUPERVISOR_OOM_SCORE_ADJ: i32 = -900;

/// The limits applied to a worker process before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confinement {
    /// Niceness added to the supervisor's (0..=19), so the front wins the CPU when it wakes.
    pub nice: i32,
    /// Hard `RLIMIT_DATA` in bytes; `None` runs the worker without a ceiling.
    pub memory_ceiling: Option<u64>,
}

impl Confinement {
    /// Applies the limits to the calling process: only async-signal-safe system calls, as this
    /// runs in the forked child before exec.
    pub fn apply_in_child(&self) -> io::Result<()> {
        // SAFETY: prctl, nice, setrlimit, open, write and close act on this process only; the
        // path and the value are static byte strings.
        unsafe {
            // A killed supervisor never leaks PDFium processes.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Raising niceness needs no privilege and the kernel clamps it at 19, so the result
            // carries nothing to act on.
            libc::nice(self.nice);
            if let Some(bytes) = self.memory_ceiling {
                // Soft and hard: the worker cannot lift its own ceiling.
                let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Best effort: the supervisor reads the value back and says if it did not take.
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                let value = b"1000";
                libc::write(fd, value.as_ptr().cast(), value.len());
                libc::close(fd);
            }
        }
        Ok(())
    }
}

/// `oom_score_adj` of process `pid` (`self` for this one).
pub fn oom_score_adj(pid: &str) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).ok()?.trim().parse().ok()
}

/// Says once per supervisor when a worker does not run with [`WORKER_OOM_SCORE_ADJ`] (a sandbox
/// that refuses the write): the kernel may then pick the supervisor in a pod-wide OOM.
pub fn check_worker_score(pid: u32) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let score = oom_score_adj(&pid.to_string());
    if score != Some(WORKER_OOM_SCORE_ADJ) {
        WARNED.call_once(|| {
            tracing::warn!(
                pid,
                ?score,
                wanted = WORKER_OOM_SCORE_ADJ,
                "a worker's oom_score_adj could not be raised; a pod-wide OOM may kill the supervisor"
            );
        });
    }
}

/// Lowers this process's `oom_score_adj` to [`SUPERVISOR_OOM_SCORE_ADJ`] if it is higher, and
/// logs what it is. Refusal (EACCES or EPERM without CAP_SYS_RESOURCE) is expected and harmless
/// while the workers run at +1000.
pub fn spare_supervisor() {
    let Some(current) = oom_score_adj("self") else {
        tracing::info!("no /proc/self/oom_score_adj; the supervisor's OOM score stays as it is");
        return;
    };
    if current <= SUPERVISOR_OOM_SCORE_ADJ {
        tracing::info!(oom_score_adj = current, "supervisor OOM score already low");
        return;
    }
    match std::fs::write("/proc/self/oom_score_adj", SUPERVISOR_OOM_SCORE_ADJ.to_string()) {
        Ok(()) => {
            tracing::info!(oom_score_adj = SUPERVISOR_OOM_SCORE_ADJ, "supervisor OOM score lowered")
        }
        Err(error) if matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            tracing::info!(
                oom_score_adj = current,
                workers = WORKER_OOM_SCORE_ADJ,
                "cannot lower the supervisor's OOM score without CAP_SYS_RESOURCE; workers are \
                 raised instead, so the kernel still picks a worker first"
            );
        }
        Err(error) => tracing::warn!(%error, "cannot set the supervisor's OOM score"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn this_process_has_a_score() {
        assert!(oom_score_adj("self").is_some_and(|s| (-1000..=1000).contains(&s)));
        assert_eq!(oom_score_adj("0"), None);
    }
}
