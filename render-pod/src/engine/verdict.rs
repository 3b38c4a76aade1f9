//! Judging a job whose worker did not survive it: what the client is told, why the worker is
//! replaced, and whether the document is to blame (quarantined at once) or only unlucky (a
//! strike; a second strike quarantines).

use std::time::Duration;

use super::job::JobError;
use super::protocol::{FatalCause, FatalReport};

/// How a worker ended during a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It reported why it was dying before it died.
    Reported(FatalReport),
    /// Its pipe broke without a report (SIGKILL, the kernel's OOM killer, an exit); `how` says
    /// how the process ended, `signal` the signal if one ended it.
    Unreported { signal: Option<i32>, how: String },
    /// It was still running at the job's deadline and was killed; `ran` is how long it had.
    Deadline { ran: Duration, deadline: Duration },
}

/// Whether the document caused the ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The worker's own ceiling, a fault of its own or the deadline points at the document.
    Guilty,
    /// No cause in the document can be shown (a signal from outside, the pod's OOM killer).
    Strike,
    /// The ending points away from the document: a job killed at its deadline after waiting
    /// most of it in the queue. Counting a strike there would let an overloaded pod quarantine
    /// whatever documents its clients sent while it was full.
    Acquitted,
}

/// What follows from an [`Ending`].
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The client's answer.
    pub error: JobError,
    /// The `worker_restarts` reason.
    pub restart: &'static str,
    /// The `jobs` outcome label.
    pub outcome: &'static str,
    /// Whether the document is quarantined at once or gets a strike.
    pub blame: Blame,
}

/// Judges `ending` for a worker that ran with memory ceiling `ceiling`. A job killed at its
/// deadline is the document's doing when it had at least half the deadline to itself; one that
/// waited most of it in the queue was unlucky.
pub fn judge(ending: &Ending, ceiling: Option<u64>) -> Verdict {
    match ending {
        Ending::Deadline { ran, deadline } => Verdict {
            error: JobError::DeadlineExceeded { deadline: *deadline, queued: false },
            restart: "deadline",
            outcome: "deadline",
            blame: if *ran >= *deadline / 2 { Blame::Guilty } else { Blame::Acquitted },
        },
        Ending::Reported(FatalReport { signal, cause }) => {
            let died = super::procfs::describe_signal(*signal);
            match (cause, ceiling) {
                (FatalCause::OutOfMemory, Some(ceiling_bytes)) => Verdict {
                    error: JobError::MemoryLimitExceeded { ceiling_bytes },
                    restart: "memory_limit",
                    outcome: "memory_limit",
                    blame: Blame::Guilty,
                },
                (FatalCause::OutOfMemory, None) => crashed(
                    format!("{died} after an allocation was refused"),
                    "crash",
                    Blame::Guilty,
                ),
                (FatalCause::Fault, _) => crashed(died, "crash", Blame::Guilty),
                (FatalCause::External { sender }, _) => {
                    crashed(format!("{died}, sent by process {sender}"), "killed", Blame::Strike)
                }
                // PDFium driven into a call rendering never makes: the document's doing, as
                // much as a fault is (and an exploit's most likely first sign).
                (FatalCause::Sandbox { syscall }, _) => crashed(
                    format!("{died}: the sandbox refused system call {}", call_name(*syscall)),
                    "sandbox",
                    Blame::Guilty,
                ),
            }
        }
        Ending::Unreported { signal, how } => {
            // An unreported SIGSYS is seccomp's (one sent from outside is caught and reported),
            // but with no call to show, only a strike.
            let restart = match signal {
                Some(libc::SIGSYS) => "sandbox",
                Some(_) => "killed",
                None => "crash",
            };
            crashed(how.clone(), restart, Blame::Strike)
        }
    }
}

/// "openat (257)", or the number alone for a call the sandbox does not name.
fn call_name(syscall: i32) -> String {
    match super::sandbox::syscall_name(syscall) {
        Some(name) => format!("{name} ({syscall})"),
        None => syscall.to_string(),
    }
}

fn crashed(detail: String, restart: &'static str, blame: Blame) -> Verdict {
    Verdict { error: JobError::WorkerCrashed { detail }, restart, outcome: "crashed", blame }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const MIB: u64 = 1 << 20;

    fn reported(signal: i32, cause: FatalCause) -> Ending {
        Ending::Reported(FatalReport { signal, cause })
    }

    #[test]
    fn the_ceiling_and_own_faults_convict_at_once() {
        let v = judge(&reported(libc::SIGABRT, FatalCause::OutOfMemory), Some(512 * MIB));
        assert_eq!(v.error, JobError::MemoryLimitExceeded { ceiling_bytes: 512 * MIB });
        assert_eq!((v.error.status(), v.error.code()), (422, "memory_limit_exceeded"));
        assert_eq!((v.restart, v.blame), ("memory_limit", Blame::Guilty));
        let v = judge(&reported(libc::SIGSEGV, FatalCause::Fault), Some(512 * MIB));
        assert_eq!(
            (v.error.code(), v.restart, v.blame),
            ("worker_crashed", "crash", Blame::Guilty)
        );
        assert!(v.error.to_string().contains("SIGSEGV"), "{}", v.error);
        // Without a ceiling a refused allocation is still the document's, but no limit to name.
        let v = judge(&reported(libc::SIGTRAP, FatalCause::OutOfMemory), None);
        assert_eq!((v.error.code(), v.blame), ("worker_crashed", Blame::Guilty));
    }

    #[test]
    fn signals_from_outside_are_strikes() {
        let v = judge(&reported(libc::SIGSEGV, FatalCause::External { sender: 4242 }), None);
        assert_eq!(
            (v.error.code(), v.restart, v.blame),
            ("worker_crashed", "killed", Blame::Strike)
        );
        assert!(v.error.to_string().contains("4242"), "{}", v.error);
        let killed = Ending::Unreported {
            signal: Some(libc::SIGKILL),
            how: "killed by signal 9 (SIGKILL)".into(),
        };
        let v = judge(&killed, Some(MIB));
        assert_eq!((v.error.status(), v.restart, v.blame), (502, "killed", Blame::Strike));
        let exited = Ending::Unreported { signal: None, how: "exited with status 1".into() };
        assert_eq!(judge(&exited, None).restart, "crash");
        assert_eq!(judge(&exited, None).blame, Blame::Strike);
    }

    #[test]
    fn a_refused_call_convicts_and_names_the_call() {
        let execve = i32::try_from(libc::SYS_execve).unwrap();
        let v = judge(&reported(libc::SIGSYS, FatalCause::Sandbox { syscall: execve }), None);
        assert_eq!(
            (v.error.status(), v.error.code(), v.restart, v.outcome, v.blame),
            (502, "worker_crashed", "sandbox", "crashed", Blame::Guilty)
        );
        let detail = v.error.to_string();
        assert!(detail.contains("SIGSYS") && detail.contains("execve"), "{detail}");
        let unreported = Ending::Unreported {
            signal: Some(libc::SIGSYS),
            how: "killed by signal 31 (SIGSYS)".into(),
        };
        let v = judge(&unreported, None);
        assert_eq!((v.restart, v.blame), ("sandbox", Blame::Strike));
    }

    #[test]
    fn a_deadline_convicts_only_a_job_that_had_half_of_it() {
        let deadline = Duration::from_secs(30);
        let long = Ending::Deadline { ran: Duration::from_secs(29), deadline };
        let v = judge(&long, None);
        assert_eq!((v.error.status(), v.restart, v.blame), (504, "deadline", Blame::Guilty));
        let queued_most = Ending::Deadline { ran: Duration::from_secs(3), deadline };
        assert_eq!(judge(&queued_most, None).blame, Blame::Acquitted);
    }
}
