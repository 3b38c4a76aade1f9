//! The previous chart release, which the upgrade test installs and upgrades from: its chart,
//! real-node example and images as `scripts/previous-release.sh` built them from the pinned
//! commit (`$RENDERPOOL_PREVIOUS_RELEASE`), and what this checkout's operator would change in the
//! children a pool of that release runs (the check the README tells users to make first).

use std::path::PathBuf;

use crate::cluster::{Cluster, ClusterError, output_with_input, run, run_with_input};
use crate::workspace_bin;

/// Env var naming the folder `scripts/previous-release.sh` prints.
pub const PREVIOUS_RELEASE_ENV: &str = "RENDERPOOL_PREVIOUS_RELEASE";

/// The previous release's build.
#[derive(Debug, Clone)]
pub struct PreviousRelease {
    dir: PathBuf,
}

impl PreviousRelease {
    /// The build `$RENDERPOOL_PREVIOUS_RELEASE` names; an unset or incomplete one is a set-up
    /// error that says how to make it.
    pub fn from_env() -> Result<PreviousRelease, ClusterError> {
        let dir = std::env::var_os(PREVIOUS_RELEASE_ENV).map(PathBuf::from).ok_or_else(|| {
            ClusterError::Setup(format!(
                "{PREVIOUS_RELEASE_ENV} is not set: scripts/setup.sh --cluster sets it (it runs \
                 scripts/previous-release.sh)"
            ))
        })?;
        if !dir.join(".complete").is_file() {
            return Err(ClusterError::Setup(format!(
                "{} is no finished scripts/previous-release.sh build",
                dir.display()
            )));
        }
        Ok(PreviousRelease { dir })
    }

    /// The chart as released.
    pub fn chart(&self) -> PathBuf {
        self.dir.join("chart")
    }

    /// The release's real-node example (a RenderPool manifest for that release's CRD).
    pub fn example(&self) -> PathBuf {
        self.dir.join("renderpool-real-node.yaml")
    }

    /// The chart's version, as its Chart.yaml says.
    pub fn version(&self) -> String {
        let chart = std::fs::read_to_string(self.chart().join("Chart.yaml")).unwrap_or_default();
        let line = chart.lines().find(|l| l.starts_with("version:")).unwrap_or_default();
        line.trim_start_matches("version:").trim().to_string()
    }

    /// The archives of the project's own images (`render-pod`, `renderpool-operator`, tagged
    /// with the release's version) as `<image>-previous.tar`, for the real node to import beside
    /// this checkout's. Gotenberg and pause carry no project version: this checkout's are the
    /// ones to run.
    pub fn node_images(&self) -> PathBuf {
        self.dir.join("node-images")
    }
}

/// The Deployments (by name) among the children this checkout's operator would apply for pool
/// `name` whose pod template would differ from the one that runs: `renderpool-operator
/// children` of the live pool, applied by the API server as a dry run with the operator's field
/// `manager`, each template compared with the live Deployment's. Also the `kubectl diff` of the
/// same, as a person would read it.
pub fn changed_templates(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    manager: &str,
) -> Result<(Vec<String>, String), ClusterError> {
    let json = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| ClusterError::Setup(format!("kubectl's JSON: {e}")))
    };
    let live =
        run(cluster.kubectl().args(["get", "renderpool", name, "-n", namespace, "-o", "yaml"]))?;
    let mut children = std::process::Command::new(workspace_bin("renderpool-operator"));
    let children = run_with_input(children.args(["children", "-"]), live.as_bytes())?;
    let field_manager = format!("--field-manager={manager}");
    let dry_run = run_with_input(
        cluster
            .kubectl()
            .args(["apply", "--server-side", "--dry-run=server", "--force-conflicts"])
            .arg(&field_manager)
            .args(["-n", namespace, "-f", "-", "-o", "json"]),
        children.as_bytes(),
    )?;
    let dry_run = json(&dry_run)?;
    let items = match dry_run["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![dry_run],
    };
    let mut changed = Vec::new();
    for item in items.iter().filter(|i| i["kind"] == "Deployment") {
        let deployment = item["metadata"]["name"].as_str().unwrap_or_default();
        let running = json(&run(cluster.kubectl().args([
            "get",
            "deployment",
            deployment,
            "-n",
            namespace,
            "-o",
            "json",
        ]))?)?;
        if running["spec"]["template"] != item["spec"]["template"] {
            changed.push(deployment.to_string());
        }
    }
    let diff = output_with_input(
        cluster
            .kubectl()
            .args(["diff", "--server-side", "--force-conflicts"])
            .arg(&field_manager)
            .args(["-n", namespace, "-f", "-"]),
        children.as_bytes(),
    )?;
    // kubectl diff exits 1 when it found differences: its output is the answer either way.
    match diff.status.code() {
        Some(0 | 1) => Ok((changed, String::from_utf8_lossy(&diff.stdout).into_owned())),
        _ => Err(ClusterError::Setup(format!(
            "kubectl diff: {}",
            String::from_utf8_lossy(&diff.stderr)
        ))),
    }
}
