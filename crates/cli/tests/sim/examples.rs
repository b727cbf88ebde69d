//! The shipped daemon examples load and pass admission control on an ordinary host (4 GiB of RAM, no swap), so a new user's first run manages something.

use memtide_daemon::config::DaemonConfig;
use memtide_daemon::run::check_admission;
use memtide_model::Bytes;
use std::path::PathBuf;

const GIB: u64 = 1 << 30;

fn example(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples")).join(name)
}

#[test]
fn every_daemon_example_is_admitted_on_a_4_gib_host_without_swap() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = example("");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("daemon-") || !name.ends_with(".toml") {
            continue;
        }
        let config = DaemonConfig::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!config.tenants.is_empty(), "{name} manages nothing");
        for (machine, swap) in [(4 * GIB, 0), (24 * GIB, 2 * GIB)] {
            check_admission(&config, Bytes(machine), Bytes(swap))
                .unwrap_or_else(|e| panic!("{name} on {machine} B RAM, {swap} B swap: {e}"));
        }
        seen += 1;
    }
    assert!(seen >= 2, "no daemon examples found in {}", dir.display());
}

#[test]
fn the_old_dry_run_example_would_have_been_refused_naming_memory_outside_the_budget() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let text = std::fs::read_to_string(example("daemon-dry-run.toml"))
        .unwrap()
        .replace("budget = \"2G\"", "reserve = \"1G\"")
        .replace("max = \"2G\"", "max = \"4G\"");
    let config = DaemonConfig::parse(&text, &example("daemon-dry-run.toml")).unwrap();
    let err = check_admission(&config, Bytes(24 * GIB), Bytes(2 * GIB)).unwrap_err();
    assert!(err.contains("max - min"), "{err}");
    assert!(err.contains("RAM beyond the budget plus swap"), "{err}");
}
