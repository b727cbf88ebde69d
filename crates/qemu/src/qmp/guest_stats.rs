//! The guest's memory statistics as the virtio balloon relays them (`qom-get` of `guest-stats`): byte amounts as `Bytes`, event counts as `u64`, a statistic the guest never sent as `None`.
//!
//! Units, from Linux's driver (`drivers/virtio/virtio_balloon.c`, `update_balloon_stats`): swap
//! in and out are `pages_to_bytes(PSWPIN/PSWPOUT)`, so bytes, like free, total, available
//! memory and disk caches; major and minor faults and the hugetlb allocations and failures are
//! counts. QEMU (`hw/virtio/virtio-balloon.c`) passes the guest's values through unchanged and
//! keeps `-1` for a statistic not (yet) sent, which QEMU 7.2 prints as the unsigned
//! 18446744073709551615; both spellings read as `None`. Statistics newer QEMUs add
//! (`stat-oom-kills`, ...) are ignored.

use super::error::QmpError;
use memtide_model::Bytes;
use serde_json::Value;
use std::path::Path;

/// The guest's statistics at `last_update`. Every figure is `None` until the guest's driver has
/// sent it: with no driver, or polling off (`guest-stats-polling-interval` 0), all of them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestStats {
    /// `stat-swap-in`: memory swapped in since the guest booted.
    pub swap_in: Option<Bytes>,
    /// `stat-swap-out`: memory swapped out since the guest booted.
    pub swap_out: Option<Bytes>,
    /// `stat-major-faults`: page faults that read from disk, since boot.
    pub major_faults: Option<u64>,
    /// `stat-minor-faults`: all page faults, since boot (Linux's `pgfault`).
    pub minor_faults: Option<u64>,
    /// `stat-free-memory`: memory used for nothing.
    pub free_memory: Option<Bytes>,
    /// `stat-total-memory`: the guest's RAM less the balloon (and what the kernel reserves).
    pub total_memory: Option<Bytes>,
    /// `stat-available-memory`: Linux's `MemAvailable`.
    pub available_memory: Option<Bytes>,
    /// `stat-disk-caches`: the page cache.
    pub disk_caches: Option<Bytes>,
    /// `stat-htlb-pgalloc`: successful huge page allocations.
    pub hugetlb_allocations: Option<u64>,
    /// `stat-htlb-pgfail`: failed huge page allocations.
    pub hugetlb_failures: Option<u64>,
    /// `last-update`: when QEMU last received statistics, in seconds since the epoch on the
    /// host's clock; 0 when it never has.
    pub last_update: u64,
}

impl GuestStats {
    /// True when the guest has sent statistics at least once.
    pub fn ever_updated(&self) -> bool {
        self.last_update != 0
    }
}

/// QEMU's mark for a statistic the guest has not sent: -1, or its unsigned 64-bit reading.
fn unset(value: &Value) -> bool {
    value.as_i64() == Some(-1) || value.as_u64() == Some(u64::MAX)
}

/// Reads the answer to `qom-get` of `guest-stats` on the balloon at `device`.
pub(crate) fn parse_guest_stats(
    path: &Path,
    device: &str,
    value: &Value,
) -> Result<GuestStats, QmpError> {
    let bad = |why: String| QmpError::protocol(path, &value.to_string(), why);
    let stats = value
        .get("stats")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad(format!("guest-stats of {device}: no object `stats`")))?;
    let count = |name: &str| -> Result<Option<u64>, QmpError> {
        match stats.get(name) {
            None => Ok(None),
            Some(v) if unset(v) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                bad(format!(
                    "guest-stats of {device}: `{name}` is {v}, expected a non-negative integer or -1"
                ))
            }),
        }
    };
    let bytes = |name: &str| count(name).map(|c| c.map(Bytes));
    let last_update = value
        .get("last-update")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad(format!("guest-stats of {device}: no seconds `last-update`")))?;
    Ok(GuestStats {
        swap_in: bytes("stat-swap-in")?,
        swap_out: bytes("stat-swap-out")?,
        major_faults: count("stat-major-faults")?,
        minor_faults: count("stat-minor-faults")?,
        free_memory: bytes("stat-free-memory")?,
        total_memory: bytes("stat-total-memory")?,
        available_memory: bytes("stat-available-memory")?,
        disk_caches: bytes("stat-disk-caches")?,
        hugetlb_allocations: count("stat-htlb-pgalloc")?,
        hugetlb_failures: count("stat-htlb-pgfail")?,
        last_update,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEVICE: &str = "/machine/peripheral/balloon0";

    /// What QEMU 7.2 answers for a balloon whose guest has no driver.
    fn qemu_7_2_never_updated() -> Value {
        let unset = u64::MAX;
        json!({"stats": {"stat-htlb-pgalloc": unset, "stat-swap-out": unset,
            "stat-available-memory": unset, "stat-htlb-pgfail": unset, "stat-free-memory": unset,
            "stat-minor-faults": unset, "stat-major-faults": unset, "stat-total-memory": unset,
            "stat-swap-in": unset, "stat-disk-caches": unset}, "last-update": 0})
    }

    #[test]
    fn never_sent_statistics_are_none_in_both_spellings_of_minus_one() {
        let s = parse_guest_stats(Path::new("/s"), DEVICE, &qemu_7_2_never_updated()).unwrap();
        assert_eq!(s, GuestStats::default());
        assert!(!s.ever_updated());
        let s = parse_guest_stats(
            Path::new("/s"),
            DEVICE,
            &json!({"stats": {"stat-swap-in": -1, "stat-free-memory": 4096}, "last-update": 5}),
        )
        .unwrap();
        assert_eq!(s.swap_in, None);
        assert_eq!(s.free_memory, Some(Bytes(4096)));
        assert_eq!(s.last_update, 5);
    }

    #[test]
    fn byte_amounts_are_bytes_counts_are_counts_and_newer_statistics_are_ignored() {
        let s = parse_guest_stats(
            Path::new("/s"),
            DEVICE,
            &json!({"stats": {"stat-swap-in": 8192, "stat-swap-out": 40960,
                "stat-major-faults": 445, "stat-minor-faults": 1985905,
                "stat-free-memory": 802586624_u64, "stat-total-memory": 1041391616_u64,
                "stat-available-memory": 900000768_u64, "stat-disk-caches": 123456_u64,
                "stat-htlb-pgalloc": 0, "stat-htlb-pgfail": 0, "stat-oom-kills": 1},
                "last-update": 1460096372}),
        )
        .unwrap();
        assert_eq!(s.swap_in, Some(Bytes(8192)));
        assert_eq!(s.swap_out, Some(Bytes(40960)));
        assert_eq!(s.major_faults, Some(445));
        assert_eq!(s.minor_faults, Some(1985905));
        assert_eq!(s.free_memory, Some(Bytes(802586624)));
        assert_eq!(s.total_memory, Some(Bytes(1041391616)));
        assert_eq!(s.available_memory, Some(Bytes(900000768)));
        assert_eq!(s.disk_caches, Some(Bytes(123456)));
        assert_eq!(s.hugetlb_allocations, Some(0));
        assert_eq!(s.hugetlb_failures, Some(0));
        assert!(s.ever_updated());
    }

    #[test]
    fn statistics_missing_from_an_older_qemu_are_none() {
        let s = parse_guest_stats(
            Path::new("/s"),
            DEVICE,
            &json!({"stats": {"stat-total-memory": 1041391616_u64}, "last-update": 1}),
        )
        .unwrap();
        assert_eq!(s.total_memory, Some(Bytes(1041391616)));
        assert_eq!(s.available_memory, None);
        assert_eq!(s.disk_caches, None);
    }

    #[test]
    fn a_malformed_statistic_names_the_device_the_field_and_the_value() {
        let err = parse_guest_stats(
            Path::new("/run/vm1/qmp.sock"),
            DEVICE,
            &json!({"stats": {"stat-free-memory": -2}, "last-update": 1}),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, QmpError::Protocol { .. }));
        for want in ["/run/vm1/qmp.sock", DEVICE, "stat-free-memory", "-2"] {
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
        }
        let err = parse_guest_stats(Path::new("/s"), DEVICE, &json!({"last-update": 1}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`stats`"), "{err}");
    }
}
