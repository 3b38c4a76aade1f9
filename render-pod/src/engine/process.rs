//! One worker process seen from the supervisor: spawn, hand it a job, wait, kill.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::byte_budget::ByteBudget;
use crate::ops::payload::decode_sharing;
use crate::ops::{DocHash, OpError, OpOutput};

use super::confine::{self, Confinement};
use super::procfs;
use super::protocol::{self, FatalCause, FatalReport, ProtocolError, WorkerMessage};

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The executable (this binary; in tests the built `render-pod`).
    pub exe: PathBuf,
    /// Arguments that make it a worker (`worker --max-pixels ...`).
    pub args: Vec<OsString>,
    /// How long PDFium may take to bind before the start counts as failed.
    pub ready_timeout: Duration,
    /// Niceness, memory ceiling and OOM score the worker runs with.
    pub confinement: Confinement,
}

/// A worker that failed to start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The process could not be created.
    #[error("cannot start {exe}: {source}")]
    Exec { exe: PathBuf, source: std::io::Error },
    /// It started but never said it was ready.
    #[error("worker did not become ready: {0}")]
    NotReady(String),
}

/// Pipe capacity asked for: a whole page image or a typical upload fits, so a job crosses in
/// one write and one wake-up instead of one per 64 KiB (Linux's default).
const PIPE_BYTES: libc::c_int = 1 << 20;

/// Grows a pipe to [`PIPE_BYTES`]. Best effort: the kernel may cap it (`pipe-max-size`), and a
/// smaller pipe only costs more wake-ups.
fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_SETPIPE_SZ on a pipe descriptor this process owns; no memory is passed.
    let rc = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES) };
    if rc < 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "pipe stays at its default size");
    }
}

/// What a worker answered to a job.
#[derive(Debug)]
pub enum Reply {
    /// The job's result.
    Done(Result<OpOutput, OpError>),
    /// Its last word: it is dying of a signal, for this reason.
    Dying(FatalReport),
    /// The answer did not fit in the answer budget and was thrown away unread.
    Refused(AnswerRefused),
}

/// An answer the answer budget had no room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerRefused {
    /// The answer frame's size.
    pub bytes: u64,
    /// The whole budget: an answer larger than this can never be sent.
    pub budget: u64,
}

/// Frames up to this size are read even when the answer budget is full.
const UNBUDGETED_FRAME: usize = 4 << 10;

/// Why a worker died before it was ready: a ceiling too small to start under says so.
fn starting_death(report: FatalReport, confinement: Confinement) -> String {
    match (report.cause, confinement.memory_ceiling) {
        (FatalCause::OutOfMemory, Some(ceiling)) => format!(
            "it ran out of memory while starting: its ceiling of {} MiB (--memory-per-slot) is too \
             small for PDFium",
            ceiling >> 20
        ),
        _ => format!("it died while starting: {report:?}"),
    }
}

/// A live worker process with its pipes.
pub struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    started: Instant,
    /// The document the worker kept from its last job.
    holds: Option<DocHash>,
    /// Its resident memory, checked after every job.
    resident: Option<procfs::Resident>,
}

impl WorkerProcess {
    /// Starts a worker and waits for its ready frame.
    pub async fn spawn(command: &WorkerCommand) -> Result<Self, SpawnError> {
        let mut cmd = Command::new(&command.exe);
        // An empty environment: nothing of the supervisor's (credentials a pod was given as
        // variables, service addresses) is there for a compromised worker to read; its command
        // line carries all it needs.
        cmd.args(&command.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // Niced, so the HTTP front (health checks, admission, rejections) gets the CPU at once
        // when it wakes up, while workers still use every idle cycle; see `confine` for the rest.
        let confinement = command.confinement;
        // SAFETY: apply_in_child makes only async-signal-safe system calls on the child itself.
        unsafe {
            cmd.pre_exec(move || confinement.apply_in_child());
        }
        let exec_err = |source| SpawnError::Exec { exe: command.exe.clone(), source };
        let mut child = cmd.spawn().map_err(exec_err)?;
        let (Some(stdin), Some(stdout), Some(pid)) =
            (child.stdin.take(), child.stdout.take(), child.id())
        else {
            return Err(SpawnError::NotReady("child has no pipes".into()));
        };
        confine::check_worker_score(pid);
        widen_pipe(&stdin);
        widen_pipe(&stdout);
        let mut worker = Self {
            child,
            stdin,
            stdout: BufReader::with_capacity(1 << 16, stdout),
            pid,
            started: Instant::now(),
            holds: None,
            resident: procfs::Resident::open(pid),
        };
        let ready = tokio::time::timeout(
            command.ready_timeout,
            protocol::read_frame_async(&mut worker.stdout),
        )
        .await;
        let not_ready = match ready {
            Ok(Ok(frame)) => match protocol::decode::<WorkerMessage>(&frame) {
                Ok(WorkerMessage::Ready) => return Ok(worker),
                Ok(WorkerMessage::Fatal(report)) => starting_death(report, confinement),
                Ok(other) => format!("unexpected first message {other:?}"),
                Err(e) => e.to_string(),
            },
            Ok(Err(_)) => match worker.kill().await {
                Some(status) => procfs::describe_exit(status),
                None => "pipe closed".into(),
            },
            Err(_) => format!("no ready frame within {:?}", command.ready_timeout),
        };
        worker.kill().await;
        Err(SpawnError::NotReady(not_ready))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How long ago it started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// True when the worker kept the document with this hash from its last job.
    pub fn holds(&self, hash: &DocHash) -> bool {
        self.holds.as_ref() == Some(hash)
    }

    /// Sends one job (`doc` is `None` when the header says the worker holds it) and waits for
    /// the answer, whose bytes are reserved in `answers` before they are read. A pipe error
    /// means the worker died without saying why.
    pub async fn run(
        &mut self,
        header: &[u8],
        doc: Option<&[u8]>,
        hash: DocHash,
        answers: &Arc<ByteBudget>,
    ) -> Result<Reply, ProtocolError> {
        protocol::write_frame_async(&mut self.stdin, header).await?;
        if let Some(doc) = doc {
            protocol::write_frame_async(&mut self.stdin, doc).await?;
        }
        self.holds = Some(hash);
        // The answer's size is known before its bytes are read: they are reserved first, or
        // read past and thrown away (the worker stays in step and usable), so unsent answers
        // never hold more of the supervisor than the budget. A small frame (every error, a
        // dying worker's last word) is read without a reservation: it must always be heard.
        let len = protocol::read_len_async(&mut self.stdout).await?;
        let bytes = u64::try_from(len).unwrap_or(u64::MAX);
        let reservation = match answers.reserve(bytes) {
            Some(reservation) => Some(reservation),
            None if len <= UNBUDGETED_FRAME => None,
            None => {
                protocol::skip_payload_async(&mut self.stdout, len).await?;
                let budget = answers.total();
                return Ok(Reply::Refused(AnswerRefused { bytes, budget }));
            }
        };
        let payload = protocol::read_payload_async(&mut self.stdout, len).await?;
        // The reservation lives with the frame's memory: an image or PDF decoded from it is a
        // slice of it, held (and counted) until hyper has written it out.
        let frame = match reservation {
            Some(reservation) => reservation.hold(payload),
            None => Bytes::from(payload),
        };
        let message = decode_sharing(&frame, |frame| protocol::decode::<WorkerMessage>(frame))?;
        drop(frame);
        match message {
            WorkerMessage::Done(result) => Ok(Reply::Done(result)),
            WorkerMessage::Fatal(report) => Ok(Reply::Dying(report)),
            WorkerMessage::Ready => {
                Err(ProtocolError::Io(std::io::Error::other("worker sent a second ready frame")))
            }
        }
    }

    /// Waits for the process to end after it said it is dying (or its pipe broke); kills it if
    /// it has not within a moment.
    pub async fn reap(&mut self) -> Option<ExitStatus> {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => self.kill().await,
        }
    }

    /// Resolves when the process ends on its own (used while the slot is idle).
    pub async fn exited(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Kills the process and reaps it; `None` if it could not be reaped.
    pub async fn kill(&mut self) -> Option<ExitStatus> {
        // An already-dead process makes start_kill fail; wait still reaps it.
        let _ = self.child.start_kill();
        self.child.wait().await.ok()
    }

    /// Closes stdin so the worker exits by itself; kills it if it has not within `grace`.
    pub async fn stop(self, grace: Duration) {
        let Self { mut child, stdin, .. } = self;
        drop(stdin);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Resident bytes right now; `None` when they cannot be read (the process is gone).
    pub fn resident_bytes(&self) -> Option<u64> {
        self.resident.as_ref().and_then(procfs::Resident::bytes)
    }
}
