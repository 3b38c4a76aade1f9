//! `POST /v1/thumbnails`: several pages, each a task in the shared queue (never a private pool),
//! as one JSON document, or streamed as NDJSON (`Accept: application/x-ndjson`), one page a
//! line as each finishes, so a long filmstrip never sits whole in the supervisor's memory.
//!
//! The document is measured first (page count and the selection's pixels, from the page tree,
//! without loading a page); the JSON form, held whole until sent, is refused up front past
//! `--thumbnail-max-pixels`. Both forms hold at most one page per slot in flight. The JSON
//! form is done within the request's deadline; each streamed page within a job deadline of its
//! own (and the client's `Request-Timeout`), so a long strip is not cut off for its length.
//! Both are held in the answer budget until written: the JSON answer whole, the stream line by
//! line, and the stream's document too (it is kept at the client's pace, not an upload's).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use base64::display::Base64Display;
use futures::StreamExt;
use serde::{Serialize, Serializer};

use crate::engine::JobError;
use crate::ops::{ImageOutput, Op, OpOutput, PageSelection};

use super::AppState;
use super::documents::{admit_pdf, before_body, json_bytes, reserved, unexpected, with_etag};
use super::error::ApiError;
use super::input::{self, NDJSON};
use super::params;

/// One filmstrip image, serialised straight from the encoded bytes (the base64 text is written
/// into the answer as it is produced, never held as a string of its own).
#[derive(Serialize)]
struct Thumbnail<'a> {
    page: u32,
    width: u32,
    height: u32,
    format: String,
    /// The encoded image, base64.
    data: Base64<'a>,
}

struct Base64<'a>(&'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer
            .collect_str(&Base64Display::new(self.0, &base64::engine::general_purpose::STANDARD))
    }
}

/// Appends page `page`'s JSON object to `out`.
fn write_thumbnail(out: &mut Vec<u8>, page: u32, image: &ImageOutput) -> Result<(), ApiError> {
    let thumbnail = Thumbnail {
        page,
        width: image.width,
        height: image.height,
        format: image.format.to_string(),
        data: Base64(&image.bytes),
    };
    serde_json::to_writer(out, &thumbnail).map_err(|e| ApiError::internal(e.to_string()))
}

/// One NDJSON line: the page, or the error that ends the stream.
fn ndjson_line(page: u32, rendered: Result<OpOutput, JobError>) -> (Vec<u8>, bool) {
    let mut line = Vec::new();
    let written = match rendered {
        Ok(OpOutput::Image(image)) => write_thumbnail(&mut line, page, &image),
        Ok(other) => Err(unexpected(&other)),
        Err(error) => Err(ApiError::from(error)),
    };
    match written {
        Ok(()) => {
            line.push(b'\n');
            (line, true)
        }
        Err(error) => (error_line(page, &error), false),
    }
}

/// The NDJSON line that ends a stream with `error` at `page`.
fn error_line(page: u32, error: &ApiError) -> Vec<u8> {
    let body =
        serde_json::json!({"error": {"code": error.code, "message": error.message, "page": page}});
    let mut line = body.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// `POST /v1/thumbnails?pages=&width=|dpi=&format=`.
pub async fn thumbnails(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let streaming = input::wants_ndjson(request.headers());
    let caps = app.thumbnails;
    let (request, (selection, size, format, quality)) =
        before_body(request, |q| params::thumbnails(q, app.max_pages, caps))?;
    let mut doc = admit_pdf(&app, request).await?;
    // The streaming form may end in an error line after a 200, so it carries no ETag.
    let etag = if streaming {
        None
    } else {
        doc.etag(&app, "thumbnails", &(&selection, size, format, quality))
    };
    if let Some(unchanged) = doc.not_modified(&app, etag.as_deref()) {
        return Ok(unchanged);
    }
    let measured = match doc.run(&app, Op::Measure { pages: selection.clone(), size }).await? {
        OpOutput::Measure(measured) => measured,
        other => return Err(unexpected(&other)),
    };
    if !streaming {
        params::check_output_pixels(measured.pixels, caps.max_pixels)?;
    }
    let pages = selection
        .unwrap_or_else(|| PageSelection::all(measured.page_count))
        .resolve(measured.page_count)?;
    if streaming {
        // Held at the client's pace from here on: an answer's memory, not an upload's.
        doc.held_by_answer(&app)?;
    }
    let (engine, timing, window) = (app.engine.clone(), doc.timing, app.engine.slots());
    // The stream owns the admitted document (its bytes and their reservation) until it ends.
    let doc = Arc::new(doc);
    let renders = futures::stream::iter(pages).map(move |page| {
        let (engine, task) = (engine.clone(), doc.task(Op::Render { page, size, format, quality }));
        async move {
            // A streamed page is sent as it finishes, so each has the job deadline to itself
            // (from its turn); the JSON answer is one, within the request's deadline.
            let timing = if streaming { engine.next_job(&timing) } else { timing };
            (page, engine.run_admitted(task, timing).await)
        }
    });
    let page_count = HeaderValue::from(measured.page_count);
    if streaming {
        let lines = renders.buffer_unordered(window);
        let body = futures::stream::unfold(Some(Box::pin(lines)), move |lines| {
            let app = app.clone();
            async move {
                let mut lines = lines?;
                let (page, rendered) = lines.next().await?;
                let (line, ok) = ndjson_line(page, rendered);
                // Each line is held in the answer budget until written, like any answer.
                let (line, ok) = match reserved(&app, line) {
                    Ok(line) => (line, ok),
                    Err(refused) => (Bytes::from(error_line(page, &refused)), false),
                };
                app.metrics.bytes_out.inc_by(line.len() as u64);
                // After an error line the stream ends, and the pages still in flight are
                // dropped (their jobs cancelled).
                Some((Ok::<_, std::convert::Infallible>(line), ok.then_some(lines)))
            }
        });
        let response = (
            [(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON))],
            [(header::HeaderName::from_static("x-page-count"), page_count)],
            Body::from_stream(body),
        )
            .into_response();
        return Ok(response);
    }
    let mut out = b"{\"pages\":[".to_vec();
    let mut renders = std::pin::pin!(renders.buffered(window));
    let mut first = true;
    while let Some((page, rendered)) = renders.next().await {
        let image = match rendered? {
            OpOutput::Image(image) => image,
            other => return Err(unexpected(&other)),
        };
        if !first {
            out.push(b',');
        }
        first = false;
        write_thumbnail(&mut out, page, &image)?;
    }
    out.extend_from_slice(b"]}");
    let mut response = json_bytes(&app, out)?;
    response.headers_mut().insert(header::HeaderName::from_static("x-page-count"), page_count);
    Ok(with_etag(response, etag.as_deref()))
}
