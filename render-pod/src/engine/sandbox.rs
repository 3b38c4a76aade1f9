//! The worker's sandbox, entered once PDFium is loaded and before the first document: a
//! seccomp-bpf allowlist of the system calls rendering needs (the allocator, the pipes, the
//! fatal-signal report), `PR_SET_NO_NEW_PRIVS`, and resource limits that leave no files to write
//! and no core to dump. The threat model is in docs/sandbox.md.
//!
//! # Why `seccompiler`
//!
//! It is pure Rust (rust-vmm's, the filter Firecracker runs its VMMs under), so the image needs
//! no libseccomp and the build no C toolchain or pkg-config; it compiles a plain allowlist with
//! argument conditions to BPF, which is all this filter is. The `libseccomp` bindings add the C
//! library for features this filter does not use (notify fds, filter merging, pseudo-syscall
//! resolution across ABIs).
//!
//! # What a refused call does
//!
//! `SECCOMP_RET_TRAP`: the call does not run, the kernel raises `SIGSYS` with the call's
//! number, and the worker's fatal-signal handler (installed before the filter, with
//! `SA_RESETHAND`) reports [`FatalCause::Sandbox`](super::protocol::FatalCause::Sandbox) and
//! re-raises it, so the supervisor reads `sandbox` and reaps a worker killed by `SIGSYS`.
//! `rt_sigaction` is not allowed, so code running in a compromised worker cannot take the handler
//! over; if it keeps the worker alive some other way, every forbidden call still fails and the
//! job's deadline ends it.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// How far an allowed call may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allow {
    /// Any arguments.
    Any,
    /// Only at this process (the first argument is its own pid): `raise` re-raising a fatal
    /// signal, never a signal to another process.
    OwnProcess,
    /// Memory that is never executable (`PROT_EXEC` clear in the third argument): PDFium has no
    /// JIT, and a worker that cannot map code cannot stage any.
    NoExec,
    /// Only with this second argument (an `fcntl` command).
    Command(libc::c_int),
}

/// The allowlist, from `strace -f` of workers running every op on the corpus (docs/sandbox.md
/// gives the command and the calls seen). Calls glibc makes through the vDSO (`clock_gettime`)
/// are listed for kernels or builds that fall back to the real call.
const ALLOWED: &[(&str, libc::c_long, Allow)] = &[
    // The pipes: jobs in on stdin, answers out, the fatal report.
    ("read", libc::SYS_read, Allow::Any),
    ("write", libc::SYS_write, Allow::Any),
    ("writev", libc::SYS_writev, Allow::Any),
    // The allocator (glibc malloc: heap, large buffers mapped alone, trims).
    ("brk", libc::SYS_brk, Allow::Any),
    ("mmap", libc::SYS_mmap, Allow::NoExec),
    ("munmap", libc::SYS_munmap, Allow::Any),
    ("mremap", libc::SYS_mremap, Allow::Any),
    ("mprotect", libc::SYS_mprotect, Allow::NoExec),
    ("madvise", libc::SYS_madvise, Allow::Any),
    // Locks (contended glibc or Rust locks), time, randomness; sysinfo is glibc qsort's
    // question of how much memory there is.
    ("futex", libc::SYS_futex, Allow::Any),
    ("clock_gettime", libc::SYS_clock_gettime, Allow::Any),
    ("getrandom", libc::SYS_getrandom, Allow::Any),
    ("sysinfo", libc::SYS_sysinfo, Allow::Any),
    // The fatal-signal handler: getpid, then raise (mask, tgkill, sigreturn).
    ("getpid", libc::SYS_getpid, Allow::Any),
    ("gettid", libc::SYS_gettid, Allow::Any),
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask, Allow::Any),
    ("rt_sigreturn", libc::SYS_rt_sigreturn, Allow::Any),
    ("tgkill", libc::SYS_tgkill, Allow::OwnProcess),
    // The end: the protocol pipe closed (a debug build asks first whether it is open), the
    // signal stack released, the process gone.
    ("close", libc::SYS_close, Allow::Any),
    ("fcntl", libc::SYS_fcntl, Allow::Command(libc::F_GETFD)),
    ("sigaltstack", libc::SYS_sigaltstack, Allow::Any),
    ("exit", libc::SYS_exit, Allow::Any),
    ("exit_group", libc::SYS_exit_group, Allow::Any),
];

/// Forbidden calls worth naming in a verdict (any other is named by its number).
const NOTABLE: &[(&str, libc::c_long)] = &[
    ("openat", libc::SYS_openat),
    ("openat2", libc::SYS_openat2),
    ("socket", libc::SYS_socket),
    ("connect", libc::SYS_connect),
    ("execve", libc::SYS_execve),
    ("execveat", libc::SYS_execveat),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("clone", libc::SYS_clone),
    ("clone3", libc::SYS_clone3),
    ("kill", libc::SYS_kill),
    ("rt_sigaction", libc::SYS_rt_sigaction),
    ("ioctl", libc::SYS_ioctl),
    ("newfstatat", libc::SYS_newfstatat),
    ("prctl", libc::SYS_prctl),
    #[cfg(target_arch = "x86_64")]
    ("open", libc::SYS_open),
    #[cfg(target_arch = "x86_64")]
    ("fork", libc::SYS_fork),
    #[cfg(target_arch = "x86_64")]
    ("vfork", libc::SYS_vfork),
];

/// Descriptors a sandboxed worker may hold: stdin, stdout (pointed at stderr), stderr, the
/// protocol pipe and its duplicate for the fatal report, and room for none more (nothing in
/// the sandbox can create one anyway).
const NOFILE: u64 = 8;

/// Why the sandbox could not be entered (the worker then exits and the slot says so).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// This architecture has no filter.
    #[error("no seccomp filter for {0}: run with --sandbox false")]
    Arch(&'static str),
    /// The filter did not compile.
    #[error("seccomp filter: {0}")]
    Filter(#[from] seccompiler::BackendError),
    /// The kernel refused the filter or a limit.
    #[error("cannot enter the sandbox: {0}")]
    Apply(#[from] seccompiler::Error),
    /// A resource limit could not be set.
    #[error("cannot set {what}: {source}")]
    Limit { what: &'static str, source: std::io::Error },
}

/// The name of system call `number` on this architecture, if it is one the sandbox names.
pub fn syscall_name(number: i32) -> Option<&'static str> {
    let number = libc::c_long::from(number);
    ALLOWED
        .iter()
        .map(|(name, nr, _)| (*name, *nr))
        .chain(NOTABLE.iter().copied())
        .find(|(_, nr)| *nr == number)
        .map(|(name, _)| name)
}

fn arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SandboxError::Arch(std::env::consts::ARCH))
}

fn condition(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
}

/// The rules for a worker with process id `pid`.
fn rules(pid: u32) -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    let prot_exec = u64::try_from(libc::PROT_EXEC).unwrap_or(4);
    ALLOWED
        .iter()
        .map(|(_, number, allow)| {
            let rules = match allow {
                Allow::Any => Vec::new(),
                Allow::OwnProcess => vec![SeccompRule::new(vec![SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    u64::from(pid),
                )?])?],
                Allow::NoExec => {
                    vec![SeccompRule::new(vec![condition(
                        2,
                        SeccompCmpOp::MaskedEq(prot_exec),
                        0,
                    )?])?]
                }
                Allow::Command(command) => vec![SeccompRule::new(vec![SeccompCondition::new(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    u64::try_from(*command).unwrap_or(u64::MAX),
                )?])?],
            };
            Ok((*number, rules))
        })
        .collect()
}

/// The compiled filter for a worker with process id `pid`: refused calls trap.
fn program(pid: u32) -> Result<BpfProgram, SandboxError> {
    let filter =
        SeccompFilter::new(rules(pid)?, SeccompAction::Trap, SeccompAction::Allow, arch()?)?;
    Ok(BpfProgram::try_from(filter)?)
}

fn limit(
    what: &'static str,
    resource: libc::__rlimit_resource_t,
    value: u64,
) -> Result<(), SandboxError> {
    let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: setrlimit on this process with a fully initialised struct.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(SandboxError::Limit { what, source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// Loads the time zone while files can still be read: UTC, as in the image (which has no zone
/// files), whatever the host's. glibc reads the zone once per `TZ` value; without `TZ` it would
/// stat `/etc/localtime` at every `localtime` call (PDFium's dates), which the sandbox forbids.
pub fn settle_time_zone() {
    // SAFETY: the worker has no other thread yet (nothing reads the environment concurrently);
    // localtime_r writes into a local.
    unsafe {
        std::env::set_var("TZ", "UTC");
        let epoch: libc::time_t = 0;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&epoch, &mut tm);
    }
}

/// Enters the sandbox for the rest of this process's life. Call after PDFium is bound and the
/// fatal-signal handler installed, before any document, with no other thread running.
pub fn enter() -> Result<(), SandboxError> {
    // Built before the filter holds: compiling it allocates, which stays allowed, but the
    // arch lookup and the process id are read now.
    let program = program(std::process::id())?;
    // Soft and hard: nothing inside can raise them again.
    limit("RLIMIT_NOFILE", libc::RLIMIT_NOFILE, NOFILE)?;
    // No file to write, and no core file holding a document's pages.
    limit("RLIMIT_FSIZE", libc::RLIMIT_FSIZE, 0)?;
    limit("RLIMIT_CORE", libc::RLIMIT_CORE, 0)?;
    // apply_filter sets PR_SET_NO_NEW_PRIVS first (the kernel requires it of an unprivileged
    // filter): no exec could gain privileges, were exec allowed.
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// Closes every descriptor above stderr this process inherited: a worker starts with its pipes
/// on 0, 1 and 2 only, whatever the supervisor's parent left open without `O_CLOEXEC`.
pub fn close_inherited() {
    // SAFETY: close_range on this process's own descriptors; nothing has been opened yet.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc != 0 {
        // Kernels before 5.9: one close per possible descriptor up to the limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit into a local; close of descriptors this process may hold.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            let highest = libc::c_int::try_from(limit.rlim_cur.min(1 << 16)).unwrap_or(1 << 16);
            for fd in 3..highest {
                libc::close(fd);
            }
        }
    }
}

/// A forbidden call a worker makes on purpose (`--sandbox-probe`), to show the sandbox kills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Probe {
    /// Open `/etc/passwd` for reading.
    Open,
    /// Create a TCP socket.
    Socket,
    /// Connect stdin to 127.0.0.1:9 (refused before the kernel looks at the descriptor).
    Connect,
    /// Run `/bin/true`.
    Execve,
    /// Ask to be traced by the parent.
    Ptrace,
    /// Read another process's memory.
    ProcessVmReadv,
}

impl Probe {
    /// The call the sandbox must refuse, by the name [`syscall_name`] gives it.
    pub fn syscall(self) -> &'static str {
        match self {
            // glibc's open() is the openat call.
            Self::Open => "openat",
            Self::Socket => "socket",
            Self::Connect => "connect",
            Self::Execve => "execve",
            Self::Ptrace => "ptrace",
            Self::ProcessVmReadv => "process_vm_readv",
        }
    }

    /// Makes the call; returns only if it was allowed to run (it then failed or succeeded).
    pub fn run(self) -> i64 {
        // SAFETY: each call is made with valid, static arguments; any that runs acts on this
        // process or fails.
        unsafe {
            match self {
                Self::Open => i64::from(libc::open(c"/etc/passwd".as_ptr(), libc::O_RDONLY)),
                Self::Socket => i64::from(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0)),
                Self::Connect => {
                    let mut address: libc::sockaddr_in = std::mem::zeroed();
                    address.sin_family = libc::AF_INET as libc::sa_family_t;
                    address.sin_port = 9u16.to_be();
                    address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
                    i64::from(libc::connect(
                        0,
                        (&raw const address).cast(),
                        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    ))
                }
                Self::Execve => {
                    let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
                    let envp = [std::ptr::null()];
                    i64::from(libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), envp.as_ptr()))
                }
                Self::Ptrace => libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0),
                Self::ProcessVmReadv => {
                    let mut byte = 0u8;
                    let local = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
                    let remote = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 1 };
                    // At init (pid 1): getppid would be refused first.
                    libc::process_vm_readv(1, &local, 1, &remote, 1, 0) as i64
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        let program = program(4242).unwrap();
        // One check per allowed call at least, and within the kernel's 4096 instructions.
        assert!(program.len() > ALLOWED.len() && program.len() < 4096, "{}", program.len());
    }

    #[test]
    fn no_forbidden_call_is_allowed_and_every_probe_is_forbidden() {
        for (name, number) in NOTABLE {
            assert!(
                ALLOWED.iter().all(|(_, allowed, _)| allowed != number),
                "{name} is both allowed and notable"
            );
        }
        for probe in [
            Probe::Open,
            Probe::Socket,
            Probe::Connect,
            Probe::Execve,
            Probe::Ptrace,
            Probe::ProcessVmReadv,
        ] {
            let number = NOTABLE.iter().find(|(name, _)| *name == probe.syscall()).unwrap().1;
            assert_eq!(syscall_name(i32::try_from(number).unwrap()), Some(probe.syscall()));
        }
        assert_eq!(syscall_name(i32::try_from(libc::SYS_write).unwrap()), Some("write"));
        assert_eq!(syscall_name(-1), None);
    }

    #[test]
    fn only_raise_and_mappings_carry_conditions() {
        let rules = rules(4242).unwrap();
        assert_eq!(rules.len(), ALLOWED.len(), "one entry per call");
        let conditioned: Vec<_> = ALLOWED
            .iter()
            .filter(|(_, _, allow)| *allow != Allow::Any)
            .map(|(n, _, _)| *n)
            .collect();
        assert_eq!(conditioned, ["mmap", "mprotect", "tgkill", "fcntl"]);
        assert!(rules[&libc::SYS_tgkill].len() == 1 && rules[&libc::SYS_read].is_empty());
    }
}
