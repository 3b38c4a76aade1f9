//! Opening documents, and keeping the last one open so that consecutive jobs on the same
//! document (page after page of a filmstrip) parse it once.

use pdfium_render::prelude::{PdfDocument, Pdfium};

use super::{DocHash, Document, OpError};

/// Opens a copy of `doc`'s bytes with PDFium, mapping failures to [`OpError`].
pub fn open(pdfium: &'static Pdfium, doc: &Document<'_>) -> Result<PdfDocument<'static>, OpError> {
    if doc.bytes.is_empty() {
        return Err(OpError::Unreadable { detail: "the document is empty".into() });
    }
    let password = doc.password();
    pdfium
        .load_pdf_from_byte_vec(doc.bytes.to_vec(), password)
        .map_err(|e| OpError::from_load(e, password.is_some()))
}

/// What makes two requests the same open document: the bytes' hash and the password (a wrong
/// password must not reuse a document opened with the right one).
#[derive(Debug, PartialEq, Eq)]
struct Key {
    hash: DocHash,
    password: Option<String>,
}

impl Key {
    fn of(doc: &Document<'_>) -> Self {
        Self { hash: doc.hash, password: doc.password().map(str::to_owned) }
    }

    fn matches(&self, doc: &Document<'_>) -> bool {
        self.hash == doc.hash && self.password.as_deref() == doc.password()
    }
}

/// The last opened document, keyed by its hash and password.
pub struct DocumentCache {
    pdfium: &'static Pdfium,
    current: Option<(Key, PdfDocument<'static>)>,
    loads: u64,
}

impl DocumentCache {
    /// An empty cache over the process's PDFium.
    pub fn new(pdfium: &'static Pdfium) -> Self {
        Self { pdfium, current: None, loads: 0 }
    }

    /// The open document for `doc`, parsing it only when it differs from the last call's. Costs
    /// no hashing: the caller's hash is the key.
    pub fn get(&mut self, doc: &Document<'_>) -> Result<&PdfDocument<'static>, OpError> {
        if self.current.as_ref().is_some_and(|(key, _)| key.matches(doc)) {
            return self.current.as_ref().map(|(_, open)| open).ok_or_else(unreachable_miss);
        }
        // Close the previous document first: a worker holds at most one.
        self.current = None;
        self.loads += 1;
        let open = open(self.pdfium, doc)?;
        Ok(&self.current.insert((Key::of(doc), open)).1)
    }

    /// How many times a document was parsed (diagnostics: shows the cache working).
    pub fn loads(&self) -> u64 {
        self.loads
    }
}

fn unreachable_miss() -> OpError {
    OpError::Internal { detail: "document cache lost its entry".into() }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn key_depends_on_hash_and_password() {
        let bytes = b"%PDF-1.4 ...";
        let plain = Key::of(&Document::new(bytes, None));
        assert!(plain.matches(&Document::new(bytes, None)));
        assert!(plain.matches(&Document::new(bytes, Some(""))));
        assert!(!plain.matches(&Document::new(bytes, Some("a"))));
        assert!(!plain.matches(&Document::new(b"%PDF-1.5 ...", None)));
        let locked = Key::of(&Document::new(bytes, Some("a")));
        assert!(locked.matches(&Document::new(bytes, Some("a"))));
        assert!(!locked.matches(&Document::new(bytes, Some("b"))));
    }
}
