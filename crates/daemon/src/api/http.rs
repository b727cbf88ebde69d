//! The small HTTP/1.1 server side the API needs: parse one request from the bytes a connection sent so far, with limits on head and body; write one response.
//!
//! The event loop (`event.rs`) reads without blocking and calls [`parse`] after each read, so a
//! slow client holds no thread. Every connection carries exactly one request and is closed after the response
//! (`Connection: close`), so there is no keep-alive or pipelining state. Request bodies need a
//! `Content-Length` (no chunked uploads); a declared length above the limit is refused before a
//! byte of the body is read or any buffer is sized from it.

use std::io::{self, Write};

/// How much of a request the server accepts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Request line plus headers, in bytes.
    pub(crate) head_bytes: usize,
    /// Body, in bytes.
    pub(crate) body_bytes: usize,
}

/// One request as read off the wire.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HttpRequest {
    /// `GET`, `PATCH`, ... as sent (upper case ASCII letters).
    pub(crate) method: String,
    /// The request target in origin form: `/v1/tenants/db?x=y`.
    pub(crate) target: String,
    /// The token of an `Authorization: Bearer` header; never printed.
    pub(crate) bearer: Option<String>,
    pub(crate) body: Vec<u8>,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("bearer", &self.bearer.as_ref().map(|_| "<hidden>"))
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

/// Why no request could be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The peer closed (or failed) before sending anything worth answering.
    Closed,
    /// Answer with this status and one-line message, then close.
    Reject { status: u16, message: String },
}

fn reject(status: u16, message: impl Into<String>) -> ReadError {
    ReadError::Reject {
        status,
        message: message.into(),
    }
}

/// One response: status, content type, body and an optional `Allow` header (for 405).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
    pub(crate) allow: Option<&'static str>,
}

pub(crate) const JSON: &str = "application/json";
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";
pub(crate) const HTML: &str = "text/html; charset=utf-8";

/// The dashboard's policy: its own inline style and script, images only as data, requests
/// only to the daemon; nothing from elsewhere, no framing by another site.
const HTML_POLICY: &str =
    "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; \
    script-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'\r\n\
    X-Content-Type-Options: nosniff\r\n";

impl Reply {
    pub(crate) fn json(status: u16, body: String) -> Reply {
        Reply {
            status,
            content_type: JSON,
            body,
            allow: None,
        }
    }

    pub(crate) fn text(status: u16, content_type: &'static str, body: String) -> Reply {
        Reply {
            status,
            content_type,
            body,
            allow: None,
        }
    }

    /// `{"error": "<message>"}` (a [`memtide_api::ErrorBody`]), the message folded onto one line.
    pub(crate) fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, memtide_api::ErrorBody::one_line(message).to_json())
    }
}

/// How far the bytes a connection sent so far go.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// The request is not complete yet; `expect_continue`: its head is, it asked for
    /// `100 Continue` and no byte of its body has come.
    Incomplete {
        expect_continue: bool,
    },
    Request(HttpRequest),
}

/// Parses what a connection sent so far (`eof`: and then closed). A declared body over the
/// limit is refused as soon as the head is complete, before any buffer is sized from it.
pub(crate) fn parse(buf: &[u8], eof: bool, limits: &Limits) -> Result<Parsed, ReadError> {
    let Some((head_end, body_start)) = find_head_end(buf) else {
        if buf.len() > limits.head_bytes {
            return Err(head_too_large(limits));
        }
        return match (eof, buf.is_empty()) {
            (false, _) => Ok(Parsed::Incomplete {
                expect_continue: false,
            }),
            (true, true) => Err(ReadError::Closed),
            (true, false) => Err(reject(
                400,
                "the connection closed in the middle of the request head",
            )),
        };
    };
    let (parsed, length) = checked_head(&buf[..head_end], limits)?;
    let have = buf.len() - body_start;
    if have >= length {
        return Ok(Parsed::Request(HttpRequest {
            method: parsed.method,
            target: parsed.target,
            bearer: parsed.bearer,
            body: buf[body_start..body_start + length].to_vec(),
        }));
    }
    if eof {
        return Err(reject(
            400,
            format!(
                "the connection closed after {have} of the {length} body bytes announced by Content-Length"
            ),
        ));
    }
    Ok(Parsed::Incomplete {
        expect_continue: parsed.expect_continue && have == 0,
    })
}

/// The answer to a connection whose request did not arrive in time.
pub(crate) fn timed_out(buf: &[u8], limits: &Limits) -> ReadError {
    let Some((head_end, body_start)) = find_head_end(buf) else {
        return reject(408, "the request head did not arrive in time");
    };
    match checked_head(&buf[..head_end], limits) {
        Ok((_, length)) => reject(
            408,
            format!(
                "only {} of the {length} body bytes announced by Content-Length arrived in time",
                buf.len() - body_start
            ),
        ),
        Err(e) => e,
    }
}

/// The parsed head and its body's length, within the limits.
fn checked_head(head: &[u8], limits: &Limits) -> Result<(Head, usize), ReadError> {
    if head.len() > limits.head_bytes {
        return Err(head_too_large(limits));
    }
    let head =
        std::str::from_utf8(head).map_err(|_| reject(400, "the request head is not UTF-8"))?;
    let parsed = parse_head(head)?;
    let length = parsed.content_length.unwrap_or(0);
    if length > limits.body_bytes as u64 {
        return Err(reject(
            413,
            format!(
                "the request body of {length} bytes is larger than the limit of {} bytes",
                limits.body_bytes
            ),
        ));
    }
    Ok((parsed, length as usize)) // at most limits.body_bytes
}

fn head_too_large(limits: &Limits) -> ReadError {
    reject(
        431,
        format!(
            "the request line and headers are longer than {} bytes",
            limits.head_bytes
        ),
    )
}

/// Where the head ends and the body starts: after the first empty line (`\r\n\r\n` or `\n\n`).
fn find_head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut line_start = 0;
    for (i, &b) in buf.iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        let line = &buf[line_start..i];
        if line.is_empty() || line == b"\r" {
            // A leading empty line (before the request line) is tolerated like most servers do.
            if line_start > 0 {
                return Some((line_start, i + 1));
            }
        }
        line_start = i + 1;
    }
    None
}

struct Head {
    method: String,
    target: String,
    content_length: Option<u64>,
    expect_continue: bool,
    bearer: Option<String>,
}

fn parse_head(head: &str) -> Result<Head, ReadError> {
    let mut lines = head
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .skip_while(|l| l.is_empty());
    let request_line = lines.next().unwrap_or("");
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(reject(
            400,
            format!(
                "malformed request line {:?}; expected METHOD /path HTTP/1.1",
                clip(request_line)
            ),
        ));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(reject(400, format!("malformed method {:?}", clip(method))));
    }
    if !target.starts_with('/') || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(reject(
            400,
            format!(
                "malformed request target {:?}; expected a path such as /v1/status",
                clip(target)
            ),
        ));
    }
    match version {
        "HTTP/1.1" | "HTTP/1.0" => {}
        v if v.starts_with("HTTP/") => {
            return Err(reject(
                505,
                format!("HTTP version {:?} is not supported; use HTTP/1.1", clip(v)),
            ))
        }
        v => return Err(reject(400, format!("malformed HTTP version {:?}", clip(v)))),
    }

    let mut content_length: Option<u64> = None;
    let mut expect_continue = false;
    let mut bearer = None;
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            return Err(reject(400, "folded header lines are not supported"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(reject(
                400,
                format!("malformed header line {:?}", clip(line)),
            ));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(reject(
                400,
                format!("malformed header name {:?}", clip(name)),
            ));
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(reject(
                    400,
                    format!("Content-Length {:?} is not a number of bytes", clip(value)),
                ));
            }
            // Digits only: a parse failure means more than u64::MAX, i.e. far too large.
            let n = value.parse::<u64>().unwrap_or(u64::MAX);
            if content_length.is_some_and(|prev| prev != n) {
                return Err(reject(400, "conflicting Content-Length headers"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(reject(
                411,
                format!(
                    "Transfer-Encoding {:?} is not supported; send the body with a Content-Length",
                    clip(value)
                ),
            ));
        } else if name.eq_ignore_ascii_case("authorization") {
            // Never echoed: the value is a secret. Another scheme is no token at all.
            bearer = value
                .split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token.trim().to_string());
        } else if name.eq_ignore_ascii_case("expect") {
            if value.eq_ignore_ascii_case("100-continue") {
                expect_continue = true;
            } else {
                return Err(reject(
                    417,
                    format!("Expect {:?} is not supported", clip(value)),
                ));
            }
        }
    }
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        content_length,
        expect_continue,
        bearer,
    })
}

/// At most 80 characters of a client-supplied string, for error messages.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

/// Writes `reply` with `Content-Length` and `Connection: close` (no body for `HEAD`).
pub(crate) fn write_response<W: Write>(
    w: &mut W,
    reply: &Reply,
    head_only: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        reply.status,
        reason_phrase(reply.status),
        reply.content_type,
        reply.body.len()
    );
    if reply.content_type == HTML {
        head.push_str(HTML_POLICY);
    }
    if let Some(allow) = reply.allow {
        head.push_str("Allow: ");
        head.push_str(allow);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    if !head_only {
        w.write_all(reply.body.as_bytes())?;
    }
    w.flush()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        head_bytes: 256,
        body_bytes: 16,
    };

    fn read(input: &[u8]) -> Result<HttpRequest, ReadError> {
        match parse(input, true, &LIMITS)? {
            Parsed::Request(req) => Ok(req),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn status_of(input: &[u8]) -> u16 {
        match read(input) {
            Err(ReadError::Reject { status, .. }) => status,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn reads_a_request_with_a_body_by_content_length() {
        let req =
            read(b"PATCH /v1/tenants/db HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n{}{}extra")
                .unwrap();
        assert_eq!(req.method, "PATCH");
        assert_eq!(req.target, "/v1/tenants/db");
        assert_eq!(req.body, b"{}{}");
    }

    #[test]
    fn reads_a_request_without_a_body_and_with_bare_newlines() {
        let req = read(b"GET /metrics HTTP/1.0\nHost: x\n\n").unwrap();
        assert_eq!(req.method, "GET");
        assert_eq!(req.target, "/metrics");
        assert!(req.body.is_empty());
    }

    #[test]
    fn nothing_sent_is_closed_not_answered() {
        assert_eq!(read(b""), Err(ReadError::Closed));
    }

    #[test]
    fn refuses_a_declared_body_over_the_limit_without_reading_it() {
        let huge = b"PUT /v1/tax-rate HTTP/1.1\r\nContent-Length: 100000000000000\r\n\r\n";
        assert_eq!(status_of(huge), 413);
        let beyond_u64 = b"PUT /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert_eq!(status_of(beyond_u64), 413);
    }

    #[test]
    fn an_unsupported_version_is_clipped_in_the_answer() {
        let mut input = b"GET / HTTP/".to_vec();
        input.extend(std::iter::repeat_n(b'9', 200));
        input.extend_from_slice(b"\r\n\r\n");
        let limits = Limits {
            head_bytes: 1024,
            body_bytes: 16,
        };
        let Err(ReadError::Reject { status, message }) = parse(&input, true, &limits) else {
            panic!("a 200-digit version must be refused");
        };
        assert_eq!(status, 505);
        assert!(message.contains('…'), "{message}");
        assert!(message.len() < 200, "a {}-byte message", message.len());
    }

    #[test]
    fn refuses_malformed_heads() {
        let cases: &[(&[u8], u16)] = &[
            (b"GARBAGE\r\n\r\n", 400),
            (b"get / HTTP/1.1\r\n\r\n", 400),
            (b"GET nopath HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\n\r\n", 505),
            (b"GET / FTP\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nX: a\r\n  folded\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                400,
            ),
            (b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
            (b"PUT / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417),
            (b"GET / HTTP/1.1\r\n\xff\xfe: x\r\n\r\n", 400),
            (b"PUT / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", 400),
            (b"GET / HTTP/1.1\r\nHost: x\r\n", 400),
        ];
        for (input, want) in cases {
            assert_eq!(
                status_of(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn refuses_a_head_over_the_limit() {
        let mut input = b"GET / HTTP/1.1\r\nX: ".to_vec();
        input.extend(std::iter::repeat_n(b'a', 1000));
        input.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status_of(&input), 431);
    }

    #[test]
    fn asks_for_the_body_with_100_continue_only_before_it_comes() {
        let head = b"PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(
            parse(head, false, &LIMITS),
            Ok(Parsed::Incomplete {
                expect_continue: true
            })
        );
        let mut partial = head.to_vec();
        partial.push(b'{');
        assert_eq!(
            parse(&partial, false, &LIMITS),
            Ok(Parsed::Incomplete {
                expect_continue: false
            })
        );
        partial.push(b'}');
        assert_eq!(read(&partial).unwrap().body, b"{}");
    }

    #[test]
    fn a_partial_request_waits_and_its_timeout_says_what_was_missing() {
        let head = b"PUT / HTTP/1.1\r\nContent-Length: 4\r\n\r\n{}";
        assert!(matches!(
            parse(head, false, &LIMITS),
            Ok(Parsed::Incomplete { .. })
        ));
        let ReadError::Reject { status, message } = timed_out(head, &LIMITS) else {
            panic!("a timeout is answered");
        };
        assert_eq!(status, 408);
        assert!(message.contains("only 2 of the 4 body bytes"), "{message}");
        assert!(matches!(
            timed_out(b"GET / HT", &LIMITS),
            ReadError::Reject { status: 408, .. }
        ));
    }

    #[test]
    fn a_bearer_token_is_read_but_never_printed() {
        let req = read(b"GET / HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n").unwrap();
        assert_eq!(req.bearer.as_deref(), Some("s3cret"));
        assert!(!format!("{req:?}").contains("s3cret"));
        let basic = read(b"GET / HTTP/1.1\r\nAuthorization: Basic s3cret\r\n\r\n").unwrap();
        assert_eq!(basic.bearer, None);
    }

    #[test]
    fn writes_a_response_with_length_close_and_allow() {
        let mut reply = Reply::error(405, "no\nway");
        reply.allow = Some("GET, HEAD");
        let mut out = Vec::new();
        write_response(&mut out, &reply, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
        assert!(text.contains("\r\nConnection: close\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n{\"error\":\"no way\"}"), "{text}");
        assert!(text.contains("Content-Length: 18\r\n"), "{text}");
    }

    #[test]
    fn head_responses_carry_no_body() {
        let mut out = Vec::new();
        write_response(&mut out, &Reply::text(200, TEXT, "ok".into()), true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with(
                "Content-Length: 2\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
            ),
            "{text}"
        );
    }
}

/// The request parser against arbitrary and mutated requests (issue 27's bounded fuzz target
/// for the HTTP parser, run as proptest cases in every test run): whatever a client sends, in
/// whatever pieces, [`parse`] never panics, never asks for more than the limits allow, answers
/// a refusal with a 4xx/5xx status and one line, and reads a whole valid request the same
/// whichever way it was split.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        head_bytes: 512,
        body_bytes: 64,
    };

    /// A valid request: its bytes, the request it must read as and its bearer token.
    #[derive(Clone, Debug)]
    struct Valid {
        bytes: Vec<u8>,
        method: String,
        target: String,
        token: Option<String>,
        body: Vec<u8>,
        /// Where the `Authorization` line (with its line end) lies in `bytes`.
        auth: Option<std::ops::Range<usize>>,
    }

    fn valid() -> impl Strategy<Value = Valid> {
        (
            prop::sample::select(vec!["GET", "HEAD", "PATCH", "PUT", "POST", "DELETE"]),
            "(/[a-z0-9_.-]{0,12}){1,4}(\\?[a-z]{1,4}=[a-z0-9]{0,6})?",
            prop::option::of("[A-Za-z0-9._~-]{8,40}"),
            prop::collection::vec(any::<u8>(), 0..=LIMITS.body_bytes),
            any::<bool>(),
            prop::collection::vec(("X-[A-Za-z]{1,10}", "[ -~]{0,30}"), 0..4),
        )
            .prop_map(|(method, target, token, body, crlf, extra)| {
                let eol = if crlf { "\r\n" } else { "\n" };
                let mut head = format!("{method} {target} HTTP/1.1{eol}Host: 127.0.0.1{eol}");
                for (name, value) in &extra {
                    head.push_str(&format!("{name}: {value}{eol}"));
                }
                let auth = token.as_ref().map(|t| {
                    let start = head.len();
                    head.push_str(&format!("Authorization: Bearer {t}{eol}"));
                    start..head.len()
                });
                head.push_str(&format!("Content-Length: {}{eol}{eol}", body.len()));
                let mut bytes = head.into_bytes();
                bytes.extend_from_slice(&body);
                Valid {
                    bytes,
                    method: method.to_string(),
                    target,
                    token,
                    body,
                    auth,
                }
            })
    }

    /// A change to a request's bytes; positions are taken modulo the length.
    #[derive(Clone, Debug)]
    enum Edit {
        Replace(prop::sample::Index, u8),
        Insert(prop::sample::Index, u8),
        Delete(prop::sample::Index),
        Repeat(prop::sample::Index, usize),
        Truncate(prop::sample::Index),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        // Bytes that matter to the parser more often than any byte would.
        let byte = prop_oneof![
            prop::sample::select(b"\r\n :\t0123456789/?%\x00\x7f\xff".to_vec()),
            any::<u8>(),
        ];
        prop_oneof![
            (any::<prop::sample::Index>(), byte.clone()).prop_map(|(i, b)| Edit::Replace(i, b)),
            (any::<prop::sample::Index>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<prop::sample::Index>().prop_map(Edit::Delete),
            (any::<prop::sample::Index>(), 1usize..600).prop_map(|(i, n)| Edit::Repeat(i, n)),
            any::<prop::sample::Index>().prop_map(Edit::Truncate),
        ]
    }

    /// `bytes` with the edits applied outside `keep` (which moves as bytes go in and out).
    fn mutate(bytes: &[u8], edits: &[Edit], keep: Option<std::ops::Range<usize>>) -> Vec<u8> {
        let mut out = bytes.to_vec();
        let mut keep = keep;
        for edit in edits {
            if out.is_empty() {
                break;
            }
            let at = |i: &prop::sample::Index, len: usize| i.index(len);
            let pos = match edit {
                Edit::Replace(i, _)
                | Edit::Insert(i, _)
                | Edit::Delete(i)
                | Edit::Repeat(i, _)
                | Edit::Truncate(i) => at(i, out.len()),
            };
            if let Some(k) = &keep {
                // The line kept whole, and the line end before it.
                if pos + 1 >= k.start && pos < k.end {
                    continue;
                }
            }
            let shift = |keep: &mut Option<std::ops::Range<usize>>, by: isize| {
                if let Some(k) = keep.as_mut() {
                    if pos < k.start {
                        *k = (k.start as isize + by) as usize..(k.end as isize + by) as usize;
                    }
                }
            };
            match edit {
                Edit::Replace(_, b) => out[pos] = *b,
                Edit::Insert(_, b) => {
                    out.insert(pos, *b);
                    shift(&mut keep, 1);
                }
                Edit::Delete(_) => {
                    out.remove(pos);
                    shift(&mut keep, -1);
                }
                Edit::Repeat(_, n) => {
                    let b = out[pos];
                    out.splice(pos..pos, std::iter::repeat_n(b, *n));
                    shift(&mut keep, *n as isize);
                }
                Edit::Truncate(_) => {
                    out.truncate(pos);
                    if keep.as_ref().is_some_and(|k| k.end > pos) {
                        keep = None;
                    }
                }
            }
        }
        out
    }

    /// What must hold of any answer to any bytes; `secret` must never be echoed.
    fn check(buf: &[u8], eof: bool, secret: Option<&str>) -> Result<(), TestCaseError> {
        match parse(buf, eof, &LIMITS) {
            Ok(Parsed::Incomplete { .. }) => {
                prop_assert!(!eof, "asked for more after the peer closed");
                // Never waits on more than a head and a body within the limits.
                prop_assert!(
                    buf.len() <= LIMITS.head_bytes + 2 + LIMITS.body_bytes,
                    "waits for more with {} bytes held",
                    buf.len()
                );
            }
            Ok(Parsed::Request(req)) => {
                prop_assert!(req.body.len() <= LIMITS.body_bytes);
                prop_assert!(!req.method.is_empty());
                prop_assert!(req.method.bytes().all(|b| b.is_ascii_uppercase()));
                prop_assert!(req.target.starts_with('/'));
                prop_assert!(!req.target.bytes().any(|b| b.is_ascii_control()));
                if let Some(s) = secret {
                    prop_assert!(!format!("{req:?}").contains(s), "Debug shows the token");
                }
            }
            Err(ReadError::Closed) => prop_assert!(eof && buf.is_empty()),
            Err(ReadError::Reject { status, message }) => {
                prop_assert!((400..600).contains(&status), "status {status}");
                prop_assert!(!message.is_empty());
                prop_assert!(
                    !message.contains('\n') && !message.contains('\r'),
                    "{message:?}"
                );
                // A clipped client string is at most 80 characters, each escaped to at most 10 bytes.
                prop_assert!(message.len() < 1024, "a {}-byte message", message.len());
                if let Some(s) = secret {
                    prop_assert!(!message.contains(s), "the token echoed in {message:?}");
                }
            }
        }
        if !eof {
            // A timeout's answer follows the same rules.
            let ReadError::Reject { status, message } = timed_out(buf, &LIMITS) else {
                return Ok(());
            };
            prop_assert!((400..600).contains(&status));
            prop_assert!(!message.contains('\n'));
            if let Some(s) = secret {
                prop_assert!(!message.contains(s), "the token echoed in {message:?}");
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 5000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn arbitrary_bytes_never_panic_the_parser(
            buf in prop::collection::vec(any::<u8>(), 0..1200),
            eof in any::<bool>(),
        ) {
            check(&buf, eof, None)?;
        }

        #[test]
        fn mutated_requests_parse_or_are_refused_in_one_line(
            request in valid(),
            edits in prop::collection::vec(edit(), 1..6),
            eof in any::<bool>(),
        ) {
            let buf = mutate(&request.bytes, &edits, request.auth.clone());
            // The token is a secret only while its header line stands whole.
            let kept = buf.windows(request.auth.as_ref().map_or(1, |a| a.len()))
                .any(|w| request.auth.as_ref().is_some_and(|a| w == &request.bytes[a.clone()]));
            let secret = request.token.as_deref().filter(|_| kept);
            check(&buf, eof, secret)?;
        }

        #[test]
        fn a_valid_request_reads_the_same_however_it_is_split(
            request in valid(),
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = &request.bytes;
            let cut = cut.index(bytes.len());
            // Every prefix waits for more, without a refusal.
            let partial = parse(&bytes[..cut], false, &LIMITS);
            prop_assert!(
                matches!(partial, Ok(Parsed::Incomplete { .. })),
                "{cut} of {} bytes: {partial:?}",
                bytes.len()
            );
            let Ok(Parsed::Request(req)) = parse(bytes, false, &LIMITS) else {
                return Err(TestCaseError::fail("a whole valid request did not read"));
            };
            prop_assert_eq!(&req.method, &request.method);
            prop_assert_eq!(&req.target, &request.target);
            prop_assert_eq!(&req.bearer, &request.token);
            prop_assert_eq!(&req.body, &request.body);
            // The same bytes at the peer's close read the same.
            prop_assert_eq!(parse(bytes, true, &LIMITS), Ok(Parsed::Request(req)));
        }
    }
}
