//! A block device's I/O statistics as sysfs shows them (`<sysfs>/block/<name>/stat`), and the mean time an operation took over an interval between two readings (the device's "await").
//!
//! The file is one line of numbers (Documentation/block/stat.rst): read I/Os, read merges,
//! read sectors, read ticks (ms), write I/Os, write merges, write sectors, write ticks, I/Os in
//! flight, io_ticks, time_in_queue; then, on newer kernels, discard I/Os, merges, sectors and
//! ticks (4.18) and flush I/Os and ticks (5.5). The eight read and write fields are required;
//! a later field the kernel does not print is `None`, never 0. The tick fields are printed as
//! 32-bit numbers of milliseconds, so they wrap after 49.7 days: a difference is taken modulo
//! 2^32.

use super::error::FsError;
use super::read::{parse_u64, read_optional_text};
use std::path::{Path, PathBuf};

/// One reading of a block device's `stat`. Ticks are the milliseconds its requests spent,
/// summed over requests (from the request's start to its completion: queued and served).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_merges: u64,
    pub read_sectors: u64,
    pub read_ticks_ms: u64,
    pub write_ios: u64,
    pub write_merges: u64,
    pub write_sectors: u64,
    pub write_ticks_ms: u64,
    pub in_flight: Option<u64>,
    /// Milliseconds the device had I/O in flight.
    pub io_ticks_ms: Option<u64>,
    /// Milliseconds of requests in flight, summed over requests.
    pub time_in_queue_ms: Option<u64>,
    pub discard_ios: Option<u64>,
    pub discard_ticks_ms: Option<u64>,
    pub flush_ios: Option<u64>,
    pub flush_ticks_ms: Option<u64>,
}

/// `<sysfs>/block/<name>/stat`.
pub fn stat_path(sysfs: &Path, name: &str) -> PathBuf {
    sysfs.join("block").join(name).join("stat")
}

/// Reads device `name`'s statistics under `sysfs` (`/sys` live); `None` when the device has no
/// `stat` (it is gone).
pub fn read_disk_stat(sysfs: &Path, name: &str) -> Result<Option<DiskStat>, FsError> {
    let path = stat_path(sysfs, name);
    match read_optional_text(&path)? {
        Some(text) => parse(&path, &text).map(Some),
        None => Ok(None),
    }
}

/// The fields in the kernel's order, as this reader names them in errors.
const FIELDS: [&str; 17] = [
    "read_ios",
    "read_merges",
    "read_sectors",
    "read_ticks",
    "write_ios",
    "write_merges",
    "write_sectors",
    "write_ticks",
    "in_flight",
    "io_ticks",
    "time_in_queue",
    "discard_ios",
    "discard_merges",
    "discard_sectors",
    "discard_ticks",
    "flush_ios",
    "flush_ticks",
];

/// The read and write fields every kernel prints.
const REQUIRED: usize = 8;

fn parse(path: &Path, text: &str) -> Result<DiskStat, FsError> {
    let mut values = [None; FIELDS.len()];
    for (i, token) in text.split_whitespace().take(FIELDS.len()).enumerate() {
        values[i] = Some(parse_u64(path, FIELDS[i], token)?);
    }
    if let Some(i) = values[..REQUIRED].iter().position(Option::is_none) {
        return Err(FsError::Missing {
            path: path.to_path_buf(),
            field: FIELDS[i].to_string(),
        });
    }
    let required = |i: usize| values[i].unwrap_or_default();
    Ok(DiskStat {
        read_ios: required(0),
        read_merges: required(1),
        read_sectors: required(2),
        read_ticks_ms: required(3),
        write_ios: required(4),
        write_merges: required(5),
        write_sectors: required(6),
        write_ticks_ms: required(7),
        in_flight: values[8],
        io_ticks_ms: values[9],
        time_in_queue_ms: values[10],
        discard_ios: values[11],
        discard_ticks_ms: values[14],
        flush_ios: values[15],
        flush_ticks_ms: values[16],
    })
}

/// A tick counter's milliseconds from `before` to `now`, modulo 2^32 (the kernel prints them
/// as 32-bit numbers).
fn ticks_since(now: u64, before: u64) -> u64 {
    now.wrapping_sub(before) & u64::from(u32::MAX)
}

impl DiskStat {
    /// Reads and writes completed.
    pub fn ios(&self) -> u64 {
        self.read_ios.saturating_add(self.write_ios)
    }

    /// The mean time a read or write completed since `before` took, queued and served, in µs:
    /// the difference of the read and write ticks over that of their operations. `None` when
    /// none completed, or when the operations went backwards (another device under the name).
    pub fn await_since(&self, before: &DiskStat) -> Option<f64> {
        let ios = self.ios().checked_sub(before.ios()).filter(|&n| n > 0)?;
        let ticks = ticks_since(self.read_ticks_ms, before.read_ticks_ms)
            + ticks_since(self.write_ticks_ms, before.write_ticks_ms);
        Some(ticks as f64 * 1000.0 / ios as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /sys/block/vda/stat as this host's 6.18 kernel printed it (17 fields).
    const VDA: &str = "18661980   309272 534065866  9760892  7309004  1307461 321263736  2523146        0  1074972 12413686   251463       44 275623288    48037  1515176    81609\n";

    fn fake(root: &Path, name: &str, text: &str) {
        let dir = root.join("block").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), text).unwrap();
    }

    #[test]
    fn every_field_a_recent_kernel_prints_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path(), "vda", VDA);
        let s = read_disk_stat(tmp.path(), "vda").unwrap().unwrap();
        assert_eq!((s.read_ios, s.read_ticks_ms), (18_661_980, 9_760_892));
        assert_eq!((s.write_ios, s.write_ticks_ms), (7_309_004, 2_523_146));
        assert_eq!(s.in_flight, Some(0));
        assert_eq!(s.time_in_queue_ms, Some(12_413_686));
        assert_eq!(s.discard_ticks_ms, Some(48_037));
        assert_eq!(
            (s.flush_ios, s.flush_ticks_ms),
            (Some(1_515_176), Some(81_609))
        );
    }

    #[test]
    fn fields_an_older_kernel_does_not_print_are_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path(), "sda", "10 0 80 20 5 0 40 30 0 40 50\n");
        let s = read_disk_stat(tmp.path(), "sda").unwrap().unwrap();
        assert_eq!(s.time_in_queue_ms, Some(50));
        assert_eq!(
            (s.discard_ios, s.flush_ios, s.flush_ticks_ms),
            (None, None, None)
        );
    }

    #[test]
    fn a_missing_read_or_write_field_or_a_bad_number_names_the_file_and_field() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path(), "short", "10 0 80 20 5 0\n");
        let msg = read_disk_stat(tmp.path(), "short").unwrap_err().to_string();
        assert!(
            msg.contains("short/stat") && msg.contains("write_sectors"),
            "{msg}"
        );
        fake(tmp.path(), "bad", "10 0 80 x 5 0 40 30\n");
        let msg = read_disk_stat(tmp.path(), "bad").unwrap_err().to_string();
        assert!(msg.contains("read_ticks") && msg.contains("\"x\""), "{msg}");
    }

    #[test]
    fn a_device_without_a_stat_file_reads_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_disk_stat(tmp.path(), "loop9").unwrap(), None);
    }

    #[test]
    fn await_is_the_ticks_of_the_interval_over_its_operations() {
        let before = DiskStat {
            read_ios: 100,
            read_ticks_ms: 50,
            write_ios: 100,
            write_ticks_ms: 150,
            ..DiskStat::default()
        };
        let now = DiskStat {
            read_ios: 300,
            read_ticks_ms: 450,
            write_ios: 200,
            write_ticks_ms: 750,
            ..DiskStat::default()
        };
        // (400 + 600) ms over 300 operations.
        let us = now.await_since(&before).unwrap();
        assert!((us - 3333.33).abs() < 0.01, "{us}");
        assert_eq!(before.await_since(&before), None, "no operations: no await");
        assert_eq!(before.await_since(&now), None, "operations went backwards");
    }

    #[test]
    fn tick_counters_that_wrapped_at_32_bits_still_give_the_interval() {
        let before = DiskStat {
            read_ios: 10,
            read_ticks_ms: u64::from(u32::MAX) - 9,
            ..DiskStat::default()
        };
        let now = DiskStat {
            read_ios: 20,
            read_ticks_ms: 10,
            ..DiskStat::default()
        };
        // 20 ms over 10 operations.
        assert_eq!(now.await_since(&before), Some(2000.0));
    }
}
