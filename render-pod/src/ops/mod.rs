//! Document operations on PDFium: the API the worker processes call.

mod cache;
mod document;
mod error;
mod executor;
mod extract;
mod info;
mod measure;
pub mod payload;
pub mod render;
mod selection;
pub mod size;
mod types;
mod watermark;

use pdfium_render::prelude::{PdfDocument, PdfPageIndex};

pub use document::{DocHash, Document};
pub use error::OpError;
pub use executor::Executor;
pub use selection::{PageRange, PageSelection};
pub use types::{
    DocInfo, ExtractOutput, ImageFormat, ImageOutput, Measurement, Op, OpLimits, OpOutput,
    PageInfo, PageText, Quality, RenderSize,
};

/// The document's page count (PDFium counts in a C int that is never negative).
fn page_count(doc: &PdfDocument) -> u32 {
    u32::try_from(doc.pages().len()).unwrap_or(0)
}

/// PDFium's 0-based index of 1-based `page_no` after checking it against the document.
fn checked_page_index(doc: &PdfDocument, page_no: u32) -> Result<PdfPageIndex, OpError> {
    let page_count = page_count(doc);
    if page_no == 0 || page_no > page_count {
        return Err(OpError::PageOutOfRange { page: page_no, page_count });
    }
    page_index(page_no)
}

/// PDFium's 0-based index of a 1-based page number already known to be in range.
fn page_index(page_no: u32) -> Result<PdfPageIndex, OpError> {
    PdfPageIndex::try_from(page_no.saturating_sub(1))
        .map_err(|_| OpError::Internal { detail: format!("page {page_no} is not addressable") })
}
