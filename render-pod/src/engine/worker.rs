//! The worker process: one PDFium, jobs in over stdin, answers out over the original stdout.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::ops::{DocHash, Document, Executor, OpLimits};
use crate::pdfium_lib::{self, PdfiumLoadError};

use super::fatal;
use super::protocol::{self, JobHeader, ProtocolError, WorkerMessage};

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
}

/// Runs jobs until the supervisor closes stdin.
pub fn run(limits: OpLimits) -> Result<(), WorkerError> {
    let output = protocol_output().map_err(WorkerError::Setup)?;
    fatal::install(output.as_raw_fd()).map_err(WorkerError::Setup)?;
    let mut output = BufWriter::new(output);
    let pdfium = pdfium_lib::bind()?;
    let mut executor = Executor::new(pdfium, limits);
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
