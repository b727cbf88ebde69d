//! The MariaDB adapter against a real `mariadbd` (Debian's, on loopback) and memtide's real balloon server and hub: it registers, shrinks a warm 1 GiB buffer pool to 384 MiB — the server's resident memory falling — and grows it back; a wrong password stops it with one line; a server killed during a shrink fails the shrink, and the adapter connects again to the restarted server; a server committing with `sync_binlog = 1` has its durability settings and sync rates in memtide's lever, and its restart leaves no rate for the counters that fell back.

mod common;

use common::mariadb::{available, Mariadbd};
use common::{adapter_command, done_at, rss, Memtide, Proc, TestCgroup, MIB, T};
use memtide_agents::hub::{AgentEvent, Closed};
use memtide_balloon::protocol::ProgressStatus;
use memtide_model::{Bytes, Durability, Pages, PerSecond};
use mysql::prelude::Queryable;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SIZE: &str = "SELECT @@innodb_buffer_pool_size";

/// `memtide-adapter mariadb` with `args` as the tenant's agent, in the server's cgroup `cg`
/// (the adapter confirms a shrink on its own cgroup's usage: the server's, and no other test's).
fn adapter(memtide: &Memtide, cg: &TestCgroup, args: &[&str]) -> Proc {
    let mut command = cg.command(env!("CARGO_BIN_EXE_memtide-adapter"));
    command.arg("mariadb").args(args);
    memtide.spawn(command)
}

/// Asks for a pool of `bytes` and waits for the answer.
fn ask(memtide: &Memtide, bytes: u64) -> AgentEvent {
    memtide.target(bytes, Duration::from_secs(90));
    memtide.answer()
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
    let Some(cg) = TestCgroup::new("mdb-shrink") else {
        return;
    };
    let db = Mariadbd::start_in("1G", Some(&cg));
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
    let adapter = adapter(
        &memtide,
        &cg,
        &[
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
        ],
    );
    memtide.registered();

    let full = rss(db.pid());
    let answer = ask(&memtide, 384 * MIB);
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

    let answer = ask(&memtide, 1024 * MIB);
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
    let mut adapter = adapter_command()
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
    assert!(!err.contains("MySqlError"), "the driver's wrapping: {err}");
}

#[test]
fn a_mariadbd_killed_during_a_shrink_fails_the_shrink_and_the_adapter_connects_again() {
    if !available() {
        return;
    }
    let Some(cg) = TestCgroup::new("mdb-killed") else {
        return;
    };
    let mut db = Mariadbd::start_in("256M", Some(&cg));
    db.add_user("memtide", "s3cret");
    let memtide = Memtide::start(db.dir());
    let url = format!("mysql://127.0.0.1:{}", db.port);
    let pass = password_file(db.dir(), "s3cret");
    let mut adapter = adapter(
        &memtide,
        &cg,
        &[
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
        ],
    );
    memtide.registered();

    // Frozen, the server holds the shrink's statements; killed, it fails them.
    db.signal("STOP");
    memtide.target(128 * MIB, Duration::from_secs(90));
    std::thread::sleep(Duration::from_secs(1));
    db.kill();
    let answer = memtide.answer();
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
    let answer = ask(&memtide, 192 * MIB);
    assert!(done_at(&answer, 192 * MIB), "{answer:?}");
    assert_eq!(db.figure(SIZE), 192 * MIB);
    memtide.server.stop();
}

/// The durability figures in the tenant's lever now.
fn durability(memtide: &Memtide) -> Option<Durability> {
    memtide
        .hub
        .lever(T, Pages::ZERO, memtide.hub.now())
        .and_then(|lever| lever.durability)
        .map(|d| *d)
}

/// Waits (at most 60 s) for durability figures that `want`, and answers them.
fn wait_durability(
    memtide: &Memtide,
    what: &str,
    want: impl Fn(&Durability) -> bool,
) -> Durability {
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    while Instant::now() < until {
        seen = durability(memtide);
        if let Some(d) = seen.filter(|d| want(d)) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no durability figures with {what} within 60 s; the last: {seen:?}");
}

#[test]
fn a_committing_mariadb_s_durability_settings_and_sync_rates_reach_the_lever() {
    if !available() {
        return;
    }
    let mut db = Mariadbd::start_with(
        "128M",
        None,
        &[
            "--log-bin",
            "--sync-binlog=1",
            "--innodb-flush-log-at-trx-commit=1",
        ],
    );
    db.root().unwrap().query_drop("CREATE DATABASE d").unwrap();
    db.root()
        .unwrap()
        .query_drop("CREATE TABLE d.c (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
        .unwrap();
    // One transaction at a time, each its own commit, until told to stop.
    let (stop, committed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let worker = {
        let (stop, committed, mut c) = (stop.clone(), committed.clone(), db.root().unwrap());
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                c.query_drop("INSERT INTO d.c (v) VALUES (1)").unwrap();
                committed.fetch_add(1, Ordering::SeqCst);
            }
            started.elapsed()
        })
    };

    let memtide = Memtide::start(db.dir());
    let url = format!("unix://{}", db.socket().display());
    let mut command = adapter_command();
    command.args(["mariadb", "--url", &url, "--user", "root"]);
    command.args(["--min", "64M", "--max", "128M"]);
    let _adapter = memtide.spawn(command);
    memtide.registered();
    let busy = |r: Option<PerSecond>| r.is_some_and(|r| r > PerSecond::ZERO);
    let d = wait_durability(&memtide, "commit and fsync rates", |d| {
        busy(d.binlog_commits) && busy(d.data_fsyncs)
    });
    stop.store(true, Ordering::SeqCst);
    let took = worker.join().unwrap();
    let client = committed.load(Ordering::SeqCst) as f64 / took.as_secs_f64();
    eprintln!("mariadbd reported {d:?}; the client committed {client:.0}/s");

    assert_eq!(d.flush_log_at_trx_commit, Some(1));
    assert_eq!(d.sync_binlog, Some(1));
    assert_eq!(
        d.log_buffer,
        Some(Bytes(db.figure("SELECT @@innodb_log_buffer_size")))
    );
    let threads = db.figure("SELECT @@innodb_write_io_threads");
    assert_eq!(d.write_io_threads.map(u64::from), Some(threads));
    let commits = d.binlog_commits.unwrap().per_s();
    assert!(
        commits > client / 2.0 && commits < client * 2.0,
        "{commits} binary log commits/s, the client {client:.0}/s"
    );
    let groups = d
        .binlog_group_commits
        .expect("Binlog_group_commits")
        .per_s();
    assert!(
        groups > 0.0 && groups <= commits * 1.01,
        "{groups} groups/s"
    );
    assert!(d.log_waits.is_some(), "Innodb_log_waits");
    // A counter the server lacks is None, never 0 (MariaDB 10.8 dropped Innodb_os_log_fsyncs).
    let has_log_fsyncs = db
        .root()
        .unwrap()
        .query_first::<(String, u64), _>("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_fsyncs'")
        .unwrap()
        .is_some();
    assert_eq!(d.log_fsyncs.is_some(), has_log_fsyncs, "{d:?}");

    // Restarted, the server counts from about 0: no rate for the counters that fell back,
    // the settings still reported; then rates again, an idle server's commits at 0.
    db.kill();
    db.launch();
    let after = wait_durability(&memtide, "no rates after the restart", |d| {
        d.binlog_commits.is_none() && d.data_fsyncs.is_none()
    });
    assert_eq!(after.sync_binlog, Some(1));
    let again = wait_durability(&memtide, "rates again", |d| d.binlog_commits.is_some());
    eprintln!("after the restart: {after:?}, then {again:?}");
    assert_eq!(again.binlog_commits, Some(PerSecond::ZERO));
    memtide.server.stop();
}
