//! `memtide status` end to end against the daemon's API server (in this process, with a published snapshot and no loop): the table, `--json`, and each failure as one line naming the address with exit status 1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use memtide_api::Snapshot;
use memtide_daemon::api::{ApiOptions, ApiServer, Published, SharedSnapshot, SocketServer};

/// The documented example snapshot, as `memtide status --json` prints it.
const EXAMPLE: &str = include_str!("../../../api/json/snapshot.json");

fn memtide_status(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memtide"))
        .arg("status")
        .args(args)
        .output()
        .expect("memtide runs")
}

/// An API server publishing the example snapshot; its loop never runs (only reads are asked).
fn server() -> (ApiServer, mpsc::Receiver<memtide_daemon::command::Request>) {
    let snapshot: Snapshot = serde_json::from_str(EXAMPLE).unwrap();
    let shared: SharedSnapshot = Arc::new(Published::new(snapshot));
    let (tx, rx) = mpsc::channel();
    let server = ApiServer::start("127.0.0.1:0".parse().unwrap(), shared, tx).unwrap();
    (server, rx)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit status 1 and one line on stderr: `memtide: <message>`.
fn assert_fails_with(out: &Output, message: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr, format!("memtide: {message}\n"));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn status_json_prints_the_snapshot_as_documented() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let (server, _loop) = server();
    let addr = server.local_addr().to_string();
    let out = memtide_status(&["--address", &addr, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), EXAMPLE);
}

#[test]
fn status_prints_host_tenants_held_and_decisions() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let (server, _loop) = server();
    let addr = server.local_addr().to_string();
    let out = memtide_status(&["--address", &addr]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let want = [
        "memtide 0.1.0 · tick 3725 · up 1h02m · cgroup v2 /memtide\n",
        "host: state soft · free 6.00 GiB · budget 12.00 GiB of 16.00 GiB · swap 3.75 GiB free of 4.00 GiB · tax 0.75 · dry-run no · pressure 0.1%\n",
        "TENANT  ALLOCATED     TARGET   ESTIMATE      LIMIT      FLOOR     SWAP  REFAULTS/S               BALLOON         DISK  ESTIMATOR\n",
        "db       1.50 GiB   1.20 GiB   1.10 GiB   1.30 GiB  576.0 MiB  0.0 MiB         3.5                     -  w400 12.3ms  tws\n",
        "web     400.0 MiB  300.0 MiB  320.0 MiB  400.0 MiB  288.0 MiB        -           -                     -            -  sampling\n",
        "vm1     400.0 MiB  300.0 MiB  320.0 MiB        max  288.0 MiB        -           -  512.0 MiB->600.0 MiB            -  sampling\n",
        "held: web: backoff: limit holds at 400.0 MiB (backing off: 2500 faults/s)\n",
        "recent decisions (newest last):\n",
        "  tick 3600  web  hold   limit 400.0 MiB -> 400.0 MiB: soft: allocated 400.0 MiB > target 300.0 MiB; limit holds",
        "  tick 3725  db   lower  limit 1.40 GiB -> 1.30 GiB: soft: allocated 1536.0 MiB",
    ];
    for line in want {
        assert!(stdout.contains(line), "{stdout}\nlacks\n{line}");
    }
}

#[test]
fn status_of_a_stopped_daemon_exits_1_naming_the_address() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let addr = {
        let (server, _loop) = server();
        server.local_addr()
    };
    let out = memtide_status(&["--address", &addr.to_string()]);
    assert_fails_with(
        &out,
        &format!("no memtide daemon answers at {addr} (is it running? see docs/linux.md)"),
    );
}

#[test]
fn status_of_a_daemon_answering_an_error_exits_1_with_its_line() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf);
        let body = r#"{"error":"the API is serving 512 connections already; retry shortly"}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let out = memtide_status(&["--address", &addr.to_string()]);
    assert_fails_with(
        &out,
        &format!("the memtide daemon at {addr} answered 503 to GET /v1/status: the API is serving 512 connections already; retry shortly"),
    );
    server.join().unwrap();
}

#[test]
fn status_of_a_silent_daemon_gives_up_after_5s() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // The connection completes in the backlog; nobody answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let started = Instant::now();
    let out = memtide_status(&["--address", &addr.to_string()]);
    let took = started.elapsed();
    assert_fails_with(
        &out,
        &format!("the memtide daemon at {addr} did not answer within 5.0s"),
    );
    assert!(
        took >= Duration::from_millis(4900) && took < Duration::from_secs(8),
        "{took:?}"
    );
    drop(listener);
}

#[test]
fn status_with_an_address_that_is_not_one_is_a_usage_error() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let out = memtide_status(&["--address", "localhost"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--address"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn status_asks_the_socket_first_and_tcp_without_it() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let snapshot: Snapshot = serde_json::from_str(EXAMPLE).unwrap();
    let shared: SharedSnapshot = Arc::new(Published::new(snapshot));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.sock");
    let (tx, _rx) = mpsc::channel();
    let socket = SocketServer::start(&path, None, shared, tx, ApiOptions::default()).unwrap();
    // Nothing listens on this address: the answer can only have come through the socket.
    let nobody = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = memtide_status(&[
        "--address",
        &nobody.to_string(),
        "--socket",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), EXAMPLE);
    drop(socket);
    // Without the socket, TCP.
    let (server, _loop) = server();
    let addr = server.local_addr().to_string();
    let out = memtide_status(&[
        "--address",
        &addr,
        "--socket",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), EXAMPLE);
}
