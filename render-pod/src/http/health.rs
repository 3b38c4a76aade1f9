//! `/healthz`, `/readyz` and `/metrics`: answered by the async front from memory, never queued.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use renderpool_api::render_pod::READYZ_JOBS;

use super::AppState;
use super::error::ApiError;

/// Liveness: the front is answering.
pub async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: 200 while at least one slot has a live worker or is replacing it at once (a
/// one-slot pod stays in its Service through every recycle) and the pod is not draining; the
/// body shows the slot plan, each worker, the queue, the Office path and, with an object store,
/// its document cache either way.
pub async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    let engine = app.engine.status();
    let draining = app.lifecycle.is_draining();
    let ready = !draining && (engine.alive > 0 || engine.replacing > 0);
    let mut body = serde_json::json!({
        "ready": ready,
        "draining": draining,
        "plan": app.plan,
        "engine": engine,
        // Shown, never gating: PDFs are served whatever Gotenberg's state.
        "office": app.office.status(),
        // What `?source=` fetched and kept, and how often an unchanged ETag answered.
        "object_cache": app.objects.as_ref().map(|objects| objects.cache_status()),
        "documents": app.documents.status(),
    });
    // The pool's job backlog, for the operator's status (absent without jobs or a reading).
    if let Some(backlog) = app.jobs.as_ref().and_then(|jobs| jobs.backlog.status()) {
        body[READYZ_JOBS] = serde_json::json!(backlog);
    }
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

/// Prometheus text exposition.
pub async fn metrics(State(app): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let text = app.exposition.encode().map_err(|e| ApiError::internal(e.to_string()))?;
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}
