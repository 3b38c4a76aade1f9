//! HTTP/1.1 spoken by hand over a TCP connection, for what a client library hides: whether the
//! answer came before the upload was sent (`Expect: 100-continue`), bodies that trickle or
//! stall, request heads that never finish, answers never read, connections the server closes.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (as far as the server sent it).
    pub body: Vec<u8>,
}

impl Answer {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON error body's code.
    pub fn code(&self) -> String {
        let v: serde_json::Value = serde_json::from_slice(&self.body).unwrap_or_default();
        v["error"]["code"].as_str().unwrap_or_default().to_string()
    }
}

/// How an upload that asked `Expect: 100-continue` went.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Whether the server said `100 Continue` (and so the body was sent).
    pub invited: bool,
    /// The final answer.
    pub answer: Answer,
    /// From the first byte written to the final answer's head.
    pub took: Duration,
}

/// `host:port` of a server base URL.
pub fn addr(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// Reads one response head (through the blank line), keeping what came after it in `buffer`.
/// `None` when the connection closed first.
pub async fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Answer> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            buffer.drain(..end + 4);
            let mut lines = head.split("\r\n");
            let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
            let headers = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            return Some(Answer { status, headers, body: Vec::new() });
        }
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Reads the body of `answer` (by its Content-Length, else to the end of the connection).
pub async fn read_body(stream: &mut TcpStream, buffer: &mut Vec<u8>, answer: &mut Answer) {
    let length: Option<usize> = answer.header("content-length").and_then(|v| v.parse().ok());
    loop {
        if length.is_some_and(|len| buffer.len() >= len) {
            break;
        }
        let mut chunk = [0u8; 65536];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    answer.body = match length {
        // What follows belongs to the next answer on the connection.
        Some(len) if len < buffer.len() => buffer.drain(..len).collect(),
        _ => std::mem::take(buffer),
    };
}

/// POSTs `body` to `path` asking `Expect: 100-continue`: the body is sent only if the server
/// invites it. `extra` header lines (each ending in `\r\n`) go into the head.
pub async fn upload_expecting_continue(addr: &str, path: &str, body: &[u8], extra: &str) -> Upload {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\nExpect: 100-continue\r\n{extra}\r\n",
        body.len()
    );
    let start = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = Vec::new();
    let first = read_head(&mut stream, &mut buffer).await.expect("no answer to the head");
    if first.status != 100 {
        let took = start.elapsed();
        let mut answer = first;
        read_body(&mut stream, &mut buffer, &mut answer).await;
        return Upload { invited: false, answer, took };
    }
    stream.write_all(body).await.unwrap();
    let mut answer = read_head(&mut stream, &mut buffer).await.expect("no answer after the body");
    let took = start.elapsed();
    read_body(&mut stream, &mut buffer, &mut answer).await;
    Upload { invited: true, answer, took }
}

/// One keep-alive connection carrying requests one after another, counting the bytes it sent.
pub struct KeepAlive {
    stream: TcpStream,
    buffer: Vec<u8>,
    /// Request bytes written so far (heads and bodies).
    pub sent: usize,
}

impl KeepAlive {
    /// Connects to `addr`.
    pub async fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Self { stream, buffer: Vec::new(), sent: 0 }
    }

    /// POSTs `body` to `path` with `extra` header lines (each ending in `\r\n`); with `expect`
    /// it asks `Expect: 100-continue` and sends the body only when invited. Returns the answer
    /// and whether the body was sent; `None` when the server closed the connection first.
    pub async fn post(
        &mut self,
        path: &str,
        extra: &str,
        body: &[u8],
        expect: bool,
    ) -> Option<(Answer, bool)> {
        let expectation = if expect { "Expect: 100-continue\r\n" } else { "" };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\n{expectation}{extra}\r\n",
            body.len()
        );
        self.stream.write_all(head.as_bytes()).await.ok()?;
        self.sent += head.len();
        let mut sent_body = false;
        if !expect || body.is_empty() {
            self.stream.write_all(body).await.ok()?;
            self.sent += body.len();
            sent_body = true;
        }
        let mut answer = read_head(&mut self.stream, &mut self.buffer).await?;
        if answer.status == 100 {
            self.stream.write_all(body).await.ok()?;
            self.sent += body.len();
            sent_body = true;
            answer = read_head(&mut self.stream, &mut self.buffer).await?;
        }
        read_body(&mut self.stream, &mut self.buffer, &mut answer).await;
        Some((answer, sent_body && !body.is_empty()))
    }

    /// Whether the server closed the connection (waits up to `within` for it).
    pub async fn closed_within(&mut self, within: Duration) -> bool {
        closed_within(&mut self.stream, within).await
    }
}

/// Sends `POST path` with `body` (and `extra` header lines) and never reads the answer; the
/// connection stays open until the stream is dropped. Its receive buffer is small (64 KiB), so
/// what is held for it is held by the server, not in this end's kernel buffer. A write the
/// server cut short (it refused before reading the body, and closed) is no error here.
pub async fn unread(addr: &str, path: &str, body: &[u8], extra: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 << 10).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).await.is_ok() {
        let _ = stream.write_all(body).await;
    }
    stream
}

/// 300 clients in waves of 10, 200 ms apart, that each send `POST path` with `body` and never
/// read the answer ([`unread`]); `sample` runs after each wave (what a test or bench measures
/// meanwhile). Their connections, open until dropped.
pub async fn unread_waves(
    addr: &str,
    path: &'static str,
    body: &Arc<Vec<u8>>,
    mut sample: impl AsyncFnMut(),
) -> Vec<TcpStream> {
    let mut clients = Vec::new();
    for _ in 0..30 {
        let wave: Vec<_> = (0..10)
            .map(|_| {
                let (addr, body) = (addr.to_string(), body.clone());
                tokio::spawn(async move { unread(&addr, path, &body, "").await })
            })
            .collect();
        for client in wave {
            clients.push(client.await.unwrap());
        }
        sample().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    clients
}

/// Reads the answer on `stream` (a request already sent) at `rate` bytes per second, in pieces
/// every 20 ms paced on the clock, until it is all in or the server ends it: the answer as far
/// as it came, and how long from its head to the end.
pub async fn read_paced(stream: &mut TcpStream, rate: u64) -> (Answer, Duration) {
    let mut buffer = Vec::new();
    let mut answer = read_head(stream, &mut buffer).await.expect("no answer");
    let length: Option<usize> = answer.header("content-length").and_then(|v| v.parse().ok());
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut chunk = vec![0u8; 1 << 20];
    while length.is_none_or(|len| buffer.len() < len) {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate as f64) as usize;
        let take = due.saturating_sub(buffer.len()).min(chunk.len());
        if take == 0 {
            continue;
        }
        match stream.read(&mut chunk[..take]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
    answer.body = buffer;
    (answer, start.elapsed())
}

/// Whether the server closes `stream` within `within` (reads nothing but the end).
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut chunk = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// CPU time so far of every thread of process `pid` (`/proc/<pid>/task/*/schedstat`).
pub fn process_cpu(pid: u32) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(stat) = std::fs::read_to_string(path) {
            total += stat.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    Duration::from_nanos(total)
}

/// The server process's peak resident memory (`VmHWM`) in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// `GET path` (`/healthz`, `/readyz`) on a fresh connection, as a kubelet probes: the time from
/// connecting to the whole answer, which must be a 200.
pub fn probe(addr: &str, path: &str) -> Duration {
    use std::io::{Read, Write};
    let start = Instant::now();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let elapsed = start.elapsed();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{path} answered {:?}",
        String::from_utf8_lossy(&answer)
    );
    elapsed
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// `d` in milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// [`probe`] from an OS thread of its own (as a kubelet probes from outside the pod), with a
/// pause of `every` between probes, until stopped.
pub struct Prober {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<Vec<Duration>>,
}

impl Prober {
    /// Starts probing `path` on `addr`.
    pub fn start(addr: &str, path: &'static str, every: Duration) -> Self {
        let (addr, stop) = (addr.to_string(), Arc::new(AtomicBool::new(false)));
        let answered = Arc::new(AtomicUsize::new(0));
        let (stopped, count) = (stop.clone(), answered.clone());
        let thread = std::thread::spawn(move || {
            let mut latencies = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                latencies.push(probe(&addr, path));
                count.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(every);
            }
            latencies
        });
        Self { stop, answered, thread }
    }

    /// Probes answered 200 so far (a probe that got anything else fails the prober).
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    /// Stops probing; the latencies, sorted.
    pub fn stop(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        let mut latencies = self.thread.join().unwrap();
        latencies.sort();
        latencies
    }
}

/// Sends `body` to `path` with its `Content-Length` at `rate` bytes per second (in pieces every
/// 20 ms, paced on the clock so the average holds), or until the server stops reading, then
/// reads the answer.
pub async fn paced(addr: &str, path: &str, body: &[u8], rate: u64) -> (Answer, Duration) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let start = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut sent = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while sent < body.len() {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate as f64) as usize;
        let end = due.clamp(sent, body.len());
        if stream.write_all(&body[sent..end]).await.is_err() {
            // Answered (and closed) before the body was all sent: the answer says why.
            break;
        }
        sent = end;
    }
    let mut buffer = Vec::new();
    let mut answer = read_head(&mut stream, &mut buffer).await.expect("no answer");
    let took = start.elapsed();
    read_body(&mut stream, &mut buffer, &mut answer).await;
    (answer, took)
}

/// Clients that each upload one document after another, asking `Expect: 100-continue`, until
/// stopped: the ordinary traffic beside a slow client.
pub struct Uploaders {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Upload>>>,
}

impl Uploaders {
    /// Starts `clients` uploaders of `body` to `path` on `addr`, 20 ms apart between uploads.
    pub fn start(addr: &str, path: &'static str, body: Arc<Vec<u8>>, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..clients)
            .map(|_| {
                let (addr, body, stop) = (addr.to_string(), body.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut uploads = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let upload = upload_expecting_continue(&addr, path, &body, "").await;
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        uploads.push(upload);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    uploads
                })
            })
            .collect();
        Self { stop, tasks }
    }

    /// Stops them; every upload that ended before the stop.
    pub async fn stop(self) -> Vec<Upload> {
        self.stop.store(true, Ordering::Relaxed);
        let mut uploads = Vec::new();
        for task in self.tasks {
            uploads.extend(task.await.unwrap());
        }
        uploads
    }
}
