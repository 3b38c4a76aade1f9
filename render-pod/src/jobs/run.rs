//! Running one job: its document read from the object store, each operation done through the
//! engine's background turns (and the Office path), each output written under its derived key
//! as it is made, progress recorded (where a cancellation is noticed), the manifest returned
//! for the caller to write last.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use renderpool_api::jobs::{
    Checked, InputRead, JobId, Manifest, ObjectUrl, OperationOutputs, OutputObject, State, VERSION,
};

use super::outputs;
use super::{Inner, Tracked};
use crate::broker::states::Change;
use crate::byte_budget::Reservation;
use crate::doc_cache::HeldDocument;
use crate::engine::Task;
use crate::http::ApiError;
use crate::http::params::{JobOperation, JobPages};
use crate::objects::{Fetched, ObjectError};
use crate::office::{ConvertError, ConvertOptions, Converted, Detected, OfficeFormat, detect};
use crate::ops::{DocHash, ImageFormat, Op, OpOutput, PageSelection, Quality, RenderSize};
use crate::quarantine::WorkClass;

/// Progress is written at most this often (and at the end); a cancellation is noticed then.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Why a job stopped before its manifest.
#[derive(Debug)]
pub enum Stop {
    /// It failed at operation `operation` (or before any) with this error.
    Failed { error: ApiError, operation: Option<usize> },
    /// Cancelled by `DELETE /v1/jobs/{id}`.
    Cancelled,
    /// The pod is stopping: hand it back.
    Aborted,
}

impl Stop {
    fn at(operation: usize) -> impl Fn(ApiError) -> Stop {
        move |error| Stop::Failed { error, operation: Some(operation) }
    }
}

impl From<ApiError> for Stop {
    fn from(error: ApiError) -> Self {
        Stop::Failed { error, operation: None }
    }
}

/// The document as the operations need it.
struct Document {
    /// As read.
    original: Bytes,
    original_hash: DocHash,
    /// The original's bytes in the upload budget, held while the job runs.
    _reservation: Arc<Reservation>,
    /// The PDF PDFium reads: the original, or its conversion.
    pdf: Option<(Bytes, DocHash)>,
    /// What the original is.
    detected: Detected,
    password: Option<String>,
    page_count: Option<u32>,
}

/// One job being run.
pub struct Runner<'a> {
    pub(super) inner: &'a Inner,
    pub(super) state: &'a Tracked,
    pub(super) id: &'a JobId,
    pub(super) checked: &'a Checked,
    pub(super) plan: Vec<JobOperation>,
    done: AtomicU32,
    total: AtomicU32,
    last_progress: Mutex<Instant>,
}

impl<'a> Runner<'a> {
    pub(super) fn new(
        inner: &'a Inner,
        state: &'a Tracked,
        checked: &'a Checked,
        plan: Vec<JobOperation>,
    ) -> Self {
        let (done, total) = (AtomicU32::new(0), AtomicU32::new(0));
        let id = &state.id;
        let last_progress = Mutex::new(Instant::now());
        Self { inner, state, id, checked, plan, done, total, last_progress }
    }

    fn aborted(&self) -> bool {
        *self.inner.abort.borrow()
    }

    /// `work`, unless the pod stops waiting for it first: then the work is dropped (a task in
    /// the engine is cancelled like a request whose client went away) and the job handed back.
    async fn or_abort<T>(&self, work: impl std::future::Future<Output = T>) -> Result<T, Stop> {
        let mut abort = self.inner.abort.subscribe();
        tokio::select! {
            done = work => Ok(done),
            _ = abort.wait_for(|a| *a) => Err(Stop::Aborted),
        }
    }

    /// Runs every operation; the manifest of what was written.
    pub async fn run(&self) -> Result<Manifest, Stop> {
        let fetched = self.fetch().await?;
        let etag = fetched.etag.clone();
        let bytes = fetched.document.bytes.len() as u64;
        let mut doc = self.document(fetched).await?;
        // Recorded with the next progress (a short job's end records it instead).
        self.total.store(self.count(&mut doc).await?, Ordering::Relaxed);
        let folder = outputs::job_folder(&self.checked.output, self.id);
        let mut operations = Vec::with_capacity(self.plan.len());
        for (index, operation) in self.plan.clone().into_iter().enumerate() {
            let name = self.checked.message.operations[index].name();
            let written = self.operation(&mut doc, &folder, index, name, operation).await?;
            operations.push(OperationOutputs { op: name.to_string(), outputs: written });
        }
        Ok(Manifest {
            version: VERSION,
            job: self.id.clone(),
            input: InputRead { url: self.checked.input.to_string(), etag, bytes },
            operations,
        })
    }

    /// The input, read within the upload budget (waiting for room rather than failing).
    async fn fetch(&self) -> Result<Fetched, Stop> {
        let max = self.inner.limits.max_body_bytes;
        let etag = self.checked.message.input.etag.as_deref();
        loop {
            let fetched =
                self.inner.objects.fetch(&self.checked.input, etag, max, &self.inner.uploads).await;
            match fetched {
                Err(ObjectError::NoRoom { .. }) if !self.aborted() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other.map_err(|e| Stop::from(ApiError::from(e))),
            }
        }
    }

    async fn document(&self, fetched: Fetched) -> Result<Document, Stop> {
        let HeldDocument { bytes: original, hash: original_hash, reservation } = fetched.document;
        if original.is_empty() {
            return Err(ApiError::from(crate::ops::OpError::Unreadable {
                detail: "the document is empty".into(),
            })
            .into());
        }
        self.inner
            .engine
            .check_quarantine(&original_hash, WorkClass::Open)
            .map_err(ApiError::from)?;
        let detected = detect(&original);
        let pdf = match &detected {
            Detected::Pdf | Detected::Unknown => Some((original.clone(), original_hash)),
            Detected::Office(_) => None,
            Detected::Refused(refusal) => {
                return Err(ApiError::from(ConvertError::Refused(refusal.clone())).into());
            }
        };
        let password = self.checked.message.input.password.clone();
        Ok(Document {
            original,
            original_hash,
            _reservation: reservation,
            pdf,
            detected,
            password,
            page_count: None,
        })
    }

    /// The PDF PDFium reads: an Office original is converted first (through the cache).
    async fn pdf(&self, doc: &mut Document, operation: usize) -> Result<(Bytes, DocHash), Stop> {
        if let Some(pdf) = &doc.pdf {
            return Ok(pdf.clone());
        }
        let Detected::Office(format) = doc.detected.clone() else {
            return Err(ApiError::internal("no PDF for a document that is not Office").into());
        };
        let converted = self.convert(doc, format, ConvertOptions::default(), operation).await?;
        // A converted PDF has no password.
        doc.password = None;
        doc.pdf = Some((converted.pdf.clone(), converted.hash));
        Ok((converted.pdf, converted.hash))
    }

    /// The Office original as PDF, through the pod's Office share and cache, within one job
    /// deadline.
    async fn convert(
        &self,
        doc: &Document,
        format: OfficeFormat,
        options: ConvertOptions,
        operation: usize,
    ) -> Result<Converted, Stop> {
        let deadline = Instant::now() + self.inner.limits.job_deadline;
        let office = &self.inner.office;
        self.or_abort(office.to_pdf(&doc.original, doc.original_hash, format, options, deadline))
            .await?
            .map_err(|e| Stop::at(operation)(e.into()))
    }

    /// Runs `op` on the PDF in a background turn.
    async fn engine(&self, doc: &mut Document, operation: usize, op: Op) -> Result<OpOutput, Stop> {
        let (pdf, hash) = self.pdf(doc, operation).await?;
        let task = Task { doc: pdf, hash, password: doc.password.clone(), op };
        self.or_abort(self.inner.engine.run_background(task))
            .await?
            .map_err(|e| Stop::at(operation)(e.into()))
    }

    /// The document's page count (asked of the engine once).
    async fn page_count(&self, doc: &mut Document, operation: usize) -> Result<u32, Stop> {
        if let Some(count) = doc.page_count {
            return Ok(count);
        }
        let measure = Op::Measure { pages: None, size: RenderSize::Dpi(72.0) };
        match self.engine(doc, operation, measure).await? {
            OpOutput::Measure(measured) => {
                doc.page_count = Some(measured.page_count);
                Ok(measured.page_count)
            }
            _ => {
                Err(ApiError::internal("the worker answered a measure with something else").into())
            }
        }
    }

    /// The pages of a render or a filmstrip.
    async fn pages(&self, doc: &mut Document, operation: usize) -> Result<Vec<u32>, Stop> {
        let selection = match &self.plan[operation] {
            JobOperation::Render { pages: JobPages::One(page), .. } => return Ok(vec![*page]),
            JobOperation::Render { pages: JobPages::Selection(selection), .. } => {
                Some(selection.clone())
            }
            JobOperation::Thumbnails { pages, .. } => pages.clone(),
            _ => return Ok(Vec::new()),
        };
        let count = self.page_count(doc, operation).await?;
        let selection = match selection {
            Some(selection) => selection,
            None => {
                let all = PageSelection::all(count.min(self.inner.limits.max_pages));
                return all.resolve(count).map_err(|e| Stop::at(operation)(e.into()));
            }
        };
        selection.resolve(count).map_err(|e| Stop::at(operation)(e.into()))
    }

    /// Outputs asked for in all.
    async fn count(&self, doc: &mut Document) -> Result<u32, Stop> {
        let mut total = 0u32;
        for (index, operation) in self.plan.iter().enumerate() {
            let outputs = match operation {
                JobOperation::Render { .. } | JobOperation::Thumbnails { .. } => {
                    let pages = self.pages(doc, index).await?;
                    u32::try_from(pages.len()).unwrap_or(u32::MAX)
                }
                _ => 1,
            };
            total = total.saturating_add(outputs);
        }
        Ok(total)
    }

    /// Records progress (at most every [`PROGRESS_EVERY`]); a job cancelled in the meantime
    /// stops here, and so does one whose pod is stopping.
    async fn progress(&self) -> Result<(), Stop> {
        if self.aborted() {
            return Err(Stop::Aborted);
        }
        {
            let mut last = self.last_progress.lock().unwrap_or_else(|p| p.into_inner());
            if last.elapsed() < PROGRESS_EVERY {
                return Ok(());
            }
            *last = Instant::now();
        }
        let (done, total) = (self.done.load(Ordering::Relaxed), self.total.load(Ordering::Relaxed));
        let mut cancelled = false;
        let written = self
            .state
            .change(self.inner, |job| match job {
                Some(job) if job.state == State::Cancelled => {
                    cancelled = true;
                    Change::Keep
                }
                Some(job) => {
                    job.progress.done = done;
                    job.progress.total = total;
                    Change::Write
                }
                None => Change::Keep,
            })
            .await;
        if let Err(e) = written {
            // Progress is for people watching; the work goes on without it.
            tracing::warn!(job = %self.id, error = %e, "cannot record the job's progress");
        }
        if cancelled { Err(Stop::Cancelled) } else { Ok(()) }
    }

    async fn put(
        &self,
        url: &ObjectUrl,
        bytes: Bytes,
        content_type: &str,
        operation: usize,
    ) -> Result<OutputObject, Stop> {
        let size = bytes.len() as u64;
        self.inner
            .objects
            .put(url, bytes, content_type)
            .await
            .map_err(|e| Stop::at(operation)(e.into()))?;
        Ok(outputs::listed(url, size, content_type))
    }

    async fn json<T: serde::Serialize>(
        &self,
        folder: &ObjectUrl,
        index: usize,
        name: &str,
        value: &T,
    ) -> Result<OutputObject, Stop> {
        let body = serde_json::to_vec(value).map_err(|e| ApiError::internal(e.to_string()))?;
        let url = outputs::single(folder, index, name, "json");
        self.put(&url, Bytes::from(body), "application/json", index).await
    }

    /// One operation's outputs, written.
    async fn operation(
        &self,
        doc: &mut Document,
        folder: &ObjectUrl,
        index: usize,
        name: &str,
        operation: JobOperation,
    ) -> Result<Vec<OutputObject>, Stop> {
        let unexpected = || {
            Stop::at(index)(ApiError::internal("the worker answered with another kind of output"))
        };
        let written = match operation {
            JobOperation::Info => match self.engine(doc, index, Op::Info).await? {
                OpOutput::Info(info) => vec![self.json(folder, index, name, &info).await?],
                _ => return Err(unexpected()),
            },
            JobOperation::Extract(op) => match self.engine(doc, index, op).await? {
                OpOutput::Text(text) => vec![self.json(folder, index, name, &text).await?],
                _ => return Err(unexpected()),
            },
            JobOperation::Watermark(op) => match self.engine(doc, index, op).await? {
                OpOutput::Pdf(pdf) => {
                    let url = outputs::single(folder, index, name, "pdf");
                    vec![self.put(&url, pdf.into_bytes(), "application/pdf", index).await?]
                }
                _ => return Err(unexpected()),
            },
            JobOperation::Convert(options) => {
                let Detected::Office(format) = doc.detected.clone() else {
                    let error = ConvertError::NotOffice(
                        "the document is not an Office document: convert takes Word, Excel, PowerPoint, OpenDocument or RTF",
                    );
                    return Err(Stop::at(index)(error.into()));
                };
                let converted = self.convert(doc, format, options, index).await?;
                let url = outputs::single(folder, index, name, "pdf");
                vec![self.put(&url, converted.pdf, "application/pdf", index).await?]
            }
            JobOperation::Render { size, format, quality, .. }
            | JobOperation::Thumbnails { size, format, quality, .. } => {
                let pages = self.pages(doc, index).await?;
                return self.images(doc, folder, index, name, pages, size, format, quality).await;
            }
        };
        self.done.fetch_add(1, Ordering::Relaxed);
        self.progress().await?;
        Ok(written)
    }

    /// Page images, a slot's worth at a time, each written as it is made.
    #[allow(clippy::too_many_arguments)]
    async fn images(
        &self,
        doc: &mut Document,
        folder: &ObjectUrl,
        index: usize,
        name: &str,
        pages: Vec<u32>,
        size: RenderSize,
        format: ImageFormat,
        quality: Option<Quality>,
    ) -> Result<Vec<OutputObject>, Stop> {
        let (pdf, hash) = self.pdf(doc, index).await?;
        let password = doc.password.clone();
        let this = self;
        let renders = futures::stream::iter(pages).map(|page| {
            let task = Task {
                doc: pdf.clone(),
                hash,
                password: password.clone(),
                op: Op::Render { page, size, format, quality },
            };
            async move {
                let image = match this.or_abort(this.inner.engine.run_background(task)).await? {
                    Ok(OpOutput::Image(image)) => image,
                    Ok(_) => {
                        return Err(Stop::at(index)(ApiError::internal(
                            "the worker answered a render with something else",
                        )));
                    }
                    Err(e) => return Err(Stop::at(index)(e.into())),
                };
                let url = outputs::page(folder, index, name, page, format);
                let mut listed =
                    this.put(&url, image.bytes.into_bytes(), format.content_type(), index).await?;
                listed.page = Some(page);
                listed.width = Some(image.width);
                listed.height = Some(image.height);
                Ok(listed)
            }
        });
        let mut renders = std::pin::pin!(renders.buffer_unordered(self.inner.engine.slots()));
        let mut written = Vec::new();
        while let Some(listed) = renders.next().await {
            written.push(listed?);
            self.done.fetch_add(1, Ordering::Relaxed);
            self.progress().await?;
        }
        written.sort_by_key(|o| o.page);
        Ok(written)
    }
}
