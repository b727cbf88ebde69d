//! `memtide status`: a minimal HTTP/1.1 client for the daemon's API (on `std::net`), and the human summary of a `Snapshot`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::snapshot::{DecisionRecord, Snapshot};

/// Largest response accepted from the daemon.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// How many recent decisions `render_table` shows.
const DECISIONS_SHOWN: usize = 5;

/// Why talking to the daemon failed. Every message names the address.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("no memtide daemon answers at {addr} (is it running? see docs/linux.md)")]
    NotRunning { addr: SocketAddr },
    #[error("the memtide daemon at {addr} did not answer within {:.1}s", timeout.as_secs_f64())]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("cannot talk to the memtide daemon at {addr}: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot send this request to {addr}: {why}")]
    InvalidRequest { addr: SocketAddr, why: String },
    #[error("the memtide daemon at {addr} sent a malformed HTTP response: {why}")]
    BadResponse { addr: SocketAddr, why: String },
    #[error("the memtide daemon at {addr} answered {status} to {method} {path}: {message}")]
    Http {
        addr: SocketAddr,
        method: String,
        path: String,
        status: u16,
        message: String,
    },
    #[error("the status from the memtide daemon at {addr} does not decode: {source}")]
    Decode {
        addr: SocketAddr,
        #[source]
        source: serde_json::Error,
    },
}

/// Fetches `GET /v1/status` and decodes it.
pub fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Snapshot, StatusError> {
    let (status, body) = request(addr, "GET", "/v1/status", None, timeout)?;
    if status != 200 {
        return Err(StatusError::Http {
            addr,
            method: "GET".to_string(),
            path: "/v1/status".to_string(),
            status,
            message: error_message(&body),
        });
    }
    serde_json::from_str(&body).map_err(|source| StatusError::Decode { addr, source })
}

/// The `error` field of a JSON error body, or the body itself (cut short).
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().chars().take(200).collect())
}

/// Sends one HTTP/1.1 request (`Connection: close`, a JSON body if given) and returns the
/// status code and body. `timeout` bounds the whole exchange.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), StatusError> {
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(StatusError::InvalidRequest {
            addr,
            why: format!("method {method:?} is not upper-case letters"),
        });
    }
    if !path.starts_with('/')
        || path
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(StatusError::InvalidRequest {
            addr,
            why: format!("path {path:?} must start with / and hold no spaces or control characters (percent-encode them)"),
        });
    }
    let started = Instant::now();
    let io_error = |source: io::Error| match source.kind() {
        io::ErrorKind::ConnectionRefused => StatusError::NotRunning { addr },
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            StatusError::Timeout { addr, timeout }
        }
        _ => StatusError::Io { addr, source },
    };
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io_error)?;
    let mut io = Timed {
        stream: &stream,
        until: started + timeout,
    };

    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: memtide/{}\r\nAccept: application/json\r\nConnection: close\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(body) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    io.write_all(req.as_bytes()).map_err(io_error)?;
    io.flush().map_err(io_error)?;

    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match io.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&chunk[..n]);
                if raw.len() > MAX_RESPONSE_BYTES {
                    return Err(bad(addr, format!("longer than {MAX_RESPONSE_BYTES} bytes")));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A reset after a complete response (the server closing with our bytes unread)
            // is not an error: parse what arrived.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && !raw.is_empty() => break,
            Err(e) => return Err(io_error(e)),
        }
    }
    parse_response(addr, &raw)
}

fn bad(addr: SocketAddr, why: impl Into<String>) -> StatusError {
    StatusError::BadResponse {
        addr,
        why: why.into(),
    }
}

/// Splits a whole response (read to EOF) into status and body, honouring `Content-Length`
/// and `Transfer-Encoding: chunked`.
fn parse_response(addr: SocketAddr, raw: &[u8]) -> Result<(u16, String), StatusError> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad(addr, "no end of headers"))?;
    let head =
        std::str::from_utf8(&raw[..head_end]).map_err(|_| bad(addr, "headers are not UTF-8"))?;
    let rest = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/1.") {
        return Err(bad(addr, format!("status line {status_line:?}")));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| bad(addr, format!("status line {status_line:?}")))?;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(addr, format!("header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse()
                    .map_err(|_| bad(addr, format!("Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let body = if chunked {
        dechunk(rest).map_err(|why| bad(addr, why))?
    } else if let Some(n) = length {
        rest.get(..n)
            .ok_or_else(|| bad(addr, format!("body of {} bytes, {n} announced", rest.len())))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    let body = String::from_utf8(body).map_err(|_| bad(addr, "body is not UTF-8"))?;
    Ok((status, body))
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line without end")?;
        let size_text =
            std::str::from_utf8(&rest[..line_end]).map_err(|_| "chunk size is not text")?;
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_hex, 16).map_err(|_| format!("chunk size {size_hex:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("chunk shorter than announced")?;
        body.extend_from_slice(chunk);
        rest = rest
            .get(size..)
            .and_then(|r| r.strip_prefix(b"\r\n"))
            .ok_or("chunk without its line end")?;
    }
}

/// A stream whose reads and writes fail with `TimedOut` once `until` has passed.
struct Timed<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl Timed<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
        } else {
            Ok(left)
        }
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        let mut stream = self.stream;
        stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut stream = self.stream;
        stream.flush()
    }
}

/// A size in MiB below 1 GiB, in GiB above.
pub fn human_bytes(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    const GIB: f64 = MIB * 1024.0;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / MIB)
    }
}

fn opt_bytes(bytes: Option<u64>, none: &str) -> String {
    bytes.map_or_else(|| none.to_string(), human_bytes)
}

fn uptime(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 {
        seconds as u64
    } else {
        0
    };
    match (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60) {
        (0, 0, m, sec) => format!("{m}m{sec:02}s"),
        (0, h, m, _) => format!("{h}h{m:02}m"),
        (d, h, _, _) => format!("{d}d{h:02}h"),
    }
}

/// The human summary `memtide status` prints: a host line, a table of tenants and the last
/// few decisions with their reasons.
pub fn render_table(s: &Snapshot) -> String {
    let h = &s.host;
    let mut out = String::new();
    out.push_str(&format!(
        "memtide {} · tick {} · up {} · cgroup {} {}\n",
        s.version,
        s.ticks,
        uptime(s.uptime_s),
        h.hierarchy,
        h.parent,
    ));
    let pressure = h
        .pressure_some_avg10
        .map_or_else(String::new, |p| format!(" · pressure {p:.1}%"));
    out.push_str(&format!(
        "host: state {} · free {} · budget {} of {} · swap {} free of {} · tax {:.2} · dry-run {}{}\n",
        h.state,
        human_bytes(h.free_bytes),
        human_bytes(h.budget_bytes),
        human_bytes(h.machine_bytes),
        human_bytes(h.swap_free_bytes),
        human_bytes(h.swap_total_bytes),
        h.tax_rate,
        if s.dry_run {
            "yes (decides, writes nothing)"
        } else {
            "no"
        },
        pressure,
    ));
    out.push('\n');

    if s.tenants.is_empty() {
        out.push_str("no tenants\n");
    } else {
        let header = [
            "TENANT",
            "ALLOCATED",
            "TARGET",
            "ESTIMATE",
            "LIMIT",
            "FLOOR",
            "SWAP",
            "REFAULTS/S",
            "ESTIMATOR",
        ];
        let rows: Vec<Vec<String>> = s
            .tenants
            .iter()
            .map(|t| {
                vec![
                    t.name.clone(),
                    human_bytes(t.allocated_bytes),
                    human_bytes(t.target_bytes),
                    human_bytes(t.active_estimate_bytes),
                    opt_bytes(t.limit_bytes, "max"),
                    human_bytes(t.floor_bytes),
                    opt_bytes(t.swap_bytes, "-"),
                    t.refaults_per_s
                        .map_or_else(|| "-".to_string(), |r| format!("{r:.1}")),
                    if t.estimator.is_empty() {
                        "-".to_string()
                    } else {
                        t.estimator.clone()
                    },
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .chain([header[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                // Name and estimator left-aligned, figures right-aligned.
                if i == 0 || i == cells.len() - 1 {
                    l.push_str(cell);
                    if i != cells.len() - 1 {
                        l.push_str(&" ".repeat(pad));
                    }
                } else {
                    l.push_str(&" ".repeat(pad));
                    l.push_str(cell);
                }
                if i != cells.len() - 1 {
                    l.push_str("  ");
                }
            }
            l.push('\n');
            l
        };
        out.push_str(&line(&header));
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            out.push_str(&line(&cells));
        }
    }

    let held: Vec<&crate::snapshot::TenantSnapshot> =
        s.tenants.iter().filter(|t| t.held.is_some()).collect();
    if !held.is_empty() {
        out.push('\n');
        for t in held {
            out.push_str(&format!(
                "held: {}: {}\n",
                t.name,
                t.held.as_deref().unwrap_or_default()
            ));
        }
    }

    out.push('\n');
    let recent = &s.decisions[s.decisions.len().saturating_sub(DECISIONS_SHOWN)..];
    if recent.is_empty() {
        out.push_str("no decisions yet\n");
    } else {
        out.push_str("recent decisions (newest last):\n");
        let tick_w = recent
            .iter()
            .map(|d| d.tick.to_string().len())
            .max()
            .unwrap_or(0);
        let tenant_w = recent
            .iter()
            .map(|d| d.tenant.chars().count())
            .max()
            .unwrap_or(0);
        let outcome_w = recent
            .iter()
            .map(|d| d.outcome.chars().count())
            .max()
            .unwrap_or(0);
        for d in recent {
            out.push_str(&format!(
                "  tick {:>tick_w$}  {:<tenant_w$}  {:<outcome_w$}  {}: {}\n",
                d.tick,
                d.tenant,
                d.outcome,
                decision_limits(d),
                d.reason
            ));
        }
    }
    out
}

fn decision_limits(d: &DecisionRecord) -> String {
    match (d.limit_from_bytes, d.limit_to_bytes) {
        (None, None) => format!("target {}", human_bytes(d.target_bytes)),
        (from, to) => format!(
            "limit {} -> {}",
            opt_bytes(from, "max"),
            opt_bytes(to, "max")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{HostSnapshot, TenantSnapshot};
    use std::net::TcpListener;

    fn addr() -> SocketAddr {
        "127.0.0.1:9464".parse().unwrap()
    }

    #[test]
    fn the_table_shows_why_a_tenant_is_held_and_an_absent_limit_as_max() {
        let mut s = Snapshot::default();
        s.tenants.push(TenantSnapshot {
            name: "db".to_string(),
            limit_bytes: None,
            held: Some("backoff: limit holds at 400.0 MiB (backing off: 2500 faults/s)".into()),
            ..TenantSnapshot::default()
        });
        let text = render_table(&s);
        assert!(
            text.contains(
                "held: db: backoff: limit holds at 400.0 MiB (backing off: 2500 faults/s)"
            ),
            "{text}"
        );
        let row = text.lines().find(|l| l.starts_with("db ")).unwrap();
        assert!(row.contains(" max "), "{row}");
        assert_eq!(
            Snapshot::default()
                .counters
                .state_ticks
                .keys()
                .collect::<Vec<_>>(),
            ["hard", "high", "low", "soft"],
            "all four states, even at 0"
        );
    }

    #[test]
    fn responses_parse_by_length_chunks_or_eof() {
        let cases: &[(&[u8], u16, &str)] = &[
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokTRAILING", 200, "ok"),
            (
                b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
                404,
                "abcde",
            ),
            (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto eof", 200, "to eof"),
        ];
        for (raw, status, body) in cases {
            assert_eq!(
                parse_response(addr(), raw).unwrap(),
                (*status, body.to_string())
            );
        }
    }

    #[test]
    fn malformed_responses_are_errors_naming_the_address() {
        let cases: &[&[u8]] = &[
            b"",
            b"garbage\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ];
        for raw in cases {
            let err = parse_response(addr(), raw).unwrap_err().to_string();
            assert!(err.contains("127.0.0.1:9464"), "{err}");
        }
    }

    #[test]
    fn a_closed_port_says_no_daemon_answers() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = fetch(port, Duration::from_secs(2)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("no memtide daemon answers at {port} (is it running? see docs/linux.md)")
        );
    }

    #[test]
    fn a_silent_server_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let err = fetch(addr, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, StatusError::Timeout { .. }), "{err}");
        assert!(err.to_string().contains(&addr.to_string()));
        drop(listener);
    }

    #[test]
    fn requests_with_unsendable_method_or_path_are_refused_before_connecting() {
        for (method, path) in [
            ("get", "/"),
            ("GET", "no-slash"),
            ("GET", "/a b"),
            ("GET", "/x\r\nHost: y"),
        ] {
            let err = request(addr(), method, path, None, Duration::from_millis(100)).unwrap_err();
            assert!(
                matches!(err, StatusError::InvalidRequest { .. }),
                "{method} {path:?}: {err}"
            );
        }
    }

    #[test]
    fn error_bodies_yield_their_message() {
        assert_eq!(
            error_message(r#"{"error":"no tenant named \"x\""}"#),
            "no tenant named \"x\""
        );
        assert_eq!(error_message("plain text\n"), "plain text");
    }

    #[test]
    fn sizes_read_in_mib_below_a_gib_and_gib_above() {
        assert_eq!(human_bytes(0), "0.0 MiB");
        assert_eq!(human_bytes(512 << 20), "512.0 MiB");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
    }

    #[test]
    fn uptime_reads_in_the_largest_units() {
        assert_eq!(uptime(65.0), "1m05s");
        assert_eq!(uptime(7_380.0), "2h03m");
        assert_eq!(uptime(90_000.0), "1d01h");
        assert_eq!(uptime(f64::NAN), "0m00s");
    }

    #[test]
    fn the_table_shows_host_tenants_and_last_decisions() {
        let s = Snapshot {
            version: "0.1.0".into(),
            dry_run: true,
            ticks: 42,
            uptime_s: 42.0,
            host: HostSnapshot {
                hierarchy: "v2".into(),
                parent: "/memtide".into(),
                machine_bytes: 16 << 30,
                free_bytes: 3 << 30,
                budget_bytes: 12 << 30,
                swap_total_bytes: 2 << 30,
                swap_free_bytes: 1 << 30,
                state: "soft".into(),
                tax_rate: 0.75,
                pressure_some_avg10: None,
            },
            tenants: vec![
                TenantSnapshot {
                    name: "db".into(),
                    estimator: "tws".into(),
                    allocated_bytes: 3 << 29,
                    target_bytes: 1 << 30,
                    active_estimate_bytes: 900 << 20,
                    limit_bytes: Some(1 << 30),
                    floor_bytes: 64 << 20,
                    swap_bytes: Some(10 << 20),
                    refaults_per_s: Some(12.5),
                    ..Default::default()
                },
                TenantSnapshot {
                    name: "web-frontend".into(),
                    estimator: "sampling".into(),
                    ..Default::default()
                },
            ],
            decisions: (1..=7)
                .map(|i| DecisionRecord {
                    tick: i,
                    tenant: "db".into(),
                    outcome: "dry_run".into(),
                    limit_from_bytes: Some(2 << 30),
                    limit_to_bytes: Some(1 << 30),
                    reason: format!("reason {i}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let text = render_table(&s);
        let want_host = "host: state soft · free 3.00 GiB · budget 12.00 GiB of 16.00 GiB · swap 1.00 GiB free of 2.00 GiB · tax 0.75 · dry-run yes (decides, writes nothing)\n";
        assert!(text.contains(want_host), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("TENANT")).unwrap();
        assert_eq!(
            lines[header + 1],
            "db             1.50 GiB  1.00 GiB  900.0 MiB  1.00 GiB  64.0 MiB  10.0 MiB        12.5  tws"
        );
        assert_eq!(
            lines[header + 2],
            "web-frontend    0.0 MiB   0.0 MiB    0.0 MiB       max   0.0 MiB         -           -  sampling"
        );
        assert!(!text.contains("reason 2"), "{text}");
        assert!(
            text.contains("  tick 7  db  dry_run  limit 2.00 GiB -> 1.00 GiB: reason 7\n"),
            "{text}"
        );
        assert_eq!(text.matches("  tick ").count(), 5);
    }

    #[test]
    fn an_empty_snapshot_renders_without_tenants_or_decisions() {
        let text = render_table(&Snapshot::default());
        assert!(text.contains("no tenants\n"));
        assert!(text.contains("no decisions yet\n"));
    }
}
