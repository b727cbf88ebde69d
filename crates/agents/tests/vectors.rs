//! The protocol's `memtide/` exchanges (protocol/vectors/memtide/) played by a real agent connection against a real server and hub, over a Unix socket in a temporary directory.

use memtide_agents::hub::{Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::vectors::{load_exchanges, Player};
use memtide_model::{Pages, TenantId};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// This test process is the only process in tenant 7, "vectors".
struct ThisProcess;

impl Tenants for ThisProcess {
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        (pid == std::process::id()).then(|| (TenantId(7), "vectors".to_string()))
    }
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol/vectors/memtide")
}

fn serve(dir: &Path) -> (Server, Hub) {
    let hub = Hub::new(SessionConfig::default(), Box::new(ThisProcess));
    let config = ServerConfig {
        socket: dir.join("balloon.sock"),
        mode: 0o660,
        max_connections: 64,
        group: None,
        max_per_uid: 64,
        descriptors: None,
    };
    let server = Server::start(&config, hub.handler()).unwrap();
    hub.set_wake(server.waker());
    (server, hub)
}

#[test]
fn every_memtide_exchange_holds_against_the_server() {
    let exchanges = load_exchanges(&vectors_dir()).unwrap();
    assert!(exchanges.len() >= 11, "{} exchanges", exchanges.len());
    let dir = tempfile::tempdir().unwrap();
    let (server, hub) = serve(dir.path());
    for ex in &exchanges {
        let stream = UnixStream::connect(server.path()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut player = Player::agent(stream, "vectors");
        if let Err(e) = player.play(&ex.steps) {
            panic!("exchange {}: {e}", ex.name);
        }
        // The next exchange registers the same tenant again: end this one's agent first.
        drop(player);
        let until = Instant::now() + Duration::from_secs(5);
        while hub.lever(TenantId(7), Pages::ZERO, hub.now()).is_some() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    server.stop();
}

#[test]
fn stopping_says_bye_to_every_agent_and_removes_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _hub) = serve(dir.path());
    let path = server.path().to_path_buf();
    let stream = UnixStream::connect(&path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reader = std::io::BufReader::new(stream);
    std::thread::sleep(Duration::from_millis(50));
    server.stop();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    assert!(line.starts_with(r#"{"type":"bye""#), "{line}");
    assert!(!path.exists());
}
