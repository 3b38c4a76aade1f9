//! The `/v1` document routes: parse and bound the request, admit it (queue place, byte budget,
//! deadline), convert Office input, answer `304` to a client that holds the answer already,
//! queue the work, shape the answer within the answer budget. The filmstrip is in `thumbnails`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::engine::{JobError, Place, Task, Timing};
use crate::office::{ConvertError, ConvertOptions, Detected, detect};
use crate::ops::{DocHash, ImageOutput, Op, OpError, OpOutput};
use crate::quarantine::WorkClass;

use super::AppState;
use super::error::ApiError;
use super::params::{self, Query};
use super::{body, digest, etag, input, source};
use crate::byte_budget::Reservation;
use crate::doc_cache::{Digest, HeldDocument};

/// New work is refused while answers leave less than this part of the answer budget free (a
/// sixteenth: 6.25 MiB of the default 100 MiB, half a large page image): answers nobody reads
/// hold it, and the answer of new work would most likely be made, find no room and be thrown
/// away.
const ANSWER_ROOM_PART: u64 = 16;

/// A request past the front door: its document, hash, password, deadlines, queue place and
/// share of the byte budget.
pub(super) struct Admitted {
    doc: Bytes,
    hash: DocHash,
    password: Option<String>,
    /// Arrival and deadlines.
    pub(super) timing: Timing,
    /// The queue place taken before the body was read; `None` for work that needs no slot, or
    /// after an Office conversion gave it back.
    place: Option<Place>,
    /// Whether answers get an ETag: the document is the PDF as uploaded (a converted Office
    /// document is LibreOffice's output, which this pod cannot promise is byte-identical
    /// across conversions).
    tagged: bool,
    /// The client's `If-None-Match`.
    if_none_match: Option<String>,
    /// The document's bytes in a budget, held as long as the document is: the upload budget's,
    /// or the answer budget's once a streamed answer holds it at its client's pace.
    _held: Arc<Reservation>,
    /// Counts the document among the answer budget's documents while a streamed answer holds
    /// it there.
    _streamed: Option<StreamedDocument>,
}

/// A document's bytes counted in [`AppState::streamed_documents`] until dropped.
struct StreamedDocument {
    bytes: u64,
    counter: Arc<AtomicU64>,
}

impl StreamedDocument {
    fn count(counter: &Arc<AtomicU64>, bytes: u64) -> Self {
        counter.fetch_add(bytes, Ordering::Relaxed);
        Self { bytes, counter: counter.clone() }
    }
}

impl Drop for StreamedDocument {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Admitted {
    pub(super) fn task(&self, op: Op) -> Task {
        Task { doc: self.doc.clone(), hash: self.hash, password: self.password.clone(), op }
    }

    /// Runs `op` in the place taken at admission (or a new one, after a conversion).
    pub(super) async fn run(&mut self, app: &AppState, op: Op) -> Result<OpOutput, ApiError> {
        let place = match self.place.take() {
            Some(place) => place,
            None => app.engine.reserve(&self.timing)?,
        };
        Ok(app.engine.run(place, self.task(op), self.timing).await?)
    }

    /// Moves the document's bytes from the upload budget to the answer budget, for an answer
    /// streamed at its client's pace (a filmstrip): a client that stops reading then holds
    /// answer bytes (and is cut off after the write timeout), not the uploads' room for everyone
    /// else. Refused when the answer budget has no room for the document.
    pub(super) fn held_by_answer(&mut self, app: &AppState) -> Result<(), ApiError> {
        let bytes = self.doc.len() as u64;
        let reservation = app.answers.reserve(bytes).ok_or_else(|| answer_refused(app, bytes))?;
        self._held = Arc::new(reservation);
        self._streamed = Some(StreamedDocument::count(&app.streamed_documents, bytes));
        Ok(())
    }

    /// The strong ETag of the answer of `form` with `params`, when answers of this document
    /// get one.
    pub(super) fn etag<P: Serialize>(
        &self,
        app: &AppState,
        form: &str,
        params: &P,
    ) -> Option<String> {
        if !self.tagged {
            return None;
        }
        app.engine_version.tag(&self.hash, form, params)
    }

    /// `304 Not Modified` when the client holds the answer tagged `etag` already: no job runs.
    pub(super) fn not_modified(&self, app: &AppState, etag: Option<&str>) -> Option<Response> {
        let etag = etag?;
        if !etag::none_match(self.if_none_match.as_deref()?, etag) {
            return None;
        }
        app.metrics.not_modified.inc();
        Some(with_etag(StatusCode::NOT_MODIFIED.into_response(), Some(etag)))
    }
}

/// `response` with an `ETag` header, when there is one.
pub(super) fn with_etag(mut response: Response, etag: Option<&str>) -> Response {
    if let Some(value) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// The query string of `uri`, parsed into names and values.
pub(super) fn query_of(uri: &axum::http::Uri) -> Result<Query, ApiError> {
    Query::of_uri(uri)
}

/// Parses what the request says before its body is read; on failure the body is drained.
pub(super) fn before_body<T>(
    request: Request,
    parse: impl FnOnce(&Query) -> Result<T, ApiError>,
) -> Result<(Request, T), ApiError> {
    match query_of(request.uri()).and_then(|q| parse(&q)) {
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

/// Takes a queue place (for work that needs a slot) and reads and hashes the document within
/// the byte budget, unless the pod is draining, unread answers hold the answer budget, the
/// queue is full, the wait for a slot would outlast the request's deadline or the document is
/// quarantined for all work. Every refusal before the body is read answers at once, without
/// reading it. A document named by a digest the pod holds is not read at all when its body is
/// not on its way (see [`held_by_digest`]); one named by `?source=` is fetched instead.
async fn admit(app: &AppState, request: Request, slots: Slots) -> Result<Admitted, ApiError> {
    let arrived = Instant::now();
    if !app.lifecycle.is_accepting() {
        app.metrics.reject("draining");
        return Err(input::refuse(request, JobError::Draining.into()));
    }
    if let Some(backlogged) = answers_backlogged(app) {
        app.metrics.reject("answer_budget");
        return Err(input::refuse(request, backlogged.into()));
    }
    let headers = request.headers();
    let said = input::request_timeout(headers)
        .and_then(|timeout| Ok((timeout, input::password(headers)?, digest::requested(headers)?)));
    let (client_timeout, password, digests) = match said {
        Ok(said) => said,
        Err(error) => return Err(input::refuse(request, error)),
    };
    let if_none_match =
        headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).map(str::to_string);
    let timing = app.engine.timing(arrived, client_timeout);
    let place = match slots {
        Slots::Needed => match app.engine.reserve(&timing) {
            Ok(place) => Some(place),
            Err(refused) => return Err(input::refuse(request, refused.into())),
        },
        Slots::NotNeeded => None,
    };
    let stored = match source::requested(&request) {
        Ok(stored) => stored,
        Err(error) => return Err(input::refuse(request, error)),
    };
    let document = match stored {
        Some(stored) => source::fetch(app, request, &stored).await?,
        None => match held_by_digest(app, request, &digests)? {
            Ok(held) => held,
            Err(request) => receive(app, request, &digests, &timing).await?,
        },
    };
    // Here only a document refused all work; one convicted by some work (a huge render) is
    // refused that work when its job is queued, and served the rest.
    app.engine.check_quarantine(&document.hash, WorkClass::Open)?;
    Ok(Admitted {
        doc: document.bytes,
        hash: document.hash,
        password,
        timing,
        place,
        tagged: false,
        if_none_match,
        _held: document.reservation,
        _streamed: None,
    })
}

/// The document a request names by digest, when the pod holds it and the body is not on its
/// way: the client waits for `100 Continue` (which it then never gets: the request is dropped
/// unread) or declared no body. A request without a body whose document the pod does not hold
/// is refused with 412 `document_not_held`; any other request goes on to send its body
/// (`Err(request)`).
fn held_by_digest(
    app: &AppState,
    request: Request,
    digests: &[Digest],
) -> Result<Result<HeldDocument, Request>, ApiError> {
    let no_body = input::declares_no_body(request.headers());
    if digests.is_empty() || !(no_body || input::expects_continue(request.headers())) {
        return Ok(Err(request));
    }
    if let Some(held) = app.documents.get(digests) {
        return Ok(Ok(held));
    }
    if no_body {
        app.metrics.reject("document_not_held");
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "document_not_held",
            "this pod does not hold the document the request names by digest: send the \
             document in the body, with the same digest header, and it is kept for the next \
             request",
        ));
    }
    Ok(Err(request))
}

/// Reads the document from the body within the upload budget, hashing it as it arrives, and
/// checks it against the digests the request declared; a document declared by digest is kept
/// for the requests that name it next.
async fn receive(
    app: &AppState,
    request: Request,
    digests: &[Digest],
    timing: &Timing,
) -> Result<HeldDocument, ApiError> {
    let budget = body::Budget {
        budget: app.uploads.budget.clone(),
        retry_after_secs: app.engine.retry_after_secs(),
    };
    let sha256 = digest::wants_sha256(digests);
    let upload =
        body::read_document(request, app.uploads.limits, budget, timing.effective(), sha256)
            .await
            .inspect_err(|e| match e.code {
                "upload_budget_exhausted" => app.metrics.reject("upload_budget"),
                "body_too_slow" => app.metrics.reject("body_too_slow"),
                _ => {}
            })?;
    app.metrics.bytes_in.inc_by(upload.bytes.len() as u64);
    if upload.bytes.is_empty() {
        return Err(OpError::Unreadable { detail: "the document is empty".into() }.into());
    }
    digest::check(digests, &upload.hashed)
        .inspect_err(|_| app.metrics.reject("digest_mismatch"))?;
    let sha256 = upload.hashed.sha256;
    let document = upload.held();
    if digests.is_empty() {
        return Ok(document);
    }
    Ok(app.documents.insert(document, sha256))
}

/// The document as PDFium gets it: a PDF (or unknown bytes, which PDFium judges) as uploaded,
/// an Office document converted first (through the cache), a refused container never. A
/// conversion gives the queue place back while LibreOffice works (seconds, at Gotenberg's pace,
/// not PDFium's: holding the place would refuse PDF work the slots have time for), and the PDF
/// work takes a new one after it; if the queue is full by then, the client is told to retry,
/// and the retry finds the conversion in the cache.
async fn as_pdf(app: &AppState, mut doc: Admitted) -> Result<Admitted, ApiError> {
    let format = match detect(&doc.doc) {
        Detected::Pdf | Detected::Unknown => {
            doc.tagged = true;
            return Ok(doc);
        }
        Detected::Office(format) => format,
        Detected::Refused(refusal) => return Err(ConvertError::Refused(refusal).into()),
    };
    drop(doc.place.take());
    let converted = app
        .office
        .to_pdf(&doc.doc, doc.hash, format, ConvertOptions::default(), doc.timing.effective())
        .await?;
    // The password header is for PDFs; a converted PDF has none.
    Ok(Admitted { doc: converted.pdf, hash: converted.hash, password: None, ..doc })
}

/// [`admit`] then [`as_pdf`]: what every PDFium route starts with.
pub(super) async fn admit_pdf(app: &AppState, request: Request) -> Result<Admitted, ApiError> {
    let doc = admit(app, request, Slots::Needed).await?;
    as_pdf(app, doc).await
}

pub(super) fn unexpected(output: &OpOutput) -> ApiError {
    let kind = match output {
        OpOutput::Info(_) => "info",
        OpOutput::Measure(_) => "measure",
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

/// `body` held in the answer budget until it is written out: answers the front makes itself
/// (JSON, filmstrip lines, Office PDFs) count like the workers' answers, which the engine
/// reserves as it reads them.
pub(super) fn reserved<T: AsRef<[u8]> + Send + 'static>(
    app: &AppState,
    body: T,
) -> Result<Bytes, ApiError> {
    let bytes = body.as_ref().len() as u64;
    match app.answers.reserve(bytes) {
        Some(reservation) => Ok(reservation.hold(body)),
        None => Err(answer_refused(app, bytes)),
    }
}

/// Why new work is refused before its body is read, when answers waiting to be written leave
/// less than [`ANSWER_ROOM_PART`] of the answer budget free.
fn answers_backlogged(app: &AppState) -> Option<JobError> {
    let budget = app.answers.total();
    let (used, documents) = (app.answers.used(), app.streamed_documents.load(Ordering::Relaxed));
    backlogged(budget, used, documents).then(|| JobError::AnswersBacklogged {
        free: budget.saturating_sub(used),
        budget,
        retry_after_secs: app.engine.retry_after_secs(),
    })
}

/// Whether answers hold all but less than [`ANSWER_ROOM_PART`] of a budget of which `used`
/// bytes are reserved, `documents` of them by streamed answers' documents. Those do not count:
/// a filmstrip of a large document is a reader being served, and new work beside it still has
/// room for ordinary answers.
fn backlogged(budget: u64, used: u64, documents: u64) -> bool {
    let answers = used.saturating_sub(documents);
    budget.saturating_sub(answers) < budget / ANSWER_ROOM_PART
}

/// Why an answer of `bytes` gets no room in the answer budget.
fn answer_refused(app: &AppState, bytes: u64) -> ApiError {
    let budget = app.answers.total();
    let error = if bytes > budget {
        app.metrics.reject("answer_too_large");
        JobError::AnswerTooLarge { bytes, budget }
    } else {
        app.metrics.reject("answer_budget");
        let retry_after_secs = app.engine.retry_after_secs();
        JobError::AnswerBudgetExhausted { bytes, budget, retry_after_secs }
    };
    error.into()
}

fn json<T: Serialize>(app: &AppState, value: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(value).map_err(|e| ApiError::internal(e.to_string()))?;
    json_bytes(app, body)
}

/// A JSON body already serialised, held in the answer budget.
pub(super) fn json_bytes(app: &AppState, body: Vec<u8>) -> Result<Response, ApiError> {
    let len = body.len();
    let body = reserved(app, body)?;
    Ok(sent(app, ([(header::CONTENT_TYPE, "application/json")], body).into_response(), len))
}

/// `POST /v1/info`: page count, sizes, rotation, encryption, metadata.
pub async fn info(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let mut doc = admit_pdf(&app, request).await?;
    let etag = doc.etag(&app, "info", &Op::Info);
    if let Some(unchanged) = doc.not_modified(&app, etag.as_deref()) {
        return Ok(unchanged);
    }
    match doc.run(&app, Op::Info).await? {
        OpOutput::Info(info) => Ok(with_etag(json(&app, &info)?, etag.as_deref())),
        other => Err(unexpected(&other)),
    }
}

/// `POST /v1/extract?pages=&max_chars=`: text per page.
pub async fn extract(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) = before_body(request, |q| params::extract(q, app.max_pages))?;
    let mut doc = admit_pdf(&app, request).await?;
    let etag = doc.etag(&app, "extract", &op);
    if let Some(unchanged) = doc.not_modified(&app, etag.as_deref()) {
        return Ok(unchanged);
    }
    match doc.run(&app, op).await? {
        OpOutput::Text(text) => Ok(with_etag(json(&app, &text)?, etag.as_deref())),
        other => Err(unexpected(&other)),
    }
}

/// `POST /v1/render?page=&dpi=|width=&format=`: one page image.
pub async fn render(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) = before_body(request, params::render)?;
    let mut doc = admit_pdf(&app, request).await?;
    let etag = doc.etag(&app, "render", &op);
    if let Some(unchanged) = doc.not_modified(&app, etag.as_deref()) {
        return Ok(unchanged);
    }
    match doc.run(&app, op).await? {
        OpOutput::Image(image) => Ok(with_etag(image_response(&app, image), etag.as_deref())),
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
        // Still the worker's frame (and its reservation): no copy from the pipe to the socket.
        image.bytes.into_bytes(),
    )
        .into_response();
    sent(app, response, len)
}

/// `POST /v1/watermark?text=`: the PDF with the text stamped on every page.
pub async fn watermark(
    State(app): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (request, op) = before_body(request, params::watermark)?;
    let mut doc = admit_pdf(&app, request).await?;
    match doc.run(&app, op).await? {
        OpOutput::Pdf(pdf) => Ok(pdf_response(&app, pdf.into_bytes())),
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
    let (request, options) = before_body(request, |q| params::convert(q, app.max_pages))?;
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
    let deadline = doc.timing.effective();
    let converted = app.office.to_pdf(&doc.doc, doc.hash, format, options, deadline).await?;
    Ok(pdf_response(&app, reserved(&app, converted.pdf)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_answers_that_fill_the_budget_are_a_backlog_and_a_streamed_document_is_not() {
        let mib = 1u64 << 20;
        // Answers hold all but 6 MiB of 100 (a sixteenth is 6.25): refused.
        assert!(backlogged(100 * mib, 94 * mib, 0));
        assert!(!backlogged(100 * mib, 93 * mib, 0));
        // A filmstrip's 95 MiB document and 2 MiB of answers: not a backlog.
        assert!(!backlogged(100 * mib, 97 * mib, 95 * mib));
        // Beside a 50 MiB document, answers that hold the other 47 MiB are not either: new work
        // runs, and an answer that finds no room is dropped as it comes.
        assert!(!backlogged(100 * mib, 97 * mib, 50 * mib));
        // No budget (`--answer-budget off`): never.
        assert!(!backlogged(u64::MAX, 100 * mib, 0));
    }
}
