//! `Render`: one page to an encoded image, with every size check done before the bitmap exists.

use pdfium_render::prelude::{
    PdfBitmap, PdfBitmapFormat, PdfColor, PdfDocument, PdfPage, PdfRenderConfig,
};

use super::{ImageFormat, ImageOutput, OpError, Quality, RenderSize, size};
use crate::encode::{self, EncodeError};

/// Bitmap buffers up to this size are kept for the next page (a 150 dpi Letter page is 8.4 MB):
/// zeroing a fresh one cost about 5% of a page. Bigger ones are freed after their page.
pub const KEEP_BITMAP_BYTES: usize = 64 << 20;

/// Renders 1-based `page_no` at `size` into `bitmap` (a buffer kept between pages) and encodes
/// it as `format` (at a quality, for the lossy ones).
pub fn render_page(
    doc: &PdfDocument,
    page_no: u32,
    size: RenderSize,
    (format, quality): (ImageFormat, Option<Quality>),
    max_pixels: u64,
    bitmap: &mut Vec<u8>,
) -> Result<ImageOutput, OpError> {
    let index = super::checked_page_index(doc, page_no)?;
    let page = doc.pages().get(index).map_err(|e| OpError::pdfium("loading page", e))?;
    // PDFium's page width and height are as displayed (after /Rotate), and rendering with no
    // extra rotation applies /Rotate, so the bitmap is the page as a viewer shows it.
    let (width, height) = size::pixel_size(page.width().value, page.height().value, size)?;
    let (w, h) = size::check_pixels(width, height, max_pixels)?;
    let max_dimension = u64::from(format.max_dimension());
    if width > max_dimension || height > max_dimension {
        return Err(OpError::invalid(format!(
            "{format} images are at most {max_dimension} pixels wide or high, this page would be \
             {width}x{height}"
        )));
    }
    render_bgra(&page, w, h, bitmap)?;
    let (width, height) = (width as u32, height as u32);
    let encoded = encode::encode_bgra(bitmap, width, height, format, quality);
    if bitmap.capacity() > KEEP_BITMAP_BYTES {
        *bitmap = Vec::new();
    }
    let bytes = encoded.map_err(encode_error)?;
    Ok(ImageOutput { bytes: bytes.into(), width, height, format })
}

/// Renders `page` onto white at exactly `width` x `height` pixels (already checked against the
/// budget) into `bgra`, resized to packed BGRA rows: PDFium's own order (asking it for RGBA made
/// it convert the whole bitmap afterwards, measured as a third of the render's time). Whatever
/// `bgra` held is painted over by the white background, so a reused buffer needs no zeroing.
pub fn render_bgra(
    page: &PdfPage,
    width: i32,
    height: i32,
    bgra: &mut Vec<u8>,
) -> Result<(), OpError> {
    let len = usize::try_from(i64::from(width) * i64::from(height) * 4)
        .map_err(|_| OpError::invalid(format!("bitmap size {width}x{height} is invalid")))?;
    // Refused by the memory ceiling: an answer, not an abort that would blame the document.
    bgra.try_reserve_exact(len.saturating_sub(bgra.len()))
        .map_err(|_| OpError::BitmapTooLarge { bytes: len as u64 })?;
    bgra.resize(len, 0);
    {
        let mut bitmap = PdfBitmap::from_bytes(width, height, PdfBitmapFormat::BGRA, bgra)
            .map_err(|e| OpError::pdfium("creating bitmap", e))?;
        // pdfium-render asks PDFium to reverse the byte order unless told not to.
        let config = PdfRenderConfig::new()
            .set_fixed_size(width, height)
            .set_reverse_byte_order(false)
            .set_clear_color(PdfColor::WHITE);
        page.render_into_bitmap_with_config(&mut bitmap, &config)
            .map_err(|e| OpError::pdfium("rendering page", e))?;
    }
    Ok(())
}

fn encode_error(e: EncodeError) -> OpError {
    match e {
        EncodeError::TooLarge { .. } => OpError::invalid(e.to_string()),
        other => OpError::Internal { detail: other.to_string() },
    }
}
