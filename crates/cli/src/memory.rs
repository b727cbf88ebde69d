//! A run's memory: the peak predicted from the scenario alone, the limit `memtide sim` holds a run to before it starts (`--max-memory`), and the peak measured after.
//!
//! The prediction adds each tenant's [`memtide_sim::footprint::tenant`] (its pages times the
//! bytes each structure keeps per simulated page, its fixed costs, what grows with the run),
//! over every workload the timeline gives it, to the process's own: the binary, the report's
//! bounded charts and the timeline's buffer. Nothing of the run is allocated to make it.
//!
//! The default limit is half of the machine's memory (`MemTotal`; 4 GiB where it cannot be
//! read): a simulation predicted to take more is almost surely a scenario with a count or a
//! size off by a factor, and a one-line refusal is better than the OOM killer at the end of
//! a long run on a machine others share.

use memtide_model::Bytes;
use memtide_scenario::{Event, Scenario};
use memtide_sim::footprint;
use memtide_sim::workload::Workload;
use std::path::Path;

/// The process beside its tenants: the binary's resident text, the runtime, the report's
/// charts (at most 32 tenants x 5 lines x 512 buckets, and the host's) and the timeline's
/// write buffer. Measured: 15.0 MiB for esx-fig4, ten small VMs, on 2026-12-01 (7.9 MiB
/// when first measured on 2026-11-30; why it grew was not looked into), so 16 MiB keeps the
/// prediction a bound for small runs.
const PROCESS_BYTES: u64 = 16 << 20;

/// The limit when the machine's memory cannot be read.
const FALLBACK_LIMIT: Bytes = Bytes(4 << 30);

/// A run predicted not to fit its limit (the scenario's or the command's fault: exit 2).
#[derive(Debug, thiserror::Error)]
#[error("scenario {scenario}: predicted peak memory {predicted} exceeds --max-memory {limit} ({tenants} tenants, {simulated} simulated, about 6 bytes per simulated 4 KiB page, 10 in a tenant of 256 MiB or more); raise --max-memory, or --max-memory none to lift it")]
pub struct OverLimit {
    pub scenario: String,
    pub predicted: Bytes,
    pub limit: Bytes,
    pub tenants: usize,
    pub simulated: Bytes,
}

/// The peak memory a run of `scenario` is predicted to reach.
pub fn predicted_peak(scenario: &Scenario) -> Bytes {
    let sharing = scenario.host.sharing.is_some();
    let tenants: u64 = scenario
        .tenants
        .iter()
        .map(|t| {
            let later = scenario.events.iter().filter_map(|e| match &e.event {
                Event::SetWorkload { tenant, workload } if *tenant == t.spec.id => Some(workload),
                _ => None,
            });
            std::iter::once(&t.vm.workload)
                .chain(later)
                .filter_map(|config| Workload::new(config, &scenario.cost).ok())
                .map(|w| footprint::tenant(&t.vm, &w, scenario.duration, sharing))
                .max()
                .unwrap_or(footprint::TENANT_BYTES)
        })
        .sum();
    Bytes(PROCESS_BYTES + tenants)
}

/// Refuses `scenario` when its predicted peak exceeds `limit` (`None`: no limit).
pub fn check(scenario: &Scenario, limit: Option<Bytes>) -> Result<Bytes, OverLimit> {
    let predicted = predicted_peak(scenario);
    match limit {
        Some(limit) if predicted > limit => Err(OverLimit {
            scenario: scenario.name.clone(),
            predicted,
            limit,
            tenants: scenario.tenants.len(),
            simulated: scenario
                .tenants
                .iter()
                .map(|t| t.vm.max.to_bytes())
                .fold(Bytes::ZERO, |a, b| Bytes(a.0 + b.0)),
        }),
        _ => Ok(predicted),
    }
}

/// The default `--max-memory`: half of the memory `root`'s /proc/meminfo reports, or 4 GiB.
pub fn default_limit(root: &Path) -> Bytes {
    memtide_linux::read_meminfo(root)
        .map(|m| Bytes(m.mem_total.0 / 2))
        .unwrap_or(FALLBACK_LIMIT)
}

/// `--max-memory`'s value: a size, or no limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<Bytes>);

/// `--max-memory`'s value: a size (`"4G"`), or `none` or `0` for no limit.
pub fn parse_limit(text: &str) -> Result<Limit, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(Limit(None));
    }
    match memtide_model::written::parse_size(text) {
        Ok(0) => Ok(Limit(None)),
        Ok(bytes) => Ok(Limit(Some(Bytes(bytes)))),
        Err(e) => Err(format!("{text:?} {e}, or none")),
    }
}

/// This process's peak resident memory so far (`VmHWM` in /proc/self/status), where the
/// kernel reports it.
pub fn measured_peak() -> Option<Bytes> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Bytes(kib * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_a_size_or_none() {
        assert_eq!(parse_limit("4G"), Ok(Limit(Some(Bytes(4 << 30)))));
        assert_eq!(parse_limit("none"), Ok(Limit(None)));
        assert_eq!(parse_limit("0"), Ok(Limit(None)));
        let err = parse_limit("lots").unwrap_err();
        assert!(err.starts_with("\"lots\" "), "{err}");
    }

    #[test]
    fn the_default_limit_is_half_the_machine_or_four_gib() {
        let dir = std::env::temp_dir().join(format!("memtide-memory-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc")).unwrap();
        std::fs::write(dir.join("proc/meminfo"), "MemTotal: 2048 kB\n").unwrap();
        assert_eq!(default_limit(&dir), Bytes(1024 * 1024));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(default_limit(&dir), FALLBACK_LIMIT);
    }

    #[test]
    fn this_process_reports_its_peak() {
        let peak = measured_peak().expect("Linux reports VmHWM");
        assert!(peak.0 > 1024 * 1024, "{peak}");
    }
}
