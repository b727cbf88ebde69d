//! /proc/stat's `cpu` line: the time every CPU spent since boot, in clock ticks, and the share of it the hypervisor stole.
//!
//! The line is `cpu user nice system idle iowait irq softirq steal guest guest_nice`; guest
//! time is already counted in user and nice, so the total is the first eight. A kernel that
//! prints fewer than eight fields has no steal count: `steal` is `None` then, not 0.

use super::error::FsError;
use super::read::read_text;
use std::path::Path;

/// The cumulative CPU time of all CPUs, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTime {
    /// Every state's time added up (user to steal).
    pub total: u64,
    /// Time the hypervisor ran something else while this machine's CPUs wanted to run.
    pub steal: Option<u64>,
}

impl CpuTime {
    /// The share of the time between `earlier` and `self` that was stolen (`None` without a
    /// steal count or without time between them).
    pub fn steal_since(&self, earlier: &CpuTime) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total).filter(|&t| t > 0)?;
        let steal = self.steal?.checked_sub(earlier.steal?)?;
        Some(steal as f64 / total as f64)
    }
}

/// Reads the `cpu` line of `<root>/proc/stat`.
pub fn read_cpu_time(root: &Path) -> Result<CpuTime, FsError> {
    let path = root.join("proc/stat");
    parse_cpu_time(&path, &read_text(&path)?)
}

/// Parses /proc/stat text read from `path`.
pub fn parse_cpu_time(path: &Path, text: &str) -> Result<CpuTime, FsError> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .ok_or_else(|| FsError::Missing {
            path: path.to_path_buf(),
            field: "cpu".into(),
        })?;
    let mut fields = Vec::new();
    for v in line.split_whitespace().take(8) {
        fields.push(v.parse::<u64>().map_err(|_| FsError::Parse {
            path: path.to_path_buf(),
            field: "cpu".into(),
            value: v.into(),
            expected: "a count of clock ticks",
        })?);
    }
    if fields.len() < 4 {
        return Err(FsError::Parse {
            path: path.to_path_buf(),
            field: "cpu".into(),
            value: line.trim().into(),
            expected: "at least user, nice, system and idle",
        });
    }
    Ok(CpuTime {
        total: fields.iter().sum(),
        steal: fields.get(7).copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_the_first_eight_fields_and_steal_the_eighth() {
        let text = "cpu  100 5 50 800 10 1 4 30 20 0\ncpu0 50 2 25 400 5 0 2 15 10 0\n";
        let t = parse_cpu_time(Path::new("/proc/stat"), text).unwrap();
        assert_eq!(t.total, 1000);
        assert_eq!(t.steal, Some(30));
        let later = CpuTime {
            total: 1200,
            steal: Some(80),
        };
        assert_eq!(later.steal_since(&t), Some(0.25));
    }

    #[test]
    fn an_old_kernel_without_steal_has_none_and_a_broken_line_is_an_error() {
        let t = parse_cpu_time(Path::new("s"), "cpu 1 2 3 4\n").unwrap();
        assert_eq!(t.steal, None);
        assert_eq!(t.steal_since(&t), None);
        for bad in ["cpu 1 x 3 4\n", "cpu 1 2\n", "intr 5\n"] {
            let e = parse_cpu_time(Path::new("s"), bad).unwrap_err().to_string();
            assert!(e.starts_with("s: "), "{bad}: {e}");
        }
    }
}
