//! Which Events a status change deserves: only transitions, so a steady state publishes none.

use crate::crd::RenderPoolStatus;
use crate::status::{DEGRADED, READY, is_true};
use kube::runtime::events::{Event, EventType};

/// Events to publish when the stored status `old` is replaced by `new`.
pub fn transitions(old: Option<&RenderPoolStatus>, new: &RenderPoolStatus) -> Vec<Event> {
    let mut events = Vec::new();
    let find = |type_: &str| new.conditions.iter().find(|c| c.type_ == type_);
    if let Some(degraded) = find(DEGRADED) {
        let was = is_true(old, DEGRADED);
        let is = degraded.status == "True";
        // A changed reason while still degraded is a new problem a person should see.
        let reason_changed = old
            .and_then(|o| o.conditions.iter().find(|c| c.type_ == DEGRADED))
            .is_some_and(|c| c.reason != degraded.reason);
        if is && (!was || reason_changed) {
            events.push(event(EventType::Warning, &degraded.reason, &degraded.message, "Validate"));
        } else if was && !is {
            let note = format!("no longer degraded: {}", old_degraded_reason(old));
            events.push(event(EventType::Normal, "Recovered", &note, "Reconcile"));
        }
    }
    if let Some(ready) = find(READY)
        && ready.status == "True"
        && !is_true(old, READY)
    {
        events.push(event(EventType::Normal, "PoolReady", &ready.message, "Reconcile"));
    }
    events
}

fn old_degraded_reason(old: Option<&RenderPoolStatus>) -> String {
    old.and_then(|o| o.conditions.iter().find(|c| c.type_ == DEGRADED))
        .map_or_else(String::new, |c| format!("{} is resolved", c.reason))
}

/// An Event announcing that children were created or changed.
pub fn applied(names: &[String]) -> Event {
    event(EventType::Normal, "ChildrenApplied", &format!("applied {}", names.join(", ")), "Apply")
}

fn event(type_: EventType, reason: &str, note: &str, action: &str) -> Event {
    Event {
        type_,
        reason: reason.into(),
        // Events API limit: 1 kB of note.
        note: Some(note.chars().take(1000).collect()),
        action: action.into(),
        secondary: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn status(ready: &str, degraded: &str, reason: &str) -> RenderPoolStatus {
        let c = |type_: &str, status: &str, reason: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{type_} {reason}"),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        RenderPoolStatus {
            conditions: vec![c(READY, ready, "X"), c(DEGRADED, degraded, reason)],
            ..RenderPoolStatus::default()
        }
    }

    #[test]
    fn only_transitions_make_events() {
        let healthy = status("True", "False", "AsExpected");
        let broken = status("False", "True", "MemoryTooSmallForOneSlot");
        let reasons = |old: Option<&RenderPoolStatus>, new: &RenderPoolStatus| {
            transitions(old, new).into_iter().map(|e| e.reason).collect::<Vec<_>>()
        };
        assert_eq!(reasons(None, &healthy), ["PoolReady"]);
        assert!(reasons(Some(&healthy), &healthy).is_empty(), "steady state publishes nothing");
        assert_eq!(reasons(Some(&healthy), &broken), ["MemoryTooSmallForOneSlot"]);
        assert!(reasons(Some(&broken), &broken).is_empty());
        let other = status("False", "True", "ChildRejected");
        assert_eq!(reasons(Some(&broken), &other), ["ChildRejected"]);
        let recovered = transitions(Some(&broken), &healthy);
        assert_eq!(recovered[0].reason, "Recovered");
        assert!(
            recovered[0].note.as_ref().unwrap().contains("MemoryTooSmallForOneSlot is resolved")
        );
    }
}
