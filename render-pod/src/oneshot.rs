//! One-shot terminal subcommands: `info` and `render` on a local file, without the service.

use std::io::Write;
use std::path::PathBuf;

use crate::encode::{ImageFormat, Quality};
use crate::ops::size::DEFAULT_DPI;
use crate::ops::{Document, Executor, Op, OpError, OpLimits, OpOutput, RenderSize};
use crate::pdfium_lib::{self, PdfiumLoadError};

/// The one-shot subcommands, flattened into the binary's CLI.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum OneShot {
    /// Print a PDF's page count, page sizes, rotation, encryption and metadata as JSON.
    Info(InfoArgs),
    /// Render one page of a PDF to an image file.
    Render(RenderArgs),
}

/// Arguments of `info`.
#[derive(Debug, Clone, clap::Args)]
pub struct InfoArgs {
    /// The PDF to read.
    pub file: PathBuf,
    /// Password of an encrypted PDF.
    #[arg(long)]
    pub password: Option<String>,
}

/// Arguments of `render`.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The PDF to read.
    pub file: PathBuf,
    /// 1-based page number.
    #[arg(long, default_value_t = 1)]
    pub page: u32,
    /// Resolution in dots per inch (72 = one pixel per point).
    #[arg(long, conflicts_with = "width", default_value_t = DEFAULT_DPI)]
    pub dpi: f32,
    /// Target width in pixels instead of a dpi; the height keeps the aspect ratio.
    #[arg(long)]
    pub width: Option<u32>,
    /// png, jpeg or webp.
    #[arg(long, default_value = "png")]
    pub format: ImageFormat,
    /// 1 to 100, for jpeg (default 80) and webp (lossy at it; lossless without it).
    #[arg(long, value_parser = parse_quality)]
    pub quality: Option<Quality>,
    /// Where to write the image.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Password of an encrypted PDF.
    #[arg(long)]
    pub password: Option<String>,
}

/// `--quality`: 1 to 100.
fn parse_quality(value: &str) -> Result<Quality, String> {
    let number: u32 = value.trim().parse().map_err(|e| format!("{value:?}: {e}"))?;
    Quality::new(number).ok_or_else(|| format!("{number} is not 1 to 100"))
}

/// Why a one-shot command failed.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    /// PDFium could not be found or bound.
    #[error(transparent)]
    Pdfium(#[from] PdfiumLoadError),
    /// The input file could not be read.
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// The operation failed on the document.
    #[error("{path}: {source}")]
    Op { path: PathBuf, source: OpError },
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    /// The operation returned something other than what the command prints.
    #[error("unexpected result from the document operation")]
    UnexpectedOutput,
}

/// Runs a one-shot command, printing to stdout.
pub fn run(cmd: OneShot) -> Result<(), OneShotError> {
    run_to(cmd, &mut std::io::stdout().lock())
}

/// Runs a one-shot command, printing to `out` (the info JSON, or the rendered image's size).
pub fn run_to(cmd: OneShot, out: &mut impl Write) -> Result<(), OneShotError> {
    let (file, password, op) = match &cmd {
        OneShot::Info(args) => (&args.file, &args.password, Op::Info),
        OneShot::Render(args) => {
            // A default dpi never conflicts: a width given replaces it.
            let size = match args.width {
                Some(width) => RenderSize::Width(width),
                None => RenderSize::Dpi(args.dpi),
            };
            let (format, quality) = (args.format, args.quality);
            (&args.file, &args.password, Op::Render { page: args.page, size, format, quality })
        }
    };
    let bytes =
        std::fs::read(file).map_err(|source| OneShotError::Read { path: file.clone(), source })?;
    let mut executor = Executor::new(pdfium_lib::bind()?, OpLimits::default());
    let output = executor
        .execute(&Document::new(&bytes, password.as_deref()), &op)
        .map_err(|source| OneShotError::Op { path: file.clone(), source })?;
    let stdout_error = |source| OneShotError::Write { path: "<stdout>".into(), source };
    match (cmd, output) {
        (OneShot::Info(_), OpOutput::Info(info)) => {
            serde_json::to_writer_pretty(&mut *out, &info)
                .map_err(|e| stdout_error(std::io::Error::other(e)))?;
            writeln!(out).map_err(stdout_error)
        }
        (OneShot::Render(args), OpOutput::Image(image)) => {
            std::fs::write(&args.output, &image.bytes)
                .map_err(|source| OneShotError::Write { path: args.output.clone(), source })?;
            writeln!(
                out,
                "{}: {}x{} {}, {} bytes",
                args.output.display(),
                image.width,
                image.height,
                image.format,
                image.bytes.len()
            )
            .map_err(stdout_error)
        }
        _ => Err(OneShotError::UnexpectedOutput),
    }
}
