//! Durable jobs end to end: the real render-pod binary with a real NATS server (JetStream), a
//! real S3 server (the Versity S3 Gateway) and real PDFium, everything on 127.0.0.1; the same
//! jobs on Google Cloud Storage and Azure Blob Storage through their emulators (fake-gcs-server,
//! Azurite). Jobs are
//! published the way a producer that keeps its uploads in S3 publishes them (straight to the
//! stream) and through `POST /v1/jobs`; their outputs are listed over S3 and compared with what
//! was asked; webhooks are checked by a verifier written here, not by the code that signs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures::StreamExt;
use hmac::{Hmac, Mac};
use render_pod::ops::DocHash;
use renderpool_api::jobs::{JobId, JobStatus, Scheme, State};
use renderpool_testkit::{corpus, wait};
use renderpool_tests::gotenberg::Gotenberg;
use renderpool_tests::jobs::{
    Answer, Delivery, Receiver, SECRET, Silent, World, message, percentile, sync_renders, verify,
};
use renderpool_tests::render_pod::{RenderPod, error_code};
use renderpool_tests::tls::TestCa;
use renderpool_tests::versitygw::S3Server;
use sha2::Sha256;

/// Each test runs its own servers and pods; one at a time keeps two cores honest.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A document whose pages render in milliseconds.
const SMALL: &str = "pdf/libtasn1.pdf";
/// A one-page document of 515 bytes: the backlog's input.
const TRIVIAL: &str = "pdf/trivial.pdf";
/// A document of more than 100 pages: a job over all of them is long enough to be cancelled.
const LONG: &str = "pdf/R-intro.pdf";
/// A page that takes seconds at 1200 dpi (a 540 MB bitmap): a job that is surely mid-way when
/// it is interrupted.
const SLOW: &str = "pdf/gnuplot.pdf";
/// The flags that allow the slow render, with a job deadline a loaded machine cannot miss.
const ALLOW_SLOW: [&str; 6] =
    ["--max-pixels", "400000000", "--memory-per-slot", "1Gi", "--job-deadline-ms", "120000"];

fn doc(name: &str) -> Vec<u8> {
    corpus::read(name)
}

#[test]
fn the_verifier_refuses_what_it_should() {
    let body = Bytes::from_static(b"{}");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs().to_string();
    let key = STANDARD.decode(SECRET.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("msg_1.{now}.{{}}").as_bytes());
    let good = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    let delivery = |id: &str, ts: &str, sig: &str| Delivery {
        headers: [("webhook-id", id), ("webhook-timestamp", ts), ("webhook-signature", sig)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.clone(),
        status: 200,
    };
    assert_eq!(verify(&delivery("msg_1", &now, &format!("v1,bad {good}"))), Ok("msg_1".into()));
    assert!(verify(&delivery("msg_2", &now, &good)).is_err(), "another id");
    assert!(verify(&delivery("msg_1", "1000", &good)).is_err(), "an old timestamp");
    assert!(verify(&delivery("msg_1", &now, "v1,AAAA")).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_of_2000_jobs_is_worked_off_whole_while_previews_stay_first() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "backlog/doc.pdf", doc(TRIVIAL)).await;
    let pod = world.pod(&["--slots", "2"]).await;
    let preview = doc(SMALL);
    let query = "page=1&width=400";
    // Warm both workers, then the previews of an idle pod.
    sync_renders(&pod, &preview, query, 4, Duration::ZERO).await;
    let mut idle = sync_renders(&pod, &preview, query, 40, Duration::from_millis(20)).await;
    // Every job's end is announced on its subject: count them as they come.
    let mut events =
        world.client().subscribe(format!("{}.>", world.subjects.events)).await.unwrap();
    const JOBS: usize = 2000;
    let operations = serde_json::json!([{"op": "info"}, {"op": "render", "page": 1, "width": 64}]);
    let messages: Vec<serde_json::Value> = (0..JOBS)
        .map(|n| {
            message(
                &format!("backlog-{n}"),
                "s3://uploads/backlog/doc.pdf",
                operations.clone(),
                "s3://results/backlog",
            )
        })
        .collect();
    let ids: BTreeSet<JobId> =
        messages.iter().map(|m| JobId::from_key(m["idempotency_key"].as_str().unwrap())).collect();
    let started = Instant::now();
    futures::stream::iter(messages.iter())
        .for_each_concurrent(64, |m| {
            let world = &world;
            async move {
                world.publish(m).await;
            }
        })
        .await;
    let published = started.elapsed();
    // Previews while the backlog is worked off.
    let mut busy = sync_renders(&pod, &preview, query, 40, Duration::from_millis(20)).await;
    let mut ended = BTreeSet::new();
    let collect = async {
        while ended.len() < JOBS {
            let event = events.next().await.expect("the event subscription ended");
            let event: serde_json::Value = serde_json::from_slice(&event.payload).unwrap();
            assert_eq!(event["type"], "job.done", "{event}");
            ended.insert(event["data"]["id"].as_str().unwrap().to_string());
        }
    };
    tokio::time::timeout(Duration::from_secs(600), collect)
        .await
        .unwrap_or_else(|_| panic!("{} of {JOBS} jobs done after 600 s", ended.len()));
    let elapsed = started.elapsed();
    let (idle_p50, idle_p99) = (percentile(&mut idle, 50.0), percentile(&mut idle, 99.0));
    let (busy_p50, busy_p99) = (percentile(&mut busy, 50.0), percentile(&mut busy, 99.0));
    eprintln!(
        "backlog: {JOBS} jobs published in {published:?}, all done in {elapsed:?}; previews p50/p99 idle {idle_p50:?}/{idle_p99:?}, during the backlog {busy_p50:?}/{busy_p99:?} (x{:.2} at p99)",
        busy_p99.as_secs_f64() / idle_p99.as_secs_f64()
    );
    // Every job done, each output where asked, nothing missing, nothing twice, nothing else.
    let listed = world.list("results", "backlog").await;
    let mut expected = BTreeSet::new();
    for id in &ids {
        for key in ["00-info.json", "01-render/page-00001.png", "manifest.json"] {
            expected.insert(format!("backlog/{id}/{key}"));
        }
    }
    let got: BTreeSet<String> = listed.keys().cloned().collect();
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "outputs missing: {:?}; unexpected: {:?}",
        expected.difference(&got).take(5).collect::<Vec<_>>(),
        got.difference(&expected).take(5).collect::<Vec<_>>()
    );
    let ended: BTreeSet<JobId> = ended.into_iter().map(|id| JobId::try_from(id).unwrap()).collect();
    assert_eq!(ended, ids, "every job announced its end once");
    futures::stream::iter(&ids)
        .for_each_concurrent(32, |id| {
            let (world, listed) = (&world, &listed);
            async move {
                let state = world.state(id).await.unwrap();
                let progress = (state.state, state.progress.done, state.progress.total);
                assert_eq!(progress, (State::Done, 2, 2), "{id}");
                let mine: BTreeMap<String, u64> = listed
                    .iter()
                    .filter(|(k, _)| k.starts_with(&format!("backlog/{id}/")))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                let manifest = world.check_manifest("backlog", id, &mine).await;
                assert_eq!(manifest.operations[1].outputs[0].width, Some(64));
            }
        })
        .await;
    // The pod counted them (and nothing else) as done.
    assert_eq!(pod.metric("renderpod_jobs_ended_total", &["outcome=\"done\""]).await, JOBS as f64);
    assert_eq!(pod.metric("renderpod_jobs_running", &[]).await, 0.0);
    // Nothing is left in the stream or held by the consumer.
    let jsz = world.nats.jsz().await;
    let account = jsz["account_details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "$G")
        .unwrap()
        .clone();
    let stream = account["stream_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "RENDERPOOL_JOBS")
        .unwrap()
        .clone();
    let consumer = &stream["consumer_detail"][0];
    assert_eq!(
        (consumer["num_pending"].as_u64(), consumer["num_ack_pending"].as_u64()),
        (Some(0), Some(0)),
        "{consumer}"
    );
    assert_eq!(
        stream["state"]["messages"].as_u64(),
        Some(0),
        "a work queue keeps nothing acknowledged"
    );
}

/// Waits until some worker of `pod` is busy; its pid.
async fn busy_worker(pod: &RenderPod, not: Option<u64>) -> u64 {
    wait::until("a busy worker", Duration::from_secs(60), || async {
        let workers = pod.readyz().await["engine"]["workers"].clone();
        let busy = workers.as_array().unwrap().iter().find(|w| w["busy"] == true);
        busy.and_then(|w| w["pid"].as_u64()).filter(|pid| Some(*pid) != not).ok_or(workers)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_pod_is_killed_completes_on_another_with_one_webhook() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "slow.pdf", doc(SLOW)).await;
    // The first delivery of the webhook is answered 503: the retry carries the same id.
    let hooks = Receiver::start(Answer::FailFirst).await;
    let flags = [&ALLOW_SLOW[..], &["--slots", "1", "--jobs-ack-wait-ms", "2000"]].concat();
    let first = world.pod(&flags).await;
    let mut job = message(
        "killed-1",
        "s3://uploads/slow.pdf",
        serde_json::json!([
            {"op": "render", "page": 1, "dpi": 1200, "format": "jpeg"},
            {"op": "info"}
        ]),
        "s3://results/killed",
    );
    job["webhook"] = serde_json::json!({"url": hooks.url()});
    let id = JobId::from_key("killed-1");
    world.publish(&job).await;
    busy_worker(&first, None).await;
    assert_eq!(world.state(&id).await.unwrap().state, State::Running);
    // SIGKILL: no drain, no nak; the message is held until its ack wait runs out.
    drop(first);
    let second = world.pod(&flags).await;
    let done = world
        .wait_state(&id, Duration::from_secs(120), |s| {
            s.state == State::Done && s.webhook.as_ref().is_some_and(|w| w.delivered)
        })
        .await;
    assert_eq!((done.deliveries, done.strikes), (2, 1), "{done:?}");
    // It ran longer than the ack wait on the second pod and was not delivered a third time:
    // the in-progress acks held it.
    let ran = done.updated_ms - done.started_ms.unwrap();
    assert!(ran > 2_000, "the job ran {ran} ms, not past the ack wait: the test proves nothing");
    let listed = world.outputs_of("killed", &id).await;
    let keys: Vec<&str> =
        listed.keys().map(|k| k.rsplit_once(&format!("{id}/")).unwrap().1).collect();
    assert_eq!(keys, ["00-render/page-00001.jpg", "01-info.json", "manifest.json"]);
    let manifest = world.check_manifest("killed", &id, &listed).await;
    let image = world.get("results", &format!("killed/{id}/00-render/page-00001.jpg")).await;
    assert!(image.starts_with(&[0xff, 0xd8]) && image.ends_with(&[0xff, 0xd9]), "a whole JPEG");
    // The image is the page at 1200 dpi, as the job's own info output measures the page.
    let info: serde_json::Value =
        serde_json::from_slice(&world.get("results", &format!("killed/{id}/01-info.json")).await)
            .unwrap();
    let width_pt = info["pages"][0]["width_pt"].as_f64().unwrap();
    let expected = (width_pt * 1200.0 / 72.0).round() as u32;
    assert_eq!(manifest.operations[0].outputs[0].width, Some(expected));
    assert_eq!(manifest.operations[0].outputs[0].page, Some(1));
    // Two POSTs, one id, both signed; one accepted.
    let deliveries = hooks.deliveries();
    assert_eq!(deliveries.iter().map(|d| d.status).collect::<Vec<_>>(), [503, 200]);
    let ids: BTreeSet<String> = deliveries.iter().map(|d| verify(d).unwrap()).collect();
    assert_eq!(ids, BTreeSet::from([format!("msg_{id}")]));
    let event: serde_json::Value = serde_json::from_slice(&deliveries[1].body).unwrap();
    assert_eq!(
        (event["type"].as_str(), event["data"]["id"].as_str()),
        (Some("job.done"), Some(id.as_str()))
    );
    assert!(event["data"]["manifest_url"].as_str().unwrap().ends_with("/manifest.json"));
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draining_pod_stops_pulling_and_hands_back_what_it_cannot_finish() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "slow.pdf", doc(SLOW)).await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    // A grace period shorter than the job: it cannot finish there.
    let flags = [&ALLOW_SLOW[..], &["--slots", "1", "--grace-period-ms", "500"]].concat();
    let draining = world.pod(&flags).await;
    let hooks = Receiver::start(Answer::Ok).await;
    let slow = JobId::from_key("drained");
    let mut job = message(
        "drained",
        "s3://uploads/slow.pdf",
        serde_json::json!([{"op": "render", "pages": "1-2", "dpi": 1200}]),
        "s3://results/drain",
    );
    job["webhook"] = serde_json::json!({"url": hooks.url()});
    world.publish(&job).await;
    busy_worker(&draining, None).await;
    draining.terminate();
    let status = draining.exit_status().expect("the pod exited within 10 s of SIGTERM");
    assert!(status.success(), "{status:?}: {}", draining.log_text());
    let handed_back = world.state(&slow).await.unwrap();
    assert_eq!((handed_back.state, handed_back.strikes), (State::Queued, 0), "{handed_back:?}");
    // Published after the drain: nobody took it from the draining pod.
    world
        .publish(&message(
            "after-drain",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/drain",
        ))
        .await;
    let log = draining.log_text();
    assert!(log.contains("stopped pulling jobs"), "{log}");
    drop(draining);
    // Another pod takes both; the handed-back job was delivered again at once, no strike.
    let next = world.pod(&flags).await;
    let done = world.wait_state(&slow, Duration::from_secs(120), |s| s.state.is_final()).await;
    assert_eq!((done.state, done.deliveries, done.strikes), (State::Done, 2, 0), "{done:?}");
    let listed = world.outputs_of("drain", &slow).await;
    assert_eq!(listed.len(), 3, "two pages and the manifest: {listed:?}");
    world.check_manifest("drain", &slow, &listed).await;
    // One completion, one webhook (none from the drained pod), signed.
    let deliveries = wait::until("the webhook", Duration::from_secs(30), || async {
        let deliveries = hooks.deliveries();
        if deliveries.is_empty() { Err(deliveries) } else { Ok(deliveries) }
    })
    .await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(verify(&deliveries[0]), Ok(format!("msg_{slow}")));
    let hooked = world
        .wait_state(&slow, Duration::from_secs(30), |s| {
            s.webhook.as_ref().is_some_and(|w| w.delivered)
        })
        .await;
    assert_eq!(hooked.webhook.map(|w| w.attempts), Some(1));
    let after = world
        .wait_state(&JobId::from_key("after-drain"), Duration::from_secs(30), |s| {
            s.state.is_final()
        })
        .await;
    assert_eq!((after.state, after.deliveries), (State::Done, 1));
    drop(next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_job_is_cancelled_at_its_next_output_and_leaves_no_manifest() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "long.pdf", doc(LONG)).await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    let pod = world.pod(&["--slots", "1"]).await;
    let id = JobId::from_key("cancelled-running");
    world
        .publish(&message(
            "cancelled-running",
            "s3://uploads/long.pdf",
            serde_json::json!([{"op": "render", "pages": "1-100", "dpi": 300}]),
            "s3://results/cancel",
        ))
        .await;
    // Under way: pages written and their progress recorded.
    let running = world
        .wait_state(&id, Duration::from_secs(60), |s| {
            s.state == State::Running && s.progress.done > 0
        })
        .await;
    assert_eq!(running.progress.total, 100, "{running:?}");
    let cancelled = pod.client.delete(pod.url(&format!("/v1/jobs/{id}"))).send().await.unwrap();
    assert_eq!(cancelled.status(), 200);
    assert_eq!(cancelled.json::<JobStatus>().await.unwrap().state, State::Cancelled);
    // The pod stops it at its next output and lets its message go.
    wait::until("the cancelled job stopped", Duration::from_secs(60), || async {
        let running = pod.metric("renderpod_jobs_running", &[]).await;
        if running == 0.0 { Ok(()) } else { Err(running) }
    })
    .await;
    assert_eq!(pod.metric("renderpod_jobs_ended_total", &["outcome=\"cancelled\""]).await, 1.0);
    let state = world.state(&id).await.unwrap();
    assert_eq!((state.state, state.deliveries), (State::Cancelled, 1), "{state:?}");
    assert!(state.manifest_url.is_none(), "{state:?}");
    // Some pages were written, not all, and no manifest: to a reader the job has no results.
    let listed = world.outputs_of("cancel", &id).await;
    assert!(!listed.is_empty() && listed.len() < 100, "{} outputs", listed.len());
    assert!(!listed.contains_key(&format!("cancel/{id}/manifest.json")), "{listed:?}");
    // The slot is free again: the next job runs, and the cancelled one is not delivered again.
    let next = JobId::from_key("after-cancel");
    world
        .publish(&message(
            "after-cancel",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/cancel",
        ))
        .await;
    let after = world.wait_state(&next, Duration::from_secs(30), |s| s.state.is_final()).await;
    assert_eq!(after.state, State::Done, "{after:?}");
    assert_eq!(world.state(&id).await.unwrap().deliveries, 1);
    assert_eq!(world.outputs_of("cancel", &id).await, listed, "nothing written after the stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_goes_to_the_dead_letter_stream_and_refused_documents_fail_at_once() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "slow.pdf", doc(SLOW)).await;
    world
        .put("uploads", "garbage.pdf", b"this is no PDF at all, and PDFium says so".to_vec())
        .await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    let flags = [&ALLOW_SLOW[..], &["--slots", "2", "--jobs-max-deliveries", "2"]].concat();
    let pod = world.pod(&flags).await;
    let crasher = JobId::from_key("crasher");
    world
        .publish(&message(
            "crasher",
            "s3://uploads/slow.pdf",
            serde_json::json!([{"op": "render", "page": 1, "dpi": 1200}]),
            "s3://results/poison",
        ))
        .await;
    // Its worker dies under it, twice (the kernel's OOM killer would do the same).
    let victim = busy_worker(&pod, None).await;
    // While it runs, a document PDFium refuses, and an ordinary job: neither waits for it.
    world
        .publish(&message(
            "garbage",
            "s3://uploads/garbage.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/poison",
        ))
        .await;
    world
        .publish(&message(
            "ordinary-1",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/poison",
        ))
        .await;
    let refused = world
        .wait_state(&JobId::from_key("garbage"), Duration::from_secs(30), |s| s.state.is_final())
        .await;
    let error = refused.error.clone().unwrap();
    assert_eq!(
        (refused.state, error.code.as_str(), error.status),
        (State::Failed, "unreadable_document", 422),
        "{refused:?}"
    );
    assert_eq!(
        (refused.deliveries, refused.strikes, refused.dead_lettered),
        (1, 0, false),
        "failed at once, never retried"
    );
    world
        .wait_state(&JobId::from_key("ordinary-1"), Duration::from_secs(30), |s| {
            s.state == State::Done
        })
        .await;
    unsafe { libc::kill(victim as i32, libc::SIGKILL) };
    let second = busy_worker(&pod, Some(victim)).await;
    let handed_back = world.state(&crasher).await.unwrap();
    assert_eq!(
        (handed_back.strikes, handed_back.error.as_ref().map(|e| e.code.as_str())),
        (1, Some("worker_crashed")),
        "{handed_back:?}"
    );
    unsafe { libc::kill(second as i32, libc::SIGKILL) };
    let dead = world.wait_state(&crasher, Duration::from_secs(30), |s| s.state.is_final()).await;
    let error = dead.error.clone().unwrap();
    assert_eq!(
        (dead.state, dead.dead_lettered, dead.strikes),
        (State::Failed, true, 2),
        "{dead:?}"
    );
    assert_eq!(error.code, "worker_crashed");
    // The dead letter carries the job and the reason.
    let stream = world.jetstream().get_stream("RENDERPOOL_JOBS_DEAD").await.unwrap();
    let letter = stream.get_last_raw_message_by_subject("renderpool.jobs.dead").await.unwrap();
    let reason =
        letter.headers.get("Renderpool-Dead-Reason").map(|v| v.to_string()).unwrap_or_default();
    assert!(reason.starts_with("worker_crashed"), "{reason}");
    let body: serde_json::Value = serde_json::from_slice(&letter.payload).unwrap();
    assert_eq!(
        (body["job"].as_str(), body["reason"]["code"].as_str()),
        (Some(crasher.as_str()), Some("worker_crashed"))
    );
    assert_eq!(body["message"]["idempotency_key"], "crasher");
    assert!(
        world.list("results", &format!("poison/{crasher}")).await.is_empty(),
        "no output of a dead job"
    );
    // The queue goes on.
    world
        .publish(&message(
            "ordinary-2",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/poison",
        ))
        .await;
    world
        .wait_state(&JobId::from_key("ordinary-2"), Duration::from_secs(30), |s| {
            s.state == State::Done
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_fails_clearly_and_nothing_else() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    world.put("private", "small.pdf", doc(SMALL)).await;
    let pod = world
        .pod(&["--slots", "2", "--jobs-webhook-timeout-ms", "500", "--jobs-webhook-attempts", "2"])
        .await;
    let silent = Silent::start().await;
    let ops = serde_json::json!([{"op": "info"}]);
    // Not JSON: its state is under the id of its stream sequence.
    let sequence =
        world.publish_bytes(async_nats::HeaderMap::new(), Bytes::from_static(b"{not json")).await;
    let malformed = JobId::of_bytes(format!("stream-sequence:{sequence}").as_bytes());
    world
        .publish(&message(
            "no-such-op",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "explode"}]),
            "s3://results/bad",
        ))
        .await;
    world
        .publish(&message(
            "too-wide",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "thumbnails", "width": 5000}]),
            "s3://results/bad",
        ))
        .await;
    world
        .publish(&message("private", "s3://private/small.pdf", ops.clone(), "s3://results/bad"))
        .await;
    world
        .publish(&message("missing", "s3://uploads/missing.pdf", ops.clone(), "s3://results/bad"))
        .await;
    let mut silent_job =
        message("silent-hook", "s3://uploads/small.pdf", ops.clone(), "s3://results/bad");
    silent_job["webhook"] = serde_json::json!({"url": silent.url()});
    world.publish(&silent_job).await;
    world
        .publish(&message("good", "s3://uploads/small.pdf", ops.clone(), "s3://results/bad"))
        .await;
    let failed = |state: &JobStatus| state.state.is_final();
    for (id, code, status) in [
        (malformed.clone(), "invalid_request", 400),
        (JobId::from_key("no-such-op"), "invalid_request", 400),
        (JobId::from_key("too-wide"), "invalid_request", 400),
        (JobId::from_key("private"), "bucket_not_allowed", 403),
        (JobId::from_key("missing"), "object_not_found", 404),
    ] {
        let state = world.wait_state(&id, Duration::from_secs(30), failed).await;
        let error = state.error.clone().unwrap_or_else(|| panic!("{state:?}"));
        assert_eq!(
            (state.state, error.code.as_str(), error.status),
            (State::Failed, code, status),
            "{state:?}"
        );
        assert!(!error.message.is_empty());
    }
    let silent_state = world
        .wait_state(&JobId::from_key("silent-hook"), Duration::from_secs(30), |s| {
            s.webhook.is_some()
        })
        .await;
    let hook = silent_state.webhook.clone().unwrap();
    assert_eq!(
        (silent_state.state, hook.delivered, hook.attempts),
        (State::Done, false, 2),
        "{silent_state:?}"
    );
    assert!(hook.error.as_deref().unwrap_or_default().contains("timed out"), "{hook:?}");
    let good = world
        .wait_state(&JobId::from_key("good"), Duration::from_secs(30), |s| s.state.is_final())
        .await;
    assert_eq!(good.state, State::Done);
    // The same refusals through POST /v1/jobs are answered at once.
    let post = |body: serde_json::Value| {
        pod.client
            .post(pod.url("/v1/jobs"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let (status, code) = error_code(
        post(message("p1", "s3://private/small.pdf", ops.clone(), "s3://results/bad"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (403, "bucket_not_allowed"));
    let (status, code) = error_code(
        post(message("p2", "s3://uploads/small.pdf", ops.clone(), "s3://private/out"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (403, "bucket_not_allowed"));
    let (status, code) = error_code(
        post(message(
            "p3",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "render", "dpi": 9999}]),
            "s3://results/bad",
        ))
        .await
        .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_request"));
    assert_eq!(pod.client.get(pod.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_to_private_addresses_are_refused_unless_the_pool_allows_them() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    let hooks = Receiver::start(Answer::Ok).await;
    let pod = world.pod(&["--slots", "1", "--jobs-webhook-allow-private", "false"]).await;
    let mut job = message(
        "private-hook",
        "s3://uploads/small.pdf",
        serde_json::json!([{"op": "info"}]),
        "s3://results/private-hook",
    );
    job["webhook"] = serde_json::json!({"url": hooks.url()});
    world.publish(&job).await;
    let id = JobId::from_key("private-hook");
    let state = world.wait_state(&id, Duration::from_secs(30), |s| s.webhook.is_some()).await;
    let hook = state.webhook.clone().unwrap();
    // The job is done; its webhook was refused once, not retried, and never sent.
    assert_eq!((state.state, hook.delivered, hook.attempts), (State::Done, false, 1), "{state:?}");
    let error = hook.error.unwrap_or_default();
    assert!(error.contains("private") && error.contains("127.0.0.1"), "{error}");
    assert!(hooks.deliveries().is_empty(), "{:?}", hooks.deliveries());
    let listed = world.outputs_of("private-hook", &id).await;
    world.check_manifest("private-hook", &id, &listed).await;
    drop(pod);
}

/// The pool's backlog as `pod`'s `/readyz` shows it, once it equals `want`.
async fn backlog_becomes(pod: &RenderPod, want: u64) -> serde_json::Value {
    // The pod reads the stream every 10 s.
    wait::until("the backlog in /readyz", Duration::from_secs(40), || async {
        let jobs = pod.readyz().await["jobs"].clone();
        if jobs["pending"] == want { Ok(jobs) } else { Err(jobs) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readyz_shows_the_pools_backlog_from_the_stream() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    // A pod that only accepts jobs: whatever is published stays in the stream.
    let front = world.pod(&["--jobs-pull", "false"]).await;
    let jobs = backlog_becomes(&front, 0).await;
    assert!(jobs["age_ms"].as_u64().unwrap() < 15_000, "{jobs}");
    for key in ["backlog-1", "backlog-2", "backlog-3"] {
        let op = serde_json::json!([{"op": "info"}]);
        world.publish(&message(key, "s3://uploads/small.pdf", op, "s3://results/backlog")).await;
    }
    let published = Instant::now();
    backlog_becomes(&front, 3).await;
    // The same readings as metrics: the count, and the oldest job's wait since its publication
    // (read every 10 s, so it is seen passing 5 s within a reading or two).
    assert_eq!(front.metric("renderpod_jobs_backlog", &[]).await, 3.0);
    let oldest = wait::until("the oldest job's wait past 5 s", Duration::from_secs(40), || async {
        let oldest = front.metric("renderpod_jobs_backlog_oldest_seconds", &[]).await;
        if oldest >= 5.0 { Ok(oldest) } else { Err(oldest) }
    })
    .await;
    let since = published.elapsed().as_secs_f64();
    assert!(oldest <= since + 1.0, "the oldest waited {oldest} s, published {since:.1} s ago");
    // A pod that pulls works them off; the stream, and so the backlog, empties.
    let worker = world.pod(&["--slots", "1"]).await;
    backlog_becomes(&front, 0).await;
    assert_eq!(front.metric("renderpod_jobs_backlog", &[]).await, 0.0);
    assert_eq!(front.metric("renderpod_jobs_backlog_oldest_seconds", &[]).await, 0.0);
    drop(worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_that_wants_a_token_gets_it_from_a_file() {
    let _serial = SERIAL.lock().await;
    let world = World::start_with_nats_token(Some("renderpool-nats-token")).await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    // Without the token file a pod does not start, and says why.
    let mut flags = world.pod_flags(&["--listen", "127.0.0.1:0"]);
    let at = flags.iter().position(|f| f == "--jobs-nats-token-file").unwrap();
    flags.drain(at..at + 2);
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(renderpool_tests::workspace_bin("render-pod"))
            .arg("serve")
            .args(&flags)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("a pod refused by the broker exits within 60 s")
    .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr).to_lowercase();
    assert!(!refused.status.success(), "{said}");
    assert!(said.contains("authorization"), "{said}");
    // With it, jobs run.
    let pod = world.pod(&["--slots", "1"]).await;
    world
        .publish(&message(
            "with-token",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/token",
        ))
        .await;
    let done = world
        .wait_state(&JobId::from_key("with-token"), Duration::from_secs(30), |s| s.state.is_final())
        .await;
    assert_eq!(done.state, State::Done, "{done:?}");
    drop(pod);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_key_is_one_job_and_a_job_past_its_deadline_does_not_run() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    let ops = serde_json::json!([{"op": "info"}]);
    // A pod that makes the streams and pulls nothing: what is published stays queued.
    let front = world.pod(&["--jobs-pull", "false"]).await;
    // One job past its deadline before any pod pulls, one published twice over.
    let mut late = message("late", "s3://uploads/small.pdf", ops.clone(), "s3://results/once");
    late["deadline_ms"] = serde_json::json!(1);
    world.publish(&late).await;
    let twice = message("twice", "s3://uploads/small.pdf", ops.clone(), "s3://results/once");
    let first = world.publish(&twice).await;
    // Within the stream's duplicate window the broker keeps one message.
    assert_eq!(world.publish(&twice).await, first, "a duplicate publish is the same message");
    // A producer that sets no message id: the stream holds a second message of the same job.
    let second =
        world.publish_bytes(async_nats::HeaderMap::new(), Bytes::from(twice.to_string())).await;
    assert_ne!(second, first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let pod = world.pod(&["--slots", "1"]).await;
    let late = world
        .wait_state(&JobId::from_key("late"), Duration::from_secs(30), |s| s.state.is_final())
        .await;
    let error = late.error.clone().unwrap_or_else(|| panic!("{late:?}"));
    assert_eq!(
        (late.state, error.code.as_str(), error.status, late.progress.done),
        (State::Failed, "deadline_exceeded", 504, 0),
        "{late:?}"
    );
    assert!(world.outputs_of("once", &JobId::from_key("late")).await.is_empty());
    let id = JobId::from_key("twice");
    let done = world.wait_state(&id, Duration::from_secs(30), |s| s.state.is_final()).await;
    assert_eq!((done.state, done.deliveries), (State::Done, 1), "{done:?}");
    // Both messages were taken from the stream; only one ran.
    wait::until("the stream emptied", Duration::from_secs(30), || async {
        let dropped = pod.metric("renderpod_jobs_ended_total", &["outcome=\"dropped\""]).await;
        if dropped == 1.0 { Ok(()) } else { Err(dropped) }
    })
    .await;
    let state = world.state(&id).await.unwrap();
    assert_eq!((state.deliveries, state.updated_ms), (1, done.updated_ms), "{state:?}");
    let listed = world.outputs_of("once", &id).await;
    assert_eq!(listed.len(), 2, "its info and its manifest: {listed:?}");
    world.check_manifest("once", &id, &listed).await;
    drop(front);
}

/// The page count and the text of page 1 of `pdf`, through the pod's synchronous routes.
async fn pages_and_text(pod: &RenderPod, pdf: Vec<u8>) -> (u64, String) {
    let info: serde_json::Value = pod.post("/v1/info", pdf.clone()).await.json().await.unwrap();
    let text: serde_json::Value = pod.post("/v1/extract?pages=1", pdf).await.json().await.unwrap();
    (info["page_count"].as_u64().unwrap(), text.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watermark_and_office_conversion_run_as_jobs_as_through_their_routes() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    let gotenberg = Gotenberg::start(&[]).await;
    const OFFICE: &str = "office/sld-slides.pptx";
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    world.put("uploads", "slides.pptx", doc(OFFICE)).await;
    let pod = world.pod(&["--slots", "2", "--gotenberg-url", &gotenberg.url()]).await;
    let jobs = [
        (
            "stamped",
            "s3://uploads/small.pdf",
            serde_json::json!([{"op": "watermark", "text": "COPY 7731"}]),
        ),
        ("converted", "s3://uploads/slides.pptx", serde_json::json!([{"op": "convert"}])),
    ];
    for (key, input, ops) in &jobs {
        world.publish(&message(key, input, ops.clone(), "s3://results/ops")).await;
    }
    for (key, _, _) in &jobs {
        let id = JobId::from_key(key);
        let done = world.wait_state(&id, Duration::from_secs(180), |s| s.state.is_final()).await;
        assert_eq!(done.state, State::Done, "{done:?}");
        let listed = world.outputs_of("ops", &id).await;
        let manifest = world.check_manifest("ops", &id, &listed).await;
        assert_eq!(manifest.operations[0].outputs[0].content_type, "application/pdf");
    }
    // Each output is the PDF its route makes: the same pages and the same text.
    let stamped =
        world.get("results", &format!("ops/{}/00-watermark.pdf", JobId::from_key("stamped"))).await;
    let route = pod.post("/v1/watermark?text=COPY%207731", doc(SMALL)).await;
    assert_eq!(route.status(), 200);
    let route = route.bytes().await.unwrap().to_vec();
    let (job, sync) =
        (pages_and_text(&pod, stamped.to_vec()).await, pages_and_text(&pod, route).await);
    assert!(job.1.contains("COPY 7731"), "{}", job.1);
    assert_eq!(job, sync);
    let converted =
        world.get("results", &format!("ops/{}/00-convert.pdf", JobId::from_key("converted"))).await;
    let route = pod.post("/v1/convert", doc(OFFICE)).await;
    assert_eq!(route.status(), 200);
    let route = route.bytes().await.unwrap().to_vec();
    let (job, sync) =
        (pages_and_text(&pod, converted.to_vec()).await, pages_and_text(&pod, route).await);
    assert_eq!(job.0, 3, "the deck's three slides");
    assert_eq!(job, sync);
    drop(pod);
}

/// `POST /v1/jobs` with `document` as the body and `job` in its header: the accepted job.
async fn submit_with_document(
    pod: &RenderPod,
    job: serde_json::Value,
    document: Vec<u8>,
) -> JobStatus {
    let answer = pod
        .client
        .post(pod.url("/v1/jobs"))
        .header("content-type", "application/pdf")
        .header("x-renderpool-job", job.to_string())
        .body(document)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    answer.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_job_routes_and_stored_sources() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    world.put("private", "small.pdf", doc(SMALL)).await;
    // A pod that only accepts jobs: what it accepts stays queued.
    let front = world.pod(&["--jobs-pull", "false"]).await;
    let submit = |key: &str, body: serde_json::Value| {
        let request =
            front.client.post(front.url("/v1/jobs")).header("content-type", "application/json");
        request.header("idempotency-key", key).body(body.to_string()).send()
    };
    let mut body = message(
        "ignored",
        "s3://uploads/small.pdf",
        serde_json::json!([{"op": "thumbnails", "width": 100}]),
        "s3://results/routes",
    );
    body.as_object_mut().unwrap().remove("idempotency_key");
    let first = submit("same-key", body.clone()).await.unwrap();
    assert_eq!(first.status(), 202);
    let location = first.headers()["location"].to_str().unwrap().to_string();
    let first: JobStatus = first.json().await.unwrap();
    assert_eq!(location, format!("/v1/jobs/{}", first.id));
    assert_eq!(first.id, JobId::from_key("same-key"));
    let again = submit("same-key", body.clone()).await.unwrap();
    assert_eq!(again.status(), 200, "the same key is the same job");
    let again: JobStatus = again.json().await.unwrap();
    assert_eq!((again.id.clone(), again.state), (first.id.clone(), State::Queued));
    // Cancelled while queued: a pulling pod drops it.
    let cancelled = front.client.delete(front.url(&location)).send().await.unwrap();
    assert_eq!(cancelled.status(), 200);
    assert_eq!(cancelled.json::<JobStatus>().await.unwrap().state, State::Cancelled);
    // A document as the body, the message in the header.
    let job = serde_json::json!({"version": 1, "idempotency_key": "uploaded",
        "operations": [{"op": "extract"}, {"op": "render", "pages": "1", "width": 120}],
        "output": {"url": "s3://results/routes"}});
    let uploaded = submit_with_document(&front, job, doc(SMALL)).await;
    assert_eq!(
        world.get("uploads", &format!("incoming/{}", uploaded.id)).await.len(),
        doc(SMALL).len()
    );
    let worker = world.pod(&["--slots", "1"]).await;
    let done = wait::until("the uploaded job done", Duration::from_secs(60), || async {
        let state: JobStatus = worker
            .client
            .get(worker.url(&format!("/v1/jobs/{}", uploaded.id)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if state.state == State::Done { Ok(state) } else { Err(state) }
    })
    .await;
    let manifest = done.manifest.clone().expect("a done job's answer carries its manifest");
    assert_eq!(
        manifest.operations.iter().map(|o| o.op.as_str()).collect::<Vec<_>>(),
        ["extract", "render"]
    );
    assert_eq!(manifest.input.url, format!("s3://uploads/incoming/{}", uploaded.id));
    let listed = world.outputs_of("routes", &uploaded.id).await;
    world.check_manifest("routes", &uploaded.id, &listed).await;
    // The cancelled job was dropped by the pulling pod, never run.
    let cancelled =
        world.wait_state(&first.id, Duration::from_secs(5), |s| s.state == State::Cancelled).await;
    assert_eq!(cancelled.progress.done, 0);
    assert!(world.outputs_of("routes", &first.id).await.is_empty());
    let unknown = worker
        .client
        .get(worker.url(&format!("/v1/jobs/{}", JobId::from_key("never"))))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(unknown).await, (404, "job_not_found".into()));
    // The synchronous routes read stored documents too: the same page, the same bytes.
    let stored = worker
        .client
        .post(worker.url("/v1/render?page=1&width=300&source=s3://uploads/small.pdf"))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 200);
    let stored = stored.bytes().await.unwrap();
    let sent = worker.post("/v1/render?page=1&width=300", doc(SMALL)).await.bytes().await.unwrap();
    assert_eq!(stored, sent);
    // What ?source= read is in the pod's one document cache: named by its digest, with no body,
    // the document is served without a read or an upload.
    let digest = format!("blake3=:{}:", STANDARD.encode(DocHash::of(&doc(SMALL)).0));
    let named = worker
        .client
        .post(worker.url("/v1/render?page=1&width=300"))
        .header("repr-digest", digest)
        .body(Vec::new())
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    assert_eq!(named.bytes().await.unwrap(), stored);
    // The document is kept by its ETag: asked again, one conditional GET answers from memory;
    // replaced in the bucket, the new one is fetched.
    let pages = |answer: reqwest::Response| async move {
        assert_eq!(answer.status(), 200);
        answer.json::<serde_json::Value>().await.unwrap()["page_count"].as_u64().unwrap()
    };
    let info = || worker.client.post(worker.url("/v1/info?source=s3://uploads/small.pdf")).send();
    let hits = || async { worker.readyz().await["object_cache"]["hits"].as_u64().unwrap() };
    let before = hits().await;
    let small_pages = pages(info().await.unwrap()).await;
    assert_eq!(hits().await, before + 1, "{}", worker.readyz().await);
    world.put("uploads", "small.pdf", doc(LONG)).await;
    let long_pages = pages(info().await.unwrap()).await;
    assert_eq!(hits().await, before + 1, "a changed object is not a hit");
    assert!(
        long_pages > small_pages,
        "{long_pages} pages after the replacement, {small_pages} before"
    );
    assert_eq!(pages(info().await.unwrap()).await, long_pages);
    assert_eq!(hits().await, before + 2);
    for (source, expected) in [
        ("s3://private/small.pdf", (403, "bucket_not_allowed")),
        ("s3://uploads/missing.pdf", (404, "object_not_found")),
        ("http://example.com/x.pdf", (400, "invalid_request")),
    ] {
        let response = worker
            .client
            .post(worker.url(&format!("/v1/info?source={source}")))
            .send()
            .await
            .unwrap();
        let (status, code) = error_code(response).await;
        assert_eq!((status, code.as_str()), expected, "{source}");
    }
}

/// A job that names its input's ETag runs on that version and no other: from the pod that holds
/// it without a read (the object written over since is not what it runs on), from the store while
/// the object still is that version, and it fails with `input_changed` once it is not. A document
/// sent to `POST /v1/jobs` is pinned so: written over before a pod takes the job, it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_names_its_inputs_etag_runs_on_that_version_only() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    let info = serde_json::json!([{"op": "info"}]);
    let front = world.pod(&["--jobs-pull", "false"]).await;
    let uploaded = serde_json::json!({"version": 1, "idempotency_key": "uploaded",
        "operations": info, "output": {"url": "s3://results/pinned"}});
    let uploaded = submit_with_document(&front, uploaded, doc(TRIVIAL)).await;
    world.put("uploads", &format!("incoming/{}", uploaded.id), doc(SMALL)).await;
    let one = world.put("uploads", "pinned.pdf", doc(TRIVIAL)).await.expect("S3 gives an ETag");
    let replaced = world.put("uploads", "replaced.pdf", doc(TRIVIAL)).await.unwrap();
    world.put("uploads", "replaced.pdf", doc(SMALL)).await;
    let pod = world.pod(&["--slots", "1"]).await;
    let ended = |key: &str| {
        let (world, id) = (&world, JobId::from_key(key));
        async move { world.wait_state(&id, Duration::from_secs(30), |s| s.state.is_final()).await }
    };
    let mut job =
        message("replaced", "s3://uploads/replaced.pdf", info.clone(), "s3://results/pinned");
    job["input"]["etag"] = replaced.into();
    world.publish(&job).await;
    for key in ["uploaded", "replaced"] {
        let state = ended(key).await;
        let error = state.error.clone().unwrap_or_else(|| panic!("{key}: {state:?}"));
        assert_eq!(
            (state.state, error.code.as_str(), error.status),
            (State::Failed, "input_changed", 412)
        );
        assert!(error.message.contains("has changed"), "{error:?}");
    }
    // Done: the page count the job read, and the ETag its manifest says it read.
    let pages = |key: &'static str, etag: &str| {
        let mut job = message(key, "s3://uploads/pinned.pdf", info.clone(), "s3://results/pinned");
        job["input"]["etag"] = etag.into();
        let world = &world;
        async move {
            world.publish(&job).await;
            let state = ended(key).await;
            assert_eq!(state.state, State::Done, "{key}: {state:?}");
            let id = JobId::from_key(key);
            let read = |name: &str| {
                let key = format!("pinned/{id}/{name}");
                async move {
                    serde_json::from_slice::<serde_json::Value>(&world.get("results", &key).await)
                        .unwrap()
                }
            };
            let (info, manifest) = (read("00-info.json").await, read("manifest.json").await);
            (
                info["page_count"].as_u64().unwrap(),
                manifest["input"]["etag"].as_str().unwrap().to_string(),
            )
        }
    };
    assert_eq!(pages("first", &one).await, (1, one.clone()));
    let hits = || async { pod.readyz().await["object_cache"]["hits"].as_u64().unwrap() };
    let before = hits().await;
    let many = world.put("uploads", "pinned.pdf", doc(SMALL)).await.unwrap();
    assert_ne!(many, one);
    assert_eq!(pages("held", &one).await, (1, one.clone()), "the version held, read from memory");
    assert_eq!(hits().await, before + 1);
    let (count, etag) = pages("current", &many).await;
    assert!(count > 1, "{count} pages");
    assert_eq!((etag, hits().await), (many, before + 1), "the version named, read from the store");
}

/// `POST /v1/info` of the stored document `source`, in the version `etag` names if any.
async fn info_of_source(pod: &RenderPod, source: &str, etag: Option<&str>) -> reqwest::Response {
    let mut query = vec![("source", source)];
    query.extend(etag.map(|etag| ("source_etag", etag)));
    let url = reqwest::Url::parse_with_params(&pod.url("/v1/info"), &query).unwrap();
    pod.client.post(url).send().await.unwrap()
}

async fn page_count(answer: reqwest::Response) -> u64 {
    assert_eq!(answer.status(), 200);
    let info: serde_json::Value = answer.json().await.unwrap();
    info["page_count"].as_u64().unwrap_or_else(|| panic!("{info}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_named_with_its_etag_is_read_in_that_version_only() {
    let _serial = SERIAL.lock().await;
    let world = World::start().await;
    let source = "s3://uploads/viewed.pdf";
    let one = world.put("uploads", "viewed.pdf", doc(TRIVIAL)).await.expect("S3 gives an ETag");
    let (pod, other) = (world.pod(&["--slots", "1"]).await, world.pod(&["--slots", "1"]).await);
    assert_eq!(page_count(info_of_source(&pod, source, Some(&one)).await).await, 1);
    let hits = || async { pod.readyz().await["object_cache"]["hits"].as_u64().unwrap() };
    let before = hits().await;
    let many = world.put("uploads", "viewed.pdf", doc(SMALL)).await.unwrap();
    assert_ne!(many, one);
    // Version one again, though the object changed: from memory, with no request to the store
    // (a conditional read would have found the new version, a pinned one refused).
    assert_eq!(page_count(info_of_source(&pod, source, Some(&one)).await).await, 1);
    assert_eq!(hits().await, before + 1);
    // A pod that never held it asks the store for that version and is told it changed.
    let refused = info_of_source(&other, source, Some(&one)).await;
    let (status, body) = (refused.status().as_u16(), refused.text().await.unwrap());
    assert_eq!(status, 412, "{body}");
    assert!(body.contains("input_changed") && body.contains("has changed"), "{body}");
    // The new version, by its ETag or as the object is now.
    assert!(page_count(info_of_source(&other, source, Some(&many)).await).await > 1);
    assert!(page_count(info_of_source(&pod, source, None).await).await > 1);
    for (query, says) in [
        (format!("source={source}&source_etag=%22a%20b%22"), "is not an ETag"),
        ("source_etag=%22x%22".to_string(), "give the source= too"),
    ] {
        let answer = pod.client.post(pod.url(&format!("/v1/info?{query}"))).send().await.unwrap();
        let (status, body) = (answer.status().as_u16(), answer.text().await.unwrap());
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains("invalid_request") && body.contains(says), "{query}: {body}");
    }
}

/// A job, an upload and a stored source on one store the pod uses: the outputs and the manifest
/// are in the store, a URL of another store or an outside bucket is refused by name.
async fn jobs_and_sources_on(scheme: Scheme) {
    let world = World::start_with_store(scheme).await;
    let url = |bucket: &str, key: &str| world.store.url(bucket, key);
    world.put("uploads", "small.pdf", doc(SMALL)).await;
    world.put("private", "small.pdf", doc(SMALL)).await;
    let pod = world.pod(&["--slots", "1"]).await;
    let key = format!("{scheme}-job");
    world
        .publish(&message(
            &key,
            &url("uploads", "small.pdf"),
            serde_json::json!([{"op": "info"}, {"op": "render", "pages": "1-2", "width": 120}, {"op": "extract"}]),
            &url("results", "stores"),
        ))
        .await;
    let id = JobId::from_key(&key);
    let done = world.wait_state(&id, Duration::from_secs(60), |s| s.state.is_final()).await;
    assert_eq!(done.state, State::Done, "{scheme}: {done:?}");
    let listed = world.outputs_of("stores", &id).await;
    let manifest = world.check_manifest("stores", &id, &listed).await;
    assert_eq!(manifest.input.url, url("uploads", "small.pdf"));
    assert_eq!(manifest.operations.iter().map(|o| o.outputs.len()).sum::<usize>(), 4, "{listed:?}");
    let pages = serde_json::from_slice::<serde_json::Value>(
        &world.get("results", &format!("stores/{id}/00-info.json")).await,
    )
    .unwrap()["page_count"]
        .as_u64();
    assert!(pages.is_some_and(|n| n > 2), "{scheme}: {pages:?}");
    // A document sent as the body is stored in the store first, then run from there.
    let job = serde_json::json!({"version": 1, "idempotency_key": format!("{scheme}-upload"),
        "operations": [{"op": "render", "pages": "1", "width": 90}],
        "output": {"url": url("results", "stores")}});
    let uploaded = submit_with_document(&pod, job, doc(SMALL)).await;
    let stored = world.get("uploads", &format!("incoming/{}", uploaded.id)).await;
    assert_eq!(stored.len(), doc(SMALL).len());
    let done =
        world.wait_state(&uploaded.id, Duration::from_secs(60), |s| s.state.is_final()).await;
    assert_eq!(done.state, State::Done, "{scheme}: {done:?}");
    let listed = world.outputs_of("stores", &uploaded.id).await;
    world.check_manifest("stores", &uploaded.id, &listed).await;
    // The synchronous routes read the store too: the same page, the same bytes.
    let source = url("uploads", "small.pdf");
    let stored = pod
        .client
        .post(pod.url(&format!("/v1/render?page=1&width=300&source={source}")))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 200);
    let sent = pod.post("/v1/render?page=1&width=300", doc(SMALL)).await.bytes().await.unwrap();
    assert_eq!(stored.bytes().await.unwrap(), sent);
    let other = Scheme::ALL.into_iter().find(|s| *s != scheme).unwrap();
    for (source, expected, says) in [
        (url("private", "small.pdf"), (403, "bucket_not_allowed"), "bucket \"private\""),
        (format!("{other}uploads/small.pdf"), (403, "bucket_not_allowed"), scheme.store()),
        (url("uploads", "missing.pdf"), (404, "object_not_found"), "no such object"),
    ] {
        let answer =
            pod.client.post(pod.url(&format!("/v1/info?source={source}"))).send().await.unwrap();
        let status = answer.status().as_u16();
        let body: serde_json::Value = answer.json().await.unwrap();
        let error = &body["error"];
        assert_eq!((status, error["code"].as_str().unwrap_or("")), expected, "{source}: {body}");
        assert!(error["message"].as_str().unwrap_or("").contains(says), "{source}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn google_cloud_storage_holds_documents_and_results_as_s3_does() {
    let _serial = SERIAL.lock().await;
    jobs_and_sources_on(Scheme::Gs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_blob_storage_holds_documents_and_results_as_s3_does() {
    let _serial = SERIAL.lock().await;
    jobs_and_sources_on(Scheme::Az).await;
}

/// An https object store whose certificate a private CA signed: a pod given the CA
/// (`--objects-ca-file`, as the operator mounts `objects.caSecretRef`) reads `?source=` over TLS
/// and says at start how many certificates the file added; a pod with the system's roots only
/// refuses the store's certificate, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_https_store_is_read_when_its_ca_is_given_and_refused_when_not() {
    let _serial = SERIAL.lock().await;
    let ca = TestCa::new();
    let s3 = S3Server::start_tls(&["uploads"], &ca).await;
    assert!(s3.url().starts_with("https://"), "{}", s3.url());
    std::fs::write(s3.object_path("uploads", "small.pdf"), doc(SMALL)).unwrap();
    let mut flags = s3.pod_flags();
    flags.extend(
        ["--objects-read-buckets", "uploads", "--objects-write-buckets", "uploads"]
            .map(String::from),
    );
    let without: Vec<&str> = flags.iter().map(String::as_str).collect();
    let ca_file = ca.ca_file().display().to_string();
    let mut with = without.clone();
    with.extend(["--objects-ca-file", &ca_file]);
    let binary = renderpool_tests::workspace_bin("render-pod");
    let source = "/v1/render?page=1&width=300&source=s3://uploads/small.pdf";

    let trusting = RenderPod::start_binary(&binary, &with, &[]).await;
    let log = trusting.log_text();
    let said = log.lines().find(|line| line.contains("\"object store\"")).unwrap_or_default();
    assert!(said.contains("ca.pem") && said.contains(", 1))"), "one certificate added: {log}");
    let stored = trusting.client.post(trusting.url(source)).send().await.unwrap();
    assert_eq!(stored.status(), 200, "{}", trusting.log_text());
    let sent =
        trusting.post("/v1/render?page=1&width=300", doc(SMALL)).await.bytes().await.unwrap();
    assert_eq!(stored.bytes().await.unwrap(), sent);

    let untrusting = RenderPod::start_binary(&binary, &without, &[]).await;
    let refused = untrusting.client.post(untrusting.url(source)).send().await.unwrap();
    let status = refused.status().as_u16();
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!((status, body["error"]["code"].as_str()), (502, Some("object_store_unavailable")));
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("invalid peer certificate: UnknownIssuer"), "{body}");
}

/// Jobs on an https store of a private CA, trusted through `--objects-ca-file`: the body of
/// `POST /v1/jobs` is written to it, the job's document read from it and the outputs and the
/// manifest written to it, every request over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_reads_and_writes_an_https_store_of_a_private_ca() {
    let _serial = SERIAL.lock().await;
    let ca = TestCa::new();
    let world = World::start_with_tls_store(&ca).await;
    assert!(world.store.s3().url().starts_with("https://"), "{}", world.store.s3().url());
    let ca_file = ca.ca_file().display().to_string();
    let pod = world.pod(&["--slots", "1", "--objects-ca-file", &ca_file]).await;
    let job = serde_json::json!({"version": 1, "idempotency_key": "over-tls",
        "operations": [{"op": "info"}, {"op": "render", "pages": "1", "width": 300}],
        "output": {"url": "s3://results/tls"}});
    let accepted = submit_with_document(&pod, job, doc(SMALL)).await;
    // The server's own folder holds what the pod wrote, byte for byte.
    let incoming = format!("incoming/{}", accepted.id);
    let uploaded = std::fs::read(world.store.s3().object_path("uploads", &incoming)).unwrap();
    assert!(uploaded == doc(SMALL), "the stored upload differs from the body sent");
    let done =
        world.wait_state(&accepted.id, Duration::from_secs(60), |s| s.state.is_final()).await;
    assert_eq!(done.state, State::Done, "{done:?}\n{}", pod.log_text());
    let listed = world.outputs_of("tls", &accepted.id).await;
    let manifest = world.check_manifest("tls", &accepted.id, &listed).await;
    let render = manifest.operations.iter().find(|op| op.op == "render").unwrap();
    let page = render.outputs[0].url.strip_prefix("s3://results/").unwrap();
    let sent = pod.post("/v1/render?page=1&width=300", doc(SMALL)).await.bytes().await.unwrap();
    assert_eq!(world.get("results", page).await, sent);
}
