//! API errors: JSON `{"error": {"code", "message"}}` with a fitting status.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::engine::JobError;
use crate::office::ConvertError;
use crate::ops::OpError;

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// Seconds for `Retry-After`.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error without `Retry-After`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after: None }
    }

    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 413 `body_too_large`.
    pub fn too_large(max: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body exceeds the limit of {max} bytes"),
        )
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        JobError::Op(e).into()
    }
}

impl From<JobError> for ApiError {
    fn from(e: JobError) -> Self {
        Self {
            status: StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: e.code(),
            message: e.to_string(),
            retry_after: e.retry_after_secs(),
        }
    }
}

impl From<ConvertError> for ApiError {
    fn from(e: ConvertError) -> Self {
        Self {
            status: StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: e.code(),
            message: e.to_string(),
            retry_after: e.retry_after_secs(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn overload_carries_retry_after() {
        let e = ApiError::from(JobError::QueueFull { slots: 2, depth: 8, retry_after_secs: 3 });
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "overloaded"));
        let response = e.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
    }

    #[test]
    fn op_errors_keep_their_code_and_status() {
        let e = ApiError::from(OpError::PageOutOfRange { page: 9, page_count: 2 });
        assert_eq!((e.status.as_u16(), e.code), (422, "page_out_of_range"));
        let e = ApiError::from(JobError::WorkerCrashed { detail: "killed by signal 9".into() });
        assert_eq!((e.status.as_u16(), e.code), (502, "worker_crashed"));
    }
}
