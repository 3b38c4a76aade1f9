//! The requests and results that cross the process boundary between the front and a worker.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::encode::{ImageFormat, Quality};

use super::PageSelection;
use super::payload::Payload;

/// How big to render a page.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum RenderSize {
    /// Dots per inch; 72 dpi is one pixel per point.
    Dpi(f32),
    /// Target width in pixels; the height follows the page's aspect ratio.
    Width(u32),
}

/// One operation on one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Page count, sizes, rotation, encryption, metadata.
    Info,
    /// The page count, and the pixels the selected pages (all when `None`) come to at `size`,
    /// read from the page tree without loading any page: what a filmstrip needs to know first.
    Measure { pages: Option<PageSelection>, size: RenderSize },
    /// Text of the selected pages (all when `None`), capped at `max_chars` in total.
    Extract { pages: Option<PageSelection>, max_chars: Option<usize> },
    /// One page (1-based) as an image, at `quality` for the lossy formats (see
    /// [`crate::encode::encode_bgra`]).
    Render { page: u32, size: RenderSize, format: ImageFormat, quality: Option<Quality> },
    /// The document with `text` stamped on every page.
    Watermark { text: String },
}

/// What an [`Op`] produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OpOutput {
    /// Result of [`Op::Info`].
    Info(DocInfo),
    /// Result of [`Op::Measure`].
    Measure(Measurement),
    /// Result of [`Op::Extract`].
    Text(ExtractOutput),
    /// Result of [`Op::Render`].
    Image(ImageOutput),
    /// Result of [`Op::Watermark`]: the new PDF.
    Pdf(Payload),
}

/// Facts about a whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocInfo {
    /// Number of pages.
    pub page_count: u32,
    /// One entry per page, in order.
    pub pages: Vec<PageInfo>,
    /// Whether the file uses a security handler (it opened, so the password was right).
    pub encrypted: bool,
    /// Non-empty Info dictionary entries: title, author, subject, keywords, creator, producer,
    /// creation_date, modification_date.
    pub metadata: BTreeMap<String, String>,
}

/// What a filmstrip of the selected pages would come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurement {
    /// Number of pages in the document.
    pub page_count: u32,
    /// The selected pages' rendered pixels (width x height) added up, saturating.
    pub pixels: u64,
}

/// Size and rotation of one page.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PageInfo {
    /// Width in points as displayed (after the page's /Rotate).
    pub width_pt: f32,
    /// Height in points as displayed (after the page's /Rotate).
    pub height_pt: f32,
    /// The page's /Rotate: 0, 90, 180 or 270.
    pub rotation_degrees: u16,
}

/// Text of the selected pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractOutput {
    /// One entry per page extracted, ascending.
    pub pages: Vec<PageText>,
    /// True when `max_chars` cut the text short, or when no range was named and the document
    /// has more pages than one job may touch (then only the first `max_pages` are extracted).
    pub truncated: bool,
    /// The document's page count, so a truncated answer says how much it left out.
    pub page_count: u32,
}

/// Text of one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageText {
    /// 1-based page number.
    pub page: u32,
    /// The page's text in reading order as PDFium gives it.
    pub text: String,
}

/// An encoded page image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageOutput {
    /// The encoded file.
    pub bytes: Payload,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Format of `bytes`.
    pub format: ImageFormat,
}

/// Per-job bounds a worker enforces before doing the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpLimits {
    /// Largest rendered page, in pixels (width * height).
    pub max_pixels: u64,
    /// Most pages one job may touch.
    pub max_pages: u32,
}

impl Default for OpLimits {
    /// 40 megapixels (a 160 MB RGBA bitmap) and 500 pages.
    fn default() -> Self {
        Self { max_pixels: 40_000_000, max_pages: 500 }
    }
}
