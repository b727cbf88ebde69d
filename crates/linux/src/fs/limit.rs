//! `Limit`: a cgroup memory limit that is either unlimited or a byte count, with the v1 and v2 spellings the kernel reads and writes.

use super::error::FsError;
use super::read::{file_field, read_cgroup_file, read_optional_cgroup_file};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::path::Path;

/// v1 values at or above this (2^62 bytes) mean "no limit": the kernel shows unlimited as
/// `PAGE_COUNTER_MAX` pages in bytes, 9223372036854771712 on x86-64, not as a keyword.
pub const V1_UNLIMITED_FROM: Bytes = Bytes(1 << 62);

/// A memory limit. Orders with `Max` above every byte count.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// No limit.
    Max,
    /// At most this many bytes.
    Bytes(Bytes),
}

impl Ord for Limit {
    fn cmp(&self, other: &Limit) -> Ordering {
        match (self, other) {
            (Limit::Max, Limit::Max) => Ordering::Equal,
            (Limit::Max, Limit::Bytes(_)) => Ordering::Greater,
            (Limit::Bytes(_), Limit::Max) => Ordering::Less,
            (Limit::Bytes(a), Limit::Bytes(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Limit {
    fn partial_cmp(&self, other: &Limit) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Limit {
    /// The byte count, or `None` when unlimited.
    pub fn bytes(self) -> Option<Bytes> {
        match self {
            Limit::Max => None,
            Limit::Bytes(b) => Some(b),
        }
    }

    /// A v1 byte figure: at or above [`V1_UNLIMITED_FROM`] it means unlimited.
    pub fn from_v1_bytes(n: u64) -> Limit {
        if n >= V1_UNLIMITED_FROM.0 {
            Limit::Max
        } else {
            Limit::Bytes(Bytes(n))
        }
    }

    /// Reads a v1 value: a byte count, where anything at or above [`V1_UNLIMITED_FROM`] is `Max`.
    /// `-1` (what one writes for unlimited) is accepted too.
    pub fn parse_v1(path: &Path, field: &str, value: &str) -> Result<Limit, FsError> {
        let v = value.trim();
        if v == "-1" {
            return Ok(Limit::Max);
        }
        match v.parse::<u64>() {
            Ok(n) => Ok(Limit::from_v1_bytes(n)),
            Err(_) => Err(FsError::Parse {
                path: path.to_path_buf(),
                field: field.to_string(),
                value: v.to_string(),
                expected: "a byte count (2^62 or more meaning unlimited)",
            }),
        }
    }

    /// Reads a v2 value: the literal `max` or a byte count.
    pub fn parse_v2(path: &Path, field: &str, value: &str) -> Result<Limit, FsError> {
        let v = value.trim();
        if v == "max" {
            return Ok(Limit::Max);
        }
        v.parse::<u64>()
            .map(|n| Limit::Bytes(Bytes(n)))
            .map_err(|_| FsError::Parse {
                path: path.to_path_buf(),
                field: field.to_string(),
                value: v.to_string(),
                expected: "a byte count or \"max\"",
            })
    }

    /// How v1 takes this value: `-1` for unlimited.
    pub fn to_v1_value(self) -> String {
        match self {
            Limit::Max => "-1".to_string(),
            Limit::Bytes(b) => b.0.to_string(),
        }
    }

    /// How v2 takes this value: `max` for unlimited.
    pub fn to_v2_value(self) -> String {
        match self {
            Limit::Max => "max".to_string(),
            Limit::Bytes(b) => b.0.to_string(),
        }
    }
}

/// Reads a v1 limit file every memory cgroup has.
pub(crate) fn read_v1_limit(path: &Path) -> Result<Limit, FsError> {
    let text = read_cgroup_file(path)?;
    Limit::parse_v1(path, &file_field(path), &text)
}

/// Reads a v1 limit file that exists only with some feature; a missing file is `None`.
pub(crate) fn read_optional_v1_limit(path: &Path) -> Result<Option<Limit>, FsError> {
    match read_optional_cgroup_file(path)? {
        Some(text) => Limit::parse_v1(path, &file_field(path), &text).map(Some),
        None => Ok(None),
    }
}

/// Reads a v2 limit file every memory cgroup has.
pub(crate) fn read_v2_limit(path: &Path) -> Result<Limit, FsError> {
    let text = read_cgroup_file(path)?;
    Limit::parse_v2(path, &file_field(path), &text)
}

/// Reads a v2 limit file that exists only with some feature; a missing file is `None`.
pub(crate) fn read_optional_v2_limit(path: &Path) -> Result<Option<Limit>, FsError> {
    match read_optional_cgroup_file(path)? {
        Some(text) => Limit::parse_v2(path, &file_field(path), &text).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_values_at_or_above_two_to_the_62_are_max() {
        let p = Path::new("/cg/memory.limit_in_bytes");
        let cases = [
            ("9223372036854771712\n", Limit::Max),
            ("4611686018427387904", Limit::Max),
            (
                "4611686018427387903",
                Limit::Bytes(Bytes(4611686018427387903)),
            ),
            ("-1", Limit::Max),
            ("268435456\n", Limit::Bytes(Bytes::from_mib(256))),
            ("0", Limit::Bytes(Bytes(0))),
        ];
        for (text, want) in cases {
            assert_eq!(Limit::parse_v1(p, "limit", text).unwrap(), want, "{text:?}");
        }
    }

    #[test]
    fn v2_max_literal_is_max_and_words_are_errors_naming_path_and_value() {
        let p = Path::new("/cg/memory.high");
        assert_eq!(
            Limit::parse_v2(p, "memory.high", "max\n").unwrap(),
            Limit::Max
        );
        assert_eq!(
            Limit::parse_v2(p, "memory.high", "1048576\n").unwrap(),
            Limit::Bytes(Bytes::from_mib(1))
        );
        let msg = Limit::parse_v2(p, "memory.high", "unlimited")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("/cg/memory.high") && msg.contains("\"unlimited\""),
            "{msg}"
        );
    }

    #[test]
    fn max_orders_above_every_byte_count() {
        assert!(Limit::Max > Limit::Bytes(Bytes(u64::MAX)));
        assert!(Limit::Bytes(Bytes(1)) < Limit::Bytes(Bytes(2)));
        assert_eq!(
            Limit::Max.min(Limit::Bytes(Bytes(5))),
            Limit::Bytes(Bytes(5))
        );
    }

    #[test]
    fn written_values_use_each_versions_spelling() {
        assert_eq!(Limit::Max.to_v1_value(), "-1");
        assert_eq!(Limit::Max.to_v2_value(), "max");
        assert_eq!(Limit::Bytes(Bytes(4096)).to_v1_value(), "4096");
        assert_eq!(Limit::Bytes(Bytes(4096)).to_v2_value(), "4096");
    }
}
