//! The slot formula: one PDFium worker process per slot, bounded by CPU and memory.

use renderpool_api::render_pod::MEMORY_PER_SLOT;

use crate::MIB;

/// The least memory kept for the supervisor (HTTP front, queue, buffers) before slots are
/// counted.
pub const DEFAULT_SUPERVISOR_OVERHEAD: u64 = 128 * MIB;
/// What the supervisor needs besides its byte budgets and the Office cache: the runtime,
/// metrics and worker pipes at rest (about 20 MiB measured).
pub const SUPERVISOR_AT_REST: u64 = 32 * MIB;

/// The supervisor's byte budgets: request bodies being read, and answers waiting to be written.
/// Both can be full at once (slow senders beside clients that do not read), so its share holds
/// both.
const BYTE_BUDGETS: u64 = 2;

/// The supervisor's share of a pod's memory when none is set: what it needs at rest, the Office
/// cache and a budget of one largest body for uploads and another for answers (a converted or
/// watermarked PDF is about its upload's size), and never less than
/// [`DEFAULT_SUPERVISOR_OVERHEAD`]. Saturates, so an absurd body limit leaves no slot (a sizing
/// error) instead of wrapping.
pub fn supervisor_share(max_body_bytes: u64, office_cache_bytes: u64) -> u64 {
    SUPERVISOR_AT_REST
        .saturating_add(office_cache_bytes)
        .saturating_add(max_body_bytes.saturating_mul(BYTE_BUDGETS))
        .max(DEFAULT_SUPERVISOR_OVERHEAD)
}

/// The size of each of the supervisor's byte budgets (uploads, answers) when none is set: an
/// equal part of what its share leaves after its rest and the Office cache, so that the two
/// full at once stay within the share; `None` when nothing is left. From the default share,
/// one largest body each.
pub fn byte_budget(supervisor_share: u64, office_cache_bytes: u64) -> Option<u64> {
    supervisor_share
        .checked_sub(SUPERVISOR_AT_REST)?
        .checked_sub(office_cache_bytes)
        .map(|left| left / BYTE_BUDGETS)
        .filter(|each| *each > 0)
}

/// Resource limits of one render pod, already resolved (an unlimited cgroup means the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU limit in millicores.
    pub cpu_millis: u64,
    /// Memory limit in bytes.
    pub memory_bytes: u64,
}

/// How slots are carved out of the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotPolicy {
    /// Memory budget of one worker process; also its recycle threshold.
    pub memory_per_slot: u64,
    /// Memory set aside for the supervisor.
    pub supervisor_overhead: u64,
    /// An explicit slot count that replaces the derived one.
    pub override_slots: Option<u32>,
}

impl Default for SlotPolicy {
    fn default() -> Self {
        Self {
            memory_per_slot: MEMORY_PER_SLOT.bytes(),
            supervisor_overhead: DEFAULT_SUPERVISOR_OVERHEAD,
            override_slots: None,
        }
    }
}

/// The derived slot count and the figures it came from, for logs, metrics and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    /// Worker processes to run.
    pub slots: u32,
    /// Slots the CPU limit allows: whole cores, at least one.
    pub cpu_slots: u32,
    /// Slots the memory limit allows after the supervisor's share.
    pub memory_slots: u32,
    /// True when an explicit override set `slots`.
    pub overridden: bool,
    /// One sentence a person can read: which limit decided, or that an override did.
    pub reason: String,
}

/// Why no slot plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizingError {
    /// The memory limit cannot hold the supervisor plus one slot.
    #[error(
        "memory limit {limit_mib} MiB cannot hold one slot: needs at least {needed_mib} MiB \
         ({overhead_mib} MiB supervisor + {per_slot_mib} MiB per slot)"
    )]
    MemoryTooSmall { limit_mib: u64, needed_mib: u64, overhead_mib: u64, per_slot_mib: u64 },
    /// A zero memory-per-slot or a zero override makes no sense.
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
    /// The figures add up past what the arithmetic can hold (a memory per slot of 16 EiB).
    #[error("{0} is too large to size slots from")]
    TooLarge(&'static str),
}

/// Derives the slot count: `max(1, min(floor(cpu), floor((mem - overhead) / per_slot)))`.
///
/// CPU rounds down like Go's automaxprocs and Rust's `available_parallelism`, so 1.5 cores give
/// one slot. An override is honoured even above the derived figure (the operator may know its
/// documents are small), but never when memory cannot hold a single slot.
pub fn plan_slots(limits: Limits, policy: SlotPolicy) -> Result<SlotPlan, SizingError> {
    if policy.memory_per_slot == 0 {
        return Err(SizingError::Zero("memory per slot"));
    }
    if policy.override_slots == Some(0) {
        return Err(SizingError::Zero("slot override"));
    }
    let needed = policy
        .supervisor_overhead
        .checked_add(policy.memory_per_slot)
        .ok_or(SizingError::TooLarge("supervisor overhead plus memory per slot"))?;
    if limits.memory_bytes < needed {
        return Err(SizingError::MemoryTooSmall {
            limit_mib: limits.memory_bytes / MIB,
            needed_mib: needed.div_ceil(MIB),
            overhead_mib: policy.supervisor_overhead / MIB,
            per_slot_mib: policy.memory_per_slot / MIB,
        });
    }
    let cpu_slots = saturate(limits.cpu_millis / 1000).max(1);
    let memory_slots =
        saturate((limits.memory_bytes - policy.supervisor_overhead) / policy.memory_per_slot);
    let derived = cpu_slots.min(memory_slots).max(1);
    let slots = |n: u32| count(n, "slot", "slots");
    let (slots, reason) = match policy.override_slots {
        Some(n) => (
            n,
            format!(
                "override: {} (limits would give {derived}: cpu {cpu_slots}, memory {memory_slots})",
                slots(n)
            ),
        ),
        None if cpu_slots <= memory_slots => (
            derived,
            format!(
                "cpu-bound: {} from {} millicores (memory allows {memory_slots})",
                slots(cpu_slots),
                limits.cpu_millis
            ),
        ),
        None => (
            derived,
            format!(
                "memory-bound: {} from {} MiB at {} MiB each (cpu allows {cpu_slots})",
                slots(memory_slots),
                limits.memory_bytes / MIB,
                policy.memory_per_slot / MIB
            ),
        ),
    };
    Ok(SlotPlan {
        slots,
        cpu_slots,
        memory_slots,
        overridden: policy.override_slots.is_some(),
        reason,
    })
}

/// `n` and the noun in the number it takes: "1 slot", "2 slots", "0 slots".
pub fn count<N: Into<i64>>(n: N, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const GIB: u64 = 1024 * MIB;

    fn limits(cpu_millis: u64, memory_bytes: u64) -> Limits {
        Limits { cpu_millis, memory_bytes }
    }

    #[test]
    fn cpu_bound_rounds_cores_down() {
        let plan = plan_slots(limits(3000, 4 * GIB), SlotPolicy::default()).unwrap();
        assert_eq!((plan.slots, plan.cpu_slots, plan.memory_slots), (3, 3, 7));
        assert!(plan.reason.starts_with("cpu-bound"), "{}", plan.reason);
        let plan = plan_slots(limits(2500, 4 * GIB), SlotPolicy::default()).unwrap();
        assert_eq!(plan.slots, 2);
    }

    #[test]
    fn fractional_cpu_still_gets_one_slot() {
        let plan = plan_slots(limits(500, GIB), SlotPolicy::default()).unwrap();
        assert_eq!((plan.slots, plan.cpu_slots), (1, 1));
        assert_eq!(plan.reason, "cpu-bound: 1 slot from 500 millicores (memory allows 1)");
        let one = SlotPolicy { override_slots: Some(1), ..SlotPolicy::default() };
        let plan = plan_slots(limits(3000, 4 * GIB), one).unwrap();
        assert!(
            plan.reason.starts_with("override: 1 slot (limits would give 3"),
            "{}",
            plan.reason
        );
    }

    #[test]
    fn memory_bound_subtracts_supervisor_overhead() {
        let policy = SlotPolicy { memory_per_slot: 512 * MIB, ..SlotPolicy::default() };
        // (1024 - 128) / 512 = 1.75 -> 1
        let plan = plan_slots(limits(2000, GIB), policy).unwrap();
        assert_eq!((plan.slots, plan.memory_slots), (1, 1));
        assert!(plan.reason.starts_with("memory-bound"), "{}", plan.reason);
    }

    #[test]
    fn the_supervisor_share_holds_a_largest_upload_a_largest_answer_and_the_office_cache() {
        // 32 at rest + 64 Office cache + 100 upload + 100 answer
        assert_eq!(supervisor_share(100 * MIB, 64 * MIB), 296 * MIB);
        assert_eq!(supervisor_share(MIB, 0), DEFAULT_SUPERVISOR_OVERHEAD, "never below the floor");
        assert_eq!(supervisor_share(u64::MAX, 64 * MIB), u64::MAX, "saturates, never wraps");
        let policy = SlotPolicy {
            supervisor_overhead: supervisor_share(u64::MAX, 0),
            ..SlotPolicy::default()
        };
        assert!(plan_slots(limits(2000, GIB), policy).is_err(), "no slot, no wrapped figure");
    }

    #[test]
    fn each_byte_budget_is_an_equal_part_of_what_the_share_leaves() {
        // The default share gives back one largest body to each budget, for any body limit
        // above the share's floor (16 MiB with the 64 MiB cache).
        for body in [16 * MIB, 100 * MIB, 4 * GIB] {
            assert_eq!(byte_budget(supervisor_share(body, 64 * MIB), 64 * MIB), Some(body));
        }
        assert_eq!(byte_budget(supervisor_share(MIB, 64 * MIB), 64 * MIB), Some(16 * MIB));
        assert_eq!(byte_budget(256 * MIB, 0), Some(112 * MIB));
        assert_eq!(byte_budget(97 * MIB, 64 * MIB), Some(MIB / 2), "rounded down");
        assert_eq!(byte_budget(96 * MIB, 64 * MIB), None, "nothing left");
        assert_eq!(byte_budget(16 * MIB, 0), None, "less than the rest");
        assert_eq!(byte_budget(SUPERVISOR_AT_REST + 1, 0), None, "one byte cannot be split");
        assert_eq!(byte_budget(u64::MAX, 0), Some((u64::MAX - SUPERVISOR_AT_REST) / 2));
    }

    #[test]
    fn memory_too_small_for_one_slot_is_refused() {
        let err = plan_slots(limits(2000, 600 * MIB), SlotPolicy::default()).unwrap_err();
        assert_eq!(
            err,
            SizingError::MemoryTooSmall {
                limit_mib: 600,
                needed_mib: 640,
                overhead_mib: 128,
                per_slot_mib: 512
            }
        );
        assert!(err.to_string().contains("needs at least 640 MiB"));
    }

    #[test]
    fn override_is_honoured_and_reported() {
        let policy = SlotPolicy { override_slots: Some(6), ..SlotPolicy::default() };
        let plan = plan_slots(limits(2000, 8 * GIB), policy).unwrap();
        assert_eq!(plan.slots, 6);
        assert!(plan.overridden);
        assert!(plan.reason.contains("limits would give 2"), "{}", plan.reason);
    }

    #[test]
    fn extreme_figures_neither_panic_nor_wrap() {
        let huge = SlotPolicy { memory_per_slot: u64::MAX, ..SlotPolicy::default() };
        assert_eq!(
            plan_slots(limits(2000, u64::MAX), huge),
            Err(SizingError::TooLarge("supervisor overhead plus memory per slot"))
        );
        let overhead = SlotPolicy { supervisor_overhead: u64::MAX, ..SlotPolicy::default() };
        assert!(matches!(
            plan_slots(limits(2000, 4 * GIB), overhead),
            Err(SizingError::TooLarge(_))
        ));
        // Millions of cores and exabytes: the counts saturate at u32::MAX instead of wrapping.
        let plan = plan_slots(limits(u64::MAX, u64::MAX), SlotPolicy::default()).unwrap();
        assert_eq!((plan.cpu_slots, plan.memory_slots, plan.slots), (u32::MAX, u32::MAX, u32::MAX));
        let plan = plan_slots(limits(5_000_000_000, 4 * GIB), SlotPolicy::default()).unwrap();
        assert_eq!((plan.cpu_slots, plan.slots), (5_000_000, 7));
        // A per-slot budget as large as the whole memory still leaves no room for the supervisor.
        let whole = SlotPolicy { memory_per_slot: 4 * GIB, ..SlotPolicy::default() };
        assert!(matches!(
            plan_slots(limits(2000, 4 * GIB), whole),
            Err(SizingError::MemoryTooSmall { needed_mib: 4224, .. })
        ));
    }

    #[test]
    fn zero_inputs_are_refused() {
        let zero_mem = SlotPolicy { memory_per_slot: 0, ..SlotPolicy::default() };
        assert_eq!(
            plan_slots(limits(1000, GIB), zero_mem),
            Err(SizingError::Zero("memory per slot"))
        );
        let zero_override = SlotPolicy { override_slots: Some(0), ..SlotPolicy::default() };
        assert_eq!(
            plan_slots(limits(1000, GIB), zero_override),
            Err(SizingError::Zero("slot override"))
        );
    }
}
