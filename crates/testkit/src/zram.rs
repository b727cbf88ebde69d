//! zram swap for the tests that need swap: made by scripts/zram-swap.sh only when the host
//! has none, removed after.

use crate::{repo, skip_or_fail, swap_total};
use std::path::PathBuf;
use std::process::Command;

/// A zram swap device made by scripts/zram-swap.sh, removed on drop; `None` (after skipping
/// or failing) when it cannot be made.
pub struct Zram {
    state: PathBuf,
}

pub fn zram(test: &str, size: &str) -> Option<Zram> {
    if swap_total() > 0 {
        skip_or_fail(
            test,
            "this host already has swap; the test sets up its own zram",
        );
        return None;
    }
    let state = std::env::temp_dir().join(format!("memtide-zram-{}.dev", std::process::id()));
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

impl Drop for Zram {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(repo().join("scripts/zram-swap.sh"))
            .arg("down")
            .env("MEMTIDE_ZRAM_STATE", &self.state)
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
}
