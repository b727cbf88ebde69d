//! cgroup v2 io controller readers: each takes the cgroup's directory (e.g. /sys/fs/cgroup/a) and reads io.stat, io.weight, io.max or io.pressure.
//!
//! Every file is absent where the io controller is not enabled for the cgroup (its parent's
//! cgroup.subtree_control lacks `io`), which reads as `None`.

use super::blkio::{CounterSource, DevNum, DeviceIo};
use super::error::FsError;
use super::pressure::{parse_pressure, Pressure};
use super::read::{parse_u64, read_optional_cgroup_file};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use std::path::Path;

/// io.stat: one `DeviceIo` per device line, `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N
/// dios=N` (a device listed twice is summed). Keys other than these (iocost's `cost.*` with
/// debugging on) are skipped. A line of the device alone, which the kernel prints for a
/// device the cgroup has settings for (an io.max line, a per-device weight) but no I/O on
/// yet, reads as zero operations. `None` without the io controller.
pub fn read_io_stat(dir: &Path) -> Result<Option<Vec<DeviceIo>>, FsError> {
    let path = dir.join("io.stat");
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let mut devices: Vec<DeviceIo> = Vec::new();
    for line in text.lines() {
        let mut tokens = line.split_whitespace();
        let Some(device) = tokens.next() else {
            continue;
        };
        let device = DevNum::parse(&path, "device", device)?;
        let (mut rbytes, mut wbytes, mut rios, mut wios, mut dbytes, mut dios) =
            (None, None, None, None, None, None);
        let mut counters = false;
        for token in tokens {
            let (key, value) = split_key(&path, &device, token)?;
            let slot = match key {
                "rbytes" => &mut rbytes,
                "wbytes" => &mut wbytes,
                "rios" => &mut rios,
                "wios" => &mut wios,
                "dbytes" => &mut dbytes,
                "dios" => &mut dios,
                _ => continue,
            };
            counters = true;
            *slot = Some(parse_u64(&path, &format!("{device} {key}"), value)?);
        }
        let required = |value: Option<u64>, key: &str| {
            if !counters {
                return Ok(0);
            }
            value.ok_or_else(|| FsError::Missing {
                path: path.clone(),
                field: format!("{device} {key}"),
            })
        };
        let io = DeviceIo {
            device,
            source: CounterSource::IoStat,
            read_bytes: Bytes(required(rbytes, "rbytes")?),
            write_bytes: Bytes(required(wbytes, "wbytes")?),
            read_ios: required(rios, "rios")?,
            write_ios: required(wios, "wios")?,
            discard_bytes: dbytes.map(Bytes),
            discard_ios: dios,
        };
        match devices.iter_mut().find(|d| d.device == device) {
            Some(d) => add(d, &io),
            None => devices.push(io),
        }
    }
    Ok(Some(devices))
}

/// Adds `more` into `sum` (one device listed twice).
fn add(sum: &mut DeviceIo, more: &DeviceIo) {
    let opt = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    };
    sum.read_bytes = Bytes(sum.read_bytes.0.saturating_add(more.read_bytes.0));
    sum.write_bytes = Bytes(sum.write_bytes.0.saturating_add(more.write_bytes.0));
    sum.read_ios = sum.read_ios.saturating_add(more.read_ios);
    sum.write_ios = sum.write_ios.saturating_add(more.write_ios);
    sum.discard_bytes = opt(
        sum.discard_bytes.map(|b| b.0),
        more.discard_bytes.map(|b| b.0),
    )
    .map(Bytes);
    sum.discard_ios = opt(sum.discard_ios, more.discard_ios);
}

fn split_key<'t>(
    path: &Path,
    device: &DevNum,
    token: &'t str,
) -> Result<(&'t str, &'t str), FsError> {
    token.split_once('=').ok_or_else(|| FsError::Parse {
        path: path.to_path_buf(),
        field: device.to_string(),
        value: token.to_string(),
        expected: "key=value",
    })
}

/// The weights `io.weight` takes.
pub const IO_WEIGHTS: RangeInclusive<u64> = 1..=10000;

/// io.weight: the cgroup's default weight among its siblings and any per-device weights.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IoWeight {
    /// The `default N` line (the kernel's default is 100).
    pub default: u64,
    /// `MAJ:MIN N` lines: devices with a weight of their own.
    pub devices: Vec<(DevNum, u64)>,
}

/// Reads io.weight; `None` without the io controller (or in the root cgroup).
pub fn read_io_weight(dir: &Path) -> Result<Option<IoWeight>, FsError> {
    let path = dir.join("io.weight");
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let weight = |field: &str, value: &str| -> Result<u64, FsError> {
        let w = parse_u64(&path, field, value)?;
        if IO_WEIGHTS.contains(&w) {
            Ok(w)
        } else {
            Err(FsError::Parse {
                path: path.clone(),
                field: field.to_string(),
                value: w.to_string(),
                expected: "a weight in 1..=10000",
            })
        }
    };
    let mut default = None;
    let mut devices = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        match tokens.as_slice() {
            [] => {}
            ["default", n] => default = Some(weight("default", n)?),
            [device, n] => {
                let device = DevNum::parse(&path, "io.weight", device)?;
                devices.push((device, weight(&device.to_string(), n)?));
            }
            _ => {
                return Err(FsError::Parse {
                    path: path.clone(),
                    field: "io.weight".to_string(),
                    value: line.trim().to_string(),
                    expected: "`default N` or `MAJ:MIN N`",
                })
            }
        }
    }
    let default = default.ok_or_else(|| FsError::Missing {
        path: path.clone(),
        field: "default".to_string(),
    })?;
    Ok(Some(IoWeight { default, devices }))
}

/// A cap on a cgroup's I/O to one device; `None` is no cap in that direction. v1 writes it
/// to the four `blkio.throttle.*_device` files, v2 as one io.max line.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IoCap {
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    /// Bytes per second.
    pub read_bps: Option<Bytes>,
    /// Bytes per second.
    pub write_bps: Option<Bytes>,
}

impl IoCap {
    /// No cap in any direction.
    pub const NONE: IoCap = IoCap {
        read_iops: None,
        write_iops: None,
        read_bps: None,
        write_bps: None,
    };

    /// The io.max line that sets this cap on `device` (`max` where there is none, which also
    /// removes a cap set before).
    pub fn to_io_max(&self, device: DevNum) -> String {
        let v = |n: Option<u64>| n.map_or_else(|| "max".to_string(), |n| n.to_string());
        format!(
            "{device} rbps={} wbps={} riops={} wiops={}",
            v(self.read_bps.map(|b| b.0)),
            v(self.write_bps.map(|b| b.0)),
            v(self.read_iops),
            v(self.write_iops)
        )
    }
}

/// io.max: the capped devices and their caps (a device without caps is not listed). `None`
/// without the io controller.
pub fn read_io_max(dir: &Path) -> Result<Option<Vec<(DevNum, IoCap)>>, FsError> {
    let path = dir.join("io.max");
    let Some(text) = read_optional_cgroup_file(&path)? else {
        return Ok(None);
    };
    let mut caps = Vec::new();
    for line in text.lines() {
        let mut tokens = line.split_whitespace();
        let Some(device) = tokens.next() else {
            continue;
        };
        let device = DevNum::parse(&path, "device", device)?;
        let mut cap = IoCap::NONE;
        for token in tokens {
            let (key, value) = split_key(&path, &device, token)?;
            let limit = if value == "max" {
                None
            } else {
                Some(parse_u64(&path, &format!("{device} {key}"), value)?)
            };
            match key {
                "rbps" => cap.read_bps = limit.map(Bytes),
                "wbps" => cap.write_bps = limit.map(Bytes),
                "riops" => cap.read_iops = limit,
                "wiops" => cap.write_iops = limit,
                _ => {}
            }
        }
        caps.push((device, cap));
    }
    Ok(Some(caps))
}

/// io.pressure (PSI for this cgroup's I/O); `None` without PSI or the io controller.
pub fn read_io_pressure(dir: &Path) -> Result<Option<Pressure>, FsError> {
    let path = dir.join("io.pressure");
    match read_optional_cgroup_file(&path)? {
        Some(text) => parse_pressure(&path, &text).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    const VDA: DevNum = DevNum {
        major: 254,
        minor: 0,
    };
    const LOOP0: DevNum = DevNum { major: 7, minor: 0 };

    /// A v2 cgroup with the io controller, its files as a 6.x kernel prints them.
    pub(crate) fn fake_io(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        let files = [
            (
                "io.stat",
                "254:0 rbytes=1048576 wbytes=4096 rios=256 wios=1 dbytes=0 dios=0\n\
7:0 rbytes=0 wbytes=67735552 rios=0 wios=16537 dbytes=0 dios=0\n",
            ),
            ("io.weight", "default 100\n"),
            ("io.max", ""),
            (
                "io.pressure",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=1200\n\
full avg10=0.00 avg60=0.00 avg300=0.00 total=900\n",
            ),
        ];
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn io_stat_reads_every_device() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let io = read_io_stat(tmp.path()).unwrap().unwrap();
        assert_eq!(io.len(), 2);
        assert_eq!(
            io[0],
            DeviceIo {
                device: VDA,
                source: CounterSource::IoStat,
                read_bytes: Bytes(1048576),
                write_bytes: Bytes(4096),
                read_ios: 256,
                write_ios: 1,
                discard_bytes: Some(Bytes(0)),
                discard_ios: Some(0),
            }
        );
        assert_eq!((io[1].device, io[1].write_ios), (LOOP0, 16537));
    }

    #[test]
    fn io_stat_without_discards_has_none_and_skips_unknown_keys() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        fs::write(
            tmp.path().join("io.stat"),
            "7:0 rbytes=1 wbytes=2 rios=3 wios=4 cost.vrate=100.00 cost.usage=7\n\
7:0 rbytes=10 wbytes=20 rios=30 wios=40\n",
        )
        .unwrap();
        let io = read_io_stat(tmp.path()).unwrap().unwrap();
        assert_eq!(io.len(), 1);
        let d = io[0];
        assert_eq!(
            (d.read_bytes, d.write_bytes, d.read_ios, d.write_ios),
            (Bytes(11), Bytes(22), 33, 44)
        );
        assert_eq!((d.discard_bytes, d.discard_ios), (None, None));
    }

    #[test]
    fn a_device_line_without_counters_is_no_io_yet() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        // As 6.1 prints it once io.max names 253:0 in a cgroup that did no I/O there.
        fs::write(
            tmp.path().join("io.stat"),
            "253:0 \n7:0 rbytes=1 wbytes=2 rios=3 wios=4\n",
        )
        .unwrap();
        let io = read_io_stat(tmp.path()).unwrap().unwrap();
        let vda = DevNum {
            major: 253,
            minor: 0,
        };
        let d = io.iter().find(|d| d.device == vda).expect("253:0 listed");
        assert_eq!(
            (d.read_bytes, d.write_bytes, d.read_ios, d.write_ios),
            (Bytes(0), Bytes(0), 0, 0)
        );
        assert_eq!(io.len(), 2);
    }

    #[test]
    fn malformed_io_stat_names_path_field_and_value() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let cases = [
            ("7:0 rbytes=x wbytes=0 rios=0 wios=0\n", "\"x\""),
            ("7:0 rbytes wbytes=0 rios=0 wios=0\n", "\"rbytes\""),
            ("loop0 rbytes=0 wbytes=0 rios=0 wios=0\n", "\"loop0\""),
            ("7:0 rbytes=0 wbytes=0 rios=0\n", "7:0 wios"),
        ];
        for (text, want) in cases {
            fs::write(tmp.path().join("io.stat"), text).unwrap();
            let msg = read_io_stat(tmp.path()).unwrap_err().to_string();
            assert!(
                msg.contains("io.stat") && msg.contains(want),
                "{text:?}: {msg}"
            );
        }
    }

    #[test]
    fn io_weight_reads_default_and_device_weights() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let d = tmp.path();
        assert_eq!(
            read_io_weight(d).unwrap(),
            Some(IoWeight {
                default: 100,
                devices: vec![]
            })
        );
        fs::write(d.join("io.weight"), "default 400\n7:0 10000\n").unwrap();
        assert_eq!(
            read_io_weight(d).unwrap(),
            Some(IoWeight {
                default: 400,
                devices: vec![(LOOP0, 10000)]
            })
        );
    }

    #[test]
    fn io_weight_out_of_range_or_without_default_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let cases = [
            ("default 0\n", "\"0\""),
            ("default 10001\n", "\"10001\""),
            ("default 100\n7:0 20000\n", "\"20000\""),
            ("7:0 100\n", "default"),
            ("default 100 200\n", "default 100 200"),
        ];
        for (text, want) in cases {
            fs::write(tmp.path().join("io.weight"), text).unwrap();
            let msg = read_io_weight(tmp.path()).unwrap_err().to_string();
            assert!(
                msg.contains("io.weight") && msg.contains(want),
                "{text:?}: {msg}"
            );
        }
    }

    #[test]
    fn io_max_reads_caps_with_max_as_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let d = tmp.path();
        assert_eq!(read_io_max(d).unwrap(), Some(vec![]));
        fs::write(
            d.join("io.max"),
            "7:0 rbps=max wbps=1048576 riops=max wiops=400\n",
        )
        .unwrap();
        let cap = IoCap {
            write_iops: Some(400),
            write_bps: Some(Bytes::from_mib(1)),
            ..IoCap::NONE
        };
        assert_eq!(read_io_max(d).unwrap(), Some(vec![(LOOP0, cap)]));
        fs::write(
            d.join("io.max"),
            "7:0 rbps=lots wbps=max riops=max wiops=max\n",
        )
        .unwrap();
        let msg = read_io_max(d).unwrap_err().to_string();
        assert!(
            msg.contains("7:0 rbps") && msg.contains("\"lots\""),
            "{msg}"
        );
    }

    #[test]
    fn io_max_lines_write_max_for_no_cap() {
        let cap = IoCap {
            read_iops: Some(550),
            write_bps: Some(Bytes(4096)),
            ..IoCap::NONE
        };
        assert_eq!(
            cap.to_io_max(LOOP0),
            "7:0 rbps=max wbps=4096 riops=550 wiops=max"
        );
        assert_eq!(
            IoCap::NONE.to_io_max(VDA),
            "254:0 rbps=max wbps=max riops=max wiops=max"
        );
    }

    #[test]
    fn io_pressure_reuses_the_psi_parser() {
        let tmp = tempfile::tempdir().unwrap();
        fake_io(tmp.path());
        let p = read_io_pressure(tmp.path()).unwrap().unwrap();
        assert_eq!(p.some.total_stall_us, 1200);
        assert_eq!(p.full.map(|f| f.total_stall_us), Some(900));
    }

    #[test]
    fn missing_io_files_read_as_none() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert_eq!(read_io_stat(d).unwrap(), None);
        assert_eq!(read_io_weight(d).unwrap(), None);
        assert_eq!(read_io_max(d).unwrap(), None);
        assert_eq!(read_io_pressure(d).unwrap(), None);
    }

    #[test]
    fn removed_cgroup_reads_as_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        assert!(read_io_stat(&gone).unwrap_err().is_vanished());
        assert!(read_io_weight(&gone).unwrap_err().is_vanished());
        assert!(read_io_max(&gone).unwrap_err().is_vanished());
        assert!(read_io_pressure(&gone).unwrap_err().is_vanished());
    }
}
