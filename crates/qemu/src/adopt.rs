//! Finding a running VM's memory cgroup from its QMP socket: the socket's peer is the QEMU process (`SO_PEERCRED`), `/proc/<pid>/cgroup` names its cgroup, and that cgroup must hold QEMU alone, since memtide moves the whole cgroup.

use crate::qmp::{Qmp, QmpError};
use memtide_linux::fs::hierarchy::{own_cgroup, MemoryHierarchy};
use std::path::Path;
use std::time::Duration;

/// Why a running VM cannot be adopted.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error(transparent)]
    Qmp(#[from] QmpError),
    #[error("QMP socket {socket}: its QEMU process (pid {pid}) {why}")]
    Process {
        socket: String,
        pid: i32,
        why: String,
    },
}

/// How long finding a VM's cgroup waits for its QMP answers.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The memory cgroup (a path inside `hierarchy`) of the QEMU behind `socket`.
pub fn cgroup_of_socket(
    socket: &Path,
    hierarchy: &MemoryHierarchy,
    proc_root: &Path,
) -> Result<String, AdoptError> {
    let qmp = Qmp::connect(socket, TIMEOUT)?;
    cgroup_of(&qmp, socket, hierarchy, proc_root)
}

/// The memory cgroup of the QEMU process at the other end of `qmp`.
pub fn cgroup_of(
    qmp: &Qmp,
    socket: &Path,
    hierarchy: &MemoryHierarchy,
    proc_root: &Path,
) -> Result<String, AdoptError> {
    let refuse = |pid: i32, why: String| AdoptError::Process {
        socket: socket.display().to_string(),
        pid,
        why,
    };
    let pid = qmp
        .pid()
        .ok_or_else(|| refuse(0, "is not visible through SO_PEERCRED".into()))?;
    let path = proc_root.join(format!("proc/{pid}/cgroup"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| refuse(pid, format!("cannot be read at {}: {e}", path.display())))?;
    let cgroup =
        own_cgroup(&path, &text, hierarchy.version).map_err(|e| refuse(pid, e.to_string()))?;
    let procs_file = hierarchy.dir_of(&cgroup).join("cgroup.procs");
    let procs = std::fs::read_to_string(&procs_file).map_err(|e| {
        refuse(
            pid,
            format!(
                "has a cgroup whose {} cannot be read: {e}",
                procs_file.display()
            ),
        )
    })?;
    let others = procs
        .lines()
        .filter(|l| l.trim().parse::<i32>().is_ok_and(|p| p != pid))
        .count();
    if others > 0 {
        return Err(refuse(
            pid,
            format!(
                "shares its memory cgroup {cgroup:?} with {others} other process(es); \
                 put each VM in a cgroup of its own"
            ),
        ));
    }
    Ok(cgroup)
}
