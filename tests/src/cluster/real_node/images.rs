//! OCI image archives into the node's containerd, where the kubelet finds them: no registry,
//! so pods name these images with `imagePullPolicy: Never` (or `IfNotPresent`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::cluster::{ClusterError, run};

/// Imports every `*.tar` in `dir` through `ctr`; returns each archive's file stem with the
/// image names it brought.
pub(super) fn import_dir(
    ctr: &dyn Fn() -> Command,
    dir: &Path,
) -> Result<BTreeMap<String, Vec<String>>, ClusterError> {
    let entries = std::fs::read_dir(dir).map_err(|err| {
        ClusterError::Setup(format!("image archives in {}: {err}", dir.display()))
    })?;
    let mut imported = BTreeMap::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "tar") {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            imported.insert(stem, import(ctr(), &path)?);
        }
    }
    Ok(imported)
}

/// Imports one archive (unpacked for overlayfs); returns the image names it holds.
fn import(mut ctr: Command, archive: &Path) -> Result<Vec<String>, ClusterError> {
    // --local prints each image it unpacks, by name. The node's folder is on tmpfs: once
    // unpacked, the compressed layers would only hold a second copy in memory.
    let import = ["images", "import", "--local", "--discard-unpacked-layers"];
    let stdout = run(ctr.args(import).arg(archive))?;
    let names = imported_names(&stdout);
    if names.is_empty() {
        return Err(ClusterError::Setup(format!(
            "{} holds no named image (an OCI archive names its images with the \
             io.containerd.image.name annotation); ctr said: {stdout}",
            archive.display()
        )));
    }
    Ok(names)
}

/// The names in `ctr images import --local` output: `unpacking NAME (sha256:...)...done`.
fn imported_names(stdout: &str) -> Vec<String> {
    stdout
        .split("unpacking ")
        .skip(1)
        .filter_map(|rest| rest.split_once(" (").map(|(name, _)| name.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_the_unpack_lines() {
        let out = "unpacking renderpool.local/pause:1 (sha256:ab12)...done\n\
                   unpacking renderpool.local/render-pod:dev (sha256:cd34)...done\n";
        assert_eq!(
            imported_names(out),
            ["renderpool.local/pause:1", "renderpool.local/render-pod:dev"]
        );
        assert!(imported_names("").is_empty());
    }
}
