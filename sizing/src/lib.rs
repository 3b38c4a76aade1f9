//! Slot sizing shared by the render pod and the operator.
//!
//! One formula, two callers: the render pod feeds it the limits read from its own cgroup, the
//! operator feeds it the limits written in a `RenderPool` spec. Both must agree, or the operator
//! would advertise slot counts the pods never run.

mod office;
mod quantity;
mod slots;

pub use office::office_conversions_per_pod;
pub use quantity::{QuantityError, parse_cpu_millis, parse_decimal_si, parse_memory_bytes};
pub use slots::{
    DEFAULT_SUPERVISOR_OVERHEAD, Limits, SUPERVISOR_AT_REST, SizingError, SlotPlan, SlotPolicy,
    byte_budget, count, plan_slots, supervisor_share,
};

/// Bytes in one mebibyte, for readable constants and messages.
pub const MIB: u64 = 1024 * 1024;
