//! zram swap for the tests that need swap: made by scripts/zram-swap.sh only when the host
//! has none, removed after. A device left by a test process that was killed (its state file
//! names a pid that no longer runs) is removed first, so one interrupted run does not fail
//! every later one with "this host already has swap".

use crate::{repo, skip_or_fail, swap_total};
use std::path::PathBuf;
use std::process::Command;

/// A zram swap device made by scripts/zram-swap.sh, removed on drop; `None` (after skipping
/// or failing) when it cannot be made.
pub struct Zram {
    state: PathBuf,
}

pub fn zram(test: &str, size: &str) -> Option<Zram> {
    remove_orphans();
    if swap_total() > 0 {
        skip_or_fail(
            test,
            "this host already has swap; the test sets up its own zram",
        );
        return None;
    }
    let state = std::env::temp_dir().join(format!("{STATE_PREFIX}{}.dev", std::process::id()));
    let out = Command::new("bash")
        .arg(repo().join("scripts/zram-swap.sh"))
        .args(["up", size])
        .env("MEMTIDE_ZRAM_STATE", &state)
        .output()
        .expect("run scripts/zram-swap.sh");
    if !out.status.success() {
        skip_or_fail(
            test,
            &format!(
                "scripts/zram-swap.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return None;
    }
    Some(Zram { state })
}

const STATE_PREFIX: &str = "memtide-zram-";

/// Takes down every device whose state file names a test process that is gone.
fn remove_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(STATE_PREFIX))
            .and_then(|n| n.strip_suffix(".dev"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!(
                "removing the zram swap left by test process {pid} ({})",
                entry.path().display()
            );
            down(&entry.path());
        }
    }
}

/// `scripts/zram-swap.sh down` for the device recorded in `state`.
fn down(state: &std::path::Path) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/zram-swap.sh"))
        .arg("down")
        .env("MEMTIDE_ZRAM_STATE", state)
        .output();
    if let Ok(o) = out {
        if !o.status.success() {
            eprintln!(
                "zram-swap.sh down: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        down(&self.state);
    }
}
