//! Validation: turns a spec into checked, parsed figures, or an error a person can act on.
//!
//! The CRD's CEL rules refuse what can be checked without the sizing formula (quantity syntax,
//! positive values, replicas vs officeConcurrency); what needs the formula (does the memory hold
//! one slot?) is checked here and reported as a Degraded condition.

use crate::crd::RenderPoolSpec;
use renderpool_sizing::{
    DEFAULT_SUPERVISOR_OVERHEAD, Limits, QuantityError, SizingError, SlotPlan, SlotPolicy,
    office_conversions_per_pod, parse_cpu_millis, parse_memory_bytes, plan_slots,
};

/// A spec the operator cannot build a pool from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A quantity the sizing code cannot read (the CRD's rules normally catch these first).
    #[error("{field}: {source}")]
    Quantity {
        /// Spec field path.
        field: &'static str,
        /// What was wrong with it.
        source: QuantityError,
    },
    /// The render pod's resources cannot hold one slot, or a figure is zero.
    #[error("render pod sizing: {0}; raise spec.memory or lower spec.memoryPerSlot")]
    Sizing(#[from] SizingError),
    /// A number outside what Kubernetes can carry.
    #[error("{0} is out of range")]
    OutOfRange(&'static str),
    /// The API server refused a child built from this spec (e.g. a malformed toleration).
    #[error("the API server refused {0}; correct the RenderPool spec")]
    Rejected(String),
}

impl SpecError {
    /// Short PascalCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Quantity { .. } => "InvalidQuantity",
            Self::Sizing(SizingError::MemoryTooSmall { .. }) => "MemoryTooSmallForOneSlot",
            Self::Sizing(SizingError::Zero(_)) => "ZeroSizing",
            Self::OutOfRange(_) => "OutOfRange",
            Self::Rejected(_) => "ChildRejected",
        }
    }
}

/// The figures every child is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPlan {
    /// Render pod CPU limit in millicores.
    pub cpu_millis: u64,
    /// Render pod memory limit in bytes.
    pub memory_bytes: u64,
    /// Slot plan from the shared formula.
    pub slots: SlotPlan,
    /// Render replicas wanted.
    pub replicas: i32,
    /// Gotenberg figures, when the pool has one.
    pub gotenberg: Option<GotenbergPlan>,
}

/// The checked figures of the Gotenberg pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GotenbergPlan {
    /// Gotenberg replicas, i.e. Office conversions the pool runs at once.
    pub replicas: i32,
    /// Gotenberg CPU limit in millicores (sets Chromium concurrency).
    pub cpu_millis: u64,
    /// Office conversions one render pod may have in flight.
    pub office_per_pod: u32,
}

impl PoolPlan {
    /// Slots of the whole pool when every replica is ready.
    pub fn total_slots(&self) -> i32 {
        i32::try_from(self.slots.slots).unwrap_or(i32::MAX).saturating_mul(self.replicas)
    }
}

/// Checks a spec and derives its figures with the shared sizing code.
pub fn validate(spec: &RenderPoolSpec) -> Result<PoolPlan, SpecError> {
    let cpu_millis = cpu(&spec.cpu, "spec.cpu")?;
    let memory_bytes = memory(&spec.memory, "spec.memory")?;
    let memory_per_slot = memory(&spec.memory_per_slot, "spec.memoryPerSlot")?;
    let override_slots = match spec.slots {
        Some(n) => Some(u32::try_from(n).map_err(|_| SpecError::OutOfRange("spec.slots"))?),
        None => None,
    };
    let slots = plan_slots(
        Limits { cpu_millis, memory_bytes },
        SlotPolicy {
            memory_per_slot,
            supervisor_overhead: DEFAULT_SUPERVISOR_OVERHEAD,
            override_slots,
        },
    )?;
    let replicas = spec.replicas.max(0);
    let gotenberg = if spec.gotenberg.enabled {
        let g = &spec.gotenberg;
        let wanted = g.replicas.or(g.office_concurrency).unwrap_or(1);
        if wanted < 1 {
            return Err(SpecError::OutOfRange("spec.gotenberg.replicas"));
        }
        // Only checked here: the Gotenberg memory feeds no formula, but a bad one must not reach
        // the Deployment.
        memory(&g.memory, "spec.gotenberg.memory")?;
        Some(GotenbergPlan {
            replicas: wanted,
            cpu_millis: cpu(&g.cpu, "spec.gotenberg.cpu")?,
            office_per_pod: office_conversions_per_pod(
                wanted.unsigned_abs(),
                replicas.unsigned_abs(),
            ),
        })
    } else {
        None
    };
    Ok(PoolPlan { cpu_millis, memory_bytes, slots, replicas, gotenberg })
}

fn cpu(value: &str, field: &'static str) -> Result<u64, SpecError> {
    match parse_cpu_millis(value) {
        Ok(0) => Err(SpecError::Sizing(SizingError::Zero(field))),
        Ok(m) => Ok(m),
        Err(source) => Err(SpecError::Quantity { field, source }),
    }
}

fn memory(value: &str, field: &'static str) -> Result<u64, SpecError> {
    match parse_memory_bytes(value) {
        Ok(0) => Err(SpecError::Sizing(SizingError::Zero(field))),
        Ok(b) => Ok(b),
        Err(source) => Err(SpecError::Quantity { field, source }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::test_fixtures::spec_from_yaml;

    #[test]
    fn three_cores_four_gib_is_cpu_bound_at_three_slots() {
        let plan = validate(&spec_from_yaml("cpu: '3'\nmemory: 4Gi\nreplicas: 2")).unwrap();
        // cpu 3 cores -> 3; memory (4096 - 128) / 512 = 7.75 -> 7; min = 3
        assert_eq!((plan.slots.slots, plan.slots.cpu_slots, plan.slots.memory_slots), (3, 3, 7));
        assert_eq!(plan.total_slots(), 6);
        assert_eq!(plan.cpu_millis, 3000);
    }

    #[test]
    fn memory_too_small_names_the_fields_to_change() {
        let err = validate(&spec_from_yaml("cpu: '2'\nmemory: 600Mi")).unwrap_err();
        assert_eq!(err.reason(), "MemoryTooSmallForOneSlot");
        let text = err.to_string();
        assert!(text.contains("needs at least 640 MiB"), "{text}");
        assert!(text.contains("spec.memory"), "{text}");
    }

    #[test]
    fn bad_quantity_is_a_typed_error_with_its_field() {
        let err = validate(&spec_from_yaml("memoryPerSlot: lots")).unwrap_err();
        assert_eq!(err.reason(), "InvalidQuantity");
        assert!(err.to_string().starts_with("spec.memoryPerSlot: invalid memory quantity"));
        let err = validate(&spec_from_yaml("cpu: '0'")).unwrap_err();
        assert_eq!(err.reason(), "ZeroSizing");
    }

    #[test]
    fn office_concurrency_becomes_gotenberg_replicas_shared_by_render_pods() {
        let plan =
            validate(&spec_from_yaml("replicas: 3\ngotenberg:\n  officeConcurrency: 7")).unwrap();
        let g = plan.gotenberg.unwrap();
        // 7 Gotenberg replicas over 3 render pods: 7 / 3 = 2 each
        assert_eq!((g.replicas, g.office_per_pod), (7, 2));
        let plan = validate(&spec_from_yaml("gotenberg:\n  enabled: false")).unwrap();
        assert_eq!(plan.gotenberg, None);
    }
}
