//! `Measure`: the page count and the pixels a selection of pages comes to, without loading a
//! page. PDFium answers a page's size from its dictionary (`FPDF_GetPageSizeByIndexF`, as
//! displayed, after /Rotate), so a 500-page filmstrip is sized in microseconds per page where a
//! full `Info` loads and parses every page.

use pdfium_render::prelude::PdfDocument;

use super::{Measurement, OpError, PageSelection, RenderSize, size};

/// The page count of `doc` and the rendered pixels of the `selection` at `render_size`.
pub fn measure(
    doc: &PdfDocument,
    selection: &PageSelection,
    render_size: RenderSize,
) -> Result<Measurement, OpError> {
    let page_count = super::page_count(doc);
    let pages = doc.pages();
    let mut pixels = 0u64;
    for page_no in selection.resolve(page_count)? {
        let rect = pages
            .page_size(super::page_index(page_no)?)
            .map_err(|e| OpError::pdfium("reading a page size", e))?;
        let (width, height) =
            size::pixel_size(rect.width().value, rect.height().value, render_size)?;
        pixels = pixels.saturating_add(width.saturating_mul(height));
    }
    Ok(Measurement { page_count, pixels })
}
