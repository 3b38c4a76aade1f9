//! A network namespace of the test's own, holding only a loopback device, for a host process
//! whose listeners bind every interface with no flag to say otherwise (Karpenter's metrics and
//! health). Whatever it binds is reachable from nowhere but the namespace.
//!
//! The namespace has no name (no `ip netns add`, nothing under `/run/netns`): it lives as long
//! as something holds it, here this handle's descriptor, the sockets made inside and the
//! processes started inside, so the kernel frees it when the test process ends, however it ends.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::{ClusterError, run, system_tool};

/// A network namespace with loopback up; see the module doc.
pub struct NetNs {
    /// `/proc/thread-self/ns/net` of the thread that made it, kept open.
    file: File,
}

impl NetNs {
    /// Makes a new namespace and brings its loopback device up (`ip` from the host, run inside).
    pub fn create() -> Result<NetNs, ClusterError> {
        let file = on_own_thread(|| {
            // SAFETY: unshare(2) with CLONE_NEWNET moves only this (short-lived) thread into a
            // new network namespace; no memory is touched.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            File::open("/proc/thread-self/ns/net")
        })?
        .map_err(|err| {
            ClusterError::Setup(format!("cannot make a network namespace (needs root): {err}"))
        })?;
        let netns = NetNs { file };
        let ip = system_tool("ip")?;
        let mut up = Command::new(ip);
        up.args(["link", "set", "lo", "up"]);
        netns.enter_on_exec(&mut up);
        run(&mut up)?;
        Ok(netns)
    }

    /// Makes `command` start inside the namespace (it joins it between fork and exec).
    pub fn enter_on_exec(&self, command: &mut Command) {
        let fd = self.file.as_raw_fd();
        // SAFETY: setns(2) is async-signal-safe; the descriptor stays open while `self` lives,
        // and a child inherits it across fork.
        unsafe {
            command.pre_exec(move || enter(fd));
        }
    }

    /// A listener on 127.0.0.1:`port` inside the namespace.
    pub fn listen(&self, port: u16) -> Result<TcpListener, ClusterError> {
        let fd = self.file.as_raw_fd();
        on_own_thread(move || {
            enter(fd)?;
            TcpListener::bind(("127.0.0.1", port))
        })?
        .map_err(|err| ClusterError::Setup(format!("listen on 127.0.0.1:{port} in netns: {err}")))
    }

    /// A connection to 127.0.0.1:`port` inside the namespace.
    pub fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let fd = self.file.as_raw_fd();
        on_own_thread(move || {
            enter(fd)?;
            TcpStream::connect(("127.0.0.1", port))
        })
        .map_err(|err| std::io::Error::other(err.to_string()))?
    }

    /// The namespace's inode, as `/proc/<pid>/ns/net` of a process inside shows it.
    pub fn inode(&self) -> std::io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        Ok(self.file.metadata()?.ino())
    }
}

/// Moves the calling thread into the namespace behind `fd`.
fn enter(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: plain setns(2) on a descriptor the caller keeps open.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `job` on a thread of its own, so changing namespaces never touches the caller's thread.
fn on_own_thread<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ClusterError> {
    std::thread::Builder::new()
        .name("netns".into())
        .spawn(job)?
        .join()
        .map_err(|_| ClusterError::Setup("a network-namespace thread panicked".into()))
}
