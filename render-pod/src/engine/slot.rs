//! One slot: keeps a worker process alive and feeds it jobs from the global queue.

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use renderpool_runtime::pacing;
use tokio::sync::{oneshot, watch};

use crate::byte_budget::ByteBudget;
use crate::ops::{DocHash, Op, OpError, OpOutput};

use super::job::{Job, JobError, Timing};
use super::policy::{self, CrashLoop, HEALTHY_LIFETIME};
use super::process::{AnswerRefused, Reply, WorkerProcess};
use super::protocol::{self, JobHeader, ProtocolError};
use super::verdict::{self, Blame, Ending};
use super::{Shared, SlotStatus, procfs};
use crate::quarantine::WorkClass;

/// Why a worker's service ended.
enum End {
    /// The engine is stopping.
    Shutdown,
    /// Planned replacement (`recycle_jobs` or `recycle_memory`).
    Recycle(&'static str),
    /// The worker is gone (`crash`, `killed`, `memory_limit`, `deadline`, `cancelled`), already
    /// reaped.
    Died(&'static str),
}

/// Runs slot `index` until shutdown: start a worker, serve jobs, replace it when it ends.
pub async fn run(shared: Arc<Shared>, index: usize, mut shutdown: watch::Receiver<bool>) {
    let status = &shared.slots[index];
    let metrics = &shared.metrics;
    let mut backoff = CrashLoop::new();
    metrics.slot_state(None, "down");
    while !*shutdown.borrow() {
        let mut worker = match WorkerProcess::spawn(&shared.config.worker).await {
            Ok(worker) => worker,
            Err(error) => {
                tracing::error!(slot = index, %error, "worker failed to start");
                status.replacing.store(false, Ordering::Relaxed);
                metrics.restart("spawn_failed");
                if sleep_unless_shutdown(backoff.after_exit(true), &mut shutdown).await {
                    break;
                }
                continue;
            }
        };
        tracing::info!(slot = index, pid = worker.pid(), "worker ready");
        status.pid.store(worker.pid(), Ordering::Relaxed);
        status.jobs.store(0, Ordering::Relaxed);
        metrics.slot_state(Some("down"), "idle");
        let end = serve(&shared, status, &mut worker, &mut shutdown).await;
        // Set before the pid goes (released with it), so readiness never sees a slot that is
        // neither alive nor replacing; a live pid makes the flag moot, so it is never cleared.
        status.replacing.store(true, Ordering::Relaxed);
        status.pid.store(0, Ordering::Release);
        metrics.slot_state(Some("idle"), "down");
        let died_young = worker.age() < HEALTHY_LIFETIME;
        let pid = worker.pid();
        worker.stop(shared.config.stop_grace).await;
        let reason = match end {
            End::Shutdown => break,
            End::Recycle(reason) | End::Died(reason) => reason,
        };
        tracing::info!(slot = index, pid, reason, "replacing worker");
        metrics.restart(reason);
        let delay = backoff.after_exit(died_young && reason == "crash");
        // A crash-looping slot waits out its backoff: it does not count towards readiness.
        status.replacing.store(delay.is_zero(), Ordering::Relaxed);
        if sleep_unless_shutdown(delay, &mut shutdown).await {
            break;
        }
    }
    metrics.slots.get_or_create(&vec![("state", "down")]).dec();
}

/// Waits `delay`; true if shutdown came first.
async fn sleep_unless_shutdown(delay: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if delay.is_zero() {
        return *shutdown.borrow();
    }
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = shutdown.wait_for(|stop| *stop) => true,
    }
}

/// Feeds jobs to one worker until it must be replaced or the engine stops.
async fn serve(
    shared: &Shared,
    status: &SlotStatus,
    worker: &mut WorkerProcess,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    let recycle_limit = policy::recycle_after(shared.config.recycle_after_jobs, pacing::entropy());
    let mut jobs = 0u64;
    loop {
        // A worker that died while idle is noticed before the next job is handed to it, so an
        // innocent document is never blamed (and quarantined) for that death.
        let next = tokio::select! {
            biased;
            exit = worker.exited() => {
                let detail = exit.map(procfs::describe_exit).unwrap_or_else(|e| e.to_string());
                tracing::error!(pid = worker.pid(), detail, "idle worker died");
                return End::Died("crash");
            }
            _ = shutdown.wait_for(|stop| *stop) => return End::Shutdown,
            job = async { shared.queue.lock().await.recv().await } => job,
        };
        let Some(job) = next else {
            return End::Shutdown;
        };
        shared.metrics.queue_depth.dec();
        if let Some(end) = run_job(shared, status, worker, job).await {
            return end;
        }
        jobs += 1;
        status.jobs.store(jobs, Ordering::Relaxed);
        if jobs >= recycle_limit {
            return End::Recycle("recycle_jobs");
        }
        if worker.resident_bytes().is_some_and(|rss| rss > shared.config.recycle_rss) {
            return End::Recycle("recycle_memory");
        }
    }
}

/// Runs one job; `Some` when the worker did not survive it.
async fn run_job(
    shared: &Shared,
    status: &SlotStatus,
    worker: &mut WorkerProcess,
    job: Job,
) -> Option<End> {
    let metrics = &shared.metrics;
    let now = Instant::now();
    let Job { task, timing, mut reply } = job;
    if reply.is_closed() {
        metrics.reject("client_gone");
        return None;
    }
    if now >= timing.effective() {
        metrics.reject("deadline_in_queue");
        let _ = reply
            .send(Err(JobError::DeadlineExceeded { deadline: timing.allowed(), queued: true }));
        return None;
    }
    let work = WorkClass::of(&task.op);
    if let Some(left) = shared.poison.remaining(&task.hash, work, now) {
        // It crashed a worker while this job waited behind it.
        metrics.reject("quarantined");
        let remaining_secs = left.as_secs() + 1;
        let _ = reply.send(Err(JobError::Quarantined { remaining_secs, work }));
        return None;
    }
    metrics.queue_wait.observe((now - timing.arrived).as_secs_f64());
    let op = op_name(&task.op);
    let same_document = worker.holds(&task.hash);
    let header = JobHeader {
        same_document,
        hash: task.hash,
        password: task.password.clone(),
        op: task.op.clone(),
    };
    let header = match protocol::encode(&header) {
        Ok(header) => header,
        Err(e) => {
            let detail = format!("cannot encode job: {e}");
            let _ = reply.send(Err(OpError::Internal { detail }.into()));
            return None;
        }
    };
    status.busy.store(true, Ordering::Relaxed);
    metrics.slot_state(Some("idle"), "busy");
    let started = Instant::now();
    let doc = (!same_document).then_some(&task.doc[..]);
    let run =
        Run { header: &header, doc, hash: task.hash, timing, answers: &shared.config.answers };
    let outcome = supervise(worker, run, shared.config.cancel_grace, &mut reply).await;
    let elapsed = started.elapsed();
    status.busy.store(false, Ordering::Relaxed);
    shared.turns.slot_freed();
    metrics.slot_state(Some("busy"), "idle");
    metrics.job_duration.get_or_create(&vec![("op", op)]).observe(elapsed.as_secs_f64());
    let (answer, end, outcome_label) = match outcome {
        Outcome::Answered(result) => {
            shared.average_job.record(elapsed);
            let label = match &result {
                Ok(_) => "ok",
                Err(e) => e.code(),
            };
            (Some(result.map_err(JobError::from)), None, label)
        }
        Outcome::Refused(refused) => {
            shared.average_job.record(elapsed);
            let (error, reason) = if refused.bytes > refused.budget {
                let error =
                    JobError::AnswerTooLarge { bytes: refused.bytes, budget: refused.budget };
                (error, "answer_too_large")
            } else {
                // The budget frees as clients read their answers (or are cut off): about
                // a job's time, as for a full queue.
                let retry_after_secs =
                    pacing::retry_after_secs(0, shared.config.slots, shared.average_job.get());
                let error = JobError::AnswerBudgetExhausted {
                    bytes: refused.bytes,
                    budget: refused.budget,
                    retry_after_secs,
                };
                (error, "answer_budget")
            };
            metrics.reject(reason);
            let label = error.code();
            (Some(Err(error)), None, label)
        }
        Outcome::Cancelled => {
            tracing::info!(pid = worker.pid(), op, "client gone mid-job; worker killed");
            (None, Some(End::Died("cancelled")), "cancelled")
        }
        Outcome::ClientDeadline => {
            tracing::info!(
                pid = worker.pid(),
                op,
                "client's deadline passed mid-job; worker killed"
            );
            let late = JobError::DeadlineExceeded { deadline: timing.allowed(), queued: false };
            (Some(Err(late)), Some(End::Died("client_deadline")), "client_deadline")
        }
        Outcome::Died(ending) => {
            let verdict = verdict::judge(&ending, shared.config.worker.confinement.memory_ceiling);
            let quarantined = match verdict.blame {
                Blame::Guilty => {
                    shared.poison.convict(task.hash, work, Instant::now());
                    true
                }
                Blame::Strike => shared.poison.strike(task.hash, work, Instant::now()),
                Blame::Acquitted => false,
            };
            tracing::warn!(
                pid = worker.pid(),
                op,
                ending = ?ending,
                error = %verdict.error,
                blame = ?verdict.blame,
                quarantined,
                "worker lost during a job"
            );
            (Some(Err(verdict.error)), Some(End::Died(verdict.restart)), verdict.outcome)
        }
    };
    metrics.jobs.get_or_create(&vec![("op", op), ("outcome", outcome_label)]).inc();
    if let Some(answer) = answer {
        let _ = reply.send(answer);
    }
    end
}

/// One job handed to a worker.
struct Run<'a> {
    header: &'a [u8],
    doc: Option<&'a [u8]>,
    hash: DocHash,
    timing: Timing,
    /// Where the answer's bytes are reserved before they are read.
    answers: &'a Arc<ByteBudget>,
}

/// How a job handed to a worker ended.
enum Outcome {
    /// The worker answered (and lives on).
    Answered(Result<OpOutput, OpError>),
    /// The worker answered, but the answer budget had no room for it (the worker lives on).
    Refused(AnswerRefused),
    /// The client left and the job outlasted the grace: the worker was killed.
    Cancelled,
    /// The client's own deadline passed and the job outlasted the grace: the worker was killed
    /// (the document is not to blame for a deadline it did not set).
    ClientDeadline,
    /// The worker is gone, and this is how.
    Died(Ending),
}

/// Runs the job on the worker while watching its deadlines and its client. A client that goes
/// away, or whose own deadline passes, leaves the job `grace` to finish (a worker that answers
/// lives on); past that the worker is killed and replaced, because the rest of the job costs the
/// slot more than a new worker.
async fn supervise(
    worker: &mut WorkerProcess,
    run: Run<'_>,
    grace: Duration,
    reply: &mut oneshot::Sender<Result<OpOutput, JobError>>,
) -> Outcome {
    let started = Instant::now();
    let step = {
        let answer = worker.run(run.header, run.doc, run.hash, run.answers);
        tokio::pin!(answer);
        let client_deadline = async {
            match run.timing.client_deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            answer = &mut answer => Step::Finished(answer),
            () = tokio::time::sleep_until(run.timing.deadline.into()) => Step::Deadline,
            () = reply.closed() => match tokio::time::timeout(grace, &mut answer).await {
                Ok(answer) => Step::Finished(answer),
                Err(_) => Step::Cancelled,
            },
            () = client_deadline => match tokio::time::timeout(grace, &mut answer).await {
                Ok(answer) => Step::Finished(answer),
                Err(_) => Step::ClientDeadline,
            },
        }
    };
    match step {
        Step::Finished(Ok(Reply::Done(result))) => Outcome::Answered(result),
        Step::Finished(Ok(Reply::Refused(refused))) => Outcome::Refused(refused),
        Step::Finished(Ok(Reply::Dying(report))) => {
            worker.reap().await;
            Outcome::Died(Ending::Reported(report))
        }
        Step::Finished(Err(pipe)) => {
            let exit = worker.reap().await;
            let how = match exit {
                Some(status) => procfs::describe_exit(status),
                None => format!("pipe broke ({pipe})"),
            };
            Outcome::Died(Ending::Unreported { signal: exit.and_then(|s| s.signal()), how })
        }
        Step::Deadline => {
            worker.kill().await;
            let deadline = run.timing.deadline - run.timing.arrived;
            Outcome::Died(Ending::Deadline { ran: started.elapsed(), deadline })
        }
        Step::Cancelled => {
            worker.kill().await;
            Outcome::Cancelled
        }
        Step::ClientDeadline => {
            worker.kill().await;
            Outcome::ClientDeadline
        }
    }
}

/// Where the wait for a worker's answer stopped.
enum Step {
    Finished(Result<Reply, ProtocolError>),
    Deadline,
    Cancelled,
    ClientDeadline,
}

/// The metrics label for an operation.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Info => "info",
        Op::Measure { .. } => "measure",
        Op::Extract { .. } => "extract",
        Op::Render { .. } => "render",
        Op::Watermark { .. } => "watermark",
    }
}
