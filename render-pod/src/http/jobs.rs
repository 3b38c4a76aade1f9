//! The durable job routes. `POST /v1/jobs` takes a job message (`application/json`, its input
//! already in the object store) or a document as the body with the message in the
//! `X-Renderpool-Job` header (the document is stored under `--jobs-upload-url` first), checks
//! it with the same parsers and limits as the synchronous routes, records it as queued,
//! publishes it and answers `202` with its id and `Location`; the same idempotency key again
//! finds the first job (`200`). `GET /v1/jobs/{id}` answers its state, progress and, once done,
//! its manifest; `DELETE /v1/jobs/{id}` cancels it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use renderpool_api::jobs::{
    self as contract, Checked, JobId, JobMessage, JobStatus, Manifest, ObjectUrl, State as JobState,
};

use super::AppState;
use super::body::{self, Budget};
use super::error::ApiError;
use super::input;
use super::params::{self, Query};
use crate::broker::states::{Change, now_ms};
use crate::broker::{Backlog, Broker, JobStates};
use crate::objects::{Access, Objects};

/// The header carrying the job message when the body is the document.
pub const JOB_HEADER: &str = "x-renderpool-job";
/// The header carrying the idempotency key (the message's own field wins).
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";
/// Largest manifest `GET` reads back to embed.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// What the job routes need: the broker, and where uploaded documents go.
#[derive(Debug, Clone)]
pub struct JobsFront {
    /// The broker.
    pub broker: Broker,
    /// `s3://bucket/prefix` for documents `POST /v1/jobs` receives as its body.
    pub upload: Option<ObjectUrl>,
    /// The pool's backlog as last read, for `/readyz`.
    pub backlog: Arc<Backlog>,
}

/// 503 `jobs_not_configured`.
fn not_configured() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "jobs_not_configured",
        "durable jobs are not configured on this pod (--jobs-nats-url and an object store)",
    )
}

/// 503 `job_broker_unavailable`, with the broker's or the state bucket's error.
fn broker_unavailable(detail: impl std::fmt::Display) -> ApiError {
    ApiError {
        retry_after: Some(1),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "job_broker_unavailable",
            format!("the job broker failed: {detail}"),
        )
    }
}

/// 404 `job_not_found`.
fn not_found(id: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "job_not_found", format!("no job {id:?} is known"))
}

fn configured(app: &AppState) -> Result<(&JobsFront, &Arc<Objects>), ApiError> {
    match (&app.jobs, &app.objects) {
        (Some(jobs), Some(objects)) => Ok((jobs, objects)),
        _ => Err(not_configured()),
    }
}

/// The job as JSON with `status` and its `Location`.
fn answer(status: StatusCode, job: &JobStatus) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(job).map_err(|e| ApiError::internal(e.to_string()))?;
    let location = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((
        status,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::LOCATION, location),
        ],
        body,
    )
        .into_response())
}

/// The `Idempotency-Key` header, if sent.
fn key_header(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    headers
        .get(IDEMPOTENCY_HEADER)
        .map(|v| {
            v.to_str()
                .map(|s| s.trim().to_string())
                .map_err(|_| ApiError::invalid("Idempotency-Key must be visible ASCII"))
        })
        .transpose()
}

/// A key for a job whose client gave none: 128 random bits.
fn random_key() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks a job message as the pod will run it: its shape, each operation through its route's
/// parser, and the buckets it reads and writes.
pub fn check(app: &AppState, objects: &Objects, message: JobMessage) -> Result<Checked, ApiError> {
    let checked = message.check().map_err(|e| ApiError::invalid(e.to_string()))?;
    for (index, operation) in checked.message.operations.iter().enumerate() {
        let query = Query::from(operation.query());
        params::job_operation(operation.name(), &query, app.max_pages, app.thumbnails).map_err(
            |e| ApiError {
                message: format!("operation {index} ({}): {}", operation.name(), e.message),
                ..e
            },
        )?;
    }
    objects.check(&checked.input, Access::Read)?;
    objects.check(&checked.output, Access::Write)?;
    Ok(checked)
}

/// The message of a request: the JSON body's, or the job header's with the key filled in.
fn message_of(value: serde_json::Value, key: String) -> Result<JobMessage, ApiError> {
    let mut value = value;
    let Some(object) = value.as_object_mut() else {
        return Err(ApiError::invalid("a job message is a JSON object"));
    };
    object.entry("idempotency_key").or_insert(serde_json::Value::String(key));
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("not a job message: {e}")))
}

/// Records `checked` as queued and publishes it: `202` for a new job, `200` with the first
/// job's state for a key seen before.
async fn enqueue(front: &JobsFront, checked: Checked) -> Result<Response, ApiError> {
    let key = checked.message.idempotency_key.clone().unwrap_or_default();
    let id = JobId::from_key(&key);
    let states: &JobStates = &front.broker.states;
    if let Some(existing) =
        states.create(&JobStatus::queued(id.clone(), now_ms())).await.map_err(broker_unavailable)?
    {
        return answer(StatusCode::OK, &existing);
    }
    let bytes = Bytes::from(
        serde_json::to_vec(&checked.message).map_err(|e| ApiError::internal(e.to_string()))?,
    );
    if let Err(e) = front.broker.publish(&key, bytes).await {
        // Not published: forget it, so the same key can be sent again.
        let _ = states.remove(&id).await;
        return Err(broker_unavailable(e));
    }
    answer(StatusCode::ACCEPTED, &JobStatus::queued(id, now_ms()))
}

/// `POST /v1/jobs`.
pub async fn submit(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (front, objects) = match configured(&app) {
        Ok(configured) => configured,
        Err(error) => return Err(input::refuse(request, error)),
    };
    if !app.lifecycle.is_accepting() {
        return Err(input::refuse(request, crate::engine::JobError::Draining.into()));
    }
    let key = match key_header(request.headers()) {
        Ok(key) => key,
        Err(error) => return Err(input::refuse(request, error)),
    };
    let json =
        request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(
            |v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"),
        );
    if json {
        let body = axum::body::to_bytes(request.into_body(), contract::MAX_MESSAGE_BYTES)
            .await
            .map_err(|_| {
                ApiError::invalid(format!(
                    "a job message has at most {} bytes",
                    contract::MAX_MESSAGE_BYTES
                ))
            })?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("not JSON: {e}")))?;
        let key = match key {
            Some(key) => key,
            None => random_key()?,
        };
        let checked = check(&app, objects, message_of(value, key)?)?;
        return enqueue(front, checked).await;
    }
    // The body is the document; the message is in the header, without an input.
    let parsed = upload_message(&app, front, objects, request.headers(), key);
    let (mut checked, upload) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return Err(input::refuse(request, error)),
    };
    let id = JobId::from_key(checked.message.idempotency_key.as_deref().unwrap_or_default());
    let found = front.broker.states.get(&id).await.map_err(broker_unavailable);
    let timeout = input::request_timeout(request.headers());
    let (found, timeout) = match (found, timeout) {
        (Ok(found), Ok(timeout)) => (found, timeout),
        (Err(error), _) | (_, Err(error)) => return Err(input::refuse(request, error)),
    };
    if let Some((existing, _)) = found {
        // The same key again: the first job, and the document is not read a second time.
        let _ = input::refuse(request, not_found(id.as_str()));
        return answer(StatusCode::OK, &existing);
    }
    let timing = app.engine.timing(std::time::Instant::now(), timeout);
    let budget = Budget {
        budget: app.uploads.budget.clone(),
        retry_after_secs: app.engine.retry_after_secs(),
    };
    let document =
        body::read_document(request, app.uploads.limits, budget, timing.effective(), false).await?;
    if document.bytes.is_empty() {
        return Err(ApiError::invalid("the document is empty"));
    }
    app.metrics.bytes_in.inc_by(document.bytes.len() as u64);
    // The job reads the version stored here: this pod holds it already, any other reads it
    // only if the upload's place has not been written over since.
    checked.message.input.etag = objects.put_document(&upload, document.held()).await?;
    enqueue(front, checked).await
}

/// The message of a document upload: the header's, its input the upload's place.
fn upload_message(
    app: &AppState,
    front: &JobsFront,
    objects: &Objects,
    headers: &HeaderMap,
    key: Option<String>,
) -> Result<(Checked, ObjectUrl), ApiError> {
    let Some(prefix) = &front.upload else {
        return Err(ApiError::invalid(
            "this pod stores no uploaded documents (--jobs-upload-url): put the document in the object store and send the job as application/json",
        ));
    };
    let text = headers.get(JOB_HEADER).ok_or_else(|| {
        ApiError::invalid(format!(
            "a document as the body needs its job message in the {JOB_HEADER} header (or send the message as application/json)"
        ))
    })?;
    let mut value: serde_json::Value = serde_json::from_slice(text.as_bytes())
        .map_err(|e| ApiError::invalid(format!("{JOB_HEADER} is not JSON: {e}")))?;
    if value.get("input").is_some() {
        return Err(ApiError::invalid(format!(
            "{JOB_HEADER} names an input, and the body is one too: send one"
        )));
    }
    let key = match key.or_else(|| value["idempotency_key"].as_str().map(str::to_string)) {
        Some(key) => key,
        None => random_key()?,
    };
    let upload = prefix.join(JobId::from_key(&key).as_str());
    if let Some(object) = value.as_object_mut() {
        object.insert("input".into(), serde_json::json!({"url": upload.to_string()}));
    }
    let checked = check(app, objects, message_of(value, key)?)?;
    Ok((checked, upload))
}

fn job_id(id: &str) -> Result<JobId, ApiError> {
    JobId::try_from(id.to_string()).map_err(|_| not_found(id))
}

/// `GET /v1/jobs/{id}`.
pub async fn status(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (front, objects) = configured(&app)?;
    let id = job_id(&id)?;
    let Some((mut job, _)) = front.broker.states.get(&id).await.map_err(broker_unavailable)? else {
        return Err(not_found(id.as_str()));
    };
    if job.state == JobState::Done
        && let Some(url) = job.manifest_url.as_deref().and_then(|u| ObjectUrl::parse(u).ok())
    {
        let bytes = objects.read_small(&url, MAX_MANIFEST_BYTES).await?;
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::internal(format!("{url}: not a manifest: {e}")))?;
        job.manifest = Some(manifest);
    }
    answer(StatusCode::OK, &job)
}

/// `DELETE /v1/jobs/{id}`: a queued or running job is cancelled (a running one stops at its
/// next output); a finished one is answered as it is.
pub async fn cancel(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (front, _) = configured(&app)?;
    let id = job_id(&id)?;
    let job = front
        .broker
        .states
        .update(&id, |job| match job {
            Some(job) if !job.state.is_final() => {
                job.state = JobState::Cancelled;
                Change::Write
            }
            _ => Change::Keep,
        })
        .await
        .map_err(broker_unavailable)?;
    match job {
        Some(job) => answer(StatusCode::OK, &job),
        None => Err(not_found(id.as_str())),
    }
}
