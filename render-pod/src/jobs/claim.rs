//! What a pod does with a delivered message, from the job's state: run it, drop it (its job
//! ended, or another message carries it), send its webhook again (its end was recorded but the
//! webhook not delivered), or move it to the dead-letter stream (it was lost with its pod, or
//! killed its worker, as often as the pool allows).

use renderpool_api::jobs::{JobStatus, State};

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Run it; `strikes` so far (one more when the last delivery was lost with its pod).
    Run { strikes: u32 },
    /// Acknowledge and drop it, for this reason.
    Drop(&'static str),
    /// Its end is recorded but its webhook was not delivered: send it again, then drop it.
    Resend,
    /// Move it to the dead-letter stream with `strikes`.
    DeadLetter { strikes: u32 },
}

/// Decides for the message at `sequence` of a job whose state is `found`; `max_strikes`
/// deliveries that killed a worker or were lost with their pod are allowed.
pub fn decide(
    found: Option<&JobStatus>,
    sequence: u64,
    max_strikes: u32,
    has_webhook: bool,
) -> Claim {
    let Some(job) = found else { return Claim::Run { strikes: 0 } };
    match job.state {
        State::Done | State::Failed | State::Cancelled => {
            let undelivered = job.webhook.as_ref().is_none_or(|w| !w.delivered);
            if has_webhook && undelivered && job.state != State::Cancelled {
                Claim::Resend
            } else {
                Claim::Drop("the job has ended")
            }
        }
        State::Queued => match job.stream_sequence {
            Some(other) if other != sequence => Claim::Drop("another message carries this job"),
            _ => Claim::Run { strikes: job.strikes },
        },
        State::Running => match job.stream_sequence {
            // Its pod was told to stop and went before handing it back (killed at the end of
            // its grace period, or its hand-back lost): not the job's doing.
            Some(other) if other == sequence && job.pod_stopping => {
                Claim::Run { strikes: job.strikes }
            }
            // This message was being run and never finished: its pod died or stopped answering
            // (a kill, the OOM killer) before the ack wait ran out.
            Some(other) if other == sequence => {
                let strikes = job.strikes.saturating_add(1);
                if strikes >= max_strikes {
                    Claim::DeadLetter { strikes }
                } else {
                    Claim::Run { strikes }
                }
            }
            _ => Claim::Drop("another message carries this job"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use renderpool_api::jobs::{JobId, WebhookStatus};

    fn job(state: State, sequence: Option<u64>, strikes: u32) -> JobStatus {
        JobStatus {
            state,
            stream_sequence: sequence,
            strikes,
            ..JobStatus::queued(JobId::from_key("k"), 0)
        }
    }

    #[test]
    fn deliveries_are_judged_by_the_jobs_state() {
        assert_eq!(decide(None, 7, 2, false), Claim::Run { strikes: 0 });
        // Queued by POST /v1/jobs (no sequence yet), or handed back by a pod.
        assert_eq!(
            decide(Some(&job(State::Queued, None, 0)), 7, 2, false),
            Claim::Run { strikes: 0 }
        );
        assert_eq!(
            decide(Some(&job(State::Queued, Some(7), 1)), 7, 2, false),
            Claim::Run { strikes: 1 }
        );
        // A second message with the same idempotency key.
        assert!(matches!(
            decide(Some(&job(State::Queued, Some(3), 0)), 7, 2, false),
            Claim::Drop(_)
        ));
        assert!(matches!(
            decide(Some(&job(State::Running, Some(3), 0)), 7, 2, false),
            Claim::Drop(_)
        ));
        // Lost with its pod: a strike; at the limit, the dead-letter stream.
        assert_eq!(
            decide(Some(&job(State::Running, Some(7), 0)), 7, 2, false),
            Claim::Run { strikes: 1 }
        );
        assert_eq!(
            decide(Some(&job(State::Running, Some(7), 1)), 7, 2, false),
            Claim::DeadLetter { strikes: 2 }
        );
        // Lost with a pod that was stopping: no strike, even one short of the limit.
        let stopping = JobStatus { pod_stopping: true, ..job(State::Running, Some(7), 1) };
        assert_eq!(decide(Some(&stopping), 7, 2, false), Claim::Run { strikes: 1 });
        assert!(matches!(decide(Some(&stopping), 8, 2, false), Claim::Drop(_)));
        // Ended: dropped, unless its webhook is still owed.
        assert!(matches!(decide(Some(&job(State::Done, Some(7), 0)), 7, 2, false), Claim::Drop(_)));
        assert_eq!(decide(Some(&job(State::Done, Some(7), 0)), 7, 2, true), Claim::Resend);
        let mut delivered = job(State::Failed, Some(7), 0);
        delivered.webhook = Some(WebhookStatus { attempts: 1, delivered: true, error: None });
        assert!(matches!(decide(Some(&delivered), 7, 2, true), Claim::Drop(_)));
        assert!(matches!(
            decide(Some(&job(State::Cancelled, None, 0)), 7, 2, true),
            Claim::Drop(_)
        ));
    }
}
