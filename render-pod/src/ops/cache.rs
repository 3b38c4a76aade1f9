//! Opening documents, and keeping the last one open so that consecutive jobs on the same
//! document (page after page of a filmstrip) parse it once.

use pdfium_render::prelude::{PdfDocument, Pdfium};
use sha2::{Digest, Sha256};

use super::OpError;

/// Opens `bytes` with PDFium, mapping failures to [`OpError`]. An empty password counts as none.
pub fn open(
    pdfium: &'static Pdfium,
    bytes: Vec<u8>,
    password: Option<&str>,
) -> Result<PdfDocument<'static>, OpError> {
    let password = password.filter(|p| !p.is_empty());
    if bytes.is_empty() {
        return Err(OpError::Unreadable { detail: "the document is empty".into() });
    }
    pdfium
        .load_pdf_from_byte_vec(bytes, password)
        .map_err(|e| OpError::from_load(e, password.is_some()))
}

/// The last opened document, keyed by the sha256 of its bytes and password.
pub struct DocumentCache {
    pdfium: &'static Pdfium,
    current: Option<(Key, PdfDocument<'static>)>,
    loads: u64,
}

type Key = [u8; 32];

impl DocumentCache {
    /// An empty cache over the process's PDFium.
    pub fn new(pdfium: &'static Pdfium) -> Self {
        Self { pdfium, current: None, loads: 0 }
    }

    /// The open document for these bytes and password, parsing them only when they differ
    /// from the last call's.
    pub fn get(
        &mut self,
        bytes: &[u8],
        password: Option<&str>,
    ) -> Result<&PdfDocument<'static>, OpError> {
        let key = key(bytes, password);
        if self.current.as_ref().is_some_and(|(k, _)| *k == key) {
            return self.current.as_ref().map(|(_, doc)| doc).ok_or_else(unreachable_miss);
        }
        // Close the previous document first: a worker holds at most one.
        self.current = None;
        self.loads += 1;
        let doc = open(self.pdfium, bytes.to_vec(), password)?;
        Ok(&self.current.insert((key, doc)).1)
    }

    /// How many times a document was parsed (diagnostics: shows the cache working).
    pub fn loads(&self) -> u64 {
        self.loads
    }
}

fn unreachable_miss() -> OpError {
    OpError::Internal { detail: "document cache lost its entry".into() }
}

/// sha256 over the password (length-prefixed, so bytes cannot slide between the two) and the
/// document.
fn key(bytes: &[u8], password: Option<&str>) -> Key {
    let password = password.filter(|p| !p.is_empty()).unwrap_or("");
    let mut hasher = Sha256::new();
    hasher.update((password.len() as u64).to_le_bytes());
    hasher.update(password.as_bytes());
    hasher.update(bytes);
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_bytes_and_password() {
        let doc = b"%PDF-1.4 ...";
        assert_eq!(key(doc, None), key(doc, None));
        assert_eq!(key(doc, None), key(doc, Some("")));
        assert_ne!(key(doc, None), key(doc, Some("a")));
        assert_ne!(key(doc, Some("a")), key(doc, Some("b")));
        assert_ne!(key(b"ab", Some("")), key(b"b", Some("a")));
        assert_ne!(key(doc, None), key(b"%PDF-1.5 ...", None));
    }
}
