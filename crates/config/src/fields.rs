//! The field names of a serde-derived struct, asked of its own `Deserialize` impl (serde hands them to `deserialize_struct`), so a schema's fields are listed once: in the struct.

use serde::de::{self, Deserialize, Deserializer, Visitor};
use std::fmt;

/// The fields `T` reads, in declaration order; empty when `T` is not a struct.
pub fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The capture always ends the deserialization with an error once it has the names.
    let _ = T::deserialize(Capture(&mut fields));
    fields
}

struct Capture<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field names captured")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: fmt::Display>(_: M) -> Stop {
        Stop
    }
}

impl<'de> Deserializer<'de> for Capture<'_> {
    type Error = Stop;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Tws {
        epoch: Option<u32>,
        #[serde(rename = "fast")]
        fast_step: Option<f64>,
    }

    #[test]
    fn names_come_from_the_struct_as_renamed() {
        assert_eq!(field_names::<Tws>(), ["epoch", "fast"]);
    }

    #[test]
    fn non_structs_have_no_fields() {
        assert!(field_names::<u32>().is_empty());
        assert!(field_names::<toml::Value>().is_empty());
    }
}
