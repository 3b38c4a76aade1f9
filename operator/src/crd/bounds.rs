//! The bounds of a RenderPool spec, in one place: the CRD's schema and CEL rules make the API
//! server refuse what lies outside them, and validation checks them again, so a RenderPool
//! stored under an older CRD is refused the same way instead of reaching the arithmetic.

use kube::core::{Message, Rule};

/// An inclusive range of a whole-number spec field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Smallest value allowed.
    pub min: i64,
    /// Largest value allowed.
    pub max: i64,
}

impl Bound {
    /// True when `value` lies within the bound.
    pub fn contains(self, value: i64) -> bool {
        (self.min..=self.max).contains(&value)
    }
}

/// Render pods of one pool.
pub const REPLICAS: Bound = Bound { min: 0, max: 1000 };
/// An explicit slot count per render pod.
pub const SLOTS: Bound = Bound { min: 1, max: 256 };
/// Jobs a render pod queues.
pub const QUEUE_DEPTH: Bound = Bound { min: 1, max: 100_000 };
/// A job's deadline in milliseconds: 100 ms to 10 minutes.
pub const JOB_DEADLINE_MS: Bound = Bound { min: 100, max: 600_000 };
/// The preStop sleep in seconds.
pub const PRE_STOP_SECONDS: Bound = Bound { min: 0, max: 120 };
/// The drain delay after SIGTERM in milliseconds.
pub const DRAIN_DELAY_MS: Bound = Bound { min: 0, max: 120_000 };
/// Gotenberg replicas (and Office concurrency).
pub const GOTENBERG_REPLICAS: Bound = Bound { min: 1, max: 500 };
/// Conversions before LibreOffice restarts (0 = never).
pub const RESTART_AFTER: Bound = Bound { min: 0, max: 100_000 };
/// Gotenberg's LibreOffice queue per replica.
pub const QUEUE_SIZE: Bound = Bound { min: 1, max: 1000 };
/// Gotenberg's request timeout in seconds (at most the longest job deadline).
pub const TIMEOUT_SECONDS: Bound = Bound { min: 1, max: JOB_DEADLINE_MS.max / 1000 };
/// The autoscaler's replica ceiling: at least one pod.
pub const AUTOSCALING_REPLICAS: Bound = Bound { min: 1, max: REPLICAS.max };
/// The autoscaler's floor: 0 only for a pool that KEDA wakes on its job backlog (an HPA leaves
/// a target at 0 alone), which [`zero_needs_jobs`] holds.
pub const AUTOSCALING_MIN_REPLICAS: Bound = Bound { min: 0, max: REPLICAS.max };
/// The backlog target in jobs pending (queued or running) per slot.
pub const TARGET_PENDING_JOBS_PER_SLOT: Bound = Bound { min: 1, max: 100_000 };
/// Pending jobs that wake a pool at zero: above this many, KEDA starts the first pod.
pub const ACTIVATION_PENDING_JOBS: Bound = Bound { min: 0, max: 1_000_000 };
/// The busy-slot target in percent of a pod's slots.
pub const TARGET_BUSY_PERCENT: Bound = Bound { min: 1, max: 100 };
/// The queue-depth target in jobs waiting per pod (at most a pod's queue).
pub const TARGET_QUEUE_DEPTH: Bound = Bound { min: 1, max: QUEUE_DEPTH.max };
/// The scale-down stabilisation window in seconds (the HPA's own ceiling is an hour).
pub const SCALE_DOWN_STABILIZATION_SECONDS: Bound = Bound { min: 0, max: 3600 };

/// Jobs the stream holds (the render pod refuses fewer than one).
pub const STREAM_MAX_MESSAGES: Bound = Bound { min: 1, max: 1_000_000_000_000 };
/// Seconds a queued job may wait: at least the render pod's minute, at most a year.
pub const STREAM_MAX_AGE_SECONDS: Bound = Bound { min: 60, max: 366 * 86_400 };

/// Seconds a delivered job may go unacknowledged: the render pod's floor of one second, an
/// hour at most.
pub const ACK_WAIT_SECONDS: Bound = Bound { min: 1, max: 3600 };
/// Lost deliveries before a job is dead-lettered (the render pod's range).
pub const MAX_DELIVERIES: Bound = Bound { min: 1, max: 100 };

/// The schemes the render pods' NATS client connects with.
pub const NATS_SCHEMES: [&str; 4] = ["nats://", "tls://", "ws://", "wss://"];
/// Stream replicas a NATS cluster accepts (a Raft group of an odd size).
pub const STREAM_REPLICAS: [i32; 3] = [1, 3, 5];

/// The NATS URL starts with one of [`NATS_SCHEMES`].
pub fn nats_url_scheme() -> Rule {
    let quoted: Vec<String> = NATS_SCHEMES.iter().map(|s| format!("'{s}'")).collect();
    Rule::new(format!("[{}].exists(p, self.startsWith(p))", quoted.join(", "))).message(
        Message::Message(format!("jobs.nats.url must start with {}", in_words(&NATS_SCHEMES))),
    )
}

/// The stream's replicas are one of [`STREAM_REPLICAS`].
pub fn stream_replicas() -> Rule {
    let listed: Vec<String> = STREAM_REPLICAS.iter().map(i32::to_string).collect();
    Rule::new(format!("self in [{}]", listed.join(", "))).message(Message::Message(format!(
        "jobs.stream.replicas must be {}",
        stream_replicas_in_words()
    )))
}

/// [`STREAM_REPLICAS`] as a person reads them: `1, 3 or 5`.
pub fn stream_replicas_in_words() -> String {
    let listed: Vec<String> = STREAM_REPLICAS.iter().map(i32::to_string).collect();
    in_words(&listed)
}

/// `a, b or c`.
pub fn in_words<T: AsRef<str>>(items: &[T]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [rest @ .., last] => {
            let rest: Vec<&str> = rest.iter().map(AsRef::as_ref).collect();
            format!("{} or {}", rest.join(", "), last.as_ref())
        }
    }
}

/// Pods a rollout may add above, or take away from, the replica count.
pub const ROLLOUT_PODS: Bound = Bound { min: 0, max: REPLICAS.max };

/// Seconds past preStop + drain + one job deadline before the kubelet kills a render pod (the
/// pod's own budget for them is in its contract).
pub const GRACE_MARGIN_SECONDS: i64 = renderpool_api::render_pod::EXIT_MARGIN_SECONDS as i64;
/// Longest termination grace period of a pod: cluster-autoscaler's default
/// --max-graceful-termination-sec, past which it kills a pod it drains from a node.
pub const MAX_GRACE_SECONDS: i64 = 600;

/// Most CPU of one render pod, in cores: whole cores become slots, and 256 is also the most an
/// explicit slot count may ask for.
pub const RENDER_CPU_CORES: u64 = 256;
/// Most CPU of one Gotenberg pod, in cores (LibreOffice runs one conversion at a time).
pub const GOTENBERG_CPU_CORES: u64 = 64;
/// Most memory of one pod (render or Gotenberg), and of one slot, in MiB (1Ti).
pub const MEMORY_MIB: u64 = 1 << 20;
/// Largest upload limit, in MiB (1Gi): uploads are held in memory.
pub const BODY_MIB: u64 = 1024;

/// The CEL rule of a quantity field: a valid quantity above zero and at most `max`; the
/// message quotes the value given.
pub fn quantity(field: &str, max: &str, example: &str) -> Rule {
    Rule::new(format!(
        "isQuantity(self) && quantity(self).isGreaterThan(quantity('0')) && \
         quantity(self).compareTo(quantity('{max}')) <= 0"
    ))
    .message(Message::Expression(format!(
        r#""{field} %s is not a positive quantity of at most {max}; write one such as {example}".format([self])"#
    )))
}

/// `quantity` for a CPU field bounded in cores.
pub fn cpu(field: &str, max_cores: u64, example: &str) -> Rule {
    quantity(field, &max_cores.to_string(), example)
}

/// `quantity` for a memory field bounded in MiB (written in the largest exact unit: 1Ti, 1Gi).
pub fn memory(field: &str, max_mib: u64, example: &str) -> Rule {
    let max = match max_mib {
        m if m.is_multiple_of(1 << 20) => format!("{}Ti", m >> 20),
        m if m.is_multiple_of(1 << 10) => format!("{}Gi", m >> 10),
        m => format!("{m}Mi"),
    };
    quantity(field, &max, example)
}

/// The pool's name leaves room for the longest child name within the 63 characters of a
/// Service name.
pub fn name_fits_children() -> Rule {
    Rule::new("size(self.metadata.name) <= 50").message(Message::Expression(
        r#""metadata.name %s has %d characters; at most 50 leave room for the child names, which append -gotenberg within the 63 characters of a Service name".format([self.metadata.name, size(self.metadata.name)])"#.into(),
    ))
}

/// A slot's memory must fit in the pod's (which also holds the supervisor's share; validation
/// then names the exact figure).
pub fn slot_fits_pod() -> Rule {
    Rule::new(
        "!isQuantity(self.memory) || !isQuantity(self.memoryPerSlot) || \
         quantity(self.memoryPerSlot).isLessThan(quantity(self.memory))",
    )
    .message(Message::Expression(
        r#""memoryPerSlot %s must be smaller than memory %s, which also holds the supervisor's share".format([self.memoryPerSlot, self.memory])"#.into(),
    ))
    .field_path(".memoryPerSlot")
}

/// Gotenberg may not work on a conversion longer than the render pod waits for it.
pub fn gotenberg_timeout_within_deadline() -> Rule {
    Rule::new(
        "!has(self.gotenberg) || !has(self.gotenberg.timeoutSeconds) || \
         self.gotenberg.timeoutSeconds * 1000 <= self.jobDeadlineMs",
    )
    .message(Message::Expression(
        r#""gotenberg.timeoutSeconds %d s may not exceed jobDeadlineMs %d ms: a render pod stops waiting for a conversion at its job deadline".format([self.gotenberg.timeoutSeconds, self.jobDeadlineMs])"#.into(),
    ))
    .field_path(".gotenberg.timeoutSeconds")
}

/// An autoscaler's floor may not exceed its ceiling.
pub fn min_within_max() -> Rule {
    Rule::new("self.minReplicas <= self.maxReplicas")
        .message(Message::Expression(
            r#""autoscaling.minReplicas %d may not exceed autoscaling.maxReplicas %d".format([self.minReplicas, self.maxReplicas])"#.into(),
        ))
        .field_path(".minReplicas")
}

/// A queue target above what a pod can queue would never be reached.
pub fn queue_target_within_queue() -> Rule {
    Rule::new(
        "!has(self.autoscaling) || !has(self.autoscaling.targetQueueDepth) || \
         self.autoscaling.targetQueueDepth <= self.queueDepth",
    )
    .message(Message::Expression(
        r#""autoscaling.targetQueueDepth %d may not exceed queueDepth %d: a render pod never holds more waiting jobs, so the target could never be reached".format([self.autoscaling.targetQueueDepth, self.queueDepth])"#.into(),
    ))
    .field_path(".autoscaling.targetQueueDepth")
}

/// A pool at zero pods has nothing to answer a synchronous request: only queued jobs wake it.
pub fn zero_needs_jobs() -> Rule {
    Rule::new("!has(self.autoscaling) || self.autoscaling.minReplicas >= 1 || has(self.jobs)")
        .message(
            "autoscaling.minReplicas 0 needs spec.jobs: a pool at zero pods has no pod to answer \
             a synchronous request (no 503 with Retry-After, just a Service with no endpoints), \
             so only a job backlog may wake it",
        )
        .field_path(".autoscaling.minReplicas")
}

/// With jobs, KEDA scales the pool and must know where to read the backlog; without jobs
/// there is no backlog to read.
pub fn backlog_with_jobs() -> Rule {
    Rule::new("!has(self.autoscaling) || has(self.autoscaling.backlog) == has(self.jobs)")
        .message(
            "with spec.jobs, autoscaling.backlog names the NATS monitoring endpoint KEDA reads the \
         job backlog from (the pool is then scaled by a KEDA ScaledObject, not an HPA); without \
         spec.jobs there is no backlog, so leave autoscaling.backlog out",
        )
        .field_path(".autoscaling.backlog")
}

/// A rollout must be allowed to add a pod or to take one away, or it could never move.
pub fn rollout_moves() -> Rule {
    Rule::new("self.maxSurge + self.maxUnavailable >= 1")
        .message(
            "rollout.maxSurge 0 and rollout.maxUnavailable 0 would never replace a pod: set \
             maxSurge 1 (needs room for one more pod) or maxUnavailable 1 (one pod less meanwhile)",
        )
        .field_path(".maxSurge")
}

/// The render pods' termination grace period (preStop, drain and one job deadline, each in whole
/// seconds, plus the margin: the same sum the operator sets) fits node autoscalers' drain limit.
pub fn grace_fits_node_autoscalers() -> Rule {
    let seconds = format!(
        "self.preStopSeconds + (self.drainDelayMs + 999) / 1000 + \
         (self.jobDeadlineMs + 999) / 1000 + {GRACE_MARGIN_SECONDS}"
    );
    Rule::new(format!("{seconds} <= {MAX_GRACE_SECONDS}"))
        .message(Message::Expression(format!(
            r#""preStopSeconds %d + drainDelayMs %d + jobDeadlineMs %d + {GRACE_MARGIN_SECONDS} s make a termination grace period of %d s for the render pods, past the {MAX_GRACE_SECONDS} s cluster-autoscaler waits for a pod it drains from a node; lower jobDeadlineMs first".format([self.preStopSeconds, self.drainDelayMs, self.jobDeadlineMs, {seconds}])"#
        )))
        .field_path(".jobDeadlineMs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        assert!(QUEUE_DEPTH.contains(1) && QUEUE_DEPTH.contains(100_000));
        assert!(!QUEUE_DEPTH.contains(0) && !QUEUE_DEPTH.contains(100_001));
        assert_eq!(TIMEOUT_SECONDS.max, 600);
    }

    #[test]
    fn quantity_rules_name_the_field_and_the_ceiling() {
        let rule = memory("memoryPerSlot", MEMORY_MIB, "512Mi");
        assert!(rule.rule.contains("quantity('1Ti')"), "{}", rule.rule);
        let text = serde_json::to_string(&rule).unwrap_or_default();
        assert!(
            text.contains("memoryPerSlot %s is not a positive quantity of at most 1Ti"),
            "{text}"
        );
        assert!(memory("maxBodySize", BODY_MIB, "100Mi").rule.contains("quantity('1Gi')"));
        assert!(memory("x", 1536, "1Mi").rule.contains("quantity('1536Mi')"));
    }
}
