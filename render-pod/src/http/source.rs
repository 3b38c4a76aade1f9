//! `?source=s3://bucket/key`: a document route's document read from the object store instead of
//! the body (a viewer's previews of a stored upload never stream it through the client), in
//! the buckets the pod may read, within the body limit and the upload budget, through the
//! object cache keyed by ETag. Also the API errors of the object store, which the job routes
//! answer with too.
//!
//! The one seam between the document routes and where a document comes from is [`fetch`]: it
//! answers a [`HeldDocument`] as reading a body does (hashed, reserved, not empty).

use axum::extract::Request;
use axum::http::{StatusCode, header};
use renderpool_api::jobs::ObjectUrl;

use super::AppState;
use super::error::ApiError;
use super::input;
use super::params::Query;
use crate::doc_cache::HeldDocument;
use crate::objects::ObjectError;
use crate::ops::OpError;

/// The query parameter naming a stored document.
pub const PARAM: &str = "source";

/// The stored document a request names with `?source=`, if it names one.
pub fn requested(request: &Request) -> Result<Option<ObjectUrl>, ApiError> {
    let query = Query::of_uri(request.uri())?;
    let Some(url) = query.get(PARAM) else { return Ok(None) };
    let url = ObjectUrl::parse(url).map_err(|e| ApiError::invalid(e.to_string()))?;
    if url.key.is_empty() || url.key.ends_with('/') {
        return Err(ApiError::invalid(format!("{PARAM}={url} names no object")));
    }
    let has_body =
        request.headers().get(header::CONTENT_LENGTH).is_some_and(|len| len.as_bytes() != b"0")
            || request.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return Err(ApiError::invalid(format!(
            "give the document as {PARAM}= or as the body, not both"
        )));
    }
    Ok(Some(url))
}

/// Reads the document `url` names, as a body would be read: within the body limit, reserved in
/// the upload budget, from the ETag cache when unchanged.
pub async fn fetch(
    app: &AppState,
    request: Request,
    url: &ObjectUrl,
) -> Result<HeldDocument, ApiError> {
    let Some(objects) = &app.objects else {
        return Err(input::refuse(
            request,
            ApiError::invalid(format!(
                "this pod has no object store (no --objects-* flag): send the document as the body, not as {PARAM}="
            )),
        ));
    };
    drop(request);
    let max = app.uploads.limits.max_bytes;
    let fetched = objects.fetch(url, None, max, &app.uploads.budget).await.inspect_err(|e| {
        if matches!(e, ObjectError::NoRoom { .. }) {
            app.metrics.reject("upload_budget");
        }
    })?;
    app.metrics.bytes_in.inc_by(fetched.document.bytes.len() as u64);
    if fetched.document.bytes.is_empty() {
        return Err(OpError::Unreadable { detail: format!("the document {url} is empty") }.into());
    }
    Ok(fetched.document)
}

impl From<ObjectError> for ApiError {
    fn from(error: ObjectError) -> Self {
        let message = error.to_string();
        match error {
            ObjectError::NotAllowed { .. } | ObjectError::OtherStore { .. } => {
                ApiError::new(StatusCode::FORBIDDEN, "bucket_not_allowed", message)
            }
            ObjectError::NotFound { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "object_not_found", message)
            }
            ObjectError::Changed { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "input_changed", message)
            }
            ObjectError::TooLarge { max, .. } => ApiError { message, ..ApiError::too_large(max) },
            ObjectError::NoRoom { .. } => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "upload_budget_exhausted", message)
            },
            ObjectError::Store { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "object_store_unavailable", message)
            }
            ObjectError::Hash { .. } => ApiError::internal(message),
        }
    }
}
