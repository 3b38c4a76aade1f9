//! The worker process: one PDFium, jobs in over stdin, answers out over the original stdout.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::ops::{DocHash, Document, Executor, OpLimits};
use crate::pdfium_lib::{self, PdfiumLoadError};

use super::fatal;
use super::protocol::{self, JobHeader, ProtocolError, WorkerMessage};
use super::sandbox::{self, Probe, SandboxError};

/// How a worker runs (its command line, written by the supervisor).
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Per-job limits.
    pub limits: OpLimits,
    /// The `libpdfium.so` to load.
    pub pdfium: PathBuf,
    /// Enter the sandbox once PDFium is loaded.
    pub sandbox: bool,
    /// A forbidden call to make at the start of every job (tests of the sandbox).
    pub probe: Option<Probe>,
}

/// Why a worker process stopped other than by its supervisor closing the pipe.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// PDFium could not be loaded.
    #[error(transparent)]
    Pdfium(#[from] PdfiumLoadError),
    /// The pipe to the supervisor broke or carried garbage.
    #[error("protocol: {0}")]
    Protocol(#[from] ProtocolError),
    /// The supervisor named a document this worker does not hold (a supervisor bug: stop
    /// rather than answer from the wrong document).
    #[error("job names a document this worker does not hold")]
    NotHeld,
    /// Moving stdout aside or installing the fatal-signal report failed.
    #[error("cannot set up the worker: {0}")]
    Setup(std::io::Error),
    /// The sandbox could not be entered.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// Runs jobs until the supervisor closes stdin.
pub fn run(options: WorkerOptions) -> Result<(), WorkerError> {
    sandbox::close_inherited();
    let output = protocol_output().map_err(WorkerError::Setup)?;
    fatal::install(output.as_raw_fd()).map_err(WorkerError::Setup)?;
    let mut output = BufWriter::new(output);
    let mut pdfium = pdfium_lib::bind_at(&options.pdfium)?;
    // Only PDFium's built-in fonts, as in the image (which has no system fonts): PDFium opens
    // system font files lazily, at a document's first missing font, which the sandbox forbids;
    // and answers then do not depend on the fonts of the host a worker runs on.
    pdfium.clear_custom_font_provider();
    sandbox::settle_time_zone();
    let mut executor = Executor::new(pdfium, options.limits);
    // After the library is mapped and initialised, before any document.
    if options.sandbox {
        sandbox::enter()?;
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    send(&mut output, &WorkerMessage::Ready)?;
    // The last document received and its hash; the supervisor skips sending it again while it
    // stays the same.
    let mut held: Option<(Vec<u8>, DocHash)> = None;
    while let Some(header) = protocol::read_frame(&mut input)? {
        let header: JobHeader = protocol::decode(&header)?;
        if !header.same_document {
            let Some(bytes) = protocol::read_frame(&mut input)? else {
                break;
            };
            held = Some((bytes, header.hash));
        }
        let Some((bytes, hash)) = held.as_ref().filter(|(_, hash)| *hash == header.hash) else {
            return Err(WorkerError::NotHeld);
        };
        let doc = Document { bytes, hash: *hash, password: header.password.as_deref() };
        if let Some(probe) = options.probe {
            probe.run();
        }
        fatal::clear_errno();
        let result = executor.execute(&doc, &header.op);
        send(&mut output, &WorkerMessage::Done(result))?;
    }
    Ok(())
}

fn send(output: &mut BufWriter<File>, message: &WorkerMessage) -> Result<(), ProtocolError> {
    protocol::write_frame(output, &protocol::encode(message)?)?;
    output.flush()?;
    Ok(())
}

/// Takes the stdout pipe for the protocol and points fd 1 at stderr, so anything a library
/// prints cannot corrupt the frame stream.
fn protocol_output() -> std::io::Result<File> {
    // SAFETY: plain fd duplication on this process's own descriptors; the new fd is owned by
    // the returned File exactly once.
    unsafe {
        let fd = libc::dup(libc::STDOUT_FILENO);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = OwnedFd::from_raw_fd(fd);
        if libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(File::from(owned))
    }
}
