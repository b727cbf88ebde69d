//! A scripted QMP server for the client's tests: a Unix socket in a temporary directory, one connection served on a thread by a list of steps (greet, expect a command, reply with its id, send events or raw bytes, pause, hold until the client leaves).

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// QEMU 7.2's greeting, as Debian 12's build sends it.
pub(crate) const GREETING: &str = r#"{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}"#;

/// One thing the server does, in order.
pub(crate) enum Step {
    /// Sends this line (the newline added).
    Send(String),
    /// Sends these bytes as they are.
    Raw(Vec<u8>),
    /// Reads one command, which must be this one, and remembers its id.
    Expect(&'static str),
    /// Sends this answer with the id of the command last expected.
    Reply(Value),
    Pause(Duration),
    /// Reads until the client closes the connection.
    Hold,
}

/// The greeting and the answer to `qmp_capabilities`: what every session starts with.
pub(crate) fn handshake() -> Vec<Step> {
    vec![
        Step::Send(GREETING.to_string()),
        Step::Expect("qmp_capabilities"),
        Step::Reply(serde_json::json!({"return": {}})),
    ]
}

/// An event line as QEMU writes it.
pub(crate) fn event(name: &str, data: Option<Value>) -> String {
    let mut e = serde_json::json!({
        "timestamp": {"seconds": 1795778237, "microseconds": 301321},
        "event": name,
    });
    if let Some(data) = data {
        e["data"] = data;
    }
    e.to_string()
}

/// A fake QEMU monitor; the socket and its directory live as long as it does.
pub(crate) struct FakeQmp {
    pub path: PathBuf,
    thread: Option<JoinHandle<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

impl FakeQmp {
    /// Listens, and serves the first connection by `steps` on a thread; the connection is
    /// closed when the steps are done.
    pub(crate) fn start(steps: Vec<Step>) -> FakeQmp {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = thread::spawn(move || serve(listener, steps));
        FakeQmp {
            path,
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Waits for the script to end; the commands it received, in order.
    pub(crate) fn finish(mut self) -> Vec<Value> {
        self.thread.take().unwrap().join().unwrap()
    }
}

fn serve(listener: UnixListener, steps: Vec<Step>) -> Vec<Value> {
    let (stream, _) = listener.accept().unwrap();
    let mut out = stream.try_clone().unwrap();
    let mut input = BufReader::new(stream);
    let mut received = Vec::new();
    let mut last_id = Value::Null;
    for step in steps {
        match step {
            Step::Send(line) => {
                // The client may have gone (a test that stops early); that ends the script.
                if out.write_all(format!("{line}\r\n").as_bytes()).is_err() {
                    break;
                }
            }
            Step::Raw(bytes) => {
                if out.write_all(&bytes).is_err() {
                    break;
                }
            }
            Step::Expect(command) => {
                let mut line = String::new();
                if input.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let got: Value = serde_json::from_str(&line).unwrap();
                assert_eq!(got["execute"], command, "the client sent {line:?}");
                last_id = got["id"].clone();
                received.push(got);
            }
            Step::Reply(mut answer) => {
                answer["id"] = last_id.clone();
                if out.write_all(format!("{answer}\r\n").as_bytes()).is_err() {
                    break;
                }
            }
            Step::Pause(d) => thread::sleep(d),
            Step::Hold => {
                let mut line = String::new();
                while input.read_line(&mut line).unwrap_or(0) > 0 {
                    line.clear();
                }
            }
        }
    }
    received
}
