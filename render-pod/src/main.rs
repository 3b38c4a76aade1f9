//! `render-pod`: the HTTP service, its worker processes and one-shot terminal commands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use render_pod::config::{ServeArgs, WorkerArgs};
use render_pod::oneshot::{self, OneShot};
use render_pod::{engine, serve};
use renderpool_runtime::logging;

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

fn main() -> ExitCode {
    render_pod::malloc::tune();
    match Cli::parse().command {
        Command::Serve(args) => {
            logging::init(args.log_format, "info");
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
        Command::Worker(args) => match engine::worker::run(args.options()) {
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
