//! The JSON API end to end: an `ApiServer` on 127.0.0.1:0 with a fake daemon loop, driven through `memtide_api`'s client and raw sockets.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use memtide_api::client as status;
use memtide_api::Client;
use memtide_api::{Counters, DecisionRecord, HostSnapshot, Snapshot, TenantSnapshot};
use memtide_daemon::api::{
    publish, ApiOptions, ApiServer, Published, SharedSnapshot, SocketServer, Token,
};
use memtide_daemon::command::{Change, Refusal, Request};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(5);
/// The token of the harness's server.
const TOKEN: &str = "test-token-0123456789";
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// min, max, shares of one tenant as the fake loop holds them.
type Settings = (u64, u64, u64);

/// What the fake loop owns: its tenants, the tax rate, and every change it was sent.
#[derive(Clone, Debug, Default, PartialEq)]
struct LoopState {
    tenants: BTreeMap<String, Settings>,
    tax_rate: f64,
    seen: Vec<Change>,
}

struct Harness {
    server: ApiServer,
    shared: SharedSnapshot,
    state: Arc<Mutex<LoopState>>,
}

impl Harness {
    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// A request over TCP with the token, which allows changes.
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        Client::new(self.addr(), TIMEOUT)
            .with_token(TOKEN)
            .request(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn get_json(&self, path: &str) -> Value {
        let (code, body) = self.call("GET", path, None);
        assert_eq!(code, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    fn state(&self) -> LoopState {
        self.state.lock().unwrap().clone()
    }

    fn snapshot(&self) -> Snapshot {
        self.shared.snapshot().clone()
    }
}

fn tenant(name: &str, (min, max, shares): Settings) -> TenantSnapshot {
    TenantSnapshot {
        name: name.to_string(),
        cgroup: format!("/memtide/{name}"),
        origin: "adopted".to_string(),
        min_bytes: min,
        max_bytes: max,
        shares,
        estimator: "tws".to_string(),
        allocated_bytes: min + 10 * MIB,
        target_bytes: min,
        active_estimate_bytes: min,
        limit_bytes: Some(max),
        floor_bytes: min,
        anon_bytes: Some(min),
        swap_bytes: Some(0),
        refaults_total: Some(5),
        refaults_per_s: Some(0.5),
        mechanisms: vec!["limit".to_string()],
        reason: "holds its estimate".to_string(),
        ..TenantSnapshot::default()
    }
}

/// The snapshot the fake loop publishes for its state.
fn snapshot_of(state: &LoopState) -> Snapshot {
    Snapshot {
        api_version: memtide_api::API_VERSION,
        version: "0.1.0".to_string(),
        dry_run: false,
        ticks: 3,
        uptime_s: 3.0,
        host: HostSnapshot {
            hierarchy: "v2".to_string(),
            parent: "/memtide".to_string(),
            machine_bytes: 8 * GIB,
            free_bytes: 3 * GIB,
            budget_bytes: 6 * GIB,
            swap_total_bytes: GIB,
            swap_free_bytes: GIB,
            state: "high".to_string(),
            tax_rate: state.tax_rate,
            pressure_some_avg10: Some(0.25),
            sharing: None,
        },
        tenants: state
            .tenants
            .iter()
            .map(|(name, s)| tenant(name, *s))
            .collect(),
        decisions: (1..=4)
            .map(|tick| DecisionRecord {
                tick,
                at_unix_ms: 1_700_000_000_000 + tick,
                tenant: if tick.is_multiple_of(2) { "web" } else { "db" }.to_string(),
                target_bytes: 100 * MIB,
                limit_from_bytes: Some(200 * MIB),
                limit_to_bytes: Some(150 * MIB),
                outcome: "lower".to_string(),
                reason: format!("tick {tick}: idle memory taxed"),
            })
            .collect(),
        counters: Counters {
            ticks: 3,
            limit_lowered: 4,
            state_ticks: BTreeMap::from([("high".to_string(), 3)]),
            ..Counters::default()
        },
    }
}

/// Applies a change as the daemon's loop would (min <= max checked against current values).
fn apply(state: &mut LoopState, change: &Change) -> Result<(), Refusal> {
    match change {
        Change::TaxRate(rate) => {
            state.tax_rate = rate.value();
            Ok(())
        }
        Change::Tenant {
            name,
            min_bytes,
            max_bytes,
            shares,
        } => {
            let current = *state
                .tenants
                .get(name)
                .ok_or_else(|| Refusal::UnknownTenant(name.clone()))?;
            let min = min_bytes.unwrap_or(current.0);
            let max = max_bytes.unwrap_or(current.1);
            if min > max {
                return Err(Refusal::Conflict(format!(
                    "min {min} would exceed max {max} of tenant {name}"
                )));
            }
            state
                .tenants
                .insert(name.clone(), (min, max, shares.unwrap_or(current.2)));
            Ok(())
        }
    }
}

/// The fake loop: answers every request, applying it and publishing a new snapshot.
fn run_fake_loop(
    commands: Receiver<Request>,
    shared: SharedSnapshot,
    state: Arc<Mutex<LoopState>>,
) {
    while let Ok(request) = commands.recv() {
        let mut s = state.lock().unwrap();
        s.seen.push(request.change.clone());
        let outcome = apply(&mut s, &request.change);
        publish(&shared, snapshot_of(&s));
        let _ = request.reply.send(outcome);
    }
}

fn initial_state() -> LoopState {
    LoopState {
        tenants: BTreeMap::from([
            ("db".to_string(), (64 * MIB, GIB, 1000)),
            ("web".to_string(), (128 * MIB, 2 * GIB, 500)),
        ]),
        tax_rate: 0.75,
        seen: Vec::new(),
    }
}

fn harness() -> Harness {
    let state = initial_state();
    let shared: SharedSnapshot = Arc::new(Published::new(snapshot_of(&state)));
    let state = Arc::new(Mutex::new(state));
    let (sender, commands) = mpsc::channel();
    let options = ApiOptions {
        token: Some(Token::from_text(TOKEN.as_bytes()).unwrap()),
        ..ApiOptions::default()
    };
    let server = ApiServer::start_with(
        "127.0.0.1:0".parse().unwrap(),
        Arc::clone(&shared),
        sender,
        options,
    )
    .expect("the API starts on 127.0.0.1:0");
    {
        let (shared, state) = (Arc::clone(&shared), Arc::clone(&state));
        thread::spawn(move || run_fake_loop(commands, shared, state));
    }
    Harness {
        server,
        shared,
        state,
    }
}

/// Sends raw bytes and returns the whole response as text.
fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The `error` of a JSON error body, checked to be one line.
fn error_of(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let msg = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error string in {body}"))
        .to_string();
    assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
    msg
}

#[test]
fn get_endpoints_return_the_published_snapshot() {
    let h = harness();
    let snap = h.snapshot();
    let cases: Vec<(&str, Value)> = vec![
        ("/v1/status", json(&snap)),
        ("/v1/host", json(&snap.host)),
        ("/v1/tenants", json(&snap.tenants)),
        ("/v1/tenants/db", json(&snap.tenants[0])),
        ("/v1/tenants/web", json(&snap.tenants[1])),
        ("/v1/decisions", json(&snap.decisions)),
        (
            "/v1/decisions?tenant=web",
            json(&vec![&snap.decisions[1], &snap.decisions[3]]),
        ),
        (
            "/v1/decisions?tenant=db&limit=1",
            json(&vec![&snap.decisions[2]]),
        ),
        ("/v1/decisions?limit=2", json(&snap.decisions[2..].to_vec())),
        ("/v1/tax-rate", serde_json::json!({ "tax_rate": 0.75 })),
    ];
    for (path, want) in cases {
        assert_eq!(h.get_json(path), want, "GET {path}");
    }
    assert_eq!(status::fetch(h.addr(), TIMEOUT).unwrap(), snap);
    assert_eq!(h.call("GET", "/healthz", None), (200, "ok".to_string()));
    assert!(h.state().seen.is_empty(), "GETs send nothing to the loop");
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

#[test]
fn good_changes_are_applied_by_the_loop_and_published() {
    let h = harness();
    // Each step applies on top of the previous ones.
    let steps: &[(&str, &str, &str, Option<Settings>)] = &[
        (
            "PATCH",
            "/v1/tenants/db",
            r#"{"max": "2G"}"#,
            Some((64 * MIB, 2 * GIB, 1000)),
        ),
        (
            "PATCH",
            "/v1/tenants/db",
            r#"{"min": 268435456}"#,
            Some((256 * MIB, 2 * GIB, 1000)),
        ),
        (
            "PATCH",
            "/v1/tenants/db",
            r#"{"shares": 250}"#,
            Some((256 * MIB, 2 * GIB, 250)),
        ),
        (
            "PATCH",
            "/v1/tenants/db",
            r#"{"min": "1.5G", "max": "3GiB", "shares": 2000}"#,
            Some((3 * GIB / 2, 3 * GIB, 2000)),
        ),
        ("PUT", "/v1/tax-rate", r#"{"tax_rate": 0.5}"#, None),
        ("PUT", "/v1/tax-rate", r#"{"tax_rate": 0}"#, None),
    ];
    for (i, (method, path, body, want)) in steps.iter().enumerate() {
        let (code, reply) = h.call(method, path, Some(body));
        assert_eq!(code, 200, "{method} {path} {body}: {reply}");
        assert_eq!(
            serde_json::from_str::<Value>(&reply).unwrap(),
            serde_json::json!({"ok": true})
        );
        assert_eq!(h.state().seen.len(), i + 1, "{body} reached the loop once");
        if let Some((min, max, shares)) = want {
            let t = h.get_json("/v1/tenants/db");
            assert_eq!(
                (
                    t["min_bytes"].as_u64(),
                    t["max_bytes"].as_u64(),
                    t["shares"].as_u64()
                ),
                (Some(*min), Some(*max), Some(*shares)),
                "after {body}"
            );
        }
    }
    assert_eq!(
        h.get_json("/v1/tax-rate"),
        serde_json::json!({ "tax_rate": 0.0 })
    );
    assert_eq!(
        h.state().tenants["web"],
        (128 * MIB, 2 * GIB, 500),
        "web untouched"
    );
    assert_eq!(
        h.state().seen[1],
        Change::Tenant {
            name: "db".to_string(),
            min_bytes: Some(256 * MIB),
            max_bytes: None,
            shares: None
        }
    );
}

struct Bad {
    what: &'static str,
    method: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    status: u16,
    /// Words the one-line error must contain (the field and the value).
    names: &'static [&'static str],
    /// Whether the request gets as far as the loop (which then refuses it).
    reaches_loop: bool,
}

#[test]
fn bad_requests_get_their_status_and_one_line_error_and_change_nothing() {
    let cases = [
        Bad {
            what: "malformed JSON",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"min": "#),
            status: 400,
            names: &["malformed JSON"],
            reaches_loop: false,
        },
        Bad {
            what: "not an object",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some("[1, 2]"),
            status: 400,
            names: &["JSON object"],
            reaches_loop: false,
        },
        Bad {
            what: "empty body",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(""),
            status: 400,
            names: &["empty body"],
            reaches_loop: false,
        },
        Bad {
            what: "no body at all",
            method: "PUT",
            path: "/v1/tax-rate",
            body: None,
            status: 400,
            names: &["empty body"],
            reaches_loop: false,
        },
        Bad {
            what: "empty change",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some("{}"),
            status: 400,
            names: &["empty change"],
            reaches_loop: false,
        },
        Bad {
            what: "wrong type",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"shares": "ten"}"#),
            status: 400,
            names: &["shares", "\"ten\""],
            reaches_loop: false,
        },
        Bad {
            what: "zero shares",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"shares": 0}"#),
            status: 400,
            names: &["shares", "0"],
            reaches_loop: false,
        },
        Bad {
            what: "negative min",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"min": -1}"#),
            status: 400,
            names: &["min", "-1", "negative"],
            reaches_loop: false,
        },
        Bad {
            what: "fractional bytes",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"max": 10.5}"#),
            status: 400,
            names: &["max", "10.5"],
            reaches_loop: false,
        },
        Bad {
            what: "bad size unit",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"max": "1X"}"#),
            status: 400,
            names: &["max", "\"1X\""],
            reaches_loop: false,
        },
        Bad {
            what: "unknown field",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"mni": "1G"}"#),
            status: 400,
            names: &["unknown field", "\"mni\""],
            reaches_loop: false,
        },
        Bad {
            what: "duplicate field",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"min": 1, "min": 2}"#),
            status: 400,
            names: &["\"min\"", "twice"],
            reaches_loop: false,
        },
        Bad {
            what: "min > max in one request",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"min": "2G", "max": "1G"}"#),
            status: 400,
            names: &["min 2147483648", "max 1073741824"],
            reaches_loop: false,
        },
        Bad {
            what: "tax rate 1.5",
            method: "PUT",
            path: "/v1/tax-rate",
            body: Some(r#"{"tax_rate": 1.5}"#),
            status: 400,
            names: &["tax_rate", "1.5"],
            reaches_loop: false,
        },
        Bad {
            what: "tax rate negative",
            method: "PUT",
            path: "/v1/tax-rate",
            body: Some(r#"{"tax_rate": -0.5}"#),
            status: 400,
            names: &["tax_rate", "-0.5"],
            reaches_loop: false,
        },
        Bad {
            what: "tax rate as a string",
            method: "PUT",
            path: "/v1/tax-rate",
            body: Some(r#"{"tax_rate": "0.5"}"#),
            status: 400,
            names: &["tax_rate", "\"0.5\""],
            reaches_loop: false,
        },
        Bad {
            what: "bad decisions limit",
            method: "GET",
            path: "/v1/decisions?limit=x",
            body: None,
            status: 400,
            names: &["limit", "\"x\""],
            reaches_loop: false,
        },
        Bad {
            what: "unknown query parameter",
            method: "GET",
            path: "/v1/decisions?tenatn=db",
            body: None,
            status: 400,
            names: &["\"tenatn\""],
            reaches_loop: false,
        },
        Bad {
            what: "unknown tenant (read)",
            method: "GET",
            path: "/v1/tenants/nope",
            body: None,
            status: 404,
            names: &["\"nope\""],
            reaches_loop: false,
        },
        Bad {
            what: "unknown path",
            method: "GET",
            path: "/v1/nothing",
            body: None,
            status: 404,
            names: &["/v1/nothing"],
            reaches_loop: false,
        },
        Bad {
            what: "wrong method",
            method: "DELETE",
            path: "/v1/tenants/db",
            body: None,
            status: 405,
            names: &["DELETE", "GET, HEAD, PATCH"],
            reaches_loop: false,
        },
        Bad {
            what: "PATCH on a read-only path",
            method: "PATCH",
            path: "/v1/status",
            body: Some(r#"{"min": 1}"#),
            status: 405,
            names: &["PATCH"],
            reaches_loop: false,
        },
        Bad {
            what: "unknown tenant (change)",
            method: "PATCH",
            path: "/v1/tenants/nope",
            body: Some(r#"{"shares": 5}"#),
            status: 404,
            names: &["\"nope\""],
            reaches_loop: true,
        },
        Bad {
            what: "min above the current max",
            method: "PATCH",
            path: "/v1/tenants/db",
            body: Some(r#"{"min": "2G"}"#),
            status: 409,
            names: &["min 2147483648", "max 1073741824"],
            reaches_loop: true,
        },
    ];
    let h = harness();
    let before = h.state();
    for case in &cases {
        let seen_before = h.state().seen.len();
        let (code, body) = h.call(case.method, case.path, case.body);
        assert_eq!(code, case.status, "{}: {body}", case.what);
        let msg = error_of(&body);
        for name in case.names {
            assert!(
                msg.contains(name),
                "{}: {msg:?} does not name {name:?}",
                case.what
            );
        }
        let seen = h.state().seen.len() - seen_before;
        assert_eq!(
            seen,
            usize::from(case.reaches_loop),
            "{}: requests seen by the loop",
            case.what
        );
        let now = h.state();
        assert_eq!(
            (&now.tenants, now.tax_rate),
            (&before.tenants, before.tax_rate),
            "{}: nothing changed",
            case.what
        );
    }
}

#[test]
fn protocol_errors_get_their_status_and_the_server_keeps_serving() {
    let h = harness();
    let big = format!(r#"{{"min": "{}"}}"#, "1".repeat(70 * 1024));
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("body over 64 KiB", format!("PATCH /v1/tenants/db HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{big}", big.len()).into_bytes(), 413),
        ("huge declared body, never sent", b"PATCH /v1/tenants/db HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000\r\n\r\n{}".to_vec(), 413),
        ("huge declared body on a GET", b"GET /v1/status HTTP/1.1\r\nContent-Length: 100000000000000\r\n\r\n".to_vec(), 413),
        ("garbage request line", b"HELLO\r\n\r\n".to_vec(), 400),
        ("chunked upload", b"PUT /v1/tax-rate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n0\r\n\r\n".to_vec(), 411),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 400),
        ("binary junk", vec![0xff, 0xfe, 0x00, b'\r', b'\n', b'\r', b'\n'], 400),
    ];
    for (what, request, want) in cases {
        let response = raw(h.addr(), &request);
        let status_line = response.lines().next().unwrap_or("");
        assert!(
            status_line.starts_with(&format!("HTTP/1.1 {want} ")),
            "{what}: {status_line:?}"
        );
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        error_of(body);
        assert_eq!(h.call("GET", "/healthz", None).0, 200, "alive after {what}");
    }
    assert!(h.state().seen.is_empty());
}

#[test]
fn responses_carry_content_type_allow_and_close() {
    let h = harness();
    let cases: &[(&str, &[&str])] = &[
        (
            "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n",
            &[
                "HTTP/1.1 200 OK\r\n",
                "Content-Type: application/json\r\n",
                "Connection: close\r\n",
            ],
        ),
        (
            "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            &[
                "HTTP/1.1 200 OK\r\n",
                "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
            ],
        ),
        (
            "DELETE /v1/tenants/db HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n",
            &[
                "HTTP/1.1 405 ",
                "Allow: GET, HEAD, PATCH\r\n",
                "Content-Type: application/json\r\n",
            ],
        ),
        (
            "POST /v1/tax-rate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-token-0123456789\r\n\r\n",
            &["HTTP/1.1 405 ", "Allow: GET, HEAD, PUT\r\n"],
        ),
        (
            "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
            &["HTTP/1.1 404 ", "Content-Type: application/json\r\n"],
        ),
    ];
    for (request, wants) in cases {
        let response = raw(h.addr(), request.as_bytes());
        for want in *wants {
            assert!(
                response.contains(want),
                "{request:?}: {response:?} lacks {want:?}"
            );
        }
    }
    let head = raw(h.addr(), b"HEAD /v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head:?}"
    );
}

/// Checks one exposition line `name{label="value",...} number`.
fn check_sample(line: &str) -> Result<(), String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    let valid_name = name.chars().enumerate().all(|(i, c)| {
        c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
    });
    if name.is_empty() || !valid_name {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    if let Some(labels) = rest.strip_prefix('{') {
        let mut chars = labels.char_indices();
        loop {
            // label name up to '='
            let mut label = String::new();
            let eq = loop {
                match chars.next() {
                    Some((i, '=')) => break i,
                    Some((_, c)) if c.is_ascii_alphanumeric() || c == '_' => label.push(c),
                    other => return Err(format!("bad label name near {other:?}")),
                }
            };
            if label.is_empty() || !labels[eq + 1..].starts_with('"') {
                return Err("label without a quoted value".to_string());
            }
            chars.next();
            loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\' | '"' | 'n')) => {}
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, '"')) => break,
                    Some((_, '\n')) | None => return Err("unterminated label value".to_string()),
                    Some(_) => {}
                }
            }
            match chars.next() {
                Some((_, ',')) => continue,
                Some((i, '}')) => {
                    rest = &labels[i + 1..];
                    break;
                }
                other => return Err(format!("bad label separator {other:?}")),
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    match value {
        "NaN" | "+Inf" | "-Inf" => Ok(()),
        v => v
            .parse::<f64>()
            .map(|_| ())
            .map_err(|_| format!("bad value {v:?}")),
    }
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let h = harness();
    {
        // A tenant name that needs escaping.
        let mut s = h.snapshot();
        s.tenants[0].name = "odd \"name\"\\with\nnewline".to_string();
        publish(&h.shared, s);
    }
    let (code, text) = h.call("GET", "/metrics", None);
    assert_eq!(code, 200);
    let mut samples = 0;
    for line in text.lines() {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{line}"
            );
            continue;
        }
        check_sample(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        samples += 1;
    }
    assert!(samples > 40, "{samples} samples");
    for want in [
        "memtide_tenant_allocated_bytes{tenant=\"web\"} 144703488\n",
        "memtide_reclamation_state{state=\"high\"} 1\n",
        "memtide_decisions_total{outcome=\"lower\"} 4\n",
        "memtide_tenant_shares{tenant=\"odd \\\"name\\\"\\\\with\\nnewline\"} 1000\n",
        "memtide_build_info{version=\"0.1.0\"} 1\n",
    ] {
        assert!(text.contains(want), "/metrics lacks {want:?}");
    }
    assert!(
        !text.contains("memtide_tenant_file_bytes{"),
        "None series are omitted"
    );
    assert!(check_sample("bad name 1").is_err());
    assert!(check_sample("m{a=\"unterminated} 1").is_err());
}

#[test]
fn a_loop_that_does_not_answer_gives_503_while_reads_still_answer() {
    let shared = SharedSnapshot::default();
    let (sender, commands) = mpsc::channel::<Request>();
    let options = ApiOptions {
        reply_timeout: Duration::from_millis(500),
        token: Some(Token::from_text(TOKEN.as_bytes()).unwrap()),
        ..ApiOptions::default()
    };
    let server =
        ApiServer::start_with("127.0.0.1:0".parse().unwrap(), shared, sender, options).unwrap();
    let addr = server.local_addr();
    let waiting = thread::spawn(move || {
        Client::new(addr, TIMEOUT)
            .with_token(TOKEN)
            .request("PUT", "/v1/tax-rate", Some(r#"{"tax_rate": 0.5}"#))
            .unwrap()
    });
    // While the change waits for the loop, reads are served at once.
    thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    assert_eq!(
        status::request(addr, "GET", "/healthz", None, TIMEOUT)
            .unwrap()
            .0,
        200
    );
    assert!(started.elapsed() < Duration::from_millis(300));
    let (code, body) = waiting.join().unwrap();
    assert_eq!(code, 503);
    assert!(
        error_of(&body).contains("did not answer within 0.5s"),
        "{body}"
    );
    // The request did reach the channel; the loop just never answered.
    assert!(
        matches!(commands.try_recv().map(|r| r.change), Ok(Change::TaxRate(r)) if r.value() == 0.5)
    );
}

#[test]
fn after_shutdown_no_daemon_answers() {
    let h = harness();
    let addr = h.addr();
    h.server.shutdown();
    let err = status::fetch(addr, TIMEOUT).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("no memtide daemon answers at {addr} (is it running? see docs/linux.md)")
    );
}

#[test]
fn idle_connections_do_not_lock_out_the_api_and_a_silent_one_gets_408() {
    let h = harness();
    let addr = h.addr();
    // 100 connections that send nothing: more than the old limit of 64.
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect_timeout(&addr, TIMEOUT).unwrap())
        .collect();
    thread::sleep(Duration::from_millis(200));
    let (code, _) = status::request(addr, "GET", "/healthz", None, TIMEOUT).unwrap();
    assert_eq!(code, 200, "a client behind 100 idle connections is served");
    assert!(
        status::fetch(addr, TIMEOUT).is_ok(),
        "memtide status still answers"
    );
    // A silent connection is answered 408 when its request time runs out, not just closed.
    let mut silent = TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    silent.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut out = Vec::new();
    let _ = silent.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    assert!(text.contains("did not arrive in time"), "{text}");
    drop(idle);
}

#[test]
fn the_api_crates_client_and_json_examples_work_against_the_server() {
    use memtide_api::{ClientError, DecisionQuery, ErrorBody, TenantPatch};
    let h = harness();
    let client = Client::new(h.addr(), TIMEOUT).with_token(TOKEN);
    let snap = h.snapshot();
    assert_eq!(client.status().unwrap(), snap);
    assert_eq!(client.host().unwrap(), snap.host);
    assert_eq!(client.tenants().unwrap(), snap.tenants);
    assert_eq!(client.tenant("web").unwrap(), snap.tenants[1]);
    let query = DecisionQuery {
        tenant: Some("db".into()),
        limit: Some(1),
    };
    assert_eq!(
        client.decisions(&query).unwrap(),
        vec![snap.decisions[2].clone()]
    );
    assert_eq!(client.tax_rate().unwrap(), 0.75);

    // The documented examples are what the server accepts and answers.
    let example = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    let patch = include_str!("../../api/json/tenant-patch.json");
    let (code, body) = h.call("PATCH", "/v1/tenants/db", Some(patch));
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        example(&body),
        example(include_str!("../../api/json/applied.json"))
    );
    assert_eq!(h.state().tenants["db"], (512 * MIB, 2 * GIB, 2000));
    let rate = include_str!("../../api/json/tax-rate.json");
    assert_eq!(h.call("PUT", "/v1/tax-rate", Some(rate)).0, 200);
    assert_eq!(h.get_json("/v1/tax-rate"), example(rate));
    let (code, body) = h.call("GET", "/v1/tenants/x", None);
    assert_eq!(code, 404);
    assert_eq!(
        example(&body),
        example(include_str!("../../api/json/error.json"))
    );

    // Typed changes.
    let shares = TenantPatch {
        shares: Some(10),
        ..TenantPatch::default()
    };
    client.patch_tenant("web", &shares).unwrap();
    client.set_tax_rate(0.25).unwrap();
    assert_eq!(h.state().tenants["web"], (128 * MIB, 2 * GIB, 10));
    assert_eq!(client.tax_rate().unwrap(), 0.25);
    let err = client.patch_tenant("nope", &shares).unwrap_err();
    assert!(
        matches!(&err, ClientError::Http { status: 404, message, .. } if message == "no tenant named \"nope\""),
        "{err}"
    );
    let err = client.set_tax_rate(1.5).unwrap_err();
    assert!(
        matches!(&err, ClientError::Http { status: 400, message, .. } if message.contains("tax_rate: 1.5")),
        "{err}"
    );
    let err = client.tenant("nope").unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "the memtide daemon at {} answered 404 to GET /v1/tenants/nope: no tenant named \"nope\"",
            h.addr()
        )
    );
    // A name that needs escaping reaches the server whole.
    let (code, body) = h.call("GET", &memtide_api::client::tenant_path("a b/c"), None);
    assert_eq!(code, 404);
    let body: ErrorBody = serde_json::from_str(&body).unwrap();
    assert_eq!(body.error, "no tenant named \"a b/c\"");
}

#[test]
fn changes_over_tcp_without_the_token_get_403_and_reach_nothing() {
    let h = harness();
    let addr = h.addr();
    let before = h.state();
    for client in [
        Client::new(addr, TIMEOUT),
        Client::new(addr, TIMEOUT).with_token("test-token-0123456788"),
        Client::new(addr, TIMEOUT).with_token("short"),
    ] {
        for (method, path, body) in [
            ("PATCH", "/v1/tenants/db", r#"{"max": "128M"}"#),
            ("PUT", "/v1/tax-rate", r#"{"tax_rate": 0.1}"#),
            ("POST", "/v1/tax-rate", "{}"),
            ("DELETE", "/v1/tenants/db", ""),
        ] {
            let (code, answer) = client.request(method, path, Some(body)).unwrap();
            assert_eq!(code, 403, "{client:?} {method} {path}: {answer}");
            let error = error_of(&answer);
            assert!(error.contains("token_file"), "{error}");
            assert!(error.contains("Unix socket"), "{error}");
            assert!(!error.contains(TOKEN), "{error}");
        }
    }
    // A token in another scheme is no token.
    let response = raw(
        addr,
        format!("PUT /v1/tax-rate HTTP/1.1\r\nAuthorization: Basic {TOKEN}\r\nContent-Length: 2\r\n\r\n{{}}")
            .as_bytes(),
    );
    assert!(response.starts_with("HTTP/1.1 403 "), "{response}");
    assert_eq!(h.state(), before, "nothing reached the loop");
    assert_eq!(h.call("GET", "/v1/status", None).0, 200);
}

/// A socket server beside the harness's TCP server, on the same fake loop.
fn socket_of(h: &Harness, dir: &std::path::Path) -> SocketServer {
    let (sender, commands) = mpsc::channel();
    let (shared, state) = (Arc::clone(&h.shared), Arc::clone(&h.state));
    thread::spawn(move || run_fake_loop(commands, shared, state));
    SocketServer::start(
        &dir.join("api.sock"),
        None,
        Arc::clone(&h.shared),
        sender,
        ApiOptions::default(),
    )
    .unwrap()
}

#[test]
fn root_changes_through_the_socket_without_a_token() {
    // The tests run as root on the project's hosts; as anyone else only the mode is checked.
    let h = harness();
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_of(&h, dir.path());
    let meta = std::fs::metadata(socket.path()).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    if our_uid() != 0 {
        eprintln!("not root: the socket's peer check is tested in crates/cli/tests/linux/security");
        return;
    }
    let client = Client::unix(socket.path(), TIMEOUT);
    assert_eq!(client.status().unwrap(), h.snapshot());
    let (code, body) = client
        .request("PATCH", "/v1/tenants/db", Some(r#"{"shares": 7}"#))
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(h.state().tenants["db"].2, 7);
}

/// Our uid, from /proc (no libc in this test crate).
fn our_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_flood_of_idle_connections_keeps_no_one_out() {
    let h = harness();
    let addr = h.addr();
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_of(&h, dir.path());
    // 1,000 connections from one address that send nothing (or half a head).
    let flood: Vec<TcpStream> = (0..1000)
        .filter_map(|i| {
            let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).ok()?;
            if i % 2 == 0 {
                let _ = s.write_all(b"GET /v1/status HT");
            }
            Some(s)
        })
        .collect();
    assert!(flood.len() >= 900, "opened {} of 1000", flood.len());
    let started = Instant::now();
    let (code, _) = h.call("GET", "/v1/status", None);
    let tcp = started.elapsed();
    assert_eq!(code, 200, "a read over TCP is answered during the flood");
    let started = Instant::now();
    let root = our_uid() == 0;
    if root {
        let (code, body) = Client::unix(socket.path(), TIMEOUT)
            .request("PATCH", "/v1/tenants/db", Some(r#"{"shares": 9}"#))
            .unwrap();
        assert_eq!(code, 200, "{body}");
    }
    let unix = started.elapsed();
    let started = Instant::now();
    let (code, _) = h.call("PUT", "/v1/tax-rate", Some(r#"{"tax_rate": 0.5}"#));
    let tcp_change = started.elapsed();
    assert_eq!(code, 200);
    eprintln!(
        "during a flood of {} idle connections: GET over TCP {tcp:?}, PATCH over the socket \
         {unix:?} (root: {root}), PUT with the token {tcp_change:?}",
        flood.len()
    );
    drop(flood);
}

#[test]
fn a_peers_oldest_idle_connections_are_closed_beyond_its_bound() {
    let shared = SharedSnapshot::default();
    let (sender, _commands) = mpsc::channel::<Request>();
    let options = ApiOptions {
        per_peer_connections: 4,
        ..ApiOptions::default()
    };
    let server =
        ApiServer::start_with("127.0.0.1:0".parse().unwrap(), shared, sender, options).unwrap();
    let addr = server.local_addr();
    let mut first = TcpStream::connect_timeout(&addr, TIMEOUT).unwrap();
    first.set_read_timeout(Some(TIMEOUT)).unwrap();
    thread::sleep(Duration::from_millis(50));
    let _later: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect_timeout(&addr, TIMEOUT).unwrap())
        .collect();
    // The fifth connection of 127.0.0.1 closed the first, silently and well before its 3 s.
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = first.read_to_end(&mut out);
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    eprintln!(
        "the oldest idle connection closed after {:?}",
        started.elapsed()
    );
    assert_eq!(
        status::request(addr, "GET", "/healthz", None, TIMEOUT)
            .unwrap()
            .0,
        200
    );
}
