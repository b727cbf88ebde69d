//! A client of the daemon's API, the one `memtide status` uses: one request per call on [`ureq`], with the whole exchange bounded by a timeout and every error naming the address.
//!
//! Until this crate, `memtide status` spoke HTTP/1.1 through 300 lines of our own on
//! `std::net`. It now uses `ureq` (3.x, without default features: plain HTTP, no TLS, no
//! compression), a maintained client that parses responses (by length, chunked, to EOF) so we
//! do not. Its cost, measured: eight small dependencies (`http` with `bytes`, `httparse`,
//! `ureq-proto`, `base64`, `log`, `percent-encoding`, `utf8-zero`) and 535 KB on the stripped
//! `memtide` binary (3.47 -> 4.01 MB, x86-64 release); no reason to keep our own.
//!
//! The behaviour is the old client's: `Connection: close`, `User-Agent: memtide/VERSION`,
//! `Accept: application/json`, a JSON body with its `Content-Type` (and `Content-Length: 0`, not
//! chunked, for a PUT, PATCH or POST without one), answers of any status returned rather than
//! turned into errors, no redirects followed, no proxy taken from the environment (ureq would
//! read `HTTP_PROXY`), answers up to 64 MiB, and one timeout for connect, send and receive
//! together.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use ureq::http;

use crate::body::{percent_encode, Applied, DecisionQuery, ErrorBody, TaxRate, TenantPatch};
use crate::snapshot::{DecisionRecord, HostSnapshot, Snapshot, TenantSnapshot};
use crate::API_VERSION;

/// Largest response body accepted from the daemon.
pub const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// The address `memtide status` asks by default (the daemon's default `[daemon] listen`).
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:9464";

/// The daemon's Unix socket for changes by default (`[api] socket`: `api.sock` beside the
/// default state file).
pub const DEFAULT_SOCKET: &str = "/run/memtide/api.sock";

/// Where a daemon's API is: its TCP address or its Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The paths of this API version's endpoints start with this: `/v` and [`API_VERSION`].
pub const PATH_PREFIX: &str = "/v1";

/// Why talking to the daemon failed. Every message names the address.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens there (connection refused).
    NotRunning { addr: Endpoint },
    /// The exchange (connect, send and receive) took longer than the timeout.
    Timeout { addr: Endpoint, timeout: Duration },
    /// The connection failed otherwise.
    Io { addr: Endpoint, source: io::Error },
    /// The method or path cannot be sent; refused before connecting.
    InvalidRequest { addr: Endpoint, why: String },
    /// The answer is not HTTP/1.x as it should be (or is too large, or not UTF-8).
    BadResponse { addr: Endpoint, why: String },
    /// The daemon answered with a status other than 200; `message` is its `error`.
    Http {
        addr: Endpoint,
        method: String,
        path: String,
        status: u16,
        message: String,
    },
    /// The answer's JSON is not what this version of the API sends; `what` names the answer.
    Decode {
        addr: Endpoint,
        what: String,
        source: serde_json::Error,
    },
    /// The daemon's snapshot says it speaks another version of the API.
    Version { addr: Endpoint, theirs: u32 },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotRunning { addr } => write!(
                f,
                "no memtide daemon answers at {addr} (is it running? see docs/linux.md)"
            ),
            ClientError::Timeout { addr, timeout } => write!(
                f,
                "the memtide daemon at {addr} did not answer within {:.1}s",
                timeout.as_secs_f64()
            ),
            ClientError::Io { addr, source } => {
                write!(f, "cannot talk to the memtide daemon at {addr}: {source}")
            }
            ClientError::InvalidRequest { addr, why } => {
                write!(f, "cannot send this request to {addr}: {why}")
            }
            ClientError::BadResponse { addr, why } => write!(
                f,
                "the memtide daemon at {addr} sent a malformed HTTP response: {why}"
            ),
            ClientError::Http {
                addr,
                method,
                path,
                status,
                message,
            } => write!(
                f,
                "the memtide daemon at {addr} answered {status} to {method} {path}: {message}"
            ),
            ClientError::Decode { addr, what, source } => write!(
                f,
                "the {what} from the memtide daemon at {addr} does not decode: {source}"
            ),
            ClientError::Version { addr, theirs } => write!(
                f,
                "the memtide daemon at {addr} speaks API version {theirs}; this client speaks version {API_VERSION}"
            ),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Io { source, .. } => Some(source),
            ClientError::Decode { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A client of one daemon. Each call is one request on its own connection, bounded by the
/// client's timeout.
#[derive(Clone)]
pub struct Client {
    addr: Endpoint,
    timeout: Duration,
    agent: ureq::Agent,
    /// Sent as `Authorization: Bearer`; never printed.
    token: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr)
            .field("timeout", &self.timeout)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

impl Client {
    /// A client of the daemon at `addr`; `timeout` bounds each call as a whole.
    pub fn new(addr: SocketAddr, timeout: Duration) -> Client {
        Client {
            addr: Endpoint::Tcp(addr),
            timeout,
            agent: ureq::Agent::new_with_config(Client::config(timeout)),
            token: None,
        }
    }

    /// A client of the daemon's Unix socket at `path` (where root and the members of its
    /// `[api] group` may change settings); `timeout` bounds each call as a whole.
    pub fn unix(path: &Path, timeout: Duration) -> Client {
        Client {
            addr: Endpoint::Unix(path.to_path_buf()),
            timeout,
            agent: crate::unix::agent(path, Client::config(timeout)),
            token: None,
        }
    }

    /// This client with a bearer token, which allows changes over TCP (`[api] token_file`).
    pub fn with_token(mut self, token: &str) -> Client {
        self.token = Some(token.trim().to_string());
        self
    }

    fn config(timeout: Duration) -> ureq::config::Config {
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .proxy(None)
            .allow_non_standard_methods(true)
            .max_idle_connections(0)
            .user_agent(format!("memtide/{}", env!("CARGO_PKG_VERSION")))
            .accept("application/json")
            .build()
    }

    /// The daemon's address or socket.
    pub fn endpoint(&self) -> &Endpoint {
        &self.addr
    }

    /// The bound on each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends one request (`method` in upper case, `path` from `/` with any query, a JSON body
    /// if given) and returns the status code and body, whatever the status.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<(u16, String), ClientError> {
        let addr = &self.addr;
        let invalid = |why: String| ClientError::InvalidRequest {
            addr: addr.clone(),
            why,
        };
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(invalid(format!(
                "method {method:?} is not upper-case letters"
            )));
        }
        if !path.starts_with('/')
            || path
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(invalid(format!("path {path:?} must start with / and hold no spaces or control characters (percent-encode them)")));
        }
        // Over the socket the URI's address only names the host in the `Host` header.
        let host = match addr {
            Endpoint::Tcp(a) => a.to_string(),
            Endpoint::Unix(_) => "127.0.0.1".to_string(),
        };
        let mut builder = http::Request::builder()
            .method(method)
            .uri(format!("http://{host}{path}"))
            .header("Connection", "close");
        if let Some(token) = &self.token {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        let sent = match body {
            Some(body) => builder
                .header("Content-Type", "application/json")
                .body(body)
                .map_err(|e| invalid(e.to_string()))
                .and_then(|req| self.agent.run(req).map_err(|e| self.error(e))),
            // Without a length, ureq would send an absent body of these methods chunked, which
            // the daemon refuses (411): send `Content-Length: 0` instead.
            None if matches!(method, "POST" | "PUT" | "PATCH") => builder
                .body("")
                .map_err(|e| invalid(e.to_string()))
                .and_then(|req| self.agent.run(req).map_err(|e| self.error(e))),
            None => builder
                .body(())
                .map_err(|e| invalid(e.to_string()))
                .and_then(|req| self.agent.run(req).map_err(|e| self.error(e))),
        };
        let mut response = sent?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(|e| self.error(e))?;
        let text = String::from_utf8(bytes).map_err(|_| ClientError::BadResponse {
            addr: addr.clone(),
            why: "body is not UTF-8".to_string(),
        })?;
        Ok((status, text))
    }

    /// `GET /v1/status`: the whole snapshot, refused if it is of another API version.
    pub fn status(&self) -> Result<Snapshot, ClientError> {
        let snapshot: Snapshot = self.get(&format!("{PATH_PREFIX}/status"), "status")?;
        if snapshot.api_version != API_VERSION {
            return Err(ClientError::Version {
                addr: self.addr.clone(),
                theirs: snapshot.api_version,
            });
        }
        Ok(snapshot)
    }

    /// `GET /v1/host`.
    pub fn host(&self) -> Result<HostSnapshot, ClientError> {
        self.get(&format!("{PATH_PREFIX}/host"), "host")
    }

    /// `GET /v1/tenants`, in config order.
    pub fn tenants(&self) -> Result<Vec<TenantSnapshot>, ClientError> {
        self.get(&format!("{PATH_PREFIX}/tenants"), "tenants")
    }

    /// `GET /v1/tenants/{name}` (an `Http` error with status 404 if there is no such tenant).
    pub fn tenant(&self, name: &str) -> Result<TenantSnapshot, ClientError> {
        self.get(&tenant_path(name), "tenant")
    }

    /// `GET /v1/decisions`, oldest first.
    pub fn decisions(&self, query: &DecisionQuery) -> Result<Vec<DecisionRecord>, ClientError> {
        let q = query.to_query_string();
        let path = if q.is_empty() {
            format!("{PATH_PREFIX}/decisions")
        } else {
            format!("{PATH_PREFIX}/decisions?{q}")
        };
        self.get(&path, "decisions")
    }

    /// `GET /v1/tax-rate`.
    pub fn tax_rate(&self) -> Result<f64, ClientError> {
        self.get::<TaxRate>(&format!("{PATH_PREFIX}/tax-rate"), "tax rate")
            .map(|t| t.tax_rate)
    }

    /// `PATCH /v1/tenants/{name}`; `Ok` once the daemon's loop applied it. A refusal is an
    /// `Http` error with the daemon's reason (400, 404, 409 or 503: see docs/api.md).
    pub fn patch_tenant(&self, name: &str, patch: &TenantPatch) -> Result<(), ClientError> {
        self.change("PATCH", &tenant_path(name), patch)
    }

    /// `PUT /v1/tax-rate`; `Ok` once the daemon's loop applied it.
    pub fn set_tax_rate(&self, tax_rate: f64) -> Result<(), ClientError> {
        self.change(
            "PUT",
            &format!("{PATH_PREFIX}/tax-rate"),
            &TaxRate { tax_rate },
        )
    }

    fn get<T: DeserializeOwned>(&self, path: &str, what: &str) -> Result<T, ClientError> {
        let body = self.expect_200("GET", path, None)?;
        serde_json::from_str(&body).map_err(|source| ClientError::Decode {
            addr: self.addr.clone(),
            what: what.to_string(),
            source,
        })
    }

    fn change<B: Serialize>(&self, method: &str, path: &str, body: &B) -> Result<(), ClientError> {
        let json = serde_json::to_string(body).map_err(|e| ClientError::InvalidRequest {
            addr: self.addr.clone(),
            why: format!("its body does not encode as JSON: {e}"),
        })?;
        let answer = self.expect_200(method, path, Some(&json))?;
        match serde_json::from_str::<Applied>(&answer) {
            Ok(Applied { ok: true }) => Ok(()),
            Ok(Applied { ok: false }) => Err(ClientError::BadResponse {
                addr: self.addr.clone(),
                why: format!("{method} {path} answered 200 with {{\"ok\": false}}"),
            }),
            Err(source) => Err(ClientError::Decode {
                addr: self.addr.clone(),
                what: format!("answer to {method} {path}"),
                source,
            }),
        }
    }

    fn expect_200(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<String, ClientError> {
        let (status, body) = self.request(method, path, body)?;
        if status != 200 {
            return Err(ClientError::Http {
                addr: self.addr.clone(),
                method: method.to_string(),
                path: path.to_string(),
                status,
                message: error_message(&body),
            });
        }
        Ok(body)
    }

    /// What a failure of ureq means for the caller.
    fn error(&self, e: ureq::Error) -> ClientError {
        let addr = self.addr.clone();
        let bad = |why: String| ClientError::BadResponse {
            addr: self.addr.clone(),
            why,
        };
        match e {
            ureq::Error::Io(source) => match source.kind() {
                io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound => {
                    ClientError::NotRunning { addr }
                }
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ClientError::Timeout {
                    addr,
                    timeout: self.timeout,
                },
                io::ErrorKind::UnexpectedEof => {
                    bad("the connection closed before the whole response arrived".to_string())
                }
                _ => ClientError::Io { addr, source },
            },
            ureq::Error::Timeout(_) => ClientError::Timeout {
                addr,
                timeout: self.timeout,
            },
            ureq::Error::Protocol(why) => bad(why.to_string()),
            ureq::Error::LargeResponseHeader(..) => bad(e.to_string()),
            ureq::Error::BodyExceedsLimit(_) => {
                bad(format!("longer than {MAX_RESPONSE_BYTES} bytes"))
            }
            ureq::Error::BadUri(_) | ureq::Error::Http(_) | ureq::Error::HostNotFound => {
                ClientError::InvalidRequest {
                    addr,
                    why: e.to_string(),
                }
            }
            other => ClientError::Io {
                addr,
                source: other.into_io(),
            },
        }
    }
}

/// `/v1/tenants/{name}`, the name percent-encoded.
pub fn tenant_path(name: &str) -> String {
    format!("{PATH_PREFIX}/tenants/{}", percent_encode(name))
}

/// Sends one request to the daemon at `addr` and returns the status code and body (see
/// [`Client::request`]); `timeout` bounds the whole exchange.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), ClientError> {
    Client::new(addr, timeout).request(method, path, body)
}

/// Fetches `GET /v1/status` and decodes it, as `memtide status` does.
pub fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Snapshot, ClientError> {
    Client::new(addr, timeout).status()
}

/// The `error` of a JSON [`ErrorBody`], or the body itself (trimmed, cut at 200 characters).
pub fn error_message(body: &str) -> String {
    serde_json::from_str::<ErrorBody>(body)
        .map(|e| e.error)
        .unwrap_or_else(|_| body.trim().chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_prefix_is_the_api_version() {
        assert_eq!(PATH_PREFIX, format!("/v{API_VERSION}"));
        assert!(tenant_path("a b").starts_with(PATH_PREFIX));
        assert_eq!(tenant_path("a b"), "/v1/tenants/a%20b");
    }

    #[test]
    fn error_bodies_yield_their_message() {
        assert_eq!(
            error_message(r#"{"error":"no tenant named \"x\""}"#),
            "no tenant named \"x\""
        );
        assert_eq!(error_message("plain text\n"), "plain text");
        assert_eq!(error_message(&"x".repeat(300)).len(), 200);
    }

    #[test]
    fn requests_with_unsendable_method_or_path_are_refused_before_connecting() {
        let addr: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        for (method, path) in [
            ("get", "/"),
            ("", "/"),
            ("GET", "no-slash"),
            ("GET", "/a b"),
            ("GET", "/x\r\nHost: y"),
        ] {
            let err = request(addr, method, path, None, Duration::from_millis(100)).unwrap_err();
            assert!(
                matches!(err, ClientError::InvalidRequest { .. }),
                "{method} {path:?}: {err}"
            );
            assert!(err.to_string().contains("127.0.0.1:9464"), "{err}");
        }
    }
}
