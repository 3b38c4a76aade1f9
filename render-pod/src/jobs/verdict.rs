//! What a job's failure means for its message: fail the job for good (the document or the
//! request is at fault, as the HTTP API would say), count a strike against it (it killed a
//! worker or stalled LibreOffice: after enough strikes it goes to the dead-letter stream), or
//! hand it back for later (this pod or a service it needs is busy or down; no one's fault).

use std::time::Duration;

/// What to do with a job that failed with an HTTP API error `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Mark it failed with the code; never run it again.
    Fail,
    /// Count a strike and hand it back to the broker (dead letter at the limit).
    Strike,
    /// Hand it back to the broker for another try after a pause, counting nothing.
    Later,
}

/// The verdict on a failure with `code` (the codes of `ApiError`, which every failure on the
/// job path becomes).
pub fn judge(code: &str) -> Verdict {
    match code {
        // A worker died under the document, or LibreOffice did not finish with it: maybe the
        // document, maybe bad luck. Strikes tell the two apart.
        "worker_crashed" | "conversion_timeout" => Verdict::Strike,
        // This pod or a service it depends on is busy, stopping or unreachable.
        "overloaded"
        | "would_miss_deadline"
        | "shutting_down"
        | "answer_budget_exhausted"
        | "upload_budget_exhausted"
        | "office_busy"
        | "office_unavailable"
        | "object_store_unavailable"
        | "job_state_unavailable" => Verdict::Later,
        // Everything else is a verdict on the document or the request (unreadable, encrypted,
        // quarantined, memory ceiling, page out of range, invalid parameters, not allowed,
        // missing or changed object, deadline): the same again would fail the same way.
        _ => Verdict::Fail,
    }
}

/// How long a job handed back for later waits before its next delivery: doubling per
/// delivery, from 1 s up to a minute.
pub fn later_delay(deliveries: u64) -> Duration {
    let exponent = u32::try_from(deliveries.saturating_sub(1)).unwrap_or(u32::MAX).min(6);
    Duration::from_secs(1u64 << exponent).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_verdicts_fail_crashes_strike_and_busy_services_wait() {
        for code in [
            "unreadable_document",
            "password_required",
            "document_quarantined",
            "memory_limit_exceeded",
            "page_out_of_range",
            "too_many_pixels",
            "invalid_request",
            "deadline_exceeded",
            "object_not_found",
            "input_changed",
            "bucket_not_allowed",
        ] {
            assert_eq!(judge(code), Verdict::Fail, "{code}");
        }
        assert_eq!(judge("worker_crashed"), Verdict::Strike);
        assert_eq!(judge("conversion_timeout"), Verdict::Strike);
        for code in ["office_busy", "object_store_unavailable", "shutting_down"] {
            assert_eq!(judge(code), Verdict::Later, "{code}");
        }
        assert_eq!(later_delay(1), Duration::from_secs(1));
        assert_eq!(later_delay(3), Duration::from_secs(4));
        assert_eq!(later_delay(100), Duration::from_secs(60));
    }
}
