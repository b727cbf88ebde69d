//! The other bodies on the wire: what a change sends (`PATCH /v1/tenants/{name}`, `PUT /v1/tax-rate`), what the API answers to it (`{"ok": true}` or `{"error": "..."}`), and the query of `GET /v1/decisions`.

use serde::{Deserialize, Serialize};

/// The body of `PATCH /v1/tenants/{name}`: any non-empty subset of `min`, `max` and `shares`;
/// absent fields keep their value.
///
/// ```json
#[doc = include_str!("../json/tenant-patch.json")]
/// ```
///
/// Serializing leaves out the fields that are `None`. The daemon checks a patch for type and
/// range (a [`Size`] string must parse, `max` must be more than 0, `shares` positive, `min <=
/// max`) and answers 400 with an [`ErrorBody`] naming the field and the value when it fails;
/// this type only carries the fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<u64>,
}

/// A size in a [`TenantPatch`]: a JSON integer of bytes, or a string as in the configuration
/// file.
///
/// The string is a number with an optional fraction and a binary unit `K`/`KiB`, `M`/`MiB`,
/// `G`/`GiB`, `T`/`TiB` (any case) or none (bytes), coming to whole bytes: `"512M"`, `"1.5G"`,
/// `"4096"`. `KB`, `MB`, ... are refused as ambiguous, and so is a string with spaces around it.
/// The daemon parses it (with `memtide_model::written::parse_size`, the configuration's parser);
/// this crate passes it through as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl From<u64> for Size {
    fn from(bytes: u64) -> Size {
        Size::Bytes(bytes)
    }
}

impl From<&str> for Size {
    fn from(text: &str) -> Size {
        Size::Text(text.to_string())
    }
}

impl From<String> for Size {
    fn from(text: String) -> Size {
        Size::Text(text)
    }
}

/// The body of `PUT /v1/tax-rate` and the answer to `GET /v1/tax-rate`: a number in `[0, 1)`.
///
/// ```json
#[doc = include_str!("../json/tax-rate.json")]
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaxRate {
    pub tax_rate: f64,
}

/// The answer to a change the daemon's loop applied (status 200).
///
/// ```json
#[doc = include_str!("../json/applied.json")]
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Always true.
    pub ok: bool,
}

impl Default for Applied {
    fn default() -> Applied {
        Applied { ok: true }
    }
}

/// Every error answer (4xx, 5xx): one line naming the field and the value that are wrong.
///
/// ```json
#[doc = include_str!("../json/error.json")]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

impl ErrorBody {
    /// An error body with `message` folded onto one line (newlines become spaces).
    pub fn one_line(message: &str) -> ErrorBody {
        ErrorBody {
            error: message
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
                .collect(),
        }
    }

    /// The JSON text of the body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"error":"unencodable error"}"#.into())
    }
}

/// The query of `GET /v1/decisions?tenant=NAME&limit=N`: both optional. Decisions are listed
/// oldest first, so `limit` keeps the newest `N`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionQuery {
    /// Only this tenant's decisions (an empty list if it has none).
    pub tenant: Option<String>,
    /// Only the newest `limit` (a positive integer).
    pub limit: Option<usize>,
}

impl DecisionQuery {
    /// The query string without the `?`, percent-encoded: `tenant=web%201&limit=5`, or empty.
    pub fn to_query_string(&self) -> String {
        let mut parts = Vec::new();
        if let Some(tenant) = &self.tenant {
            parts.push(format!("tenant={}", percent_encode(tenant)));
        }
        if let Some(limit) = self.limit {
            parts.push(format!("limit={limit}"));
        }
        parts.join("&")
    }
}

/// `text` with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) written `%XX`: safe
/// in a path segment and in a query value.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_sends_only_the_fields_given() {
        let patch = TenantPatch {
            max: Some("2G".into()),
            shares: Some(2000),
            ..TenantPatch::default()
        };
        assert_eq!(
            serde_json::to_string(&patch).unwrap(),
            r#"{"max":"2G","shares":2000}"#
        );
        let patch = TenantPatch {
            min: Some(Size::from(1u64 << 30)),
            ..TenantPatch::default()
        };
        assert_eq!(
            serde_json::to_string(&patch).unwrap(),
            r#"{"min":1073741824}"#
        );
    }

    #[test]
    fn a_patch_with_an_unknown_field_does_not_decode() {
        assert!(serde_json::from_str::<TenantPatch>(r#"{"mni": 1}"#).is_err());
        assert!(serde_json::from_str::<TenantPatch>(r#"{"min": true}"#).is_err());
    }

    #[test]
    fn error_bodies_are_one_line() {
        let body = ErrorBody::one_line("no\nway\r");
        assert_eq!(body.to_json(), r#"{"error":"no way "}"#);
    }

    #[test]
    fn decision_queries_encode_names() {
        assert_eq!(DecisionQuery::default().to_query_string(), "");
        let q = DecisionQuery {
            tenant: Some("web 1+é/x".into()),
            limit: Some(5),
        };
        assert_eq!(q.to_query_string(), "tenant=web%201%2B%C3%A9%2Fx&limit=5");
        assert_eq!(percent_encode("db-1_a.b~"), "db-1_a.b~");
    }
}
