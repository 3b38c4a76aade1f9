//! The quarantine both document paths share: documents that crashed or exhausted a PDFium
//! worker ([`crate::engine`]), and Office documents that timed out or crashed LibreOffice
//! ([`crate::office`]), refused fast for a while, by document and class of work. Below both,
//! so neither imports the other.

mod poison;
mod work_class;

pub use poison::{CAPACITY, PoisonList};
pub use work_class::WorkClass;
