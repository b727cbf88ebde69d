//! Application-level ballooning on the real host, with each SDK's sample pool (Rust, Go, Python, Java, C: real pools that give their memory back) in an adopted cgroup: it registers with `memtide daemon` over its balloon socket; when the budget runs short memtide asks the application to shrink its own pool before it lowers the limit, the pool's memory really goes back, the limit follows, and nothing is OOM-killed. At stop the agent hears bye and the limit is given back.

mod linux_host;

use linux_host::samples::Sdk;
use linux_host::*;
use std::time::{Duration, Instant};

/// `sdk`'s sample pool (256 MiB) in an adopted cgroup under a daemon whose budget is 128 MiB.
fn asks_the_application_first(test: &str, sdk: Sdk) {
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(sample) = sdk.build(test) else {
        return;
    };
    let cg = linux.cgroup("alb");
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("balloon.sock");
    // The pool joins the cgroup before it allocates, so all of it is charged there.
    let procs = cg.dir().join("cgroup.procs");
    let mut pool = sample.start(("256M", "32M", "256M"), &socket, Some(&procs));
    let start = Instant::now();
    while cg.sample().usage.0 < 250 * MIB {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the {sdk:?} pool never filled: {} bytes",
            cg.sample().usage.0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let config = format!(
        r#"
[daemon]
tick = "250ms"
listen = "{{listen}}"
state_file = "{{state}}"

[host]
parent = "self"
budget = "128M"

[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[[tenant]]
name = "app"
cgroup = "{}"
min = "16M"
max = "1G"
"#,
        cg.path
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    assert_eq!(daemon.state.parent(), socket.parent());

    // The agent registers for its own tenant.
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));

    // The budget is short: the application gives its pool back itself, and the limit follows.
    daemon.wait_until("the pool shrinks", Duration::from_secs(90), |_| {
        cg.sample().usage.0 < 150 * MIB
    });
    // The agent's answer is logged at the tick after it came.
    daemon.wait_for_log(&["agent_answered", "status=done"], Duration::from_secs(10));
    daemon.wait_until("the limit follows", Duration::from_secs(60), |_| {
        limit_bytes(&cg.sample()).is_some_and(|l| l < 200 * MIB)
    });
    // The application went first: no limit below its pool was written before its done.
    let log = daemon.log_text();
    let lines: Vec<&str> = log.lines().collect();
    let done = lines
        .iter()
        .position(|l| l.contains("agent_answered") && l.contains("status=done"))
        .unwrap();
    let first_low_limit = lines.iter().position(|l| {
        l.contains(" limit tenant=app ")
            && l.split("to_bytes=")
                .nth(1)
                .and_then(|v| v.split(' ').next())
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|b| b < 250 * MIB)
    });
    assert!(
        first_low_limit.is_some_and(|i| i > done),
        "a limit below the pool came before the application's done; log:\n{log}"
    );
    let sample = cg.sample();
    let limit = limit_bytes(&sample).unwrap();
    assert!(
        limit >= sample.usage.0,
        "limit {limit} below usage {}",
        sample.usage.0
    );
    assert!(
        pool.0.try_wait().unwrap().is_none(),
        "the application was killed; log:\n{}",
        daemon.log_text()
    );

    // At stop the agent hears bye and the cgroup gets its limit back.
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "daemon exit {status}");
    assert_eq!(limit_bytes(&cg.sample()), None, "the limit was given back");
    assert!(
        pool.0.try_wait().unwrap().is_none(),
        "the application lives on"
    );
    assert!(!socket.exists(), "the socket file is removed");
}

#[test]
fn rust_the_daemon_asks_the_application_first_and_the_limit_follows() {
    asks_the_application_first(
        "rust_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Rust,
    );
}

#[test]
fn go_the_daemon_asks_the_application_first_and_the_limit_follows() {
    asks_the_application_first(
        "go_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Go,
    );
}

#[test]
fn python_the_daemon_asks_the_application_first_and_the_limit_follows() {
    asks_the_application_first(
        "python_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Python,
    );
}

#[test]
fn java_the_daemon_asks_the_application_first_and_the_limit_follows() {
    asks_the_application_first(
        "java_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::Java,
    );
}

#[test]
fn c_the_daemon_asks_the_application_first_and_the_limit_follows() {
    asks_the_application_first(
        "c_the_daemon_asks_the_application_first_and_the_limit_follows",
        Sdk::C,
    );
}
