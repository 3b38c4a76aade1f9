//! Office bombs against the pool: the time from a bomb to the next good conversion, through the
//! real render pod in front of one real Gotenberg. With the pod's checks on, an inflate bomb is
//! refused from its ZIP directory; with them off (limits far above it), it reaches LibreOffice
//! and holds it until the pod's deadline, after which the unoconverter's watchdog frees it. A
//! lying bomb (a directory that declares 4 MiB for 256) passes the checks and reaches
//! LibreOffice, which refuses it; an honest heavy document passes too and is cut off at the
//! deadline. Each figure is one run (they take tens of seconds); it never fails on time.
//!
//! Run: `cargo build -p render-pod && cargo bench -p renderpool-tests --bench office_bomb
//! --profile dev` after `eval "$(scripts/setup.sh --office)"`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use renderpool_operator::build::gotenberg_args;
use renderpool_operator::crd::RenderPoolSpec;
use renderpool_operator::validate::validate;
use renderpool_testkit::packages;
use renderpool_tests::gotenberg::Gotenberg;
use renderpool_tests::render_pod::{RenderPod, error_code};

/// The pod's job deadline: where it gives up on a conversion.
const DEADLINE_MS: u64 = 10_000;
/// The bombs' inflated size.
const BOMB_BYTES: u64 = 256 << 20;

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A small DOCX no request has sent before (no cache hit hides its conversion).
fn fresh_docx() -> Vec<u8> {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    packages::docx(&format!("an ordinary document, number {n}"))
}

async fn gotenberg() -> Gotenberg {
    let spec: RenderPoolSpec = serde_json::from_value(serde_json::json!({
        "jobDeadlineMs": 60_000,
        "gotenberg": { "queueSize": 4, "restartAfter": 0 }
    }))
    .unwrap();
    let plan = validate(&spec).unwrap().gotenberg.unwrap();
    Gotenberg::start(&gotenberg_args(&spec.gotenberg, &plan)).await
}

/// Sends `bad`, then an ordinary document: what `bad` got, how long it took, and how long from
/// sending `bad` until the ordinary PDF was in.
async fn bad_then_good(pod: &RenderPod, bad: &[u8]) -> (u16, String, Duration, Duration) {
    let started = Instant::now();
    let (status, code) = error_code(pod.post("/v1/convert", bad.to_vec()).await).await;
    let answered = started.elapsed();
    let good = pod.post("/v1/convert", fresh_docx()).await;
    assert_eq!(good.status(), 200, "the next document: {:?}", good.text().await);
    (status, code, answered, started.elapsed())
}

fn print(what: &str, (status, code, answered, next): &(u16, String, Duration, Duration)) {
    println!(
        "  {what:<52} {status} {code:<26} answered {:>6.2} s   next PDF after {:>6.2} s",
        answered.as_secs_f64(),
        next.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let gotenberg = gotenberg().await;
    let env = [("RENDERPOD_GOTENBERG_URL", gotenberg.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let deadline = DEADLINE_MS.to_string();
    let checked = RenderPod::start(&["--job-deadline-ms", &deadline], &env).await;
    let unchecked = RenderPod::start(
        &[
            "--job-deadline-ms",
            &deadline,
            "--office-max-compression-ratio",
            "1000000",
            "--office-max-inflated-bytes",
            "1Ti",
            "--office-max-part-bytes",
            "1Ti",
        ],
        &env,
    )
    .await;
    let bomb = packages::inflate_bomb_docx(BOMB_BYTES);
    let liar = packages::lying_bomb_docx(BOMB_BYTES, 4 << 20);
    let heavy = packages::slow_docx(300_000, 1);
    println!(
        "Office bombs, one Gotenberg, the pod's deadline {DEADLINE_MS} ms: bomb {} KB -> {} MiB, \
         heavy document {} KB",
        bomb.len() >> 10,
        BOMB_BYTES >> 20,
        heavy.len() >> 10
    );
    // Warm LibreOffice up, then the idle baseline.
    assert_eq!(checked.post("/v1/convert", fresh_docx()).await.status(), 200);
    let started = Instant::now();
    assert_eq!(checked.post("/v1/convert", fresh_docx()).await.status(), 200);
    println!(
        "  {:<52} next PDF after {:>6.2} s",
        "an ordinary document, idle",
        started.elapsed().as_secs_f64()
    );
    print("inflate bomb, checks on", &bad_then_good(&checked, &bomb).await);
    print(
        "inflate bomb, checks off (reaches LibreOffice)",
        &bad_then_good(&unchecked, &bomb).await,
    );
    print(
        "lying bomb (passes the checks, reaches LibreOffice)",
        &bad_then_good(&checked, &liar).await,
    );
    print("heavy honest document (reaches LibreOffice)", &bad_then_good(&checked, &heavy).await);
    println!("  Gotenberg's log: {} conversions", gotenberg.conversions().len());
}
