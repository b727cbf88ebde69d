//! cgroup v1 blkio readers: each takes the cgroup's directory (e.g. /sys/fs/cgroup/blkio/a) and reads BFQ's or the throttle's per-device counters, BFQ's weight or a throttle cap; also the per-device vocabulary (`DevNum`, `DeviceIo`) the v2 readers share.
//!
//! The stat files (`blkio.bfq.io_serviced`, `blkio.bfq.io_service_bytes` and their
//! `blkio.throttle.*` twins) print a block of lines per device the cgroup did I/O on —
//! `MAJ:MIN Read N`, `Write`, `Sync`, `Async`, `Discard`, `Total` — and a final `Total N`.
//! BFQ's files count the requests BFQ scheduled (on devices where BFQ is the active
//! scheduler); the throttle's count every bio the cgroup issued to any device, cache flushes
//! included (a flush is a write of no bytes there).

use super::error::FsError;
use super::read::{file_field, parse_u64, read_optional_cgroup_file};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::RangeInclusive;
use std::path::Path;

/// A block device's number, as the kernel prints it: `MAJ:MIN`.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl DevNum {
    /// Parses `MAJ:MIN` read from `path`'s `field`.
    pub fn parse(path: &Path, field: &str, text: &str) -> Result<DevNum, FsError> {
        let text = text.trim();
        let number = |s: &str| s.parse::<u32>().ok();
        match text.split_once(':') {
            Some((major, minor)) => match (number(major), number(minor)) {
                (Some(major), Some(minor)) => Ok(DevNum { major, minor }),
                _ => Err(bad_device(path, field, text)),
            },
            None => Err(bad_device(path, field, text)),
        }
    }
}

fn bad_device(path: &Path, field: &str, text: &str) -> FsError {
    FsError::Parse {
        path: path.to_path_buf(),
        field: field.to_string(),
        value: text.to_string(),
        expected: "a device number MAJ:MIN",
    }
}

/// Where a device's counters were read.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq)]
pub enum CounterSource {
    /// v1 `blkio.bfq.io_serviced` and `blkio.bfq.io_service_bytes`: requests BFQ scheduled.
    Bfq,
    /// v1 `blkio.throttle.io_serviced` and `blkio.throttle.io_service_bytes`: every bio,
    /// flushes counted as writes.
    Throttle,
    /// v2 `io.stat`.
    IoStat,
}

/// One device's cumulative I/O in a cgroup, since the cgroup first did I/O on it. Counters
/// from different sources differ (see [`CounterSource`]): compare readings of one source.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq)]
pub struct DeviceIo {
    pub device: DevNum,
    pub source: CounterSource,
    pub read_bytes: Bytes,
    pub write_bytes: Bytes,
    pub read_ios: u64,
    pub write_ios: u64,
    /// Discards; `None` on kernels that do not count them (v1 before 4.19, v2 before 5.2).
    pub discard_bytes: Option<Bytes>,
    pub discard_ios: Option<u64>,
}

/// Which blkio policy's stat files to read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BlkioStats {
    Bfq,
    Throttle,
}

impl BlkioStats {
    /// The operations file and the bytes file.
    fn files(self) -> (&'static str, &'static str) {
        match self {
            BlkioStats::Bfq => ("blkio.bfq.io_serviced", "blkio.bfq.io_service_bytes"),
            BlkioStats::Throttle => (
                "blkio.throttle.io_serviced",
                "blkio.throttle.io_service_bytes",
            ),
        }
    }

    fn source(self) -> CounterSource {
        match self {
            BlkioStats::Bfq => CounterSource::Bfq,
            BlkioStats::Throttle => CounterSource::Throttle,
        }
    }
}

/// One device's figures in one stat file (operations or bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Directions {
    read: u64,
    write: u64,
    discard: Option<u64>,
}

/// Reads the per-device counters of `stats`, one `DeviceIo` per device (a device listed twice
/// is summed). `None` when either file is absent (the policy is not in this kernel); a gone
/// cgroup is `FsError::Vanished`.
pub fn read_io(dir: &Path, stats: BlkioStats) -> Result<Option<Vec<DeviceIo>>, FsError> {
    let (ops_name, bytes_name) = stats.files();
    let (ops_path, bytes_path) = (dir.join(ops_name), dir.join(bytes_name));
    let Some(ops_text) = read_optional_cgroup_file(&ops_path)? else {
        return Ok(None);
    };
    let Some(bytes_text) = read_optional_cgroup_file(&bytes_path)? else {
        return Ok(None);
    };
    let ops = parse_stat(&ops_path, &ops_text)?;
    let bytes = parse_stat(&bytes_path, &bytes_text)?;
    // The kernel lists a device once the cgroup has I/O on it, in both files; a device in one
    // file only did its first I/O between the two reads, and had none in the other.
    let none = Directions {
        read: 0,
        write: 0,
        discard: None,
    };
    let mut devices: Vec<DevNum> = ops.iter().chain(&bytes).map(|(d, _)| *d).collect();
    devices.sort();
    devices.dedup();
    let find = |list: &[(DevNum, Directions)], device: DevNum| {
        list.iter()
            .find(|(d, _)| *d == device)
            .map_or(none, |(_, v)| *v)
    };
    Ok(Some(
        devices
            .into_iter()
            .map(|device| {
                let (o, b) = (find(&ops, device), find(&bytes, device));
                DeviceIo {
                    device,
                    source: stats.source(),
                    read_bytes: Bytes(b.read),
                    write_bytes: Bytes(b.write),
                    read_ios: o.read,
                    write_ios: o.write,
                    discard_bytes: b.discard.map(Bytes),
                    discard_ios: o.discard,
                }
            })
            .collect(),
    ))
}

/// Parses one stat file: per device, `Read` and `Write` (required), `Discard` (optional);
/// `Sync`, `Async` and `Total` are checked and skipped, as are operations a later kernel may
/// add. The last line, `Total N`, is checked. A device listed twice is summed.
fn parse_stat(path: &Path, text: &str) -> Result<Vec<(DevNum, Directions)>, FsError> {
    struct Partial {
        device: DevNum,
        read: Option<u64>,
        write: Option<u64>,
        discard: Option<u64>,
    }
    let mut partial: Vec<Partial> = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        match tokens.as_slice() {
            [] => {}
            ["Total", n] => {
                parse_u64(path, "Total", n)?;
            }
            [device, op, n] => {
                let device = DevNum::parse(path, "device", device)?;
                let value = parse_u64(path, &format!("{device} {op}"), n)?;
                let at = match partial.iter().position(|p| p.device == device) {
                    Some(at) => at,
                    None => {
                        partial.push(Partial {
                            device,
                            read: None,
                            write: None,
                            discard: None,
                        });
                        partial.len() - 1
                    }
                };
                let p = &mut partial[at];
                let slot = match *op {
                    "Read" => &mut p.read,
                    "Write" => &mut p.write,
                    "Discard" => &mut p.discard,
                    _ => continue,
                };
                *slot = Some(slot.unwrap_or(0).saturating_add(value));
            }
            _ => {
                return Err(FsError::Parse {
                    path: path.to_path_buf(),
                    field: file_field(path),
                    value: line.trim().to_string(),
                    expected: "`MAJ:MIN OPERATION N` or `Total N`",
                })
            }
        }
    }
    partial
        .into_iter()
        .map(|p| {
            let missing = |op: &str| FsError::Missing {
                path: path.to_path_buf(),
                field: format!("{} {op}", p.device),
            };
            Ok((
                p.device,
                Directions {
                    read: p.read.ok_or_else(|| missing("Read"))?,
                    write: p.write.ok_or_else(|| missing("Write"))?,
                    discard: p.discard,
                },
            ))
        })
        .collect()
}

/// The weights `blkio.bfq.weight` takes.
pub const BFQ_WEIGHTS: RangeInclusive<u64> = 1..=1000;

/// blkio.bfq.weight: the cgroup's BFQ weight among its siblings (default 100). `None` when the
/// file is absent: the root cgroup, or a kernel without BFQ.
pub fn read_bfq_weight(dir: &Path) -> Result<Option<u64>, FsError> {
    let path = dir.join("blkio.bfq.weight");
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let weight = parse_u64(&path, "blkio.bfq.weight", &text)?;
    if !BFQ_WEIGHTS.contains(&weight) {
        return Err(FsError::Parse {
            path,
            field: "blkio.bfq.weight".to_string(),
            value: weight.to_string(),
            expected: "a weight in 1..=1000",
        });
    }
    Ok(Some(weight))
}

/// One of the four blk-throttle limit files, each `MAJ:MIN N` per capped device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ThrottleFile {
    ReadBps,
    WriteBps,
    ReadIops,
    WriteIops,
}

impl ThrottleFile {
    pub const ALL: [ThrottleFile; 4] = [
        ThrottleFile::ReadBps,
        ThrottleFile::WriteBps,
        ThrottleFile::ReadIops,
        ThrottleFile::WriteIops,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ThrottleFile::ReadBps => "blkio.throttle.read_bps_device",
            ThrottleFile::WriteBps => "blkio.throttle.write_bps_device",
            ThrottleFile::ReadIops => "blkio.throttle.read_iops_device",
            ThrottleFile::WriteIops => "blkio.throttle.write_iops_device",
        }
    }
}

/// The caps in one throttle file, by device (an uncapped device is not listed). `None` when
/// the kernel has no blk-throttle.
pub fn read_throttle(
    dir: &Path,
    file: ThrottleFile,
) -> Result<Option<Vec<(DevNum, u64)>>, FsError> {
    let path = dir.join(file.name());
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let mut caps = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        match tokens.as_slice() {
            [] => {}
            [device, n] => {
                let device = DevNum::parse(&path, file.name(), device)?;
                caps.push((device, parse_u64(&path, &device.to_string(), n)?));
            }
            _ => {
                return Err(FsError::Parse {
                    path: path.clone(),
                    field: file.name().to_string(),
                    value: line.trim().to_string(),
                    expected: "`MAJ:MIN N`",
                })
            }
        }
    }
    Ok(Some(caps))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// blkio.bfq.io_serviced as this host's 6.18 kernel printed it after 4k random writes with
    /// fsync on a loop device.
    pub(crate) const SERVICED: &str = "7:0 Read 0\n7:0 Write 16537\n7:0 Sync 16537\n\
7:0 Async 0\n7:0 Discard 0\n7:0 Total 16537\nTotal 16537\n";
    pub(crate) const SERVICE_BYTES: &str = "7:0 Read 0\n7:0 Write 67735552\n\
7:0 Sync 67735552\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 67735552\nTotal 67735552\n";

    /// A v1 blkio cgroup as the kernel shows it: BFQ's and the throttle's files.
    pub(crate) fn fake_blkio(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        let files = [
            ("blkio.bfq.io_serviced", SERVICED),
            ("blkio.bfq.io_service_bytes", SERVICE_BYTES),
            ("blkio.throttle.io_serviced", "Total 0\n"),
            ("blkio.throttle.io_service_bytes", "Total 0\n"),
            ("blkio.bfq.weight", "100\n"),
            ("blkio.throttle.read_bps_device", ""),
            ("blkio.throttle.write_bps_device", ""),
            ("blkio.throttle.read_iops_device", ""),
            ("blkio.throttle.write_iops_device", ""),
        ];
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
    }

    const LOOP0: DevNum = DevNum { major: 7, minor: 0 };

    #[test]
    fn bfq_counters_combine_operations_and_bytes_per_device() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let io = read_io(tmp.path(), BlkioStats::Bfq).unwrap().unwrap();
        assert_eq!(
            io,
            vec![DeviceIo {
                device: LOOP0,
                source: CounterSource::Bfq,
                read_bytes: Bytes(0),
                write_bytes: Bytes(67735552),
                read_ios: 0,
                write_ios: 16537,
                discard_bytes: Some(Bytes(0)),
                discard_ios: Some(0),
            }]
        );
    }

    #[test]
    fn a_cgroup_without_io_lists_no_device() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let io = read_io(tmp.path(), BlkioStats::Throttle).unwrap().unwrap();
        assert!(io.is_empty());
    }

    #[test]
    fn devices_are_summed_and_each_kept_apart() {
        let text = "8:0 Read 5\n8:0 Write 6\n254:0 Read 1\n254:0 Write 2\n\
8:0 Read 10\n8:0 Write 20\nTotal 44\n";
        let parsed = parse_stat(Path::new("/cg/blkio.throttle.io_serviced"), text).unwrap();
        let sda = DevNum { major: 8, minor: 0 };
        let vda = DevNum {
            major: 254,
            minor: 0,
        };
        let get = |d: DevNum| parsed.iter().find(|(x, _)| *x == d).unwrap().1;
        assert_eq!((get(sda).read, get(sda).write), (15, 26));
        assert_eq!(
            (get(vda).read, get(vda).write, get(vda).discard),
            (1, 2, None)
        );
    }

    #[test]
    fn missing_bfq_file_reads_as_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        fs::remove_file(tmp.path().join("blkio.bfq.io_service_bytes")).unwrap();
        fs::remove_file(tmp.path().join("blkio.bfq.weight")).unwrap();
        assert_eq!(read_io(tmp.path(), BlkioStats::Bfq).unwrap(), None);
        assert_eq!(read_bfq_weight(tmp.path()).unwrap(), None);
    }

    #[test]
    fn a_device_in_one_file_only_had_no_io_in_the_other() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        fs::write(tmp.path().join("blkio.bfq.io_serviced"), "Total 0\n").unwrap();
        let io = read_io(tmp.path(), BlkioStats::Bfq).unwrap().unwrap();
        assert_eq!(io.len(), 1);
        assert_eq!((io[0].write_ios, io[0].write_bytes), (0, Bytes(67735552)));
    }

    #[test]
    fn malformed_stat_lines_name_path_and_value() {
        let p = Path::new("/cg/blkio.bfq.io_serviced");
        let cases = [
            ("7:0 Read x\n7:0 Write 1\n", "\"x\""),
            ("7 Read 1\n7 Write 1\n", "\"7\""),
            ("7:0 Read 1 2\n", "7:0 Read 1 2"),
            ("Total -3\n", "\"-3\""),
            ("7:0 Read 1\nTotal 1\n", "7:0 Write"),
        ];
        for (text, want) in cases {
            let msg = parse_stat(p, text).unwrap_err().to_string();
            assert!(
                msg.contains("blkio.bfq.io_serviced") && msg.contains(want),
                "{text:?}: {msg}"
            );
        }
    }

    #[test]
    fn bfq_weight_reads_and_out_of_range_is_a_parse_error() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        assert_eq!(read_bfq_weight(tmp.path()).unwrap(), Some(100));
        for bad in ["0\n", "1001\n", "heavy\n"] {
            fs::write(tmp.path().join("blkio.bfq.weight"), bad).unwrap();
            let err = read_bfq_weight(tmp.path()).unwrap_err();
            assert!(matches!(err, FsError::Parse { .. }), "{err}");
            assert!(err.to_string().contains(bad.trim()), "{err}");
        }
    }

    #[test]
    fn throttle_caps_read_by_device() {
        let tmp = tempfile::tempdir().unwrap();
        fake_blkio(tmp.path());
        let d = tmp.path();
        assert_eq!(
            read_throttle(d, ThrottleFile::WriteIops).unwrap(),
            Some(vec![])
        );
        fs::write(
            d.join("blkio.throttle.write_iops_device"),
            "7:0 1000\n8:16 50\n",
        )
        .unwrap();
        assert_eq!(
            read_throttle(d, ThrottleFile::WriteIops).unwrap(),
            Some(vec![
                (LOOP0, 1000),
                (
                    DevNum {
                        major: 8,
                        minor: 16
                    },
                    50
                )
            ])
        );
        fs::write(d.join("blkio.throttle.read_bps_device"), "7:0 lots\n").unwrap();
        let msg = read_throttle(d, ThrottleFile::ReadBps)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("read_bps_device") && msg.contains("\"lots\""),
            "{msg}"
        );
    }

    #[test]
    fn removed_cgroup_reads_as_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        assert!(read_io(&gone, BlkioStats::Bfq).unwrap_err().is_vanished());
        assert!(read_bfq_weight(&gone).unwrap_err().is_vanished());
        assert!(read_throttle(&gone, ThrottleFile::ReadIops)
            .unwrap_err()
            .is_vanished());
    }

    #[test]
    fn device_numbers_print_as_the_kernel_writes_them() {
        assert_eq!(LOOP0.to_string(), "7:0");
        let p = Path::new("/sys/block/loop0/dev");
        assert_eq!(DevNum::parse(p, "dev", "7:0\n").unwrap(), LOOP0);
        for bad in ["7", "7:", ":0", "a:b", "7:0:1"] {
            assert!(DevNum::parse(p, "dev", bad).is_err(), "{bad}");
        }
    }
}
