//! Background turns: the durable jobs' tasks run in what the interactive requests leave. A task
//! gets a place only while nothing waits in the queue and a slot is idle, and, while
//! interactive requests have arrived within the last [`FOREGROUND_WINDOW`], one slot stays
//! free for them: a page preview waits for at most the slot it finds free, never behind a
//! backlog. The decision is one pure function; the engine feeds it its counts.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Engine, JobError, Place, Task};
use crate::ops::OpOutput;

/// How long after an interactive request one slot is kept free for the next.
pub const FOREGROUND_WINDOW: Duration = Duration::from_secs(1);

/// How often a waiting task looks again without being woken (a window that ran out, a worker
/// that came back).
const RECHECK: Duration = Duration::from_millis(50);

/// The engine's record of who is running.
#[derive(Debug)]
pub(super) struct Turns {
    /// When the engine started: the clock the timestamps below count from.
    epoch: Instant,
    /// Milliseconds after `epoch` of the last interactive request (0: none yet).
    foreground_ms: AtomicU64,
    /// Background tasks placed and not yet answered.
    background: AtomicUsize,
    /// Woken when a slot finishes a job.
    freed: Notify,
    /// One decision at a time, so two tasks never both take the last idle slot.
    deciding: Mutex<()>,
}

impl Default for Turns {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            foreground_ms: AtomicU64::new(0),
            background: AtomicUsize::new(0),
            freed: Notify::new(),
            deciding: Mutex::new(()),
        }
    }
}

impl Turns {
    /// An interactive request arrived.
    pub(super) fn foreground_arrived(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX).max(1);
        self.foreground_ms.store(ms, Ordering::Relaxed);
    }

    /// A slot finished a job.
    pub(super) fn slot_freed(&self) {
        self.freed.notify_waiters();
    }

    fn foreground_recent(&self) -> bool {
        let last = self.foreground_ms.load(Ordering::Relaxed);
        last != 0 && {
            let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            now.saturating_sub(last) < u64::try_from(FOREGROUND_WINDOW.as_millis()).unwrap_or(0)
        }
    }
}

/// Whether a background task may take a place now: nothing waits in the queue, and more slots
/// are idle than the interactive requests are kept (one while they are recent, none otherwise).
/// `busy` counts slots running any job; `background` the background tasks placed, some of
/// which may not have reached a slot yet (so the larger of the two is what is taken).
pub fn may_start(
    slots: u32,
    busy: u32,
    queued: usize,
    background: usize,
    foreground_recent: bool,
) -> bool {
    if queued > 0 {
        return false;
    }
    let taken = u64::from(busy).max(background as u64);
    let idle = u64::from(slots).saturating_sub(taken);
    let kept = u64::from(foreground_recent);
    idle > kept
}

/// A background task's turn: its place in the queue, counted until the turn is dropped.
pub struct BackgroundTurn {
    place: Option<Place>,
    turns: Arc<super::Shared>,
}

impl Drop for BackgroundTurn {
    fn drop(&mut self) {
        self.turns.turns.background.fetch_sub(1, Ordering::AcqRel);
        self.turns.turns.freed.notify_waiters();
    }
}

impl Engine {
    /// Whether a background task could start now (the jobs' consumer pulls only then).
    pub fn background_room(&self) -> bool {
        let turns = &self.shared.turns;
        may_start(
            self.shared.config.slots,
            self.busy(),
            self.queued(),
            turns.background.load(Ordering::Acquire),
            turns.foreground_recent(),
        )
    }

    /// Waits until [`Engine::background_room`] would say yes, or `cancel` resolves.
    pub async fn background_wait(&self, cancel: impl Future<Output = ()>) -> bool {
        tokio::pin!(cancel);
        loop {
            let freed = self.shared.turns.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.background_room() {
                return true;
            }
            tokio::select! {
                _ = &mut cancel => return false,
                _ = freed => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
        }
    }

    /// Takes a place for a background task once the interactive work leaves room.
    async fn background_turn(&self) -> Result<BackgroundTurn, JobError> {
        loop {
            self.background_wait(std::future::pending()).await;
            let _deciding = self.shared.turns.deciding.lock().unwrap_or_else(|p| p.into_inner());
            if !self.background_room() {
                continue;
            }
            let Ok(permit) = self.sender.clone().try_reserve_owned() else { continue };
            self.shared.turns.background.fetch_add(1, Ordering::AcqRel);
            return Ok(BackgroundTurn { place: Some(Place(permit)), turns: self.shared.clone() });
        }
    }

    /// Runs a durable job's task in the room the interactive requests leave (see the module
    /// doc), with the pod's job deadline from when it gets its place.
    pub async fn run_background(&self, task: Task) -> Result<OpOutput, JobError> {
        let mut turn = self.background_turn().await?;
        let timing = self.timing(Instant::now(), None);
        let place = turn.place.take().ok_or(JobError::Draining)?;
        let answer = self.run(place, task, timing).await;
        drop(turn);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_work_takes_only_what_interactive_work_leaves() {
        // Idle pod, no interactive requests lately: every slot may run a job.
        assert!(may_start(2, 0, 0, 0, false));
        assert!(may_start(2, 1, 0, 1, false));
        assert!(!may_start(2, 2, 0, 2, false));
        // A place taken but not yet on a slot still counts.
        assert!(!may_start(2, 1, 0, 2, false));
        // Anything waiting in the queue goes first.
        assert!(!may_start(4, 0, 1, 0, false));
        // Interactive requests lately: one slot stays free for the next.
        assert!(may_start(2, 0, 0, 0, true));
        assert!(!may_start(2, 1, 0, 1, true));
        assert!(!may_start(1, 0, 0, 0, true));
        assert!(may_start(1, 0, 0, 0, false));
    }
}
