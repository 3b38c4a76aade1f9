//! The process-per-slot engine: a bounded global queue in front of N supervised worker processes.
//!
//! PDFium is not thread-safe, so each slot is a child process of this binary (`render-pod
//! worker`) with its own PDFium, fed over pipes. Nothing here runs PDFium in this process: the
//! async front only queues, waits and answers.

mod confine;
mod fatal;
mod job;
mod poison;
mod policy;
mod process;
mod procfs;
mod protocol;
mod slot;
mod verdict;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::ops::{DocHash, OpOutput};

pub use confine::{Confinement, WORKER_OOM_SCORE_ADJ, spare_supervisor};
pub use job::{JobError, Task};
pub use policy::{MovingAverage, entropy, retry_after_secs};
pub use process::WorkerCommand;
pub use procfs::Memory;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Worker processes.
    pub slots: u32,
    /// Jobs that may wait for a slot; more are refused at once.
    pub queue_depth: usize,
    /// Time from arrival after which a job is dropped or its worker killed.
    pub job_deadline: Duration,
    /// Jobs after which a worker is replaced (plus up to 10% jitter).
    pub recycle_after_jobs: u64,
    /// Resident memory above which a worker is replaced after its job.
    pub recycle_rss: u64,
    /// How long a document that crashed a worker is refused.
    pub poison_ttl: Duration,
    /// How long a running job whose client went away may still finish before its worker is
    /// killed and replaced.
    pub cancel_grace: Duration,
    /// How long a worker gets to exit after its stdin closes.
    pub stop_grace: Duration,
    /// How to start a worker.
    pub worker: WorkerCommand,
}

/// Per-slot state the front reads for `/readyz`.
#[derive(Debug, Default)]
struct SlotStatus {
    pid: AtomicU32,
    busy: AtomicBool,
    jobs: AtomicU64,
}

/// State shared by the slots and the front.
struct Shared {
    config: EngineConfig,
    metrics: Arc<Metrics>,
    queue: Mutex<mpsc::Receiver<job::Job>>,
    poison: poison::PoisonList,
    slots: Vec<SlotStatus>,
    /// Job time, for `Retry-After`.
    average_job: policy::MovingAverage,
}

/// One worker as `/readyz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerView {
    /// Slot index.
    pub slot: usize,
    /// Worker process id; `None` while the slot is (re)starting its worker.
    pub pid: Option<u32>,
    /// Running a job now.
    pub busy: bool,
    /// Jobs this worker has run.
    pub jobs: u64,
    /// Its memory, when alive.
    pub memory: Option<Memory>,
}

/// A snapshot of the engine.
#[derive(Debug, Clone, Serialize)]
pub struct EngineStatus {
    /// Slots configured.
    pub slots: u32,
    /// Slots with a live worker.
    pub alive: u32,
    /// Slots running a job.
    pub busy: u32,
    /// Jobs waiting.
    pub queued: usize,
    /// Queue capacity.
    pub queue_depth: usize,
    /// Each worker's hard memory ceiling (`RLIMIT_DATA`), if any.
    pub memory_ceiling_bytes: Option<u64>,
    /// Each slot.
    pub workers: Vec<WorkerView>,
}

/// The running engine.
pub struct Engine {
    shared: Arc<Shared>,
    sender: mpsc::Sender<job::Job>,
    shutdown: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts one supervisor task per slot; workers come up in the background.
    pub fn start(config: EngineConfig, metrics: Arc<Metrics>) -> Self {
        let (sender, receiver) = mpsc::channel(config.queue_depth.max(1));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let slots = (0..config.slots).map(|_| SlotStatus::default()).collect();
        let shared = Arc::new(Shared {
            poison: poison::PoisonList::new(config.poison_ttl, poison::CAPACITY),
            config,
            metrics,
            queue: Mutex::new(receiver),
            slots,
            average_job: policy::MovingAverage::default(),
        });
        let tasks = (0..shared.slots.len())
            .map(|index| tokio::spawn(slot::run(shared.clone(), index, shutdown_rx.clone())))
            .collect();
        Self { shared, sender, shutdown, tasks: std::sync::Mutex::new(tasks) }
    }

    /// The deadline of a request that arrived at `arrived`.
    pub fn deadline(&self, arrived: Instant) -> Instant {
        arrived + self.shared.config.job_deadline
    }

    /// Refuses a document that recently crashed a worker.
    pub fn check_quarantine(&self, hash: &DocHash) -> Result<(), JobError> {
        match self.shared.poison.remaining(hash, Instant::now()) {
            Some(left) => {
                self.shared.metrics.reject("quarantined");
                Err(JobError::Quarantined { remaining_secs: left.as_secs() + 1 })
            }
            None => Ok(()),
        }
    }

    /// Refuses at once when the queue is full, before a request's body is even read.
    pub fn ensure_room(&self) -> Result<(), JobError> {
        if self.sender.capacity() == 0 { Err(self.overloaded()) } else { Ok(()) }
    }

    /// Runs one task and waits for its answer.
    pub async fn run(&self, task: Task, arrived: Instant) -> Result<OpOutput, JobError> {
        self.check_quarantine(&task.hash)?;
        let permit = self.sender.try_reserve().map_err(|_| self.overloaded())?;
        let rx = self.enqueue(permit, task, arrived);
        self.wait(rx, arrived).await
    }

    /// Runs the page tasks of one request (a filmstrip) through the shared queue, at most one
    /// per slot in flight. The first batch is admitted at once or refused like any request; later
    /// pages wait for queue room within the deadline. The first failure fails the request.
    pub async fn run_all(
        &self,
        tasks: Vec<Task>,
        arrived: Instant,
    ) -> Result<Vec<OpOutput>, JobError> {
        if let Some(first) = tasks.first() {
            self.check_quarantine(&first.hash)?;
        }
        let window =
            usize::try_from(self.shared.config.slots).unwrap_or(1).clamp(1, tasks.len().max(1));
        let mut tasks = tasks.into_iter();
        let permits = self.sender.try_reserve_many(window).map_err(|_| self.overloaded())?;
        let mut pending: std::collections::VecDeque<_> = permits
            .zip(&mut tasks)
            .map(|(permit, task)| self.enqueue(permit, task, arrived))
            .collect();
        let mut outputs = Vec::with_capacity(pending.len() + tasks.len());
        while let Some(rx) = pending.pop_front() {
            outputs.push(self.wait(rx, arrived).await?);
            if let Some(task) = tasks.next() {
                let permit = match tokio::time::timeout_at(
                    self.deadline(arrived).into(),
                    self.sender.reserve(),
                )
                .await
                {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(JobError::Draining),
                    Err(_) => {
                        return Err(JobError::DeadlineExceeded {
                            deadline: self.shared.config.job_deadline,
                            queued: true,
                        });
                    }
                };
                pending.push_back(self.enqueue(permit, task, arrived));
            }
        }
        Ok(outputs)
    }

    fn enqueue(
        &self,
        permit: mpsc::Permit<'_, job::Job>,
        task: Task,
        arrived: Instant,
    ) -> oneshot::Receiver<Result<OpOutput, JobError>> {
        let (reply, rx) = oneshot::channel();
        self.shared.metrics.queue_depth.inc();
        permit.send(job::Job { task, arrived, deadline: self.deadline(arrived), reply });
        rx
    }

    async fn wait(
        &self,
        rx: oneshot::Receiver<Result<OpOutput, JobError>>,
        arrived: Instant,
    ) -> Result<OpOutput, JobError> {
        // A little past the deadline, so the slot's own answer (queued or killed) wins the race.
        let give_up = self.deadline(arrived) + Duration::from_millis(250);
        match tokio::time::timeout_at(give_up.into(), rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(JobError::Draining),
            Err(_) => Err(JobError::DeadlineExceeded {
                deadline: self.shared.config.job_deadline,
                queued: true,
            }),
        }
    }

    fn overloaded(&self) -> JobError {
        self.shared.metrics.reject("queue_full");
        let average = self.shared.average_job.get();
        let queued = self.queued();
        JobError::QueueFull {
            slots: self.shared.config.slots,
            depth: self.shared.config.queue_depth,
            retry_after_secs: policy::retry_after_secs(queued, self.shared.config.slots, average),
        }
    }

    fn queued(&self) -> usize {
        self.sender.max_capacity() - self.sender.capacity()
    }

    /// What every slot is doing.
    pub fn status(&self) -> EngineStatus {
        let workers: Vec<WorkerView> = self
            .shared
            .slots
            .iter()
            .enumerate()
            .map(|(slot, s)| {
                let pid = Some(s.pid.load(Ordering::Relaxed)).filter(|p| *p != 0);
                WorkerView {
                    slot,
                    pid,
                    busy: s.busy.load(Ordering::Relaxed),
                    jobs: s.jobs.load(Ordering::Relaxed),
                    memory: pid.and_then(procfs::memory),
                }
            })
            .collect();
        let count = |f: &dyn Fn(&WorkerView) -> bool| {
            u32::try_from(workers.iter().filter(|w| f(w)).count()).unwrap_or(u32::MAX)
        };
        EngineStatus {
            slots: self.shared.config.slots,
            alive: count(&|w| w.pid.is_some()),
            busy: count(&|w| w.busy),
            queued: self.queued(),
            queue_depth: self.shared.config.queue_depth,
            memory_ceiling_bytes: self.shared.config.worker.confinement.memory_ceiling,
            workers,
        }
    }

    /// Stops every slot: idle workers get their stdin closed and exit; waits for all of them.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(_) => Vec::new(),
        };
        for task in tasks {
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::limits::DetectedLimits;
    use crate::ops::Op;
    use renderpool_sizing::SlotPlan;

    /// An engine whose workers can never start, so jobs stay queued.
    fn stalled_engine(queue_depth: usize, deadline: Duration) -> Engine {
        let plan = SlotPlan {
            slots: 1,
            cpu_slots: 1,
            memory_slots: 1,
            overridden: true,
            reason: "test".into(),
        };
        let limits = DetectedLimits {
            cpu_millis: 1000,
            cpu_source: "test".into(),
            memory_bytes: 1 << 30,
            memory_source: "test".into(),
        };
        let config = EngineConfig {
            slots: 1,
            queue_depth,
            job_deadline: deadline,
            recycle_after_jobs: 10,
            recycle_rss: 1 << 29,
            poison_ttl: Duration::from_secs(60),
            cancel_grace: Duration::from_millis(100),
            stop_grace: Duration::from_millis(100),
            worker: WorkerCommand {
                exe: "/nonexistent/render-pod".into(),
                args: Vec::new(),
                ready_timeout: Duration::from_millis(100),
                confinement: Confinement { nice: 0, memory_ceiling: None },
            },
        };
        Engine::start(config, Arc::new(Metrics::new(&plan, &limits)))
    }

    fn task(doc: &'static [u8]) -> Task {
        Task {
            doc: axum::body::Bytes::from_static(doc),
            hash: DocHash::of(doc),
            password: None,
            op: Op::Info,
        }
    }

    #[tokio::test]
    async fn full_queue_refuses_at_once_and_queued_jobs_expire() {
        let engine = Arc::new(stalled_engine(1, Duration::from_millis(300)));
        let queued = {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run(task(b"a"), Instant::now()).await })
        };
        while engine.status().queued == 0 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(engine.ensure_room(), Err(JobError::QueueFull { .. })));
        let refused = engine.run(task(b"b"), Instant::now()).await.unwrap_err();
        assert!(matches!(refused, JobError::QueueFull { slots: 1, depth: 1, .. }), "{refused:?}");
        assert!(refused.retry_after_secs().is_some());
        let expired = queued.await.unwrap().unwrap_err();
        assert!(matches!(expired, JobError::DeadlineExceeded { queued: true, .. }), "{expired:?}");
        assert_eq!(engine.status().alive, 0);
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn quarantined_documents_are_refused_before_queueing() {
        let engine = stalled_engine(4, Duration::from_secs(5));
        engine.shared.poison.convict(DocHash::of(b"crasher"), Instant::now());
        let err = engine.run(task(b"crasher"), Instant::now()).await.unwrap_err();
        assert!(matches!(err, JobError::Quarantined { .. }), "{err:?}");
        assert_eq!(engine.status().queued, 0);
        engine.shutdown().await;
    }
}
