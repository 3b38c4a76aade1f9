//! The checked-in CRD must be exactly what `renderpool-operator crd` prints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

#[test]
fn checked_in_crd_matches_the_generated_one() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_renderpool-operator")).arg("crd").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let generated = String::from_utf8(output.stdout).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds/renderpool.yaml");
    let checked_in = std::fs::read_to_string(&path).unwrap();
    assert!(
        generated == checked_in,
        "{} is out of date: run `cargo run -p renderpool-operator -- crd > crds/renderpool.yaml`",
        path.display()
    );
}
