//! The state directory and the configuration cannot be turned against root: a directory or
//! file others can write is refused at start with one line (exit 2), a link planted where the
//! daemon writes is never followed, and a forged state file's records outside what the
//! configuration allows are refused and never acted on.

use crate::host::*;
use memtide_linux::host::{OomRecord, Origin, TenantRecord};
use memtide_linux::{Limit, LimitSettings};
use memtide_model::Bytes;
use memtide_qemu::Record;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_state_directory_or_config_others_can_write_is_refused_at_start() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_state_directory_or_config_others_can_write_is_refused_at_start";
    let Some(linux) = linux(test) else {
        return;
    };
    let Some(user) = UnprivilegedUser::create(test, "s") else {
        return;
    };
    let cg = linux.cgroup("sec-dir");
    cg.set_limit_bytes(800 * MIB);
    let config = adopt_config(&cg.path, "200M", "");

    // The state directory: the configuration elsewhere, its state file in a directory
    // anyone can write.
    let private = tempfile::tempdir().unwrap();
    let open = tempfile::tempdir().unwrap();
    chmod(open.path(), 0o777);
    let open_config = private.path().join("memtide.toml");
    let open_state = open.path().join("state.json");
    std::fs::write(
        &open_config,
        config
            .replace("{listen}", &format!("127.0.0.1:{}", free_port()))
            .replace("{state}", &open_state.display().to_string()),
    )
    .unwrap();
    let (code, _, stderr) = memtide(&["daemon", "--config", open_config.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("state directory")
            && stderr.contains("writable by others")
            && stderr.contains("chmod go-w"),
        "{stderr}"
    );
    assert_eq!(limit_bytes(&cg.sample()), Some(800 * MIB));
    assert!(!open_state.exists());

    // The configuration: group-writable, then owned by the user.
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("memtide.toml");
    let state = dir.path().join("state.json");
    let text = config
        .replace("{listen}", &format!("127.0.0.1:{}", free_port()))
        .replace("{state}", &state.display().to_string());
    std::fs::write(&config_path, &text).unwrap();
    chmod(&config_path, 0o664);
    let (code, _, stderr) = memtide(&["daemon", "--config", config_path.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("config file") && stderr.contains("writable by its group"),
        "{stderr}"
    );
    chmod(&config_path, 0o644);
    std::os::unix::fs::chown(&config_path, Some(user.uid), Some(user.gid)).unwrap();
    let (code, _, stderr) = memtide(&["daemon", "--config", config_path.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("owned by uid {}, not by root", user.uid)),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert_eq!(limit_bytes(&cg.sample()), Some(800 * MIB));
    assert!(!state.exists());
}

#[test]
fn links_planted_where_the_daemon_writes_are_replaced_never_followed() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "links_planted_where_the_daemon_writes_are_replaced_never_followed";
    let Some(linux) = linux(test) else {
        return;
    };
    let cg = linux.cgroup("sec-link");
    cg.set_limit_bytes(800 * MIB);
    let tmp = tempfile::tempdir().unwrap();
    // Root's own files, which a planted link would have the daemon overwrite.
    let victims = tempfile::tempdir().unwrap();
    let victim = |name: &str| {
        let path = victims.path().join(name);
        std::fs::write(&path, "root's own\n").unwrap();
        chmod(&path, 0o600);
        path
    };
    let (state_victim, log_victim) = (victim("state"), victim("log"));
    std::os::unix::fs::symlink(&state_victim, tmp.path().join("state.json.tmp")).unwrap();
    let mut daemon = Daemon::start(tmp.path(), &adopt_config(&cg.path, "300M", ""), &[]);
    let _toucher = cg.spawn_toucher(&["--active", "8M"]);
    daemon.wait_until("app managed", Duration::from_secs(20), |s| {
        s.tenants
            .iter()
            .any(|t| t.name == "app" && t.limit_bytes.is_some())
    });
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(
        std::fs::read_to_string(&state_victim).unwrap(),
        "root's own\n"
    );

    // A launched tenant's log: the launch is refused, naming it, and nothing is written.
    let launch = tempfile::tempdir().unwrap();
    std::fs::create_dir(launch.path().join("logs")).unwrap();
    std::os::unix::fs::symlink(&log_victim, launch.path().join("logs/web.log")).unwrap();
    let config = format!(
        "{}\n[[tenant]]\nname = \"web\"\nmin = \"16M\"\nmax = \"256M\"\n\
         command = [\"memtide-toucher\", \"--active\", \"8M\"]\n",
        config_head("250ms", "self", "300M")
    );
    let (code, stderr, _) = daemon_to_exit(launch.path(), &config);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("tenant log") && stderr.contains("web.log"),
        "the launch through a link was not refused naming the log: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&log_victim).unwrap(),
        "root's own\n"
    );
}

/// A record of the previous run as a forged file may hold.
fn record(name: &str, cgroup: &str, origin: Origin, limit: u64) -> Record {
    Record {
        linux: TenantRecord {
            name: name.to_string(),
            cgroup: cgroup.to_string(),
            origin,
            original: LimitSettings::V1 {
                limit: Limit::Bytes(Bytes(limit)),
                soft_limit: Limit::Max,
                memsw_limit: None,
                swappiness: Some(100),
            },
            oom: OomRecord {
                killer_was_disabled: Some(false),
                guard_on: true,
            },
            io: None,
        },
        vm: None,
    }
}

#[test]
fn a_forged_state_file_naming_cgroups_outside_the_configuration_is_refused_not_acted_on() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_forged_state_file_naming_cgroups_outside_the_configuration_is_refused";
    let Some(linux) = linux(test) else {
        return;
    };
    if linux.hierarchy.version != memtide_linux::fs::hierarchy::CgroupVersion::V1 {
        skip_or_fail(test, "the forged records are v1 records");
        return;
    }
    // The daemon's parent, its one tenant, and two cgroups beside the parent it must not touch.
    let parent = linux.cgroup("sec-parent");
    let app = format!("{}/app", parent.path);
    std::fs::create_dir(parent.dir().join("app")).unwrap();
    let mut app_process = std::process::Command::new("sh")
        .arg("-c")
        .arg("echo $$ > \"$0\" && exec sleep 600")
        .arg(parent.dir().join("app/cgroup.procs"))
        .spawn()
        .unwrap();
    let victim = linux.cgroup("sec-victim");
    victim.set_limit_bytes(800 * MIB);
    let bystander = linux.cgroup("sec-bystander");
    let mut process = bystander.spawn_toucher(&["--active", "4M"]);
    let forged = serde_json::json!({
        "format": 2,
        "pid": 1,
        "hierarchy": "v1",
        "tenants": [
            record("app", &victim.path, Origin::Adopted, 10 * MIB),
            record("ghost", &victim.path, Origin::Adopted, 10 * MIB),
            record("intruder", &bystander.path, Origin::Launched, 10 * MIB),
        ],
    });
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("state.json"), forged.to_string()).unwrap();
    let config = format!(
        "{}\n[rails]\nfloor_margin = \"16M\"\n[[tenant]]\nname = \"app\"\ncgroup = \"{app}\"\n\
         min = \"16M\"\nmax = \"1G\"\n",
        config_head("250ms", &parent.path, "200M")
    );
    let mut daemon = Daemon::start(tmp.path(), &config, &[]);
    daemon.wait_until("app managed", Duration::from_secs(20), |s| {
        s.tenants
            .iter()
            .any(|t| t.name == "app" && t.limit_bytes.is_some())
    });
    assert_eq!(limit_bytes(&victim.sample()), Some(800 * MIB));
    assert!(
        process.0.try_wait().unwrap().is_none(),
        "the bystander was stopped"
    );
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    let log = daemon.log_text();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("record_refused"))
        .collect();
    assert_eq!(refused.len(), 3, "not three refusals:\n{log}");
    for name in ["app", "ghost", "intruder"] {
        assert!(
            refused
                .iter()
                .any(|l| l.contains(&format!(" tenant={name} "))),
            "no refusal of {name}:\n{log}"
        );
    }
    // After the exit too: the victim keeps its limit and swappiness, the bystander runs on.
    let sample = victim.sample();
    assert_eq!(limit_bytes(&sample), Some(800 * MIB));
    let swappiness = std::fs::read_to_string(victim.dir().join("memory.swappiness")).unwrap();
    assert_ne!(
        swappiness.trim(),
        "100",
        "the forged swappiness was written"
    );
    assert!(
        process.0.try_wait().unwrap().is_none(),
        "the bystander was stopped"
    );
    assert!(bystander.dir().exists());
    let _ = app_process.kill();
    let _ = app_process.wait();
    let _ = std::fs::remove_dir(parent.dir().join("app"));
}
