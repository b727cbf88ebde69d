//! The API cannot be turned against the operator: a local user changes nothing over TCP or
//! the Unix socket, a token allows changes over TCP and a wrong one does not, a user's flood
//! of 1,000 idle connections keeps neither root's read over TCP nor root's change over the
//! socket from being answered, while the daemon keeps ticking; nor does a flood of the socket
//! itself by a member of `[api] group`; and a second daemon cannot take a live daemon's socket
//! (it replaces only a dead one's).

use crate::host::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The failure bound on an answer; answers are measured and printed, not timed.
const DEADLINE: Duration = Duration::from_secs(10);

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A raw HTTP request as memtide-attack's `--send` takes it (`\n` escaped).
fn http(method: &str, path: &str, headers: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\\nHost: x\\n{headers}Content-Length: {}\\n\\n{body}",
        body.len()
    )
}

/// What memtide-attack's `request` got back (its stdout and stderr), as the user.
fn attack_request(user: &UnprivilegedUser, target: &[&str], send: &str) -> String {
    let out = user
        .attack()
        .arg("request")
        .args(target)
        .args(["--send", send, "--timeout", "10"])
        .output()
        .expect("memtide-attack runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The cgroup's `memory.oom.group` (v2), the OOM setting a change could reach.
fn oom_group(cg: &TestCgroup) -> Option<String> {
    std::fs::read_to_string(cg.dir().join("memory.oom.group")).ok()
}

/// A daemon adopting `cg` with its directory open for the user to reach the socket file (so
/// the socket's own mode is what refuses), and `api` added to its config.
fn daemon_for(cg: &TestCgroup, dir: &Path, api: &str) -> Daemon {
    chmod(dir, 0o755);
    let config = format!("{}\n{api}\n", adopt_config(&cg.path, "1G", ""));
    let mut daemon = Daemon::start(dir, &config, &[]);
    daemon.wait_until("app managed", Duration::from_secs(20), |s| {
        s.tenants.len() == 1
    });
    daemon
}

#[test]
fn a_local_user_changes_nothing_over_tcp_or_the_socket() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_local_user_changes_nothing_over_tcp_or_the_socket";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "p") else {
        return;
    };
    let cg = linux.cgroup("sec-api");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = daemon_for(&cg, tmp.path(), "");
    let before = daemon.tenant("app");
    let oom_before = oom_group(&cg);
    let socket_mode = std::fs::metadata(&daemon.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(socket_mode & 0o777, 0o600, "root's socket, no group");

    let patch = r#"{"max": "64M", "min": "60M"}"#;
    let tcp = ["--tcp", &daemon.addr.to_string()].map(str::to_string);
    let tcp: Vec<&str> = tcp.iter().map(String::as_str).collect();
    let answer = attack_request(&user, &tcp, &http("PATCH", "/v1/tenants/app", "", patch));
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.contains("token_file") && answer.contains("Unix socket"),
        "{answer}"
    );
    let answer = attack_request(
        &user,
        &tcp,
        &http("PUT", "/v1/tax-rate", "", r#"{"tax_rate": 0}"#),
    );
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    // Reads stay open to everyone.
    let answer = attack_request(&user, &tcp, &http("GET", "/v1/status", "", ""));
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

    let socket = daemon.socket.display().to_string();
    let answer = attack_request(
        &user,
        &["--unix", &socket],
        &http("PATCH", "/v1/tenants/app", "", patch),
    );
    assert!(
        answer.contains("Permission denied") || answer.starts_with("HTTP/1.1 403 "),
        "{answer}"
    );

    // A few ticks later nothing moved: the tenant's settings, its limit and OOM setting.
    let ticks = daemon.status().ticks;
    daemon.wait_until("four more ticks", DEADLINE, |s| s.ticks >= ticks + 4);
    let after = daemon.tenant("app");
    assert_eq!(
        (after.min_bytes, after.max_bytes, after.shares),
        (before.min_bytes, before.max_bytes, before.shares)
    );
    assert!(
        limit_bytes(&cg.sample()).is_none_or(|l| l > 64 * MIB),
        "the limit was not lowered to the user's 64M"
    );
    assert_eq!(oom_group(&cg), oom_before);
    assert_eq!(daemon.status().host.tax_rate, 0.75);

    // Root changes through the socket.
    let (code, text) = daemon
        .changer(DEADLINE)
        .request("PATCH", "/v1/tenants/app", Some(r#"{"max": "300M"}"#))
        .unwrap();
    assert_eq!(code, 200, "{text}");
    daemon.wait_until("root's change shows", DEADLINE, |s| {
        s.tenants[0].max_bytes == 300 * MIB
    });
}

#[test]
fn a_token_allows_changes_over_tcp_and_a_wrong_one_does_not() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_token_allows_changes_over_tcp_and_a_wrong_one_does_not";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "t") else {
        return;
    };
    let cg = linux.cgroup("sec-token");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    let token = "5c1e7b0a9d3f44e1b2c6a8f0e7d9c3b1";
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let api = format!("[api]\ntoken_file = \"{}\"\n", token_file.display());

    // A token file others can read, or the user's, is refused at start: one line, exit 2.
    for (mode, owner, needle) in [
        (0o640, None, "mode 0640"),
        (0o600, Some(user.uid), "not root"),
    ] {
        chmod(&token_file, mode);
        std::os::unix::fs::chown(&token_file, owner.or(Some(0)), None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = format!("{}\n{api}\n", adopt_config(&cg.path, "1G", ""));
        let (code, stderr, _) = daemon_to_exit(dir.path(), &config);
        assert_eq!(code, 2, "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("token_file") && stderr.contains(needle),
            "{stderr}"
        );
        assert!(!stderr.contains(token), "{stderr}");
    }
    std::os::unix::fs::chown(&token_file, Some(0), None).unwrap();
    chmod(&token_file, 0o600);

    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = daemon_for(&cg, tmp.path(), &api);
    let wrong = memtide_api::Client::new(daemon.addr, DEADLINE).with_token("5c1e7b0a");
    let (code, text) = wrong
        .request("PATCH", "/v1/tenants/app", Some(r#"{"shares": 5}"#))
        .unwrap();
    assert_eq!(code, 403, "{text}");
    assert!(!text.contains(token), "{text}");
    // The user, with a guess.
    let tcp = daemon.addr.to_string();
    let answer = attack_request(
        &user,
        &["--tcp", &tcp],
        &http(
            "PATCH",
            "/v1/tenants/app",
            "Authorization: Bearer 5c1e7b0a9d3f44e1b2c6a8f0e7d9c3b2\\n",
            r#"{"shares": 5}"#,
        ),
    );
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert_eq!(daemon.tenant("app").shares, 1000);

    let right = memtide_api::Client::new(daemon.addr, DEADLINE).with_token(token);
    let (code, text) = right
        .request("PATCH", "/v1/tenants/app", Some(r#"{"shares": 2000}"#))
        .unwrap();
    assert_eq!(code, 200, "{text}");
    daemon.wait_until("the change shows", DEADLINE, |s| {
        s.tenants[0].shares == 2000
    });
    assert!(
        !daemon.log_text().contains(token),
        "the token is never logged"
    );
}

/// Starts `memtide-attack hold` as the user against `target` (`--tcp ADDR` or `--unix PATH`)
/// and waits until it has opened its connections.
fn flood(
    user: &UnprivilegedUser,
    target: [&str; 2],
    count: u32,
    hold_secs: u32,
) -> (Child, String) {
    let mut child = user
        .attack()
        .arg("hold")
        .args(target)
        .args(["--count", &count.to_string()])
        .args(["--hold", &hold_secs.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("memtide-attack runs");
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    (child, line.trim().to_string())
}

#[test]
fn an_idle_flood_by_a_user_keeps_the_operator_in() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "an_idle_flood_by_a_user_keeps_the_operator_in";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "f") else {
        return;
    };
    let cg = linux.cgroup("sec-flood");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = daemon_for(&cg, tmp.path(), "");
    let (mut attacker, opened) = flood(&user, ["--tcp", &daemon.addr.to_string()], 1000, 30);
    eprintln!("the user's flood: {opened}");
    assert!(opened.starts_with("opened "), "{opened}");
    let ticks = daemon.status().ticks;

    let started = Instant::now();
    let snapshot = memtide_api::Client::new(daemon.addr, DEADLINE)
        .status()
        .expect("root's GET over TCP is answered during the flood");
    let get_tcp = started.elapsed();
    assert_eq!(snapshot.tenants.len(), 1);
    let started = Instant::now();
    let (code, text) = daemon
        .changer(DEADLINE)
        .request("PATCH", "/v1/tenants/app", Some(r#"{"shares": 1500}"#))
        .expect("root's PATCH over the socket is answered during the flood");
    let patch_socket = started.elapsed();
    assert_eq!(code, 200, "{text}");
    // A second flood on top of the first, then the same again.
    let (mut second, opened_again) = flood(&user, ["--tcp", &daemon.addr.to_string()], 1000, 30);
    let started = Instant::now();
    memtide_api::Client::new(daemon.addr, DEADLINE)
        .status()
        .expect("answered during two floods");
    let get_tcp_2 = started.elapsed();
    eprintln!(
        "during the flood ({opened}, then {opened_again} more): GET over TCP {get_tcp:?} \
         then {get_tcp_2:?}, PATCH over the socket {patch_socket:?}"
    );
    daemon.wait_until("the daemon keeps ticking", DEADLINE, |s| {
        s.ticks >= ticks + 4 && s.tenants[0].shares == 1500
    });
    let _ = attacker.kill();
    let _ = attacker.wait();
    let _ = second.kill();
    let _ = second.wait();
}

#[test]
fn the_socket_checks_its_peer_beyond_the_files_mode() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "the_socket_checks_its_peer_beyond_the_files_mode";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "g") else {
        return;
    };
    let Some(other) = UnprivilegedUser::create(test, "o") else {
        return;
    };
    let cg = linux.cgroup("sec-peer");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let api = format!("[api]\ngroup = \"{}\"\n", user.gid);
    let mut daemon = daemon_for(&cg, tmp.path(), &api);
    let meta = std::fs::metadata(&daemon.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), user.gid);
    let socket = daemon.socket.display().to_string();
    let patch = |shares: u32| {
        http(
            "PATCH",
            "/v1/tenants/app",
            "",
            &format!(r#"{{"shares": {shares}}}"#),
        )
    };

    // A member of the group may change.
    let answer = attack_request(&user, &["--unix", &socket], &patch(1200));
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    daemon.wait_until("the member's change shows", DEADLINE, |s| {
        s.tenants[0].shares == 1200
    });
    // Someone else cannot connect; with the file opened wide by mistake, the peer check
    // still refuses them.
    let answer = attack_request(&other, &["--unix", &socket], &patch(5));
    assert!(answer.contains("Permission denied"), "{answer}");
    chmod(&daemon.socket, 0o666);
    let answer = attack_request(&other, &["--unix", &socket], &patch(5));
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.contains(&format!("uid {} may not use this socket", other.uid)),
        "{answer}"
    );
    let ticks = daemon.status().ticks;
    daemon.wait_until("two more ticks", DEADLINE, |s| s.ticks >= ticks + 2);
    assert_eq!(daemon.tenant("app").shares, 1200);
}

#[test]
fn an_idle_flood_of_the_socket_by_a_group_member_keeps_root_in() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "an_idle_flood_of_the_socket_by_a_group_member_keeps_root_in";
    let Some(linux) = linux(test) else {
        return;
    };
    // Declared before its member, so that it is removed after it.
    let Some(group) = UnprivilegedGroup::create(test, "a") else {
        return;
    };
    let Some(member) = UnprivilegedUser::create_in(test, "s", &group) else {
        return;
    };
    let cg = linux.cgroup("sec-sockflood");
    let _toucher = cg.spawn_toucher(&["--active", "16M"]);
    let tmp = tempfile::tempdir().unwrap();
    let api = format!("[api]\ngroup = \"{}\"\n", group.name);
    let mut daemon = daemon_for(&cg, tmp.path(), &api);
    let meta = std::fs::metadata(&daemon.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), group.gid);
    let socket = daemon.socket.display().to_string();

    // The member may change (its supplementary group, read from /proc at accept), so its
    // connections are served, not refused.
    let answer = attack_request(
        &member,
        &["--unix", &socket],
        &http("PATCH", "/v1/tenants/app", "", r#"{"shares": 1200}"#),
    );
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    let (mut attacker, opened) = flood(&member, ["--unix", &socket], 1000, 30);
    eprintln!("the member's flood: {opened}");
    assert_eq!(opened, "opened 1000 of 1000");
    let ticks = daemon.status().ticks;

    let started = Instant::now();
    let snapshot = daemon
        .changer(DEADLINE)
        .status()
        .expect("root's GET over the socket is answered during the flood");
    let get_socket = started.elapsed();
    assert_eq!(snapshot.tenants.len(), 1);
    // The member's change shows in the snapshot of the tick after it (a GET right after the
    // flood may come before that tick: seen twice in full runs).
    daemon.wait_until("the member's change shows", DEADLINE, |s| {
        s.tenants[0].shares == 1200
    });
    let started = Instant::now();
    let (code, text) = daemon
        .changer(DEADLINE)
        .request("PATCH", "/v1/tenants/app", Some(r#"{"shares": 1500}"#))
        .expect("root's PATCH over the socket is answered during the flood");
    let patch_socket = started.elapsed();
    assert_eq!(code, 200, "{text}");
    // A second flood on top of the first, then the same again.
    let (mut second, opened_again) = flood(&member, ["--unix", &socket], 1000, 30);
    let started = Instant::now();
    daemon
        .changer(DEADLINE)
        .status()
        .expect("answered during two floods");
    let get_socket_2 = started.elapsed();
    eprintln!(
        "during the member's flood of the socket ({opened}, then {opened_again} more): GET over \
         the socket {get_socket:?} then {get_socket_2:?}, PATCH over the socket {patch_socket:?}"
    );
    daemon.wait_until("the daemon keeps ticking", DEADLINE, |s| {
        s.ticks >= ticks + 4 && s.tenants[0].shares == 1500
    });
    let _ = attacker.kill();
    let _ = attacker.wait();
    let _ = second.kill();
    let _ = second.wait();
}

/// Runs `memtide daemon` on `config` in `dir` as `daemon_to_exit` does, but for at most
/// [`DEADLINE`]: (exit code, stderr, the state file). A daemon still running then started where
/// it should have been refused: it is killed and the test fails.
fn daemon_refused(dir: &Path, config: &str) -> (i32, String, std::path::PathBuf) {
    let (state, path, err) = (
        dir.join("state.json"),
        dir.join("memtide.toml"),
        dir.join("stderr"),
    );
    let text = config
        .replace("{listen}", &format!("127.0.0.1:{}", free_port()))
        .replace("{state}", &state.display().to_string());
    std::fs::write(&path, text).unwrap();
    let mut child = std::process::Command::new(memtide_path())
        .arg("daemon")
        .arg("--config")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let until = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the daemon started instead of being refused; stderr:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err).unwrap();
    (status.code().unwrap_or(-1), stderr, state)
}

#[test]
fn a_second_daemon_cannot_take_a_live_daemon_s_socket_and_replaces_a_dead_one_s() {
    use std::os::unix::fs::MetadataExt;
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_second_daemon_cannot_take_a_live_daemon_s_socket_and_replaces_a_dead_one_s";
    let Some(linux) = linux(test) else {
        return;
    };
    let (cg, other) = (linux.cgroup("sec-sock-a"), linux.cgroup("sec-sock-b"));
    other.set_limit_bytes(800 * MIB);
    let _touchers = [&cg, &other].map(|c| c.spawn_toucher(&["--active", "8M"]));
    let tmp = tempfile::tempdir().unwrap();
    let mut first = daemon_for(&cg, tmp.path(), "");
    let socket = first.socket.clone();
    let inode = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.ino()).ok();
    let bound = inode(&socket);

    // Another state file, another tenant, the same [api] socket: refused at start, one line,
    // exit 2, before anything on the host changes.
    let second_dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[api]\nsocket = \"{}\"\n",
        adopt_config(&other.path, "1G", "").replace("name = \"app\"", "name = \"second\""),
        socket.display()
    );
    let (code, stderr, state) = daemon_refused(second_dir.path(), &config);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "API socket {}: another process is serving it",
            socket.display()
        )),
        "{stderr}"
    );
    assert!(!state.exists());
    assert_eq!(limit_bytes(&other.sample()), Some(800 * MIB));
    // The live daemon keeps its socket and answers on it.
    assert_eq!(
        inode(&socket),
        bound,
        "the live daemon's socket is left in place"
    );
    let served = first
        .changer(DEADLINE)
        .status()
        .expect("the first still serves");
    assert_eq!(served.tenants[0].name, "app");

    // A daemon that died leaves its socket behind: the next one replaces it.
    assert!(!first.signal_and_wait(libc::SIGKILL).success());
    assert!(socket.exists(), "a killed daemon cannot remove its socket");
    let mut second = Daemon::start(second_dir.path(), &config, &[]);
    second.wait_until("second managed", DEADLINE, |s| s.tenants.len() == 1);
    let served = memtide_api::Client::unix(&socket, DEADLINE)
        .status()
        .expect("the second daemon serves on the socket");
    assert_eq!(served.tenants[0].name, "second");
    assert_ne!(inode(&socket), bound);
    assert!(second.signal_and_wait(libc::SIGTERM).success());
    assert!(!socket.exists(), "a daemon removes its own socket at exit");
}
