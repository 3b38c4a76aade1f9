//! A worker's last word: on a fatal signal it tells its supervisor why it is dying, then dies.
//!
//! From the exit status alone a SIGSEGV from a PDFium bug looks like `kill -SEGV` from outside,
//! and an allocation refused by the worker's memory ceiling (PDFium then traps, Rust's allocator
//! aborts) looks like any other crash. The handler knows more: `siginfo` says whether the kernel
//! raised the signal (a fault, a trap) or a process sent it, and `errno` still holds ENOMEM right
//! after malloc or mmap was refused. It writes one [`FatalReport`] frame on the protocol pipe and
//! re-raises the signal with its default action, so the supervisor still reaps a signalled exit.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::protocol::{self, FatalCause, FatalReport, WorkerMessage};

/// The signals a worker can die of that carry a cause worth reporting (SIGKILL cannot be caught:
/// it always comes from outside, the kernel's OOM killer included). SIGSYS is the sandbox's.
const FATAL_SIGNALS: [libc::c_int; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGFPE,
    libc::SIGSYS,
];

/// `si_code` of a SIGSYS raised by a seccomp filter's `SECCOMP_RET_TRAP`.
const SYS_SECCOMP: i32 = 1;

/// The start of a `siginfo_t` for SIGSYS (`_sigsys` in the kernel's union, which starts at
/// offset 16 on every 64-bit Linux): the refused call's number. The libc crate has no accessor.
#[repr(C)]
struct SigsysInfo {
    _signo: libc::c_int,
    _errno: libc::c_int,
    _code: libc::c_int,
    _pad: libc::c_int,
    _call_addr: *mut libc::c_void,
    syscall: libc::c_int,
    _arch: libc::c_uint,
}

const _: () = assert!(
    std::mem::size_of::<SigsysInfo>() <= std::mem::size_of::<libc::siginfo_t>()
        && std::mem::offset_of!(SigsysInfo, syscall) == 24
);

/// The handler's own stack: a stack overflow in PDFium must still be reported.
const ALT_STACK_BYTES: usize = 64 << 10;

/// Where the report goes: a duplicate of the protocol pipe's descriptor that nothing owns, set
/// once by [`install`]. PDFium's allocator throws a C++ exception when memory is refused, and
/// its unwinding runs Rust's drops (closing the protocol `File`) before the runtime aborts.
static REPORT_FD: AtomicI32 = AtomicI32::new(-1);

/// Set by the first report: a crash while unwinding from another reports nothing more.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// How a fatal signal was delivered, as the handler read it from `siginfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The signal.
    pub signal: i32,
    /// `si_code`.
    pub code: i32,
    /// The sending process (this one for a kernel-raised signal).
    pub sender: i32,
    /// For a seccomp SIGSYS, the refused call's number.
    pub syscall: i32,
}

/// The cause of `delivery` in process `own_pid`, with `errno` as the interrupted code left it.
/// Codes <= 0 (SI_USER, SI_TKILL, SI_QUEUE) mean a process sent it; abort() sends SIGABRT to
/// itself, which is the worker's own doing; a SIGSYS with code SYS_SECCOMP is the sandbox's.
pub fn cause(delivery: Delivery, own_pid: i32, errno: i32) -> FatalCause {
    let Delivery { signal, code, sender, syscall } = delivery;
    if code <= 0 && sender != own_pid {
        FatalCause::External { sender }
    } else if signal == libc::SIGSYS && code == SYS_SECCOMP {
        FatalCause::Sandbox { syscall }
    } else if errno == libc::ENOMEM {
        FatalCause::OutOfMemory
    } else {
        FatalCause::Fault
    }
}

/// Installs the handler for every fatal signal, on its own stack; reports go to `protocol_fd`
/// (through a duplicate that stays open for the life of the process). Call once at worker
/// start, before any other thread exists.
pub fn install(protocol_fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: dup of a descriptor this process owns; the copy is deliberately never closed.
    let report_fd = unsafe { libc::fcntl(protocol_fd, libc::F_DUPFD_CLOEXEC, 0) };
    if report_fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    REPORT_FD.store(report_fd, Ordering::Relaxed);
    // Lives as long as the process; one per worker.
    let stack: &'static mut [u8] = Box::leak(vec![0u8; ALT_STACK_BYTES].into_boxed_slice());
    // SAFETY: the alternate stack is valid for the process's lifetime; sigaction is given a
    // fully initialised struct whose handler has the SA_SIGINFO signature.
    unsafe {
        let alt =
            libc::stack_t { ss_sp: stack.as_mut_ptr().cast(), ss_flags: 0, ss_size: stack.len() };
        if libc::sigaltstack(&alt, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_fatal_signal as *const () as usize;
        // Once: the re-raised signal (or the faulting instruction run again) takes the default
        // action and ends the process.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND;
        libc::sigfillset(&mut action.sa_mask);
        for signal in FATAL_SIGNALS {
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Clears `errno` before a job, so a refusal the previous job recovered from is not taken for
/// this job's.
pub fn clear_errno() {
    // SAFETY: errno is this thread's own variable.
    unsafe { *libc::__errno_location() = 0 };
}

/// The handler: only async-signal-safe work (no allocation, no locks): encode into a stack
/// buffer, write(2), raise(3).
extern "C" fn on_fatal_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: errno and getpid are this process's own; the kernel passes a valid siginfo, and
    // si_pid is read only for codes <= 0, where the kernel filled in the sender.
    let (errno, own_pid) = unsafe { (*libc::__errno_location(), libc::getpid()) };
    let (code, sender) = match unsafe { info.as_ref() } {
        Some(info) if info.si_code <= 0 => (info.si_code, unsafe { info.si_pid() }),
        Some(info) => (info.si_code, own_pid),
        None => (1, own_pid),
    };
    // SAFETY: for a seccomp SIGSYS the kernel filled in the `_sigsys` member read here.
    let syscall = match unsafe { info.cast::<SigsysInfo>().as_ref() } {
        Some(sys) if signal == libc::SIGSYS && code == SYS_SECCOMP => sys.syscall,
        _ => -1,
    };
    let delivery = Delivery { signal, code, sender, syscall };
    let report = FatalReport { signal, cause: cause(delivery, own_pid, errno) };
    let mut buffer = [0u8; 64];
    if !REPORTED.swap(true, Ordering::Relaxed)
        && let Ok(frame) = protocol::frame_into(&WorkerMessage::Fatal(report), &mut buffer)
    {
        write_all(REPORT_FD.load(Ordering::Relaxed), frame);
    }
    // SAFETY: SA_RESETHAND restored the default action; the signal is blocked while this runs,
    // so it is delivered (and ends the process) as the handler returns.
    unsafe { libc::raise(signal) };
}

fn write_all(fd: libc::c_int, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: write(2) from a live buffer to a descriptor this process owns.
        let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        match usize::try_from(written) {
            Ok(n) if n > 0 => bytes = &bytes[n.min(bytes.len())..],
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn delivered(signal: i32, code: i32, sender: i32) -> Delivery {
        Delivery { signal, code, sender, syscall: -1 }
    }

    #[test]
    fn sent_signals_are_external_unless_sent_to_itself() {
        let abrt = |code, sender| delivered(libc::SIGABRT, code, sender);
        // kill(2) from pid 77 to worker 10.
        assert_eq!(cause(abrt(libc::SI_USER, 77), 10, 0), FatalCause::External { sender: 77 });
        assert_eq!(
            cause(abrt(libc::SI_TKILL, 77), 10, libc::ENOMEM),
            FatalCause::External { sender: 77 }
        );
        // abort() after a refused allocation: SIGABRT to itself with errno ENOMEM.
        assert_eq!(cause(abrt(libc::SI_TKILL, 10), 10, libc::ENOMEM), FatalCause::OutOfMemory);
        assert_eq!(cause(abrt(libc::SI_TKILL, 10), 10, 0), FatalCause::Fault);
        // `kill -SYS` from outside is not the sandbox.
        let sent = delivered(libc::SIGSYS, libc::SI_USER, 77);
        assert_eq!(cause(sent, 10, 0), FatalCause::External { sender: 77 });
    }

    #[test]
    fn kernel_raised_signals_are_the_workers_own() {
        const SEGV_MAPERR: i32 = 1;
        const SI_KERNEL: i32 = 0x80;
        assert_eq!(cause(delivered(libc::SIGSEGV, SEGV_MAPERR, 10), 10, 0), FatalCause::Fault);
        assert_eq!(
            cause(delivered(libc::SIGSEGV, SI_KERNEL, 10), 10, libc::ENOMEM),
            FatalCause::OutOfMemory
        );
        // SIGSEGV's code 1 is SEGV_MAPERR, SIGSYS's is SYS_SECCOMP.
        let trapped = Delivery { signal: libc::SIGSYS, code: SYS_SECCOMP, sender: 10, syscall: 59 };
        assert_eq!(cause(trapped, 10, libc::ENOMEM), FatalCause::Sandbox { syscall: 59 });
    }

    #[test]
    fn a_report_fits_the_handlers_buffer_and_decodes() {
        let report = FatalReport { signal: 6, cause: FatalCause::External { sender: i32::MAX } };
        let mut buffer = [0u8; 64];
        let frame = protocol::frame_into(&WorkerMessage::Fatal(report), &mut buffer).unwrap();
        let back = protocol::read_frame(&mut &frame[..]).unwrap().unwrap();
        match protocol::decode::<WorkerMessage>(&back).unwrap() {
            WorkerMessage::Fatal(decoded) => assert_eq!(decoded, report),
            other => panic!("{other:?}"),
        }
    }
}
