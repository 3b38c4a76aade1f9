//! Pure decisions of the supervisor: recycle limits, crash-loop backoff, `Retry-After`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Jobs a new worker may run before it is recycled: `base` plus up to 10% jitter, so workers
/// started together do not all restart together. `entropy` is any random number.
pub fn recycle_after(base: u64, entropy: u64) -> u64 {
    let spread = base / 10;
    base + entropy.checked_rem(spread + 1).unwrap_or(0)
}

/// A random number from the standard library's per-process hash keys (no extra crate needed).
pub fn entropy() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}

/// Exponential backoff for a slot whose workers keep dying young.
#[derive(Debug, Clone)]
pub struct Backoff {
    failures: u32,
}

/// A worker that lived at least this long was not crash-looping.
pub const HEALTHY_LIFETIME: Duration = Duration::from_secs(5);
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(30);

impl Backoff {
    /// No failures yet.
    pub fn new() -> Self {
        Self { failures: 0 }
    }

    /// Records how a worker ended and returns how long to wait before starting the next one:
    /// nothing after a healthy life, doubling delays while workers keep dying young.
    pub fn after_exit(&mut self, died_young: bool) -> Duration {
        if !died_young {
            self.failures = 0;
            return Duration::ZERO;
        }
        let delay = FIRST_DELAY.saturating_mul(1 << self.failures.min(16)).min(MAX_DELAY);
        self.failures = self.failures.saturating_add(1);
        delay
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

/// A moving average of durations (each sample weighs 1/8), for `Retry-After` estimates.
#[derive(Debug, Default)]
pub struct MovingAverage {
    micros: AtomicU64,
}

impl MovingAverage {
    /// Adds a sample.
    pub fn record(&self, elapsed: Duration) {
        let sample = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let old = self.micros.load(Ordering::Relaxed);
        let new = if old == 0 { sample } else { old / 8 * 7 + sample / 8 };
        self.micros.store(new, Ordering::Relaxed);
    }

    /// The average so far (zero before the first sample).
    pub fn get(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Relaxed))
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

/// Seconds a rejected client should wait: the time the slots need to work off the queue at the
/// average job time, within 1..=30.
pub fn retry_after_secs(queued: usize, slots: u32, average_job: Duration) -> u64 {
    let work = average_job.as_secs_f64() * (queued as f64 + 1.0) / f64::from(slots.max(1));
    (work.ceil() as u64).clamp(1, 30)
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
        assert!((1000..=1100).contains(&recycle_after(1000, entropy())));
    }

    #[test]
    fn backoff_doubles_while_young_and_resets_after_a_healthy_life() {
        let mut b = Backoff::new();
        assert_eq!(b.after_exit(true), Duration::from_millis(100));
        assert_eq!(b.after_exit(true), Duration::from_millis(200));
        assert_eq!(b.after_exit(true), Duration::from_millis(400));
        for _ in 0..20 {
            b.after_exit(true);
        }
        assert_eq!(b.after_exit(true), Duration::from_secs(30));
        assert_eq!(b.after_exit(false), Duration::ZERO);
        assert_eq!(b.after_exit(true), Duration::from_millis(100));
    }

    #[test]
    fn moving_average_starts_at_the_first_sample_and_follows_slowly() {
        let average = MovingAverage::default();
        assert_eq!(average.get(), Duration::ZERO);
        average.record(Duration::from_millis(800));
        assert_eq!(average.get(), Duration::from_millis(800));
        average.record(Duration::from_millis(0));
        assert_eq!(average.get(), Duration::from_millis(700));
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

    #[test]
    fn retry_after_follows_queue_and_slots() {
        assert_eq!(retry_after_secs(0, 2, Duration::from_millis(10)), 1);
        assert_eq!(retry_after_secs(9, 2, Duration::from_secs(1)), 5);
        assert_eq!(retry_after_secs(1000, 1, Duration::from_secs(5)), 30);
    }
}
