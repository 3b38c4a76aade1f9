//! The `/v1` document routes: parse and bound the request, convert Office input, queue the work,
//! shape the answer.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query as QueryExtractor, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Serialize;

use crate::engine::{JobError, Task};
use crate::office::{ConvertError, ConvertOptions, Detected, detect};
use crate::ops::{DocHash, ImageOutput, Op, OpError, OpOutput, PageSelection, RenderSize};

use super::AppState;
use super::error::ApiError;
use super::input;
use super::params::{self, DEFAULT_DPI, DEFAULT_THUMBNAIL_WIDTH, Query};

/// Bodies above this are hashed on the blocking pool, so the async threads stay free; below it
/// (BLAKE3 hashes 1 MiB in about 0.2 ms) the hand-off to another thread costs more than it saves.
const INLINE_HASH_BYTES: usize = 1 << 20;

/// A request past the front door: its document, hash, password and arrival time.
struct Admitted {
    doc: Bytes,
    hash: DocHash,
    password: Option<String>,
    arrived: Instant,
}

impl Admitted {
    fn task(&self, op: Op) -> Task {
        Task { doc: self.doc.clone(), hash: self.hash, password: self.password.clone(), op }
    }
}

fn query(request: &Request) -> Result<Query, ApiError> {
    QueryExtractor::<Query>::try_from_uri(request.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::invalid(e.body_text()))
}

/// Parses what the request says before its body is read; on failure the body is drained.
fn before_body<T>(
    request: Request,
    parse: impl FnOnce(&Query) -> Result<T, ApiError>,
) -> Result<(Request, T), ApiError> {
    match query(&request).and_then(|q| parse(&q)) {
        Ok(value) => Ok((request, value)),
        Err(error) => Err(input::refuse(request, error)),
    }
}

/// Whether a request will need a PDFium slot (every route but `/v1/convert`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slots {
    Needed,
    NotNeeded,
}

/// Reads and hashes the document, unless the pod is draining, the slots' queue is full (for
/// work that needs a slot) or the document is quarantined.
async fn admit(app: &AppState, request: Request, slots: Slots) -> Result<Admitted, ApiError> {
    let arrived = Instant::now();
    if !app.lifecycle.is_accepting() {
        app.metrics.reject("draining");
        return Err(input::refuse(request, JobError::Draining.into()));
    }
    if slots == Slots::Needed
        && let Err(full) = app.engine.ensure_room()
    {
        return Err(input::refuse(request, full.into()));
    }
    let password = match input::password(request.headers()) {
        Ok(password) => password,
        Err(error) => return Err(input::refuse(request, error)),
    };
    let doc = input::read_document(request, app.max_body_bytes).await?;
    app.metrics.bytes_in.inc_by(doc.len() as u64);
    if doc.is_empty() {
        return Err(OpError::Unreadable { detail: "the document is empty".into() }.into());
    }
    let hash = if doc.len() <= INLINE_HASH_BYTES {
        DocHash::of(&doc)
    } else {
        let for_hash = doc.clone();
        tokio::task::spawn_blocking(move || DocHash::of(&for_hash))
            .await
            .map_err(|e| ApiError::internal(format!("hashing failed: {e}")))?
    };
    app.engine.check_quarantine(&hash)?;
    Ok(Admitted { doc, hash, password, arrived })
}

/// The document as PDFium gets it: a PDF (or unknown bytes, which PDFium judges) as uploaded,
/// an Office document converted first (through the cache, without holding a slot), a refused
/// container never.
async fn as_pdf(app: &AppState, doc: Admitted) -> Result<Admitted, ApiError> {
    let format = match detect(&doc.doc) {
        Detected::Pdf | Detected::Unknown => return Ok(doc),
        Detected::Office(format) => format,
        Detected::Refused(refusal) => return Err(ConvertError::Refused(refusal).into()),
    };
    let deadline = app.engine.deadline(doc.arrived);
    let converted =
        app.office.to_pdf(&doc.doc, doc.hash, format, ConvertOptions::default(), deadline).await?;
    // The password header is for PDFs; a converted PDF has none.
    Ok(Admitted { doc: converted.pdf, hash: converted.hash, password: None, arrived: doc.arrived })
}

/// [`admit`] then [`as_pdf`]: what every PDFium route starts with.
async fn admit_pdf(app: &AppState, request: Request) -> Result<Admitted, ApiError> {
    let doc = admit(app, request, Slots::Needed).await?;
    as_pdf(app, doc).await
}

fn unexpected(output: &OpOutput) -> ApiError {
    let kind = match output {
        OpOutput::Info(_) => "info",
        OpOutput::Text(_) => "text",
        OpOutput::Image(_) => "image",
        OpOutput::Pdf(_) => "pdf",
    };
    ApiError::internal(format!("worker answered with the wrong kind of output ({kind})"))
}

fn sent(app: &AppState, response: Response, body_len: usize) -> Response {
    app.metrics.bytes_out.inc_by(body_len as u64);
    response
}

fn json<T: Serialize>(app: &AppState, value: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(value).map_err(|e| ApiError::internal(e.to_string()))?;
    let len = body.len();
    Ok(sent(app, ([(header::CONTENT_TYPE, "application/json")], body).into_response(), len))
}

/// `POST /v1/info`: page count, sizes, rotation, encryption, metadata.
pub async fn info(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let doc = admit_pdf(&app, request).await?;
    match app.engine.run(doc.task(Op::Info), doc.arrived).await? {
        OpOutput::Info(info) => json(&app, &info),
        other => Err(unexpected(&other)),
    }
}

/// `POST /v1/extract?pages=&max_chars=`: text per page.
pub async fn extract(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) = before_body(request, |q| {
        Ok(Op::Extract {
            pages: params::pages(q, app.max_pages)?,
            max_chars: params::max_chars(q)?,
        })
    })?;
    let doc = admit_pdf(&app, request).await?;
    match app.engine.run(doc.task(op), doc.arrived).await? {
        OpOutput::Text(text) => json(&app, &text),
        other => Err(unexpected(&other)),
    }
}

/// `POST /v1/render?page=&dpi=|width=&format=`: one page image.
pub async fn render(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) = before_body(request, |q| {
        Ok(Op::Render {
            page: params::page(q)?,
            size: params::render_size(q, RenderSize::Dpi(DEFAULT_DPI))?,
            format: params::format(q)?,
        })
    })?;
    let doc = admit_pdf(&app, request).await?;
    match app.engine.run(doc.task(op), doc.arrived).await? {
        OpOutput::Image(image) => Ok(image_response(&app, image)),
        other => Err(unexpected(&other)),
    }
}

fn image_response(app: &AppState, image: ImageOutput) -> Response {
    let len = image.bytes.len();
    let response = (
        [
            (header::CONTENT_TYPE, image.format.content_type().to_string()),
            (header::HeaderName::from_static("x-image-width"), image.width.to_string()),
            (header::HeaderName::from_static("x-image-height"), image.height.to_string()),
        ],
        image.bytes,
    )
        .into_response();
    sent(app, response, len)
}

/// One filmstrip image.
#[derive(Serialize)]
struct Thumbnail {
    page: u32,
    width: u32,
    height: u32,
    format: String,
    /// The encoded image, base64.
    data: String,
}

/// The body of `/v1/thumbnails` (serialised straight from the images, no intermediate JSON
/// value holding a second copy of every base64 string).
#[derive(Serialize)]
struct Thumbnails {
    pages: Vec<Thumbnail>,
}

/// `POST /v1/thumbnails?pages=&width=|dpi=&format=`: several pages, each a task in the shared
/// queue (never a private pool), as JSON with base64 images.
pub async fn thumbnails(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, (selection, size, format)) = before_body(request, |q| {
        Ok((
            params::pages(q, app.max_pages)?,
            params::render_size(q, RenderSize::Width(DEFAULT_THUMBNAIL_WIDTH))?,
            params::format(q)?,
        ))
    })?;
    let doc = admit_pdf(&app, request).await?;
    let page_count = match app.engine.run(doc.task(Op::Info), doc.arrived).await? {
        OpOutput::Info(info) => info.page_count,
        other => return Err(unexpected(&other)),
    };
    let selection = selection.unwrap_or_else(|| PageSelection::all(page_count));
    params::check_page_count(selection.count(), app.max_pages)?;
    let pages = selection.resolve(page_count)?;
    let tasks = pages.iter().map(|&page| doc.task(Op::Render { page, size, format })).collect();
    let outputs = app.engine.run_all(tasks, doc.arrived).await?;
    let mut thumbnails = Vec::with_capacity(outputs.len());
    for (page, output) in pages.into_iter().zip(outputs) {
        let OpOutput::Image(image) = output else {
            return Err(unexpected(&output));
        };
        thumbnails.push(Thumbnail {
            page,
            width: image.width,
            height: image.height,
            format: image.format.to_string(),
            data: base64::engine::general_purpose::STANDARD.encode(&image.bytes),
        });
    }
    json(&app, &Thumbnails { pages: thumbnails })
}

/// `POST /v1/watermark?text=`: the PDF with the text stamped on every page.
pub async fn watermark(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) =
        before_body(request, |q| Ok(Op::Watermark { text: params::watermark_text(q)? }))?;
    let doc = admit_pdf(&app, request).await?;
    match app.engine.run(doc.task(op), doc.arrived).await? {
        OpOutput::Pdf(pdf) => Ok(pdf_response(&app, Bytes::from(pdf))),
        other => Err(unexpected(&other)),
    }
}

fn pdf_response(app: &AppState, pdf: Bytes) -> Response {
    let len = pdf.len();
    sent(app, ([(header::CONTENT_TYPE, "application/pdf")], pdf).into_response(), len)
}

/// `POST /v1/convert?pdfa=&pages=`: an Office document as PDF (PDF/A and a page range on
/// request), through the pod's share of the Gotenberg pool and the converted-PDF cache.
pub async fn convert(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, options) = before_body(request, |q| {
        Ok(ConvertOptions { pdfa: params::pdfa(q)?, pages: params::pages(q, app.max_pages)? })
    })?;
    let doc = admit(&app, request, Slots::NotNeeded).await?;
    let format = match detect(&doc.doc) {
        Detected::Office(format) => format,
        Detected::Pdf => {
            return Err(ConvertError::NotOffice(
                "the document is a PDF already: /v1/convert takes Office documents",
            )
            .into());
        }
        Detected::Unknown => {
            return Err(ConvertError::NotOffice(
                "not an Office document: send Word, Excel, PowerPoint (OOXML or 97-2003), OpenDocument or RTF",
            )
            .into());
        }
        Detected::Refused(refusal) => return Err(ConvertError::Refused(refusal).into()),
    };
    let deadline = app.engine.deadline(doc.arrived);
    let converted = app.office.to_pdf(&doc.doc, doc.hash, format, options, deadline).await?;
    Ok(pdf_response(&app, converted.pdf))
}
