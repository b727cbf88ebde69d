//! Structured logs on standard error: one event per line, as `key=value` text or as JSON, each with a UTC timestamp, a level and an event name.

use crate::config::LogFormat;
use serde_json::{Map, Value};
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// Writes log lines in the configured format.
#[derive(Clone, Debug)]
pub struct Logger {
    format: LogFormat,
}

impl Logger {
    pub fn new(format: LogFormat) -> Logger {
        Logger { format }
    }

    pub fn info(&self, event: &str, fields: &[(&str, Value)]) {
        self.log(Level::Info, event, fields);
    }

    pub fn warn(&self, event: &str, fields: &[(&str, Value)]) {
        self.log(Level::Warn, event, fields);
    }

    pub fn error(&self, event: &str, fields: &[(&str, Value)]) {
        self.log(Level::Error, event, fields);
    }

    pub fn log(&self, level: Level, event: &str, fields: &[(&str, Value)]) {
        let line = self.line(now_ms(), level, event, fields);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }

    /// One line for the event, without the newline.
    pub fn line(
        &self,
        unix_ms: u64,
        level: Level,
        event: &str,
        fields: &[(&str, Value)],
    ) -> String {
        let ts = rfc3339(unix_ms);
        match self.format {
            LogFormat::Json => {
                let mut map = Map::new();
                map.insert("ts".into(), Value::String(ts));
                map.insert("level".into(), Value::String(level.name().into()));
                map.insert("event".into(), Value::String(event.into()));
                for (k, v) in fields {
                    map.insert((*k).to_string(), v.clone());
                }
                Value::Object(map).to_string()
            }
            LogFormat::Text => {
                let mut s = format!("{ts} {} {event}", level.name());
                for (k, v) in fields {
                    s.push(' ');
                    s.push_str(k);
                    s.push('=');
                    match v {
                        Value::String(text) if is_bare(text) => s.push_str(text),
                        Value::String(text) => s.push_str(&Value::String(text.clone()).to_string()),
                        Value::Null => s.push('-'),
                        other => s.push_str(&other.to_string()),
                    }
                }
                s
            }
        }
    }
}

fn is_bare(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:#".contains(c))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time in milliseconds.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_are_utc_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_795_305_600_000), "2026-11-22T00:00:00.000Z");
    }

    #[test]
    fn text_lines_quote_values_with_spaces() {
        let l = Logger::new(LogFormat::Text);
        let line = l.line(
            0,
            Level::Info,
            "decision",
            &[
                ("tenant", json!("db")),
                ("to_bytes", json!(42)),
                ("reason", json!("a b")),
            ],
        );
        assert_eq!(
            line,
            "1970-01-01T00:00:00.000Z info decision tenant=db to_bytes=42 reason=\"a b\""
        );
    }

    #[test]
    fn json_lines_parse_back_with_every_field() {
        let l = Logger::new(LogFormat::Json);
        let line = l.line(0, Level::Warn, "write_failed", &[("tenant", json!("db"))]);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["event"], "write_failed");
        assert_eq!(v["tenant"], "db");
    }
}
