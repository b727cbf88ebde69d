//! `memtide discover` on this machine's real cgroups: a parent holding one child cgroup with a process (and one without) is listed with the child's memory, and `--toml`'s starting configuration names the child and is one the daemon's loader takes.
//!
//! The engines' sockets are pointed at nothing, so that containers other tests run here do
//! not enter the configuration; systemd and libvirt are asked as they are on this machine
//! (each says why it has nothing, or lists what is there, outside the parent).

use crate::host::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process in the cgroup at `dir`: a shell that joins it, then sleeps; killed on drop.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper_in(dir: &std::path::Path) -> Sleeper {
    let procs = dir.join("cgroup.procs");
    let child = Command::new("sh")
        .arg("-c")
        .arg("echo $$ > \"$0\" && exec sleep 120")
        .arg(&procs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sleep");
    let sleeper = Sleeper(child);
    let start = Instant::now();
    while std::fs::read_to_string(&procs).map_or(true, |p| p.trim().is_empty()) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the sleeper never joined {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    sleeper
}

#[test]
fn discover_lists_a_child_cgroup_holding_a_process_and_its_config_parses() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "discover_lists_a_child_cgroup_holding_a_process_and_its_config_parses";
    let Some(linux) = linux(test) else {
        return;
    };
    let parent = linux.cgroup("discover");
    for child in ["busy", "idle"] {
        std::fs::create_dir(parent.dir().join(child)).unwrap();
    }
    let _sleeper = sleeper_in(&parent.dir().join("busy"));
    let busy = format!("{}/busy", parent.path);
    let tmp = tempfile::tempdir().unwrap();
    let nothing = tmp.path().join("none.sock");
    let nothing = nothing.to_str().unwrap();
    let args = |toml: bool| {
        let mut a = vec![
            "discover",
            "--parent",
            parent.path.as_str(),
            "--docker-socket",
            nothing,
            "--podman-socket",
            nothing,
        ];
        if toml {
            a.push("--toml");
        }
        a
    };

    let (code, table, stderr) = memtide(&args(false));
    assert_eq!(code, 0, "{stderr}\n{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{busy} ")))
        .unwrap_or_else(|| panic!("no row for {busy}:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "1", "one process: {row}");
    assert!(row.contains(" MiB"), "its usage: {row}");
    assert!(
        table.contains("(1 without a process not shown)"),
        "the idle child: {table}"
    );
    assert!(
        table.contains(&format!("docker: {nothing} is not a socket")),
        "{table}"
    );

    let (code, toml, stderr) = memtide(&args(true));
    assert_eq!(code, 0, "{stderr}\n{toml}");
    let config =
        memtide_daemon::config::DaemonConfig::parse(&toml, std::path::Path::new("discovered"))
            .unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(
        config.host.parent,
        memtide_daemon::config::ParentCgroup::Path(parent.path.clone())
    );
    let tenant = config
        .tenant("busy")
        .unwrap_or_else(|| panic!("no tenant busy:\n{toml}"));
    assert_eq!(tenant.adopted_cgroup(), Some(busy.as_str()));
    assert!(tenant.max_bytes >= 64 * MIB, "{toml}");

    let (code, _, stderr) = memtide(&["discover", "--parent", "/memtide-no-such-cgroup"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no such cgroup"), "{stderr}");
}
