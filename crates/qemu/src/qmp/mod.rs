//! Our own small blocking QMP client: the QEMU Machine Protocol is line-delimited JSON on a Unix socket, and memtide sends a handful of commands (the balloon, its statistics through QOM, the run state, quit); the `qapi` crates generate QEMU's whole schema and pull in far more than we use.
//!
//! [`Qmp::connect`] reads QEMU's greeting and leaves capabilities negotiation with
//! `qmp_capabilities` (no out-of-band execution asked). [`Qmp::execute`] sends a command with
//! an `id` of its own and reads lines until the answer carrying that id; asynchronous events
//! read meanwhile are skipped (memtide acts on none: a VM that exits is noticed by its cgroup
//! emptying, and its socket closing). Every wait is bounded by the connection's timeout, a
//! whole command's by one deadline, so a stream of events cannot hold it; a line
//! longer than [`MAX_LINE`] is a `Protocol` error. An answer that comes after its command timed
//! out is recognized by its id and skipped.
//!
//! What QEMU 7.2 answers, checked against a real one (`tests/qmp.rs`): `query-balloon` is
//! `{"actual": bytes}`, `DeviceNotActive` without a balloon device ([`QmpError::NoBalloon`]);
//! `balloon` is accepted with no driver in the guest, and `actual` stays put; a balloon device
//! given `id=balloon0` is `child<virtio-balloon-pci>` `balloon0` in `qom-list` of
//! `/machine/peripheral`, one without an id `device[N]` in `/machine/peripheral-anon`;
//! `guest-stats` is described in [`guest_stats`].

mod answers;
mod conn;
pub mod error;
pub mod guest_stats;

pub use answers::{MemorySizeSummary, QemuVersion, RunState, VmStatus};
pub use conn::MAX_LINE;
pub use error::QmpError;
pub use guest_stats::GuestStats;

use conn::{Conn, Deadline};
use memtide_model::Bytes;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The QOM containers where QEMU puts `-device`s: those given an `id`, and the others.
pub const PERIPHERAL_CONTAINERS: [&str; 2] = ["/machine/peripheral", "/machine/peripheral-anon"];

/// The QOM property that sets how often QEMU asks the guest for its statistics, in seconds.
const POLLING_PROPERTY: &str = "guest-stats-polling-interval";

/// A connection to one QEMU's monitor, past capabilities negotiation.
pub struct Qmp {
    conn: Conn,
    timeout: Duration,
    version: QemuVersion,
    capabilities: Vec<String>,
    next_id: u64,
}

/// A line from QEMU, read as one of the two things it can be.
enum Incoming {
    Event,
    /// An answer: its `id` if it has one, and its `return` or error class and description.
    Answer {
        id: Option<Value>,
        result: Result<Value, (String, String)>,
    },
}

impl Qmp {
    /// Connects to QEMU's QMP socket at `path`, reads its greeting and negotiates
    /// capabilities. `timeout` bounds every wait from here on, this one included.
    pub fn connect(path: impl AsRef<Path>, timeout: Duration) -> Result<Qmp, QmpError> {
        let mut conn = Conn::connect(path.as_ref())?;
        // A second client of a monitor already in use is accepted by the kernel but never
        // greeted: it times out here.
        let line = conn.read_line(Deadline::after(timeout), &|| "greeting".to_string())?;
        let greeting = answers::parse_greeting(conn.path(), &line)?;
        let mut qmp = Qmp {
            conn,
            timeout,
            version: greeting.version,
            capabilities: greeting.capabilities,
            next_id: 1,
        };
        let answer = qmp.execute("qmp_capabilities", None)?;
        if answer != json!({}) {
            return Err(QmpError::protocol(
                qmp.path(),
                &answer.to_string(),
                "qmp_capabilities returned something other than {}",
            ));
        }
        Ok(qmp)
    }

    /// The monitor socket's path.
    pub fn path(&self) -> &Path {
        self.conn.path()
    }

    /// QEMU's version, from its greeting.
    pub fn version(&self) -> &QemuVersion {
        &self.version
    }

    /// The capabilities QEMU offered in its greeting (none of them is enabled).
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The pid of the process at the other end of the socket (`SO_PEERCRED`): QEMU's.
    pub fn pid(&self) -> Option<i32> {
        memtide_agents::socket::peer_pid(self.conn.stream())
    }

    /// Runs `command` with `arguments` and returns its `return` value; QEMU's refusal is
    /// [`QmpError::Command`] with its class and description. Events read before the answer
    /// are skipped.
    pub fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, QmpError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({"execute": command, "id": id});
        if let Some(arguments) = arguments {
            message["arguments"] = arguments;
        }
        let deadline = Deadline::after(self.timeout);
        self.conn.write_line(&message.to_string(), deadline, &|| {
            format!("room to send {command}")
        })?;
        loop {
            let line = self
                .conn
                .read_line(deadline, &|| format!("answer to {command}"))?;
            match self.classify(&line)? {
                Incoming::Event => {}
                Incoming::Answer { id: Some(got), .. } if self.is_stale(&got, id) => {}
                Incoming::Answer { id: Some(got), .. } if got != id => {
                    return Err(QmpError::protocol(
                        self.path(),
                        &line,
                        format!("an answer to id {got} while {command} (id {id}) waits"),
                    ));
                }
                // QEMU answers in order, and leaves out the id only for a command it could
                // not read: the answer is this command's either way.
                Incoming::Answer { result, .. } => {
                    return result.map_err(|(class, desc)| QmpError::Command {
                        path: self.path().to_path_buf(),
                        command: command.to_string(),
                        class,
                        desc,
                    });
                }
            }
        }
    }

    /// `query-balloon`: the memory the guest has now, the balloon's inflation taken off.
    pub fn query_balloon(&mut self) -> Result<Bytes, QmpError> {
        let answer = self.execute("query-balloon", None).map_err(no_balloon)?;
        answers::bytes_field(self.path(), "query-balloon", &answer, "actual")
    }

    /// `balloon`: asks the guest's driver to bring the memory it has to `target`. QEMU accepts
    /// it whether or not a driver listens; `query_balloon` shows how far the guest went.
    pub fn balloon(&mut self, target: Bytes) -> Result<(), QmpError> {
        self.execute("balloon", Some(json!({"value": target.0})))
            .map_err(no_balloon)?;
        Ok(())
    }

    /// The QOM path of the VM's virtio balloon device (`/machine/peripheral/balloon0` for one
    /// given `id=balloon0`, `/machine/peripheral-anon/device[N]` otherwise), found with
    /// `qom-list`; `NoBalloon` when there is none.
    pub fn find_balloon(&mut self) -> Result<String, QmpError> {
        for container in PERIPHERAL_CONTAINERS {
            let listed = match self.execute("qom-list", Some(json!({"path": container}))) {
                Ok(listed) => listed,
                Err(e) if e.class() == Some("DeviceNotFound") => continue,
                Err(e) => return Err(e),
            };
            let entries = listed.as_array().ok_or_else(|| {
                QmpError::protocol(
                    self.path(),
                    &listed.to_string(),
                    format!("qom-list of {container} is not an array"),
                )
            })?;
            let balloon = entries.iter().find_map(|entry| {
                let kind = entry["type"].as_str()?;
                let name = entry["name"].as_str()?;
                is_balloon_child(kind).then(|| format!("{container}/{name}"))
            });
            if let Some(path) = balloon {
                return Ok(path);
            }
        }
        Err(QmpError::NoBalloon {
            path: self.path().to_path_buf(),
        })
    }

    /// Asks QEMU to poll the guest's statistics every `interval_s` seconds (0 stops polling),
    /// on the balloon device at QOM path `device`.
    pub fn set_stats_polling(&mut self, device: &str, interval_s: u32) -> Result<(), QmpError> {
        self.execute(
            "qom-set",
            Some(json!({"path": device, "property": POLLING_PROPERTY, "value": interval_s})),
        )?;
        Ok(())
    }

    /// The guest's last statistics, from the balloon device at QOM path `device`.
    pub fn guest_stats(&mut self, device: &str) -> Result<GuestStats, QmpError> {
        let answer = self.execute(
            "qom-get",
            Some(json!({"path": device, "property": "guest-stats"})),
        )?;
        guest_stats::parse_guest_stats(self.path(), device, &answer)
    }

    /// `query-status`: the run state.
    pub fn query_status(&mut self) -> Result<VmStatus, QmpError> {
        let answer = self.execute("query-status", None)?;
        answers::parse_status(self.path(), &answer)
    }

    /// `query-memory-size-summary`: the VM's RAM (`base`) and what was hot-plugged.
    pub fn query_memory_size_summary(&mut self) -> Result<MemorySizeSummary, QmpError> {
        let answer = self.execute("query-memory-size-summary", None)?;
        answers::parse_memory_summary(self.path(), &answer)
    }

    /// `quit`: QEMU exits at once. The socket closing before the answer arrives is success.
    pub fn quit(&mut self) -> Result<(), QmpError> {
        match self.execute("quit", None) {
            Ok(_) => Ok(()),
            Err(e) if e.is_closed() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reads one line as an event or an answer.
    fn classify(&self, line: &str) -> Result<Incoming, QmpError> {
        let value: Value = serde_json::from_str(line)
            .map_err(|e| QmpError::protocol(self.path(), line, format!("not JSON ({e})")))?;
        let Value::Object(ref map) = value else {
            return Err(QmpError::protocol(self.path(), line, "not a JSON object"));
        };
        if map.get("event").is_some_and(Value::is_string) {
            return Ok(Incoming::Event);
        }
        let id = map.get("id").cloned();
        if let Some(ret) = map.get("return") {
            return Ok(Incoming::Answer {
                id,
                result: Ok(ret.clone()),
            });
        }
        if let Some(error) = map.get("error") {
            let part = |name: &str| {
                error[name].as_str().map(str::to_string).ok_or_else(|| {
                    QmpError::protocol(self.path(), line, format!("an error without `{name}`"))
                })
            };
            return Ok(Incoming::Answer {
                id,
                result: Err((part("class")?, part("desc")?)),
            });
        }
        Err(QmpError::protocol(
            self.path(),
            line,
            "neither an event nor an answer",
        ))
    }

    /// True for the id of a command sent before `current`, whose wait ended (timed out)
    /// before its answer came.
    fn is_stale(&self, got: &Value, current: u64) -> bool {
        got.as_u64().is_some_and(|got| got < current)
    }
}

/// QEMU's `DeviceNotActive` to the balloon commands: the VM has no balloon device.
fn no_balloon(e: QmpError) -> QmpError {
    match e {
        QmpError::Command { path, class, .. } if class == "DeviceNotActive" => {
            QmpError::NoBalloon { path }
        }
        other => other,
    }
}

/// A `qom-list` type naming a virtio balloon device: `child<virtio-balloon-pci>` (also its
/// `-transitional` and `-non-transitional` kinds, `-ccw` on s390x, `-device` on virtio-mmio).
fn is_balloon_child(kind: &str) -> bool {
    kind.strip_prefix("child<")
        .and_then(|k| k.strip_suffix('>'))
        .is_some_and(|k| k.starts_with("virtio-balloon"))
}

#[cfg(test)]
pub(crate) mod fake;

#[cfg(test)]
mod tests {
    use super::fake::{event, handshake, FakeQmp, Step};
    use super::*;
    use std::time::Instant;

    const SECOND: Duration = Duration::from_secs(1);

    fn script(steps: impl IntoIterator<Item = Step>) -> Vec<Step> {
        handshake().into_iter().chain(steps).collect()
    }

    fn status_answer() -> Value {
        json!({"return": {"status": "prelaunch", "singlestep": false, "running": false}})
    }

    #[test]
    fn connect_reads_the_greeting_and_negotiates_capabilities() {
        let fake = FakeQmp::start(script([Step::Hold]));
        let qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        assert_eq!(qmp.version().to_string(), "7.2.22");
        assert!(qmp.version().at_least(7, 2));
        assert_eq!(qmp.capabilities(), ["oob".to_string()]);
        assert_eq!(qmp.path(), fake.path);
        // The fake serves from this process.
        assert_eq!(qmp.pid(), Some(std::process::id() as i32));
        drop(qmp);
        let sent = fake.finish();
        assert_eq!(sent.len(), 1);
        assert!(sent[0]["id"].is_u64(), "{}", sent[0]);
        assert!(sent[0].get("arguments").is_none(), "{}", sent[0]);
    }

    #[test]
    fn events_before_the_answer_are_skipped_and_the_answer_still_matched() {
        let fake = FakeQmp::start(script([
            Step::Expect("query-balloon"),
            Step::Send(event("BALLOON_CHANGE", Some(json!({"actual": 134217728})))),
            Step::Send(event("STOP", None)),
            Step::Reply(json!({"return": {"actual": 268435456}})),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        assert_eq!(qmp.query_balloon().unwrap(), Bytes::from_mib(256));
    }

    #[test]
    fn arguments_and_ids_go_with_each_command() {
        let fake = FakeQmp::start(script([
            Step::Expect("balloon"),
            Step::Reply(json!({"return": {}})),
            Step::Expect("qom-set"),
            Step::Reply(json!({"return": {}})),
            Step::Expect("query-memory-size-summary"),
            Step::Reply(json!({"return": {"base-memory": 268435456, "plugged-memory": 0}})),
            Step::Expect("query-status"),
            Step::Reply(status_answer()),
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        qmp.balloon(Bytes::from_mib(128)).unwrap();
        qmp.set_stats_polling("/machine/peripheral/balloon0", 2)
            .unwrap();
        let summary = qmp.query_memory_size_summary().unwrap();
        assert_eq!(summary.base, Bytes::from_mib(256));
        let status = qmp.query_status().unwrap();
        assert_eq!(status.status, RunState::Prelaunch);
        assert!(!status.running);
        drop(qmp);
        let sent = fake.finish();
        assert_eq!(sent[1]["arguments"], json!({"value": 134217728}));
        assert_eq!(
            sent[2]["arguments"],
            json!({"path": "/machine/peripheral/balloon0",
                "property": "guest-stats-polling-interval", "value": 2})
        );
        let ids: Vec<u64> = sent.iter().map(|c| c["id"].as_u64().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    }

    #[test]
    fn a_refused_command_keeps_qemus_class_and_description() {
        let fake = FakeQmp::start(script([
            Step::Expect("qom-get"),
            Step::Reply(json!({"error": {"class": "DeviceNotFound",
                "desc": "Device '/machine/peripheral/nope' not found"}})),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        let err = qmp.guest_stats("/machine/peripheral/nope").unwrap_err();
        match &err {
            QmpError::Command {
                command,
                class,
                desc,
                ..
            } => {
                assert_eq!(command, "qom-get");
                assert_eq!(class, "DeviceNotFound");
                assert!(desc.contains("/machine/peripheral/nope"));
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains(&fake.path.display().to_string()));
    }

    #[test]
    fn device_not_active_is_no_balloon() {
        let not_active = || {
            Step::Reply(json!({"error": {"class": "DeviceNotActive",
                "desc": "No balloon device has been activated"}}))
        };
        let fake = FakeQmp::start(script([
            Step::Expect("query-balloon"),
            not_active(),
            Step::Expect("balloon"),
            not_active(),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        let err = qmp.query_balloon().unwrap_err();
        assert!(matches!(err, QmpError::NoBalloon { .. }), "{err}");
        let err = qmp.balloon(Bytes::from_mib(64)).unwrap_err();
        assert!(matches!(err, QmpError::NoBalloon { .. }), "{err}");
    }

    #[test]
    fn guest_statistics_never_sent_are_none() {
        let fake = FakeQmp::start(script([
            Step::Expect("qom-get"),
            Step::Reply(json!({"return": {"stats": {"stat-swap-in": u64::MAX,
                "stat-swap-out": -1, "stat-free-memory": 104857600, "stat-minor-faults": 12},
                "last-update": 1795778237}})),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        let stats = qmp.guest_stats("/machine/peripheral/balloon0").unwrap();
        assert_eq!(stats.swap_in, None);
        assert_eq!(stats.swap_out, None);
        assert_eq!(stats.free_memory, Some(Bytes::from_mib(100)));
        assert_eq!(stats.minor_faults, Some(12));
        assert_eq!(stats.major_faults, None);
        assert_eq!(stats.last_update, 1795778237);
    }

    #[test]
    fn the_balloon_is_found_in_either_peripheral_container() {
        let fake = FakeQmp::start(script([
            Step::Expect("qom-list"),
            Step::Reply(json!({"return": [{"name": "type", "type": "string"},
                {"name": "disk0", "type": "child<virtio-blk-pci>"}]})),
            Step::Expect("qom-list"),
            Step::Reply(json!({"return": [{"name": "type", "type": "string"},
                {"name": "device[0]", "type": "child<virtio-balloon-pci>"}]})),
            Step::Expect("qom-list"),
            Step::Reply(json!({"return": [{"name": "type", "type": "string"}]})),
            Step::Expect("qom-list"),
            Step::Reply(json!({"error": {"class": "DeviceNotFound",
                "desc": "Device '/machine/peripheral-anon' not found"}})),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        assert_eq!(
            qmp.find_balloon().unwrap(),
            "/machine/peripheral-anon/device[0]"
        );
        let err = qmp.find_balloon().unwrap_err();
        assert!(matches!(err, QmpError::NoBalloon { .. }), "{err}");
    }

    #[test]
    fn balloon_children_are_recognized_by_their_qom_type() {
        for kind in [
            "child<virtio-balloon-pci>",
            "child<virtio-balloon-pci-non-transitional>",
            "child<virtio-balloon-ccw>",
            "child<virtio-balloon-device>",
        ] {
            assert!(is_balloon_child(kind), "{kind}");
        }
        for kind in [
            "string",
            "child<virtio-blk-pci>",
            "link<virtio-balloon-pci>",
        ] {
            assert!(!is_balloon_child(kind), "{kind}");
        }
    }

    #[test]
    fn a_silent_server_times_out_within_the_timeout() {
        let limit = Duration::from_millis(200);
        let fake = FakeQmp::start(vec![Step::Hold]);
        let started = Instant::now();
        let err = Qmp::connect(&fake.path, limit).err().unwrap();
        let took = started.elapsed();
        assert!(
            matches!(err, QmpError::TimedOut { ref waiting_for, after, .. }
                if waiting_for == "greeting" && after == limit),
            "{err}"
        );
        assert!(took >= limit && took < limit * 5, "{took:?}");

        let fake = FakeQmp::start(script([Step::Hold]));
        let mut qmp = Qmp::connect(&fake.path, limit).unwrap();
        let started = Instant::now();
        let err = qmp.query_status().unwrap_err();
        let took = started.elapsed();
        assert!(err.to_string().contains("answer to query-status"), "{err}");
        assert!(err.to_string().contains("200ms"), "{err}");
        assert!(took >= limit && took < limit * 5, "{took:?}");
    }

    #[test]
    fn events_do_not_extend_a_commands_time_limit() {
        let limit = Duration::from_millis(300);
        let ticks = (0..20).flat_map(|_| {
            [
                Step::Send(event("RTC_CHANGE", Some(json!({"offset": 0})))),
                Step::Pause(Duration::from_millis(50)),
            ]
        });
        let fake = FakeQmp::start(script(
            std::iter::once(Step::Expect("query-status"))
                .chain(ticks)
                .chain([Step::Hold]),
        ));
        let mut qmp = Qmp::connect(&fake.path, limit).unwrap();
        let started = Instant::now();
        let err = qmp.query_status().unwrap_err();
        assert!(matches!(err, QmpError::TimedOut { .. }), "{err}");
        assert!(started.elapsed() < limit * 3, "{:?}", started.elapsed());
    }

    #[test]
    fn a_late_answer_to_a_command_that_timed_out_is_skipped() {
        let fake = FakeQmp::start(script([
            Step::Expect("query-balloon"),
            Step::Pause(Duration::from_millis(400)),
            Step::Reply(json!({"return": {"actual": 1}})),
            Step::Expect("query-status"),
            Step::Reply(status_answer()),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, Duration::from_millis(150)).unwrap();
        let err = qmp.query_balloon().unwrap_err();
        assert!(matches!(err, QmpError::TimedOut { .. }), "{err}");
        qmp.set_timeout(SECOND);
        assert_eq!(qmp.query_status().unwrap().status, RunState::Prelaunch);
    }

    #[test]
    fn an_answer_to_another_id_is_a_protocol_error() {
        let fake = FakeQmp::start(script([
            Step::Expect("query-status"),
            Step::Send(r#"{"return": {}, "id": 99}"#.to_string()),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        let err = qmp.query_status().unwrap_err();
        assert!(matches!(err, QmpError::Protocol { .. }), "{err}");
        assert!(err.to_string().contains("id 99"), "{err}");
    }

    #[test]
    fn the_end_of_the_socket_is_closed() {
        let fake = FakeQmp::start(script([Step::Expect("query-status")]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        let err = qmp.query_status().unwrap_err();
        assert!(err.is_closed(), "{err}");

        // `quit` is done when QEMU goes, answered or not.
        let fake = FakeQmp::start(script([
            Step::Expect("quit"),
            Step::Send(event(
                "SHUTDOWN",
                Some(json!({"guest": false, "reason": "host-qmp-quit"})),
            )),
        ]));
        let mut qmp = Qmp::connect(&fake.path, SECOND).unwrap();
        qmp.quit().unwrap();
    }

    #[test]
    fn a_line_longer_than_the_bound_is_a_protocol_error_and_the_next_command_works() {
        let mut long = vec![b'x'; MAX_LINE + 10];
        long.extend_from_slice(b"\r\n");
        let fake = FakeQmp::start(script([
            Step::Expect("query-status"),
            Step::Raw(long),
            Step::Reply(status_answer()),
            Step::Expect("query-status"),
            Step::Reply(status_answer()),
            Step::Hold,
        ]));
        let mut qmp = Qmp::connect(&fake.path, Duration::from_secs(5)).unwrap();
        let err = qmp.query_status().unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, QmpError::Protocol { .. }), "{msg}");
        assert!(msg.contains(&fake.path.display().to_string()), "{msg}");
        assert!(msg.contains("longer than 1048576 bytes"), "{msg}");
        assert!(msg.contains("xxxx") && msg.len() < 1000, "{msg}");
        assert!(qmp.query_status().unwrap().status == RunState::Prelaunch);
    }

    #[test]
    fn a_bad_greeting_is_a_greeting_error_naming_what_came() {
        let fake = FakeQmp::start(vec![
            Step::Send(r#"{"hello": "not qemu"}"#.to_string()),
            Step::Hold,
        ]);
        let err = Qmp::connect(&fake.path, SECOND).err().unwrap();
        assert!(matches!(err, QmpError::Greeting { .. }), "{err}");
        assert!(err.to_string().contains("not qemu"), "{err}");
    }

    #[test]
    fn a_missing_socket_is_a_connect_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.sock");
        let err = Qmp::connect(&path, SECOND).err().unwrap();
        assert!(matches!(err, QmpError::Connect { .. }), "{err}");
        assert!(err.to_string().contains("absent.sock"), "{err}");
    }
}
