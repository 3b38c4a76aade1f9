//! Kernel settings under `/proc/sys`, read and written by path (`vm/overcommit_memory`).

use std::path::Path;

use super::record::{Sysctl, UndoLog};
use crate::cluster::ClusterError;

/// What the kubelet checks with `protectKernelDefaults: true` (it refuses to start otherwise,
/// and without that setting it changes them itself and never puts them back).
pub(super) const KUBELET_WANTS: [(&str, &str); 6] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// The current value of `name`, trimmed.
pub(super) fn read(name: &str) -> Result<String, ClusterError> {
    let path = Path::new("/proc/sys").join(name);
    std::fs::read_to_string(&path)
        .map(|value| value.trim().to_string())
        .map_err(|err| ClusterError::Setup(format!("read {}: {err}", path.display())))
}

/// Sets `name` to `value`.
pub(super) fn write(name: &str, value: &str) -> Result<(), ClusterError> {
    let path = Path::new("/proc/sys").join(name);
    std::fs::write(&path, value)
        .map_err(|err| ClusterError::Setup(format!("write {} = {value}: {err}", path.display())))
}

/// Gives the kernel the settings the kubelet wants, noting each original value first.
pub(super) fn set_for_kubelet(undo: &mut UndoLog) -> Result<(), ClusterError> {
    for (name, wanted) in KUBELET_WANTS {
        let original = read(name)?;
        if original != wanted {
            undo.note(|record| record.sysctls.push(Sysctl { name: name.to_string(), original }))?;
            write(name, wanted)?;
        }
    }
    Ok(())
}
