//! The balloon socket cannot be turned against the agents it serves: an identity cannot be borrowed (a pid reused by a process in a tenant after the process that connected exited is refused).

use crate::host::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A hello in the Rust SDK's shape, for process `pid` (`{pid}`: filled in by memtide-attack).
fn hello(pid: &str) -> String {
    format!(
        r#"{{"type":"hello","version":1,"app":"attack","kind":"buffer_pool","pid":{pid},"pool_bytes":67108864,"min_bytes":16777216,"max_bytes":134217728,"granule_bytes":1048576}}\n"#
    )
}

/// A daemon adopting `cg` as tenant "app", its balloon socket `[balloon]` as given.
fn daemon_with(dir: &Path, cg: &TestCgroup, balloon: &str) -> Daemon {
    let config = format!(
        "{}\n[balloon]\n{balloon}\n",
        adopt_config(&cg.path, "300M", "")
    );
    Daemon::start(dir, &config, &[])
}

/// Spawns `sh` into `cg` as the next process, so that it gets pid `want` (free since its
/// process was reaped): `ns_last_pid` set to `want - 1` just before the fork. Other processes
/// fork too, so a few tries may be needed; `None` when none got it.
fn respawn_as(want: u32, cg: &TestCgroup) -> Option<Child> {
    let procs = cg.dir().join("cgroup.procs");
    for _ in 0..200 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (want - 1).to_string()).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {}; exec sleep 60", procs.display()))
            .spawn()
            .unwrap();
        if child.id() == want {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

#[test]
fn a_pid_reused_in_a_tenant_does_not_lend_the_tenant_its_identity() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_pid_reused_in_a_tenant_does_not_lend_the_tenant_its_identity";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "p") else {
        return;
    };
    let cg = linux.cgroup("sec-pid");
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("balloon.sock");
    let daemon = daemon_with(tmp.path(), &cg, "mode = \"0666\"");
    assert!(socket.exists());
    let talk = tempfile::tempdir().unwrap();
    std::fs::set_permissions(talk.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let go = talk.path().join("go");
    let reply = talk.path().join("reply");

    // The user's process connects, leaves the connection to its child and exits.
    let out = user
        .attack()
        .args(["handoff", "--unix", socket.to_str().unwrap()])
        .args(["--send", &hello("{pid}"), "--timeout", "30"])
        .args(["--after", go.to_str().unwrap()])
        .args(["--reply", reply.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let peer: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();

    // Its pid, reaped, goes to a process in tenant app's cgroup.
    let started = Instant::now();
    let Some(mut impostor) = respawn_as(peer, &cg) else {
        panic!("pid {peer} was not reused in 200 tries");
    };
    let procs = cg.dir().join("cgroup.procs");
    wait_for(
        "the reused pid in the tenant's cgroup",
        Duration::from_secs(5),
        Duration::from_millis(2),
        || {
            let text = std::fs::read_to_string(&procs).unwrap();
            text.lines().any(|l| l == peer.to_string()).then_some(())
        },
        String::new,
    );
    println!(
        "pid {peer} reused in the tenant after {:?}",
        started.elapsed()
    );

    // The child says hello for that pid, as the socket recorded it.
    std::fs::write(&go, "").unwrap();
    wait_for(
        "the child's reply",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || reply.exists().then_some(()),
        || daemon.log_text(),
    );
    let text = std::fs::read_to_string(&reply).unwrap();
    let _ = impostor.kill();
    let _ = impostor.wait();
    println!("reply: {text}");
    assert!(
        !text.contains(r#""type":"welcome""#),
        "welcomed as the tenant: {text}"
    );
    assert!(
        text.contains(r#""code":"identity""#) && text.contains("has exited"),
        "{text}"
    );
    assert!(!daemon.log_text().contains("agent_registered"));
}
