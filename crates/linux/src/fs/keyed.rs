//! Flat "key value" files (memory.stat, memory.events, /proc/vmstat) and "Key:   123 kB" files (/proc/meminfo), parsed into a map with typed getters.

use super::error::FsError;
use memtide_model::Bytes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The values of one keyed file. Values with a `kB` unit are stored in bytes; the rest as
/// written. A key the file lacks reads as `None`, never zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedValues {
    path: PathBuf,
    values: HashMap<String, u64>,
}

impl KeyedValues {
    /// Parses `text` read from `path`. Each non-blank line is `key value` or `Key: value kB`;
    /// anything else is an error naming the path, the key and the value. The first of
    /// duplicate keys wins.
    pub fn parse(path: &Path, text: &str) -> Result<KeyedValues, FsError> {
        let mut values = HashMap::new();
        for_each_value(path, text, |key, value| {
            if !values.contains_key(key) {
                values.insert(key.to_string(), value);
            }
        })?;
        Ok(KeyedValues {
            path: path.to_path_buf(),
            values,
        })
    }

    /// The file these values came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of `key` (in bytes when the file gave it in kB).
    pub fn get(&self, key: &str) -> Option<u64> {
        self.values.get(key).copied()
    }

    /// The value of `key` as a byte amount.
    pub fn bytes(&self, key: &str) -> Option<Bytes> {
        self.get(key).map(Bytes)
    }

    /// The value of `key`, which the file must have.
    pub fn require(&self, key: &str) -> Result<u64, FsError> {
        self.get(key).ok_or_else(|| FsError::Missing {
            path: self.path.clone(),
            field: key.to_string(),
        })
    }

    /// The value of `key`, which the file must have, as a byte amount.
    pub fn require_bytes(&self, key: &str) -> Result<Bytes, FsError> {
        self.require(key).map(Bytes)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when the file had no keys.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Walks the lines of a keyed file without building a map: calls `f(key, value)` for each
/// non-blank line, in order (duplicates included), with the same rules and errors as
/// [`KeyedValues::parse`]. For files read every tick, whose reader wants a few known keys: it
/// scans bytes (kernel files are ASCII; tokens are separated by ASCII whitespace) and
/// allocates only for an error.
pub fn for_each_value(
    path: &Path,
    text: &str,
    mut f: impl FnMut(&str, u64),
) -> Result<(), FsError> {
    for line in text.split('\n') {
        let mut at = 0;
        let Some(key_token) = next_token(line, &mut at) else {
            continue;
        };
        let key = key_token.strip_suffix(':').unwrap_or(key_token);
        let first = next_token(line, &mut at);
        let second = next_token(line, &mut at);
        let value = match (first, second, next_token(line, &mut at)) {
            (Some(n), None, None) => n.parse::<u64>().ok(),
            (Some(n), Some("kB"), None) => n.parse::<u64>().ok().and_then(|n| n.checked_mul(1024)),
            _ => None,
        };
        match value {
            Some(v) => f(key, v),
            None => {
                let mut at = 0;
                next_token(line, &mut at);
                let mut rest = Vec::new();
                while let Some(t) = next_token(line, &mut at) {
                    rest.push(t);
                }
                return Err(FsError::Parse {
                    path: path.to_path_buf(),
                    field: key.to_string(),
                    value: rest.join(" "),
                    expected: "an unsigned integer, optionally followed by kB",
                });
            }
        }
    }
    Ok(())
}

/// The next token of `line` from byte `*at` on: the bytes up to ASCII whitespace (slicing there
/// keeps UTF-8 intact).
fn next_token<'a>(line: &'a str, at: &mut usize) -> Option<&'a str> {
    let bytes = line.as_bytes();
    let mut i = *at;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i == bytes.len() {
        *at = i;
        return None;
    }
    let start = i;
    while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    *at = i;
    Some(&line[start..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_lines_parse_and_absent_keys_are_none() {
        let p = Path::new("/cg/memory.stat");
        let kv = KeyedValues::parse(p, "cache 3989504\nrss 1634304\n\npgmajfault 20\n").unwrap();
        assert_eq!(kv.get("cache"), Some(3989504));
        assert_eq!(kv.bytes("rss"), Some(Bytes(1634304)));
        assert_eq!(kv.get("pgmajfault"), Some(20));
        assert_eq!(kv.get("swap"), None);
        assert_eq!(kv.len(), 3);
    }

    #[test]
    fn meminfo_lines_in_kb_become_bytes_and_unitless_stay_counts() {
        let p = Path::new("/proc/meminfo");
        let text = "MemTotal:       24684084 kB\nHugePages_Total:       0\nSwapFree:  1 kB\n";
        let kv = KeyedValues::parse(p, text).unwrap();
        assert_eq!(kv.bytes("MemTotal"), Some(Bytes(24684084 * 1024)));
        assert_eq!(kv.get("HugePages_Total"), Some(0));
        assert_eq!(kv.get("SwapFree"), Some(1024));
    }

    #[test]
    fn malformed_lines_are_errors_naming_path_key_and_value() {
        let p = Path::new("/proc/vmstat");
        let cases = [
            ("pswpin abc\n", "pswpin", "\"abc\""),
            ("pswpin\n", "pswpin", "\"\""),
            ("pswpin 1 2\n", "pswpin", "\"1 2\""),
            ("pswpin -3\n", "pswpin", "\"-3\""),
            ("MemTotal: 1 MB\n", "MemTotal", "\"1 MB\""),
            (
                "MemTotal: 18446744073709551615 kB\n",
                "MemTotal",
                "18446744073709551615",
            ),
        ];
        for (text, key, value) in cases {
            let msg = KeyedValues::parse(p, text).unwrap_err().to_string();
            assert!(
                msg.contains("/proc/vmstat") && msg.contains(key) && msg.contains(value),
                "{text:?}: {msg}"
            );
        }
    }

    #[test]
    fn require_names_the_missing_key() {
        let kv = KeyedValues::parse(Path::new("/proc/meminfo"), "MemFree: 1 kB\n").unwrap();
        let err = kv.require("MemTotal").unwrap_err();
        assert!(matches!(err, FsError::Missing { ref field, .. } if field == "MemTotal"));
    }

    #[test]
    fn first_of_duplicate_keys_wins() {
        let kv = KeyedValues::parse(Path::new("/x"), "a 1\na 2\n").unwrap();
        assert_eq!(kv.get("a"), Some(1));
    }

    #[test]
    fn each_value_walks_lines_in_order_and_fails_like_parse() {
        let p = Path::new("/cg/memory.stat");
        let mut seen = Vec::new();
        for_each_value(p, "a 1\n\nMemTotal: 2 kB\na 3\n", |k, v| {
            seen.push((k.to_string(), v))
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![("a".into(), 1), ("MemTotal".into(), 2048), ("a".into(), 3)]
        );
        let err = for_each_value(p, "a 1\nb x y\n", |_, _| {}).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("memory.stat") && msg.contains("\"x y\""),
            "{msg}"
        );
    }
}
