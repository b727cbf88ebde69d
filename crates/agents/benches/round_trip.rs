//! Criterion benchmark: one target → done round trip through the balloon socket — the world hands the hub a move, the event loop writes the target, an agent (a thread on a real Unix socket) answers done, the loop reads it and the lever shows it.

use criterion::{criterion_group, criterion_main, Criterion};
use memtide_agents::hub::{Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_model::{AppMove, AppStatus, Pages, TenantId};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const T: TenantId = TenantId(1);

struct Me;

impl Tenants for Me {
    fn tenant_of(&self, _pid: u32) -> Option<(TenantId, String)> {
        Some((T, "bench".into()))
    }
}

/// An agent that answers every target with done at once.
fn agent(path: &std::path::Path) {
    let s = UnixStream::connect(path).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    writeln!(
        w,
        r#"{{"type":"hello","version":1,"app":"bench","kind":"cache","pid":{},"pool_bytes":1073741824,"min_bytes":0,"max_bytes":1073741824,"granule_bytes":4096}}"#,
        std::process::id()
    )
    .unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Some(rest) = line.strip_prefix(r#"{"type":"target","seq":"#) else {
            continue;
        };
        let seq: u64 = rest.split(',').next().unwrap().parse().unwrap();
        let pool: u64 = rest
            .split("\"pool_bytes\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if writeln!(
            w,
            r#"{{"type":"progress","seq":{seq},"pool_bytes":{pool},"status":"done"}}"#
        )
        .is_err()
        {
            return;
        }
    }
}

fn round_trip(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::new(SessionConfig::default(), Box::new(Me));
    let server = Server::start(
        &ServerConfig {
            socket: dir.path().join("b.sock"),
            mode: 0o600,
            max_connections: 4,
            group: None,
            max_per_uid: 4,
            descriptors: None,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    let path = server.path().to_path_buf();
    std::thread::spawn(move || agent(&path));
    while hub.lever(T, Pages::ZERO, hub.now()).is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut pool = 0u64;
    c.bench_function("balloon_target_to_done", |b| {
        b.iter(|| {
            // Alternate between two sizes so that every move is a new target.
            pool = if pool == 1000 { 2000 } else { 1000 };
            hub.apply(
                T,
                AppMove::Target {
                    pool: Pages(pool),
                    deadline: Duration::from_secs(10),
                },
            );
            loop {
                let answer = hub.lever(T, Pages::ZERO, hub.now()).and_then(|l| l.answer);
                if answer.is_some_and(|a| a.target == Pages(pool) && a.status == AppStatus::Done) {
                    break;
                }
                std::hint::spin_loop();
            }
        })
    });
    server.stop();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
