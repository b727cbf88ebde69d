//! memtide's one configuration layer, under scenario files and the daemon's config file: `Size` and `Duration` as serde types, the TOML loader, spans of fields, `--set` overrides, and one error type whose `Display` is one line.
//!
//! A file is read into a [`Document`]: the TOML tree (which `--set` overrides may change) and
//! the spans of the text as written. Schemas are serde types with
//! `#[serde(deny_unknown_fields)]`; [`Document::read`] deserializes one through
//! `serde_path_to_error`, so a wrong type, an unknown field or a bad size names the field's
//! path. Checks across fields made after deserializing (min <= max, ordered thresholds) go
//! through [`Document::error`], which looks the field up by its path to show its value and
//! point at its line and column. Either way the error reads
//! `scenarios/x.toml:9:7: tenants[1].min = "300M": must not exceed max = "256M"`.
//!
//! Beside [`Document`]: `Size` (`"512M"`, `"2GiB"` or bytes) and `Duration` (`"500ms"`,
//! `"10m"`) as serde types on `memtide_model::written`; `overrides` (`--set KEY=VALUE` on the
//! tree); `fields` (a schema struct's field names, asked of serde); `read_as` (plain byte
//! counts and `std::time::Duration`s read as a `Size` or a `Duration`); [`quotas`] (Gemini's
//! tables); and [`ConfigError`], whose `Display` is `FILE:LINE:COL: FIELD = VALUE: WHAT`.

mod document;
mod error;
mod fields;
mod overrides;
mod path;
pub mod quotas;
mod span;
mod units;

pub use document::Document;
pub use error::ConfigError;
pub use fields::field_names;
pub use overrides::Override;
pub use path::FieldPath;
pub use units::{read_as, Duration, Size};

use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads the TOML `text` of `file` (the name shown in errors) as a `T`.
pub fn load<T: DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    Document::parse(file, text)?.build(|d| d.read(&FieldPath::root()))
}

/// The text of the file at `path`, or an error naming it.
pub fn read_file(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let fail = |error| ConfigError::Read {
        file: path.to_path_buf(),
        error,
    };
    let too_large = |bytes: String| {
        fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is {bytes} bytes, more than the {} MiB a configuration or scenario may be",
                MAX_FILE_BYTES >> 20
            ),
        ))
    };
    let file = std::fs::File::open(path).map_err(fail)?;
    // Refused before it is read: a large file is not worth parsing (a 100 MB one took 1.4 GB).
    let declared = file.metadata().map_err(fail)?.len();
    if declared > MAX_FILE_BYTES {
        return Err(too_large(declared.to_string()));
    }
    // A pipe or device declares no length: read one byte past the limit to tell.
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(format!("over {MAX_FILE_BYTES}")));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 ({e})"),
        ))
    })
}

/// The largest configuration or scenario file read: 4 MiB, some thousand times a shipped
/// scenario and room for a daemon configuration of tens of thousands of tenants.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("big.toml: cannot read the file: it is 4194305 bytes, more than the 4 MiB"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1);
        // A device that declares no length is cut at the limit.
        let e = read_file(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("over 4194304 bytes"), "{e}");
        std::fs::write(&path, "a = 1\n").unwrap();
        assert_eq!(read_file(&path).unwrap(), "a = 1\n");
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Host {
        memory: Size,
        tick: Option<Duration>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct File {
        host: Host,
        #[serde(default)]
        tenants: Vec<Tenant>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Tenant {
        name: String,
        max: Size,
    }

    fn err(text: &str) -> ConfigError {
        match load::<File>(Path::new("x.toml"), text) {
            Ok(f) => panic!("accepted {f:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn load_reads_sizes_and_durations_in_their_one_syntax() {
        let f: File = load(
            Path::new("x.toml"),
            "[host]\nmemory = \"2GiB\"\ntick = \"500ms\"\n[[tenants]]\nname = \"a\"\nmax = 4096\n",
        )
        .unwrap();
        assert_eq!(f.host.memory, Size(2 << 30));
        assert_eq!(
            f.host.tick,
            Some(Duration(std::time::Duration::from_millis(500)))
        );
        assert_eq!(f.tenants[0].max, Size(4096));
    }

    #[test]
    fn unknown_field_names_its_path_and_points_at_it() {
        let e = err("[host]\nmemory = \"1G\"\n[[tenants]]\nname = \"a\"\nmax = 1\nbogus = 5\n");
        assert_eq!(e.field(), Some("tenants[0].bogus"));
        assert_eq!(e.line_col(), Some((6, 9)));
        let shown = e.to_string();
        assert!(
            shown.starts_with("x.toml:6:9: tenants[0].bogus = 5: unknown field `bogus`"),
            "{shown}"
        );
    }

    #[test]
    fn wrong_type_names_the_field_and_value() {
        let e = err("[host]\nmemory = true\n");
        assert_eq!(e.field(), Some("host.memory"));
        let shown = e.to_string();
        assert!(
            shown.starts_with(
                "x.toml:2:10: host.memory = true: invalid type: boolean `true`, expected a size"
            ),
            "{shown}"
        );
    }

    #[test]
    fn bad_size_says_why_in_one_line() {
        let e = err("[host]\nmemory = \"512MB\"\n");
        assert_eq!(
            e.to_string(),
            "x.toml:2:10: host.memory = \"512MB\": the size is ambiguous (decimal or binary?): write M or MiB, both binary"
        );
    }

    #[test]
    fn bad_duration_says_why_in_one_line() {
        let e = err("[host]\nmemory = 1\ntick = \"5\"\n");
        let shown = e.to_string();
        assert!(
            shown.starts_with("x.toml:3:8: host.tick = \"5\": the duration has no unit"),
            "{shown}"
        );
        let e = err("[host]\nmemory = 1\ntick = 5\n");
        assert!(e.to_string().contains("expected a duration"), "{e}");
    }

    #[test]
    fn missing_field_points_at_its_table() {
        let e = err("[host]\nmemory = 1\n\n[[tenants]]\nname = \"a\"\n");
        assert_eq!(e.field(), Some("tenants[0]"));
        assert_eq!(e.line_col(), Some((4, 1)));
        assert!(e.to_string().ends_with("missing field `max`"), "{e}");
    }

    #[test]
    fn syntax_errors_are_one_line_with_a_location() {
        let e = err("[host\n");
        let shown = e.to_string();
        assert!(shown.starts_with("x.toml:1:"), "{shown}");
        assert!(shown.contains("invalid TOML"), "{shown}");
        assert_eq!(shown.lines().count(), 1);
    }

    #[test]
    fn a_missing_file_names_it() {
        let e = read_file(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/x.toml: cannot read"),
            "{e}"
        );
        assert_eq!(e.file(), Path::new("/nonexistent/x.toml"));
    }
}
