//! `render-pod`: the HTTP service, its worker processes and one-shot terminal commands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use render_pod::config::{LogFormat, ServeArgs, WorkerArgs};
use render_pod::oneshot::{self, OneShot};
use render_pod::{engine, serve};

/// PDFium page images, text and watermarks, one worker process per slot.
#[derive(Debug, Parser)]
#[command(name = "render-pod", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service (slots sized from this machine's or pod's cgroup limits).
    // Boxed: the service's flags dwarf the other commands'.
    Serve(Box<ServeArgs>),
    /// One slot's worker process, started by `serve` (jobs over stdin/stdout).
    #[command(hide = true)]
    Worker(WorkerArgs),
    #[command(flatten)]
    OneShot(OneShot),
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour codes only for a person at a terminal, never in collected logs.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

fn main() -> ExitCode {
    render_pod::malloc::tune();
    match Cli::parse().command {
        Command::Serve(args) => {
            init_logging(args.log_format);
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(runtime) => runtime,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the async runtime");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(serve::run(*args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "render-pod failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Worker(args) => match engine::worker::run(args.limits()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("render-pod worker: {e}");
                ExitCode::FAILURE
            }
        },
        Command::OneShot(cmd) => match oneshot::run(cmd) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("render-pod: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
