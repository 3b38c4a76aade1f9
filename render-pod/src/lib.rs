//! render-pod: PDFium page images, text, watermarks and Office conversion, one process per slot.

pub mod broker;
pub mod byte_budget;
pub mod config;
pub mod doc_cache;
pub mod drain;
pub mod encode;
pub mod engine;
pub mod error_chain;
pub mod http;
pub mod jobs;
pub mod limits;
pub mod lru;
pub mod malloc;
pub mod metrics;
pub mod objects;
pub mod office;
pub mod oneshot;
pub mod ops;
pub mod outbound;
pub mod pdfium_lib;
pub mod quarantine;
pub mod serve;
#[cfg(test)]
mod serve_flags_doc;
