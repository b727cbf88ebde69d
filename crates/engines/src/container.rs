//! A container as the engine's inspect call describes it (`GET /containers/NAME/json`), and the name rule both engines share.

use serde::Deserialize;

/// What [`valid_name`] accepts, for its error.
pub const NAME_RULE: &str = "a container name: a letter or digit, then letters, digits, \
     '_', '.' or '-', at most 255 characters";

/// Whether `name` may name a container: Docker's rule (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`, which
/// Podman shares), so it goes into a request path as it is, and at most 255 bytes.
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.len() <= 255
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// One container, as inspect says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// Its full id (64 hex digits): a container made again under the same name has a new one.
    pub id: String,
    /// Its name, without the API's leading `/`.
    pub name: String,
    /// It runs (or is paused): its processes, and so its cgroup, exist.
    pub running: bool,
    /// Its first process (`State.Pid`), while it runs.
    pub pid: Option<u32>,
    /// The memory limit the engine keeps for it (`HostConfig.Memory`): `None` for none.
    pub memory: Option<u64>,
    /// Its memory and swap limit (`HostConfig.MemorySwap`): `None` for none, or unlimited
    /// swap (`-1`).
    pub memory_swap: Option<u64>,
}

/// The parts of inspect's answer memtide reads; the rest is ignored.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Inspect {
    id: String,
    name: String,
    state: State,
    #[serde(default)]
    host_config: HostConfig,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct State {
    #[serde(default)]
    running: bool,
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    pid: i64,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HostConfig {
    #[serde(default)]
    memory: i64,
    #[serde(default)]
    memory_swap: i64,
}

impl Container {
    /// Parses inspect's answer; `Err` says what is wrong with it.
    pub(crate) fn parse(json: &str) -> Result<Container, String> {
        let i: Inspect =
            serde_json::from_str(json).map_err(|e| format!("is not inspect's: {e}"))?;
        if i.id.len() < 12 || !i.id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("has an Id {:?} that is not hex digits", i.id));
        }
        let running = i.state.running || i.state.paused;
        let pid = u32::try_from(i.state.pid)
            .ok()
            .filter(|&p| p > 0 && running);
        let positive = |v: i64| u64::try_from(v).ok().filter(|&v| v > 0);
        Ok(Container {
            id: i.id,
            name: i.name.strip_prefix('/').unwrap_or(&i.name).to_string(),
            running: running && pid.is_some(),
            pid,
            memory: positive(i.host_config.memory),
            memory_swap: positive(i.host_config.memory_swap),
        })
    }

    /// Its id as `docker ps` shows it (12 digits).
    pub fn short_id(&self) -> &str {
        &self.id[..12.min(self.id.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker 20.10's inspect of a running container started with `-m 200m`, cut to what is
    /// read and a few fields beside.
    const RUNNING: &str = r#"{"Id":"b01e3cd0f06cf4cd6ccae4e0a05cea85a82b87494c81da38d42404e1da3657a6",
        "Created":"2026-11-29T20:59:57Z","Path":"/usr/local/bin/memtide-toucher",
        "State":{"Status":"running","Running":true,"Paused":false,"Restarting":false,
                 "OOMKilled":false,"Dead":false,"Pid":4242,"ExitCode":0},
        "Name":"/t2","HostConfig":{"Memory":209715200,"MemorySwap":419430400,
        "MemoryReservation":0,"CgroupParent":"/memtide-docker"}}"#;

    #[test]
    fn a_running_containers_pid_and_limits_are_read() {
        let c = Container::parse(RUNNING).unwrap();
        assert_eq!(c.name, "t2");
        assert_eq!(c.short_id(), "b01e3cd0f06c");
        assert!(c.running);
        assert_eq!(c.pid, Some(4242));
        assert_eq!(c.memory, Some(209_715_200));
        assert_eq!(c.memory_swap, Some(419_430_400));
    }

    #[test]
    fn a_stopped_container_has_no_pid_and_unset_limits_are_none() {
        let stopped = r#"{"Id":"f49f09eaf16d0000000000000000000000000000000000000000000000000000",
            "Name":"/t3","State":{"Running":false,"Pid":0},
            "HostConfig":{"Memory":0,"MemorySwap":-1}}"#;
        let c = Container::parse(stopped).unwrap();
        assert!(!c.running);
        assert_eq!(c.pid, None);
        assert_eq!((c.memory, c.memory_swap), (None, None));
    }

    #[test]
    fn a_paused_container_still_runs_but_a_running_one_without_a_pid_does_not() {
        let paused =
            r#"{"Id":"aaaaaaaaaaaa","Name":"/p","State":{"Running":false,"Paused":true,"Pid":7}}"#;
        assert!(Container::parse(paused).unwrap().running);
        let no_pid = r#"{"Id":"aaaaaaaaaaaa","Name":"/p","State":{"Running":true,"Pid":0}}"#;
        assert!(!Container::parse(no_pid).unwrap().running);
    }

    #[test]
    fn an_answer_of_another_shape_is_refused_with_why() {
        assert!(Container::parse("[]")
            .unwrap_err()
            .contains("is not inspect's"));
        let bad_id = r#"{"Id":"../../etc","Name":"/x","State":{}}"#;
        assert!(Container::parse(bad_id).unwrap_err().contains("not hex"));
    }

    #[test]
    fn names_follow_the_engines_rule() {
        for ok in ["redis-a", "a", "db_1.prod", "7up"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "/a", "a/b", "a b", "a?x", "é", &"a".repeat(256)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
