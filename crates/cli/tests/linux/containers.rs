//! The private container engines the container tests stand on (host/engines.rs): for Docker and Podman each, a container with a memory limit lands in a cgroup under the engine's parent with that limit, `stats` reads as the engine's own CLI shows it, the daemon restarts on its data, and dropping the engine leaves no cgroup, process, mount or directory behind.

use crate::host::engines::{
    cgroup_dirs, mounts_under, parse_size, processes_naming, unix_now, Engine, EngineKind,
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
