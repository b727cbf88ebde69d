//! The private container engines the container tests stand on (host/engines.rs): for Docker and Podman each, a container with a memory limit lands in a cgroup under the engine's parent with that limit, `stats` reads as the engine's own CLI shows it, the daemon restarts on its data, and dropping the engine leaves no cgroup, process, mount or directory behind.

use crate::host::engines::{
    cgroup_dirs, mounts_under, parse_size, processes_naming, unix_now, Engine, EngineKind, BUSY,
    IDLE,
};
use crate::host::*;
use std::time::{Duration, Instant};

const LIMIT: u64 = 200 * MIB;
/// What the toucher holds, and the page cache written beside it (inactive until read again).
const ACTIVE: u64 = 50 * MIB;
const CACHE_MIB: u64 = 30;
/// How far our reading of `stats` may be from the CLI's, read a moment apart.
const STATS_SLACK: u64 = 4 * MIB;

#[test]
fn engine_fixture_runs_restarts_and_cleans_up() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "engine_fixture_runs_restarts_and_cleans_up";
    let Some(linux) = linux(test) else {
        return;
    };
    for kind in [EngineKind::Docker, EngineKind::Podman] {
        if kind.installed(test) {
            check_engine(kind, &linux, test);
        }
    }
}

fn check_engine(kind: EngineKind, linux: &Linux, test: &str) {
    let what = kind.name();
    let own_before = cgroup_dirs(&linux.hierarchy.own_cgroup);
    let mut engine = Engine::start(kind, linux, test);
    let (parent, dir) = (engine.parent().to_string(), engine.dir().to_path_buf());

    let id = engine.run(
        "toucher",
        Some("200m"),
        &["/usr/local/bin/memtide-toucher", "--active", "50M"],
    );
    let cgroup = engine.cgroup("toucher");
    let leaf = match kind {
        EngineKind::Docker => id.clone(),
        EngineKind::Podman => format!("libpod-{id}"),
    };
    assert_eq!(
        cgroup,
        format!("{parent}/{leaf}"),
        "{what}: the container's memory cgroup is not under the engine's parent"
    );
    let cg = linux.memory_cgroup(&cgroup);
    let sample = cg.sample().expect("sample the container's cgroup");
    assert_eq!(
        limit_bytes(&sample),
        Some(LIMIT),
        "{what}: the container's cgroup limit"
    );
    assert_eq!(
        engine.hostconfig_memory("toucher").0,
        LIMIT as i64,
        "{what}: HostConfig.Memory"
    );
    let start = Instant::now();
    while cg.sample().map_or(0, |s| s.usage.0) < ACTIVE {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: the toucher never held {} MiB",
            mib(ACTIVE)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Page cache the engines count differently: Docker's CLI leaves the inactive part out,
    // Podman's counts it.
    engine.ok(&[
        "exec",
        "toucher",
        "busybox",
        "dd",
        "if=/dev/zero",
        "of=/cache",
        "bs=1M",
        &format!("count={CACHE_MIB}"),
    ]);
    let inactive = inactive_file(cg.dir());
    assert!(
        inactive >= CACHE_MIB * MIB * 2 / 3,
        "{what}: the {CACHE_MIB} MiB just written is not inactive page cache ({:.1} MiB), so the \
         comparison below would not tell the engines' formulas apart",
        mib(inactive)
    );
    let (usage, limit) = engine.stats("toucher");
    let (cli_usage, cli_limit) = cli_stats(&engine, "toucher");
    let raw = cg.sample().expect("sample the container's cgroup").usage.0;
    println!(
        "{what}: stats {:.1} MiB / {:.1} MiB, the CLI's {:.1} MiB / {:.1} MiB, the cgroup's usage \
         {:.1} MiB with {:.1} MiB inactive page cache",
        mib(usage),
        mib(limit),
        mib(cli_usage),
        mib(cli_limit),
        mib(raw),
        mib(inactive)
    );
    assert!(
        usage.abs_diff(cli_usage) <= STATS_SLACK,
        "{what}: stats() reads {usage} bytes where the CLI shows {cli_usage}"
    );
    assert!(
        limit.abs_diff(cli_limit) <= LIMIT / 100 && limit == LIMIT,
        "{what}: stats() reads a limit of {limit} bytes where the CLI shows {cli_limit}"
    );

    let pid = engine.pid("toucher");
    engine.restart_daemon();
    assert!(engine.answers(), "{what}: no answer after the restart");
    assert!(
        engine.ok(&["images", "-q"]).lines().count() >= 1,
        "{what}: the image is gone after the restart"
    );
    let running = engine.ok(&["inspect", "-f", "{{.State.Running}}", "toucher"]);
    match kind {
        // dockerd stops its containers as it shuts down; the restarted daemon starts it again.
        EngineKind::Docker => {
            assert_eq!(running, "false", "docker: the container outlived dockerd");
            engine.ok(&["start", "toucher"]);
            assert_eq!(engine.cgroup("toucher"), cgroup, "docker: the cgroup moved");
        }
        // conmon keeps Podman's container running without the service.
        EngineKind::Podman => {
            assert_eq!(
                running, "true",
                "podman: the container died with the service"
            );
            assert_eq!(
                engine.pid("toucher"),
                pid,
                "podman: the container restarted"
            );
        }
    }
    // A CLI restart shows on the events stream (for Podman, the service's, from the CLI's
    // events file): the container dies and starts again.
    let since = unix_now();
    engine.ok(&["restart", "-t", "1", "toucher"]);
    let events = engine.events(since, unix_now() + 2);
    let actions: Vec<&str> = events
        .iter()
        .filter(|e| e["Type"] == "container" && e["Actor"]["ID"] == id.as_str())
        .filter_map(|e| e["Action"].as_str())
        .collect();
    let die = actions.iter().position(|a| *a == "die");
    let start = actions.iter().rposition(|a| *a == "start");
    assert!(
        die.is_some() && die < start,
        "{what}: no die then start of the container on the events stream: {actions:?}"
    );
    println!("{what}: events of a restart: {actions:?}");
    let pid = engine.pid("toucher");

    drop(engine);
    let left = cgroup_dirs(&parent);
    assert!(left.is_empty(), "{what}: cgroups left: {left:?}");
    let left = processes_naming(&dir);
    assert!(left.is_empty(), "{what}: processes left: {left:?}");
    let left = mounts_under(&dir);
    assert!(left.is_empty(), "{what}: mounts left: {left:?}");
    assert!(!dir.exists(), "{what}: {} is left", dir.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "{what}: the container's process {pid} is left"
    );
    assert_eq!(
        cgroup_dirs(&linux.hierarchy.own_cgroup),
        own_before,
        "{what}: the hierarchies hold directories on our cgroup's path they did not before"
    );
}

/// The inactive page cache of a memory cgroup: v1 `total_inactive_file`, v2 `inactive_file`.
fn inactive_file(dir: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("memory.stat")).expect("read memory.stat");
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            matches!(k, "total_inactive_file" | "inactive_file").then(|| v.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("no inactive_file in memory.stat:\n{text}"))
}

/// MEM USAGE and LIMIT as the engine's CLI prints them (`docker stats --no-stream`, `podman
/// stats --no-stream --format json`), in bytes.
fn cli_stats(engine: &Engine, name: &str) -> (u64, u64) {
    let text = match engine.kind() {
        EngineKind::Docker => {
            engine.ok(&["stats", "--no-stream", "--format", "{{.MemUsage}}", name])
        }
        EngineKind::Podman => {
            let json = engine.ok(&["stats", "--no-stream", "--format", "json", name]);
            let v: serde_json::Value =
                serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
            v[0]["mem_usage"]
                .as_str()
                .unwrap_or_else(|| panic!("no mem_usage in {json}"))
                .to_string()
        }
    };
    let (usage, limit) = text
        .split_once('/')
        .unwrap_or_else(|| panic!("MEM USAGE / LIMIT {text:?}"));
    let size = |s: &str| parse_size(s).unwrap_or_else(|| panic!("a size {s:?} in {text:?}"));
    (size(usage), size(limit))
}

/// A container's limit as memtide's snapshot shows it.
fn limit_of(s: &memtide_api::Snapshot, name: &str) -> u64 {
    s.tenants
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.limit_bytes)
        .unwrap_or(u64::MAX)
}

/// The memory cgroup's limit, read from the kernel.
fn cgroup_limit(linux: &Linux, cgroup: &str) -> u64 {
    let sample = linux
        .memory_cgroup(cgroup)
        .sample()
        .unwrap_or_else(|e| panic!("sample {cgroup}: {e}"));
    limit_bytes(&sample).unwrap_or(u64::MAX)
}

/// The engine's limit for the busy and idle containers (`-m`), which memtide must give back.
const ENGINE_LIMIT: u64 = 600 * MIB;

/// The daemon's configuration for the containers of `engine`: a 450 MiB budget under the
/// engine's cgroup parent, the idle tax at 0.75, and three container tenants ("ghost" not made
/// yet).
fn containers_config(engine: &Engine) -> String {
    let kind = engine.kind().name();
    let head = config_head("500ms", engine.parent(), "450M");
    let tenant = |name: &str| {
        format!(
            "[[tenant]]\nname = \"{name}\"\ncontainer = \"{name}\"\nengine = \"{kind}\"\n\
             min = \"64M\"\nmax = \"600M\"\nestimator = \"sampling\"\n"
        )
    };
    format!(
        "{head}\n[policy]\ntax_rate = 0.75\nsampling_period = \"5s\"\n\n[engines]\n\
         {kind}_socket = \"{}\"\n\n{}\n{}\n{}",
        engine.socket().display(),
        tenant("busy"),
        tenant("idle"),
        tenant("ghost")
    )
}

/// Under one daemon, two containers of `kind` share the budget under the idle tax, the
/// engine's stats show memtide's limit, and memtide follows a restart, a container made after
/// it started, a re-creation, a rename, the engine's own restart and its own SIGKILL; at exit
/// every cgroup gets the engine's limit back.
fn containers_are_managed_by_name(kind: EngineKind, linux: &Linux, test: &str) {
    let what = kind.name();
    let mut engine = Engine::start(kind, linux, test);
    // Both hold what they touch before memtide starts: 550 MiB against a 450 MiB budget.
    engine.run_busy_and_idle(linux);
    let tmp = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut daemon = Daemon::start(tmp.path(), &containers_config(&engine), &[]);
    daemon.wait_for_log(
        &[
            "waiting",
            "tenant=ghost",
            &format!("{what} has no container named"),
        ],
        Duration::from_secs(20),
    );
    let s = daemon.wait_until("both containers adopted", Duration::from_secs(30), |s| {
        ["busy", "idle"]
            .iter()
            .all(|n| s.tenants.iter().any(|t| t.name == *n))
    });
    for name in ["busy", "idle"] {
        let t = s.tenants.iter().find(|t| t.name == name).unwrap();
        assert_eq!(t.cgroup, engine.cgroup(name), "{what}: {name}'s cgroup");
        assert_eq!(t.origin, "container", "{what}: {name}'s origin");
    }

    // The idle tax: budget 450 MiB, estimates about 300 and 10 MiB.
    let s = daemon.wait_until(
        "the idle container's limit falls and the busy one's rises",
        Duration::from_secs(240),
        |s| limit_of(s, "idle") <= 200 * MIB && limit_of(s, "busy") >= 300 * MIB,
    );
    println!(
        "{what}: idle tax converged in {:.1} s: idle limit {:.0} MiB, busy limit {:.0} MiB",
        start.elapsed().as_secs_f64(),
        mib(limit_of(&s, "idle")),
        mib(limit_of(&s, "busy"))
    );
    // The engine's own view of the limit is the cgroup's, which memtide wrote (Docker); Podman
    // 4.3 shows the limit it was created with (docs/containers.md). The limit moves each tick:
    // compared while memtide's stays put around the engine's reading.
    let agreed = Instant::now();
    loop {
        let before = daemon.tenant("idle");
        let (usage, limit) = engine.stats("idle");
        let written = cgroup_limit(linux, &engine.cgroup("idle"));
        let after = daemon.tenant("idle");
        let engine_limit = match kind {
            EngineKind::Docker => written,
            EngineKind::Podman => ENGINE_LIMIT,
        };
        let steady = before.limit_bytes == after.limit_bytes;
        if steady && after.limit_bytes == Some(written) && limit == engine_limit {
            println!(
                "{what}: idle: {what} stats {:.1} MiB / {:.1} MiB; memtide {:.1} MiB / {:.1} \
                 MiB; cgroup limit {:.1} MiB",
                mib(usage),
                mib(limit),
                mib(after.allocated_bytes),
                mib(after.limit_bytes.unwrap_or(0)),
                mib(written)
            );
            break;
        }
        assert!(
            agreed.elapsed() < Duration::from_secs(30),
            "{what}: stats' limit {limit}, the cgroup's {written}, memtide's {:?} then {:?} \
             never agreed",
            before.limit_bytes,
            after.limit_bytes
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A restart: the same container in a cgroup made again, adopted again with the engine's
    // limit found there, then moved by memtide again.
    let old_pid = engine.pid("idle");
    engine.ok(&["restart", "-t", "1", "idle"]);
    let new_cgroup = engine.cgroup("idle");
    daemon.wait_until(
        "the restarted idle container adopted again",
        Duration::from_secs(30),
        |s| {
            s.tenants
                .iter()
                .any(|t| t.name == "idle" && t.cgroup == new_cgroup)
        },
    );
    assert_ne!(
        engine.pid("idle"),
        old_pid,
        "{what}: the container did not restart"
    );
    daemon.wait_until(
        "the restarted idle container's limit lowered",
        Duration::from_secs(120),
        |s| limit_of(s, "idle") <= 300 * MIB,
    );

    // A container made after the daemon started is adopted once the engine says it runs.
    engine.run("ghost", Some("300m"), &IDLE[..3]);
    let ghost = engine.cgroup("ghost");
    daemon.wait_until("ghost adopted", Duration::from_secs(30), |s| {
        s.tenants
            .iter()
            .any(|t| t.name == "ghost" && t.cgroup == ghost)
    });

    // Made again under its name: a new id, a new cgroup.
    let busy_cgroup = engine.cgroup("busy");
    engine.ok(&["rm", "-f", "busy"]);
    engine.run("busy", Some("600m"), BUSY);
    let busy_again = engine.cgroup("busy");
    assert_ne!(
        busy_again, busy_cgroup,
        "{what}: a new container in the old cgroup"
    );
    daemon.wait_until(
        "busy made again and adopted",
        Duration::from_secs(30),
        |s| {
            s.tenants
                .iter()
                .any(|t| t.name == "busy" && t.cgroup == busy_again)
        },
    );

    // Renamed: the name leads to no container; the one that had it gets its limit back and
    // runs on unmanaged.
    let idle_cgroup = engine.cgroup("idle");
    engine.ok(&["rename", "idle", "idle-renamed"]);
    daemon.wait_for_log(
        &["dropped", "tenant=idle", "renamed or removed"],
        Duration::from_secs(30),
    );
    assert_eq!(
        cgroup_limit(linux, &idle_cgroup),
        ENGINE_LIMIT,
        "{what}: the renamed container did not get the engine's limit back"
    );

    // The engine itself restarts while memtide runs: Podman's containers run on (conmon
    // holds them), Docker's stop with dockerd and are started again; either way memtide
    // finds them once the engine answers again.
    engine.restart_daemon();
    if kind == EngineKind::Docker {
        daemon.wait_for_log(&["dropped", "tenant=busy"], Duration::from_secs(30));
        engine.ok(&["start", "busy", "ghost", "idle-renamed"]);
    }
    let (busy_again, ghost) = (engine.cgroup("busy"), engine.cgroup("ghost"));
    daemon.wait_until(
        "busy and ghost managed after the engine's restart",
        Duration::from_secs(60),
        |s| {
            [("busy", &busy_again), ("ghost", &ghost)]
                .iter()
                .all(|(n, c)| s.tenants.iter().any(|t| t.name == *n && t.cgroup == **c))
        },
    );

    // memtide killed while it holds busy under the engine's limit: the next start re-adopts
    // the containers under its state file's records, so at its own exit it gives back the
    // engine's limits, not the ones it found written.
    daemon.wait_until(
        "busy held under the engine's limit",
        Duration::from_secs(60),
        |s| limit_of(s, "busy") < ENGINE_LIMIT,
    );
    assert!(!daemon.signal_and_wait(libc::SIGKILL).success());
    daemon.spawn(&[]);
    daemon.wait_for_log(&["readopted", "tenant=busy"], Duration::from_secs(20));
    daemon.wait_for_log(&["readopted", "tenant=ghost"], Duration::from_secs(20));

    // At exit the others get the engine's limits back.
    let managed = [
        ("busy", busy_again, ENGINE_LIMIT),
        ("ghost", ghost, 300 * MIB),
    ];
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    for (name, cgroup, limit) in managed {
        assert_eq!(
            cgroup_limit(linux, &cgroup),
            limit,
            "{what}: {name} did not get the engine's limit back at exit"
        );
        let cg = linux.memory_cgroup(&cgroup);
        assert_eq!(
            cg.oom_kills().unwrap().unwrap_or(0),
            0,
            "{what}: {name} saw an OOM kill"
        );
    }
    assert_eq!(
        engine.ok(&["inspect", "-f", "{{.State.Running}}", "idle-renamed"]),
        "true",
        "{what}: the renamed container stopped"
    );
}

#[test]
fn docker_containers_are_managed_by_name_through_restarts_and_recreation() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "docker_containers_are_managed_by_name_through_restarts_and_recreation";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    if EngineKind::Docker.installed(test) {
        containers_are_managed_by_name(EngineKind::Docker, &linux, test);
    }
}

#[test]
fn podman_containers_are_managed_by_name_through_restarts_and_recreation() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "podman_containers_are_managed_by_name_through_restarts_and_recreation";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(_swap) = zram(test, "2G") else {
        return;
    };
    if EngineKind::Podman.installed(test) {
        containers_are_managed_by_name(EngineKind::Podman, &linux, test);
    }
}

/// Bad input: no engine to ask exits 2 with one line; an engine named whose socket is not
/// there, or a container it does not have, waits and says why.
#[test]
fn a_container_without_its_engine_waits_or_is_refused_on_one_line() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_container_without_its_engine_waits_or_is_refused_on_one_line";
    let Some(linux) = linux(test) else {
        return;
    };
    let parent = linux.cgroup("engines-bad");
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-engine.sock");
    let head = config_head("250ms", &parent.path, "1G");
    let sockets = format!(
        "[engines]\ndocker_socket = \"{0}\"\npodman_socket = \"{0}\"\n",
        missing.display()
    );
    let tenant = "[[tenant]]\nname = \"redis\"\ncontainer = \"redis-a\"\nmax = \"1G\"\n";
    let (code, stderr, state) = daemon_to_exit(tmp.path(), &format!("{head}{sockets}{tenant}"));
    assert_eq!(code, 2, "no engine to ask: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("tenant[0].container = \"redis-a\": has no engine to ask"),
        "{stderr}"
    );
    assert!(!state.exists(), "a refused start wrote its state file");

    // Named, its engine is waited for.
    let named = format!("{head}{sockets}{tenant}engine = \"docker\"\n");
    let mut daemon = Daemon::start(tmp.path(), &named, &[]);
    daemon.wait_for_log(
        &[
            "waiting",
            "tenant=redis",
            "its engine does not answer",
            "no-engine.sock",
        ],
        Duration::from_secs(20),
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
}

/// A Redis in a Docker container, named by the container and resized through
/// `memtide-adapter`: the adapter runs inside the container's cgroup (its memory is the
/// tenant's), in the host's namespaces, and reaches the server on a Unix socket the container
/// shares through a bind mount. When the budget runs short Redis is asked to shrink its own
/// pool, and its memory really goes back.
#[test]
fn a_redis_container_is_resized_through_its_adapter_in_the_container_s_cgroup() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_redis_container_is_resized_through_its_adapter_in_the_container_s_cgroup";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some((server, bench)) = crate::host::redis::redis_programs(test) else {
        return;
    };
    if !EngineKind::Docker.installed(test) {
        return;
    }
    memtide_testkit::samples::build_binaries();
    let engine = Engine::start(EngineKind::Docker, &linux, test);
    engine.import(
        "memtide-redis:1",
        &[(&server, "/usr/local/bin/redis-server")],
    );
    let shared = engine.dir().join("redis");
    std::fs::create_dir(&shared).unwrap();
    let volume = format!("{}:/shared", shared.display());
    engine.run_image(
        "redis",
        "memtide-redis:1",
        &["-v", &volume, "-m", "1g"],
        &[
            "/usr/local/bin/redis-server",
            "--port",
            "0",
            "--unixsocket",
            "/shared/redis.sock",
            "--unixsocketperm",
            "777",
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            "allkeys-lru",
        ],
    );
    let socket = shared.join("redis.sock");
    let up = Instant::now();
    while !socket.exists() {
        assert!(
            up.elapsed() < Duration::from_secs(20),
            "redis never opened {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // About 150 MiB of 4 KB values on 40,000 keys (random: most are written), through the
    // shared socket.
    let load = std::process::Command::new(&bench)
        .args([
            "-s",
            &socket.display().to_string(),
            "-t",
            "set",
            "-n",
            "120000",
            "-r",
            "40000",
            "-d",
            "4000",
            "-q",
        ])
        .output()
        .expect("run redis-benchmark");
    assert!(
        load.status.success(),
        "load redis: {}",
        String::from_utf8_lossy(&load.stderr)
    );
    let cgroup = engine.cgroup("redis");
    let cg = linux.memory_cgroup(&cgroup);
    let full = cg.sample().unwrap().usage.0;
    assert!(full > 120 * MIB, "redis holds {:.0} MiB", mib(full));

    let tmp = tempfile::tempdir().unwrap();
    let config = format!(
        r#"{}
[policy]
sampling_period = "1s"

[rails]
floor_margin = "16M"

[engines]
docker_socket = "{}"

[[tenant]]
name = "cache"
container = "redis"
engine = "docker"
min = "16M"
max = "1G"

[tenant.app]
kind = "redis"
url = "unix://{}"
min = "16M"
max = "256M"
"#,
        config_head("250ms", engine.parent(), "100M"),
        engine.socket().display(),
        socket.display()
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_for_log(&["agent_registered"], Duration::from_secs(30));
    // The adapter runs in the container's cgroup.
    let procs = cg.pids().expect("the container's processes");
    let adapter = procs.iter().find(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == "memtide-adapter")
    });
    assert!(
        adapter.is_some(),
        "no memtide-adapter among the container's processes {procs:?}"
    );
    daemon.wait_until(
        "redis shrinks under the budget",
        Duration::from_secs(90),
        |_| cg.sample().map_or(u64::MAX, |s| s.usage.0) < 100 * MIB,
    );
    daemon.wait_for_log(&["agent_answered", "status=done"], Duration::from_secs(10));
    let now = cg.sample().unwrap().usage.0;
    println!(
        "docker: redis in a container: {:.0} MiB before, {:.0} MiB after its adapter shrank it",
        mib(full),
        mib(now)
    );
    assert_eq!(
        cg.oom_kills().unwrap().unwrap_or(0),
        0,
        "redis saw an OOM kill"
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(
        engine.ok(&["inspect", "-f", "{{.State.Running}}", "redis"]),
        "true",
        "redis stopped"
    );
    assert_eq!(
        cgroup_limit(&linux, &cgroup),
        1 << 30,
        "redis's limit not given back"
    );
}
