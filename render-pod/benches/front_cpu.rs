//! The HTTP front's CPU per page, split by step: the service bench's render load (R-intro.pdf,
//! pages 1-40 at 150 dpi PNG, two clients per slot) against the real `render-pod serve` (release
//! build), while `perf` samples the supervisor's threads (not the workers', which are processes of
//! their own) with their call stacks. Each sample is given to the first step, in the order below,
//! that a function on its stack belongs to:
//!
//! | step | functions |
//! | --- | --- |
//! | hashing the upload | `blake3`, `sha2` |
//! | copying the upload into the document | `render_pod::http::body` |
//! | reading the socket | `tcp_recvmsg` |
//! | writing the socket | `tcp_sendmsg` |
//! | the worker pipe (document out, answer in) | `pipe_write`, `pipe_read`, `render_pod::engine` |
//! | decoding answers | `postcard` |
//! | JSON | `serde_json` |
//! | HTTP (parsing, routing, the answer's head) | `hyper`, `axum`, `http` |
//! | the async runtime and wake-ups | `tokio`, `epoll`, `futex`, `schedule` |
//! | memory (allocation, page faults) | `malloc`, `free`, `page_fault`, `mmap`, `munmap` |
//! | the rest | |
//!
//! Two loads: every page uploads the document (600 KB), as the service bench does; and every
//! page names the document by `Repr-Digest` (sent once). Prints the front's CPU per page
//! (`/proc/<pid>/task/*/schedstat`) and each step's share and time. Needs `perf` and the right
//! to trace the server (root, or `kernel.perf_event_paranoid` at most 1); says so and stops
//! otherwise. Asserts nothing.
//!
//! Run: cargo bench -p render-pod --bench front_cpu
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::raw::process_cpu;
use common::{Server, doc};
use renderpool_testkit::machine::load_average;
use sha2::{Digest, Sha256};

/// Pages of R-intro.pdf per pass, as in the service bench.
const PAGES: u32 = 40;
/// Passes over them per measured load.
const PASSES: u32 = 20;

/// The steps, in the order a sample is offered to them, with the names that claim it.
const STEPS: &[(&str, &[&str])] = &[
    ("hashing the upload", &["blake3", "sha2::"]),
    ("copying the upload into the document", &["render_pod::http::body"]),
    ("reading the socket", &["tcp_recvmsg"]),
    ("writing the socket", &["tcp_sendmsg"]),
    (
        "the worker pipe (document out, answer in)",
        &["pipe_write", "pipe_read", "render_pod::engine"],
    ),
    ("decoding answers", &["postcard"]),
    ("JSON", &["serde_json"]),
    ("HTTP (parsing, routing, the answer's head)", &["hyper::", "axum::", "http::"]),
    ("the async runtime and wake-ups", &["tokio::", "epoll", "futex", "schedule"]),
    ("memory (allocation, page faults)", &["malloc", "free", "page_fault", "mmap", "munmap"]),
];
const REST: &str = "the rest";

/// The step a sample's stack (function names, leaf first) belongs to.
fn step_of(stack: &[&str]) -> &'static str {
    STEPS
        .iter()
        .find(|(_, names)| stack.iter().any(|f| names.iter().any(|n| f.contains(n))))
        .map_or(REST, |(step, _)| step)
}

/// Samples of process `pid` per step in `perf script` output (stacks separated by blank lines;
/// the first line of each is the sample's header, its process id, the rest its frames: address,
/// function, object). perf follows the workers the supervisor starts while it records (a recycled
/// slot's new worker), and their PDFium samples are not the front's.
fn steps(script: &str, pid: u32) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for block in script.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut lines = block.lines();
        let header = lines.next().and_then(|h| h.split_whitespace().next());
        if header.and_then(|h| h.parse::<u32>().ok()) != Some(pid) {
            continue;
        }
        let frames: Vec<&str> = lines.filter_map(|line| line.split_whitespace().nth(1)).collect();
        *counts.entry(step_of(&frames)).or_insert(0) += 1;
    }
    counts
}

/// How each page's request carries the document.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Load {
    Upload,
    Digest,
}

/// Renders pages 1-PAGES `PASSES` times with two clients per slot.
async fn load(server: &Arc<Server>, manual: &Arc<Vec<u8>>, slots: usize, how: Load) {
    let digest = format!("sha-256=:{}:", STANDARD.encode(Sha256::digest(manual.as_slice())));
    if how == Load::Digest {
        let response = server
            .client
            .post(server.url("/v1/info"))
            .header("repr-digest", &digest)
            .body(manual.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let pages: Vec<u32> = (0..PASSES).flat_map(|_| 1..=PAGES).collect();
    let queue = Arc::new(Mutex::new(pages));
    let clients: Vec<_> = (0..2 * slots)
        .map(|_| {
            let (server, manual, queue, digest) =
                (server.clone(), manual.clone(), queue.clone(), digest.clone());
            tokio::spawn(async move {
                loop {
                    let Some(page) = queue.lock().unwrap().pop() else { return };
                    let url = server.url(&format!("/v1/render?page={page}&dpi=150"));
                    let request = server.client.post(url).header("content-type", "application/pdf");
                    let request = match how {
                        Load::Upload => request.body(manual.to_vec()),
                        Load::Digest => request.header("repr-digest", &digest),
                    };
                    let response = request.send().await.unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
}

/// `perf record` of process `pid` until stopped.
struct Recording {
    child: std::process::Child,
    file: std::path::PathBuf,
}

impl Recording {
    fn start(pid: u32, file: std::path::PathBuf) -> Option<Self> {
        let child = Command::new("perf")
            .args(["record", "-q", "-F", "1999", "--call-graph", "dwarf,8192", "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        std::thread::sleep(Duration::from_millis(500)); // attached
        Some(Self { child, file })
    }

    /// Stops recording; the samples' stacks as `perf script` prints them.
    fn finish(mut self) -> String {
        // SAFETY: SIGINT to the perf child this process started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.child.wait().unwrap();
        let out = Command::new("perf")
            .args(["script", "-F", "pid,ip,sym", "-i"])
            .arg(&self.file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&self.file);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn main() {
    if Command::new("perf").arg("--version").output().is_err() {
        println!("front_cpu: perf is not installed (Debian: linux-perf); nothing measured");
        return;
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let manual = Arc::new(doc("pdf/R-intro.pdf"));
        let server = Arc::new(Server::start(&["--queue-depth", "8", "--job-deadline-ms", "120000"]));
        let slots = server.wait_ready().await["engine"]["slots"].as_u64().unwrap() as usize;
        println!();
        println!(
            "== the front's CPU per page by step ({slots} slots; R-intro.pdf pages 1-{PAGES} x {PASSES} at 150 dpi PNG, {} clients; load average {})",
            2 * slots,
            load_average()
        );
        load(&server, &manual, slots, Load::Upload).await; // warm the workers
        for how in [Load::Upload, Load::Digest] {
            let file = std::env::temp_dir().join(format!("front-cpu-{}.perf", std::process::id()));
            let Some(recording) = Recording::start(server.pid(), file) else {
                println!("front_cpu: perf record could not start; nothing measured");
                return;
            };
            let cpu = process_cpu(server.pid());
            let start = Instant::now();
            load(&server, &manual, slots, how).await;
            let elapsed = start.elapsed();
            let pages = PAGES * PASSES;
            let per_page = (process_cpu(server.pid()) - cpu) / pages;
            let script = recording.finish();
            let counts = steps(&script, server.pid());
            let total: usize = counts.values().sum();
            println!(
                "{how:?}: {:.1} pages/s, front CPU {:.3} ms/page (includes perf's own cost), {total} samples",
                f64::from(pages) / elapsed.as_secs_f64(),
                per_page.as_secs_f64() * 1e3
            );
            let mut rows: Vec<_> = counts.into_iter().collect();
            rows.sort_by_key(|row| std::cmp::Reverse(row.1));
            for (step, count) in rows {
                let share = count as f64 / total.max(1) as f64;
                println!(
                    "  {step:<46} {:>5.1}%  {:>7.3} ms/page",
                    share * 100.0,
                    share * per_page.as_secs_f64() * 1e3
                );
            }
        }
        println!("load average afterwards {}", load_average());
    });
}
