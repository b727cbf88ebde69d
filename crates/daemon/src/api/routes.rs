//! The API's endpoints: maps a method and target to a reply, reading the published snapshot and sending changes to the daemon's loop.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::RwLockReadGuard;
use std::time::Duration;

use serde::Serialize;

use super::body;
use super::http::{clip, Reply, HTML, TEXT};
use super::SharedSnapshot;
use crate::command::{Change, Refusal, Request};
use memtide_api::{Applied, DecisionQuery, Snapshot, TaxRate};

/// Prometheus text exposition format 0.0.4.
pub(crate) const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The answer to a change without authority.
pub(crate) const NO_AUTHORITY: &str = "changes need authority: over TCP the API is read-only \
    unless the request carries the [api] token_file token (Authorization: Bearer TOKEN); or use \
    the Unix socket ([api] socket) as root or a member of [api] group; see docs/api.md";

/// What every request handler needs.
pub(crate) struct Handler {
    pub(crate) shared: SharedSnapshot,
    pub(crate) commands: Sender<Request>,
    /// Longest wait for the loop's answer to a change.
    pub(crate) reply_timeout: Duration,
}

enum Endpoint {
    Dashboard,
    Healthz,
    Metrics,
    Status,
    Host,
    Tenants,
    Tenant(String),
    Decisions,
    TaxRate,
}

impl Endpoint {
    /// Methods besides GET and HEAD, for the `Allow` header.
    fn allow(&self) -> &'static str {
        match self {
            Endpoint::Tenant(_) => "GET, HEAD, PATCH",
            Endpoint::TaxRate => "GET, HEAD, PUT",
            _ => "GET, HEAD",
        }
    }
}

impl Handler {
    /// Answers one request; `may_change`: the caller has authority to change settings (a
    /// change without it gets 403). Never panics, whatever the input.
    pub(crate) fn handle(
        &self,
        method: &str,
        target: &str,
        body: &[u8],
        may_change: bool,
    ) -> Reply {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let endpoint = match path.split('/').skip(1).collect::<Vec<_>>().as_slice() {
            [""] => Endpoint::Dashboard,
            ["healthz"] => Endpoint::Healthz,
            ["metrics"] => Endpoint::Metrics,
            ["v1", "status"] => Endpoint::Status,
            ["v1", "host"] => Endpoint::Host,
            ["v1", "tenants"] => Endpoint::Tenants,
            ["v1", "tenants", name] if !name.is_empty() => {
                match body::percent_decode(name, false) {
                    Ok(name) => Endpoint::Tenant(name),
                    Err(why) => return Reply::error(400, &format!("tenant name: {why}")),
                }
            }
            ["v1", "decisions"] => Endpoint::Decisions,
            ["v1", "tax-rate"] => Endpoint::TaxRate,
            _ => {
                return Reply::error(
                    404,
                    &format!("no endpoint {:?}; see docs/api.md", clip(path)),
                )
            }
        };
        let get = method == "GET" || method == "HEAD";
        if !get && !may_change {
            return Reply::error(403, NO_AUTHORITY);
        }
        match (&endpoint, get, method) {
            (Endpoint::Dashboard, true, _) => match body::parse_dashboard_query(query) {
                Ok(q) => Reply::text(
                    200,
                    HTML,
                    super::dashboard::render(&self.snapshot(), &self.shared.history(), &q),
                ),
                Err(why) => Reply::error(400, &why),
            },
            (Endpoint::Healthz, true, _) => Reply::text(200, TEXT, "ok".to_string()),
            (Endpoint::Metrics, true, _) => Reply::text(
                200,
                METRICS_CONTENT_TYPE,
                crate::metrics::render(&self.snapshot()),
            ),
            (Endpoint::Status, true, _) => json_reply(&*self.snapshot()),
            (Endpoint::Host, true, _) => json_reply(&self.snapshot().host),
            (Endpoint::Tenants, true, _) => json_reply(&self.snapshot().tenants),
            (Endpoint::Tenant(name), true, _) => {
                let snap = self.snapshot();
                match snap.tenants.iter().find(|t| t.name == *name) {
                    Some(t) => json_reply(t),
                    None => unknown_tenant(name),
                }
            }
            (Endpoint::Tenant(name), false, "PATCH") => {
                match body::parse_tenant_patch(name, body) {
                    Ok(change) => self.submit(change),
                    Err(why) => Reply::error(400, &why),
                }
            }
            (Endpoint::Decisions, true, _) => match body::parse_decision_query(query) {
                Ok(q) => self.decisions(&q),
                Err(why) => Reply::error(400, &why),
            },
            (Endpoint::TaxRate, true, _) => json_reply(&TaxRate {
                tax_rate: self.snapshot().host.tax_rate,
            }),
            (Endpoint::TaxRate, false, "PUT") => match body::parse_tax_rate(body) {
                Ok(rate) => self.submit(Change::TaxRate(rate)),
                Err(why) => Reply::error(400, &why),
            },
            _ => {
                let allow = endpoint.allow();
                let mut reply = Reply::error(
                    405,
                    &format!(
                        "{} is not allowed on {}; allowed: {allow}",
                        clip(method),
                        clip(path)
                    ),
                );
                reply.allow = Some(allow);
                reply
            }
        }
    }

    /// The latest snapshot, readable even if a writer panicked while holding the lock.
    fn snapshot(&self) -> RwLockReadGuard<'_, Snapshot> {
        self.shared.snapshot()
    }

    fn decisions(&self, q: &DecisionQuery) -> Reply {
        let snap = self.snapshot();
        let matching: Vec<_> = snap
            .decisions
            .iter()
            .filter(|d| q.tenant.as_ref().is_none_or(|t| d.tenant == *t))
            .collect();
        let skip = q
            .limit
            .map_or(0, |limit| matching.len().saturating_sub(limit));
        json_reply(&matching[skip..])
    }

    /// Sends a change to the loop and turns its answer (or silence) into a reply.
    fn submit(&self, change: Change) -> Reply {
        let (reply, answer) = mpsc::channel();
        if self.commands.send(Request { change, reply }).is_err() {
            return Reply::error(503, "the daemon's loop is not running; nothing was changed");
        }
        match answer.recv_timeout(self.reply_timeout) {
            Ok(Ok(())) => json_reply(&Applied::default()),
            Ok(Err(refusal @ Refusal::UnknownTenant(_))) => Reply::error(404, &refusal.to_string()),
            Ok(Err(refusal @ Refusal::Conflict(_))) => Reply::error(409, &refusal.to_string()),
            Err(RecvTimeoutError::Timeout) => Reply::error(
                503,
                &format!(
                    "the daemon's loop did not answer within {:.1}s; the change may still take effect at its next tick",
                    self.reply_timeout.as_secs_f64()
                ),
            ),
            Err(RecvTimeoutError::Disconnected) => Reply::error(
                503,
                "the daemon's loop dropped the request without answering",
            ),
        }
    }
}

fn unknown_tenant(name: &str) -> Reply {
    Reply::error(404, &Refusal::UnknownTenant(clip(name)).to_string())
}

fn json_reply<T: Serialize + ?Sized>(value: &T) -> Reply {
    match serde_json::to_string(value) {
        Ok(body) => Reply::json(200, body),
        Err(e) => Reply::error(500, &format!("cannot encode the reply as JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_api::{DecisionRecord, TenantSnapshot};
    use std::sync::Arc;

    fn handler(commands: Sender<Request>) -> Handler {
        let snapshot = Snapshot {
            tenants: vec![TenantSnapshot {
                name: "db".into(),
                ..Default::default()
            }],
            decisions: (0..6)
                .map(|i| DecisionRecord {
                    tick: i,
                    tenant: if i.is_multiple_of(2) { "db" } else { "web" }.into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        Handler {
            shared: Arc::new(crate::api::Published::new(snapshot)),
            commands,
            reply_timeout: Duration::from_millis(100),
        }
    }

    fn ticks(reply: &Reply) -> Vec<u64> {
        let v: Vec<DecisionRecord> = serde_json::from_str(&reply.body).unwrap();
        v.iter().map(|d| d.tick).collect()
    }

    #[test]
    fn decisions_filter_by_tenant_and_keep_the_newest() {
        let (tx, _rx) = mpsc::channel();
        let h = handler(tx);
        assert_eq!(
            ticks(&h.handle("GET", "/v1/decisions", b"", true)),
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(
            ticks(&h.handle("GET", "/v1/decisions?limit=2", b"", true)),
            [4, 5]
        );
        assert_eq!(
            ticks(&h.handle("GET", "/v1/decisions?tenant=db&limit=2", b"", true)),
            [2, 4]
        );
        assert_eq!(
            h.handle("GET", "/v1/decisions?limit=0", b"", true).status,
            400
        );
    }

    #[test]
    fn methods_not_allowed_name_the_allowed_ones() {
        let (tx, _rx) = mpsc::channel();
        let h = handler(tx);
        let r = h.handle("DELETE", "/v1/tenants/db", b"", true);
        assert_eq!((r.status, r.allow), (405, Some("GET, HEAD, PATCH")));
        let r = h.handle("POST", "/v1/tax-rate", b"", true);
        assert_eq!((r.status, r.allow), (405, Some("GET, HEAD, PUT")));
        assert_eq!(h.handle("HEAD", "/v1/status", b"", true).status, 200);
    }

    #[test]
    fn unknown_paths_are_not_found() {
        let (tx, _rx) = mpsc::channel();
        let h = handler(tx);
        for path in [
            "//",
            "/v1",
            "/v1/tenants/",
            "/v1/tenants/db/x",
            "/v2/status",
            "/metrics/",
        ] {
            assert_eq!(h.handle("GET", path, b"", true).status, 404, "{path}");
        }
    }

    #[test]
    fn the_dashboard_is_served_at_the_root_and_a_bad_query_is_refused() {
        let (tx, _rx) = mpsc::channel();
        let h = handler(tx);
        let r = h.handle("GET", "/?window=5m&tenant=db", b"", false);
        assert_eq!((r.status, r.content_type), (200, HTML));
        assert!(r.body.contains("<h3>db</h3>"), "{}", r.body);
        for (query, why) in [
            ("/?window=10s", "out of range: from 1m to 60m"),
            ("/?window=2h", "out of range"),
            ("/?window=5", "has no unit"),
            ("/?window=5m&window=1h", "given twice"),
            ("/?x=1", "expected window or tenant"),
        ] {
            let r = h.handle("GET", query, b"", false);
            assert_eq!(r.status, 400, "{query}");
            assert!(r.body.contains(why), "{query}: {}", r.body);
        }
        assert_eq!(h.handle("POST", "/", b"", true).status, 405);
    }

    #[test]
    fn a_silent_loop_gives_503_and_a_gone_loop_too() {
        let (tx, rx) = mpsc::channel();
        let h = handler(tx);
        let r = h.handle("PUT", "/v1/tax-rate", br#"{"tax_rate": 0.5}"#, true);
        assert_eq!(r.status, 503);
        assert!(r.body.contains("did not answer within 0.1s"), "{}", r.body);
        drop(rx);
        let r = h.handle("PUT", "/v1/tax-rate", br#"{"tax_rate": 0.5}"#, true);
        assert_eq!(r.status, 503);
        assert!(r.body.contains("not running"), "{}", r.body);
    }

    #[test]
    fn changes_without_authority_get_403_saying_how_to_get_it() {
        let (tx, rx) = mpsc::channel();
        let h = handler(tx);
        for (method, path) in [
            ("PATCH", "/v1/tenants/db"),
            ("PUT", "/v1/tax-rate"),
            ("POST", "/v1/tax-rate"),
            ("DELETE", "/v1/tenants/db"),
        ] {
            let r = h.handle(method, path, br#"{"max": "1G"}"#, false);
            assert_eq!(r.status, 403, "{method} {path}");
            assert!(r.body.contains("Unix socket"), "{}", r.body);
            assert!(r.body.contains("token_file"), "{}", r.body);
        }
        assert!(rx.try_recv().is_err(), "nothing reached the loop");
        assert_eq!(h.handle("GET", "/v1/status", b"", false).status, 200);
        assert_eq!(h.handle("HEAD", "/metrics", b"", false).status, 200);
    }

    #[test]
    fn tenant_names_are_percent_decoded() {
        let (tx, _rx) = mpsc::channel();
        let h = handler(tx);
        assert_eq!(h.handle("GET", "/v1/tenants/%64b", b"", true).status, 200);
        assert_eq!(h.handle("GET", "/v1/tenants/%ff", b"", true).status, 400);
    }
}
