//! Brings the local control plane up by hand: `cargo run -p renderpool-tests --bin local-cluster`.
//! Prints how to point kubectl at it and stops everything on Ctrl-C.

use renderpool_tests::cluster::Cluster;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    let cpu = args.next().unwrap_or_else(|| "8".into());
    let memory = args.next().unwrap_or_else(|| "32Gi".into());
    let cluster = match Cluster::start() {
        Ok(cluster) => cluster,
        Err(err) => {
            eprintln!("local-cluster: {err}");
            std::process::exit(1);
        }
    };
    cluster.ensure_nodes("kwok-node", nodes, &cpu, &memory).await;
    println!(
        "control plane up at {} with {nodes} kwok nodes ({cpu} CPU, {memory} each)",
        cluster.server()
    );
    println!("  export KUBECONFIG={}", cluster.kubeconfig().display());
    println!(
        "  export PATH={}:$PATH   # kubectl and helm v1.36.3 builds",
        cluster.bin("kubectl").parent().map(|p| p.display().to_string()).unwrap_or_default()
    );
    println!("logs and state: {}  (Ctrl-C stops everything)", cluster.state_dir().display());
    if let Err(err) = tokio::signal::ctrl_c().await {
        eprintln!("local-cluster: waiting for Ctrl-C: {err}");
    }
    // Returning runs the exit hook that stops the processes and removes the state folder.
}
