//! render-pod: PDFium page images, text, watermarks and Office conversion, one process per slot.

pub mod pdfium_lib;
