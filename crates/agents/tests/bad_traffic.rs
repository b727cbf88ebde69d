//! Bad traffic against a real server and hub: a 1 MB line, binary garbage, 10,000 connections at once, and an agent that never answers, connections that never say hello, one user past its share. Each gets its error, or is closed when the policy takes it over; no other tenant's agent is touched, and the server keeps serving.

use memtide_agents::hub::{AgentEvent, Closed, Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_model::{AppMove, Pages, Takeover, TenantId};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const DB: TenantId = TenantId(1);

/// Every process is in tenant 1 ("db") except the ones the test names for tenant 2.
struct AllInDb;

impl Tenants for AllInDb {
    fn tenant_of(&self, _pid: u32) -> Option<(TenantId, String)> {
        Some((DB, "db".to_string()))
    }
}

fn serve(dir: &Path, config: SessionConfig, max_connections: usize) -> (Server, Hub) {
    serve_per_uid(dir, config, max_connections, max_connections)
}

fn serve_per_uid(
    dir: &Path,
    config: SessionConfig,
    max_connections: usize,
    max_per_uid: usize,
) -> (Server, Hub) {
    let hub = Hub::new(config, Box::new(AllInDb));
    let server = Server::start(
        &ServerConfig {
            socket: dir.join("b.sock"),
            mode: 0o600,
            max_connections,
            group: None,
            max_per_uid,
            descriptors: None,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    (server, hub)
}

struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect(path: &Path) -> Client {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).unwrap();
        l
    }

    fn hello(&mut self) -> String {
        let hello = format!(
            r#"{{"type":"hello","version":1,"app":"t","kind":"cache","pid":{},"pool_bytes":{},"min_bytes":0,"max_bytes":{},"granule_bytes":4096}}"#,
            std::process::id(),
            256 * MIB,
            512 * MIB
        );
        self.send(format!("{hello}\n").as_bytes());
        self.line()
    }
}

#[test]
fn a_one_megabyte_line_is_too_long_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _hub) = serve(dir.path(), SessionConfig::default(), 16);
    let mut c = Client::connect(server.path());
    let mut big = vec![b'a'; 1 << 20];
    big.push(b'\n');
    c.send(&big);
    let l = c.line();
    assert!(
        l.contains(r#""code":"too_long""#) && l.contains(r#""fatal":false"#),
        "{l}"
    );
    assert!(c.hello().contains(r#""type":"welcome""#));
}

#[test]
fn binary_garbage_gets_errors_then_a_close_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hub) = serve(dir.path(), SessionConfig::default(), 16);
    let mut agent = Client::connect(server.path());
    assert!(agent.hello().contains("welcome"));
    let mut bad = Client::connect(server.path());
    let mut garbage = Vec::new();
    let mut x: u32 = 12345;
    for _ in 0..4096 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        garbage.push((x >> 16) as u8);
    }
    garbage.extend_from_slice(b"\n\xff\xfe\n{\"type\":\n\0\0\0\n\n\n\n\n\n\n\n");
    bad.send(&garbage);
    let mut last = String::new();
    loop {
        let l = bad.line();
        if l.is_empty() {
            break; // closed
        }
        last = l;
    }
    assert!(last.contains(r#""code":"violations""#), "{last}");
    assert!(
        hub.lever(DB, Pages::ZERO, hub.now()).is_some(),
        "the other agent is untouched"
    );
    assert!(Client::connect(server.path()).hello().contains("busy"));
}

#[test]
fn an_agent_that_never_answers_is_closed_when_the_policy_takes_it_over() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hub) = serve(dir.path(), SessionConfig::default(), 16);
    let mut c = Client::connect(server.path());
    assert!(c.hello().contains("welcome"));
    hub.apply(
        DB,
        AppMove::Target {
            pool: Pages(128 * 256),
            deadline: Duration::from_millis(300),
        },
    );
    let target = c.line();
    assert!(
        target.contains(r#""type":"target""#) && target.contains(r#""deadline_ms":300"#),
        "{target}"
    );
    // The agent says nothing; the policy (policy::mechanism::app_balloon) sees the deadline
    // pass and takes the tenant over.
    let why = Takeover::Stuck {
        deadline: Duration::from_millis(300),
    };
    hub.apply(DB, AppMove::TakeOver(why));
    let l = c.line();
    assert!(
        l.contains(r#""code":"deadline""#) && l.contains(r#""fatal":true"#),
        "{l}"
    );
    assert_eq!(c.line(), "", "closed after the error");
    assert!(hub.lever(DB, Pages::ZERO, hub.now()).is_none());
    assert!(hub.drain_events().contains(&AgentEvent::Closed {
        tenant: DB,
        why: Closed::TakenOver(why)
    }));
}

/// Opens N connections to the socket in argv[1], sends a malformed line on each, checks each
/// gets its own `malformed` answer, prints "served N" and holds them open until stdin closes.
/// A separate process, so that the 10,000 client ends do not count against this process's
/// open-file limit (which the server's 10,000 ends come near).
const CLIENTS: &str = r#"
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)  # blocking: waits while the listen backlog is full
    s.settimeout(30)
    conns.append(s)
for s in conns:
    s.sendall(b"nonsense\n")
served = 0
for s in conns:
    line = s.makefile("rb").readline()
    served += b'"code":"malformed"' in line
print("served", served, flush=True)
sys.stdin.read()
"#;

#[test]
fn ten_thousand_connections_at_once_are_served() {
    const N: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let (server, hub) = serve(dir.path(), SessionConfig::default(), N + 10);
    let mut clients = std::process::Command::new("python3")
        .args(["-c", CLIENTS])
        .arg(server.path())
        .arg(N.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the 10,000 clients");
    let mut out = BufReader::new(clients.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), format!("served {N}"));
    // With all of them connected, the server still registers an agent.
    let mut agent = Client::connect(server.path());
    assert!(agent.hello().contains("welcome"));
    assert!(hub.lever(DB, Pages::ZERO, hub.now()).is_some());
    drop(clients.stdin.take());
    let _ = clients.wait();
    server.stop();
}

#[test]
fn a_connection_that_never_says_hello_is_closed_and_an_agent_still_registers() {
    let dir = tempfile::tempdir().unwrap();
    let config = SessionConfig {
        hello_within: Duration::from_millis(300),
        ..SessionConfig::default()
    };
    let (_server, _hub) = serve(dir.path(), config, 16);
    let path = dir.path().join("b.sock");
    let started = std::time::Instant::now();
    let mut idle = Client::connect(&path);
    let line = idle.line();
    assert!(
        line.contains(r#""code":"not_registered""#) && line.contains(r#""fatal":true"#),
        "{line}"
    );
    assert_eq!(idle.line(), "", "closed after the error");
    println!(
        "an idle connection was closed after {:?}",
        started.elapsed()
    );
    let mut agent = Client::connect(&path);
    assert!(agent.hello().contains(r#""type":"welcome""#));
}

#[test]
fn one_user_past_its_share_is_closed_at_once_and_a_freed_place_serves_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _hub) = serve_per_uid(dir.path(), SessionConfig::default(), 100, 3);
    let path = dir.path().join("b.sock");
    let mut held: Vec<Client> = (0..3).map(|_| Client::connect(&path)).collect();
    let mut over = Client::connect(&path);
    assert_eq!(
        over.line(),
        "",
        "the fourth connection from this uid is closed"
    );
    // One of the three goes: its place is this user's again.
    held.pop();
    let mut agent = wait_for_place(&path);
    assert!(agent.hello().contains(r#""type":"welcome""#));
    drop(held);
}

/// A connection that is served (not closed at once), once the server has seen a close.
fn wait_for_place(path: &Path) -> Client {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Client::connect(path);
        c.writer
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut probe = [0u8; 1];
        match std::io::Read::read(&mut c.writer, &mut probe) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                c.writer
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                return c;
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(std::time::Instant::now() < deadline, "no place freed");
        std::thread::sleep(Duration::from_millis(20));
    }
}
