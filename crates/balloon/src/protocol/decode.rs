//! Decoding one line into a message: framing, type, then each field by its rule, the first broken rule answered with its code and a message naming the field and the value.

use serde_json::{Map, Value};

use super::{
    AgentMessage, Bye, ErrorCode, ErrorMessage, Hello, MemtideMessage, PoolInfo, PoolKind,
    Progress, ProgressStatus, ProtocolError, Stats, Target, Welcome, MAX_APP_BYTES, MAX_INTEGER,
    MAX_LINE_BYTES, MAX_REASON_BYTES, PROTOCOL_VERSION,
};

/// The longest rendering of a value quoted in an error message, so that the error's own line
/// stays short whatever the peer sent.
const MAX_QUOTED_BYTES: usize = 64;

pub(super) fn agent_message(line: &[u8]) -> Result<AgentMessage, ProtocolError> {
    let (kind, object) = read_object(line)?;
    let fields = Fields {
        message: kind.as_str(),
        object: &object,
    };
    match kind.as_str() {
        "hello" => hello(&fields).map(AgentMessage::Hello),
        "progress" => progress(&fields).map(AgentMessage::Progress),
        "stats" => stats(&fields).map(AgentMessage::Stats),
        "bye" => bye(&fields).map(AgentMessage::Bye),
        "error" => error(&fields).map(AgentMessage::Error),
        _ => Err(unknown_type(&kind, "memtide")),
    }
}

pub(super) fn memtide_message(line: &[u8]) -> Result<MemtideMessage, ProtocolError> {
    let (kind, object) = read_object(line)?;
    let fields = Fields {
        message: kind.as_str(),
        object: &object,
    };
    match kind.as_str() {
        "welcome" => welcome(&fields).map(MemtideMessage::Welcome),
        "target" => target(&fields).map(MemtideMessage::Target),
        "bye" => bye(&fields).map(MemtideMessage::Bye),
        "error" => error(&fields).map(MemtideMessage::Error),
        _ => Err(unknown_type(&kind, "an agent")),
    }
}

/// The line's framing: at most 65,536 bytes with its newline, a `\r` at its end ignored, UTF-8,
/// one JSON object with a string `type`. Answers the type and the object.
fn read_object(line: &[u8]) -> Result<(String, Map<String, Value>), ProtocolError> {
    if line.len() >= MAX_LINE_BYTES {
        return Err(ProtocolError::new(
            ErrorCode::TooLong,
            format!(
                "the line is {} bytes with its newline, over {MAX_LINE_BYTES}",
                line.len() + 1
            ),
        ));
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = std::str::from_utf8(line).map_err(|e| {
        ProtocolError::new(ErrorCode::Malformed, format!("the line is not UTF-8: {e}"))
    })?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ProtocolError::new(
            ErrorCode::Malformed,
            format!("the line is not one JSON value: {e}"),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err(ProtocolError::new(
            ErrorCode::Malformed,
            format!("the line is {}, not a JSON object", describe(&value)),
        ));
    };
    match object.remove("type") {
        Some(Value::String(kind)) => Ok((kind, object)),
        Some(other) => Err(ProtocolError::new(
            ErrorCode::UnknownType,
            format!("type = {} is not a string", quote(&other)),
        )),
        None => Err(ProtocolError::new(
            ErrorCode::UnknownType,
            "the object has no type",
        )),
    }
}

fn unknown_type(kind: &str, reader: &str) -> ProtocolError {
    ProtocolError::new(
        ErrorCode::UnknownType,
        format!(
            "type = {} names no message {reader} reads in version {PROTOCOL_VERSION}",
            quote(&Value::String(kind.to_string()))
        ),
    )
}

fn hello(fields: &Fields) -> Result<Hello, ProtocolError> {
    fields.version()?;
    let app = fields.string("app")?;
    let kind = fields.string("kind")?;
    let kind = PoolKind::from_wire(kind).ok_or_else(|| {
        fields.bad(
            "kind",
            format!(
                "= {} is not one of {}",
                quote_str(kind),
                names(PoolKind::ALL.iter().map(|kind| kind.as_str()))
            ),
        )
    })?;
    let pid = fields.integer("pid", 1)?;
    let pid = u32::try_from(pid).map_err(|_| {
        fields.bad(
            "pid",
            format!("= {pid} is not a process id (at most {})", u32::MAX),
        )
    })?;
    let pool = PoolInfo {
        app: app.to_string(),
        kind,
        pool_bytes: fields.integer("pool_bytes", 0)?,
        min_bytes: fields.integer("min_bytes", 0)?,
        max_bytes: fields.integer("max_bytes", 0)?,
        granule_bytes: fields.integer("granule_bytes", 0)?,
    };
    check_pool(&pool)?;
    Ok(Hello { pid, pool })
}

/// The rules of a hello's pool (see [`PoolInfo::check`]).
pub(super) fn check_pool(pool: &PoolInfo) -> Result<(), ProtocolError> {
    let bad = |field: &str, rule: String| {
        Err(ProtocolError::new(
            ErrorCode::BadField,
            format!("hello.{field} {rule}"),
        ))
    };
    let app = &pool.app;
    if app.is_empty() {
        return bad("app", "is empty".into());
    }
    if app.len() > MAX_APP_BYTES {
        return bad(
            "app",
            format!("is {} bytes, over {MAX_APP_BYTES}", app.len()),
        );
    }
    if app.chars().any(char::is_control) {
        return bad(
            "app",
            format!("= {} has a control character", quote_str(app)),
        );
    }
    for (field, value) in [
        ("pool_bytes", pool.pool_bytes),
        ("min_bytes", pool.min_bytes),
        ("max_bytes", pool.max_bytes),
        ("granule_bytes", pool.granule_bytes),
    ] {
        if value > MAX_INTEGER {
            return bad(field, format!("= {value} is over {MAX_INTEGER}"));
        }
    }
    if pool.min_bytes > pool.max_bytes {
        return bad(
            "min_bytes",
            format!("= {} > max_bytes = {}", pool.min_bytes, pool.max_bytes),
        );
    }
    if pool.pool_bytes > pool.max_bytes {
        return bad(
            "pool_bytes",
            format!("= {} > max_bytes = {}", pool.pool_bytes, pool.max_bytes),
        );
    }
    if pool.pool_bytes < pool.min_bytes {
        return bad(
            "pool_bytes",
            format!("= {} < min_bytes = {}", pool.pool_bytes, pool.min_bytes),
        );
    }
    if pool.granule_bytes == 0 {
        return bad("granule_bytes", "= 0 is below 1".into());
    }
    if pool.max_bytes > 0 && pool.granule_bytes > pool.max_bytes {
        return bad(
            "granule_bytes",
            format!("= {} > max_bytes = {}", pool.granule_bytes, pool.max_bytes),
        );
    }
    Ok(())
}

fn welcome(fields: &Fields) -> Result<Welcome, ProtocolError> {
    fields.version()?;
    let tenant = fields.string("tenant")?;
    if tenant.is_empty() {
        return Err(fields.bad("tenant", "is empty".into()));
    }
    let stats_interval_ms = fields.integer("stats_interval_ms", 1)?;
    let dead_after_ms = fields.integer("dead_after_ms", 0)?;
    if dead_after_ms < stats_interval_ms {
        return Err(fields.bad(
            "dead_after_ms",
            format!("= {dead_after_ms} < stats_interval_ms = {stats_interval_ms}"),
        ));
    }
    Ok(Welcome {
        tenant: tenant.to_string(),
        stats_interval_ms,
        dead_after_ms,
    })
}

fn target(fields: &Fields) -> Result<Target, ProtocolError> {
    Ok(Target {
        seq: fields.integer("seq", 1)?,
        pool_bytes: fields.integer("pool_bytes", 0)?,
        deadline_ms: fields.integer("deadline_ms", 1)?,
    })
}

fn progress(fields: &Fields) -> Result<Progress, ProtocolError> {
    let seq = fields.integer("seq", 1)?;
    let pool_bytes = fields.integer("pool_bytes", 0)?;
    let status = fields.string("status")?;
    let status = ProgressStatus::from_wire(status).ok_or_else(|| {
        fields.bad(
            "status",
            format!(
                "= {} is not one of {}",
                quote_str(status),
                names(ProgressStatus::ALL.iter().map(|status| status.as_str()))
            ),
        )
    })?;
    Ok(Progress {
        seq,
        pool_bytes,
        status,
        reason: fields.reason()?,
    })
}

fn stats(fields: &Fields) -> Result<Stats, ProtocolError> {
    let stats = Stats {
        pool_bytes: fields.integer("pool_bytes", 0)?,
        used_bytes: fields.integer("used_bytes", 0)?,
        hits: fields.integer("hits", 0)?,
        misses: fields.integer("misses", 0)?,
        evictions: fields.integer("evictions", 0)?,
        dirty_bytes: fields.integer("dirty_bytes", 0)?,
    };
    for (field, value) in [
        ("used_bytes", stats.used_bytes),
        ("dirty_bytes", stats.dirty_bytes),
    ] {
        if value > stats.pool_bytes {
            return Err(fields.bad(
                field,
                format!("= {value} > pool_bytes = {}", stats.pool_bytes),
            ));
        }
    }
    Ok(stats)
}

fn bye(fields: &Fields) -> Result<Bye, ProtocolError> {
    Ok(Bye {
        reason: fields.reason()?,
    })
}

fn error(fields: &Fields) -> Result<ErrorMessage, ProtocolError> {
    let code = fields.string("code")?;
    let code = ErrorCode::from_wire(code).ok_or_else(|| {
        fields.bad(
            "code",
            format!(
                "= {} is not a code of version {PROTOCOL_VERSION}",
                quote_str(code)
            ),
        )
    })?;
    Ok(ErrorMessage {
        code,
        message: fields.string("message")?.to_string(),
        fatal: fields.boolean("fatal")?,
    })
}

/// The fields of one message, named `MESSAGE.FIELD` in errors.
struct Fields<'a> {
    message: &'a str,
    object: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn bad(&self, field: &str, rule: String) -> ProtocolError {
        ProtocolError::new(
            ErrorCode::BadField,
            format!("{}.{field} {rule}", self.message),
        )
    }

    fn get(&self, field: &str) -> Result<&Value, ProtocolError> {
        self.object
            .get(field)
            .ok_or_else(|| self.bad(field, "is missing".into()))
    }

    /// A required integer in `[least, 2^53 − 1]`, written without fraction or exponent.
    fn integer(&self, field: &str, least: u64) -> Result<u64, ProtocolError> {
        let value = self.get(field)?;
        let range = || format!("in [{least}, {MAX_INTEGER}]");
        match value {
            Value::Number(number) => match number.as_u64() {
                Some(n) if (least..=MAX_INTEGER).contains(&n) => Ok(n),
                Some(n) => Err(self.bad(field, format!("= {n} is not an integer {}", range()))),
                // serde_json reads `-0` as a float: with the negative integers it is out of
                // range rather than fractional.
                None if number.is_i64() || number.as_f64().is_some_and(f64::is_sign_negative) => {
                    Err(self.bad(field, format!("= {number} is not an integer {}", range())))
                }
                None => Err(self.bad(
                    field,
                    format!("= {number} is not an integer (a fraction or an exponent)"),
                )),
            },
            other => Err(self.bad(field, format!("= {} is not an integer", quote(other)))),
        }
    }

    fn string(&self, field: &str) -> Result<&str, ProtocolError> {
        match self.get(field)? {
            Value::String(text) => Ok(text),
            other => Err(self.bad(field, format!("= {} is not a string", quote(other)))),
        }
    }

    fn boolean(&self, field: &str) -> Result<bool, ProtocolError> {
        match self.get(field)? {
            Value::Bool(flag) => Ok(*flag),
            other => Err(self.bad(field, format!("= {} is not true or false", quote(other)))),
        }
    }

    /// The optional `reason`: a string of at most 1,024 bytes when present.
    fn reason(&self) -> Result<Option<String>, ProtocolError> {
        if !self.object.contains_key("reason") {
            return Ok(None);
        }
        let reason = self.string("reason")?;
        if reason.len() > MAX_REASON_BYTES {
            return Err(self.bad(
                "reason",
                format!("is {} bytes, over {MAX_REASON_BYTES}", reason.len()),
            ));
        }
        Ok(Some(reason.to_string()))
    }

    /// `version`: an integer, and the one this crate speaks.
    fn version(&self) -> Result<(), ProtocolError> {
        let version = self.integer("version", 0)?;
        if version != PROTOCOL_VERSION {
            return Err(ProtocolError::new(
                ErrorCode::Version,
                format!(
                    "{}.version = {version} is not a version spoken here (versions: {PROTOCOL_VERSION})",
                    self.message
                ),
            ));
        }
        Ok(())
    }
}

/// A value as JSON, cut to [`MAX_QUOTED_BYTES`].
fn quote(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= MAX_QUOTED_BYTES {
        text
    } else {
        format!("{}...", super::truncate_to(&text, MAX_QUOTED_BYTES))
    }
}

fn quote_str(text: &str) -> String {
    quote(&Value::String(text.to_string()))
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(line: &str) -> Result<AgentMessage, ProtocolError> {
        AgentMessage::decode(line.as_bytes())
    }

    fn memtide(line: &str) -> Result<MemtideMessage, ProtocolError> {
        MemtideMessage::decode(line.as_bytes())
    }

    const HELLO: &str = r#"{"type":"hello","version":1,"app":"mariadb","kind":"buffer_pool","pid":4242,"pool_bytes":8589934592,"min_bytes":1073741824,"max_bytes":8589934592,"granule_bytes":1048576}"#;

    fn hello_with(field: &str, value: &str) -> String {
        let mut object: Map<String, Value> = serde_json::from_str(HELLO).unwrap();
        object.insert(field.into(), Value::Null);
        let text = Value::Object(object).to_string();
        text.replace(
            &format!("\"{field}\":null"),
            &format!("\"{field}\":{value}"),
        )
    }

    #[test]
    fn a_hello_decodes_to_its_pool_and_pid() {
        let AgentMessage::Hello(hello) = agent(HELLO).unwrap() else {
            panic!("not a hello")
        };
        assert_eq!(hello.pid, 4242);
        assert_eq!(hello.pool.app, "mariadb");
        assert_eq!(hello.pool.kind, PoolKind::BufferPool);
        assert_eq!(hello.pool.pool_bytes, 8 << 30);
        assert_eq!(hello.pool.min_bytes, 1 << 30);
        assert_eq!(hello.pool.granule_bytes, 1 << 20);
    }

    #[test]
    fn errors_name_the_field_and_the_value() {
        let cases = [
            (
                "pool_bytes",
                "-1",
                "hello.pool_bytes = -1 is not an integer in [0, 9007199254740991]",
            ),
            (
                "pool_bytes",
                "1.5",
                "hello.pool_bytes = 1.5 is not an integer (a fraction or an exponent)",
            ),
            (
                "pool_bytes",
                "1.0",
                "hello.pool_bytes = 1.0 is not an integer (a fraction or an exponent)",
            ),
            (
                "pool_bytes",
                "\"8G\"",
                "hello.pool_bytes = \"8G\" is not an integer",
            ),
            (
                "pool_bytes",
                "null",
                "hello.pool_bytes = null is not an integer",
            ),
            (
                "max_bytes",
                "9007199254740992",
                "hello.max_bytes = 9007199254740992 is not an integer in [0, 9007199254740991]",
            ),
            (
                "min_bytes",
                "9000000000",
                "hello.min_bytes = 9000000000 > max_bytes = 8589934592",
            ),
            (
                "pid",
                "0",
                "hello.pid = 0 is not an integer in [1, 9007199254740991]",
            ),
            (
                "pid",
                "4294967296",
                "hello.pid = 4294967296 is not a process id (at most 4294967295)",
            ),
            (
                "kind",
                "\"disk\"",
                "hello.kind = \"disk\" is not one of buffer_pool, heap, cache, other",
            ),
            (
                "app",
                "\"my\\u0007db\"",
                "hello.app = \"my\\u0007db\" has a control character",
            ),
            ("granule_bytes", "0", "hello.granule_bytes = 0 is below 1"),
            (
                "version",
                "\"1\"",
                "hello.version = \"1\" is not an integer",
            ),
        ];
        for (field, value, message) in cases {
            let error = agent(&hello_with(field, value)).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{field} = {value}");
            assert_eq!(error.message, message);
        }
        let missing = agent(&HELLO.replace(r#""kind":"buffer_pool","#, "")).unwrap_err();
        assert_eq!(missing.message, "hello.kind is missing");
    }

    #[test]
    fn a_version_other_than_1_is_a_version_error_listing_the_versions() {
        let error = agent(&hello_with("version", "2")).unwrap_err();
        assert_eq!(error.code, ErrorCode::Version);
        assert_eq!(
            error.message,
            "hello.version = 2 is not a version spoken here (versions: 1)"
        );
        let welcome = r#"{"type":"welcome","version":3,"tenant":"db","stats_interval_ms":1000,"dead_after_ms":5000}"#;
        assert_eq!(memtide(welcome).unwrap_err().code, ErrorCode::Version);
    }

    #[test]
    fn the_version_is_checked_before_the_other_fields() {
        let error = agent(r#"{"type":"hello","version":2}"#).unwrap_err();
        assert_eq!(error.code, ErrorCode::Version);
    }

    #[test]
    fn a_negative_zero_is_not_an_integer_of_the_wire() {
        let error = agent(&hello_with("min_bytes", "-0")).unwrap_err();
        assert_eq!(error.code, ErrorCode::BadField);
        assert_eq!(
            error.message,
            "hello.min_bytes = -0.0 is not an integer in [0, 9007199254740991]"
        );
    }

    #[test]
    fn a_huge_value_is_quoted_cut_short() {
        let app = "a".repeat(1000);
        let error = agent(&hello_with("pool_bytes", &format!("\"{app}\""))).unwrap_err();
        assert!(error.message.len() < 120, "{}", error.message);
        assert!(error.message.contains("..."));
    }

    #[test]
    fn framing_errors_say_what_the_line_is() {
        assert_eq!(
            agent("[1,2,3]").unwrap_err().message,
            "the line is an array, not a JSON object"
        );
        assert!(agent("hello memtide")
            .unwrap_err()
            .message
            .starts_with("the line is not one JSON value: "));
        let not_utf8 = AgentMessage::decode(b"{\"type\":\"bye\",\"reason\":\"\xff\"}").unwrap_err();
        assert_eq!(not_utf8.code, ErrorCode::Malformed);
        assert!(not_utf8.message.starts_with("the line is not UTF-8"));
        assert_eq!(
            agent(r#"{"type":5}"#).unwrap_err().message,
            "type = 5 is not a string"
        );
        assert_eq!(
            agent(r#"{"type":"target"}"#).unwrap_err().message,
            "type = \"target\" names no message memtide reads in version 1"
        );
        assert_eq!(
            memtide(r#"{"type":"hello"}"#).unwrap_err().message,
            "type = \"hello\" names no message an agent reads in version 1"
        );
    }

    #[test]
    fn a_line_of_65535_bytes_fits_and_one_of_65536_is_too_long() {
        let fits = format!(r#"{{"type":"bye","reason":"{}"}}"#, " ".repeat(100));
        let pad = |len: usize| format!("{fits}{}", " ".repeat(len - fits.len()));
        assert!(agent(&pad(MAX_LINE_BYTES - 1)).is_ok());
        let long = agent(&pad(MAX_LINE_BYTES)).unwrap_err();
        assert_eq!(long.code, ErrorCode::TooLong);
        assert_eq!(
            long.message,
            "the line is 65537 bytes with its newline, over 65536"
        );
    }

    #[test]
    fn welcome_rules_the_vectors_ask_for() {
        let welcome = |tenant: &str, interval: u64, dead: u64| {
            memtide(&format!(
                r#"{{"type":"welcome","version":1,"tenant":"{tenant}","stats_interval_ms":{interval},"dead_after_ms":{dead}}}"#
            ))
        };
        assert!(welcome("db", 1000, 1000).is_ok());
        assert_eq!(
            welcome("", 1000, 5000).unwrap_err().message,
            "welcome.tenant is empty"
        );
        assert_eq!(
            welcome("db", 1000, 500).unwrap_err().message,
            "welcome.dead_after_ms = 500 < stats_interval_ms = 1000"
        );
        assert_eq!(
            welcome("db", 0, 5000).unwrap_err().message,
            "welcome.stats_interval_ms = 0 is not an integer in [1, 9007199254740991]"
        );
    }

    #[test]
    fn an_error_needs_a_known_code_a_message_and_fatal() {
        let error = |body: &str| agent(&format!(r#"{{"type":"error",{body}}}"#));
        assert!(error(r#""code":"dead","message":"","fatal":true"#).is_ok());
        assert_eq!(
            error(r#""code":"oops","message":"x","fatal":true"#)
                .unwrap_err()
                .message,
            "error.code = \"oops\" is not a code of version 1"
        );
        assert_eq!(
            error(r#""code":"dead","fatal":true"#).unwrap_err().message,
            "error.message is missing"
        );
        assert_eq!(
            error(r#""code":"dead","message":"x""#).unwrap_err().message,
            "error.fatal is missing"
        );
    }

    #[test]
    fn a_reason_must_be_a_string_of_at_most_1024_bytes() {
        let bye = |reason: &str| agent(&format!(r#"{{"type":"bye","reason":{reason}}}"#));
        assert!(bye(&format!("\"{}\"", "x".repeat(1024))).is_ok());
        assert_eq!(
            bye(&format!("\"{}\"", "x".repeat(1025)))
                .unwrap_err()
                .message,
            "bye.reason is 1025 bytes, over 1024"
        );
        assert_eq!(
            bye("null").unwrap_err().message,
            "bye.reason = null is not a string"
        );
    }

    #[test]
    fn the_pool_rules_hold_for_a_pool_built_in_code() {
        let pool = PoolInfo {
            app: "x".repeat(129),
            kind: PoolKind::Cache,
            pool_bytes: 0,
            min_bytes: 0,
            max_bytes: 0,
            granule_bytes: 1,
        };
        assert_eq!(
            pool.check().unwrap_err().message,
            "hello.app is 129 bytes, over 128"
        );
        let huge = PoolInfo {
            app: "x".into(),
            max_bytes: MAX_INTEGER + 1,
            ..pool
        };
        assert_eq!(
            huge.check().unwrap_err().message,
            "hello.max_bytes = 9007199254740992 is over 9007199254740991"
        );
    }
}
