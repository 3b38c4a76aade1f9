//! cgroup v2 limits read from fixture trees shaped like a Kubernetes container's `/proc` and
//! `/sys/fs/cgroup`, fed to the shared slot formula.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use render_pod::limits::probe_at;
use renderpool_sizing::{SlotPolicy, plan_slots};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn v2_takes_the_tightest_limit_from_container_and_pod_cgroups() {
    let detected = probe_at(&fixture("cgroup-v2-pod"));
    // cpu.max: "max" on the container, 2.5 cores on the pod.
    assert_eq!(detected.cpu_millis, 2500);
    assert!(
        detected.cpu_source.contains("kubepods/pod1/cpu.max = 250000 100000"),
        "{}",
        detected.cpu_source
    );
    // memory.max: 1 GiB on the container, 2 GiB on the pod.
    assert_eq!(detected.memory_bytes, 1 << 30);
    assert!(
        detected.memory_source.contains("kubepods/pod1/ctr/memory.max"),
        "{}",
        detected.memory_source
    );
    let plan = plan_slots(detected.limits(), SlotPolicy::default()).unwrap();
    // cpu 2, memory (1024 - 128, the least supervisor share) / 512 = 1.
    assert_eq!((plan.slots, plan.cpu_slots, plan.memory_slots), (1, 2, 1));
    assert!(plan.reason.starts_with("memory-bound"), "{}", plan.reason);
}

#[test]
fn v2_unlimited_falls_back_to_the_host() {
    let detected = probe_at(&fixture("cgroup-v2-unlimited"));
    assert!(detected.cpu_source.starts_with("host:"), "{}", detected.cpu_source);
    assert!(detected.cpu_millis >= 1000);
    assert_eq!(detected.memory_bytes, 16_384_000 * 1024, "MemTotal of the fixture's meminfo");
    assert!(detected.memory_source.starts_with("host:"), "{}", detected.memory_source);
}

#[test]
fn this_machine_resolves_to_some_limits() {
    let detected = render_pod::limits::detect();
    assert!(detected.cpu_millis >= 1000, "{detected:?}");
    assert!(detected.memory_bytes > 0, "{detected:?}");
}
