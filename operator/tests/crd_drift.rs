//! The checked-in CRD, and the chart's copy of it, must be exactly what `renderpool-operator crd`
//! prints. The chart holds a copy, not a link: helm warns about symbolic links in a chart and
//! leaves them out of a packaged one. `RENDERPOOL_BLESS=1` rewrites both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

const BLESS: &str = "RENDERPOOL_BLESS=1 cargo test -p renderpool-operator --test crd_drift";

#[test]
fn checked_in_crds_match_the_generated_one() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_renderpool-operator")).arg("crd").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let generated = String::from_utf8(output.stdout).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bless = std::env::var_os("RENDERPOOL_BLESS").is_some_and(|v| v == "1");
    for copy in ["crds/renderpool.yaml", "charts/renderpool-operator/files/renderpool.crd.yaml"] {
        let path = root.join(copy);
        if bless {
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "{copy} must be a plain file (helm warns on links)");
        let checked_in = std::fs::read_to_string(&path).unwrap();
        assert!(generated == checked_in, "{copy} is out of date: run `{BLESS}`");
    }
}
