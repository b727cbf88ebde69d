//! Request bodies and query strings of the API, checked for type and range into the loop's changes, with one-line errors naming the field and the value.
//!
//! The bodies' shapes are `memtide_api`'s (`TenantPatch`, `TaxRate`, `DecisionQuery`); this
//! module reads them field by field rather than through their `Deserialize`, so that each
//! refusal says which field and value are wrong in the words docs/api.md lists.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

use super::http::clip;
use crate::command::Change;
use memtide_api::DecisionQuery;
use memtide_model::written::parse_size;
use memtide_model::TaxRate;

const SIZE_HINT: &str = "give bytes (e.g. 536870912) or a size such as \"512M\" or \"1G\"";

/// Parses `{"min": SIZE, "max": SIZE, "shares": N}` (any non-empty subset; a
/// `memtide_api::TenantPatch`) into the change of tenant `name`.
pub(crate) fn parse_tenant_patch(name: &str, body: &[u8]) -> Result<Change, String> {
    let fields = parse_object(body, "{\"max\": \"1G\"}")?;
    let (mut min_bytes, mut max_bytes, mut shares) = (None, None, None);
    for (key, value) in &fields.0 {
        match key.as_str() {
            "min" => min_bytes = Some(size_field("min", value)?),
            "max" => {
                let max = size_field("max", value)?;
                if max == 0 {
                    return Err(format!(
                        "max: {} is out of range; max must be more than 0",
                        show(value)
                    ));
                }
                max_bytes = Some(max);
            }
            "shares" => shares = Some(shares_field(value)?),
            other => {
                return Err(format!(
                    "unknown field {:?}; expected min, max or shares",
                    clip(other)
                ))
            }
        }
    }
    if fields.0.is_empty() {
        return Err("empty change {}; give at least one of min, max, shares".to_string());
    }
    if let (Some(min), Some(max)) = (min_bytes, max_bytes) {
        if min > max {
            return Err(format!(
                "min {min} bytes is greater than max {max} bytes; min must not exceed max"
            ));
        }
    }
    Ok(Change::Tenant {
        name: name.to_string(),
        min_bytes,
        max_bytes,
        shares,
    })
}

/// Parses `{"tax_rate": R}` (a `memtide_api::TaxRate`) into the model's `TaxRate`, whose
/// constructor is the one check of R's range.
pub(crate) fn parse_tax_rate(body: &[u8]) -> Result<TaxRate, String> {
    let fields = parse_object(body, "{\"tax_rate\": 0.5}")?;
    let mut rate = None;
    for (key, value) in &fields.0 {
        if key != "tax_rate" {
            return Err(format!("unknown field {:?}; expected tax_rate", clip(key)));
        }
        let r = value.as_f64().ok_or_else(|| {
            format!(
                "tax_rate: {} is not a number; give a number in [0, 1)",
                show(value)
            )
        })?;
        rate = Some(TaxRate::new(r).map_err(|_| {
            format!(
                "tax_rate: {} is out of range; give a number in [0, 1)",
                show(value)
            )
        })?);
    }
    rate.ok_or_else(|| "missing field tax_rate; send {\"tax_rate\": 0.5}".to_string())
}

/// Parses `tenant=NAME&limit=N` (both optional, each at most once; what
/// `DecisionQuery::to_query_string` writes).
pub(crate) fn parse_decision_query(query: &str) -> Result<DecisionQuery, String> {
    let mut q = DecisionQuery::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(raw_key, true)?;
        let value = percent_decode(raw_value, true)?;
        match key.as_str() {
            "tenant" if q.tenant.is_none() => q.tenant = Some(value),
            "limit" if q.limit.is_none() => {
                let n = value
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("limit={:?} is not a positive integer", clip(&value)))?;
                q.limit = Some(n);
            }
            "tenant" | "limit" => return Err(format!("query parameter {key} is given twice")),
            other => {
                return Err(format!(
                    "unknown query parameter {:?}; expected tenant or limit",
                    clip(other)
                ))
            }
        }
    }
    Ok(q)
}

/// `GET /`'s query: `window=15m` (from 1 minute to the dashboard's history, an hour) and
/// `tenant=NAME` (that tenant's charts only).
pub(crate) fn parse_dashboard_query(query: &str) -> Result<super::dashboard::Query, String> {
    let mut q = super::dashboard::Query::default();
    let (mut window, mut tenant) = (false, false);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(raw_key, true)?;
        let value = percent_decode(raw_value, true)?;
        match key.as_str() {
            "window" if !window => {
                window = true;
                let d = memtide_model::written::parse_duration(&value)
                    .map_err(|why| format!("window={:?} {why}", clip(&value)))?;
                let span = crate::history::SPAN_S;
                if !(60.0..=span).contains(&d.as_secs_f64()) {
                    return Err(format!(
                        "window={:?} is out of range: from 1m to {}m (the history kept)",
                        clip(&value),
                        span / 60.0
                    ));
                }
                q.window_s = d.as_secs_f64();
            }
            "tenant" if !tenant => {
                tenant = true;
                q.tenant = Some(value);
            }
            "window" | "tenant" => return Err(format!("query parameter {key} is given twice")),
            other => {
                return Err(format!(
                    "unknown query parameter {:?}; expected window or tenant",
                    clip(other)
                ))
            }
        }
    }
    Ok(q)
}

/// Decodes `%XX` escapes (and `+` as a space in query strings) into UTF-8 text.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad percent escape in {:?}", clip(s)))?;
                out.push(hex);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{:?} does not decode to UTF-8", clip(s)))
}

fn size_field(field: &str, value: &Value) -> Result<u64, String> {
    match value {
        Value::Number(n) => {
            if let Some(b) = n.as_u64() {
                Ok(b)
            } else if n.as_i64().is_some() || n.as_f64().is_some_and(|f| f < 0.0) {
                Err(format!("{field}: {n} is negative; {SIZE_HINT}"))
            } else if n.as_f64().is_some_and(|f| f.fract() != 0.0) {
                Err(format!(
                    "{field}: {n} is not a whole number of bytes; {SIZE_HINT}"
                ))
            } else if n.as_f64().is_some_and(|f| f >= u64::MAX as f64) {
                Err(format!("{field}: {n} is out of range; {SIZE_HINT}"))
            } else {
                Err(format!("{field}: {n} is not an integer; {SIZE_HINT}"))
            }
        }
        Value::String(s) => {
            if s.trim_start().starts_with('-') {
                return Err(format!("{field}: {} is negative; {SIZE_HINT}", show(value)));
            }
            parse_size(s).map_err(|why| format!("{field}: {} {why}; {SIZE_HINT}", show(value)))
        }
        other => Err(format!(
            "{field}: {} is not a size; {SIZE_HINT}",
            show(other)
        )),
    }
}

fn shares_field(value: &Value) -> Result<u64, String> {
    match value.as_u64() {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "shares: {} is not a positive integer; give e.g. 1000",
            show(value)
        )),
    }
}

/// A JSON value as written, cut short when long.
fn show(value: &Value) -> String {
    clip(&value.to_string())
}

/// A JSON object's members in order, with duplicate keys refused.
struct Fields(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fields, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields: Vec<(String, Value)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    if fields.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!(
                            "field {:?} is given twice",
                            clip(&key)
                        )));
                    }
                    fields.push((key, value));
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(FieldsVisitor)
    }
}

fn parse_object(body: &[u8], example: &str) -> Result<Fields, String> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(format!("empty body; send a JSON object such as {example}"));
    }
    serde_json::from_slice::<Fields>(body)
        .map_err(|e| format!("malformed JSON body ({e}); send a JSON object such as {example}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: &[u8]) -> Result<Change, String> {
        parse_tenant_patch("db", body)
    }

    fn tenant(min_bytes: Option<u64>, max_bytes: Option<u64>, shares: Option<u64>) -> Change {
        Change::Tenant {
            name: "db".to_string(),
            min_bytes,
            max_bytes,
            shares,
        }
    }

    #[test]
    fn sizes_are_the_configurations_and_max_must_be_positive() {
        assert_eq!(
            patch(br#"{"min": "1.5G", "max": "2G"}"#),
            Ok(tenant(Some(3 << 29), Some(2 << 30), None))
        );
        for (body, needle) in [
            (r#"{"max": 0}"#, "max must be more than 0"),
            (r#"{"max": "0M"}"#, "max must be more than 0"),
            (r#"{"min": " 1G"}"#, "spaces around it"),
            (r#"{"max": "1G "}"#, "spaces around it"),
            (r#"{"max": "1MB"}"#, "ambiguous"),
        ] {
            let err = patch(body.as_bytes()).expect_err(body);
            assert!(err.contains(needle), "{body}: {err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn patch_accepts_any_non_empty_subset() {
        assert_eq!(
            patch(br#"{"min": "512M", "max": 1073741824, "shares": 500}"#),
            Ok(tenant(Some(512 << 20), Some(1 << 30), Some(500)))
        );
        assert_eq!(patch(br#"{"shares": 1}"#), Ok(tenant(None, None, Some(1))));
    }

    #[test]
    fn what_the_api_crate_sends_is_accepted() {
        let sent = memtide_api::TenantPatch {
            min: Some("512M".into()),
            max: Some(memtide_api::Size::Bytes(2 << 30)),
            shares: Some(2000),
        };
        let body = serde_json::to_vec(&sent).unwrap();
        assert_eq!(
            patch(&body),
            Ok(tenant(Some(512 << 20), Some(2 << 30), Some(2000)))
        );
        let body = serde_json::to_vec(&memtide_api::TaxRate { tax_rate: 0.25 }).unwrap();
        assert_eq!(
            parse_tax_rate(&body),
            TaxRate::new(0.25).map_err(|e| e.to_string())
        );
        let query = DecisionQuery {
            tenant: Some("web 1+x".into()),
            limit: Some(3),
        };
        assert_eq!(parse_decision_query(&query.to_query_string()), Ok(query));
    }

    #[test]
    fn patch_errors_name_the_field_and_the_value() {
        let cases: &[(&str, &[&str])] = &[
            ("", &["empty body"]),
            ("   ", &["empty body"]),
            ("{}", &["empty change"]),
            ("{\"min\": ", &["malformed JSON"]),
            ("[1]", &["malformed JSON", "JSON object"]),
            (r#"{"shares": "ten"}"#, &["shares", "\"ten\""]),
            (r#"{"shares": 0}"#, &["shares", "0"]),
            (r#"{"shares": -3}"#, &["shares", "-3"]),
            (r#"{"shares": 1.5}"#, &["shares", "1.5"]),
            (r#"{"min": -1}"#, &["min", "-1", "negative"]),
            (r#"{"min": "-1G"}"#, &["min", "\"-1G\"", "negative"]),
            (r#"{"max": 1.5}"#, &["max", "1.5", "whole"]),
            (r#"{"max": 1e30}"#, &["max", "out of range"]),
            (r#"{"max": "lots"}"#, &["max", "\"lots\""]),
            (r#"{"max": null}"#, &["max", "null"]),
            (r#"{"max": true}"#, &["max", "true"]),
            (r#"{"minn": 1}"#, &["unknown field", "\"minn\""]),
            (r#"{"min": 1, "min": 2}"#, &["\"min\"", "twice"]),
            (
                r#"{"min": "2G", "max": "1G"}"#,
                &["min 2147483648", "max 1073741824"],
            ),
        ];
        for (body, needles) in cases {
            let err = patch(body.as_bytes()).expect_err(body);
            assert!(!err.contains('\n'), "{body}: {err}");
            for needle in *needles {
                assert!(err.contains(needle), "{body}: {err:?} lacks {needle:?}");
            }
        }
    }

    #[test]
    fn tax_rate_must_lie_in_zero_to_one() {
        let rate = |body: &[u8]| parse_tax_rate(body).map(TaxRate::value);
        assert_eq!(rate(br#"{"tax_rate": 0.5}"#), Ok(0.5));
        assert_eq!(rate(br#"{"tax_rate": 0}"#), Ok(0.0));
        let zero = rate(br#"{"tax_rate": -0.0}"#).unwrap();
        assert!(
            zero == 0.0 && zero.is_sign_positive(),
            "-0.0 is stored as 0.0"
        );
        assert_eq!(
            rate(br#"{"tax_rate": 0.9999999999999999}"#),
            Ok(0.9999999999999999)
        );
        let err = parse_tax_rate(br#"{"tax_rate": 1.0000000000000002}"#).unwrap_err();
        assert!(
            err.contains("1.0000000000000002"),
            "printed as given: {err}"
        );
        let cases: &[(&str, &str)] = &[
            (r#"{"tax_rate": 1.5}"#, "1.5"),
            (r#"{"tax_rate": 1}"#, "out of range"),
            (r#"{"tax_rate": -0.1}"#, "-0.1"),
            (r#"{"tax_rate": "0.5"}"#, "not a number"),
            (r#"{"rate": 0.5}"#, "unknown field \"rate\""),
            ("{}", "missing field tax_rate"),
            ("", "empty body"),
        ];
        for (body, needle) in cases {
            let err = parse_tax_rate(body.as_bytes()).expect_err(body);
            assert!(err.contains(needle), "{body}: {err:?} lacks {needle:?}");
        }
    }

    #[test]
    fn decision_query_reads_tenant_and_limit() {
        assert_eq!(parse_decision_query(""), Ok(DecisionQuery::default()));
        assert_eq!(
            parse_decision_query("tenant=web%2D1&limit=5"),
            Ok(DecisionQuery {
                tenant: Some("web-1".into()),
                limit: Some(5)
            })
        );
        for bad in [
            "limit=0",
            "limit=x",
            "limit=-1",
            "tenant=a&tenant=b",
            "tenatn=a",
            "tenant=%zz",
        ] {
            assert!(parse_decision_query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn percent_decoding_handles_escapes_plus_and_bad_utf8() {
        assert_eq!(percent_decode("a%20b+c", true), Ok("a b c".into()));
        assert_eq!(percent_decode("a+c", false), Ok("a+c".into()));
        assert!(percent_decode("%ff", false).is_err());
        assert!(percent_decode("%2", false).is_err());
    }
}
