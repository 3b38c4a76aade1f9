//! `Extract`: the text of the selected pages, capped at a total number of characters.

use pdfium_render::prelude::PdfDocument;

use super::{ExtractOutput, OpError, PageText};

/// Extracts the text of `pages` (1-based, already checked against the page count), stopping
/// once `max_chars` characters in total have been taken. `truncated` starts as the caller found
/// it (pages already left out).
pub fn extract_text(
    doc: &PdfDocument,
    pages: &[u32],
    max_chars: Option<usize>,
    truncated: bool,
) -> Result<ExtractOutput, OpError> {
    let mut remaining = max_chars.unwrap_or(usize::MAX);
    let page_count = super::page_count(doc);
    let mut out = ExtractOutput { pages: Vec::with_capacity(pages.len()), truncated, page_count };
    for &page_no in pages {
        let index = super::page_index(page_no)?;
        let page = doc.pages().get(index).map_err(|e| OpError::pdfium("loading page", e))?;
        let text = page.text().map_err(|e| OpError::pdfium("loading page text", e))?.all();
        let (kept, cut) = take_chars(&text, remaining);
        remaining -= kept.chars().count();
        out.pages.push(PageText { page: page_no, text: kept.to_string() });
        if cut {
            out.truncated = true;
            break;
        }
    }
    Ok(out)
}

/// The first `n` characters of `s` (never splitting a UTF-8 sequence) and whether any were cut.
pub fn take_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((at, _)) => (&s[..at], true),
        None => (s, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(take_chars("héllo", 2), ("hé", true));
        assert_eq!(take_chars("héllo", 5), ("héllo", false));
        assert_eq!(take_chars("héllo", 50), ("héllo", false));
        assert_eq!(take_chars("日本語", 1), ("日", true));
        assert_eq!(take_chars("abc", 0), ("", true));
        assert_eq!(take_chars("", 0), ("", false));
    }
}
