//! Decoding one line into a message: framing, type, then each field by its rule, the first broken rule answered with its code and a message naming the field and the value.

use serde_json::{Map, Value};

use super::{
    AgentMessage, Bye, CurvePoint, Durability, ErrorCode, ErrorMessage, Hello, MemtideMessage,
    PoolInfo, PoolKind, Progress, ProgressStatus, ProtocolError, Stats, Target, Welcome,
    MAX_APP_BYTES, MAX_CURVE_POINTS, MAX_INTEGER, MAX_LINE_BYTES, MAX_REASON_BYTES,
    PROTOCOL_VERSION,
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
        durability: durability(fields)?,
        curve: curve(fields)?,
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

/// The optional `stats.durability`: an object whose fields are each optional, each an integer
/// of the wire within its own range ([`Durability::FIELDS`]); fields it does not know are
/// ignored.
fn durability(fields: &Fields) -> Result<Option<Durability>, ProtocolError> {
    let Some(value) = fields.object.get("durability") else {
        return Ok(None);
    };
    let Value::Object(object) = value else {
        return Err(fields.bad(
            "durability",
            format!(
                "= {}: not an object of durability settings and counters",
                quote(value)
            ),
        ));
    };
    let mut values = [None; 9];
    for (slot, (name, least, most)) in values.iter_mut().zip(Durability::FIELDS) {
        if let Some(value) = object.get(name) {
            let field = format!("durability.{name}");
            *slot = Some(fields.integer_in(&field, value, least, most)?);
        }
    }
    let [flush, sync, buffer, threads, data_fsyncs, log_fsyncs, log_waits, commits, groups] =
        values;
    // Each value is within its field's range (above), so every conversion holds.
    Ok(Some(Durability {
        flush_log_at_trx_commit: flush.and_then(|v| u8::try_from(v).ok()),
        sync_binlog: sync.and_then(|v| u32::try_from(v).ok()),
        log_buffer_bytes: buffer,
        write_io_threads: threads.and_then(|v| u32::try_from(v).ok()),
        data_fsyncs,
        log_fsyncs,
        log_waits,
        binlog_commits: commits,
        binlog_group_commits: groups,
    }))
}

/// The rules of durability figures built in code ([`super::check_durability`]): each value
/// within its field's range, named as the decoder names it.
pub(super) fn check_durability(durability: &Durability) -> Result<(), ProtocolError> {
    for (value, (name, least, most)) in durability.values().into_iter().zip(Durability::FIELDS) {
        if let Some(value) = value.filter(|v| !(least..=most).contains(v)) {
            return Err(ProtocolError::new(
                ErrorCode::BadField,
                format!("stats.durability.{name} = {value} is not an integer in [{least}, {most}]"),
            ));
        }
    }
    Ok(())
}

/// The optional `stats.curve`: an array of 1 to 16 `[pool_bytes, miss_ratio]` pairs, each
/// size an integer of the wire from 1, each ratio a JSON number (a fraction allowed), then the
/// curve's rules ([`check_curve`]) on the values as written.
fn curve(fields: &Fields) -> Result<Option<Vec<CurvePoint>>, ProtocolError> {
    let Some(value) = fields.object.get("curve") else {
        return Ok(None);
    };
    let Value::Array(points) = value else {
        return Err(fields.bad(
            "curve",
            format!(
                "= {}: not an array of 1 to {MAX_CURVE_POINTS} [pool_bytes, miss_ratio] pairs",
                quote(value)
            ),
        ));
    };
    check_count(points.len())?;
    let mut read = Vec::with_capacity(points.len());
    for (at, point) in points.iter().enumerate() {
        let (size, ratio) = match point.as_array().map(Vec::as_slice) {
            Some([size, ratio]) => (size, ratio),
            _ => {
                return Err(fields.bad(
                    &format!("curve[{at}]"),
                    format!("= {}: not a [pool_bytes, miss_ratio] pair", quote(point)),
                ))
            }
        };
        let size = fields.integer_value(&format!("curve[{at}][0]"), size, 1)?;
        let ratio = match ratio {
            Value::Number(number) => number.as_f64(),
            _ => None,
        }
        .ok_or_else(|| {
            fields.bad(
                &format!("curve[{at}][1]"),
                format!("= {}: a miss ratio is a number in [0, 1]", quote(ratio)),
            )
        })?;
        read.push((size, ratio));
    }
    check_curve(read.len(), read.iter().copied())?;
    Ok(Some(
        read.into_iter()
            .map(|(size, ratio)| CurvePoint::new(size, ratio))
            .collect(),
    ))
}

fn curve_error(rule: String) -> ProtocolError {
    ProtocolError::new(ErrorCode::BadField, format!("stats.curve{rule}"))
}

fn check_count(len: usize) -> Result<(), ProtocolError> {
    if (1..=MAX_CURVE_POINTS).contains(&len) {
        Ok(())
    } else {
        Err(curve_error(format!(
            " has {len} points: a curve has 1 to {MAX_CURVE_POINTS}"
        )))
    }
}

/// The rules of a curve of `len` points (size in bytes, miss ratio), whether decoded or built
/// in code ([`super::check_curve`]).
pub(super) fn check_curve(
    len: usize,
    points: impl Iterator<Item = (u64, f64)>,
) -> Result<(), ProtocolError> {
    check_count(len)?;
    let mut previous: Option<(u64, f64)> = None;
    for (at, (size, ratio)) in points.enumerate() {
        if !(1..=MAX_INTEGER).contains(&size) {
            return Err(curve_error(format!(
                "[{at}][0] = {size}: a pool size is an integer in [1, {MAX_INTEGER}]"
            )));
        }
        if let Some((before, _)) = previous.filter(|&(before, _)| size <= before) {
            return Err(curve_error(format!(
                "[{at}][0] = {size}: not above the previous point's {before}: sizes are strictly ascending"
            )));
        }
        if !(0.0..=1.0).contains(&ratio) {
            return Err(curve_error(format!(
                "[{at}][1] = {ratio}: a miss ratio is in [0, 1]"
            )));
        }
        if let Some((_, before)) = previous.filter(|&(_, before)| ratio > before) {
            return Err(curve_error(format!(
                "[{at}][1] = {ratio}: above the previous point's {before}: an LRU pool never misses more when larger"
            )));
        }
        previous = Some((size, ratio));
    }
    Ok(())
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
        self.integer_value(field, self.get(field)?, least)
    }

    /// `value`, named `field` in errors, as an integer in `[least, 2^53 − 1]` written without
    /// fraction or exponent.
    fn integer_value(&self, field: &str, value: &Value, least: u64) -> Result<u64, ProtocolError> {
        self.integer_in(field, value, least, MAX_INTEGER)
    }

    /// `value`, named `field` in errors, as an integer in `[least, most]` (`most` at most
    /// 2^53 − 1) written without fraction or exponent.
    fn integer_in(
        &self,
        field: &str,
        value: &Value,
        least: u64,
        most: u64,
    ) -> Result<u64, ProtocolError> {
        let range = || format!("in [{least}, {most}]");
        match value {
            Value::Number(number) => match number.as_u64() {
                Some(n) if (least..=most).contains(&n) => Ok(n),
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

    const STATS: &str = r#"{"type":"stats","pool_bytes":1073741824,"used_bytes":1000000000,"hits":912345,"misses":2345,"evictions":1200,"dirty_bytes":0"#;

    fn stats_with_curve(curve: &str) -> Result<AgentMessage, ProtocolError> {
        agent(&format!(r#"{STATS},"curve":{curve}}}"#))
    }

    fn curve_of(message: AgentMessage) -> Option<Vec<CurvePoint>> {
        match message {
            AgentMessage::Stats(stats) => stats.curve,
            other => panic!("not a stats: {other:?}"),
        }
    }

    #[test]
    fn stats_without_a_curve_have_none() {
        assert_eq!(curve_of(agent(&format!("{STATS}}}")).unwrap()), None);
    }

    #[test]
    fn a_curve_decodes_to_sizes_and_ratios_in_parts_per_million() {
        let curve = curve_of(
            stats_with_curve("[[134217728,0.61],[268435456,0.4],[1073741824,0.05]]").unwrap(),
        )
        .unwrap();
        assert_eq!(
            curve,
            [
                CurvePoint {
                    pool_bytes: 134217728,
                    miss_ppm: 610_000
                },
                CurvePoint {
                    pool_bytes: 268435456,
                    miss_ppm: 400_000
                },
                CurvePoint {
                    pool_bytes: 1073741824,
                    miss_ppm: 50_000
                },
            ]
        );
        assert_eq!(curve[0].miss_ratio(), 0.61);
    }

    #[test]
    fn a_curve_takes_ratios_written_as_integers_and_equal_ratios() {
        let curve = curve_of(stats_with_curve("[[1,1],[2,1],[3,0],[4,0]]").unwrap()).unwrap();
        let ppm: Vec<u32> = curve.iter().map(|p| p.miss_ppm).collect();
        assert_eq!(ppm, [1_000_000, 1_000_000, 0, 0]);
    }

    #[test]
    fn a_curve_of_16_points_fits_and_one_of_17_or_none_does_not() {
        let points = |n: u64| {
            let pairs: Vec<String> = (1..=n).map(|i| format!("[{},0.5]", i << 20)).collect();
            format!("[{}]", pairs.join(","))
        };
        assert_eq!(
            curve_of(stats_with_curve(&points(16)).unwrap())
                .unwrap()
                .len(),
            16
        );
        let long = stats_with_curve(&points(17)).unwrap_err();
        assert_eq!(long.code, ErrorCode::BadField);
        assert_eq!(
            long.message,
            "stats.curve has 17 points: a curve has 1 to 16"
        );
        assert_eq!(
            stats_with_curve("[]").unwrap_err().message,
            "stats.curve has 0 points: a curve has 1 to 16"
        );
    }

    #[test]
    fn a_curve_that_is_not_an_array_of_pairs_is_a_bad_field() {
        let cases = [
            (
                r#"{"134217728":0.61}"#,
                r#"stats.curve = {"134217728":0.61}: not an array of 1 to 16 [pool_bytes, miss_ratio] pairs"#,
            ),
            (
                "null",
                "stats.curve = null: not an array of 1 to 16 [pool_bytes, miss_ratio] pairs",
            ),
            (
                "[[4096,0.5],4096]",
                "stats.curve[1] = 4096: not a [pool_bytes, miss_ratio] pair",
            ),
            (
                "[[4096]]",
                "stats.curve[0] = [4096]: not a [pool_bytes, miss_ratio] pair",
            ),
            (
                "[[4096,0.5,1]]",
                "stats.curve[0] = [4096,0.5,1]: not a [pool_bytes, miss_ratio] pair",
            ),
            (
                r#"[[4096,"0.5"]]"#,
                r#"stats.curve[0][1] = "0.5": a miss ratio is a number in [0, 1]"#,
            ),
        ];
        for (curve, message) in cases {
            let error = stats_with_curve(curve).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{curve}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn a_curve_s_sizes_follow_the_integer_rules_from_1() {
        let cases = [
            (
                "[[0,0.5]]",
                "stats.curve[0][0] = 0 is not an integer in [1, 9007199254740991]",
            ),
            (
                "[[4096.5,0.5]]",
                "stats.curve[0][0] = 4096.5 is not an integer (a fraction or an exponent)",
            ),
            (
                "[[4096,0.5],[9007199254740992,0.1]]",
                "stats.curve[1][0] = 9007199254740992 is not an integer in [1, 9007199254740991]",
            ),
            (
                "[[-4096,0.5]]",
                "stats.curve[0][0] = -4096 is not an integer in [1, 9007199254740991]",
            ),
        ];
        for (curve, message) in cases {
            let error = stats_with_curve(curve).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{curve}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn a_curve_s_sizes_must_be_strictly_ascending() {
        let cases = [
            (
                "[[8192,0.5],[4096,0.4]]",
                "stats.curve[1][0] = 4096: not above the previous point's 8192: sizes are strictly ascending",
            ),
            (
                "[[4096,0.5],[8192,0.4],[8192,0.3]]",
                "stats.curve[2][0] = 8192: not above the previous point's 8192: sizes are strictly ascending",
            ),
        ];
        for (curve, message) in cases {
            assert_eq!(stats_with_curve(curve).unwrap_err().message, message);
        }
    }

    #[test]
    fn a_miss_ratio_is_within_0_and_1() {
        let cases = [
            (
                "[[4096,0.9],[8192,0.5],[12288,1.5]]",
                "stats.curve[2][1] = 1.5: a miss ratio is in [0, 1]",
            ),
            (
                "[[4096,-0.1]]",
                "stats.curve[0][1] = -0.1: a miss ratio is in [0, 1]",
            ),
        ];
        for (curve, message) in cases {
            let error = stats_with_curve(curve).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{curve}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn a_miss_ratio_never_rises_with_the_size() {
        let error = stats_with_curve("[[4096,0.4],[8192,0.5]]").unwrap_err();
        assert_eq!(error.code, ErrorCode::BadField);
        assert_eq!(
            error.message,
            "stats.curve[1][1] = 0.5: above the previous point's 0.4: an LRU pool never misses more when larger"
        );
    }

    #[test]
    fn the_curve_rules_hold_for_a_curve_built_in_code() {
        use super::super::check_curve;
        let point = CurvePoint::new;
        assert_eq!(check_curve(&[point(4096, 0.5), point(8192, 0.25)]), Ok(()));
        assert_eq!(
            check_curve(&[]).unwrap_err().message,
            "stats.curve has 0 points: a curve has 1 to 16"
        );
        assert_eq!(
            check_curve(&[point(0, 0.5)]).unwrap_err().message,
            "stats.curve[0][0] = 0: a pool size is an integer in [1, 9007199254740991]"
        );
        assert_eq!(
            check_curve(&[point(4096, 0.25), point(8192, 0.5)])
                .unwrap_err()
                .message,
            "stats.curve[1][1] = 0.5: above the previous point's 0.25: an LRU pool never misses more when larger"
        );
        for ratio in [f64::NAN, -0.5, 1.01] {
            let error = check_curve(&[point(4096, ratio)]).unwrap_err();
            assert!(
                error.message.ends_with(": a miss ratio is in [0, 1]"),
                "{ratio}: {}",
                error.message
            );
        }
    }

    const DURABILITY: &str = r#"{"flush_log_at_trx_commit":1,"sync_binlog":1,"log_buffer_bytes":16777216,"write_io_threads":4,"data_fsyncs":50612,"log_waits":0,"binlog_commits":50000,"binlog_group_commits":41000}"#;

    fn stats_with_durability(durability: &str) -> Result<AgentMessage, ProtocolError> {
        agent(&format!(r#"{STATS},"durability":{durability}}}"#))
    }

    fn durability_of(message: AgentMessage) -> Option<Durability> {
        match message {
            AgentMessage::Stats(stats) => stats.durability,
            other => panic!("not a stats: {other:?}"),
        }
    }

    #[test]
    fn stats_without_durability_have_none() {
        assert_eq!(durability_of(agent(&format!("{STATS}}}")).unwrap()), None);
    }

    #[test]
    fn durability_decodes_each_field_and_leaves_the_missing_ones_none() {
        let d = durability_of(stats_with_durability(DURABILITY).unwrap()).unwrap();
        assert_eq!(
            d,
            Durability {
                flush_log_at_trx_commit: Some(1),
                sync_binlog: Some(1),
                log_buffer_bytes: Some(16 << 20),
                write_io_threads: Some(4),
                data_fsyncs: Some(50612),
                log_fsyncs: None,
                log_waits: Some(0),
                binlog_commits: Some(50000),
                binlog_group_commits: Some(41000),
            }
        );
    }

    #[test]
    fn durability_may_be_empty_and_its_unknown_fields_are_ignored() {
        let empty = durability_of(stats_with_durability("{}").unwrap());
        assert_eq!(empty, Some(Durability::default()));
        let other = durability_of(
            stats_with_durability(r#"{"sync_binlog":100,"innodb_doublewrite":"ON"}"#).unwrap(),
        );
        assert_eq!(
            other,
            Some(Durability {
                sync_binlog: Some(100),
                ..Durability::default()
            })
        );
    }

    #[test]
    fn durability_settings_are_within_their_ranges() {
        let highest = r#"{"flush_log_at_trx_commit":3,"sync_binlog":4294967295,"log_buffer_bytes":9007199254740991,"write_io_threads":64,"log_fsyncs":9007199254740991}"#;
        let d = durability_of(stats_with_durability(highest).unwrap()).unwrap();
        assert_eq!(
            (
                d.flush_log_at_trx_commit,
                d.sync_binlog,
                d.write_io_threads,
                d.log_fsyncs
            ),
            (Some(3), Some(u32::MAX), Some(64), Some(MAX_INTEGER))
        );
        let cases = [
            (
                r#"{"flush_log_at_trx_commit":4}"#,
                "stats.durability.flush_log_at_trx_commit = 4 is not an integer in [0, 3]",
            ),
            (
                r#"{"sync_binlog":4294967296}"#,
                "stats.durability.sync_binlog = 4294967296 is not an integer in [0, 4294967295]",
            ),
            (
                r#"{"log_buffer_bytes":0}"#,
                "stats.durability.log_buffer_bytes = 0 is not an integer in [1, 9007199254740991]",
            ),
            (
                r#"{"write_io_threads":0}"#,
                "stats.durability.write_io_threads = 0 is not an integer in [1, 64]",
            ),
            (
                r#"{"write_io_threads":65}"#,
                "stats.durability.write_io_threads = 65 is not an integer in [1, 64]",
            ),
        ];
        for (durability, message) in cases {
            let error = stats_with_durability(durability).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{durability}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn durability_counters_follow_the_integer_rules() {
        let cases = [
            (
                r#"{"data_fsyncs":-1}"#,
                "stats.durability.data_fsyncs = -1 is not an integer in [0, 9007199254740991]",
            ),
            (
                r#"{"log_waits":1.5}"#,
                "stats.durability.log_waits = 1.5 is not an integer (a fraction or an exponent)",
            ),
            (
                r#"{"binlog_commits":"12"}"#,
                r#"stats.durability.binlog_commits = "12" is not an integer"#,
            ),
            (
                r#"{"binlog_group_commits":null}"#,
                "stats.durability.binlog_group_commits = null is not an integer",
            ),
            (
                r#"{"log_fsyncs":9007199254740992}"#,
                "stats.durability.log_fsyncs = 9007199254740992 is not an integer in [0, 9007199254740991]",
            ),
        ];
        for (durability, message) in cases {
            let error = stats_with_durability(durability).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField, "{durability}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn durability_that_is_not_an_object_is_a_bad_field() {
        for (value, message) in [
            (
                "[1,2]",
                "stats.durability = [1,2]: not an object of durability settings and counters",
            ),
            (
                "null",
                "stats.durability = null: not an object of durability settings and counters",
            ),
        ] {
            let error = stats_with_durability(value).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField);
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn the_durability_rules_hold_for_figures_built_in_code() {
        use super::super::check_durability;
        assert_eq!(check_durability(&Durability::default()), Ok(()));
        let good = durability_of(stats_with_durability(DURABILITY).unwrap()).unwrap();
        assert_eq!(check_durability(&good), Ok(()));
        let cases = [
            (
                Durability {
                    flush_log_at_trx_commit: Some(7),
                    ..good
                },
                "stats.durability.flush_log_at_trx_commit = 7 is not an integer in [0, 3]",
            ),
            (
                Durability {
                    write_io_threads: Some(0),
                    ..good
                },
                "stats.durability.write_io_threads = 0 is not an integer in [1, 64]",
            ),
            (
                Durability {
                    log_buffer_bytes: Some(0),
                    ..good
                },
                "stats.durability.log_buffer_bytes = 0 is not an integer in [1, 9007199254740991]",
            ),
            (
                Durability {
                    data_fsyncs: Some(MAX_INTEGER + 1),
                    ..good
                },
                "stats.durability.data_fsyncs = 9007199254740992 is not an integer in [0, 9007199254740991]",
            ),
        ];
        for (durability, message) in cases {
            let error = check_durability(&durability).unwrap_err();
            assert_eq!(error.code, ErrorCode::BadField);
            assert_eq!(error.message, message);
        }
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
