use clap::Parser;

/// Kubernetes operator for renderpool.
#[derive(Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    Cli::parse();
}
