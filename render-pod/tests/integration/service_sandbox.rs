//! The workers' sandbox against the real service and real PDFium: every forbidden call kills
//! its worker with reason `sandbox` (and, with the sandbox off, the same call runs and the job
//! succeeds, so the probe is real); a sandboxed worker has an empty environment, no descriptor
//! beyond its pipes even when the supervisor holds one without `O_CLOEXEC`, and its limits; and
//! the corpus gives the same bytes with the sandbox on as off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use common::{Server, doc, manifest};

/// Every `--sandbox-probe` and the call the verdict names for it.
const PROBES: [(&str, &str); 6] = [
    ("open", "openat"),
    ("socket", "socket"),
    ("connect", "connect"),
    ("execve", "execve"),
    ("ptrace", "ptrace"),
    ("process-vm-readv", "process_vm_readv"),
];

const RESTARTS: &str = "renderpod_worker_restarts_total";

#[tokio::test]
async fn each_forbidden_call_kills_its_worker_with_reason_sandbox() {
    for (probe, call) in PROBES {
        let server = Server::start(&["--slots", "1", "--sandbox-probe", probe]);
        server.wait_ready().await;
        let response = server.post("/v1/info", doc("pdf/trivial.pdf")).await;
        assert_eq!(response.status(), 502, "{probe}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "worker_crashed", "{probe}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("SIGSYS") && message.contains(&format!("system call {call} (")),
            "{probe}: {message}"
        );
        server.wait_metric(RESTARTS, &["reason=\"sandbox\""], 1.0).await;
        assert_eq!(server.metric(RESTARTS, &["reason=\"crash\""]).await, 0.0, "{probe}");
        assert_eq!(server.metric(RESTARTS, &["reason=\"killed\""]).await, 0.0, "{probe}");
        assert_eq!(
            server.metric("renderpod_jobs_total", &["op=\"info\"", "outcome=\"crashed\""]).await,
            1.0,
            "counted like a crash"
        );
        // Like any document that kills a worker, it is quarantined.
        let again = server.post("/v1/info", doc("pdf/trivial.pdf")).await;
        assert_eq!(again.status(), 422, "{probe}");
    }
}

#[tokio::test]
async fn without_the_sandbox_the_same_calls_run_and_the_job_succeeds() {
    for (probe, _) in PROBES {
        // execve would replace the worker with /bin/true: that it runs is shown by the others.
        if probe == "execve" {
            continue;
        }
        let server =
            Server::start(&["--slots", "1", "--sandbox", "false", "--sandbox-probe", probe]);
        server.wait_ready().await;
        let response = server.post("/v1/info", doc("pdf/trivial.pdf")).await;
        assert_eq!(response.status(), 200, "{probe}");
        assert_eq!(server.metric(RESTARTS, &["reason=\"sandbox\""]).await, 0.0, "{probe}");
    }
}

/// `/proc/<pid>/<file>` as text.
fn proc_file(pid: u64, file: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap()
}

/// The descriptors a process holds.
fn descriptors(pid: u64) -> Vec<i32> {
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    fds.sort();
    fds
}

/// The `/proc/<pid>/status` line that starts with `key`, its value.
fn status_field(pid: u64, key: &str) -> String {
    let status = proc_file(pid, "status");
    let line = status.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{key}"));
    line[key.len()..].trim().to_string()
}

/// A limit's soft and hard values from `/proc/<pid>/limits`.
fn limit(pid: u64, name: &str) -> (String, String) {
    let limits = proc_file(pid, "limits");
    let line = limits.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}"));
    let mut values = line[name.len()..].split_whitespace();
    (values.next().unwrap().to_string(), values.next().unwrap().to_string())
}

/// A server whose process holds descriptor 9 without `O_CLOEXEC`, as a careless parent may
/// leave one: its workers would inherit it.
fn server_with_a_leaked_descriptor(flags: &[&str]) -> Server {
    let leaked = std::fs::File::open("/dev/null").unwrap();
    let mut cmd = Command::new(common::binary());
    cmd.args(common::serve_args(flags));
    let fd = leaked.as_raw_fd();
    // SAFETY: dup2 in the child before exec; the target number is free or replaced.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 9) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = Server::spawn(cmd);
    drop(leaked);
    server
}

#[tokio::test]
async fn a_sandboxed_worker_has_no_environment_no_stray_descriptor_and_its_limits() {
    let server = server_with_a_leaked_descriptor(&["--slots", "1"]);
    server.wait_ready().await;
    let supervisor = u64::from(server.pid());
    assert!(descriptors(supervisor).contains(&9), "the supervisor holds the leaked descriptor");
    let worker = server.worker_pids().await[0].unwrap();
    assert_eq!(proc_file(worker, "environ"), "", "empty environment");
    // stdin, stdout (pointed at stderr), stderr, the protocol pipe and the fatal report's copy.
    assert_eq!(descriptors(worker), [0, 1, 2, 3, 4]);
    assert_eq!(status_field(worker, "Seccomp:"), "2", "a seccomp filter");
    assert_eq!(status_field(worker, "NoNewPrivs:"), "1");
    assert_eq!(limit(worker, "Max open files"), ("8".into(), "8".into()));
    assert_eq!(limit(worker, "Max file size"), ("0".into(), "0".into()));
    assert_eq!(limit(worker, "Max core file size"), ("0".into(), "0".into()));
    // And it still works.
    assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);

    let off = server_with_a_leaked_descriptor(&["--slots", "1", "--sandbox", "false"]);
    off.wait_ready().await;
    let worker = off.worker_pids().await[0].unwrap();
    assert_eq!(status_field(worker, "Seccomp:"), "0", "--sandbox false has no filter");
    // Closing what was inherited and clearing the environment cost nothing: always done.
    assert_eq!(descriptors(worker), [0, 1, 2, 3, 4]);
    assert_eq!(proc_file(worker, "environ"), "");
}

/// Every route's answer for `name`, as bytes.
async fn answers(server: &Server, name: &str) -> Vec<(String, u16, Vec<u8>)> {
    let routes = [
        "/v1/info",
        "/v1/extract?pages=1",
        "/v1/render?page=1&dpi=50",
        "/v1/render?page=1&width=300&format=jpeg",
        "/v1/render?page=1&width=300&format=webp",
        "/v1/thumbnails?pages=1&width=120",
        "/v1/watermark?text=DRAFT",
    ];
    let mut out = Vec::new();
    for route in routes {
        let response = server.post(route, doc(name)).await;
        let status = response.status().as_u16();
        out.push((route.to_string(), status, response.bytes().await.unwrap().to_vec()));
    }
    // A saved PDF carries a fresh file identifier, so the watermark is compared as rendered.
    let (_, status, stamped) = out.pop().unwrap();
    let rendered = if status == 200 {
        server.post("/v1/render?page=1&dpi=50", stamped).await.bytes().await.unwrap().to_vec()
    } else {
        stamped
    };
    out.push(("/v1/watermark?text=DRAFT, rendered".to_string(), status, rendered));
    out
}

#[tokio::test]
async fn the_corpus_gives_the_same_bytes_with_the_sandbox_on_and_off() {
    let on = Server::start(&["--slots", "1"]);
    let off = Server::start(&["--slots", "1", "--sandbox", "false"]);
    on.wait_ready().await;
    off.wait_ready().await;
    let mut names: Vec<String> =
        manifest().as_object().unwrap().keys().filter(|k| k.starts_with("pdf/")).cloned().collect();
    names.sort();
    let mut ok = 0;
    for name in &names {
        let (sandboxed, open) = tokio::join!(answers(&on, name), answers(&off, name));
        for ((route, status, bytes), (_, open_status, open_bytes)) in sandboxed.iter().zip(&open) {
            assert_eq!(status, open_status, "{name} {route}");
            assert!(bytes == open_bytes, "{name} {route}: the answers differ");
            ok += usize::from(*status == 200);
        }
    }
    assert!(ok >= names.len() * 6, "{ok} answers of 200 over {} documents", names.len());
    for server in [&on, &off] {
        assert_eq!(server.metric(RESTARTS, &["reason=\"sandbox\""]).await, 0.0);
        assert_eq!(server.metric(RESTARTS, &["reason=\"crash\""]).await, 0.0);
    }
}
