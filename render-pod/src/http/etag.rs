//! Strong entity tags for deterministic answers (renders, filmstrips, text, info of a PDF):
//! a hash of the document, the operation and its parameters, and the engine that computes them,
//! so a client holding the answer can be told `304 Not Modified` before any work is queued.

use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::ops::{DocHash, OpLimits};

/// What produces the answers: the render-pod binary (the workers run it), the PDFium library
/// and the per-job limits. Any change to one changes every tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineVersion([u8; 32]);

impl EngineVersion {
    /// Hashes the files at `paths` (read in pieces: a debug binary is 100+ MB and must not sit
    /// in the supervisor's memory) and the limits.
    pub fn of_files(paths: &[&Path], limits: OpLimits) -> std::io::Result<Self> {
        let mut hasher = blake3::Hasher::new();
        let mut buffer = vec![0u8; 1 << 16];
        for path in paths {
            let mut file = std::fs::File::open(path)?;
            loop {
                let n = file.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
            }
            hasher.update(b"\0file\0");
        }
        hasher.update(&limits.max_pixels.to_le_bytes());
        hasher.update(&limits.max_pages.to_le_bytes());
        Ok(Self(*hasher.finalize().as_bytes()))
    }

    /// A version from raw bytes (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The strong tag (quoted, as the header carries it) of the answer of route form `form`
    /// (e.g. `render`, `thumbnails+ndjson`) with `params` on the document `doc`.
    pub fn tag<P: Serialize>(&self, doc: &DocHash, form: &str, params: &P) -> Option<String> {
        let params = postcard::to_allocvec(params).ok()?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.0);
        hasher.update(&doc.0);
        hasher.update(form.as_bytes());
        hasher.update(b"\0");
        hasher.update(&params);
        let hash = hasher.finalize();
        let hex: String = hash.as_bytes()[..16].iter().map(|b| format!("{b:02x}")).collect();
        Some(format!("\"{hex}\""))
    }
}

/// Whether an `If-None-Match` value names `etag` (`*`, or one of a comma-separated list;
/// compared weakly, as RFC 9110 says for this header, so `W/"x"` matches `"x"`).
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
    let wanted = opaque(etag);
    if_none_match.split(',').map(str::trim).any(|tag| tag == "*" || opaque(tag) == wanted)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ops::{ImageFormat, Op, RenderSize};

    fn render(page: u32) -> Op {
        Op::Render { page, size: RenderSize::Dpi(150.0), format: ImageFormat::Png, quality: None }
    }

    #[test]
    fn tags_change_with_the_document_the_parameters_the_form_and_the_engine() {
        let engine = EngineVersion::from_bytes([1; 32]);
        let (a, b) = (DocHash::of(b"a"), DocHash::of(b"b"));
        let tag = engine.tag(&a, "render", &render(1)).unwrap();
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34, "{tag}");
        assert_eq!(engine.tag(&a, "render", &render(1)).unwrap(), tag, "deterministic");
        for other in [
            engine.tag(&b, "render", &render(1)),
            engine.tag(&a, "render", &render(2)),
            engine.tag(&a, "render+other", &render(1)),
            EngineVersion::from_bytes([2; 32]).tag(&a, "render", &render(1)),
        ] {
            assert_ne!(other.unwrap(), tag);
        }
    }

    #[test]
    fn the_engine_version_follows_the_files_and_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib");
        std::fs::write(&file, b"one").unwrap();
        let limits = OpLimits::default();
        let first = EngineVersion::of_files(&[&file], limits).unwrap();
        assert_eq!(EngineVersion::of_files(&[&file], limits).unwrap(), first);
        let fewer_pages = OpLimits { max_pages: 10, ..limits };
        assert_ne!(EngineVersion::of_files(&[&file], fewer_pages).unwrap(), first);
        std::fs::write(&file, b"two").unwrap();
        assert_ne!(EngineVersion::of_files(&[&file], limits).unwrap(), first);
        assert!(EngineVersion::of_files(&[&dir.path().join("missing")], limits).is_err());
    }

    #[test]
    fn if_none_match_lists_and_wildcards() {
        let tag = "\"abc\"";
        assert!(none_match("\"abc\"", tag));
        assert!(none_match("\"x\", \"abc\"", tag));
        assert!(none_match("W/\"abc\"", tag));
        assert!(none_match("*", tag));
        assert!(!none_match("\"abcd\"", tag));
        assert!(!none_match("", tag));
    }
}
