//! Pressure stall information (PSI): /proc/pressure/memory and cgroup v2 memory.pressure, as `some` and optional `full` lines.

use super::error::FsError;
use super::read::read_optional_text;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One PSI line: the share of wall time some (or all) tasks were stalled.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq)]
pub struct PsiLine {
    /// Percent of the last 10 s spent stalled.
    pub avg10_pct: f64,
    /// Percent of the last 60 s spent stalled.
    pub avg60_pct: f64,
    /// Percent of the last 300 s spent stalled.
    pub avg300_pct: f64,
    /// Total stall time since boot (or cgroup creation), microseconds; cumulative.
    pub total_stall_us: u64,
}

/// A PSI file: the `some` line always, the `full` line when the kernel has one.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq)]
pub struct Pressure {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

/// Reads the host's memory pressure, `<root>/proc/pressure/memory`; `None` when the kernel
/// has no PSI.
pub fn read_memory_pressure(root: &Path) -> Result<Option<Pressure>, FsError> {
    read_pressure_file(&root.join("proc/pressure/memory"))
}

/// Reads one PSI file at an exact path; a missing file is `None`.
pub fn read_pressure_file(path: &Path) -> Result<Option<Pressure>, FsError> {
    match read_optional_text(path)? {
        Some(text) => parse_pressure(path, &text).map(Some),
        None => Ok(None),
    }
}

/// Parses PSI text read from `path`. Unknown line kinds are ignored; a `some` line is required.
pub fn parse_pressure(path: &Path, text: &str) -> Result<Pressure, FsError> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut tokens = line.split_whitespace();
        match tokens.next() {
            Some("some") if some.is_none() => some = Some(parse_line(path, "some", tokens)?),
            Some("full") if full.is_none() => full = Some(parse_line(path, "full", tokens)?),
            _ => {}
        }
    }
    let some = some.ok_or_else(|| FsError::Missing {
        path: path.to_path_buf(),
        field: "some".to_string(),
    })?;
    Ok(Pressure { some, full })
}

fn parse_line<'a>(
    path: &Path,
    kind: &str,
    tokens: impl Iterator<Item = &'a str>,
) -> Result<PsiLine, FsError> {
    let (mut avg10, mut avg60, mut avg300, mut total) = (None, None, None, None);
    for token in tokens {
        let (key, value) = token.split_once('=').ok_or_else(|| FsError::Parse {
            path: path.to_path_buf(),
            field: kind.to_string(),
            value: token.to_string(),
            expected: "key=value",
        })?;
        let field = || format!("{kind}.{key}");
        let pct = |v: &str| -> Result<f64, FsError> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| FsError::Parse {
                    path: path.to_path_buf(),
                    field: field(),
                    value: v.to_string(),
                    expected: "a non-negative percentage",
                })
        };
        match key {
            "avg10" => avg10 = Some(pct(value)?),
            "avg60" => avg60 = Some(pct(value)?),
            "avg300" => avg300 = Some(pct(value)?),
            "total" => {
                total = Some(value.parse::<u64>().map_err(|_| FsError::Parse {
                    path: path.to_path_buf(),
                    field: field(),
                    value: value.to_string(),
                    expected: "microseconds as an unsigned integer",
                })?)
            }
            _ => {}
        }
    }
    let missing = |name: &str| FsError::Missing {
        path: path.to_path_buf(),
        field: format!("{kind}.{name}"),
    };
    Ok(PsiLine {
        avg10_pct: avg10.ok_or_else(|| missing("avg10"))?,
        avg60_pct: avg60.ok_or_else(|| missing("avg60"))?,
        avg300_pct: avg300.ok_or_else(|| missing("avg300"))?,
        total_stall_us: total.ok_or_else(|| missing("total"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn some_and_full_lines_parse() {
        let text = "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\n\
                    full avg10=0.50 avg60=0.00 avg300=0.00 total=678\n";
        let p = parse_pressure(Path::new("/proc/pressure/memory"), text).unwrap();
        assert_eq!(p.some.avg10_pct, 1.5);
        assert_eq!(p.some.avg60_pct, 0.25);
        assert_eq!(p.some.total_stall_us, 12345);
        assert_eq!(p.full.unwrap().total_stall_us, 678);
    }

    #[test]
    fn full_line_is_optional() {
        let text = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        let p = parse_pressure(Path::new("/x"), text).unwrap();
        assert!(p.full.is_none());
    }

    #[test]
    fn missing_file_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(read_memory_pressure(tmp.path()).unwrap().is_none());
    }

    #[test]
    fn reads_proc_pressure_memory_under_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("proc/pressure")).unwrap();
        std::fs::write(
            tmp.path().join("proc/pressure/memory"),
            "some avg10=3.00 avg60=2.00 avg300=1.00 total=99\n",
        )
        .unwrap();
        let p = read_memory_pressure(tmp.path()).unwrap().unwrap();
        assert_eq!(p.some.avg300_pct, 1.0);
    }

    #[test]
    fn malformed_values_are_errors_naming_path_field_and_value() {
        let cases = [
            (
                "some avg10=x avg60=0 avg300=0 total=0",
                "some.avg10",
                "\"x\"",
            ),
            (
                "some avg10=0 avg60=0 avg300=0 total=-1",
                "some.total",
                "\"-1\"",
            ),
            (
                "some avg10=0 avg60=NaN avg300=0 total=0",
                "some.avg60",
                "\"NaN\"",
            ),
            ("some avg10 avg60=0 avg300=0 total=0", "some", "\"avg10\""),
            ("some avg10=0 avg60=0 total=0", "some.avg300", "missing"),
            ("full avg10=0 avg60=0 avg300=0 total=0", "some", "missing"),
        ];
        for (text, field, value) in cases {
            let msg = parse_pressure(Path::new("/cg/memory.pressure"), text)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("/cg/memory.pressure") && msg.contains(field) && msg.contains(value),
                "{text:?}: {msg}"
            );
        }
    }
}
