//! The typed failures of a document operation, with their API code and HTTP status.

use pdfium_render::prelude::{PdfiumError, PdfiumInternalError};
use serde::{Deserialize, Serialize};

/// Why an operation on a document failed; every variant maps to one API error code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum OpError {
    /// Malformed, truncated, empty or not a PDF at all.
    #[error("the document cannot be read: {detail}")]
    Unreadable { detail: String },
    /// The document is encrypted and no password was given.
    #[error("the document is encrypted and needs a password")]
    PasswordRequired,
    /// The given password does not open the document.
    #[error("the password does not open the document")]
    WrongPassword,
    /// A requested page is past the end of the document.
    #[error("page {page} is out of range: the document has {page_count} pages")]
    PageOutOfRange { page: u32, page_count: u32 },
    /// The rendered image would exceed the pixel budget (checked before any bitmap exists).
    #[error("a {width}x{height} image exceeds the limit of {max_pixels} pixels")]
    TooManyPixels { width: u64, height: u64, max_pixels: u64 },
    /// The page bitmap the request asks for cannot be allocated within the worker's memory
    /// ceiling (the request's size, not the document, is to blame: the worker lives on).
    #[error(
        "a page bitmap of {} MiB does not fit in a worker's memory: ask for fewer pixels",
        bytes >> 20
    )]
    BitmapTooLarge { bytes: u64 },
    /// More pages were requested than one job may touch.
    #[error("{requested} pages requested, at most {max} allowed")]
    TooManyPages { requested: u64, max: u32 },
    /// The request itself is malformed (dpi, width, format, page syntax).
    #[error("invalid request: {detail}")]
    InvalidRequest { detail: String },
    /// PDFium or an encoder failed on a document it had accepted.
    #[error("internal error: {detail}")]
    Internal { detail: String },
}

impl OpError {
    /// The stable machine-readable code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            OpError::Unreadable { .. } => "unreadable_document",
            OpError::PasswordRequired => "password_required",
            OpError::WrongPassword => "wrong_password",
            OpError::PageOutOfRange { .. } => "page_out_of_range",
            OpError::TooManyPixels { .. } => "too_many_pixels",
            OpError::BitmapTooLarge { .. } => "memory_limit_exceeded",
            OpError::TooManyPages { .. } => "too_many_pages",
            OpError::InvalidRequest { .. } => "invalid_request",
            OpError::Internal { .. } => "internal",
        }
    }

    /// The HTTP status that fits the error.
    pub fn status(&self) -> u16 {
        match self {
            OpError::InvalidRequest { .. } => 400,
            OpError::Internal { .. } => 500,
            _ => 422,
        }
    }

    /// Shorthand for [`OpError::InvalidRequest`].
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        OpError::InvalidRequest { detail: detail.into() }
    }

    /// Maps a PDFium failure while opening a document; `had_password` tells the two password
    /// errors apart (PDFium reports both as one error code).
    pub(crate) fn from_load(error: PdfiumError, had_password: bool) -> Self {
        match error {
            PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError) => {
                if had_password {
                    OpError::WrongPassword
                } else {
                    OpError::PasswordRequired
                }
            }
            PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::SecurityError) => {
                OpError::Unreadable { detail: "unsupported security handler".into() }
            }
            PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FormatError) => {
                OpError::Unreadable { detail: "not a PDF, or damaged beyond repair".into() }
            }
            other => OpError::Unreadable { detail: format!("PDFium: {other:?}") },
        }
    }

    /// Wraps a PDFium failure on an already opened document, naming what was being done.
    pub(crate) fn pdfium(doing: &str, error: PdfiumError) -> Self {
        OpError::Internal { detail: format!("{doing}: PDFium: {error:?}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_errors_depend_on_whether_one_was_given() {
        let err = || PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError);
        assert_eq!(OpError::from_load(err(), false), OpError::PasswordRequired);
        assert_eq!(OpError::from_load(err(), true), OpError::WrongPassword);
    }

    #[test]
    fn codes_and_statuses_fit_the_api() {
        let format = PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FormatError);
        let unreadable = OpError::from_load(format, false);
        assert_eq!((unreadable.code(), unreadable.status()), ("unreadable_document", 422));
        let invalid = OpError::invalid("dpi");
        assert_eq!((invalid.code(), invalid.status()), ("invalid_request", 400));
        let internal = OpError::Internal { detail: "x".into() };
        assert_eq!((internal.code(), internal.status()), ("internal", 500));
        let range = OpError::PageOutOfRange { page: 9, page_count: 3 };
        assert_eq!((range.code(), range.status()), ("page_out_of_range", 422));
        assert!(range.to_string().contains("page 9"));
    }
}
