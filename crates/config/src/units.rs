//! `Size` (`"512M"`, `"2GiB"` or bytes as an integer) and `Duration` (`"500ms"`, `"1s"`, `"2m"`): the serde types of every size and time in memtide's files, read and written by `memtide_model::written`.

use memtide_model::written::{
    format_duration, format_size, parse_duration, parse_size, DURATION_FORMS, SIZE_FORMS,
};
use memtide_model::{Pages, PAGE_SIZE};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A memory size in bytes, written `"512M"`, `"1.5G"`, `"2GiB"` or as an integer of bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    /// Largest size in a file that is checked against it: 1 TiB.
    pub const TIB: Size = Size(1 << 40);

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// The size in 4 KiB pages, rounded to the nearest page.
    pub fn to_pages(self) -> Pages {
        Pages(self.0 / PAGE_SIZE + u64::from(self.0 % PAGE_SIZE >= PAGE_SIZE / 2))
    }

    /// The size in MiB (exact for any size below 2^53 bytes).
    pub fn as_mib_f64(self) -> f64 {
        self.0 as f64 / (1u64 << 20) as f64
    }
}

/// As written in a file: `512M`, `1G`, `4096`.
impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_size(self.0))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = Size;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a size: {SIZE_FORMS}")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
        Ok(Size(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
        u64::try_from(v)
            .map(Size)
            .map_err(|_| E::custom("the size is negative; a size is at least 0"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
        parse_size(v)
            .map(Size)
            .map_err(|why| E::custom(format!("the size {why}")))
    }
}

/// A length of time, written `"500ms"`, `"1s"`, `"2m"`, `"1h"`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub fn get(self) -> std::time::Duration {
        self.0
    }
}

/// As written in a file: `500ms`, `30s`, `2m`.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(DurationVisitor)
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a duration: {DURATION_FORMS}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v)
            .map(Duration)
            .map_err(|why| E::custom(format!("the duration {why}")))
    }
}

/// `#[serde(deserialize_with = ...)]` helpers for fields that hold plain bytes and
/// `std::time::Duration`s but are written as a [`Size`] or a [`Duration`].
pub mod read_as {
    use super::{Duration, Size};
    use serde::{Deserialize, Deserializer};

    /// Bytes written as a [`Size`].
    pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Size::deserialize(d).map(Size::bytes)
    }

    /// Bytes written as a [`Size`], in an optional field.
    pub fn some_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        bytes(d).map(Some)
    }

    /// A time written as a [`Duration`].
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<std::time::Duration, D::Error> {
        Duration::deserialize(d).map(Duration::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as StdDuration;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Holder {
        size: Option<Size>,
        time: Option<Duration>,
    }

    fn read(text: &str) -> Result<Holder, String> {
        toml::from_str(text).map_err(|e| e.message().to_string())
    }

    #[test]
    fn sizes_read_from_strings_and_integers() {
        assert_eq!(read("size = \"512M\"").unwrap().size, Some(Size(512 << 20)));
        assert_eq!(read("size = \"2GiB\"").unwrap().size, Some(Size(2 << 30)));
        assert_eq!(read("size = 4096").unwrap().size, Some(Size(4096)));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(read("size = -1").unwrap_err().contains("negative"));
        assert!(read("size = \"12X\"").unwrap_err().contains("unknown unit"));
        assert!(read("size = 1.5").unwrap_err().contains("expected a size"));
        assert!(read("size = true").unwrap_err().contains("expected a size"));
    }

    #[test]
    fn durations_read_only_from_strings_with_a_unit() {
        let h = read("time = \"500ms\"").unwrap();
        assert_eq!(h.time, Some(Duration(StdDuration::from_millis(500))));
        assert!(read("time = \"5\"").unwrap_err().contains("no unit"));
        assert!(read("time = 5")
            .unwrap_err()
            .contains("expected a duration"));
    }

    #[test]
    fn both_write_back_as_read() {
        let h = Holder {
            size: Some(Size(1536 << 20)),
            time: Some(Duration(StdDuration::from_secs(120))),
        };
        let text = toml::to_string(&h).unwrap();
        assert_eq!(text, "size = \"1536M\"\ntime = \"2m\"\n");
        assert_eq!(read(&text).unwrap(), h);
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Plain {
        #[serde(deserialize_with = "read_as::bytes")]
        size: u64,
        #[serde(default, deserialize_with = "read_as::some_bytes")]
        cap: Option<u64>,
        #[serde(deserialize_with = "read_as::duration")]
        time: StdDuration,
    }

    #[test]
    fn plain_fields_read_as_sizes_and_durations() {
        let p: Plain = toml::from_str("size = \"2M\"\ntime = \"1m\"\n").unwrap();
        assert_eq!(
            p,
            Plain {
                size: 2 << 20,
                cap: None,
                time: StdDuration::from_secs(60)
            }
        );
        let p: Plain = toml::from_str("size = 1\ncap = \"1K\"\ntime = \"1s\"\n").unwrap();
        assert_eq!(p.cap, Some(1024));
        let e = toml::from_str::<Plain>("size = \"1X\"\ntime = \"1s\"\n").unwrap_err();
        assert!(e.message().contains("unknown unit"), "{e}");
    }

    #[test]
    fn pages_round_to_the_nearest_page() {
        assert_eq!(Size(0).to_pages(), Pages(0));
        assert_eq!(Size(2047).to_pages(), Pages(0));
        assert_eq!(Size(2048).to_pages(), Pages(1));
        assert_eq!(Size(64 << 20).to_pages(), Pages::from_mib(64));
        // 263.3 MiB in a paper is 67405 pages, written "269620K".
        assert_eq!(Size(269_620 << 10).to_pages(), Pages::from_mib_f64(263.3));
        assert_eq!(Size(3 << 19).as_mib_f64(), 1.5);
    }
}
