//! The density benchmark's policies and servers, named alike on the real host (`memtide bench density`) and in the simulator (scenarios/density-*.toml), and static sizing's rule.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What manages the tenants' memory in a trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Each tenant limited to its peak (what it holds filled, and 10% more); N tenants fit only
    /// while their limits add up to at most the budget.
    Static,
    /// No manager: the parent's limit alone, the kernel's own reclaim with swap (in the
    /// simulator: the host's paging with its victim choice, machine memory at the budget).
    Kernel,
    /// memtide, sampling estimator, the idle tax.
    Sampling,
    /// memtide, TWS.
    Tws,
    /// memtide, sampling, each server resized through `memtide-adapter`.
    App,
    /// Senpai (Meta's TMO agent, github.com/facebookincubator/senpai): one `senpai.py` per
    /// tenant cgroup, steering its memory.high by the cgroup's own memory pressure. Real
    /// cgroup v2 hosts only (the QEMU guest here); the simulator has no counterpart.
    Senpai,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Static => "static",
            Policy::Kernel => "kernel",
            Policy::Sampling => "sampling",
            Policy::Tws => "tws",
            Policy::App => "app",
            Policy::Senpai => "senpai",
        }
    }

    /// The policy named `name`.
    pub fn named(name: &str) -> Option<Policy> {
        [
            Policy::Static,
            Policy::Kernel,
            Policy::Sampling,
            Policy::Tws,
            Policy::App,
            Policy::Senpai,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }

    /// Whether memtide manages the tenants.
    pub fn is_memtide(self) -> bool {
        matches!(self, Policy::Sampling | Policy::Tws | Policy::App)
    }

    /// Whether a manager's processes run beside the tenants (memtide's or Senpai's), whose
    /// CPU a trial reports.
    pub fn has_manager(self) -> bool {
        self.is_memtide() || self == Policy::Senpai
    }

    /// Whether the simulator has it: not the application balloon (its simulated balloon
    /// drives cache, database and JVM pools, not a key-value server) nor Senpai.
    pub fn simulated(self) -> bool {
        !matches!(self, Policy::App | Policy::Senpai)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A server the benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    Redis,
    Memcached,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Memcached => "memcached",
        }
    }
}

const MIB: u64 = 1 << 20;

/// The limit static sizing gives a tenant whose kind holds `peak` bytes: 10% more, up to a
/// MiB.
pub fn static_limit(peak: u64) -> u64 {
    (peak + peak / 10).div_ceil(MIB) * MIB
}

/// How many of the first `max` tenants, whose static limits are `limit(0)`, `limit(1)`, ...,
/// fit in `budget` (tenants are added in index order, as trials start them).
pub fn static_fit(limit: impl Fn(usize) -> u64, budget: u64, max: usize) -> usize {
    let mut reserved = 0u64;
    for i in 0..max {
        reserved = reserved.saturating_add(limit(i));
        if reserved > budget {
            return i;
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_fits_the_most_tenants_whose_limits_add_up_to_the_budget() {
        let limit = |i: usize| {
            if i.is_multiple_of(2) {
                110 * MIB
            } else {
                100 * MIB
            }
        };
        assert_eq!(
            static_fit(limit, 2048 * MIB, 48),
            19,
            "10 x 110 + 9 x 100 = 2000 MiB"
        );
        assert_eq!(
            static_fit(limit, 2000 * MIB, 48),
            19,
            "exactly the budget fits"
        );
        assert_eq!(static_fit(limit, 100 * MIB, 48), 0);
        assert_eq!(static_fit(limit, u64::MAX, 48), 48, "at most max");
    }

    #[test]
    fn static_limits_are_the_peak_and_ten_percent_rounded_up_to_a_mib() {
        assert_eq!(static_limit(100 * MIB), 110 * MIB);
        assert_eq!(static_limit(100 * MIB + 1), 111 * MIB);
    }

    #[test]
    fn policies_are_found_by_name() {
        assert_eq!(Policy::named("tws"), Some(Policy::Tws));
        assert_eq!(Policy::named("none"), None);
        assert!(Policy::App.is_memtide() && !Policy::Kernel.is_memtide());
        assert_eq!(Policy::named("senpai"), Some(Policy::Senpai));
        assert!(Policy::Senpai.has_manager() && !Policy::Senpai.is_memtide());
        assert!(!Policy::Senpai.simulated() && Policy::Tws.simulated());
    }
}
