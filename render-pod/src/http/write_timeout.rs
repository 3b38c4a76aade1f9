//! A connection's write timeout: a write (or flush) that has waited longer than the timeout for
//! the client to read fails, and hyper drops the connection with everything it still held for
//! it (an answer and its reservation in the answer budget). A write that makes progress starts
//! the clock again, so a slow reader is served; one that stopped reading is cut off.
//! Vectored writes are passed through: hyper only queues a body's bytes without copying them
//! into its own buffer when the transport says it writes vectored.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner` with a write timeout.
pub struct WriteTimeout<T> {
    inner: T,
    /// `None`: writes wait as long as they take.
    timeout: Option<Duration>,
    /// Armed while a write is pending; cleared when one makes progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Counts connections cut off (`renderpod_write_timeouts`).
    cut_off: Counter,
}

impl<T> WriteTimeout<T> {
    /// `inner`, whose writes may wait at most `timeout` (if any) for the peer; each cut counts
    /// in `cut_off`.
    pub fn new(inner: T, timeout: Option<Duration>, cut_off: Counter) -> Self {
        Self { inner, timeout, stalled: None, cut_off }
    }

    /// The result of a write-side poll of the inner transport: passed on, except that a wait
    /// longer than the timeout becomes an error.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        let Some(timeout) = self.timeout else {
            return polled;
        };
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        ready!(stalled.as_mut().poll(cx));
        self.stalled = None;
        self.cut_off.inc();
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client read nothing for {} ms", timeout.as_millis()),
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_peer_that_stops_reading_is_cut_off_after_the_timeout() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let cut_off = Counter::default();
        let mut writer = WriteTimeout::new(ours, Some(Duration::from_millis(100)), cut_off.clone());
        // Room in the pipe: writes go through at once.
        writer.write_all(&[1; 1024]).await.unwrap();
        assert_eq!(cut_off.get(), 0);
        // Full, and nobody reads: the next write fails once the timeout has passed.
        let error = writer.write_all(&[2; 10]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(cut_off.get(), 1);
        // What was written arrived.
        let mut got = vec![0; 1024];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, vec![1; 1024]);
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_served_past_the_timeout() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let cut_off = Counter::default();
        let mut writer = WriteTimeout::new(ours, Some(Duration::from_secs(2)), cut_off.clone());
        // 16 reads 250 ms apart: 4 s in all, twice the timeout, but no write waits near it,
        // since each read lets a waiting write make progress and starts the clock again.
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut chunk = [0; 64];
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                match theirs.read(&mut chunk).await.unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&chunk[..n]),
                }
            }
        });
        writer.write_all(&[7; 64 * 16]).await.unwrap();
        writer.shutdown().await.unwrap();
        assert_eq!(reader.await.unwrap(), vec![7; 64 * 16]);
        assert_eq!(cut_off.get(), 0);
    }

    #[tokio::test]
    async fn without_a_timeout_nothing_is_armed() {
        let (ours, _theirs) = tokio::io::duplex(16);
        let mut writer = WriteTimeout::new(ours, None, Counter::default());
        writer.write_all(&[0; 16]).await.unwrap();
        // Full: the write waits (as long as the peer takes), and no timer was armed for it.
        let waited =
            tokio::time::timeout(Duration::from_millis(50), writer.write_all(&[0; 1])).await;
        assert!(waited.is_err());
        assert!(writer.stalled.is_none());
    }
}
