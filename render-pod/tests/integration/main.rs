//! The render pod's integration tests, one binary (one link) for the crate: real PDFium in
//! process (`ops_*`, `pdfium_binding`), the real `render-pod serve` as a process (`service_*`,
//! `memory_ceiling`, `cgroup_quota`, in cgroups of their own where they need one), and the limit
//! probe on fixture trees (`cgroup_fixtures`). One file can be run alone:
//! `scripts/test.sh -p render-pod --test integration service_crash::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Mutex, MutexGuard};

mod cgroup_fixtures;
mod cgroup_quota;
mod common;
mod memory_ceiling;
mod ops_corpus;
mod ops_oneshot;
mod pdfium_binding;
mod service_answers;
mod service_auth;
mod service_cancel;
mod service_corpus;
mod service_crash;
mod service_digest;
mod service_front;
mod service_lifecycle;
mod service_sandbox;
mod service_truncation;
mod service_upload_fairness;

/// PDFium is not thread-safe and the test harness runs tests on threads: the tests that load it
/// into this process take turns (a server's workers are processes of their own).
static PDFIUM: Mutex<()> = Mutex::new(());

/// This test's turn with in-process PDFium, until the guard drops.
fn pdfium_turn() -> MutexGuard<'static, ()> {
    PDFIUM.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
