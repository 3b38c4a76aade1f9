//! End-to-end tests against one shared local control plane per run (see `renderpool_tests::cluster`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helm;
mod monitoring;
mod operator_access;
mod operator_autoscaling;
mod operator_conflict;
mod operator_drift;
mod operator_jobs;
mod operator_keda;
mod operator_lifecycle;
mod operator_limits;
mod operator_office;
mod operator_sizing;
mod operator_steady;
mod operator_support;
mod operator_versions;
mod smoke;
