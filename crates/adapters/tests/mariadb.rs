//! The MariaDB adapter against a real `mariadbd` (Debian's, on loopback) and memtide's real balloon server and hub: it registers, shrinks a warm 1 GiB buffer pool to 384 MiB — the server's resident memory falling — and grows it back; a wrong password stops it with one line; a server killed during a shrink fails the shrink, and the adapter connects again to the restarted server.

mod common;

use common::mariadb::{available, rss, Mariadbd};
use memtide_agents::hub::{AgentEvent, Closed, Hub, HubConfig, Tenants};
use memtide_agents::server::{Server, ServerConfig};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{AppMove, Bytes, TenantId};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const T: TenantId = TenantId(7);
const SIZE: &str = "SELECT @@innodb_buffer_pool_size";

struct Only(Arc<AtomicU32>);

impl Tenants for Only {
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        (pid == self.0.load(Ordering::SeqCst)).then(|| (T, "db".to_string()))
    }
}

/// A child killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// memtide's side: the balloon server and its hub, for one tenant.
struct Memtide {
    hub: Hub,
    server: Server,
    pid: Arc<AtomicU32>,
}

impl Memtide {
    fn start(dir: &Path) -> Memtide {
        let pid = Arc::new(AtomicU32::new(0));
        let hub = Hub::new(HubConfig::default(), Box::new(Only(pid.clone())));
        let server = Server::start(
            &ServerConfig {
                socket: dir.join("b.sock"),
                mode: 0o600,
                max_connections: 4,
            },
            hub.handler(),
        )
        .unwrap();
        hub.set_wake(server.waker());
        Memtide { hub, server, pid }
    }

    /// Starts `memtide-adapter mariadb` with `args` as the tenant's agent.
    fn adapter(&self, args: &[&str]) -> Proc {
        let p = Proc(
            Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
                .arg("mariadb")
                .args(args)
                .arg("--socket")
                .arg(self.server.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        self.pid.store(p.0.id(), Ordering::SeqCst);
        p
    }

    fn wait_for(&self, what: &str, mut want: impl FnMut(&AgentEvent) -> bool) -> AgentEvent {
        let until = Instant::now() + Duration::from_secs(120);
        let mut seen = Vec::new();
        while Instant::now() < until {
            for e in self.hub.drain_events() {
                if want(&e) {
                    return e;
                }
                seen.push(e);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no {what} within 120 s; events: {seen:?}");
    }

    fn registered(&self) {
        self.wait_for("registration", |e| {
            matches!(e, AgentEvent::Registered { .. })
        });
    }

    /// Asks for a pool of `bytes` and waits for the answer.
    fn target(&self, bytes: u64) -> AgentEvent {
        self.hub.apply(
            T,
            AppMove::Target {
                pool: Bytes(bytes).to_pages_floor(),
                deadline: Duration::from_secs(90),
            },
        );
        self.wait_for("an answer", |e| {
            matches!(e, AgentEvent::Answered { status, .. } if *status != ProgressStatus::Working)
        })
    }
}

fn done_at(e: &AgentEvent, bytes: u64) -> bool {
    matches!(e, AgentEvent::Answered { status: ProgressStatus::Done, pool_bytes, .. } if *pool_bytes == bytes)
}

fn password_file(dir: &Path, password: &str) -> String {
    let f = dir.join("pass");
    std::fs::write(&f, format!("{password}\n")).unwrap();
    f.to_string_lossy().into_owned()
}

#[test]
fn the_mariadb_adapter_shrinks_a_warm_buffer_pool_by_more_than_half_and_grows_it_back() {
    if !available() {
        return;
    }
    let db = Mariadbd::start("1G");
    db.add_user("memtide", "s3cret");
    // 600,000 rows of 1 KiB: about 680 MiB of pages, read whole.
    db.fill(600_000);
    let page = db.figure("SELECT @@innodb_page_size");
    let data = db.figure("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_data'") * page;
    assert!(
        data >= 600 * MIB,
        "the pool holds only {data} bytes of data"
    );

    let memtide = Memtide::start(db.dir());
    let url = format!("mysql://127.0.0.1:{}", db.port);
    let pass = password_file(db.dir(), "s3cret");
    let adapter = memtide.adapter(&[
        "--url",
        &url,
        "--user",
        "memtide",
        "--password-file",
        &pass,
        "--min",
        "128M",
        "--max",
        "1G",
    ]);
    memtide.registered();

    let full = rss(db.pid());
    let answer = memtide.target(384 * MIB);
    assert!(done_at(&answer, 384 * MIB), "{answer:?}");
    assert_eq!(db.figure(SIZE), 384 * MIB);
    let small = rss(db.pid());
    let released = data - 384 * MIB;
    eprintln!("mariadbd: {data} bytes of data, RSS {full} -> {small} bytes");
    assert!(
        full.saturating_sub(small) * 2 >= released,
        "mariadbd's RSS fell from {full} to {small} bytes, less than half of the {released} \
         bytes of data the pool gave up"
    );

    let answer = memtide.target(1024 * MIB);
    assert!(done_at(&answer, 1024 * MIB), "{answer:?}");
    assert_eq!(db.figure(SIZE), 1024 * MIB);
    // The grown pool fills again.
    db.warm();

    // Stopped, the adapter says bye.
    Command::new("kill")
        .arg(adapter.0.id().to_string())
        .status()
        .unwrap();
    memtide.wait_for("bye", |e| {
        matches!(
            e,
            AgentEvent::Closed {
                why: Closed::Bye(_),
                ..
            }
        )
    });
    memtide.server.stop();
}

#[test]
fn a_wrong_password_stops_the_adapter_with_one_line_naming_the_server_and_the_refusal() {
    if !available() {
        return;
    }
    let db = Mariadbd::start("128M");
    db.add_user("memtide", "s3cret");
    let url = format!("mysql://127.0.0.1:{}", db.port);
    let pass = password_file(db.dir(), "wrong");
    let mut adapter = Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
        .args(["mariadb", "--url", &url, "--user", "memtide"])
        .args(["--password-file", &pass, "--min", "64M", "--max", "128M"])
        .arg("--socket")
        .arg(db.dir().join("nobody.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = adapter.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > until {
            let _ = adapter.kill();
            let _ = adapter.wait();
            panic!("the adapter is still running with a wrong password");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut adapter.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "exit {status}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(err.contains("Access denied"), "{err}");
}

#[test]
fn a_mariadbd_killed_during_a_shrink_fails_the_shrink_and_the_adapter_connects_again() {
    if !available() {
        return;
    }
    let mut db = Mariadbd::start("256M");
    db.add_user("memtide", "s3cret");
    let memtide = Memtide::start(db.dir());
    let url = format!("mysql://127.0.0.1:{}", db.port);
    let pass = password_file(db.dir(), "s3cret");
    let mut adapter = memtide.adapter(&[
        "--url",
        &url,
        "--user",
        "memtide",
        "--password-file",
        &pass,
        "--min",
        "64M",
        "--max",
        "256M",
    ]);
    memtide.registered();

    // Frozen, the server holds the shrink's statements; killed, it fails them.
    db.signal("STOP");
    memtide.hub.apply(
        T,
        AppMove::Target {
            pool: Bytes(128 * MIB).to_pages_floor(),
            deadline: Duration::from_secs(90),
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    db.kill();
    let answer = memtide.wait_for(
        "an answer",
        |e| matches!(e, AgentEvent::Answered { status, .. } if *status != ProgressStatus::Working),
    );
    let AgentEvent::Answered {
        status: ProgressStatus::Failed,
        reason: Some(reason),
        ..
    } = &answer
    else {
        panic!("not a failure with a reason: {answer:?}");
    };
    eprintln!("the shrink failed: {reason}");
    assert!(reason.contains("mariadb"), "{reason}");
    assert!(
        adapter.0.try_wait().unwrap().is_none(),
        "the adapter exited"
    );

    // Back up, the server is found again.
    db.launch();
    let answer = memtide.target(192 * MIB);
    assert!(done_at(&answer, 192 * MIB), "{answer:?}");
    assert_eq!(db.figure(SIZE), 192 * MIB);
    memtide.server.stop();
}
