//! memtide's HTTP API on the wire: the versioned JSON types the daemon serves and accepts, and the client `memtide status` uses.
//!
//! This is the crate to build on for a script, an SDK or a dashboard: it depends on `serde`,
//! `serde_json` and the HTTP client `ureq` only — not on the daemon, the Linux host, the
//! controller or the policy. The daemon (`memtide-daemon`) serves exactly these types; the
//! endpoints, status codes and error messages are described in `docs/api.md`.
//!
//! - [`snapshot`]: what `GET /v1/status` answers — [`Snapshot`] with its [`HostSnapshot`],
//!   [`TenantSnapshot`]s, [`DecisionRecord`]s and [`Counters`];
//! - [`body`]: what changes send and get back — [`TenantPatch`] (with [`Size`]), [`TaxRate`],
//!   [`Applied`], [`ErrorBody`] — and the [`DecisionQuery`] of `GET /v1/decisions`;
//! - [`client`]: [`Client`], one call per request with a timeout, over TCP (with a bearer
//!   token for changes) or the daemon's Unix socket (`unix`, ureq's transport for it), and
//!   [`ClientError`], whose every message names the daemon's address or socket;
//! - [`unix`]: a ureq agent over a Unix socket, which the container engines' clients share.
//!
//! Each type's documentation shows a JSON example; the examples are the files in `json/` of
//! this crate, and its tests decode each one and check that it encodes back to the same JSON,
//! so the documentation cannot drift from the wire format.
//!
//! # Versions
//!
//! [`API_VERSION`] is the version of this wire format; it is the `v1` in the paths and the
//! snapshot's `api_version`. Within a version, fields may be added but none is renamed,
//! retyped or removed, so a client should ignore fields it does not know (these types do, on
//! answers). A change that would break a client gets a new version with new paths.
//!
//! # No model types on the wire
//!
//! Every field is a plain JSON value: bytes as integers, states, origins, estimators and
//! outcomes as strings, reasons as one line of text. No type of `memtide-model` appears here and
//! the crate does not depend on it: the wire format is not tied to the internal vocabulary,
//! and a client does not build the model. The one place where the model's rules reach the wire
//! is the size string of a [`TenantPatch`] (`"512M"`), which the daemon parses with the
//! configuration's parser; here a [`Size`] is carried as written.

pub mod body;
pub mod client;
pub mod snapshot;
pub mod unix;

pub use body::{Applied, DecisionQuery, ErrorBody, Size, TaxRate, TenantPatch};
pub use client::{fetch, request, Client, ClientError, Endpoint};
pub use snapshot::{
    AdviceSnapshot, AppSnapshot, CacheSnapshot, Counters, DecisionRecord, DiskSnapshot,
    HostSnapshot, ResizeSnapshot, SharingSnapshot, Snapshot, TenantSnapshot, VmSnapshot,
};

/// The version of the API's wire format: the `1` of the `/v1/...` paths, and the snapshot's
/// `api_version`.
pub const API_VERSION: u32 = 1;
