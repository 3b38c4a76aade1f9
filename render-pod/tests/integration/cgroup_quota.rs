//! The service inside a real cgroup v1 `cpu` group with a CFS quota: the slot count follows the
//! quota (including one above this machine's core count, which only the quota can explain).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Group, ServeIn};

async fn slots_under_quota(quota_us: u64, expected_slots: u64) {
    let Some(group) = Group::cpu("renderpool-test", quota_us, 100_000) else {
        return;
    };
    let server = group.serve(&[]);
    let ready = server.wait_ready().await;
    let plan = &ready["plan"];
    assert_eq!(plan["limits"]["cpu_millis"], quota_us / 100, "{plan}");
    let source = plan["limits"]["cpu_source"].as_str().unwrap();
    assert!(source.contains(&format!("cpu.cfs_quota_us = {quota_us}")), "{source}");
    assert_eq!(plan["cpu_slots"], expected_slots, "{plan}");
    assert_eq!(plan["slots"], expected_slots, "{plan}");
    assert_eq!(ready["engine"]["alive"], expected_slots);
    assert_eq!(server.metric("renderpod_slots_planned", &[]).await, expected_slots as f64);
    // The workers run inside the group too.
    let group_name = group.path().file_name().unwrap().to_str().unwrap().to_string();
    for pid in server.worker_pids().await.into_iter().flatten() {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(cgroups.contains(&group_name), "worker {pid}: {cgroups}");
    }
    drop(server);
}

#[tokio::test]
async fn one_and_a_half_cores_give_one_slot() {
    slots_under_quota(150_000, 1).await;
}

#[tokio::test]
async fn three_and_a_half_cores_give_three_slots_even_on_a_smaller_host() {
    slots_under_quota(350_000, 3).await;
}
