//! The slot plan and the limits it came from, as metrics (`renderpod_slots_planned`,
//! `renderpod_limit_*`, `renderpod_slot_plan`): figures fixed at start.

use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use renderpool_sizing::SlotPlan;

use super::DetectedLimits;
use crate::metrics::{Register, fixed_gauge};

/// The plan of this pod, to register.
pub struct PlanMetrics<'a> {
    /// The slots derived.
    pub plan: &'a SlotPlan,
    /// The limits they were derived from.
    pub limits: &'a DetectedLimits,
}

impl Register for PlanMetrics<'_> {
    fn register(&self, registry: &mut Registry) {
        let (plan, limits) = (self.plan, self.limits);
        let slots = |v: u32| fixed_gauge(u64::from(v));
        registry.register("slots_planned", "Slots derived at start", slots(plan.slots));
        registry.register("slots_cpu", "Slots the CPU limit allows", slots(plan.cpu_slots));
        registry.register(
            "slots_memory",
            "Slots the memory limit allows",
            slots(plan.memory_slots),
        );
        registry.register(
            "limit_cpu_millicores",
            "CPU limit used for sizing",
            fixed_gauge(limits.cpu_millis),
        );
        registry.register(
            "limit_memory_bytes",
            "Memory limit used for sizing",
            fixed_gauge(limits.memory_bytes),
        );
        registry.register(
            "slot_plan",
            "Why the slot count is what it is",
            Info::new(vec![
                ("reason", plan.reason.clone()),
                ("cpu_source", limits.cpu_source.clone()),
                ("memory_source", limits.memory_source.clone()),
            ]),
        );
    }
}
