//! The QMP client against a real QEMU (7.2 in CI): a q35 machine under TCG with no guest at all, stopped with `-S`, its balloon device with and without an id, or none. Without `qemu-system-x86_64` the tests say why and skip; under `MEMTIDE_REQUIRE_LINUX=1` they fail instead.

use memtide_model::Bytes;
use memtide_qemu::qmp::{Qmp, QmpError, RunState};
use memtide_testkit::skip_or_fail;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const QEMU: &str = "qemu-system-x86_64";

const TIMEOUT: Duration = Duration::from_secs(10);

/// `qemu-system-x86_64` on the PATH.
fn qemu_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(QEMU))
        .find(|p| p.is_file())
}

/// A QEMU child with its QMP socket in a temporary directory; killed and reaped on drop, so a
/// failing test leaves no VM behind.
struct QemuChild {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl QemuChild {
    /// Starts QEMU with 256 MiB, no guest, stopped, with `devices` (`-device` values); `None`
    /// (skipped) without QEMU.
    fn start(test: &str, devices: &[&str]) -> Option<QemuChild> {
        let Some(qemu) = qemu_binary() else {
            skip_or_fail(test, &format!("{QEMU} is not on the PATH"));
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qmp.sock");
        let mut command = Command::new(qemu);
        command.args([
            "-machine",
            "q35,accel=tcg",
            "-m",
            "256",
            "-nodefaults",
            "-display",
            "none",
            "-S",
            "-qmp",
        ]);
        command.arg(format!("unix:{},server=on,wait=off", socket.display()));
        for device in devices {
            command.args(["-device", device]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{test}: cannot start {QEMU}: {e}"));
        let mut vm = QemuChild {
            child,
            socket,
            _dir: dir,
        };
        vm.wait_for_socket(test);
        Some(vm)
    }

    /// Waits until QEMU has made its socket, failing with its stderr if it exits first.
    fn wait_for_socket(&mut self, test: &str) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.socket.exists() {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    std::io::Read::read_to_string(&mut e, &mut err).unwrap();
                }
                panic!("{test}: {QEMU} exited ({status}) before making its socket: {err}");
            }
            assert!(
                Instant::now() < deadline,
                "{test}: no QMP socket after {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Connects, trying again while the socket refuses: QEMU makes the file when it binds,
    /// a moment before it listens.
    fn connect(&self) -> Qmp {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match Qmp::connect(&self.socket, TIMEOUT) {
                Err(QmpError::Connect { source, .. })
                    if source.kind() == std::io::ErrorKind::ConnectionRefused
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => return other.unwrap(),
            }
        }
    }

    /// Waits for QEMU to exit on its own; true when it did within the time limit.
    fn exits_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for QemuChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[test]
fn qemu_with_a_balloon_and_no_guest_answers_and_quits() {
    let test = "qemu_with_a_balloon_and_no_guest_answers_and_quits";
    let Some(mut vm) = QemuChild::start(test, &["virtio-balloon-pci,id=balloon0"]) else {
        return;
    };
    let mut qmp = vm.connect();
    let version = qmp.version().clone();
    eprintln!("{test}: QEMU {version} ({})", version.package);
    assert!(version.at_least(7, 2), "QEMU {version}");
    assert_eq!(qmp.pid(), Some(vm.child.id() as i32));

    let status = qmp.query_status().unwrap();
    assert_eq!(status.status, RunState::Prelaunch);
    assert!(!status.running);
    let memory = qmp.query_memory_size_summary().unwrap();
    assert_eq!(memory.base, Bytes::from_mib(256));
    assert_eq!(memory.plugged, Some(Bytes::ZERO));

    // No driver in the guest: the target is accepted and nothing moves.
    assert_eq!(qmp.query_balloon().unwrap(), Bytes::from_mib(256));
    qmp.balloon(Bytes::from_mib(128)).unwrap();
    assert_eq!(qmp.query_balloon().unwrap(), Bytes::from_mib(256));
    let err = qmp.balloon(Bytes::ZERO).unwrap_err();
    assert_eq!(err.class(), Some("GenericError"), "{err}");

    let balloon = qmp.find_balloon().unwrap();
    assert_eq!(balloon, "/machine/peripheral/balloon0");
    qmp.set_stats_polling(&balloon, 1).unwrap();
    let interval = qmp
        .execute(
            "qom-get",
            Some(json!({"path": balloon, "property": "guest-stats-polling-interval"})),
        )
        .unwrap();
    assert_eq!(interval, json!(1));
    let stats = qmp.guest_stats(&balloon).unwrap();
    assert_eq!(stats, Default::default(), "no guest, no statistics");
    assert!(!stats.ever_updated());

    let err = qmp.guest_stats("/machine/peripheral/nope").unwrap_err();
    assert_eq!(err.class(), Some("DeviceNotFound"), "{err}");
    let err = qmp.execute("no-such-command", None).unwrap_err();
    assert_eq!(err.class(), Some("CommandNotFound"), "{err}");
    assert!(err.to_string().contains(&vm.socket().display().to_string()));

    // Events (RESUME, STOP) come before the answers that caused them, and are skipped.
    qmp.execute("cont", None).unwrap();
    assert!(qmp.query_status().unwrap().running);
    qmp.execute("stop", None).unwrap();
    assert!(!qmp.query_status().unwrap().running);

    qmp.quit().unwrap();
    assert!(vm.exits_within(TIMEOUT), "QEMU still runs after quit");
    assert!(qmp.query_status().unwrap_err().is_closed());
}

#[test]
fn a_balloon_without_an_id_is_found_among_the_anonymous_devices() {
    let test = "a_balloon_without_an_id_is_found_among_the_anonymous_devices";
    let Some(vm) = QemuChild::start(test, &["virtio-balloon-pci"]) else {
        return;
    };
    let mut qmp = vm.connect();
    let balloon = qmp.find_balloon().unwrap();
    assert_eq!(balloon, "/machine/peripheral-anon/device[0]");
    qmp.set_stats_polling(&balloon, 2).unwrap();
    assert_eq!(qmp.guest_stats(&balloon).unwrap().last_update, 0);
}

#[test]
fn a_vm_without_a_balloon_is_no_balloon() {
    let test = "a_vm_without_a_balloon_is_no_balloon";
    let Some(vm) = QemuChild::start(test, &[]) else {
        return;
    };
    let mut qmp = vm.connect();
    for err in [
        qmp.query_balloon().unwrap_err(),
        qmp.balloon(Bytes::from_mib(64)).unwrap_err(),
        qmp.find_balloon().unwrap_err(),
    ] {
        assert!(matches!(err, QmpError::NoBalloon { .. }), "{err}");
    }
}

#[test]
fn a_second_client_of_a_busy_monitor_times_out_waiting_for_the_greeting() {
    let test = "a_second_client_of_a_busy_monitor_times_out_waiting_for_the_greeting";
    let Some(vm) = QemuChild::start(test, &[]) else {
        return;
    };
    let _first = vm.connect();
    let limit = Duration::from_millis(300);
    let err = Qmp::connect(vm.socket(), limit).err().unwrap();
    assert!(
        matches!(err, QmpError::TimedOut { ref waiting_for, .. } if waiting_for == "greeting"),
        "{err}"
    );
}
