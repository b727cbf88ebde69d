//! The runner's state file: each world's records of what it changed on its tenants (for Linux, the limits found before memtide changed them and what its OOM guard switched off), the estimators' latest estimates and the changes made through the API, written atomically, so a clean exit restores and a restart after a crash re-adopts instead of resetting.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version of the file's format. Format 1 (no estimates, no API changes) is still read.
pub const FORMAT: u32 = 2;

/// The file, holding the world's records of type `R`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile<R> {
    pub format: u32,
    /// The process that wrote it.
    pub pid: u32,
    /// Which world wrote it: for Linux the cgroup hierarchy, `v1` or `v2` (the field keeps its
    /// first name, so files written before the runner still load).
    pub hierarchy: String,
    pub tenants: Vec<R>,
    /// Each managed tenant's latest active estimate (bytes), by name: a restarted daemon
    /// starts its estimators there instead of from nothing.
    #[serde(default)]
    pub estimates: BTreeMap<String, u64>,
    /// Changes made through the API since start; a restart after a crash keeps them.
    #[serde(default)]
    pub changes: ApiChanges,
}

/// What the API changed, on top of the configuration file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiChanges {
    #[serde(default)]
    pub tax_rate: Option<memtide_model::TaxRate>,
    /// By tenant name.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantChange>,
}

/// A tenant's min, max and shares as last set through the API (bytes; absent: as configured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantChange {
    #[serde(default)]
    pub min_bytes: Option<u64>,
    #[serde(default)]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub shares: Option<u64>,
}

impl ApiChanges {
    pub fn is_empty(&self) -> bool {
        self.tax_rate.is_none() && self.tenants.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state file {path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "state file {path}: not a memtide state file ({detail}); move it away to start afresh"
    )]
    Malformed { path: PathBuf, detail: String },
    #[error("state file {path}: format {found}, this memtide reads formats 1 and {FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error("state file {path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state file {path} belongs to a running memtide daemon (pid {pid}); stop it first")]
    InUse { path: PathBuf, pid: u32 },
}

/// Reads the state file; `Ok(None)` when there is none.
pub fn load<R: DeserializeOwned>(path: &Path) -> Result<Option<StateFile<R>>, StateError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let state: StateFile<R> = serde_json::from_str(&text).map_err(|e| StateError::Malformed {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if !(1..=FORMAT).contains(&state.format) {
        return Err(StateError::Format {
            path: path.to_path_buf(),
            found: state.format,
        });
    }
    Ok(Some(state))
}

/// Refuses a state file whose writer is another live memtide process.
pub fn check_not_in_use<R>(
    path: &Path,
    state: &StateFile<R>,
    proc_root: &Path,
) -> Result<(), StateError> {
    if state.pid == std::process::id() {
        return Ok(());
    }
    let comm = proc_root.join(format!("proc/{}/comm", state.pid));
    match std::fs::read_to_string(comm) {
        Ok(name) if name.trim() == "memtide" => Err(StateError::InUse {
            path: path.to_path_buf(),
            pid: state.pid,
        }),
        _ => Ok(()),
    }
}

/// Writes the state file atomically (a temporary file beside it, then a rename), creating its
/// directory if needed.
///
/// The daemon refuses a state directory others can write to; should one slip through anyway,
/// [`memtide_files::write_fresh`] still never makes root write through a link planted at the
/// temporary or the file.
pub fn save<R: Serialize>(path: &Path, state: &StateFile<R>) -> Result<(), StateError> {
    let write_error = |source| StateError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(write_error)?;
    }
    let text = serde_json::to_string_pretty(state).expect("state serialises");
    memtide_files::write_fresh(path, text.as_bytes()).map_err(write_error)
}

/// Removes the state file after a clean exit (a missing file is fine).
pub fn remove(path: &Path) -> Result<(), StateError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StateError::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world's record, as small as can be.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        name: String,
        limit: Option<u64>,
    }

    fn state() -> StateFile<Record> {
        StateFile {
            format: FORMAT,
            pid: 4242,
            hierarchy: "v1".to_string(),
            tenants: vec![Record {
                name: "db".to_string(),
                limit: Some(1 << 30),
            }],
            estimates: BTreeMap::from([("db".to_string(), 300 << 20)]),
            changes: ApiChanges {
                tax_rate: memtide_model::TaxRate::new(0.5).ok(),
                tenants: BTreeMap::from([(
                    "db".to_string(),
                    TenantChange {
                        shares: Some(2000),
                        ..TenantChange::default()
                    },
                )]),
            },
        }
    }

    #[test]
    fn a_link_planted_at_the_temporary_or_the_file_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "root's own\n").unwrap();
        let path = dir.path().join("state.json");
        std::os::unix::fs::symlink(&victim, dir.path().join("state.json.tmp")).unwrap();
        save(&path, &state()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
        assert_eq!(load::<Record>(&path).unwrap(), Some(state()));
        // A link at the file itself is replaced by the file.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        save(&path, &state()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
        assert!(!std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    #[test]
    fn a_saved_state_loads_back_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        save(&path, &state()).unwrap();
        assert_eq!(load(&path).unwrap(), Some(state()));
        remove(&path).unwrap();
        assert_eq!(load::<Record>(&path).unwrap(), None);
    }

    #[test]
    fn a_state_file_of_another_format_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut v: serde_json::Value = serde_json::to_value(state()).unwrap();
        v["format"] = 9.into();
        std::fs::write(&path, v.to_string()).unwrap();
        let msg = load::<Record>(&path).unwrap_err().to_string();
        assert!(msg.contains("format 9"), "{msg}");
    }

    #[test]
    fn a_malformed_state_file_is_refused_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{ not json").unwrap();
        let msg = load::<Record>(&path).unwrap_err().to_string();
        assert!(
            msg.contains("state.json") && msg.contains("not a memtide state file"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn a_state_file_of_a_live_memtide_is_in_use() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/4242")).unwrap();
        std::fs::write(dir.path().join("proc/4242/comm"), "memtide\n").unwrap();
        let path = dir.path().join("state.json");
        let err = check_not_in_use(&path, &state(), dir.path()).unwrap_err();
        assert!(err.to_string().contains("pid 4242"));
        std::fs::write(dir.path().join("proc/4242/comm"), "bash\n").unwrap();
        assert!(check_not_in_use(&path, &state(), dir.path()).is_ok());
    }
}
