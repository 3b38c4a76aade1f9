//! `scripts/fetch-corpus.sh` on a copy of the cached corpus (under a temporary
//! `RENDERPOOL_CACHE`, so the real cache is never touched): an intact copy is accepted as it is,
//! a copy with one byte changed or one file gone fails, naming that file and what differs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use renderpool_testkit::corpus;

fn fetch(cache: &Path, args: &[&str]) -> Output {
    Command::new(corpus::fetch_script()).args(args).env("RENDERPOOL_CACHE", cache).output().unwrap()
}

/// A temporary cache holding a writable copy of the corpus where the script looks for it.
fn cache_with_copy() -> (tempfile::TempDir, PathBuf) {
    let cache = tempfile::tempdir().unwrap();
    let out = fetch(cache.path(), &["--where"]);
    assert!(out.status.success(), "{out:?}");
    let dest = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    assert!(dest.starts_with(cache.path()), "{}", dest.display());
    let names = corpus::manifest().keys().map(String::as_str).chain(["manifest.json"]);
    for name in names {
        let to = dest.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(corpus::path(name), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    (cache, dest)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_intact_copy_is_accepted_without_fetching() {
    let (cache, dest) = cache_with_copy();
    let out = fetch(cache.path(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), dest.to_str().unwrap());
    assert!(!stderr(&out).contains("fetching"), "{}", stderr(&out));
}

#[test]
fn one_changed_byte_fails_naming_the_file_and_both_sha256s() {
    let (cache, dest) = cache_with_copy();
    let name = "pdf/R-intro.pdf";
    let path = dest.join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let out = fetch(cache.path(), &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    let pinned = corpus::manifest()[name]["sha256"].as_str().unwrap();
    let line = err.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains(pinned), "{err}");
    assert!(line.contains(&format!("{} bytes", bytes.len())), "{err}");
    // Only the changed file is reported.
    assert!(!err.contains("pdf/gnuplot.pdf"), "{err}");
    assert!(err.contains(&format!("delete {}", dest.display())), "{err}");
}

#[test]
fn a_missing_file_fails_naming_it() {
    let (cache, dest) = cache_with_copy();
    std::fs::remove_file(dest.join("office/test.docx")).unwrap();
    let out = fetch(cache.path(), &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("office/test.docx: missing from {}", dest.display())), "{err}");
}
