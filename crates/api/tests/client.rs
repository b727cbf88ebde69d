//! The client against small fake servers on 127.0.0.1: what it sends, how it reads answers (by length, chunked, to EOF), and how each failure reads (always naming the address).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use memtide_api::client::MAX_RESPONSE_BYTES;
use memtide_api::{
    fetch, request, Client, ClientError, DecisionQuery, Size, Snapshot, TenantPatch,
};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Reads one request (head and a `Content-Length` body) and returns it as text.
fn read_request(stream: &mut TcpStream) -> String {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                break;
            }
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// A server that answers one connection with `response` and returns the request it read.
fn serve_once(response: Vec<u8>) -> (SocketAddr, JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let req = read_request(&mut stream);
        let _ = stream.write_all(&response);
        let _ = stream.flush();
        req
    });
    (addr, handle)
}

fn json_response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn answers_are_read_by_length_chunks_or_eof_whatever_the_status() {
    let cases: &[(&[u8], u16, &str)] = &[
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokTRAILING", 200, "ok"),
        (
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            404,
            "abcde",
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto eof", 200, "to eof"),
        (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", 503, ""),
        (b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n", 302, ""),
    ];
    for (raw, status, body) in cases {
        let (addr, server) = serve_once(raw.to_vec());
        let got = request(addr, "GET", "/healthz", None, TIMEOUT)
            .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(raw)));
        assert_eq!(got, (*status, body.to_string()));
        server.join().unwrap();
    }
}

#[test]
fn malformed_answers_are_errors_naming_the_address() {
    let cases: &[&[u8]] = &[
        b"",
        b"garbage\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\xff\xfe",
    ];
    for raw in cases {
        let (addr, server) = serve_once(raw.to_vec());
        let err = request(addr, "GET", "/v1/status", None, TIMEOUT).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ClientError::BadResponse { .. }),
            "{:?}: {text}",
            String::from_utf8_lossy(raw)
        );
        assert!(text.contains(&addr.to_string()), "{text}");
        server.join().unwrap();
    }
}

#[test]
fn an_answer_over_64_mib_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let n = MAX_RESPONSE_BYTES + 1;
        let _ =
            stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").as_bytes());
        let chunk = vec![b'x'; 1 << 20];
        let mut left = n;
        while left > 0 {
            let take = left.min(chunk.len() as u64) as usize;
            if stream.write_all(&chunk[..take]).is_err() {
                break;
            }
            left -= take as u64;
        }
    });
    let err = request(addr, "GET", "/v1/status", None, TIMEOUT).unwrap_err();
    assert!(matches!(err, ClientError::BadResponse { .. }), "{err}");
    assert!(
        err.to_string().contains("longer than 67108864 bytes"),
        "{err}"
    );
    server.join().unwrap();
}

#[test]
fn requests_carry_the_old_clients_headers_and_a_json_body() {
    let (addr, server) = serve_once(json_response("200 OK", r#"{"ok": true}"#));
    let (code, body) = request(
        addr,
        "PATCH",
        "/v1/tenants/db",
        Some(r#"{"max": "2G"}"#),
        TIMEOUT,
    )
    .unwrap();
    assert_eq!((code, body.as_str()), (200, r#"{"ok": true}"#));
    let sent = server.join().unwrap();
    let lower = sent.to_ascii_lowercase();
    assert!(
        sent.starts_with("PATCH /v1/tenants/db HTTP/1.1\r\n"),
        "{sent}"
    );
    for header in [
        format!("host: {addr}\r\n"),
        format!("user-agent: memtide/{}\r\n", env!("CARGO_PKG_VERSION")),
        "accept: application/json\r\n".to_string(),
        "connection: close\r\n".to_string(),
        "content-type: application/json\r\n".to_string(),
        "content-length: 13\r\n".to_string(),
    ] {
        assert!(lower.contains(&header), "{sent:?} lacks {header:?}");
    }
    assert!(sent.ends_with("\r\n\r\n{\"max\": \"2G\"}"), "{sent:?}");

    // Without a body: no Content-Type, and never chunked (the daemon refuses chunked uploads).
    for (method, length) in [
        ("GET", None),
        ("HEAD", None),
        ("DELETE", None),
        ("PUT", Some(0)),
        ("PATCH", Some(0)),
    ] {
        let (addr, server) = serve_once(json_response("200 OK", "{}"));
        request(addr, method, "/v1/host", None, TIMEOUT).unwrap();
        let sent = server.join().unwrap().to_ascii_lowercase();
        assert!(!sent.contains("content-type"), "{sent}");
        assert!(!sent.contains("transfer-encoding"), "{sent}");
        match length {
            Some(n) => assert!(sent.contains(&format!("content-length: {n}\r\n")), "{sent}"),
            None => assert!(!sent.contains("content-length"), "{sent}"),
        }
    }
}

#[test]
fn a_closed_port_says_no_daemon_answers() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let err = fetch(port, Duration::from_secs(2)).unwrap_err();
    assert!(matches!(err, ClientError::NotRunning { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("no memtide daemon answers at {port} (is it running? see docs/linux.md)")
    );
}

#[test]
fn a_silent_server_times_out_within_the_timeout() {
    // Connections complete in the backlog; nobody ever answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let started = Instant::now();
    let err = fetch(addr, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("the memtide daemon at {addr} did not answer within 0.2s")
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(listener);
}

#[test]
fn a_body_that_stalls_times_out_too() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"api_");
        // Hold the connection open past the client's timeout.
        thread::sleep(Duration::from_millis(1500));
    });
    let started = Instant::now();
    let err = fetch(addr, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    server.join().unwrap();
}

#[test]
fn an_error_status_reads_as_the_daemons_error_line() {
    let (addr, server) = serve_once(json_response(
        "404 Not Found",
        r#"{"error": "no endpoint \"/v1/status\"; see docs/api.md"}"#,
    ));
    let err = fetch(addr, TIMEOUT).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("the memtide daemon at {addr} answered 404 to GET /v1/status: no endpoint \"/v1/status\"; see docs/api.md")
    );
    server.join().unwrap();
}

#[test]
fn a_snapshot_that_does_not_decode_or_of_another_version_is_refused() {
    let (addr, server) = serve_once(json_response("200 OK", r#"{"ticks": "many"}"#));
    let err = fetch(addr, TIMEOUT).unwrap_err();
    assert!(matches!(err, ClientError::Decode { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "the status from the memtide daemon at {addr} does not decode: "
        )),
        "{err}"
    );
    server.join().unwrap();

    let mut v = serde_json::to_value(Snapshot::default()).unwrap();
    v["api_version"] = 2.into();
    let (addr, server) = serve_once(json_response("200 OK", &v.to_string()));
    let err = fetch(addr, TIMEOUT).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("the memtide daemon at {addr} speaks API version 2; this client speaks version 1")
    );
    server.join().unwrap();

    // A snapshot from before the field, with a field this version does not know: version 1.
    let mut v = serde_json::to_value(Snapshot::default()).unwrap();
    v.as_object_mut().unwrap().remove("api_version");
    v["added_later"] = true.into();
    let (addr, server) = serve_once(json_response("200 OK", &v.to_string()));
    assert_eq!(fetch(addr, TIMEOUT).unwrap(), Snapshot::default());
    server.join().unwrap();
}

#[test]
fn typed_calls_send_their_paths_and_bodies() {
    let client = |response: Vec<u8>| {
        let (addr, server) = serve_once(response);
        (Client::new(addr, TIMEOUT), server)
    };
    let (c, server) = client(json_response("200 OK", r#"{"ok": true}"#));
    let patch = TenantPatch {
        max: Some(Size::from("2G")),
        ..TenantPatch::default()
    };
    c.patch_tenant("web 1", &patch).unwrap();
    let sent = server.join().unwrap();
    assert!(
        sent.starts_with("PATCH /v1/tenants/web%201 HTTP/1.1\r\n"),
        "{sent}"
    );
    assert!(sent.ends_with("\r\n\r\n{\"max\":\"2G\"}"), "{sent}");

    let (c, server) = client(json_response("200 OK", r#"{"ok": true}"#));
    c.set_tax_rate(0.5).unwrap();
    let sent = server.join().unwrap();
    assert!(sent.starts_with("PUT /v1/tax-rate HTTP/1.1\r\n"), "{sent}");
    assert!(sent.ends_with("\r\n\r\n{\"tax_rate\":0.5}"), "{sent}");

    let (c, server) = client(json_response(
        "409 Conflict",
        r#"{"error": "admission refuses it"}"#,
    ));
    let err = c.set_tax_rate(0.5).unwrap_err();
    assert!(
        matches!(&err, ClientError::Http { status: 409, message, .. } if message == "admission refuses it"),
        "{err}"
    );
    server.join().unwrap();

    let (c, server) = client(json_response("200 OK", "[]"));
    let query = DecisionQuery {
        tenant: Some("db".into()),
        limit: Some(3),
    };
    assert!(c.decisions(&query).unwrap().is_empty());
    let sent = server.join().unwrap();
    assert!(
        sent.starts_with("GET /v1/decisions?tenant=db&limit=3 HTTP/1.1\r\n"),
        "{sent}"
    );

    let (c, server) = client(json_response("200 OK", r#"{"tax_rate": 0.25}"#));
    assert_eq!(c.tax_rate().unwrap(), 0.25);
    server.join().unwrap();
}
