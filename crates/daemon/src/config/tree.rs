//! The TOML document as a tree that remembers where each key and value is written (byte spans), parsed by toml itself.
//!
//! toml hands spans to `toml::Spanned<T>` through a private serde protocol: a struct with a
//! reserved name whose fields are the start, the end and the value. `toml::Spanned` fails on
//! items toml keeps no span for (tables made by dotted keys), so [`Node`] speaks the protocol
//! itself and takes an item without a span as it comes.

use super::error::render_float;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::ops::Range;

const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// One TOML value and where it is written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    /// As written, e.g. `1979-05-27T07:32:00Z`.
    Datetime(String),
    Array(Vec<Node>),
    /// In file order.
    Table(Vec<Entry>),
}

/// A `key = value` pair of a table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_span: Option<Range<usize>>,
    pub(crate) node: Node,
}

impl Node {
    fn new(value: Value) -> Node {
        Node { span: None, value }
    }

    /// What kind of value this is, for "expected a string, not an integer".
    pub(crate) fn type_name(&self) -> &'static str {
        match self.value {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }

    /// The value in TOML syntax, shortened when long, for messages.
    pub(crate) fn render(&self) -> String {
        let full = self.render_full();
        const MAX: usize = 80;
        if full.chars().count() > MAX {
            let short: String = full.chars().take(MAX).collect();
            format!("{short}...")
        } else {
            full
        }
    }

    fn render_full(&self) -> String {
        match &self.value {
            Value::String(s) => super::error::quote(s),
            Value::Integer(i) => i.to_string(),
            Value::Float(f) => render_float(*f),
            Value::Boolean(b) => b.to_string(),
            Value::Datetime(d) => d.clone(),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(Node::render_full).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Table(entries) if entries.is_empty() => "{}".to_string(),
            Value::Table(entries) => {
                let items: Vec<String> = entries
                    .iter()
                    .map(|e| format!("{} = {}", e.key, e.node.render_full()))
                    .collect();
                format!("{{ {} }}", items.join(", "))
            }
        }
    }
}

/// Parses `text` into a tree; the error is toml's.
pub(crate) fn parse(text: &str) -> Result<Node, toml::de::Error> {
    toml::from_str::<Node>(text)
}

impl<'de> de::Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, NodeVisitor { spanned: true })
    }
}

/// Reads the value inside the span protocol (asking for a span again would loop).
struct Plain;

impl<'de> DeserializeSeed<'de> for Plain {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor { spanned: false })
    }
}

struct NodeVisitor {
    /// Whether a map may be the span protocol rather than a table.
    spanned: bool,
}

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::new(Value::Boolean(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::new(Value::Integer(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        match i64::try_from(v) {
            Ok(i) => Ok(Node::new(Value::Integer(i))),
            Err(_) => Err(E::custom(format!("integer {v} is too large"))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::new(Value::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::new(Value::String(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::new(Value::String(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Node::new(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let Some(first) = map.next_key::<Key>()? else {
            return Ok(Node::new(Value::Table(Vec::new())));
        };
        // The protocol's keys come without a span; keys written in the file have one.
        if first.span.is_none() {
            if self.spanned && first.text == SPANNED_START {
                let start: usize = map.next_value()?;
                expect_key(&mut map, SPANNED_END)?;
                let end: usize = map.next_value()?;
                expect_key(&mut map, SPANNED_VALUE)?;
                let mut node = map.next_value_seed(Plain)?;
                node.span = Some(start..end);
                return Ok(node);
            }
            if first.text == DATETIME_FIELD {
                let text: String = map.next_value()?;
                return Ok(Node::new(Value::Datetime(text)));
            }
        }
        let mut entries = vec![Entry {
            key: first.text,
            key_span: first.span,
            node: map.next_value::<Node>()?,
        }];
        while let Some(key) = map.next_key::<Key>()? {
            entries.push(Entry {
                key: key.text,
                key_span: key.span,
                node: map.next_value::<Node>()?,
            });
        }
        Ok(Node::new(Value::Table(entries)))
    }
}

fn expect_key<'de, A: MapAccess<'de>>(map: &mut A, want: &str) -> Result<(), A::Error> {
    match map.next_key::<Key>()? {
        Some(k) if k.text == want => Ok(()),
        _ => Err(de::Error::custom("unexpected layout of a spanned value")),
    }
}

/// A table key and where it is written.
struct Key {
    text: String,
    span: Option<Range<usize>>,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a TOML key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key {
            text: v.to_string(),
            span: None,
        })
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
        Ok(Key {
            text: v,
            span: None,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
        expect_key(&mut map, SPANNED_START)?;
        let start: usize = map.next_value()?;
        expect_key(&mut map, SPANNED_END)?;
        let end: usize = map.next_value()?;
        expect_key(&mut map, SPANNED_VALUE)?;
        let text: String = map.next_value()?;
        Ok(Key {
            text,
            span: Some(start..end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(node: &'a Node, key: &str) -> &'a Entry {
        match &node.value {
            Value::Table(entries) => entries.iter().find(|e| e.key == key).unwrap(),
            other => panic!("not a table: {other:?}"),
        }
    }

    fn spanned<'a>(text: &'a str, span: &Option<Range<usize>>) -> &'a str {
        let span = span.clone().unwrap();
        &text[span]
    }

    #[test]
    fn keys_and_values_carry_their_spans() {
        let text = "[daemon]\ntick = \"1s\"\nn = 5\n";
        let doc = parse(text).unwrap();
        let daemon = at(&doc, "daemon");
        let tick = at(&daemon.node, "tick");
        assert_eq!(spanned(text, &tick.key_span), "tick");
        assert_eq!(spanned(text, &tick.node.span), "\"1s\"");
        assert_eq!(tick.node.value, Value::String("1s".into()));
        assert_eq!(at(&daemon.node, "n").node.value, Value::Integer(5));
    }

    #[test]
    fn dotted_keys_inline_tables_and_arrays_of_tables_read() {
        let text = "daemon.tick = \"1s\"\n[[tenant]]\nname = \"a\"\ncommand = [\"x\", \"y\"]\n[[tenant]]\nname = \"b\"\nx = { y = 1 }\nd = 1979-05-27\n";
        let doc = parse(text).unwrap();
        let tick = at(&at(&doc, "daemon").node, "tick");
        assert_eq!(spanned(text, &tick.node.span), "\"1s\"");
        let Value::Array(tenants) = &at(&doc, "tenant").node.value else {
            panic!("tenants");
        };
        assert_eq!(tenants.len(), 2);
        let cmd = at(&tenants[0], "command");
        let Value::Array(argv) = &cmd.node.value else {
            panic!("argv");
        };
        assert_eq!(spanned(text, &argv[1].span), "\"y\"");
        let x = at(&tenants[1], "x");
        assert_eq!(x.node.render(), "{ y = 1 }");
        assert_eq!(at(&tenants[1], "d").node.type_name(), "a date-time");
    }

    #[test]
    fn syntax_errors_come_from_toml_with_a_span() {
        let e = parse("a = \n").unwrap_err();
        assert!(e.span().is_some());
        let e = parse("a = 1\na = 2\n").unwrap_err();
        assert!(e.message().contains("duplicate"), "{}", e.message());
    }
}
