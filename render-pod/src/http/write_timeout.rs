//! A connection's write timeout and write rate floor: a write (or flush) that has waited longer
//! than the timeout for the client to read fails, and hyper drops the connection with
//! everything it still held for it (an answer and its reservation in the answer budget). A write
//! that makes progress starts the clock again, so a slow reader is served; one that stopped
//! reading is cut off. A reader that keeps reading a trickle would make progress forever, so
//! over a spell of writes that each had to wait, the client must also average the rate floor,
//! after a grace of one write timeout; a write that goes through whole at once ends the spell.
//! Vectored writes are passed through: hyper only queues a body's bytes without copying them
//! into its own buffer when the transport says it writes vectored.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A timeout longer than this is as good as none, and keeps the deadlines' arithmetic in range.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `inner` with a write timeout and a write rate floor.
pub struct WriteTimeout<T> {
    inner: T,
    /// `None`: writes wait as long as they take (and no rate is asked for).
    timeout: Option<Duration>,
    /// Bytes per second a spell of waiting writes must average after its first `timeout`.
    min_rate: Option<u64>,
    /// The spell of writes that had to wait, while it lasts.
    spell: Option<Spell>,
    /// Armed while a write is pending, with what its firing would mean; cleared when the write
    /// makes progress.
    stalled: Option<(Pin<Box<Sleep>>, Cut)>,
    /// Counts connections cut off for a write that waited past the timeout
    /// (`renderpod_write_timeouts`).
    timed_out: Counter,
    /// Counts connections cut off for reading below the rate floor
    /// (`renderpod_write_too_slow`).
    too_slow: Counter,
}

/// Why a waiting write is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// It waited the whole timeout.
    Timeout,
    /// The spell's average fell below the rate floor.
    TooSlow,
}

/// Writes that each had to wait for the client: since when, and the bytes they got through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spell {
    began: Instant,
    bytes: u64,
}

impl Spell {
    /// When a write waiting since `waiting_since` is given up, and why: a timeout after it
    /// began to wait, or the moment the spell's bytes fall below `min_rate` times its length
    /// (never within its first `timeout`, the grace), whichever comes first (a tie is a timeout:
    /// nothing moved).
    fn deadline(
        &self,
        waiting_since: Instant,
        timeout: Duration,
        min_rate: Option<u64>,
    ) -> (Instant, Cut) {
        let timed_out = waiting_since + timeout;
        let Some(rate) = min_rate.filter(|r| *r > 0) else {
            return (timed_out, Cut::Timeout);
        };
        let earned =
            Duration::try_from_secs_f64(self.bytes as f64 / rate as f64).unwrap_or(Duration::MAX);
        match self.began.checked_add(timeout.max(earned)) {
            Some(too_slow) if too_slow < timed_out => (too_slow, Cut::TooSlow),
            _ => (timed_out, Cut::Timeout),
        }
    }
}

impl<T> WriteTimeout<T> {
    /// `inner`, whose writes may wait at most `timeout` (if any) for the peer, and whose spells
    /// of waiting writes must average `min_rate` (if any) after the first `timeout`; each cut
    /// counts in `timed_out` or `too_slow`.
    pub fn new(
        inner: T,
        timeout: Option<Duration>,
        min_rate: Option<u64>,
        timed_out: Counter,
        too_slow: Counter,
    ) -> Self {
        let timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        Self { inner, timeout, min_rate, spell: None, stalled: None, timed_out, too_slow }
    }

    /// The result of a write of `requested` bytes: a write that had to wait, or got only part
    /// through, carries the spell on with its bytes; one that went through whole at once ends
    /// it (the client keeps up).
    fn watch_write(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
        requested: usize,
    ) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(written)) = polled {
            let waited = self.stalled.take().is_some();
            match &mut self.spell {
                Some(spell) if waited || written < requested => {
                    spell.bytes = spell.bytes.saturating_add(written as u64);
                }
                _ => self.spell = None,
            }
            return polled;
        }
        self.watch(cx, polled)
    }

    /// The result of a write-side poll of the inner transport: passed on, except that a wait
    /// past its deadline becomes an error.
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
        let now = Instant::now();
        let spell = *self.spell.get_or_insert(Spell { began: now, bytes: 0 });
        let min_rate = self.min_rate;
        let (sleep, cut) = self.stalled.get_or_insert_with(|| {
            let (at, cut) = spell.deadline(now, timeout, min_rate);
            (Box::pin(tokio::time::sleep_until(at.into())), cut)
        });
        ready!(sleep.as_mut().poll(cx));
        let cut = *cut;
        self.stalled = None;
        self.spell = None;
        let message = match cut {
            Cut::Timeout => {
                self.timed_out.inc();
                format!("the client read nothing for {} ms", timeout.as_millis())
            }
            Cut::TooSlow => {
                self.too_slow.inc();
                format!(
                    "the client read {} bytes in {:.1} s of held-back writes, below the floor \
                     of {} bytes/s",
                    spell.bytes,
                    spell.began.elapsed().as_secs_f64(),
                    min_rate.unwrap_or_default()
                )
            }
        };
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, message)))
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
        this.watch_write(cx, polled, buf.len())
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch_write(cx, polled, bufs.iter().map(|b| b.len()).sum())
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    fn writer(
        pipe: DuplexStream,
        timeout: Option<Duration>,
        min_rate: Option<u64>,
    ) -> (WriteTimeout<DuplexStream>, Counter, Counter) {
        let (timed_out, too_slow) = (Counter::default(), Counter::default());
        (
            WriteTimeout::new(pipe, timeout, min_rate, timed_out.clone(), too_slow.clone()),
            timed_out,
            too_slow,
        )
    }

    /// Reads up to `chunk` bytes every `every` until the end; what was read.
    fn paced_reader(
        mut pipe: DuplexStream,
        chunk: usize,
        every: Duration,
    ) -> tokio::task::JoinHandle<Vec<u8>> {
        tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buffer = vec![0; chunk];
            loop {
                tokio::time::sleep(every).await;
                match pipe.read(&mut buffer).await {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buffer[..n]),
                }
            }
        })
    }

    #[test]
    fn a_spell_is_given_up_at_the_earlier_of_the_timeout_and_the_rate_floor() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let spell = |bytes| Spell { began: t0, bytes };
        // Nothing moved yet: the grace and the timeout end together, and it is a timeout.
        assert_eq!(spell(0).deadline(t0, s(30), Some(1000)), (t0 + s(30), Cut::Timeout));
        // 40 s into a spell that moved 10 kB: its average fell below 1000 B/s at 10 s, past
        // the grace, so the next wait is cut at once.
        let waiting = t0 + s(40);
        assert_eq!(spell(10_000).deadline(waiting, s(30), Some(1000)), (t0 + s(30), Cut::TooSlow));
        // 50 kB: below the floor from 50 s on, before this wait's timeout at 70 s.
        assert_eq!(spell(50_000).deadline(waiting, s(30), Some(1000)), (t0 + s(50), Cut::TooSlow));
        // 100 kB: above the floor until 100 s, after the timeout.
        assert_eq!(
            spell(100_000).deadline(waiting, s(30), Some(1000)),
            (waiting + s(30), Cut::Timeout)
        );
        // No floor, or a floor of 0: the timeout alone.
        assert_eq!(spell(10).deadline(waiting, s(30), None), (waiting + s(30), Cut::Timeout));
        assert_eq!(spell(10).deadline(waiting, s(30), Some(0)), (waiting + s(30), Cut::Timeout));
        // Bytes past any clock: never too slow, and no overflow.
        assert_eq!(
            spell(u64::MAX).deadline(waiting, s(30), Some(1)),
            (waiting + s(30), Cut::Timeout)
        );
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_is_cut_off_after_the_timeout() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let (mut writer, timed_out, too_slow) =
            writer(ours, Some(Duration::from_millis(100)), Some(1 << 20));
        // Room in the pipe: writes go through at once.
        writer.write_all(&[1; 1024]).await.unwrap();
        assert_eq!(timed_out.get(), 0);
        // Full, and nobody reads: the next write fails once the timeout has passed, and that
        // is a timeout, not a rate.
        let error = writer.write_all(&[2; 10]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!((timed_out.get(), too_slow.get()), (1, 0));
        // What was written arrived.
        let mut got = vec![0; 1024];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(got, vec![1; 1024]);
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_served_past_the_timeout() {
        let (ours, theirs) = tokio::io::duplex(64);
        let (mut writer, timed_out, _) = writer(ours, Some(Duration::from_secs(2)), None);
        // 16 reads 250 ms apart: 4 s in all, twice the timeout, but no write waits near it,
        // since each read lets a waiting write make progress and starts the clock again.
        let reader = paced_reader(theirs, 64, Duration::from_millis(250));
        writer.write_all(&[7; 64 * 16]).await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        assert_eq!(reader.await.unwrap(), vec![7; 64 * 16]);
        assert_eq!(timed_out.get(), 0);
    }

    #[tokio::test]
    async fn a_reader_of_a_trickle_is_cut_off_for_its_rate_though_each_write_progresses() {
        // 64 bytes every 20 ms (3.2 kB/s), against a floor of 64 KiB/s: each write waits
        // 20 ms, far within the 1 s timeout, and the spell is given up after its grace.
        let (ours, theirs) = tokio::io::duplex(64);
        let (mut writer, timed_out, too_slow) =
            writer(ours, Some(Duration::from_secs(1)), Some(64 << 10));
        let reader = paced_reader(theirs, 64, Duration::from_millis(20));
        let started = Instant::now();
        let error = writer.write_all(&[3; 1 << 20]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("below the floor of 65536 bytes/s"), "{error}");
        assert!(started.elapsed() >= Duration::from_secs(1), "cut within the grace");
        assert_eq!((timed_out.get(), too_slow.get()), (0, 1));
        drop(writer);
        let got = reader.await.unwrap();
        assert!(!got.is_empty() && got.len() < 1 << 20, "{} bytes arrived", got.len());
    }

    #[tokio::test]
    async fn a_reader_above_the_floor_is_served_through_a_long_spell() {
        // 4 KiB every 10 ms (about 400 kB/s) against a floor of 16 KiB/s, for about 1 s: five
        // times the 200 ms grace.
        let (ours, theirs) = tokio::io::duplex(4096);
        let (mut writer, timed_out, too_slow) =
            writer(ours, Some(Duration::from_millis(200)), Some(16 << 10));
        let reader = paced_reader(theirs, 4096, Duration::from_millis(10));
        writer.write_all(&[5; 100 * 4096]).await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        assert_eq!(reader.await.unwrap().len(), 100 * 4096);
        assert_eq!((timed_out.get(), too_slow.get()), (0, 0));
    }

    #[tokio::test]
    async fn a_write_that_goes_through_whole_at_once_ends_the_spell() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let (mut writer, _, _) = writer(ours, Some(Duration::from_secs(5)), Some(1 << 20));
        writer.write_all(&[1; 1024]).await.unwrap();
        // Full: the next write waits, and a spell begins; a read lets it through.
        let waiting = tokio::spawn(async move {
            writer.write_all(&[2; 512]).await.unwrap();
            writer
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut got = vec![0; 1024];
        theirs.read_exact(&mut got).await.unwrap();
        let mut writer = waiting.await.unwrap();
        assert!(writer.spell.is_some_and(|s| s.bytes == 512), "{:?}", writer.spell);
        // Room for all of the next write: the client keeps up, the spell is over.
        writer.write_all(&[3; 256]).await.unwrap();
        assert_eq!(writer.spell, None);
    }

    #[tokio::test]
    async fn without_a_timeout_nothing_is_armed() {
        let (ours, _theirs) = tokio::io::duplex(16);
        let (mut writer, _, _) = writer(ours, None, Some(1 << 20));
        writer.write_all(&[0; 16]).await.unwrap();
        // Full: the write waits (as long as the peer takes), and no timer was armed for it.
        let waited =
            tokio::time::timeout(Duration::from_millis(50), writer.write_all(&[0; 1])).await;
        assert!(waited.is_err());
        assert!(writer.stalled.is_none() && writer.spell.is_none());
    }
}
