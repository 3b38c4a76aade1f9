//! Reading a document from a request body within the front's limits: its bytes reserved in the
//! byte budget before they are read (a declared length at once up to one body's share of the
//! budget, the rest of a larger or chunked upload as it comes in), no more than the largest
//! accepted body, no slower than a floor rate, no stall
//! longer than the idle timeout, nothing after the request's deadline; a multipart form parsed
//! as it streams in, so only the `file` field is ever held.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{StatusCode, header};
use futures::StreamExt;

use super::digest::{Hashed, Hashing};
use super::error::ApiError;
use super::input::{self, BodyKind};
use crate::byte_budget::{ByteBudget, Reservation};
use crate::doc_cache::HeldDocument;

/// Time a body gets before the floor rate applies (a connection's first round trips, a
/// client's own start).
pub const RATE_GRACE: Duration = Duration::from_secs(2);

/// Longest wait for room in the budget for a chunk past a body's admitted share: ordinary
/// uploads give their bytes back within milliseconds, a held budget is not worth waiting for.
pub const ROOM_WAIT: Duration = Duration::from_secs(1);

/// How a body must arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// Largest accepted body in bytes.
    pub max_bytes: u64,
    /// Most of the budget a declared body reserves when admitted (see
    /// [`super::budget::admit_bytes`]); what it declares past that is reserved as it arrives.
    pub admit_bytes: u64,
    /// Bytes per second the body must average after [`RATE_GRACE`]; `None` for no floor.
    pub min_rate: Option<u64>,
    /// Longest time without a byte; `None` for no limit.
    pub idle: Option<Duration>,
}

/// A document read from a request, its hashes, and its share of the byte budget (held as long
/// as the document is).
#[derive(Debug)]
pub struct Upload {
    /// The document.
    pub bytes: Bytes,
    /// Its hashes, computed as it arrived.
    pub hashed: Hashed,
    /// Its reservation.
    pub reservation: Arc<Reservation>,
}

impl Upload {
    /// The document as the document cache holds one: its bytes, BLAKE3 and reservation.
    pub fn held(self) -> HeldDocument {
        HeldDocument { bytes: self.bytes, hash: self.hashed.hash, reservation: self.reservation }
    }
}

/// The byte budget, and when a request refused for lack of it should come back.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The budget.
    pub budget: Arc<ByteBudget>,
    /// Seconds for `Retry-After`.
    pub retry_after_secs: u64,
}

/// Reads the document from the body (raw, or the multipart field `file`) within `limits`,
/// reserving its bytes in `budget` first and hashing them as they arrive (SHA-256 too with
/// `sha256`); reading stops at `deadline`. Refusals that come before the body is read (too
/// large, wrong type, no budget) do not read it.
pub async fn read_document(
    request: Request,
    limits: BodyLimits,
    budget: Budget,
    deadline: Instant,
    sha256: bool,
) -> Result<Upload, ApiError> {
    let headers = request.headers();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_bytes) {
        return Err(input::refuse(request, ApiError::too_large(limits.max_bytes)));
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let multipart = match input::classify(content_type) {
        BodyKind::Document => false,
        BodyKind::Multipart => true,
        BodyKind::Unsupported(mime) => {
            return Err(input::refuse(request, input::unsupported(&mime)));
        }
    };
    let Some(reservation) = budget.budget.reserve(upfront(declared, limits.admit_bytes)) else {
        return Err(input::refuse(request, over_budget(&budget)));
    };
    let reservation = Arc::new(reservation);
    let (parts, body) = request.into_parts();
    let mut incoming = Incoming {
        stream: Some(body.into_data_stream()),
        limits,
        budget,
        reservation: reservation.clone(),
        received: 0,
        started: Instant::now(),
        last: Instant::now(),
        deadline,
    };
    let mut hashing = Hashing::new(sha256);
    let bytes = if multipart {
        let stash = Arc::new(Mutex::new(None));
        let stream = incoming.into_stream(stash.clone());
        let request = Request::from_parts(parts, Body::from_stream(stream));
        match multipart_file(request, limits.max_bytes, &mut hashing).await {
            Ok(bytes) => bytes,
            // The body's own refusal (too slow, too large, no budget) says more than the
            // parser's "stream failed".
            Err(error) => {
                return Err(stash.lock().ok().and_then(|mut e| e.take()).unwrap_or(error));
            }
        }
    } else {
        // Room for all it declared: the pages a slow body has not reached yet are not touched,
        // so what it holds in memory is what has arrived, as the budget counts it.
        let capacity = usize::try_from(declared.unwrap_or(0)).unwrap_or(0);
        let mut bytes = Vec::with_capacity(capacity);
        while let Some(chunk) = incoming.next().await? {
            // Hashed while the piece is in cache, not in a second pass over the whole body.
            hashing.update(&chunk);
            bytes.extend_from_slice(&chunk);
        }
        Bytes::from(bytes)
    };
    Ok(Upload { bytes, hashed: hashing.finish(), reservation })
}

/// What a body reserves when admitted: what it declares, at most `admit_bytes` (a chunked body
/// declares nothing, and reserves all it sends as it comes in).
fn upfront(declared: Option<u64>, admit_bytes: u64) -> u64 {
    declared.unwrap_or(0).min(admit_bytes)
}

/// Bytes a body must add to its reservation once `received` have arrived against `held`.
fn shortfall(received: u64, held: u64) -> u64 {
    received.saturating_sub(held)
}

fn over_budget(budget: &Budget) -> ApiError {
    ApiError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        code: "upload_budget_exhausted",
        message: format!(
            "the uploads in progress hold the front's whole budget of {} bytes: retry later",
            budget.budget.total()
        ),
        retry_after: Some(budget.retry_after_secs),
    }
}

fn too_slow(message: String) -> ApiError {
    ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_too_slow", message)
}

/// A body as it streams in, under the limits.
struct Incoming {
    /// `None` once handed to the lingering drain.
    stream: Option<BodyDataStream>,
    limits: BodyLimits,
    budget: Budget,
    reservation: Arc<Reservation>,
    received: u64,
    started: Instant,
    last: Instant,
    deadline: Instant,
}

impl Incoming {
    /// The next chunk, `None` at the end, or why the body is refused.
    async fn next(&mut self) -> Result<Option<Bytes>, ApiError> {
        let (give_up, why) = self.give_up_at();
        let Some(stream) = self.stream.as_mut() else {
            return Ok(None);
        };
        let chunk = match tokio::time::timeout_at(give_up.into(), stream.next()).await {
            Ok(chunk) => chunk,
            Err(_) => {
                // A slow client is not waited for any longer, not even to drain.
                self.stream = None;
                return Err(too_slow(why));
            }
        };
        let chunk = match chunk {
            None => return Ok(None),
            Some(chunk) => chunk
                .map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?,
        };
        let len = chunk.len() as u64;
        self.received = self.received.saturating_add(len);
        if self.received > self.limits.max_bytes {
            return Err(self.refuse(ApiError::too_large(self.limits.max_bytes)));
        }
        // Past what admission reserved (and hyper holds a declared body to its length), each
        // chunk reserves its own bytes: a slow large body holds its share plus what it sent.
        let more = shortfall(self.received, self.reservation.bytes());
        if more > 0 && !self.grow(more).await {
            let error = over_budget(&self.budget);
            return Err(self.refuse(error));
        }
        self.last = Instant::now();
        Ok(Some(chunk))
    }

    /// Reserves `more` bytes for a chunk that arrived, waiting up to [`ROOM_WAIT`] for room
    /// (the sender is held back by TCP meanwhile); the wait is the front's doing, so it does
    /// not count against the client's rate.
    async fn grow(&mut self, more: u64) -> bool {
        if self.reservation.grow(more) {
            return true;
        }
        let waited_from = Instant::now();
        let until = self.deadline.min(waited_from + ROOM_WAIT);
        let grown = self.reservation.grow_by(more, until).await;
        self.started += waited_from.elapsed();
        grown
    }

    /// When waiting for the next chunk stops, and what the client is told then: the earliest of
    /// the deadline, the idle timeout and the moment the bytes so far fall below the floor rate.
    fn give_up_at(&self) -> (Instant, String) {
        let mut give_up =
            (self.deadline, "the body did not arrive before the request's deadline".to_string());
        if let Some(idle) = self.limits.idle {
            let at = self.last + idle;
            if at < give_up.0 {
                give_up = (at, format!("no body bytes arrived for {} ms", idle.as_millis()));
            }
        }
        if let Some(rate) = self.limits.min_rate.filter(|r| *r > 0) {
            // The bytes so far keep the average at the floor until this moment.
            let covered = Duration::from_secs_f64(self.received as f64 / rate as f64);
            let at = self.started + RATE_GRACE + covered;
            if at < give_up.0 {
                give_up = (at, format!("the body arrived slower than {rate} bytes per second"));
            }
        }
        give_up
    }

    /// Drains what is left of the body in the background and returns `error`.
    fn refuse(&mut self, error: ApiError) -> ApiError {
        if let Some(stream) = self.stream.take() {
            input::linger(stream);
        }
        error
    }

    /// The chunks as a stream for the multipart parser; a refusal is put in `stash` (the
    /// parser only passes on that the stream failed).
    fn into_stream(
        self,
        stash: Arc<Mutex<Option<ApiError>>>,
    ) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        futures::stream::unfold(Some((self, stash)), |state| async move {
            let (mut incoming, stash) = state?;
            match incoming.next().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some((incoming, stash)))),
                Ok(None) => None,
                Err(error) => {
                    let message = error.message.clone();
                    if let Ok(mut slot) = stash.lock() {
                        *slot = Some(error);
                    }
                    Some((Err(std::io::Error::other(message)), None))
                }
            }
        })
    }
}

/// The `file` field of a multipart form, parsed (and hashed) as the body streams in.
async fn multipart_file(
    request: Request,
    max: u64,
    hashing: &mut Hashing,
) -> Result<Bytes, ApiError> {
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::invalid(format!("bad multipart body: {}", e.body_text())))?;
    let field_error = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(max)
        } else {
            ApiError::invalid(format!("bad multipart body: {}", e.body_text()))
        }
    };
    while let Some(mut field) = form.next_field().await.map_err(field_error)? {
        if field.name() != Some("file") {
            continue;
        }
        match input::classify(field.content_type()) {
            BodyKind::Unsupported(mime) if mime != "multipart/form-data" => {
                return Err(input::unsupported(&mime));
            }
            _ => {}
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(field_error)? {
            hashing.update(&chunk);
            bytes.extend_from_slice(&chunk);
        }
        return Ok(Bytes::from(bytes));
    }
    Err(ApiError::invalid("multipart body has no field named \"file\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_body_reserves_up_to_its_share_and_the_rest_as_it_arrives() {
        assert_eq!(upfront(Some(3), 10), 3, "a body within the share reserves all of it");
        assert_eq!(upfront(Some(100), 25), 25, "a larger one only the share");
        assert_eq!(upfront(None, 25), 0, "a chunked one nothing yet");
        // Within the share nothing more is taken; past it, exactly what arrived past it.
        assert_eq!(shortfall(3, 3), 0);
        assert_eq!(shortfall(20, 25), 0);
        assert_eq!(shortfall(26, 25), 1);
        assert_eq!(shortfall(64 << 10, 0), 64 << 10);
    }
}
