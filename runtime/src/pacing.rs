//! Pacing: how long to wait before trying again, and how long to tell a refused client to wait.
//! Exponential backoff (with or without jitter), a moving average of durations for estimates,
//! `Retry-After` from a queue and that average, and a random number for spreading.
//!
//! The delays come from `backon`'s exponential builder (kube-runtime's watchers use the same),
//! driven step by step rather than through its retry combinators, since each caller decides
//! itself whether a failure is retried.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// Exponential delays, doubling from a first one up to a cap, kept until [`Backoff::reset`].
#[derive(Debug)]
pub struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    max: Duration,
    attempts: u32,
}

impl Backoff {
    /// `first`, twice that, four times ..., at most `max`; no jitter.
    pub fn exponential(first: Duration, max: Duration) -> Self {
        Self::from_builder(doubling(first, max), max)
    }

    /// "Equal jitter", so the retries of many clients do not line up: retry `n` waits a random
    /// time in [c/2, c), where the ceiling c is `first_ceiling` doubled n-1 times, at most
    /// `max_ceiling`.
    pub fn equal_jitter(first_ceiling: Duration, max_ceiling: Duration) -> Self {
        // backon's jitter adds up to the delay itself: [d, 2d) with d = c/2.
        let builder = doubling(first_ceiling / 2, max_ceiling / 2).with_jitter();
        Self::from_builder(builder, max_ceiling)
    }

    fn from_builder(builder: ExponentialBuilder, max: Duration) -> Self {
        Self { delays: builder.build(), builder, max, attempts: 0 }
    }

    /// The wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.attempts = self.attempts.saturating_add(1);
        // Without a limit on attempts the builder never runs out; the cap stands in if it did.
        self.delays.next().unwrap_or(self.max)
    }

    /// Delays handed out since the start or the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Starts again from the first delay (after a success).
    pub fn reset(&mut self) {
        self.delays = self.builder.build();
        self.attempts = 0;
    }
}

fn doubling(first: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(first)
        .with_max_delay(max)
        .with_factor(2.0)
        .without_max_times()
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

/// Seconds a refused client should wait: the time `workers` need to work off `queued` (and the
/// refused one) at `average` each, within 1..=30.
pub fn retry_after_secs(queued: usize, workers: u32, average: Duration) -> u64 {
    let work = average.as_secs_f64() * (queued as f64 + 1.0) / f64::from(workers.max(1));
    (work.ceil() as u64).clamp(1, 30)
}

/// A random number from the standard library's per-process hash keys, for spreading (recycle
/// counts): no generator to seed or share.
pub fn entropy() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Within a microsecond: backon multiplies in `f32`.
    fn about(actual: Duration, expected: Duration) -> bool {
        actual.abs_diff(expected) < Duration::from_micros(1)
    }

    #[test]
    fn exponential_doubles_caps_and_resets() {
        let mut b = Backoff::exponential(100 * MS, Duration::from_secs(30));
        for expected in [100, 200, 400, 800] {
            assert!(about(b.next_delay(), expected * MS));
        }
        for _ in 0..20 {
            b.next_delay();
        }
        assert_eq!(b.next_delay(), Duration::from_secs(30));
        assert_eq!(b.attempts(), 25);
        b.reset();
        assert_eq!((b.next_delay(), b.attempts()), (100 * MS, 1));
    }

    #[test]
    fn whole_seconds_double_exactly() {
        let mut b = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(300));
        let delays: Vec<u64> = (0..11).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    }

    #[test]
    fn equal_jitter_stays_in_the_upper_half_of_each_ceiling() {
        let seeded = |seed| {
            let builder = doubling(25 * MS, 500 * MS).with_jitter().with_jitter_seed(seed);
            Backoff::from_builder(builder, Duration::from_secs(1))
        };
        for seed in 0..50 {
            let mut b = seeded(seed);
            for ceiling in [50, 100, 200, 400, 800, 1000, 1000] {
                let delay = b.next_delay();
                assert!(delay >= ceiling * MS / 2 && delay < ceiling * MS, "{delay:?} {ceiling}");
            }
        }
        let (mut a, mut b) = (seeded(1), seeded(2));
        assert_ne!(a.next_delay(), b.next_delay(), "jittered");
    }

    #[test]
    fn moving_average_starts_at_the_first_sample_and_follows_slowly() {
        let average = MovingAverage::default();
        assert_eq!(average.get(), Duration::ZERO);
        average.record(800 * MS);
        assert_eq!(average.get(), 800 * MS);
        average.record(Duration::ZERO);
        assert_eq!(average.get(), 700 * MS);
    }

    #[test]
    fn retry_after_follows_queue_and_workers() {
        assert_eq!(retry_after_secs(0, 2, 10 * MS), 1);
        assert_eq!(retry_after_secs(9, 2, Duration::from_secs(1)), 5);
        assert_eq!(retry_after_secs(1000, 1, Duration::from_secs(5)), 30);
        assert_eq!(retry_after_secs(3, 0, Duration::from_secs(2)), 8, "no workers counts as one");
    }

    #[test]
    fn entropy_differs_between_calls() {
        assert_ne!(entropy(), entropy());
    }
}
