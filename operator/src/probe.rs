//! `renderpool-operator probe URL`: one HTTP GET that succeeds only on a 2xx answer. The image
//! has no shell and no wget, so the chart's `helm test` hook runs this instead.

use std::time::Duration;

/// How much of a refusing answer's body the error quotes.
const QUOTED_BODY_BYTES: usize = 512;

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No answer: a bad URL, a refused or timed-out connection, a broken response.
    #[error("GET {url}: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// An answer, but not a 2xx one.
    #[error("GET {url}: HTTP {status}: {body}")]
    Status { url: String, status: u16, body: String },
}

/// GETs `url` within `timeout`; the body of a 2xx answer, else why not.
pub async fn get(url: &str, timeout: Duration) -> Result<String, ProbeError> {
    let request = |source| ProbeError::Request { url: url.to_string(), source };
    let client = reqwest::Client::builder().timeout(timeout).build().map_err(request)?;
    let response = client.get(url).send().await.map_err(request)?;
    let status = response.status();
    let body = response.text().await.map_err(request)?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(ProbeError::Status { url: url.to_string(), status: status.as_u16(), body: quote(body) })
    }
}

/// The start of `body`, cut on a character boundary.
fn quote(mut body: String) -> String {
    if body.len() > QUOTED_BODY_BYTES {
        let mut end = QUOTED_BODY_BYTES;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push_str("...");
    }
    body
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::get as route;

    async fn serve() -> String {
        let app = Router::new()
            .route("/ok", route(|| async { "ready" }))
            .route("/busy", route(|| async { (StatusCode::SERVICE_UNAVAILABLE, "not ready") }))
            .route("/long", route(|| async { (StatusCode::BAD_GATEWAY, "é".repeat(400)) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_2xx_answer_passes_with_its_body() {
        let base = serve().await;
        assert_eq!(get(&format!("{base}/ok"), Duration::from_secs(5)).await.unwrap(), "ready");
    }

    #[tokio::test]
    async fn any_other_answer_fails_naming_the_status_and_body() {
        let base = serve().await;
        let err = get(&format!("{base}/busy"), Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, ProbeError::Status { status: 503, .. }), "{err}");
        assert!(err.to_string().ends_with("HTTP 503: not ready"), "{err}");
        let err = get(&format!("{base}/long"), Duration::from_secs(5)).await.unwrap_err();
        let ProbeError::Status { body, .. } = err else { panic!("{err}") };
        assert!(body.len() <= QUOTED_BODY_BYTES + 3 && body.ends_with("..."), "{body}");
    }

    #[tokio::test]
    async fn no_answer_fails_as_a_request_error() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let err = get(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(5)).await;
        assert!(matches!(err, Err(ProbeError::Request { .. })), "{err:?}");
        let err = get("not a url", Duration::from_secs(5)).await;
        assert!(matches!(err, Err(ProbeError::Request { .. })), "{err:?}");
    }
}
