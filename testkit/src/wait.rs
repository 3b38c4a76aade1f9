//! Waiting for a condition, with a bound: the one poll loop of the workspace's tests.
//!
//! A test that waits says what it awaits; when the bound passes, the failure names that and the
//! last thing seen instead, so a timeout reads as a finding, not as "timed out". The bound is a
//! ceiling for a broken run, never a claim about speed: speed is for benchmarks.
//!
//! ```no_run
//! # async fn example(readyz: impl Fn() -> u32) {
//! use std::time::Duration;
//! use renderpool_testkit::wait;
//!
//! // Ok(value) ends the wait; Err(seen) is what the failure shows if the bound passes.
//! let slots = wait::until("two live slots", Duration::from_secs(30), || async {
//!     let alive = readyz();
//!     if alive == 2 { Ok(alive) } else { Err(alive) }
//! })
//! .await;
//! # }
//! ```

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// What one look at a condition found: the awaited value, or a description of what was seen.
pub trait Look {
    /// What the wait returns once the condition holds.
    type Value;
    /// `Ok` when the condition holds, else what was seen.
    fn look(self) -> Result<Self::Value, String>;
}

impl Look for bool {
    type Value = ();
    fn look(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

/// `None` is "not yet" with nothing more to say; prefer a `Result` that carries what was seen.
impl<T> Look for Option<T> {
    type Value = T;
    fn look(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing yet".into())
    }
}

impl<T, S: Debug> Look for Result<T, S> {
    type Value = T;
    fn look(self) -> Result<T, String> {
        self.map_err(|seen| format!("{seen:?}"))
    }
}

/// A wait whose bound passed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("waited {bound:?} for {what} ({looks} looks); last seen: {last}")]
pub struct TimedOut {
    /// What was awaited.
    pub what: String,
    /// How long the wait was allowed.
    pub bound: Duration,
    /// How many times the condition was checked.
    pub looks: u32,
    /// What the last look saw.
    pub last: String,
}

/// The pause between two looks: a 200th of the bound, from 10 ms to 250 ms (a short wait looks
/// often, a long one does not load the API server it polls).
fn pace(bound: Duration) -> Duration {
    (bound / 200).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// Looks at `check` until it finds the condition `what` describes (always at least once), or
/// `bound` passes.
pub async fn try_until<L, F, Fut>(
    what: &str,
    bound: Duration,
    mut check: F,
) -> Result<L::Value, TimedOut>
where
    L: Look,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    let start = Instant::now();
    let mut looks = 0;
    loop {
        looks += 1;
        let last = match check().await.look() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= bound {
            return Err(TimedOut { what: what.into(), bound, looks, last });
        }
        tokio::time::sleep(pace(bound)).await;
    }
}

/// [`try_until`], panicking with the [`TimedOut`] message when the bound passes.
pub async fn until<L, F, Fut>(what: &str, bound: Duration, check: F) -> L::Value
where
    L: Look,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    try_until(what, bound, check).await.unwrap_or_else(|timed_out| panic!("{timed_out}"))
}

/// [`try_until`] for code that is not async (it sleeps the thread between looks).
pub fn try_until_blocking<L: Look>(
    what: &str,
    bound: Duration,
    mut check: impl FnMut() -> L,
) -> Result<L::Value, TimedOut> {
    let start = Instant::now();
    let mut looks = 0;
    loop {
        looks += 1;
        let last = match check().look() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if start.elapsed() >= bound {
            return Err(TimedOut { what: what.into(), bound, looks, last });
        }
        std::thread::sleep(pace(bound));
    }
}

/// [`try_until_blocking`], panicking with the [`TimedOut`] message when the bound passes.
#[track_caller]
pub fn until_blocking<L: Look>(what: &str, bound: Duration, check: impl FnMut() -> L) -> L::Value {
    try_until_blocking(what, bound, check).unwrap_or_else(|timed_out| panic!("{timed_out}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn returns_the_value_once_the_condition_holds() {
        let mut n = 0;
        let got = until_blocking("n at 3", Duration::from_secs(5), || {
            n += 1;
            if n == 3 { Ok(n) } else { Err(n) }
        });
        assert_eq!(got, 3);
    }

    #[test]
    fn a_timeout_names_what_was_awaited_and_the_last_value_seen() {
        let mut n = 0;
        let err = try_until_blocking("n at 1000", Duration::from_millis(50), || {
            n += 1;
            if n == 1000 { Ok(()) } else { Err(format!("n={n}")) }
        })
        .unwrap_err();
        assert!(err.looks >= 2, "{err:?}");
        assert_eq!(err.last, format!("\"n={}\"", err.looks));
        let message = err.to_string();
        assert!(message.starts_with("waited 50ms for n at 1000 ("), "{message}");
    }

    #[test]
    fn looks_once_even_with_no_time_allowed() {
        assert_eq!(until_blocking("true", Duration::ZERO, || true), ());
        let err = try_until_blocking("false", Duration::ZERO, || false).unwrap_err();
        assert_eq!((err.looks, err.last.as_str()), (1, "false"));
    }

    #[test]
    fn paces_between_ten_and_two_hundred_fifty_ms() {
        assert_eq!(pace(Duration::from_millis(100)), Duration::from_millis(10));
        assert_eq!(pace(Duration::from_secs(20)), Duration::from_millis(100));
        assert_eq!(pace(Duration::from_secs(600)), Duration::from_millis(250));
    }

    #[tokio::test]
    async fn the_async_wait_reports_as_the_blocking_one() {
        let err = try_until("an empty option", Duration::from_millis(20), || async { None::<()> })
            .await
            .unwrap_err();
        assert_eq!(err.last, "nothing yet");
        let n = std::cell::Cell::new(0);
        let got = until("n at 2", Duration::from_secs(5), || async {
            n.set(n.get() + 1);
            (n.get() == 2).then_some(n.get())
        })
        .await;
        assert_eq!(got, 2);
    }
}
