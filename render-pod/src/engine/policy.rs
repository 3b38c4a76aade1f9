//! Pure decisions of the supervisor: recycle limits, crash-loop pacing, the expected wait.

use std::time::Duration;

use renderpool_runtime::pacing::Backoff;

/// Jobs a new worker may run before it is recycled: `base` plus up to 10% jitter, so workers
/// started together do not all restart together. `entropy` is any random number.
pub fn recycle_after(base: u64, entropy: u64) -> u64 {
    let spread = base / 10;
    base + entropy.checked_rem(spread + 1).unwrap_or(0)
}

/// A worker that lived at least this long was not crash-looping.
pub const HEALTHY_LIFETIME: Duration = Duration::from_secs(5);
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(30);

/// The pacing of a slot whose workers keep dying young.
#[derive(Debug)]
pub struct CrashLoop(Backoff);

impl CrashLoop {
    /// No failures yet.
    pub fn new() -> Self {
        Self(Backoff::exponential(FIRST_DELAY, MAX_DELAY))
    }

    /// Records how a worker ended and returns how long to wait before starting the next one:
    /// nothing after a healthy life, doubling delays (100 ms to 30 s) while workers keep dying
    /// young.
    pub fn after_exit(&mut self, died_young: bool) -> Duration {
        if !died_young {
            self.0.reset();
            return Duration::ZERO;
        }
        self.0.next_delay()
    }
}

impl Default for CrashLoop {
    fn default() -> Self {
        Self::new()
    }
}
/// How long a job that arrives now waits for a slot: none while a slot is free for it, else the
/// jobs ahead of it (and the ones running) worked off by every slot at the average job time.
/// `ahead` counts queued and reserved places; `busy` the slots running a job.
pub fn expected_wait(ahead: usize, busy: u32, slots: u32, average_job: Duration) -> Duration {
    let slots = slots.max(1);
    // Jobs that must finish before this one gets a slot.
    let before = (ahead as u64 + u64::from(busy) + 1).saturating_sub(u64::from(slots));
    average_job.mul_f64(before as f64 / f64::from(slots))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn recycle_jitter_stays_within_ten_percent() {
        assert_eq!(recycle_after(100, 0), 100);
        assert_eq!(recycle_after(100, 10), 110);
        assert_eq!(recycle_after(100, 11), 100);
        assert_eq!(recycle_after(5, 123), 5);
        let entropy = renderpool_runtime::pacing::entropy();
        assert!((1000..=1100).contains(&recycle_after(1000, entropy)));
    }

    #[test]
    fn a_crash_loop_doubles_its_delays_until_a_healthy_life() {
        let mut loop_ = CrashLoop::new();
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(loop_.after_exit(true)), 100);
        assert_eq!(ms(loop_.after_exit(true)), 200);
        assert_eq!(ms(loop_.after_exit(true)), 400);
        for _ in 0..20 {
            loop_.after_exit(true);
        }
        assert_eq!(loop_.after_exit(true), Duration::from_secs(30));
        assert_eq!(loop_.after_exit(false), Duration::ZERO);
        assert_eq!(loop_.after_exit(true), Duration::from_millis(100));
    }

    #[test]
    fn expected_wait_is_zero_while_a_slot_is_free() {
        let job = Duration::from_millis(400);
        assert_eq!(expected_wait(0, 0, 2, job), Duration::ZERO);
        assert_eq!(expected_wait(0, 1, 2, job), Duration::ZERO);
        // Both slots busy: one of them must finish first.
        assert_eq!(expected_wait(0, 2, 2, job), Duration::from_millis(200));
        // Nine ahead and both busy: ten jobs to work off at two a time.
        assert_eq!(expected_wait(9, 2, 2, job), Duration::from_millis(2000));
        // No average yet: nothing is known, nothing is refused.
        assert_eq!(expected_wait(50, 2, 2, Duration::ZERO), Duration::ZERO);
    }
}
