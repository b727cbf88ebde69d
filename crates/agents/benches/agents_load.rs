//! Benchmark (its own harness): the CPU the balloon socket's event loop spends on 1,000 connected agents each sending stats once a second, as a share of one core, read from the loop thread's own counters (`/proc/self/task/<tid>/stat`) so that the agents' side (threads of this process) is not counted.
//!
//! `cargo bench -p memtide-agents --bench agents_load [-- AGENTS SECONDS]`.

use memtide_agents::hub::{Hub, SessionConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_model::TenantId;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Every hello gets a tenant of its own (the agents here all run in this one process).
struct EachItsOwn(AtomicU32);

impl Tenants for EachItsOwn {
    fn tenant_of(&self, _pid: u32) -> Option<(TenantId, String)> {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Some((TenantId(n), format!("t{n}")))
    }
}

/// utime + stime of the thread named `name`, in clock ticks.
fn thread_ticks(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            // After the comm: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            return Some(utime + stime);
        }
    }
    None
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let agents: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::new(
        SessionConfig::default(),
        Box::new(EachItsOwn(AtomicU32::new(0))),
    );
    let server = Server::start(
        &ServerConfig {
            socket: dir.path().join("b.sock"),
            mode: 0o600,
            max_connections: agents + 10,
            group: None,
            max_per_uid: agents + 10,
            descriptors: None,
        },
        hub.handler(),
    )
    .unwrap();
    hub.set_wake(server.waker());
    let pid = std::process::id();
    let mut conns: Vec<UnixStream> = (0..agents)
        .map(|_| {
            let s = UnixStream::connect(server.path()).unwrap();
            let mut w = &s;
            writeln!(
                w,
                r#"{{"type":"hello","version":1,"app":"load","kind":"cache","pid":{pid},"pool_bytes":1073741824,"min_bytes":0,"max_bytes":1073741824,"granule_bytes":1048576}}"#
            )
            .unwrap();
            let mut welcome = String::new();
            BufReader::new(&s).read_line(&mut welcome).unwrap();
            assert!(welcome.contains("welcome"), "{welcome}");
            s
        })
        .collect();
    let hz = 100.0; // USER_HZ on Linux
    let before = thread_ticks("memtide-balloon").expect("the loop's thread");
    let start = Instant::now();
    for second in 0..seconds {
        for (i, s) in conns.iter_mut().enumerate() {
            let n = second * 100 + i as u64;
            writeln!(
                s,
                r#"{{"type":"stats","pool_bytes":1073741824,"used_bytes":1000000000,"hits":{n},"misses":{second},"evictions":0,"dirty_bytes":0}}"#
            )
            .unwrap();
        }
        let next = Duration::from_secs(second + 1);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let after = thread_ticks("memtide-balloon").expect("the loop's thread");
    let cpu = (after - before) as f64 / hz;
    let wall = start.elapsed().as_secs_f64();
    println!(
        "{agents} agents, stats once a second, {wall:.1} s: the event loop used {cpu:.2} s of CPU, {:.3}% of a core",
        100.0 * cpu / wall
    );
    drop(conns);
    server.stop();
}
