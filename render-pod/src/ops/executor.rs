//! The per-worker executor: one PDFium, the last opened document, the limits.

use pdfium_render::prelude::{PdfDocument, Pdfium};

use super::cache::DocumentCache;
use super::{
    Document, Op, OpError, OpLimits, OpOutput, PageSelection, extract, info, measure, render, size,
    watermark,
};

/// Owns one bound PDFium and the last opened document. One per worker process (PDFium is not
/// thread-safe).
pub struct Executor {
    pdfium: &'static Pdfium,
    cache: DocumentCache,
    limits: OpLimits,
    /// The last page bitmap's buffer, reused by the next render.
    bitmap: Vec<u8>,
}

impl Executor {
    /// An executor over `pdfium` enforcing `limits`.
    pub fn new(pdfium: Pdfium, limits: OpLimits) -> Self {
        // A PdfDocument borrows the Pdfium that opened it. The worker keeps this Pdfium for its
        // whole life, so leaking it (once per executor, one executor per process) lets the cache
        // hold a PdfDocument<'static> without a self-referential struct.
        let pdfium: &'static Pdfium = Box::leak(Box::new(pdfium));
        Self { pdfium, cache: DocumentCache::new(pdfium), limits, bitmap: Vec::new() }
    }

    /// The limits this executor enforces.
    pub fn limits(&self) -> OpLimits {
        self.limits
    }

    /// How many times a document was parsed so far (diagnostics: shows reuse working).
    pub fn document_loads(&self) -> u64 {
        self.cache.loads()
    }

    /// Runs `op` on `doc`, reusing the open document when the same hash and password came last,
    /// so consecutive pages of one document are parsed once.
    pub fn execute(&mut self, doc: &Document<'_>, op: &Op) -> Result<OpOutput, OpError> {
        precheck(op, self.limits)?;
        let limits = self.limits;
        match op {
            Op::Info => info::document_info(self.cache.get(doc)?).map(OpOutput::Info),
            Op::Measure { pages, size } => {
                let document = self.cache.get(doc)?;
                let all;
                let selection = match pages {
                    Some(selection) => selection,
                    None => {
                        all = PageSelection::all(super::page_count(document));
                        check_page_budget(all.count(), limits)?;
                        &all
                    }
                };
                measure::measure(document, selection, *size).map(OpOutput::Measure)
            }
            Op::Extract { pages, max_chars } => {
                let document = self.cache.get(doc)?;
                let (selected, cut) = selected_pages(document, pages.as_ref(), limits)?;
                extract::extract_text(document, &selected, *max_chars, cut).map(OpOutput::Text)
            }
            Op::Render { page, size, format, quality } => {
                let document = self.cache.get(doc)?;
                render::render_page(
                    document,
                    *page,
                    *size,
                    (*format, *quality),
                    limits.max_pixels,
                    &mut self.bitmap,
                )
                .map(OpOutput::Image)
            }
            Op::Watermark { text } => {
                watermark::watermark(self.pdfium, doc, text, limits.max_pages)
                    .map(|pdf| OpOutput::Pdf(pdf.into()))
            }
        }
    }
}

/// Checks that need no document, so a bad request costs no parse.
fn precheck(op: &Op, limits: OpLimits) -> Result<(), OpError> {
    match op {
        Op::Info => Ok(()),
        Op::Measure { pages, size: render_size } => {
            if let Some(selection) = pages {
                check_page_budget(selection.count(), limits)?;
            }
            size::validate(*render_size)
        }
        Op::Extract { pages, .. } => match pages {
            Some(selection) => check_page_budget(selection.count(), limits),
            None => Ok(()),
        },
        Op::Render { page, size, .. } => {
            if *page == 0 {
                return Err(OpError::invalid("pages are numbered from 1"));
            }
            size::validate(*size)
        }
        Op::Watermark { text } => watermark::validate_text(text),
    }
}

fn check_page_budget(requested: u64, limits: OpLimits) -> Result<(), OpError> {
    if requested > u64::from(limits.max_pages) {
        return Err(OpError::TooManyPages { requested, max: limits.max_pages });
    }
    Ok(())
}

/// The 1-based pages an extract covers, and whether pages were left out: a named selection
/// (refused past the page budget: the client asked for exactly those), or else the whole
/// document up to the budget. Text extraction runs on every upload, so a long manual gets its
/// first pages and `truncated` rather than an error.
fn selected_pages(
    doc: &PdfDocument,
    selection: Option<&PageSelection>,
    limits: OpLimits,
) -> Result<(Vec<u32>, bool), OpError> {
    let page_count = super::page_count(doc);
    match selection {
        Some(selection) => {
            check_page_budget(selection.count(), limits)?;
            Ok((selection.resolve(page_count)?, false))
        }
        None => {
            let kept = page_count.min(limits.max_pages);
            Ok(((1..=kept).collect(), kept < page_count))
        }
    }
}
