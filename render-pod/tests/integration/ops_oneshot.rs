//! The one-shot `info` and `render` subcommands, parsed as the binary parses them and run on
//! real PDFium and corpus files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::pdfium_turn;
use clap::Parser;
use render_pod::oneshot::{self, OneShot, OneShotError};

/// A corpus file's path as a command-line argument.
fn corpus(name: &str) -> String {
    renderpool_testkit::corpus::path(name).to_str().unwrap().to_string()
}

/// The subcommands as the binary exposes them (flattened into its top-level CLI).
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: OneShot,
}

fn parse(args: &[&str]) -> OneShot {
    Cli::try_parse_from(std::iter::once("render-pod").chain(args.iter().copied())).unwrap().cmd
}

#[test]
fn render_writes_an_image_of_the_requested_size() {
    let _turn = pdfium_turn();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("page3.png");
    let file = corpus("pdf/R-intro.pdf");
    oneshot::run(parse(&[
        "render",
        &file,
        "--page",
        "3",
        "--dpi",
        "150",
        "-o",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let image = image::open(&out).unwrap();
    assert_eq!((image.width(), image.height()), (1275, 1650));

    let out = dir.path().join("thumb.webp");
    oneshot::run(parse(&[
        "render",
        &file,
        "--width",
        "160",
        "--format",
        "webp",
        "--output",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let image = image::open(&out).unwrap();
    assert_eq!((image.width(), image.height()), (160, 207));
}

#[test]
fn info_prints_the_document_as_json() {
    let _turn = pdfium_turn();
    let mut printed = Vec::new();
    let cmd = parse(&["info", &corpus("bad/r6-user-password.pdf"), "--password", "asdfzxcv"]);
    oneshot::run_to(cmd, &mut printed).unwrap();
    let info: serde_json::Value = serde_json::from_slice(&printed).unwrap();
    assert_eq!(info["encrypted"], true);
    assert!(info["page_count"].as_u64().unwrap() >= 1);
    assert!(info["pages"][0]["width_pt"].as_f64().unwrap() > 0.0);
    // And through `run`, to stdout.
    oneshot::run(parse(&["info", &corpus("pdf/trivial.pdf")])).unwrap();
}

#[test]
fn failures_are_typed() {
    let _turn = pdfium_turn();
    let err = oneshot::run(parse(&["info", &corpus("bad/r2-user-password.pdf")])).unwrap_err();
    assert!(
        matches!(&err, OneShotError::Op { source, .. } if source.code() == "password_required"),
        "{err:?}"
    );
    let err = oneshot::run(parse(&["info", &corpus("pdf/missing.pdf")])).unwrap_err();
    assert!(matches!(err, OneShotError::Read { .. }), "{err:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.png");
    let file = corpus("pdf/trivial.pdf");
    let err = oneshot::run(parse(&["render", &file, "--page", "2", "-o", out.to_str().unwrap()]))
        .unwrap_err();
    assert!(err.to_string().contains("page 2 is out of range"), "{err}");
    assert!(!out.exists());
    // --dpi and --width together, or an unknown format, are refused by the parser.
    let both = ["render-pod", "render", &file, "--dpi", "72", "--width", "9", "-o", "x.png"];
    assert!(Cli::try_parse_from(both).is_err());
    let gif = ["render-pod", "render", &file, "--format", "gif", "-o", "x.gif"];
    assert!(Cli::try_parse_from(gif).is_err());
}
