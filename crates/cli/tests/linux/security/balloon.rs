//! The balloon socket cannot be turned against the agents it serves: an identity cannot be borrowed (a pid reused by a process in a tenant after the process that connected exited is refused), and a user's flood of idle or unfinished connections neither locks a real agent out nor costs more than a stated RSS.

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
    // The API answers before the balloon socket is bound: a loaded host may see the gap.
    wait_for(
        "the balloon socket",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || socket.exists().then_some(()),
        || daemon.log_text(),
    );
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

/// The daemon's resident memory, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// The RSS a flood may add, stated: 16,384 idle connections and 2,000 unfinished 65,000-byte
/// lines (130 MB were held before the per-uid bound and the released buffers).
const FLOOD_RSS_BOUND: u64 = 24 * MIB;

#[test]
fn a_users_flood_of_idle_and_unfinished_connections_locks_no_agent_out() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_users_flood_of_idle_and_unfinished_connections_locks_no_agent_out";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "f") else {
        return;
    };
    let cg = linux.cgroup("sec-flood");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = tmp.path().join("balloon.sock");
    let mut daemon = daemon_with(tmp.path(), &cg, "mode = \"0666\"");
    daemon.wait_until("ticking", Duration::from_secs(20), |s| s.ticks >= 2);
    let before = rss_bytes(daemon.pid());
    let path = socket.to_str().unwrap();
    let line = "x".repeat(65_000);
    let mut idle = user
        .attack()
        .args(["hold", "--unix", path, "--count", "16384", "--hold", "30"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut unfinished = user
        .attack()
        .args(["hold", "--unix", path, "--count", "2000", "--hold", "30"])
        .args(["--send", &line])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(8));
    let during = rss_bytes(daemon.pid());
    let ticks = daemon.status().ticks;

    // A real agent, root's, in the tenant's cgroup, says hello during the flood.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$3"; exec "$0" request --unix "$1" --send "$(printf '%s' "$2" | sed "s/{pid}/$$/")" --timeout 3"#)
        .arg(attack_path())
        .arg(path)
        .arg(hello("{pid}"))
        .arg(cg.dir().join("cgroup.procs"))
        .output()
        .unwrap();
    let reply = String::from_utf8_lossy(&out.stdout);
    let _ = idle.kill();
    let _ = unfinished.kill();
    let _ = idle.wait();
    let _ = unfinished.wait();
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_bytes(daemon.pid());
    println!(
        "daemon RSS: {:.1} MiB before, {:.1} MiB during the flood, {:.1} MiB after (bound +{} MiB)",
        mib(before),
        mib(during),
        mib(after),
        FLOOD_RSS_BOUND / MIB
    );
    assert!(
        reply.contains(r#""type":"welcome""#),
        "the real agent was locked out: {reply} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        during <= before + FLOOD_RSS_BOUND,
        "the flood cost {:.1} MiB",
        mib(during - before)
    );
    daemon.wait_until("ticks go on", Duration::from_secs(10), |s| {
        s.ticks > ticks + 2
    });
}
