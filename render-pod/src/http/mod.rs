//! The HTTP front (axum over hyper's HTTP/1 connections): document routes that check the bearer
//! token (when one is configured) and admit a request within the byte budget and the queue
//! before reading its body, convert Office input and queue work for the slots, and health,
//! readiness, metrics and API description routes that never wait for a slot or ask for a token.

pub mod auth;
pub mod body;
pub mod budget;
pub mod digest;
mod documents;
mod error;
pub mod etag;
#[doc(hidden)]
pub mod fuzz_entries;
mod health;
mod input;
pub mod jobs;
mod metrics;
mod openapi;
pub mod params;
pub mod server;
mod source;
mod thumbnails;
pub mod write_timeout;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::handler::Handler;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::MethodRouter;
use futures::StreamExt;
use renderpool_sizing::SlotPlan;
use serde::Serialize;

use crate::byte_budget::ByteBudget;
use crate::doc_cache::DocCache;
use crate::drain::Lifecycle;
use crate::engine::Engine;
use crate::limits::DetectedLimits;
use crate::metrics::Exposition;
use crate::objects::Objects;
use crate::office::Office;

pub use error::ApiError;
pub use metrics::FrontMetrics;
pub use params::ThumbnailLimits;

/// Request bodies: the byte budget they reserve from, and how they must arrive.
#[derive(Debug, Clone)]
pub struct Uploads {
    /// The front's byte budget.
    pub budget: Arc<ByteBudget>,
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
    /// Documents held by digest, within the upload budget.
    pub documents: Arc<DocCache>,
    /// The byte budget for answers waiting to be written: workers' answers are reserved in it
    /// by the engine, answers the front makes itself (JSON, filmstrip lines, Office PDFs) here.
    pub answers: Arc<ByteBudget>,
    /// Bytes of the answer budget that hold documents rather than answers: a streamed answer's
    /// (a filmstrip's), held at its client's pace. Admission tells the two apart.
    pub streamed_documents: Arc<AtomicU64>,
    /// Caps on filmstrips.
    pub thumbnails: ThumbnailLimits,
    /// What produces the answers, for their ETags.
    pub engine_version: etag::EngineVersion,
    /// The token `/v1/*` requests must present, with `--auth-token-file`.
    pub auth: Option<Arc<auth::BearerToken>>,
    /// The object store, for `?source=` and the job routes.
    pub objects: Option<Arc<Objects>>,
    /// The durable job routes' broker.
    pub jobs: Option<jobs::JobsFront>,
}

/// Tells a client when its connection will not carry another request: after an error answered
/// before the body was read (hyper then drops the connection), and after a request that waited
/// for `100 Continue` and was answered without ever being asked for its body (a document the pod
/// holds already): the body it declared was never sent, so the connection is closed. A request
/// that declared no body leaves nothing unread, error or not.
async fn say_when_closing(request: Request, next: Next) -> Response {
    let no_body = input::declares_no_body(request.headers());
    let (request, asked) = if input::expects_continue(request.headers()) && !no_body {
        let (request, asked) = watch_body(request);
        (request, Some(asked))
    } else {
        (request, None)
    };
    let mut response = next.run(request).await;
    let failed = response.status().is_client_error() || response.status().is_server_error();
    let never_sent = asked.is_some_and(|asked| !asked.load(Ordering::Relaxed));
    if (failed && !no_body) || never_sent {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The request with a body that records whether it was ever read (asking hyper for it is what
/// sends `100 Continue`).
fn watch_body(request: Request) -> (Request, Arc<AtomicBool>) {
    let asked = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let flag = asked.clone();
    let watched = futures::stream::poll_fn(move |cx| {
        flag.store(true, Ordering::Relaxed);
        stream.poll_next_unpin(cx)
    });
    (Request::from_parts(parts, Body::from_stream(watched)), asked)
}

/// Whether a route takes a document (and so the body limit) or is answered by the front from
/// memory, never waiting for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// A `/v1` route: a document in the body, work for a slot or for Gotenberg.
    Document,
    /// Health, readiness, metrics and the API's own description.
    Front,
    /// The durable job routes (behind the token like the document routes).
    Jobs,
}

/// One route: what the router serves and what `openapi.json` must describe.
pub struct Route {
    /// `GET`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path, as axum matches it.
    pub path: &'static str,
    /// Document or front route.
    pub kind: RouteKind,
    handler: MethodRouter<Arc<AppState>>,
}

impl Route {
    /// A `GET` answered by the front.
    fn front<H: Handler<T, Arc<AppState>>, T: 'static>(path: &'static str, handler: H) -> Self {
        let handler = axum::routing::get(handler);
        Self { method: "GET", path, kind: RouteKind::Front, handler }
    }

    /// A `POST` of a document.
    fn document<H: Handler<T, Arc<AppState>>, T: 'static>(path: &'static str, handler: H) -> Self {
        let handler = axum::routing::post(handler);
        Self { method: "POST", path, kind: RouteKind::Document, handler }
    }

    /// A job route.
    fn job(method: &'static str, path: &'static str, handler: MethodRouter<Arc<AppState>>) -> Self {
        Self { method, path, kind: RouteKind::Jobs, handler }
    }
}

/// Every route, in one list: the router is built from it and the OpenAPI document is checked
/// against it.
pub fn routes() -> Vec<Route> {
    vec![
        Route::front("/healthz", health::healthz),
        Route::front("/readyz", health::readyz),
        Route::front("/metrics", health::metrics),
        Route::front("/openapi.json", openapi::document),
        Route::document("/v1/info", documents::info),
        Route::document("/v1/extract", documents::extract),
        Route::document("/v1/render", documents::render),
        Route::document("/v1/thumbnails", thumbnails::thumbnails),
        Route::document("/v1/watermark", documents::watermark),
        Route::document("/v1/convert", documents::convert),
        Route::job("POST", "/v1/jobs", axum::routing::post(jobs::submit)),
        Route::job("GET", "/v1/jobs/{id}", axum::routing::get(jobs::status)),
        Route::job("DELETE", "/v1/jobs/{id}", axum::routing::delete(jobs::cancel)),
    ]
}

/// All routes.
pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = usize::try_from(state.max_body_bytes).unwrap_or(usize::MAX);
    let (mut documents, mut front) = (Router::new(), Router::new());
    for route in routes() {
        match route.kind {
            RouteKind::Document | RouteKind::Jobs => {
                documents = documents.route(route.path, route.handler)
            }
            RouteKind::Front => front = front.route(route.path, route.handler),
        }
    }
    let documents = documents
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require))
        .layer(axum::middleware::from_fn(say_when_closing));
    front.merge(documents).with_state(state)
}
