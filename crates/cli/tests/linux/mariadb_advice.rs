//! Lai et al.'s mitigations as advice on a real MariaDB (issue 14): a server with its binary log synced at every commit (`sync_binlog = 1`), committing hundreds of times a second, under `memtide daemon` with its adapter; the adapter reports the server's durability settings and fsync rates, and the API and `memtide status` advise `sync_binlog 1 -> 100` with the measured figures. memtide changes no setting: the server's `sync_binlog` is still 1 afterwards.

use crate::host::mariadb::{self, DataDir, Mariadbd, Tables};
use crate::host::*;
use memtide_testkit::samples::build_binaries;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One adopted tenant, `app`, running MariaDB through its adapter.
fn config(cgroup: &str, socket: &str) -> String {
    adopt_config(
        cgroup,
        "8G",
        &format!(
            "\n[tenant.app]\nkind = \"mariadb\"\nurl = \"unix://{socket}\"\nuser = \"root\"\nmin = \"32M\"\nmax = \"256M\"\n"
        ),
    )
}

#[test]
fn a_database_syncing_its_binlog_at_every_commit_is_advised_to_sync_less_often() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_database_syncing_its_binlog_at_every_commit_is_advised_to_sync_less_often";
    let Some(linux) = linux(test) else {
        return;
    };
    if let Some(why) = mariadb::missing() {
        skip_or_fail(test, &why);
        return;
    }
    build_binaries();
    let data = DataDir::prepare(Tables {
        tables: 1,
        rows: 1000,
    })
    .expect("prepare a data directory");
    let cg = linux.cgroup("mdb-advice");
    let binlog = data.path().join("binlog");
    let server = Mariadbd::start_with(
        &data,
        "128M",
        Some(&cg),
        &[
            format!("--log-bin={}", binlog.display()),
            "--server-id=1".to_string(),
            "--sync-binlog=1".to_string(),
            "--innodb-flush-log-at-trx-commit=1".to_string(),
        ],
    )
    .expect("start mariadbd");
    server
        .sql("CREATE TABLE sbtest.commits (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let socket = server.socket.display().to_string();
    let mut daemon = Daemon::start(tmp.path(), &config(&cg.path, &socket), &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(60));

    // One client committing as fast as it can: each autocommit INSERT is a commit, and with
    // sync_binlog = 1 each group commit fsyncs the binary log.
    let mut client = Command::new("mariadb")
        .arg("-S")
        .arg(&server.socket)
        .args(["-uroot", "sbtest"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the mariadb client");
    let mut stdin = client.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..200_000 {
            if writeln!(stdin, "INSERT INTO commits (v) VALUES ({i});").is_err() {
                break;
            }
        }
    });

    let start = Instant::now();
    let s = daemon.wait_until(
        "the API advises sync_binlog 1 -> 100",
        Duration::from_secs(60),
        |s| {
            s.tenants
                .iter()
                .any(|t| t.advice.iter().any(|a| a.setting == "sync_binlog"))
        },
    );
    let advised_in = start.elapsed();
    let tenant = s.tenants.iter().find(|t| t.name == "app").unwrap();
    let advice = tenant
        .advice
        .iter()
        .find(|a| a.setting == "sync_binlog")
        .unwrap();
    println!(
        "advised {:.1} s after the commits began: {}",
        advised_in.as_secs_f64(),
        advice.line
    );
    assert_eq!((advice.value, advice.suggested), (1, 100));
    assert!(
        advice.line.starts_with("sync_binlog 1 -> 100: ")
            && advice.line.contains("commits/s")
            && advice.line.contains("Lai et al."),
        "one line with the evidence and the paper's effect: {}",
        advice.line
    );
    let (code, out, err) = memtide(&["status", "--address", &daemon.addr.to_string()]);
    assert_eq!(code, 0, "memtide status: {err}");
    assert!(
        out.contains("advice: app: sync_binlog 1 -> 100: "),
        "memtide status lists it:\n{out}"
    );

    // Advice only: the setting is the server's own.
    let _ = client.kill();
    let _ = client.wait();
    let _ = writer.join();
    assert_eq!(
        server.sql("SELECT @@sync_binlog").unwrap().trim(),
        "1",
        "memtide changed no durability setting"
    );
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
}
