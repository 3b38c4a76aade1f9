//! The process-per-slot engine: a bounded global queue in front of N supervised worker processes.
//!
//! PDFium is not thread-safe, so each slot is a child process of this binary (`render-pod
//! worker`) with its own PDFium, fed over pipes. Nothing here runs PDFium in this process: the
//! async front only queues, waits and answers.

mod background;
mod confine;
mod fatal;
mod job;
mod metrics;
mod policy;
mod process;
mod procfs;
mod protocol;
pub mod sandbox;
mod slot;
mod verdict;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use renderpool_runtime::pacing::{self, MovingAverage};
use serde::Serialize;
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::byte_budget::ByteBudget;
use crate::ops::{DocHash, OpOutput};
use crate::quarantine::{PoisonList, WorkClass};

pub use background::{BackgroundTurn, FOREGROUND_WINDOW};
pub use confine::{Confinement, WORKER_OOM_SCORE_ADJ, spare_supervisor};
pub use job::{JobError, Task, Timing};
pub use metrics::EngineMetrics;
pub use process::WorkerCommand;
pub use procfs::Memory;
pub use sandbox::Probe;

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
    /// How long a running job whose client went away may still finish before its worker is
    /// killed and replaced.
    pub cancel_grace: Duration,
    /// How long a worker gets to exit after its stdin closes.
    pub stop_grace: Duration,
    /// How to start a worker.
    pub worker: WorkerCommand,
    /// Where each answer's bytes are reserved before they are read from its worker.
    pub answers: Arc<ByteBudget>,
}

/// Per-slot state the front reads for `/readyz`.
#[derive(Debug, Default)]
struct SlotStatus {
    pid: AtomicU32,
    busy: AtomicBool,
    jobs: AtomicU64,
    /// Its worker is being replaced at once (a recycle, or a death after a healthy life), not
    /// backing off from a crash loop.
    replacing: AtomicBool,
}

/// State shared by the slots and the front.
struct Shared {
    config: EngineConfig,
    metrics: Arc<EngineMetrics>,
    queue: Mutex<mpsc::Receiver<job::Job>>,
    /// Quarantined documents, shared with the Office path.
    poison: Arc<PoisonList>,
    slots: Vec<SlotStatus>,
    /// Job time, for `Retry-After`.
    average_job: MovingAverage,
    /// Who gets a slot when: interactive requests first, durable jobs' tasks in what they
    /// leave (see `background`).
    turns: background::Turns,
}

/// One worker as `/readyz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerView {
    /// Slot index.
    pub slot: usize,
    /// Worker process id; `None` while the slot is (re)starting its worker.
    pub pid: Option<u32>,
    /// The slot is starting its next worker at once: it takes jobs again within moments.
    pub replacing: bool,
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
    /// Slots starting their next worker at once (not backing off from a crash loop).
    pub replacing: u32,
    /// Slots running a job.
    pub busy: u32,
    /// Places taken: jobs waiting, and places reserved for bodies still coming in.
    pub queued: usize,
    /// Queue capacity.
    pub queue_depth: usize,
    /// Each worker's hard memory ceiling (`RLIMIT_DATA`), if any.
    pub memory_ceiling_bytes: Option<u64>,
    /// Each slot.
    pub workers: Vec<WorkerView>,
}

/// A place in the queue, taken before a request's body is read and handed to its job; dropping
/// it gives the place back.
#[derive(Debug)]
pub struct Place(mpsc::OwnedPermit<job::Job>);

/// The running engine.
pub struct Engine {
    shared: Arc<Shared>,
    sender: mpsc::Sender<job::Job>,
    shutdown: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts one supervisor task per slot; workers come up in the background. Documents that
    /// crash or exhaust a worker are remembered in `poison` (the Office path's list too).
    pub fn start(
        config: EngineConfig,
        metrics: Arc<EngineMetrics>,
        poison: Arc<PoisonList>,
    ) -> Self {
        let (sender, receiver) = mpsc::channel(config.queue_depth.max(1));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let slots = (0..config.slots).map(|_| SlotStatus::default()).collect();
        let shared = Arc::new(Shared {
            poison,
            config,
            metrics,
            queue: Mutex::new(receiver),
            slots,
            average_job: MovingAverage::default(),
            turns: background::Turns::default(),
        });
        let tasks = (0..shared.slots.len())
            .map(|index| tokio::spawn(slot::run(shared.clone(), index, shutdown_rx.clone())))
            .collect();
        Self { shared, sender, shutdown, tasks: std::sync::Mutex::new(tasks) }
    }

    /// Arrival and deadlines of a request that arrived at `arrived`, with the client's own
    /// timeout if it gave one.
    pub fn timing(&self, arrived: Instant, client_timeout: Option<Duration>) -> Timing {
        Timing::new(arrived, self.shared.config.job_deadline, client_timeout)
    }

    /// The timing of a further job of a request timed `timing`, queued now with a deadline of
    /// its own (see [`Timing::next_job`]).
    pub fn next_job(&self, timing: &Timing) -> Timing {
        timing.next_job(Instant::now(), self.shared.config.job_deadline)
    }

    /// Slots: how many page tasks of one request are worth having in flight at once.
    pub fn slots(&self) -> usize {
        usize::try_from(self.shared.config.slots).unwrap_or(1).max(1)
    }

    /// Refuses `work` on a document that recently crashed a worker at it (or at work it implies).
    pub fn check_quarantine(&self, hash: &DocHash, work: WorkClass) -> Result<(), JobError> {
        match self.shared.poison.remaining(hash, work, Instant::now()) {
            Some(left) => {
                self.shared.metrics.reject("quarantined");
                Err(JobError::Quarantined { remaining_secs: left.as_secs() + 1, work })
            }
            None => Ok(()),
        }
    }

    /// Takes a place in the queue for a request whose body is still to be read, so an admitted
    /// upload always has room when it is ready; refuses at once when the queue is full or the
    /// wait for a slot would outlast the request's deadline. Dropping the place frees it.
    pub fn reserve(&self, timing: &Timing) -> Result<Place, JobError> {
        self.shared.turns.foreground_arrived();
        self.check_start(timing, 0)?;
        let permit = self.sender.clone().try_reserve_owned().map_err(|_| self.overloaded())?;
        Ok(Place(permit))
    }

    /// Runs one task in `place` and waits for its answer. The wait for a slot is estimated
    /// again first (the queue may have grown while the body came in).
    pub async fn run(
        &self,
        place: Place,
        task: Task,
        timing: Timing,
    ) -> Result<OpOutput, JobError> {
        self.check_quarantine(&task.hash, WorkClass::of(&task.op))?;
        // The place is counted among the queued; it is not ahead of itself.
        self.check_start(&timing, 1)?;
        let (reply, rx) = oneshot::channel();
        self.shared.metrics.queue_depth.inc();
        place.0.send(job::Job { task, timing, reply });
        self.wait(rx, timing).await
    }

    /// Runs one page task of a request already admitted (a filmstrip's pages after the first):
    /// waits for a place within the deadline instead of being refused, since the request holds
    /// its admission already, and waiting places are served before new arrivals.
    pub async fn run_admitted(&self, task: Task, timing: Timing) -> Result<OpOutput, JobError> {
        self.shared.turns.foreground_arrived();
        let permit = match tokio::time::timeout_at(
            timing.effective().into(),
            self.sender.clone().reserve_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(JobError::Draining),
            Err(_) => {
                self.shared.metrics.reject("deadline_in_queue");
                return Err(JobError::DeadlineExceeded {
                    deadline: timing.allowed(),
                    queued: true,
                });
            }
        };
        let (reply, rx) = oneshot::channel();
        self.shared.metrics.queue_depth.inc();
        permit.send(job::Job { task, timing, reply });
        self.wait(rx, timing).await
    }

    /// Refuses a job whose expected start is past its deadline. `own` is 1 when the caller
    /// already holds a place (counted among the queued).
    fn check_start(&self, timing: &Timing, own: usize) -> Result<(), JobError> {
        let ahead = self.queued().saturating_sub(own);
        let expected = policy::expected_wait(
            ahead,
            self.busy(),
            self.shared.config.slots,
            self.shared.average_job.get(),
        );
        let now = Instant::now();
        if now + expected <= timing.effective() {
            return Ok(());
        }
        self.shared.metrics.reject("deadline_unmet");
        Err(JobError::WouldMissDeadline {
            expected_wait: expected,
            allowed: timing.allowed(),
            retry_after_secs: self.retry_after_secs(),
        })
    }

    async fn wait(
        &self,
        rx: oneshot::Receiver<Result<OpOutput, JobError>>,
        timing: Timing,
    ) -> Result<OpOutput, JobError> {
        // A little past the deadline, so the slot's own answer (queued or killed) wins the race.
        let give_up = timing.effective() + Duration::from_millis(250);
        match tokio::time::timeout_at(give_up.into(), rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(JobError::Draining),
            Err(_) => Err(JobError::DeadlineExceeded { deadline: timing.allowed(), queued: true }),
        }
    }

    fn overloaded(&self) -> JobError {
        self.shared.metrics.reject("queue_full");
        JobError::QueueFull {
            slots: self.shared.config.slots,
            depth: self.shared.config.queue_depth,
            retry_after_secs: self.retry_after_secs(),
        }
    }

    /// Seconds a refused client should wait: the queue worked off at the average job time.
    pub fn retry_after_secs(&self) -> u64 {
        pacing::retry_after_secs(
            self.queued(),
            self.shared.config.slots,
            self.shared.average_job.get(),
        )
    }

    fn busy(&self) -> u32 {
        let busy = self.shared.slots.iter().filter(|s| s.busy.load(Ordering::Relaxed)).count();
        u32::try_from(busy).unwrap_or(u32::MAX)
    }

    /// Places taken: jobs waiting plus places reserved for bodies still coming in.
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
                let pid = Some(s.pid.load(Ordering::Acquire)).filter(|p| *p != 0);
                WorkerView {
                    slot,
                    pid,
                    replacing: pid.is_none() && s.replacing.load(Ordering::Relaxed),
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
            replacing: count(&|w| w.replacing),
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
    use crate::metrics::Rejections;
    use crate::ops::Op;

    /// An engine whose workers can never start, so jobs stay queued.
    fn stalled_engine(queue_depth: usize, deadline: Duration) -> Engine {
        let config = EngineConfig {
            slots: 1,
            queue_depth,
            job_deadline: deadline,
            recycle_after_jobs: 10,
            recycle_rss: 1 << 29,
            cancel_grace: Duration::from_millis(100),
            stop_grace: Duration::from_millis(100),
            worker: WorkerCommand {
                exe: "/nonexistent/render-pod".into(),
                args: Vec::new(),
                ready_timeout: Duration::from_millis(100),
                confinement: Confinement { nice: 0, memory_ceiling: None },
            },
            answers: ByteBudget::new(1 << 20, Default::default()),
        };
        let poison =
            Arc::new(PoisonList::new(Duration::from_secs(60), crate::quarantine::CAPACITY));
        Engine::start(config, Arc::new(EngineMetrics::new(Rejections::default())), poison)
    }

    fn task(doc: &'static [u8]) -> Task {
        Task {
            doc: bytes::Bytes::from_static(doc),
            hash: DocHash::of(doc),
            password: None,
            op: Op::Info,
        }
    }

    #[tokio::test]
    async fn full_queue_refuses_at_once_and_queued_jobs_expire() {
        let engine = Arc::new(stalled_engine(1, Duration::from_millis(300)));
        let timing = engine.timing(Instant::now(), None);
        let place = engine.reserve(&timing).unwrap();
        // The place is taken before any job exists: the next request is refused already.
        let refused = engine.reserve(&engine.timing(Instant::now(), None)).unwrap_err();
        assert!(matches!(refused, JobError::QueueFull { slots: 1, depth: 1, .. }), "{refused:?}");
        assert!(refused.retry_after_secs().is_some());
        let queued = {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run(place, task(b"a"), timing).await })
        };
        let expired = queued.await.unwrap().unwrap_err();
        assert!(matches!(expired, JobError::DeadlineExceeded { queued: true, .. }), "{expired:?}");
        assert_eq!(engine.status().alive, 0);
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn quarantined_documents_are_refused_before_queueing() {
        let engine = stalled_engine(4, Duration::from_secs(5));
        let work = WorkClass::of(&task(b"crasher").op);
        engine.shared.poison.convict(DocHash::of(b"crasher"), work, Instant::now());
        let timing = engine.timing(Instant::now(), None);
        let place = engine.reserve(&timing).unwrap();
        let err = engine.run(place, task(b"crasher"), timing).await.unwrap_err();
        assert!(matches!(err, JobError::Quarantined { .. }), "{err:?}");
        assert_eq!(engine.status().queued, 0);
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn a_deadline_shorter_than_the_expected_wait_is_refused_before_queueing() {
        let engine = stalled_engine(8, Duration::from_secs(5));
        // Jobs took a second each so far, and three places are taken ahead.
        engine.shared.average_job.record(Duration::from_secs(1));
        let ahead: Vec<_> =
            (0..3).map(|_| engine.reserve(&engine.timing(Instant::now(), None)).unwrap()).collect();
        let hurried = engine.timing(Instant::now(), Some(Duration::from_millis(500)));
        let err = engine.reserve(&hurried).unwrap_err();
        assert!(matches!(err, JobError::WouldMissDeadline { .. }), "{err:?}");
        assert_eq!((err.status(), err.code()), (503, "would_miss_deadline"));
        assert!(err.retry_after_secs().is_some());
        assert_eq!(engine.status().queued, 3, "nothing was queued for the refused request");
        // With time enough it is admitted.
        let patient = engine.timing(Instant::now(), Some(Duration::from_secs(4)));
        assert!(engine.reserve(&patient).is_ok());
        drop(ahead);
        engine.shutdown().await;
    }
}
