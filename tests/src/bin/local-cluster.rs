//! Brings the local control plane up by hand (`scripts/cluster.sh` sets up, builds and runs it).
//! Prints how to point kubectl at it and stops everything on Ctrl-C or SIGTERM.
//!
//! `local-cluster [--real-node [--images DIR]] [--env-file FILE] [NODES [CPU [MEMORY]]]`: NODES
//! kwok nodes of CPU and MEMORY each (3, 8, 32Gi); `--real-node` also starts the machine's one
//! real node, with the OCI archives in DIR (default `$RENDERPOOL_IMAGES`) imported; `--env-file`
//! also writes the two `export` lines it prints to FILE (for `. FILE` in another shell), removed
//! when it stops.

use std::path::PathBuf;

use renderpool_tests::cluster::real_node::{self, NODE_LABEL, NODE_LABEL_VALUE, reaper};
use renderpool_tests::cluster::{Cluster, RealNode};

struct Args {
    nodes: u32,
    cpu: String,
    memory: String,
    /// The image folder, when the real node is wanted.
    real_node: Option<PathBuf>,
    /// Where to write the exports too.
    env_file: Option<PathBuf>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut positional = Vec::new();
    let mut real_node = false;
    let mut images = None;
    let mut env_file = None;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--real-node" => real_node = true,
            "--images" => {
                images = Some(PathBuf::from(args.next().ok_or("--images needs a folder")?))
            }
            "--env-file" => {
                env_file = Some(PathBuf::from(args.next().ok_or("--env-file needs a file")?))
            }
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}")),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let nodes = match positional.next() {
        Some(n) => n.parse().map_err(|_| format!("NODES must be a number, not {n}"))?,
        None => 3,
    };
    let real_node = match (real_node, images) {
        (true, Some(dir)) => Some(dir),
        (true, None) => Some(real_node::images_dir().map_err(|err| err.to_string())?),
        (false, Some(_)) => return Err("--images goes with --real-node".into()),
        (false, None) => None,
    };
    Ok(Args {
        nodes,
        cpu: positional.next().unwrap_or_else(|| "8".into()),
        memory: positional.next().unwrap_or_else(|| "32Gi".into()),
        real_node,
        env_file,
    })
}

/// What the control plane runs with: its kwok nodes, if any.
fn nodes_line(nodes: u32, cpu: &str, memory: &str) -> String {
    match nodes {
        0 => "no kwok node".to_string(),
        1 => format!("1 kwok node ({cpu} CPU, {memory})"),
        n => format!("{n} kwok nodes ({cpu} CPU, {memory} each)"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    // The real node's reaper is this same binary (see `real_node::reaper`).
    if args.peek().is_some_and(|arg| arg == reaper::REAP_ARG) {
        std::process::exit(reaper::main());
    }
    let args = match parse(args) {
        Ok(args) => args,
        Err(err) => {
            eprintln!("local-cluster: {err}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("local-cluster: tokio runtime: {err}");
            std::process::exit(1);
        }
    };
    if let Err(err) = runtime.block_on(run(args)) {
        eprintln!("local-cluster: {err}");
        // Returning (not exiting) from here would be the same: the exit hooks undo everything.
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), String> {
    // Signals first, so a SIGTERM during start-up also ends in the cleanup below.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|err| format!("waiting for SIGTERM: {err}"))?;
    let cluster = Cluster::start().map_err(|err| err.to_string())?;
    cluster.ensure_nodes("kwok-node", args.nodes, &args.cpu, &args.memory).await;
    println!(
        "control plane up at {} with {}",
        cluster.server(),
        nodes_line(args.nodes, &args.cpu, &args.memory)
    );
    if let Some(images) = &args.real_node {
        let node = cluster.start_real_node(images).map_err(|err| err.to_string())?;
        print_real_node(node);
    }
    let bin = cluster.bin("kubectl").parent().map(|p| p.display().to_string()).unwrap_or_default();
    let exports =
        format!("export KUBECONFIG={}\nexport PATH={bin}:$PATH\n", cluster.kubeconfig().display());
    if let Some(file) = &args.env_file {
        std::fs::write(file, &exports)
            .map_err(|err| format!("writing {}: {err}", file.display()))?;
    }
    for line in exports.lines() {
        println!("  {line}");
    }
    println!("  # kubectl and helm v{} builds on that PATH", renderpool_api::versions::KUBERNETES);
    if let Some(file) = &args.env_file {
        println!("  (both in {}: `. {}` in another shell)", file.display(), file.display());
    }
    println!(
        "logs and state: {}  (Ctrl-C or SIGTERM stops everything)",
        cluster.state_dir().display()
    );
    let stopped = tokio::select! {
        signal = tokio::signal::ctrl_c() => signal.map_err(|err| format!("waiting for Ctrl-C: {err}")),
        _ = terminate.recv() => Ok(()),
    };
    if let Some(file) = &args.env_file {
        // It names a cluster that is about to be gone.
        let _ = std::fs::remove_file(file);
    }
    // Returning runs the exit hooks that stop the processes, undo the real node and remove the
    // state folder.
    stopped
}

fn print_real_node(node: &RealNode) {
    println!(
        "real node {} Ready in {:.1}s: pods run for real there (containerd, runc, CNI, \
         kube-proxy, CoreDNS)",
        node.name(),
        node.started_in().as_secs_f64()
    );
    println!("  schedule onto it with  nodeSelector: {{{NODE_LABEL}: {NODE_LABEL_VALUE}}}");
    println!("  and imagePullPolicy: Never, with one of its imported images:");
    for (archive, names) in node.images() {
        println!("    {} (from {archive}.tar)", names.join(", "));
    }
    let ctr = node.ctr();
    let ctr_args: Vec<String> =
        ctr.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect();
    println!(
        "  import more: {} {} images import --local ARCHIVE.tar",
        ctr.get_program().to_string_lossy(),
        ctr_args.join(" ")
    );
    println!("  its logs and state: {}", node.dir().display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_kwok_node_claims_no_size() {
        assert_eq!(nodes_line(0, "8", "32Gi"), "no kwok node");
        assert_eq!(nodes_line(1, "2", "4Gi"), "1 kwok node (2 CPU, 4Gi)");
        assert_eq!(nodes_line(3, "8", "32Gi"), "3 kwok nodes (8 CPU, 32Gi each)");
    }

    #[test]
    fn flags_and_positionals() {
        let args = |list: &[&str]| parse(list.iter().map(|a| a.to_string()));
        let parsed = args(&["--env-file", "/tmp/e", "0"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((parsed.nodes, parsed.env_file), (0, Some(PathBuf::from("/tmp/e"))));
        assert!(args(&["--env-file"]).is_err());
        assert!(args(&["--images", "/x"]).is_err(), "--images without --real-node");
        assert!(args(&["three"]).is_err());
    }
}
