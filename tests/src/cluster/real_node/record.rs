//! The undo record: every change the real node makes to the machine, written down *before* it
//! is made, so the reaper can undo a half-finished start as well as a full one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::ClusterError;

/// A process the node started, with the binary it runs (checked before it is signalled, so a
/// reused pid is left alone).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Daemon {
    pub pid: u32,
    pub exe: PathBuf,
}

/// A sysctl (path under `/proc/sys`) and the value it had before the node changed it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Sysctl {
    pub name: String,
    pub original: String,
}

/// What to undo; see the module doc.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Record {
    /// The node's folder: everything mounted under it is unmounted, then it is removed.
    pub node_dir: PathBuf,
    /// The cluster's state folder, removed by the reaper when the test process died without
    /// its exit hooks (which remove it otherwise, once the control plane has stopped).
    pub cluster_dir: PathBuf,
    /// Daemons in the order they are stopped.
    pub daemons: Vec<Daemon>,
    /// Network links to delete.
    pub links: Vec<String>,
    /// Routes to delete, as `ip route del` arguments ending with the destination.
    pub routes: Vec<Vec<String>>,
    /// nftables tables to delete, as `FAMILY NAME`.
    pub nft_tables: Vec<String>,
    /// Sysctls to put back.
    pub sysctls: Vec<Sysctl>,
    /// Host folders the node's tools create at fixed places, removed whole.
    pub host_paths: Vec<PathBuf>,
}

impl Record {
    /// Reads the record at `path`, if there is one.
    pub fn load(path: &Path) -> Result<Option<Record>, ClusterError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|err| {
                ClusterError::Setup(format!("undo record {}: {err}", path.display()))
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Writes the record to `path` atomically (a reader never sees half of it).
    pub fn save(&self, path: &Path) -> Result<(), ClusterError> {
        let json = serde_json::to_vec_pretty(self)
            .map_err(|err| ClusterError::Setup(format!("undo record: {err}")))?;
        let partial = path.with_extension("partial");
        std::fs::write(&partial, json)?;
        std::fs::rename(&partial, path)?;
        Ok(())
    }
}

/// The record of a node being set up, saved after every note.
pub(super) struct UndoLog {
    record: Record,
    path: PathBuf,
}

impl UndoLog {
    /// Starts the record at `path` for the node in `node_dir`, inside `cluster_dir`.
    pub fn create(
        path: PathBuf,
        node_dir: &Path,
        cluster_dir: &Path,
    ) -> Result<Self, ClusterError> {
        let record = Record {
            node_dir: node_dir.to_path_buf(),
            cluster_dir: cluster_dir.to_path_buf(),
            ..Record::default()
        };
        record.save(&path)?;
        Ok(UndoLog { record, path })
    }

    /// Notes a change about to be made; it is on disk when this returns.
    pub fn note(&mut self, change: impl FnOnce(&mut Record)) -> Result<(), ClusterError> {
        change(&mut self.record);
        self.record.save(&self.path)
    }
}
