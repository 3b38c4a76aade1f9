//! renderpool-operator: reconciles `RenderPool` resources into render and Gotenberg pools.
//!
//! The pipeline is validate -> build -> apply -> status: validation, building and status are
//! pure functions of the RenderPool and its observed children (unit-tested here); apply and the
//! status write talk to the API server.

pub mod apply;
pub mod backlog;
pub mod build;
pub mod controller;
pub mod converge;
pub mod crd;
pub mod events;
pub mod http;
pub mod keda;
pub mod leader;
pub mod metrics;
pub mod ownership;
pub mod pool_figures;
pub mod preview;
pub mod probe;
pub mod requests;
pub mod status;
pub mod trace;
pub mod validate;

#[cfg(test)]
mod test_fixtures;
