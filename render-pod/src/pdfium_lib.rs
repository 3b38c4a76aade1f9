//! Locating and binding `libpdfium.so`.

use std::path::{Path, PathBuf};

use pdfium_render::prelude::{Pdfium, PdfiumError};
use renderpool_api::versions;

/// Environment variable that names the `libpdfium.so` to load.
pub const PDFIUM_LIB_PATH_ENV: &str = "PDFIUM_LIB_PATH";

/// Failure to find or load PDFium.
#[derive(Debug, thiserror::Error)]
pub enum PdfiumLoadError {
    /// The library file is missing; the message says how to fetch it.
    #[error(
        "libpdfium.so not found at {0} (set {PDFIUM_LIB_PATH_ENV} or run scripts/fetch-pdfium.sh)"
    )]
    Missing(PathBuf),
    /// The file exists but could not be loaded as PDFium.
    #[error("cannot load PDFium from {path}: {source}")]
    Bind { path: PathBuf, source: PdfiumError },
}

/// The library path: `$PDFIUM_LIB_PATH`, else the fetch script's cache under `$HOME/.cache`.
pub fn library_path() -> PathBuf {
    if let Some(path) = std::env::var_os(PDFIUM_LIB_PATH_ENV) {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("RENDERPOOL_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/".into());
        home.join(".cache/renderpool")
    });
    // Where scripts/fetch-pdfium.sh puts the wheel's library, by the version both read from
    // versions.env.
    cache.join(format!("pdfium/pypdfium2-{}/libpdfium.so", versions::PYPDFIUM2))
}

/// Loads PDFium from [`library_path`] (later calls in the process reuse the loaded library).
/// PDFium is not thread-safe: use it from one thread at a time.
pub fn bind() -> Result<Pdfium, PdfiumLoadError> {
    bind_at(&library_path())
}

/// Loads PDFium from `path` (a worker is told its supervisor's [`library_path`], as it runs
/// with an empty environment).
pub fn bind_at(path: &Path) -> Result<Pdfium, PdfiumLoadError> {
    let path = path.to_path_buf();
    if !path.is_file() {
        return Err(PdfiumLoadError::Missing(path));
    }
    match Pdfium::bind_to_library(&path) {
        Ok(bindings) => Ok(Pdfium::new(bindings)),
        // pdfium-render keeps the bindings process-wide and refuses a second bind; its
        // `Default` then hands out a Pdfium over the bindings already loaded.
        Err(PdfiumError::PdfiumLibraryBindingsAlreadyInitialized) => Ok(Pdfium::default()),
        Err(source) => Err(PdfiumLoadError::Bind { path, source }),
    }
}
