//! One slot: keeps a worker process alive and feeds it jobs from the global queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::ops::Op;

use super::job::{Job, JobError};
use super::policy::{self, Backoff, HEALTHY_LIFETIME};
use super::process::WorkerProcess;
use super::protocol::{self, JobHeader};
use super::{Shared, SlotStatus};

/// Why a worker's service ended.
enum End {
    /// The engine is stopping.
    Shutdown,
    /// Planned replacement (`recycle_jobs` or `recycle_memory`).
    Recycle(&'static str),
    /// The worker is gone (`crash`, `deadline`), already reaped.
    Died(&'static str),
}

/// Runs slot `index` until shutdown: start a worker, serve jobs, replace it when it ends.
pub async fn run(shared: Arc<Shared>, index: usize, mut shutdown: watch::Receiver<bool>) {
    let status = &shared.slots[index];
    let metrics = &shared.metrics;
    let mut backoff = Backoff::new();
    metrics.slot_state(None, "down");
    while !*shutdown.borrow() {
        let mut worker = match WorkerProcess::spawn(&shared.config.worker).await {
            Ok(worker) => worker,
            Err(error) => {
                tracing::error!(slot = index, %error, "worker failed to start");
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
        status.pid.store(0, Ordering::Relaxed);
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
    let recycle_limit = policy::recycle_after(shared.config.recycle_after_jobs, policy::entropy());
    let mut jobs = 0u64;
    loop {
        // A worker that died while idle is noticed before the next job is handed to it, so an
        // innocent document is never blamed (and quarantined) for that death.
        let next = tokio::select! {
            biased;
            exit = worker.exited() => {
                let detail = exit.map(super::procfs::describe_exit).unwrap_or_else(|e| e.to_string());
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
        if worker.memory().is_some_and(|m| m.rss_bytes > shared.config.memory_per_slot) {
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
    if job.reply.is_closed() {
        metrics.reject("client_gone");
        return None;
    }
    if now >= job.deadline {
        metrics.reject("deadline_in_queue");
        let _ = job.reply.send(Err(JobError::DeadlineExceeded {
            deadline: job.deadline - job.arrived,
            queued: true,
        }));
        return None;
    }
    if let Some(left) = shared.poison.remaining(&job.task.hash, now) {
        // It crashed a worker while this job waited behind it.
        metrics.reject("quarantined");
        let _ = job.reply.send(Err(JobError::Quarantined { remaining_secs: left.as_secs() + 1 }));
        return None;
    }
    metrics.queue_wait.observe((now - job.arrived).as_secs_f64());
    let op = op_name(&job.task.op);
    let same_document = worker.holds(&job.task.hash);
    let header = JobHeader {
        same_document,
        hash: job.task.hash,
        password: job.task.password.clone(),
        op: job.task.op.clone(),
    };
    let header = match protocol::encode(&header) {
        Ok(header) => header,
        Err(e) => {
            let detail = format!("cannot encode job: {e}");
            let _ = job.reply.send(Err(crate::ops::OpError::Internal { detail }.into()));
            return None;
        }
    };
    status.busy.store(true, Ordering::Relaxed);
    metrics.slot_state(Some("idle"), "busy");
    let started = Instant::now();
    let doc = (!same_document).then_some(&job.task.doc[..]);
    let outcome =
        tokio::time::timeout_at(job.deadline.into(), worker.run(&header, doc, job.task.hash)).await;
    let elapsed = started.elapsed();
    status.busy.store(false, Ordering::Relaxed);
    metrics.slot_state(Some("busy"), "idle");
    metrics.job_duration.get_or_create(&vec![("op", op)]).observe(elapsed.as_secs_f64());
    let (reply, end, outcome_label) = match outcome {
        Err(_) => {
            worker.kill().await;
            tracing::warn!(pid = worker.pid(), op, "job passed its deadline; worker killed");
            let deadline = job.deadline - job.arrived;
            (
                Err(JobError::DeadlineExceeded { deadline, queued: false }),
                Some(End::Died("deadline")),
                "deadline",
            )
        }
        Ok(Err(pipe)) => {
            let detail = worker.reap_after_pipe_error().await;
            tracing::error!(pid = worker.pid(), op, %pipe, detail, "worker crashed during a job");
            shared.poison.add(job.task.hash, Instant::now());
            (Err(JobError::WorkerCrashed { detail }), Some(End::Died("crash")), "crashed")
        }
        Ok(Ok(result)) => {
            shared.average_job.record(elapsed);
            let label = match &result {
                Ok(_) => "ok",
                Err(e) => e.code(),
            };
            (result.map_err(JobError::from), None, label)
        }
    };
    metrics.jobs.get_or_create(&vec![("op", op), ("outcome", outcome_label)]).inc();
    let _ = job.reply.send(reply);
    end
}

/// The metrics label for an operation.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Info => "info",
        Op::Extract { .. } => "extract",
        Op::Render { .. } => "render",
        Op::Watermark { .. } => "watermark",
    }
}
