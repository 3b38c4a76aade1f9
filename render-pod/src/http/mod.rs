//! The HTTP front (axum over hyper's HTTP/1 connections): document routes that admit a request
//! within the byte budget and the queue before reading its body, convert Office input and queue
//! work for the slots, and health, readiness and metrics routes that never wait for a slot.

pub mod body;
pub mod budget;
mod documents;
mod error;
pub mod etag;
mod health;
mod input;
mod metrics;
mod params;
pub mod server;
mod thumbnails;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};
use renderpool_sizing::SlotPlan;
use serde::Serialize;

use crate::drain::Lifecycle;
use crate::engine::Engine;
use crate::limits::DetectedLimits;
use crate::metrics::Exposition;
use crate::office::Office;

pub use error::ApiError;
pub use metrics::FrontMetrics;
pub use params::ThumbnailLimits;

/// Request bodies: the byte budget they reserve from, and how they must arrive.
#[derive(Debug, Clone)]
pub struct Uploads {
    /// The front's byte budget.
    pub budget: Arc<budget::ByteBudget>,
    /// Size, rate and idle limits.
    pub limits: body::BodyLimits,
}

/// The slot plan as `/readyz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    /// Slots running.
    pub slots: u32,
    /// Slots the CPU limit allows.
    pub cpu_slots: u32,
    /// Slots the memory limit allows.
    pub memory_slots: u32,
    /// Set by `--slots`.
    pub overridden: bool,
    /// Which limit decided.
    pub reason: String,
    /// The limits and where they came from.
    pub limits: DetectedLimits,
}

impl PlanView {
    /// Combines the plan and its inputs.
    pub fn new(plan: &SlotPlan, limits: DetectedLimits) -> Self {
        Self {
            slots: plan.slots,
            cpu_slots: plan.cpu_slots,
            memory_slots: plan.memory_slots,
            overridden: plan.overridden,
            reason: plan.reason.clone(),
            limits,
        }
    }
}

/// Everything the handlers share.
pub struct AppState {
    /// The slots and their queue.
    pub engine: Arc<Engine>,
    /// The front's metrics.
    pub metrics: Arc<FrontMetrics>,
    /// Every subsystem's metrics, for `/metrics`.
    pub exposition: Arc<Exposition>,
    /// Office to PDF.
    pub office: Arc<Office>,
    /// Draining state.
    pub lifecycle: Arc<Lifecycle>,
    /// How the slot count was derived.
    pub plan: PlanView,
    /// Largest accepted body.
    pub max_body_bytes: u64,
    /// Most pages one request may name.
    pub max_pages: u32,
    /// The byte budget and body limits.
    pub uploads: Uploads,
    /// Caps on filmstrips.
    pub thumbnails: ThumbnailLimits,
    /// What produces the answers, for their ETags.
    pub engine_version: etag::EngineVersion,
}

/// Errors are often answered before the body was read (bad parameters, too large, draining);
/// hyper then drops the connection, so tell the client not to reuse it.
async fn close_after_error(mut response: Response) -> Response {
    if response.status().is_client_error() || response.status().is_server_error() {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// All routes.
pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = usize::try_from(state.max_body_bytes).unwrap_or(usize::MAX);
    let documents = Router::new()
        .route("/v1/info", post(documents::info))
        .route("/v1/extract", post(documents::extract))
        .route("/v1/render", post(documents::render))
        .route("/v1/thumbnails", post(thumbnails::thumbnails))
        .route("/v1/watermark", post(documents::watermark))
        .route("/v1/convert", post(documents::convert))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(close_after_error));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(documents)
        .with_state(state)
}
