//! Conversion options a client may ask for: PDF/A and a page range LibreOffice exports natively.

use std::str::FromStr;

use crate::ops::PageSelection;

/// A PDF/A conformance level LibreOffice exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdfA {
    /// PDF/A-1b.
    A1b,
    /// PDF/A-2b.
    A2b,
    /// PDF/A-3b.
    A3b,
}

impl PdfA {
    /// The value of Gotenberg's `pdfa` form field.
    pub fn gotenberg_name(self) -> &'static str {
        match self {
            PdfA::A1b => "PDF/A-1b",
            PdfA::A2b => "PDF/A-2b",
            PdfA::A3b => "PDF/A-3b",
        }
    }
}

/// A `pdfa=` value that names no supported level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pdfa={0:?} is not one of 1b, 2b, 3b (or PDF/A-1b, PDF/A-2b, PDF/A-3b)")]
pub struct UnknownPdfA(pub String);

impl FromStr for PdfA {
    type Err = UnknownPdfA;

    /// `1b`, `2b`, `3b`, optionally prefixed `PDF/A-` or `A-`, any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let level =
            lower.strip_prefix("pdf/a-").or_else(|| lower.strip_prefix("a-")).unwrap_or(&lower);
        match level {
            "1b" => Ok(PdfA::A1b),
            "2b" => Ok(PdfA::A2b),
            "3b" => Ok(PdfA::A3b),
            _ => Err(UnknownPdfA(s.to_string())),
        }
    }
}

/// What shapes the PDF; part of the cache key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConvertOptions {
    /// Export as PDF/A.
    pub pdfa: Option<PdfA>,
    /// Export only these pages (LibreOffice's own page range, applied while exporting).
    pub pages: Option<PageSelection>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pdfa_levels_in_the_usual_spellings() {
        assert_eq!("2b".parse::<PdfA>().unwrap(), PdfA::A2b);
        assert_eq!("PDF/A-1b".parse::<PdfA>().unwrap(), PdfA::A1b);
        assert_eq!("a-3B".parse::<PdfA>().unwrap(), PdfA::A3b);
        assert_eq!(PdfA::A2b.gotenberg_name(), "PDF/A-2b");
        assert!("2a".parse::<PdfA>().is_err());
        assert!("".parse::<PdfA>().is_err());
    }
}
