//! `Watermark`: the document with a semi-transparent grey diagonal text on every page.

use pdfium_render::prelude::{
    PdfColor, PdfDocument, PdfPage, PdfPageObjectCommon, PdfPageObjectsCommon, PdfPageTextObject,
    PdfPoints, Pdfium,
};

use super::{Document, OpError, cache};

/// Longest accepted watermark text, in characters.
pub const MAX_TEXT_CHARS: usize = 200;
/// Grey at 30% opacity: visible on white and on dark content, never hiding it.
const INK: PdfColor = PdfColor::new(128, 128, 128, 77);
/// The text runs along this share of the page diagonal.
const DIAGONAL_SHARE: f32 = 0.7;
/// Average Helvetica glyph advance in ems, to choose a font size before measuring.
const AVERAGE_ADVANCE_EM: f32 = 0.55;

/// Refuses texts the built-in Helvetica cannot show (it has WinAnsi glyphs, about Latin-1).
pub fn validate_text(text: &str) -> Result<(), OpError> {
    if text.trim().is_empty() {
        return Err(OpError::invalid("the watermark text is empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(OpError::invalid(format!(
            "the watermark text is longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    if let Some(c) = text.chars().find(|&c| c.is_control() || u32::from(c) > 0xFF) {
        return Err(OpError::invalid(format!(
            "the watermark font has no glyph for {c:?} (Latin-1 text only)"
        )));
    }
    Ok(())
}

/// Opens its own copy of the document (the cached one stays unmodified), stamps `text` on
/// every page and returns the saved PDF.
pub fn watermark(
    pdfium: &'static Pdfium,
    original: &Document<'_>,
    text: &str,
    max_pages: u32,
) -> Result<Vec<u8>, OpError> {
    validate_text(text)?;
    let mut doc = cache::open(pdfium, original)?;
    let page_count = super::page_count(&doc);
    if page_count > max_pages {
        return Err(OpError::TooManyPages { requested: page_count.into(), max: max_pages });
    }
    for index in 0..doc.pages().len() {
        let mut page = doc.pages().get(index).map_err(|e| OpError::pdfium("loading page", e))?;
        stamp(&mut doc, &mut page, text)?;
    }
    doc.save_to_bytes().map_err(|e| OpError::pdfium("saving document", e))
}

/// Adds one text object, centred on the visible page box, along its diagonal as displayed.
fn stamp<'a>(doc: &mut PdfDocument<'a>, page: &mut PdfPage<'a>, text: &str) -> Result<(), OpError> {
    let fail = |doing: &'static str| move |e| OpError::pdfium(doing, e);
    let (shown_w, shown_h) = (page.width().value, page.height().value);
    let rotation = page.rotation().map_err(fail("reading rotation"))?.as_degrees();
    let visible = page.boundaries().bounding().map_err(fail("reading page box"))?.bounds;
    let diagonal = shown_w.hypot(shown_h);
    let chars = text.chars().count().max(1) as f32;
    let font_size = (diagonal * DIAGONAL_SHARE / (chars * AVERAGE_ADVANCE_EM)).clamp(6.0, 300.0);

    let font = doc.fonts_mut().helvetica();
    let mut object = PdfPageTextObject::new(doc, text, font, PdfPoints::new(font_size))
        .map_err(fail("creating watermark text"))?;
    object.set_fill_color(INK).map_err(fail("colouring watermark"))?;
    let text_w = object.width().map_err(fail("measuring watermark"))?;
    // Centre the text's box on the origin, turn it, then move it to the page centre. /Rotate
    // turns the page clockwise for display, so adding it keeps the text on the shown diagonal.
    let angle = shown_h.atan2(shown_w).to_degrees() + rotation;
    object
        .translate(-text_w / 2.0, PdfPoints::new(-font_size / 3.0))
        .map_err(fail("placing watermark"))?;
    object.rotate_counter_clockwise_degrees(angle).map_err(fail("turning watermark"))?;
    let centre_x = (visible.left() + visible.right()) / 2.0;
    let centre_y = (visible.bottom() + visible.top()) / 2.0;
    object.translate(centre_x, centre_y).map_err(fail("placing watermark"))?;
    page.objects_mut().add_text_object(object).map_err(fail("adding watermark"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_latin1_and_refuses_what_helvetica_cannot_show() {
        assert!(validate_text("CONFIDENTIEL – brouillon").is_err()); // en dash is not Latin-1
        assert!(validate_text("CONFIDENTIEL brouillon é").is_ok());
        assert!(validate_text("   ").is_err());
        assert!(validate_text("a\nb").is_err());
        assert!(validate_text(&"x".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(validate_text(&"x".repeat(MAX_TEXT_CHARS + 1)).is_err());
        assert!(validate_text("日本").is_err());
    }
}
