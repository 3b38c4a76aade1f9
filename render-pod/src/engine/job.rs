//! Jobs: one operation on one document, with a deadline and a reply channel.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::ops::{DocHash, Op, OpError, OpOutput};
use crate::quarantine::WorkClass;

/// What a worker is asked to do.
#[derive(Debug, Clone)]
pub struct Task {
    /// The document (shared with the request body, never copied per page task).
    pub doc: Bytes,
    /// Its hash: poison list, worker cache key, "worker holds it" check.
    pub hash: DocHash,
    /// Password for an encrypted document.
    pub password: Option<String>,
    /// The operation.
    pub op: Op,
}

/// When a request arrived and by when its work must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// When the request arrived.
    pub arrived: Instant,
    /// The service's deadline (`--job-deadline-ms` after arrival): a job still running then is
    /// killed and the document judged for it.
    pub deadline: Instant,
    /// The client's own deadline, when earlier than the service's: past it the answer is of no
    /// use, so the work is dropped like a disconnected client's, and the document is not blamed.
    pub client_deadline: Option<Instant>,
}

impl Timing {
    /// The service's deadline and the client's, if it gave one.
    pub fn new(arrived: Instant, job_deadline: Duration, client_timeout: Option<Duration>) -> Self {
        let deadline = arrived + job_deadline;
        let client_deadline = client_timeout
            .and_then(|timeout| arrived.checked_add(timeout))
            .filter(|client| *client < deadline);
        Self { arrived, deadline, client_deadline }
    }

    /// The timing of a further job of the same request, queued `now` with a service deadline of
    /// its own (a streamed filmstrip's pages: each is sent as it finishes, so each is a job in
    /// its own right), still bounded by the client's deadline.
    pub fn next_job(&self, now: Instant, job_deadline: Duration) -> Self {
        let deadline = now + job_deadline;
        let client_deadline = self.client_deadline.filter(|client| *client < deadline);
        Self { arrived: now, deadline, client_deadline }
    }

    /// The earlier of the two deadlines.
    pub fn effective(&self) -> Instant {
        self.client_deadline.unwrap_or(self.deadline)
    }

    /// The effective deadline as a time from arrival.
    pub fn allowed(&self) -> Duration {
        self.effective() - self.arrived
    }
}

/// A task in the queue.
#[derive(Debug)]
pub struct Job {
    /// The work.
    pub task: Task,
    /// Arrival and deadlines: past the effective one a queued job is dropped.
    pub timing: Timing,
    /// Where the answer goes; closed when the client gave up.
    pub reply: oneshot::Sender<Result<OpOutput, JobError>>,
}

/// Why a job produced no output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// The operation itself failed (bad document, bad page, ...).
    #[error(transparent)]
    Op(#[from] OpError),
    /// The queue is full.
    #[error("all {slots} slots are busy and the queue of {depth} is full")]
    QueueFull { slots: u32, depth: usize, retry_after_secs: u64 },
    /// The slots cannot start the job before the client's deadline (or the service's).
    #[error(
        "the job would start in about {} ms, after its deadline of {} ms: retry later, or allow more time",
        expected_wait.as_millis(),
        allowed.as_millis()
    )]
    WouldMissDeadline { expected_wait: Duration, allowed: Duration, retry_after_secs: u64 },
    /// The service is shutting down.
    #[error("the service is shutting down")]
    Draining,
    /// The deadline passed, in the queue or while running.
    #[error("the job passed its deadline of {} ms{}", deadline.as_millis(), if *queued { " while queued" } else { "; its worker was stopped" })]
    DeadlineExceeded { deadline: Duration, queued: bool },
    /// The worker died during the job.
    #[error("the worker crashed while processing the document ({detail})")]
    WorkerCrashed { detail: String },
    /// The document made its worker exceed the worker's memory ceiling.
    #[error(
        "the document needs more memory than a worker may use ({} MiB); its worker was replaced",
        ceiling_bytes >> 20
    )]
    MemoryLimitExceeded { ceiling_bytes: u64 },
    /// The answers waiting to be written hold the answer budget: this one was thrown away.
    #[error(
        "the answers waiting to be sent hold the answer budget of {budget} bytes; this one \
         ({bytes} bytes) was dropped: retry later"
    )]
    AnswerBudgetExhausted { bytes: u64, budget: u64, retry_after_secs: u64 },
    /// The answers waiting to be written leave almost none of the answer budget: new work is
    /// refused before its body is read, rather than made and its answer thrown away.
    #[error(
        "the answers waiting to be sent hold the answer budget ({free} of {budget} bytes free): \
         retry later"
    )]
    AnswersBacklogged { free: u64, budget: u64, retry_after_secs: u64 },
    /// The answer is larger than the whole answer budget: it can never be sent.
    #[error(
        "the answer of {bytes} bytes is larger than the whole answer budget of {budget} bytes: \
         ask for less (a smaller page size, fewer pages)"
    )]
    AnswerTooLarge { bytes: u64, budget: u64 },
    /// The document crashed a worker recently, at this class of work or one that implies it.
    #[error(
        "this document crashed or exhausted a worker and is refused for {work} for another {remaining_secs} s"
    )]
    Quarantined { remaining_secs: u64, work: WorkClass },
}

impl JobError {
    /// The stable machine-readable code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            JobError::Op(e) => e.code(),
            JobError::QueueFull { .. } => "overloaded",
            JobError::WouldMissDeadline { .. } => "would_miss_deadline",
            JobError::Draining => "shutting_down",
            JobError::DeadlineExceeded { .. } => "deadline_exceeded",
            JobError::WorkerCrashed { .. } => "worker_crashed",
            JobError::MemoryLimitExceeded { .. } => "memory_limit_exceeded",
            JobError::Quarantined { .. } => "document_quarantined",
            JobError::AnswerBudgetExhausted { .. } | JobError::AnswersBacklogged { .. } => {
                "answer_budget_exhausted"
            }
            JobError::AnswerTooLarge { .. } => "answer_too_large",
        }
    }

    /// The HTTP status that fits.
    pub fn status(&self) -> u16 {
        match self {
            JobError::Op(e) => e.status(),
            JobError::QueueFull { .. }
            | JobError::WouldMissDeadline { .. }
            | JobError::AnswerBudgetExhausted { .. }
            | JobError::AnswersBacklogged { .. }
            | JobError::Draining => 503,
            JobError::DeadlineExceeded { .. } => 504,
            JobError::WorkerCrashed { .. } => 502,
            JobError::MemoryLimitExceeded { .. }
            | JobError::Quarantined { .. }
            | JobError::AnswerTooLarge { .. } => 422,
        }
    }

    /// Seconds for a `Retry-After` header, where retrying makes sense.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            JobError::QueueFull { retry_after_secs, .. }
            | JobError::WouldMissDeadline { retry_after_secs, .. }
            | JobError::AnswerBudgetExhausted { retry_after_secs, .. }
            | JobError::AnswersBacklogged { retry_after_secs, .. } => Some(*retry_after_secs),
            JobError::Draining => Some(1),
            JobError::Quarantined { remaining_secs, .. } => Some(*remaining_secs),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_deadline_counts_only_when_earlier() {
        let now = Instant::now();
        let service = Duration::from_secs(30);
        let t = Timing::new(now, service, Some(Duration::from_millis(2500)));
        assert_eq!(t.client_deadline, Some(now + Duration::from_millis(2500)));
        assert_eq!(t.allowed(), Duration::from_millis(2500));
        let later = Timing::new(now, service, Some(Duration::from_secs(60)));
        assert_eq!((later.client_deadline, later.allowed()), (None, service));
        let none = Timing::new(now, service, None);
        assert_eq!(none.effective(), now + service);
        // An absurd timeout saturates instead of overflowing.
        assert_eq!(Timing::new(now, service, Some(Duration::MAX)).client_deadline, None);
        // A further job gets the service's deadline anew, the client's as it was.
        let later_now = now + Duration::from_secs(20);
        let next = t.next_job(later_now, service);
        assert_eq!((next.arrived, next.deadline), (later_now, later_now + service));
        assert_eq!(next.client_deadline, t.client_deadline);
        assert_eq!(none.next_job(later_now, service).effective(), later_now + service);
    }
}
