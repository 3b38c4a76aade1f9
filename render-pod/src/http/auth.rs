//! Bearer-token authentication of the document routes (`/v1/*`) with `--auth-token-file`:
//! a request without `Authorization: Bearer <token>` matching the file is answered 401
//! `unauthorized` with `WWW-Authenticate: Bearer` before its body is read. Health, readiness,
//! metrics and `/openapi.json` stay open for the kubelet and the scraper.
//!
//! The presented and the expected token are compared as BLAKE3 digests, whose equality is
//! constant-time: neither the token's bytes nor its length show in the time a refusal takes.
//! The file is read again at most every [`RECHECK`], so a rotated Secret (the kubelet swaps the
//! mounted file) takes effect without a restart; a file that cannot be read keeps the last token.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;

/// Longest a replaced token file goes unnoticed.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Why the token file cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file cannot be read.
    #[error("cannot read the auth token file {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds nothing but whitespace: every request would be refused, or worse.
    #[error("the auth token file {0} is empty")]
    Empty(PathBuf),
}

/// The expected token, as its digest, and when its file was last read.
#[derive(Debug)]
struct Current {
    digest: blake3::Hash,
    read_at: Instant,
}

/// The token `/v1/*` requests must present.
#[derive(Debug)]
pub struct BearerToken {
    path: PathBuf,
    current: Mutex<Current>,
}

impl BearerToken {
    /// Reads the token from `path` (surrounding whitespace, such as a trailing newline, is not
    /// part of it).
    pub fn load(path: &Path) -> Result<Arc<Self>, TokenError> {
        let digest = read_digest(path)?;
        let current = Mutex::new(Current { digest, read_at: Instant::now() });
        Ok(Arc::new(Self { path: path.to_path_buf(), current }))
    }

    /// True when `authorization` is `Bearer <the token>`.
    pub fn admits(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(presented) = authorization.and_then(|v| bearer(v.as_bytes())) else {
            return false;
        };
        // blake3::Hash's equality is constant-time.
        blake3::hash(presented) == self.expected()
    }

    /// The expected digest, read again from the file once it is older than [`RECHECK`].
    fn expected(&self) -> blake3::Hash {
        let stale = {
            let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            if current.read_at.elapsed() < RECHECK {
                return current.digest;
            }
            current.digest
        };
        // Read outside the lock: a slow read holds up no other request.
        let digest = match read_digest(&self.path) {
            Ok(digest) => digest,
            Err(error) => {
                tracing::warn!(%error, "keeping the last auth token");
                stale
            }
        };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        *current = Current { digest, read_at: Instant::now() };
        digest
    }
}

fn read_digest(path: &Path) -> Result<blake3::Hash, TokenError> {
    let bytes = std::fs::read(path)
        .map_err(|source| TokenError::Unreadable { path: path.to_path_buf(), source })?;
    let token = bytes.trim_ascii();
    if token.is_empty() {
        return Err(TokenError::Empty(path.to_path_buf()));
    }
    Ok(blake3::hash(token))
}

/// The token of an `Authorization` value of the `Bearer` scheme (case-insensitive, RFC 7235).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    Some(rest.trim_ascii()).filter(|token| !token.is_empty())
}

/// Layer of the document routes: passes a request when no token is configured or it presents
/// the token, and answers 401 otherwise.
pub async fn require(State(app): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match &app.auth {
        Some(token) if !token.admits(request.headers().get(header::AUTHORIZATION)) => {
            app.metrics.reject("unauthorized");
            unauthorized()
        }
        _ => next.run(request).await,
    }
}

/// 401 `unauthorized` with the challenge.
fn unauthorized() -> Response {
    let error = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this route needs an Authorization: Bearer header with the pool's token",
    );
    let mut response = error.into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_bearer_scheme_with_a_token_is_read() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"BEARER abc"), Some(&b"abc"[..]));
        for refused in [&b"Basic abc"[..], b"Bearer", b"Bearer ", b"Bearerabc", b"abc", b""] {
            assert_eq!(bearer(refused), None, "{:?}", String::from_utf8_lossy(refused));
        }
    }

    #[test]
    fn the_token_is_the_files_trimmed_content_and_a_rotation_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cret\n").unwrap();
        let token = BearerToken::load(&path).unwrap();
        let header = |v: &str| HeaderValue::from_str(v).unwrap();
        assert!(token.admits(Some(&header("Bearer s3cret"))));
        for wrong in ["Bearer s3cre", "Bearer s3cret2", "Bearer S3CRET", "Basic s3cret"] {
            assert!(!token.admits(Some(&header(wrong))), "{wrong}");
        }
        assert!(!token.admits(None));

        std::fs::write(&path, "rotated").unwrap();
        // Made stale by hand rather than by waiting out RECHECK.
        token.current.lock().unwrap().read_at = Instant::now().checked_sub(RECHECK).unwrap();
        assert!(token.admits(Some(&header("Bearer rotated"))));
        assert!(!token.admits(Some(&header("Bearer s3cret"))));

        // A file gone (mid-rotation) keeps the last token.
        std::fs::remove_file(&path).unwrap();
        token.current.lock().unwrap().read_at = Instant::now().checked_sub(RECHECK).unwrap();
        assert!(token.admits(Some(&header("Bearer rotated"))));
    }

    #[test]
    fn an_empty_or_missing_file_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        assert!(matches!(BearerToken::load(&path), Err(TokenError::Unreadable { .. })));
        std::fs::write(&path, " \n").unwrap();
        assert!(matches!(BearerToken::load(&path), Err(TokenError::Empty(_))));
    }
}
