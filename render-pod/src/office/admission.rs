//! Office admission: a FIFO semaphore whose size is this pod's share of the Gotenberg pool.
//!
//! A conversion takes a place after its body was read and checked and holds it until Gotenberg
//! answers. Waiters are served strictly in arrival order, their number is bounded (past it a
//! request is refused at once) and so is their wait (the job deadline). Dropping a waiting future
//! (the client went away) leaves the queue at once; dropping a [`Permit`] hands the place to the
//! next waiter. The share can change at run time: growing admits waiters at once, shrinking lets
//! the conversions in flight finish and admits nobody until the count is below the new share.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::oneshot;

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The bounded line of waiters is full.
    Full,
    /// The deadline passed while waiting.
    Timeout,
}

/// What `/readyz` and the metrics show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AdmissionStatus {
    /// Conversions this pod may run at once (its share).
    pub share: u32,
    /// Conversions running now (may briefly exceed a share that just shrank).
    pub in_flight: u32,
    /// Requests waiting for a place.
    pub waiting: usize,
    /// Most requests that may wait.
    pub max_waiting: usize,
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<Permit>,
}

struct State {
    share: u32,
    in_flight: u32,
    waiters: VecDeque<Waiter>,
    next_id: u64,
    max_waiting: usize,
}

/// The semaphore. Cheap to share behind an `Arc`.
pub struct Admission {
    state: Mutex<State>,
}

/// A place in the Office pool; released when dropped.
pub struct Permit {
    admission: Option<Arc<Admission>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(admission) = self.admission.take() {
            admission.release();
        }
    }
}

impl Admission {
    /// A semaphore of `share` places (at least 1) with room for `max_waiting` waiters.
    pub fn new(share: u32, max_waiting: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                share: share.max(1),
                in_flight: 0,
                waiters: VecDeque::new(),
                next_id: 0,
                max_waiting,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A place now, or after the waiters in front of this one, or [`Refused`].
    pub async fn acquire(self: &Arc<Self>, deadline: Instant) -> Result<Permit, Refused> {
        let (id, granted) = {
            let mut state = self.lock();
            if state.waiters.is_empty() && state.in_flight < state.share {
                state.in_flight += 1;
                return Ok(Permit { admission: Some(self.clone()) });
            }
            if state.waiters.len() >= state.max_waiting {
                return Err(Refused::Full);
            }
            let (grant, granted) = oneshot::channel();
            let id = state.next_id;
            state.next_id += 1;
            state.waiters.push_back(Waiter { id, grant });
            (id, granted)
        };
        // Leaves the line when this future is dropped or times out; a place granted at that very
        // moment travels in the channel and is released when the channel drops.
        let _in_line = InLine { admission: self, id };
        match tokio::time::timeout_at(deadline.into(), granted).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => Err(Refused::Timeout),
        }
    }

    /// Changes the share; waiters are admitted at once if it grew.
    pub fn resize(self: &Arc<Self>, share: u32) {
        let mut state = self.lock();
        state.share = share.max(1);
        self.grant(&mut state);
    }

    /// The current figures.
    pub fn status(&self) -> AdmissionStatus {
        let state = self.lock();
        AdmissionStatus {
            share: state.share,
            in_flight: state.in_flight,
            waiting: state.waiters.len(),
            max_waiting: state.max_waiting,
        }
    }

    fn release(self: Arc<Self>) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.grant(&mut state);
    }

    /// Hands free places to the oldest waiters still listening.
    fn grant(self: &Arc<Self>, state: &mut State) {
        while state.in_flight < state.share {
            let Some(waiter) = state.waiters.pop_front() else { break };
            state.in_flight += 1;
            if let Err(mut unwanted) = waiter.grant.send(Permit { admission: Some(self.clone()) }) {
                // The waiter is gone; its place goes to the next one (no release: we hold the lock).
                unwanted.admission = None;
                state.in_flight -= 1;
            }
        }
    }
}

/// A waiter's place in line, given up when dropped.
struct InLine<'a> {
    admission: &'a Arc<Admission>,
    id: u64,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        state.waiters.retain(|w| w.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use super::*;

    fn soon(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn admits_up_to_the_share_then_queues_in_order() {
        let admission = Admission::new(2, 10);
        let a = admission.acquire(soon(1000)).await.unwrap();
        let _b = admission.acquire(soon(1000)).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..3 {
            let (mine, order) = (admission.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let permit = mine.acquire(soon(5000)).await.unwrap();
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(permit);
            }));
            // Line up in a known order.
            while admission.status().waiting < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(admission.status().in_flight, 2);
        drop(a);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(admission.status().in_flight, 1);
    }

    #[tokio::test]
    async fn a_full_line_refuses_at_once_and_the_deadline_bounds_the_wait() {
        let admission = Admission::new(1, 1);
        let _held = admission.acquire(soon(1000)).await.unwrap();
        let waiting = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.acquire(soon(200)).await.map(|_| ()) })
        };
        while admission.status().waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(admission.acquire(soon(1000)).await.err(), Some(Refused::Full));
        assert_eq!(waiting.await.unwrap(), Err(Refused::Timeout));
        assert_eq!(admission.status().waiting, 0);
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_line_and_the_next_gets_its_place() {
        let admission = Admission::new(1, 4);
        let held = admission.acquire(soon(1000)).await.unwrap();
        let gone = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.acquire(soon(5000)).await.map(|_| ()) })
        };
        while admission.status().waiting == 0 {
            tokio::task::yield_now().await;
        }
        let next = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.acquire(soon(5000)).await.is_ok() })
        };
        while admission.status().waiting < 2 {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        assert_eq!(admission.status().waiting, 1);
        drop(held);
        assert!(next.await.unwrap());
        assert_eq!(
            admission.status(),
            AdmissionStatus { share: 1, in_flight: 0, waiting: 0, max_waiting: 4 }
        );
    }

    #[tokio::test]
    async fn resizing_admits_waiters_or_lets_in_flight_work_finish() {
        let admission = Admission::new(1, 4);
        let first = admission.acquire(soon(1000)).await.unwrap();
        let second = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.acquire(soon(5000)).await })
        };
        while admission.status().waiting == 0 {
            tokio::task::yield_now().await;
        }
        admission.resize(2);
        let second = second.await.unwrap().unwrap();
        assert_eq!(admission.status().in_flight, 2);
        // Shrink below what runs: nothing is cut off, and nobody new gets in until both finish.
        admission.resize(1);
        assert_eq!(admission.status().in_flight, 2);
        drop(first);
        assert_eq!(admission.status().in_flight, 1);
        assert_eq!(admission.acquire(soon(50)).await.err(), Some(Refused::Timeout));
        drop(second);
        assert!(admission.acquire(soon(50)).await.is_ok());
        admission.resize(0);
        assert_eq!(admission.status().share, 1, "a share never drops to zero");
    }
}
