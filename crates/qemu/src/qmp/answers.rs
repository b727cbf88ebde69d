//! QEMU's answers as types: the greeting's version, asynchronous events, the run state and the memory summary, each read from its JSON into a `Protocol` error naming the field when it is not what QEMU documents.

use super::error::{excerpt_of, QmpError};
use memtide_model::Bytes;
use serde_json::Value;
use std::fmt;
use std::path::Path;

/// QEMU's version, from the greeting (`{"QMP": {"version": {"qemu": {...}, "package": ...}}}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QemuVersion {
    pub major: u32,
    pub minor: u32,
    pub micro: u32,
    /// The distribution's build, e.g. `Debian 1:7.2+dfsg-7+deb12u18`; empty when not given.
    pub package: String,
}

impl QemuVersion {
    /// True when this QEMU is `major.minor` or later.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for QemuVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)
    }
}

/// The greeting: QEMU's version and the capabilities it offers (`oob`), none of which we enable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Greeting {
    pub version: QemuVersion,
    pub capabilities: Vec<String>,
}

/// Reads the greeting line, or says why it is not one.
pub(crate) fn parse_greeting(path: &Path, line: &str) -> Result<Greeting, QmpError> {
    let bad = || QmpError::Greeting {
        path: path.to_path_buf(),
        got: excerpt_of(line),
    };
    let value: Value = serde_json::from_str(line).map_err(|_| bad())?;
    let qmp = value.get("QMP").ok_or_else(bad)?;
    let qemu = &qmp["version"]["qemu"];
    let part = |name: &str| {
        qemu.get(name)
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(bad)
    };
    let version = QemuVersion {
        major: part("major")?,
        minor: part("minor")?,
        micro: part("micro")?,
        package: qmp["version"]["package"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    };
    let capabilities = qmp["capabilities"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|c| c.as_str().map(str::to_string).ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    Ok(Greeting {
        version,
        capabilities,
    })
}

/// QEMU's run state (QAPI `RunState`), as `query-status` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunState {
    /// Started with `-S`, waiting for `cont`.
    Prelaunch,
    Running,
    /// Stopped by `stop` or the monitor.
    Paused,
    /// The guest shut down and QEMU, run with `-no-shutdown`, waits.
    Shutdown,
    Suspended,
    InternalError,
    IoError,
    GuestPanicked,
    Watchdog,
    Debug,
    InMigrate,
    PostMigrate,
    FinishMigrate,
    SaveVm,
    RestoreVm,
    Colo,
    /// A state this client does not know, as QEMU named it.
    Other(String),
}

impl RunState {
    fn from_qapi(name: &str) -> RunState {
        match name {
            "prelaunch" => RunState::Prelaunch,
            "running" => RunState::Running,
            "paused" => RunState::Paused,
            "shutdown" => RunState::Shutdown,
            "suspended" => RunState::Suspended,
            "internal-error" => RunState::InternalError,
            "io-error" => RunState::IoError,
            "guest-panicked" => RunState::GuestPanicked,
            "watchdog" => RunState::Watchdog,
            "debug" => RunState::Debug,
            "inmigrate" => RunState::InMigrate,
            "postmigrate" => RunState::PostMigrate,
            "finish-migrate" => RunState::FinishMigrate,
            "save-vm" => RunState::SaveVm,
            "restore-vm" => RunState::RestoreVm,
            "colo" => RunState::Colo,
            other => RunState::Other(other.to_string()),
        }
    }
}

/// `query-status`: the run state, and whether the CPUs run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmStatus {
    pub status: RunState,
    pub running: bool,
}

pub(crate) fn parse_status(path: &Path, value: &Value) -> Result<VmStatus, QmpError> {
    let bad =
        |why: &str| QmpError::protocol(path, &value.to_string(), format!("query-status: {why}"));
    let status = value["status"]
        .as_str()
        .ok_or_else(|| bad("no string `status`"))?;
    let running = value["running"]
        .as_bool()
        .ok_or_else(|| bad("no boolean `running`"))?;
    Ok(VmStatus {
        status: RunState::from_qapi(status),
        running,
    })
}

/// `query-memory-size-summary`: the VM's RAM at start and the memory hot-plugged since.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemorySizeSummary {
    /// `base-memory`: the RAM given with `-m`.
    pub base: Bytes,
    /// `plugged-memory`: DIMMs and the like plugged since; `None` when the machine cannot.
    pub plugged: Option<Bytes>,
}

pub(crate) fn parse_memory_summary(
    path: &Path,
    value: &Value,
) -> Result<MemorySizeSummary, QmpError> {
    let base = value["base-memory"].as_u64().ok_or_else(|| {
        QmpError::protocol(
            path,
            &value.to_string(),
            "query-memory-size-summary: no byte count `base-memory`",
        )
    })?;
    Ok(MemorySizeSummary {
        base: Bytes(base),
        plugged: value["plugged-memory"].as_u64().map(Bytes),
    })
}

/// A byte count at `field` of a command's answer (`query-balloon`'s `actual`).
pub(crate) fn bytes_field(
    path: &Path,
    command: &str,
    value: &Value,
    field: &str,
) -> Result<Bytes, QmpError> {
    value[field].as_u64().map(Bytes).ok_or_else(|| {
        QmpError::protocol(
            path,
            &value.to_string(),
            format!("{command}: no byte count `{field}`"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const QEMU_7_2_GREETING: &str = r#"{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}"#;

    #[test]
    fn the_greeting_of_qemu_7_2_gives_its_version_and_capabilities() {
        let g = parse_greeting(Path::new("/s"), QEMU_7_2_GREETING).unwrap();
        assert_eq!(g.version.to_string(), "7.2.22");
        assert_eq!(g.version.package, "Debian 1:7.2+dfsg-7+deb12u18+b3");
        assert!(g.version.at_least(7, 2) && !g.version.at_least(7, 3));
        assert_eq!(g.capabilities, vec!["oob".to_string()]);
    }

    #[test]
    fn a_greeting_without_version_parts_or_capabilities_is_refused_with_what_came() {
        for line in [
            r#"{"QMP": {"version": {"qemu": {"major": 7, "minor": 2}}, "capabilities": []}}"#,
            r#"{"QMP": {"version": {"qemu": {"major": 7, "minor": 2, "micro": 0}}}}"#,
            r#"{"return": {}}"#,
            "SSH-2.0-OpenSSH_9.2",
        ] {
            let err = parse_greeting(Path::new("/s"), line).unwrap_err();
            assert!(
                matches!(err, QmpError::Greeting { ref got, .. } if got == line),
                "{err}"
            );
        }
    }

    #[test]
    fn status_and_memory_summary_as_qemu_7_2_answers() {
        let s = parse_status(
            Path::new("/s"),
            &json!({"status": "prelaunch", "singlestep": false, "running": false}),
        )
        .unwrap();
        assert_eq!(s.status, RunState::Prelaunch);
        assert!(!s.running);
        let s = parse_status(
            Path::new("/s"),
            &json!({"status": "colo-x", "running": true}),
        )
        .unwrap();
        assert_eq!(s.status, RunState::Other("colo-x".into()));
        let m = parse_memory_summary(
            Path::new("/s"),
            &json!({"base-memory": 268435456, "plugged-memory": 0}),
        )
        .unwrap();
        assert_eq!(m.base, Bytes::from_mib(256));
        assert_eq!(m.plugged, Some(Bytes(0)));
        let m = parse_memory_summary(Path::new("/s"), &json!({"base-memory": 4096})).unwrap();
        assert_eq!(m.plugged, None);
    }

    #[test]
    fn a_missing_field_names_the_command_and_the_field() {
        let err = parse_memory_summary(Path::new("/s"), &json!({"base": 1}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("query-memory-size-summary") && err.contains("base-memory"),
            "{err}"
        );
        let err = bytes_field(
            Path::new("/s"),
            "query-balloon",
            &json!({"actual": -1}),
            "actual",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("actual") && err.contains("-1"), "{err}");
    }
}
