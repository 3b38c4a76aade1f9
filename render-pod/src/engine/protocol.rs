//! The pipe protocol between the supervisor and a worker: length-prefixed frames.
//!
//! A frame is a little-endian `u32` length and that many bytes. The supervisor sends a job as a
//! postcard-encoded [`JobHeader`] frame, then the raw document (written straight from the request
//! body without re-encoding) unless the worker already holds that document; the worker answers
//! with one postcard-encoded [`WorkerMessage`] frame; a worker dying of a signal sends a
//! [`FatalReport`] as its last (see `fatal`, which writes it from the signal handler).

use std::io::{self, Read, Write};

use bytes::BufMut;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::ops::{DocHash, Op, OpError, OpOutput};

/// Largest frame either side accepts; a bigger length prefix means a corrupt stream.
pub const MAX_FRAME: usize = 1 << 30;

/// What to do, and with which document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobHeader {
    /// True: reuse the previous job's document, no document frame follows. Consecutive pages of
    /// one document then cost no pipe copy (a 600 KB manual per page adds up).
    pub same_document: bool,
    /// The document's hash (the worker's cache key; it never hashes the bytes itself).
    pub hash: DocHash,
    /// Password for an encrypted document.
    pub password: Option<String>,
    /// The operation.
    pub op: Op,
}

/// A frame from a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// PDFium is bound; the worker takes jobs.
    Ready,
    /// The answer to the last job.
    Done(Result<OpOutput, OpError>),
    /// The worker is dying of a signal, and says why (its last frame).
    Fatal(FatalReport),
}

/// Why a worker is dying, as it saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FatalCause {
    /// An allocation had just been refused: the worker hit its memory ceiling.
    OutOfMemory,
    /// The worker faulted, trapped or aborted by itself (PDFium crashed on the document).
    Fault,
    /// Another process sent the signal (`kill` from outside); the document is not to blame.
    External {
        /// The sender's process id.
        sender: i32,
    },
    /// The worker made a system call its sandbox does not allow (`SIGSYS` from seccomp); the
    /// call itself did not run.
    Sandbox {
        /// The refused call's number on this architecture.
        syscall: i32,
    },
}

/// The frame a dying worker sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FatalReport {
    /// The signal it dies of.
    pub signal: i32,
    /// Who or what caused it.
    pub cause: FatalCause,
}

/// A broken or undecodable stream.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The pipe failed or closed (the peer died).
    #[error("pipe: {0}")]
    Io(#[from] io::Error),
    /// A frame did not decode.
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    /// A length prefix above [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
}

/// Encodes a message for a frame.
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, ProtocolError> {
    Ok(postcard::to_stdvec(message)?)
}

/// Decodes a frame's message.
pub fn decode<'a, T: Deserialize<'a>>(frame: &'a [u8]) -> Result<T, ProtocolError> {
    Ok(postcard::from_bytes(frame)?)
}

fn prefix(len: usize) -> Result<[u8; 4], ProtocolError> {
    if len > MAX_FRAME {
        return Err(ProtocolError::TooLarge(len));
    }
    Ok(u32::try_from(len).map_err(|_| ProtocolError::TooLarge(len))?.to_le_bytes())
}

/// Encodes `message` as a whole frame into `buffer` without allocating (for a signal handler).
pub fn frame_into<'a, T: Serialize>(
    message: &T,
    buffer: &'a mut [u8],
) -> Result<&'a [u8], ProtocolError> {
    let room = buffer.len();
    let (head, body) = buffer.split_at_mut_checked(4).ok_or(ProtocolError::TooLarge(room))?;
    let len = postcard::to_slice(message, body)?.len();
    head.copy_from_slice(&prefix(len)?);
    Ok(&buffer[..4 + len])
}

fn checked_len(prefix: [u8; 4]) -> Result<usize, ProtocolError> {
    let len = usize::try_from(u32::from_le_bytes(prefix)).unwrap_or(usize::MAX);
    if len > MAX_FRAME {
        return Err(ProtocolError::TooLarge(len));
    }
    Ok(len)
}

/// Writes one frame (blocking side: the worker).
pub fn write_frame(out: &mut impl Write, payload: &[u8]) -> Result<(), ProtocolError> {
    out.write_all(&prefix(payload.len())?)?;
    out.write_all(payload)?;
    Ok(())
}

/// Reads one frame (blocking side); `None` on a clean end of stream between frames.
pub fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, ProtocolError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let mut payload = vec![0u8; checked_len(len)?];
    input.read_exact(&mut payload)?;
    Ok(Some(payload))
}

/// Writes one frame (async side: the supervisor).
pub async fn write_frame_async(
    out: &mut (impl AsyncWrite + Unpin),
    payload: &[u8],
) -> Result<(), ProtocolError> {
    out.write_all(&prefix(payload.len())?).await?;
    out.write_all(payload).await?;
    Ok(())
}

/// Reads one frame (async side); end of stream is an error here: the worker owes an answer.
pub async fn read_frame_async(
    input: &mut (impl AsyncRead + Unpin),
) -> Result<Vec<u8>, ProtocolError> {
    let len = read_len_async(input).await?;
    read_payload_async(input, len).await
}

/// Reads the next frame's length prefix (async side), so its bytes can be budgeted before
/// they are read; the payload follows with [`read_payload_async`] or [`skip_payload_async`].
pub async fn read_len_async(input: &mut (impl AsyncRead + Unpin)) -> Result<usize, ProtocolError> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len).await?;
    checked_len(len)
}

/// Reads a frame's `len` bytes of payload into memory that is not zeroed first (a page image's
/// zeroing was a twentieth of the front's CPU per page, `benches/front_cpu.rs`).
pub async fn read_payload_async(
    input: &mut (impl AsyncRead + Unpin),
    len: usize,
) -> Result<Vec<u8>, ProtocolError> {
    let mut payload = Vec::with_capacity(len);
    while payload.len() < len {
        let remaining = len - payload.len();
        let mut rest = (&mut payload).limit(remaining);
        if input.read_buf(&mut rest).await? == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(payload)
}

/// Reads a frame's `len` bytes of payload and throws them away without holding them, so the
/// stream stays in step for the next frame.
pub async fn skip_payload_async(
    input: &mut (impl AsyncRead + Unpin),
    len: usize,
) -> Result<(), ProtocolError> {
    let want = u64::try_from(len).unwrap_or(u64::MAX);
    let skipped = tokio::io::copy(&mut input.take(want), &mut tokio::io::sink()).await?;
    if skipped < want {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        write_frame(&mut buf, b"").unwrap();
        let mut input = io::Cursor::new(buf);
        assert_eq!(read_frame(&mut input).unwrap().unwrap(), b"hello");
        assert_eq!(read_frame(&mut input).unwrap().unwrap(), b"");
        assert!(read_frame(&mut input).unwrap().is_none());
    }

    #[test]
    fn oversized_prefix_is_refused_before_allocating() {
        let mut input = io::Cursor::new(u32::MAX.to_le_bytes().to_vec());
        assert!(matches!(read_frame(&mut input), Err(ProtocolError::TooLarge(_))));
    }

    #[test]
    fn truncated_payload_is_an_error() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").unwrap();
        buf.truncate(6);
        assert!(read_frame(&mut io::Cursor::new(buf)).is_err());
    }

    #[tokio::test]
    async fn async_side_reads_what_the_blocking_side_writes() {
        let header = JobHeader {
            same_document: false,
            hash: DocHash::of(b"doc"),
            password: Some("pw".into()),
            op: Op::Info,
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &encode(&header).unwrap()).unwrap();
        let frame = read_frame_async(&mut buf.as_slice()).await.unwrap();
        let back: JobHeader = decode(&frame).unwrap();
        assert_eq!(back.password.as_deref(), Some("pw"));
        assert!(matches!(back.op, Op::Info));
        let mut empty: &[u8] = &[];
        assert!(read_frame_async(&mut empty).await.is_err());
    }

    #[tokio::test]
    async fn payloads_are_read_whole_across_short_reads_and_stop_at_their_length() {
        // A pipe hands a large answer over in pieces; the next frame's bytes stay unread.
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut buf = Vec::new();
        write_frame(&mut buf, &big).unwrap();
        write_frame(&mut buf, b"next").unwrap();
        let (mut writer, mut reader) = tokio::io::duplex(4096);
        let feeding = tokio::spawn(async move { writer.write_all(&buf).await.unwrap() });
        assert_eq!(read_frame_async(&mut reader).await.unwrap(), big);
        assert_eq!(read_frame_async(&mut reader).await.unwrap(), b"next");
        feeding.await.unwrap();
        assert_eq!(read_payload_async(&mut reader, 0).await.unwrap(), b"");
        // Cut short: an error, not a zero-filled tail.
        let mut short: &[u8] = &[1, 2, 3];
        assert!(read_payload_async(&mut short, 4).await.is_err());
    }

    #[tokio::test]
    async fn a_skipped_payload_leaves_the_stream_at_the_next_frame() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &[7u8; 100_000]).unwrap();
        write_frame(&mut buf, b"next").unwrap();
        let mut input = buf.as_slice();
        let len = read_len_async(&mut input).await.unwrap();
        assert_eq!(len, 100_000);
        skip_payload_async(&mut input, len).await.unwrap();
        assert_eq!(read_frame_async(&mut input).await.unwrap(), b"next");
        // A payload cut short is an error, as a read would be.
        let mut short: &[u8] = &[1, 2, 3];
        assert!(skip_payload_async(&mut short, 4).await.is_err());
    }
}
