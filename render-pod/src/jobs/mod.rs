//! Durable jobs, the render pod's side: a pull consumer on the pool's work-queue stream that
//! takes a job only while a slot is idle and no interactive request waits (previews first),
//! runs it through the engine's background turns with in-progress acks, writes its outputs and
//! then its manifest, records its end, announces it and POSTs it to its webhook, and only then
//! acknowledges it. A failure is judged (`verdict`): the document's fault fails the job with
//! the HTTP API's code; a dead worker or a lost pod counts a strike, and at the limit the job
//! goes to the dead-letter stream with its reason; a busy or unreachable service hands it back
//! for later. A draining pod stops pulling, gives its jobs the grace period, then hands back
//! what is left.

mod claim;
pub mod metrics;
mod outputs;
mod run;
mod verdict;
pub mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{AckKind, Message};
use bytes::Bytes;
use futures::StreamExt;
use renderpool_api::jobs::{
    Checked, Failure, JobEvent, JobId, JobMessage, JobStatus, ObjectUrl, Progress, State,
};
use renderpool_api::render_pod as pod;
use tokio::sync::{Notify, watch};

use crate::broker::StateError;
use crate::broker::states::{Change, Known, now_ms};
use crate::broker::{Broker, BrokerError};
use crate::byte_budget::ByteBudget;
use crate::engine::Engine;
use crate::http::params::{JobOperation, Query, ThumbnailLimits, job_operation};
use crate::http::{ApiError, AppState};
use crate::metrics::count;
use crate::objects::Objects;
use crate::office::Office;

use claim::Claim;
pub use metrics::JobsMetrics;
use run::{Runner, Stop};
use verdict::Verdict;
pub use webhook::WebhookConfig;

/// Most jobs whose webhooks are being sent at once (they hold their messages, not slots).
const MAX_NOTIFYING: usize = 256;
/// How long one pull waits for a job at the broker.
const PULL_WAIT: Duration = Duration::from_secs(1);
/// At exit, past the jobs' grace: how long the jobs still held get to be handed back, then how
/// long the broker gets to be sent the last acks and hand-backs. Together they are the margin
/// the operator's termination grace period gives a pod past its job deadline.
const HAND_BACK_AT_EXIT: Duration =
    Duration::from_secs((pod::EXIT_MARGIN_SECONDS - pod::EXIT_FLUSH_SECONDS) as u64);
const FLUSH_AT_EXIT: Duration = Duration::from_secs(pod::EXIT_FLUSH_SECONDS as u64);

/// Limits a job is held to: the same as the HTTP routes'.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    /// Largest document.
    pub max_body_bytes: u64,
    /// Most pages one operation may name.
    pub max_pages: u32,
    /// Filmstrip caps.
    pub thumbnails: ThumbnailLimits,
    /// Time for one conversion.
    pub job_deadline: Duration,
}

/// How the consumer runs.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// Take jobs from the stream (a pod may also only accept them).
    pub pull: bool,
    /// Strikes after which a job goes to the dead-letter stream.
    pub max_strikes: u32,
    /// The broker's ack wait: progress acks are sent at a third of it.
    pub ack_wait: Duration,
    /// Webhooks.
    pub webhook: WebhookConfig,
    /// Limits.
    pub limits: JobLimits,
}

/// Shared by the consumer and the jobs it runs.
pub(crate) struct Inner {
    broker: Broker,
    objects: Arc<Objects>,
    engine: Arc<Engine>,
    office: Arc<Office>,
    uploads: Arc<ByteBudget>,
    config: JobsConfig,
    limits: JobLimits,
    /// True once the pod drains: no more pulls.
    stop: watch::Sender<bool>,
    /// True once the grace period is over: jobs still running are handed back.
    abort: watch::Sender<bool>,
    /// Jobs computing now (not counting those only sending their webhook).
    computing: AtomicUsize,
    /// Messages held (computing or notifying).
    held: AtomicUsize,
    /// Woken when a job ends or stops computing.
    changed: Notify,
    metrics: Arc<JobsMetrics>,
}

/// The running consumer.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

impl Jobs {
    /// Starts consuming (when `config.pull`).
    pub async fn start(
        config: JobsConfig,
        metrics: Arc<JobsMetrics>,
        broker: Broker,
        objects: Arc<Objects>,
        app: &AppState,
    ) -> Result<Self, BrokerError> {
        let (stop, _) = watch::channel(false);
        let (abort, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            broker,
            objects,
            engine: app.engine.clone(),
            office: app.office.clone(),
            uploads: app.uploads.budget.clone(),
            limits: config.limits,
            config,
            stop,
            abort,
            computing: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            changed: Notify::new(),
            metrics,
        });
        if inner.config.pull {
            let consumer = inner.broker.consumer().await?;
            tokio::spawn(consume(inner.clone(), consumer));
        }
        Ok(Self { inner })
    }

    /// Takes no more jobs from the stream.
    pub fn stop_pulling(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Stops pulling; waits up to `grace` for the jobs held to end, then hands back what is
    /// left (each is delivered again at once, to another pod).
    pub async fn drain(&self, grace: Duration) {
        let inner = &self.inner;
        self.stop_pulling();
        let until = Instant::now() + grace;
        while inner.held.load(Ordering::Acquire) > 0 && Instant::now() < until {
            let changed = inner.changed.notified();
            let _ = tokio::time::timeout(Duration::from_millis(100), changed).await;
        }
        let left = inner.held.load(Ordering::Acquire);
        if left > 0 {
            tracing::warn!(jobs = left, "grace period over: handing back the jobs still held");
            let _ = inner.abort.send(true);
            // The margin the operator's grace period gives a pod past its job deadline, less
            // what the flush below keeps.
            let until = Instant::now() + HAND_BACK_AT_EXIT;
            while inner.held.load(Ordering::Acquire) > 0 && Instant::now() < until {
                let _ = tokio::time::timeout(Duration::from_millis(100), inner.changed.notified())
                    .await;
            }
        }
        match tokio::time::timeout(FLUSH_AT_EXIT, inner.broker.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the last acks and hand-backs may be lost"),
            Err(_) => tracing::warn!(
                seconds = FLUSH_AT_EXIT.as_secs(),
                "the last acks and hand-backs were not sent in time"
            ),
        }
        match inner.held.load(Ordering::Acquire) {
            0 => tracing::info!("jobs drained"),
            // Their states say `pod_stopping`: the broker delivers them again after the ack
            // wait, with no strike.
            held => tracing::warn!(
                still_held = held,
                "exiting with jobs not handed back; they come back after the ack wait"
            ),
        }
    }
}

/// The pull loop: one job at a time, only while a background turn is free and fewer jobs than
/// four times the slots are computing (a job between its turns reads and writes objects and
/// talks to the broker: others' turns fill those waits).
async fn consume(inner: Arc<Inner>, consumer: PullConsumer) {
    let mut stop = inner.stop.subscribe();
    let most = inner.engine.slots().saturating_mul(4);
    tracing::info!(consumer = %inner.broker.config.consumer, "pulling jobs");
    loop {
        let stopping = {
            let mut stop = stop.clone();
            async move {
                let _ = stop.wait_for(|s| *s).await;
            }
        };
        if !inner.engine.background_wait(stopping).await {
            break;
        }
        if inner.computing.load(Ordering::Acquire) >= most
            || inner.held.load(Ordering::Acquire) >= most + MAX_NOTIFYING
        {
            let _ = tokio::time::timeout(Duration::from_millis(50), inner.changed.notified()).await;
            continue;
        }
        let batch = consumer.fetch().max_messages(1).expires(PULL_WAIT).messages().await;
        let mut batch = match batch {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, "cannot pull jobs; trying again in a second");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let next = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            next = batch.next() => next,
        };
        match next {
            Some(Ok(message)) => {
                inner.computing.fetch_add(1, Ordering::AcqRel);
                inner.metrics.running.inc();
                inner.held.fetch_add(1, Ordering::AcqRel);
                tokio::spawn(handle(inner.clone(), message));
            }
            Some(Err(e)) => tracing::debug!(error = %e, "pull ended"),
            None => {}
        }
    }
    tracing::info!("stopped pulling jobs");
}

/// A job's state as this pod last wrote or read it: the next change is one compare-and-set
/// when no one else changed it in between, a read and a second try when someone did.
pub(crate) struct Tracked {
    id: JobId,
    latest: tokio::sync::Mutex<Known>,
}

impl Tracked {
    fn new(id: JobId, known: Known) -> Self {
        Self { id, latest: tokio::sync::Mutex::new(known) }
    }

    /// Changes the state (see `JobStates::change`).
    pub(crate) async fn change(
        &self,
        inner: &Inner,
        change: impl FnMut(&mut Option<JobStatus>) -> Change,
    ) -> Result<Option<JobStatus>, StateError> {
        let mut latest = self.latest.lock().await;
        let known = std::mem::replace(&mut *latest, Known::Unknown);
        let changed = inner.broker.states.change(&self.id, known, change).await?;
        if let Some((status, revision)) = &changed {
            *latest = Known::At(Box::new(status.clone()), *revision);
        }
        Ok(changed.map(|(status, _)| status))
    }
}

/// Counts a message held until dropped, and the computing until told it is over.
struct Held {
    inner: Arc<Inner>,
    computing: bool,
}

impl Held {
    fn computed(&mut self) {
        if std::mem::take(&mut self.computing) {
            self.inner.computing.fetch_sub(1, Ordering::AcqRel);
            self.inner.metrics.running.dec();
            self.inner.changed.notify_waiters();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.computed();
        self.inner.held.fetch_sub(1, Ordering::AcqRel);
        self.inner.changed.notify_waiters();
    }
}

/// What becomes of a message.
enum Settle {
    /// Acknowledged: the job ended (or the message was dropped).
    Ack,
    /// Handed back to be delivered again after the delay.
    Nak(Duration),
}

async fn handle(inner: Arc<Inner>, message: Message) {
    let mut held = Held { inner: inner.clone(), computing: true };
    let message = Arc::new(message);
    // In-progress acks while the message is held, so a long job is not delivered again.
    let ticker = {
        let (message, every) =
            (message.clone(), (inner.config.ack_wait / 3).max(Duration::from_millis(100)));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = message.ack_with(AckKind::Progress).await {
                    tracing::warn!(error = %e, "cannot send an in-progress ack");
                }
            }
        })
    };
    let settle = process(&inner, &message, &mut held).await;
    ticker.abort();
    let sent = match settle {
        // A lost ack costs one more delivery, which finds the job ended and drops it.
        Settle::Ack => message.ack().await,
        Settle::Nak(delay) => message.ack_with(AckKind::Nak(Some(delay))).await,
    };
    if let Err(e) = sent {
        // Not acknowledged: delivered again after the ack wait, and judged then by its state.
        tracing::warn!(error = %e, "cannot settle a job message");
    }
}

/// The job's failure as its state records it.
fn failure(error: &ApiError, operation: Option<usize>) -> Failure {
    Failure {
        code: error.code.to_string(),
        status: error.status.as_u16(),
        message: error.message.clone(),
        operation,
    }
}

/// Reads the message: the checked job, or the failure to record under the id it has.
fn read(
    inner: &Inner,
    payload: &[u8],
    sequence: u64,
) -> Result<(Checked, Vec<JobOperation>), (JobId, ApiError)> {
    let checked = JobMessage::read(payload).map_err(|e| {
        // A malformed message still gets a state, under its key's id when one can be read.
        let key = serde_json::from_slice::<serde_json::Value>(payload)
            .ok()
            .and_then(|v| v["idempotency_key"].as_str().map(str::to_string));
        let id = match key {
            Some(key) => JobId::from_key(&key),
            None => JobId::of_bytes(format!("stream-sequence:{sequence}").as_bytes()),
        };
        (id, ApiError::invalid(e.to_string()))
    })?;
    let id = checked.message.job_id(sequence);
    let mut plan = Vec::with_capacity(checked.message.operations.len());
    for (index, operation) in checked.message.operations.iter().enumerate() {
        let query = Query::from(operation.query());
        let read = job_operation(
            operation.name(),
            &query,
            inner.limits.max_pages,
            inner.limits.thumbnails,
        );
        match read {
            Ok(op) => plan.push(op),
            Err(e) => {
                let message = format!("operation {index} ({}): {}", operation.name(), e.message);
                return Err((id, ApiError { message, ..e }));
            }
        }
    }
    for (url, access) in [
        (&checked.input, crate::objects::Access::Read),
        (&checked.output, crate::objects::Access::Write),
    ] {
        inner.objects.check(url, access).map_err(|e| (id.clone(), ApiError::from(e)))?;
    }
    Ok((checked, plan))
}

async fn process(inner: &Arc<Inner>, message: &Message, held: &mut Held) -> Settle {
    let (sequence, delivered, published_ms) = match message.info() {
        Ok(info) => (
            info.stream_sequence,
            u64::try_from(info.delivered).unwrap_or(0),
            u64::try_from(info.published.unix_timestamp_nanos() / 1_000_000).unwrap_or(0),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "a job message without JetStream metadata; dropped");
            return Settle::Ack;
        }
    };
    let (checked, plan) = match read(inner, &message.payload, sequence) {
        Ok(read) => read,
        Err((id, error)) => {
            tracing::warn!(job = %id, sequence, error = %error.message, "refused a job message");
            let state = Tracked::new(id, Known::Unknown);
            finish(inner, &state, None, sequence, delivered, Err(failure(&error, None))).await;
            inner.metrics.ended("failed");
            return Settle::Ack;
        }
    };
    let id = checked.message.job_id(sequence);
    let has_webhook = checked.message.webhook.is_some();
    // Claim the job: decide and record in one compare-and-set (one request for a job published
    // straight to the stream, which has no state yet).
    let state = Tracked::new(id.clone(), Known::Absent);
    let mut claim = Claim::Drop("unknown");
    let claimed = state
        .change(inner, |job| {
            claim = claim::decide(job.as_ref(), sequence, inner.config.max_strikes, has_webhook);
            match claim {
                Claim::Run { strikes } => {
                    let job = job.get_or_insert_with(|| JobStatus::queued(id.clone(), now_ms()));
                    job.state = State::Running;
                    job.stream_sequence = Some(sequence);
                    job.deliveries = delivered;
                    job.strikes = strikes;
                    job.progress = Default::default();
                    job.started_ms = Some(now_ms());
                    job.pod_stopping = false;
                    Change::Write
                }
                _ => Change::Keep,
            }
        })
        .await;
    let job = match claimed {
        Ok(job) => job,
        Err(e) => {
            tracing::warn!(job = %id, error = %e, "cannot claim the job; handing it back");
            inner.metrics.ended("handed_back");
            return Settle::Nak(verdict::later_delay(delivered));
        }
    };
    // What a dead letter is made of, should this delivery end in one.
    let letter =
        Letter { checked: &checked, state: &state, sequence, delivered, payload: &message.payload };
    match claim {
        Claim::Run { .. } => {}
        Claim::Drop(why) => {
            tracing::info!(job = %id, sequence, why, "dropped a job message");
            inner.metrics.ended("dropped");
            return Settle::Ack;
        }
        Claim::Resend => {
            held.computed();
            if let Some(job) = job {
                notify(inner, &state, &checked, job).await;
            }
            inner.metrics.ended("dropped");
            return Settle::Ack;
        }
        Claim::DeadLetter { strikes } => {
            let last = job.as_ref().and_then(|j| j.error.clone());
            let reason = Failure {
                code: last.as_ref().map_or("pod_lost".into(), |f| f.code.clone()),
                status: last.as_ref().map_or(502, |f| f.status),
                message: format!(
                    "delivered {delivered} times; {strikes} of them ended with a dead worker or pod (last: {})",
                    last.as_ref().map_or("the pod running it stopped answering".into(), |f| f
                        .message
                        .clone())
                ),
                operation: last.as_ref().and_then(|f| f.operation),
            };
            held.computed();
            return dead_letter(inner, &letter, strikes, reason).await;
        }
    }
    if let Some(deadline) = checked.message.deadline_ms
        && now_ms() > published_ms.saturating_add(deadline)
    {
        let error = ApiError::new(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            "deadline_exceeded",
            format!("the job's deadline of {deadline} ms from publication passed before it ran"),
        );
        held.computed();
        finish(inner, &state, Some(&checked), sequence, delivered, Err(failure(&error, None)))
            .await;
        inner.metrics.ended("failed");
        return Settle::Ack;
    }
    let started = Instant::now();
    let runner = Runner::new(inner, &state, &checked, plan);
    let outcome = tokio::select! {
        outcome = runner.run() => outcome,
        never = mark_stopping(inner, &state, sequence) => match never {},
    };
    let outcome = match outcome {
        Ok(manifest) => {
            let url = outputs::manifest(&outputs::job_folder(&checked.output, &id));
            let written = manifest.operations.iter().map(|op| op.outputs.len()).sum::<usize>();
            let written = u32::try_from(written).unwrap_or(u32::MAX);
            match serde_json::to_vec(&manifest) {
                Ok(body) => {
                    match inner.objects.put(&url, Bytes::from(body), "application/json").await {
                        Ok(_) => Ok((url, written)),
                        Err(e) => Err(Stop::Failed { error: e.into(), operation: None }),
                    }
                }
                Err(e) => {
                    Err(Stop::Failed { error: ApiError::internal(e.to_string()), operation: None })
                }
            }
        }
        Err(stop) => Err(stop),
    };
    held.computed();
    inner.metrics.run.observe(started.elapsed().as_secs_f64());
    tracing::info!(job = %id, sequence, delivered, ms = started.elapsed().as_millis() as u64, ok = outcome.is_ok(), "job ran");
    match outcome {
        Ok(manifest) => {
            finish(inner, &state, Some(&checked), sequence, delivered, Ok(manifest)).await;
            inner.metrics.ended("done");
            Settle::Ack
        }
        Err(Stop::Cancelled) => {
            inner.metrics.ended("cancelled");
            Settle::Ack
        }
        Err(Stop::Aborted) => {
            hand_back(inner, &state, None, false).await;
            inner.metrics.ended("handed_back");
            Settle::Nak(Duration::ZERO)
        }
        Err(Stop::Failed { error, operation }) => {
            let failed = failure(&error, operation);
            match verdict::judge(error.code) {
                Verdict::Fail => {
                    finish(inner, &state, Some(&checked), sequence, delivered, Err(failed)).await;
                    inner.metrics.ended("failed");
                    Settle::Ack
                }
                Verdict::Later => {
                    hand_back(inner, &state, Some(failed), false).await;
                    inner.metrics.ended("handed_back");
                    Settle::Nak(verdict::later_delay(delivered))
                }
                Verdict::Strike => {
                    let strikes = hand_back(inner, &state, Some(failed.clone()), true).await;
                    if strikes >= inner.config.max_strikes {
                        let reason = Failure {
                            message: format!(
                                "{strikes} deliveries ended with a dead worker or pod (last: {})",
                                failed.message
                            ),
                            ..failed
                        };
                        dead_letter(inner, &letter, strikes, reason).await
                    } else {
                        inner.metrics.ended("handed_back");
                        Settle::Nak(Duration::ZERO)
                    }
                }
            }
        }
    }
}

/// Once the pod is told to stop, records so in the job's state, seconds before its grace period
/// ends (see `JobStatus::pod_stopping`); never returns.
async fn mark_stopping(inner: &Inner, state: &Tracked, sequence: u64) -> std::convert::Infallible {
    let mut stop = inner.stop.subscribe();
    if stop.wait_for(|s| *s).await.is_ok() {
        let marked = state
            .change(inner, |job| match job {
                Some(job)
                    if job.state == State::Running
                        && job.stream_sequence == Some(sequence)
                        && !job.pod_stopping =>
                {
                    job.pod_stopping = true;
                    Change::Write
                }
                _ => Change::Keep,
            })
            .await;
        if let Err(e) = marked {
            tracing::warn!(job = %state.id, error = %e, "cannot record that the job's pod is stopping");
        }
    }
    std::future::pending().await
}

/// Records the job as queued again (with the failure that sent it back, and a strike when it
/// is one); returns its strikes.
async fn hand_back(inner: &Inner, state: &Tracked, error: Option<Failure>, strike: bool) -> u32 {
    let mut strikes = 0;
    let written = state
        .change(inner, |job| match job {
            Some(job) if job.state == State::Running => {
                job.state = State::Queued;
                job.pod_stopping = false;
                if error.is_some() {
                    job.error = error.clone();
                }
                if strike {
                    job.strikes = job.strikes.saturating_add(1);
                }
                strikes = job.strikes;
                Change::Write
            }
            Some(job) => {
                strikes = job.strikes;
                Change::Keep
            }
            None => Change::Keep,
        })
        .await;
    if let Err(e) = written {
        tracing::warn!(job = %state.id, error = %e, "cannot record the job as handed back");
    }
    strikes
}

/// The message a dead letter is made of.
struct Letter<'a> {
    checked: &'a Checked,
    state: &'a Tracked,
    sequence: u64,
    delivered: u64,
    payload: &'a [u8],
}

/// Moves the job to the dead-letter stream with its reason, records it failed, tells whom it
/// must.
async fn dead_letter(inner: &Inner, letter: &Letter<'_>, strikes: u32, reason: Failure) -> Settle {
    let Letter { checked, state, sequence, delivered, payload } = *letter;
    let id = &state.id;
    let original = serde_json::from_slice::<serde_json::Value>(payload).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(payload).into_owned())
    });
    let letter = serde_json::json!({
        "job": id,
        "reason": reason,
        "deliveries": delivered,
        "strikes": strikes,
        "stream_sequence": sequence,
        "message": original,
    });
    let body = Bytes::from(letter.to_string());
    if let Err(e) =
        inner.broker.dead_letter(id, &format!("{}: {}", reason.code, reason.message), body).await
    {
        tracing::warn!(job = %id, error = %e, "cannot move the job to the dead-letter stream; handing it back");
        inner.metrics.ended("handed_back");
        return Settle::Nak(verdict::later_delay(delivered));
    }
    inner.metrics.ended("dead_lettered");
    tracing::warn!(job = %id, sequence, strikes, reason = %reason.message, "job moved to the dead-letter stream");
    let ended = record_end(inner, state, sequence, delivered, Err(reason), true).await;
    if let Some(job) = ended {
        notify(inner, state, checked, job).await;
    }
    Settle::Ack
}

/// Records the job's end (done with its manifest, or failed), then announces it and sends its
/// webhook.
async fn finish(
    inner: &Inner,
    state: &Tracked,
    checked: Option<&Checked>,
    sequence: u64,
    delivered: u64,
    end: Result<(ObjectUrl, u32), Failure>,
) {
    let ended = record_end(inner, state, sequence, delivered, end, false).await;
    if let (Some(job), Some(checked)) = (ended, checked) {
        notify(inner, state, checked, job).await;
    }
}

async fn record_end(
    inner: &Inner,
    state: &Tracked,
    sequence: u64,
    delivered: u64,
    end: Result<(ObjectUrl, u32), Failure>,
    dead: bool,
) -> Option<JobStatus> {
    let written = state
        .change(inner, |job| {
            if job.as_ref().is_some_and(|j| j.state == State::Cancelled) {
                return Change::Keep;
            }
            let job = job.get_or_insert_with(|| JobStatus::queued(state.id.clone(), now_ms()));
            job.stream_sequence = Some(sequence);
            job.deliveries = delivered;
            job.dead_lettered = dead;
            job.pod_stopping = false;
            match &end {
                Ok((manifest, outputs)) => {
                    job.state = State::Done;
                    job.manifest_url = Some(manifest.to_string());
                    job.progress = Progress { done: *outputs, total: *outputs };
                    job.error = None;
                }
                Err(failure) => {
                    job.state = State::Failed;
                    job.error = Some(failure.clone());
                }
            }
            Change::Write
        })
        .await;
    match written {
        Ok(job) => job.filter(|j| j.state.is_final() && j.state != State::Cancelled),
        Err(e) => {
            tracing::warn!(job = %state.id, error = %e, "cannot record the job's end");
            None
        }
    }
}

/// Announces the job's end and sends its webhook (recording how that went).
async fn notify(inner: &Inner, state: &Tracked, checked: &Checked, job: JobStatus) {
    let kind = match job.state {
        State::Done => "job.done",
        _ => "job.failed",
    };
    let event = JobEvent {
        kind: kind.into(),
        timestamp: outputs::rfc3339(job.updated_ms),
        data: job.clone(),
    };
    let body = match serde_json::to_vec(&event) {
        Ok(body) => Bytes::from(body),
        Err(e) => {
            tracing::error!(job = %job.id, error = %e, "cannot serialise the job's end");
            return;
        }
    };
    if let Err(e) = inner.broker.announce(&job.id, body.clone()).await {
        tracing::warn!(job = %job.id, error = %e, "cannot announce the job's end");
    }
    let Some(hook) = &checked.message.webhook else { return };
    let abort = inner.abort.subscribe();
    let delivered = webhook::deliver(
        &inner.config.webhook,
        &hook.url,
        &job.id,
        body,
        job.webhook.as_ref(),
        || *abort.borrow(),
    )
    .await;
    let result = if delivered.delivered { "delivered" } else { "failed" };
    count(&inner.metrics.webhooks, "result", result);
    let written = state
        .change(inner, |found| match found {
            Some(found) => {
                found.webhook = Some(delivered.clone());
                Change::Write
            }
            None => Change::Keep,
        })
        .await;
    if let Err(e) = written {
        tracing::warn!(job = %job.id, error = %e, "cannot record the webhook's outcome");
    }
}
