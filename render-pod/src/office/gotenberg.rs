//! The Gotenberg client: one multipart `POST /forms/libreoffice/convert` per attempt, on a new
//! connection each time (behind a Kubernetes Service each new connection may reach another
//! replica, so a retry after a busy answer lands elsewhere), cancelled by dropping its future.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use renderpool_runtime::pacing::Backoff;
use reqwest::multipart::{Form, Part};

use super::ConvertOptions;
use super::detect::OfficeFormat;
use super::error::ConvertError;
use super::metrics::OfficeMetrics;
use crate::error_chain::chain;
use crate::metrics::count;

/// Gotenberg's conversion route, under its base URL.
const CONVERT_PATH: &str = "/forms/libreoffice/convert";
/// Connection attempts while nothing listens (a replica restarting); after that, unavailable.
const CONNECT_ATTEMPTS: u32 = 3;
/// Attempts of a conversion Gotenberg answers 500 (LibreOffice failed: "usually a resource
/// issue ... may be retried", in Gotenberg's words). The second lands on a LibreOffice Gotenberg
/// has checked again: a conversion that started on one just killed for an abandoned conversion
/// (docs/limits.md) gets a fresh one, and a document that crashes LibreOffice crashes it twice.
const FAILED_ATTEMPTS: u32 = 2;
/// Retry `n` waits a random time in [c/2, c), c = 50 ms * 2^(n-1) at most 1 s ("equal
/// jitter", so the retries of many pods do not line up).
const BACKOFF_FIRST_CEILING: Duration = Duration::from_millis(50);
const BACKOFF_MAX_CEILING: Duration = Duration::from_secs(1);
/// Most bytes of an error body kept for the message.
const MAX_ERROR_BODY: usize = 2048;

/// Why the base URL was refused at start.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// Not a URL.
    #[error("--gotenberg-url {url:?} is not a URL: {reason}")]
    Invalid { url: String, reason: String },
    /// Not plain HTTP (this build speaks no TLS: Gotenberg sits in the cluster network).
    #[error("--gotenberg-url {0:?} must be an http:// URL")]
    Scheme(String),
}

/// A client for one Gotenberg Service (or one instance).
pub struct GotenbergClient {
    http: reqwest::Client,
    convert_url: String,
    max_pdf_bytes: u64,
    metrics: Arc<OfficeMetrics>,
}

/// The outcome of one attempt: retry on a new connection, or final.
enum Attempt {
    Retry(ConvertError, &'static str),
    Final(ConvertError),
}

impl GotenbergClient {
    /// A client of the Gotenberg at `base_url` (e.g. `http://pool-gotenberg:3000`) that refuses
    /// PDFs above `max_pdf_bytes`.
    pub fn new(
        base_url: &str,
        max_pdf_bytes: u64,
        metrics: Arc<OfficeMetrics>,
    ) -> Result<Self, UrlError> {
        let parsed = reqwest::Url::parse(base_url)
            .map_err(|e| UrlError::Invalid { url: base_url.into(), reason: e.to_string() })?;
        if parsed.scheme() != "http" {
            return Err(UrlError::Scheme(base_url.into()));
        }
        let http = reqwest::Client::builder()
            // A fresh connection per conversion: the Service picks a replica per connection.
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            // Cluster-internal traffic never goes through a proxy named in the environment.
            .no_proxy()
            .build()
            .map_err(|e| UrlError::Invalid { url: base_url.into(), reason: e.to_string() })?;
        let convert_url = format!("{}{CONVERT_PATH}", base_url.trim_end_matches('/'));
        Ok(Self { http, convert_url, max_pdf_bytes, metrics })
    }

    /// Converts `doc` to PDF before `deadline`, retrying busy answers (429), refused connections
    /// and one failed conversion (500) on new connections with a short jittered backoff.
    pub async fn convert(
        &self,
        doc: &Bytes,
        format: OfficeFormat,
        options: &ConvertOptions,
        deadline: Instant,
    ) -> Result<Bytes, ConvertError> {
        let mut attempts = 0u32;
        let mut refused_connections = 0u32;
        let mut failures = 0u32;
        let mut backoff = Backoff::equal_jitter(BACKOFF_FIRST_CEILING, BACKOFF_MAX_CEILING);
        loop {
            attempts += 1;
            let attempt =
                tokio::time::timeout_at(deadline.into(), self.attempt(doc, format, options));
            let (error, reason) = match attempt.await {
                Err(_) => return Err(deadline_passed()),
                Ok(Ok(pdf)) => return Ok(pdf),
                Ok(Err(Attempt::Final(e))) => return Err(e),
                Ok(Err(Attempt::Retry(e, reason))) => (e, reason),
            };
            if reason == "connect" {
                refused_connections += 1;
                if refused_connections >= CONNECT_ATTEMPTS {
                    return Err(error);
                }
            }
            if reason == "failed" {
                failures += 1;
                if failures >= FAILED_ATTEMPTS {
                    return Err(error);
                }
            }
            let pause = backoff.next_delay();
            if Instant::now() + pause >= deadline {
                return Err(match error {
                    ConvertError::Busy { retry_after_secs, .. } => {
                        ConvertError::Busy { attempts, retry_after_secs }
                    }
                    other => other,
                });
            }
            count(&self.metrics.retries, "reason", reason);
            tokio::time::sleep(pause).await;
        }
    }

    async fn attempt(
        &self,
        doc: &Bytes,
        format: OfficeFormat,
        options: &ConvertOptions,
    ) -> Result<Bytes, Attempt> {
        let file = Part::stream_with_length(reqwest::Body::from(doc.clone()), doc.len() as u64)
            .file_name(format!("document.{}", format.extension()));
        let mut form = Form::new().part("files", file);
        if let Some(pdfa) = options.pdfa {
            form = form.text("pdfa", pdfa.gotenberg_name());
        }
        if let Some(pages) = &options.pages {
            form = form.text("nativePageRanges", pages.to_string());
        }
        let response = match self.http.post(&self.convert_url).multipart(form).send().await {
            Ok(response) => response,
            Err(e) if e.is_connect() => {
                let detail = format!("cannot connect to {}: {}", self.convert_url, chain(&e));
                return Err(Attempt::Retry(unavailable(detail), "connect"));
            }
            Err(e) => {
                let detail = format!("the connection failed mid-conversion: {}", chain(&e));
                return Err(Attempt::Final(unavailable(detail)));
            }
        };
        let status = response.status().as_u16();
        if status == 200 {
            return self.read_pdf(response).await.map_err(Attempt::Final);
        }
        let message = error_message(response).await;
        Err(match status {
            429 => Attempt::Retry(ConvertError::Busy { attempts: 1, retry_after_secs: 1 }, "busy"),
            500 => Attempt::Retry(classify(500, message), "failed"),
            other => Attempt::Final(classify(other, message)),
        })
    }

    /// The PDF body, refused past the size limit while it streams in.
    async fn read_pdf(&self, mut response: reqwest::Response) -> Result<Bytes, ConvertError> {
        let max = self.max_pdf_bytes;
        if response.content_length().is_some_and(|len| len > max) {
            return Err(ConvertError::TooLarge { max });
        }
        let mut pdf = Vec::with_capacity(
            usize::try_from(response.content_length().unwrap_or(0).min(max)).unwrap_or(0),
        );
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if (pdf.len() + chunk.len()) as u64 > max {
                        return Err(ConvertError::TooLarge { max });
                    }
                    pdf.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(Bytes::from(pdf)),
                Err(e) => {
                    let detail = format!("the PDF was cut off: {}", chain(&e));
                    return Err(unavailable(detail));
                }
            }
        }
    }
}

fn unavailable(detail: String) -> ConvertError {
    ConvertError::Unavailable { detail, retry_after_secs: 1 }
}

fn deadline_passed() -> ConvertError {
    ConvertError::Timeout {
        detail: "the job deadline passed while Gotenberg was converting".into(),
    }
}

async fn error_message(response: reqwest::Response) -> String {
    let text = response.text().await.unwrap_or_default();
    let mut text: String = text.trim().chars().take(MAX_ERROR_BODY).collect();
    if text.is_empty() {
        text = "(no message)".into();
    }
    text
}

/// Gotenberg's non-200 answers (429 aside) as the errors a client acts on.
pub fn classify(status: u16, message: String) -> ConvertError {
    match status {
        400 if message.contains("password") => ConvertError::PasswordRequired { message },
        400 => ConvertError::Unreadable { message },
        500 => ConvertError::Failed { message },
        // Gotenberg answers 503 when its own --api-timeout passed (queueing included) ...
        503 if message.contains("time limit") => ConvertError::Timeout { detail: message },
        // ... and while LibreOffice restarts.
        502..=504 => ConvertError::Unavailable { detail: message, retry_after_secs: 1 },
        _ => ConvertError::Upstream { status, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gotenberg_answers_map_to_actionable_errors() {
        let code = |status, message: &str| classify(status, message.into()).code();
        assert_eq!(code(400, "LibreOffice could not read the document"), "unreadable_document");
        assert_eq!(code(400, "The document 'x.docx' is password-protected"), "password_required");
        assert_eq!(code(500, "LibreOffice failed"), "conversion_failed");
        assert_eq!(code(503, "The request exceeded the time limit."), "conversion_timeout");
        assert_eq!(code(503, "Service Unavailable"), "office_unavailable");
        assert_eq!(code(404, "Not Found"), "office_error");
    }

    #[test]
    fn urls_must_be_plain_http() {
        let metrics = Arc::new(OfficeMetrics::default());
        assert!(GotenbergClient::new("http://pool-gotenberg:3000/", 1, metrics.clone()).is_ok());
        assert!(matches!(
            GotenbergClient::new("https://g:3000", 1, metrics.clone()),
            Err(UrlError::Scheme(_))
        ));
        assert!(matches!(
            GotenbergClient::new("not a url", 1, metrics),
            Err(UrlError::Invalid { .. })
        ));
    }
}
