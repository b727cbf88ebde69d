//! memtide's side of the application balloon protocol (docs/balloon-protocol.md): the socket applications' agents connect to, its event loop, and the hub where each tenant's agent, pool and takeovers are kept for the worlds to read.
//!
//! - [`socket`]: the peer of a connection (its pid and uid, pinned by a pidfd); the socket's
//!   file is `memtide_files::socket`'s;
//! - [`server`]: one thread serving every connection with mio, for any [`server::Handler`];
//! - [`session`]: one connection's session as a socket-free state machine (lines and times
//!   in; lines, a close and events out; the tenant's lever read from it), which the
//!   simulator drives too;
//! - [`hub`]: the sessions by connection and tenant as that handler (identity, one agent per
//!   tenant), and the [`hub::Hub`] a world holds: levers read, moves carried out, events taken.
//!
//! The wire format itself (messages, framing) is `memtide-balloon`'s, the crate applications
//! link; this crate is what memtide adds to it.
//!
//! In detail: the server binds its file with `memtide_files::socket::BoundSocket` (a trusted
//! directory, its group and mode set before it appears, a stale socket replaced, a live one or
//! another file refused, removed on drop only if still ours), pins each peer at accept
//! ([`socket::Peer`]; [`socket::peer_pid`] reads `SO_PEERCRED`), reads 64 KiB lines through
//! `LineSplitter`, keeps a bounded output buffer per connection and at most
//! `max_connections`, and gives its [`server::Handler`] lines, opens, closes and a 50 ms poll
//! ([`server::Wake`] wakes it from other threads); a session keeps registration, errors
//! counted to `violations`, stats, durability rates, the last target sent and its answer.
//! The hub checks identity against the world's `Tenants` and keeps one agent per tenant;
//! `Hub::lever` fills the tenant's `AppBalloonLever` (session, pool, used, hits and misses
//! since the last reading, the pool's miss-ratio curve, the answer, the silence),
//! `Hub::apply` carries out the policy's `AppMove` (a target on the granule within min and
//! max, sent once; a takeover closes the agent with `dead`, `deadline` or `dishonest`).
//! Whether an agent is dead, stuck or dishonest is the policy's call, not the session's.
//!
//! On Linux the hub runs as the host's `AppBalloon` actuator (`LinuxHost::with`), with
//! `CgroupTenants` (`/proc/<pid>/cgroup` against the managed cgroups) as its identity check.
//! Tests: the `memtide/` vectors and bad traffic over a real socket; every SDK's tests and
//! sample against the server and hub (`crates/cli/tests/sdks.rs`) and under a real daemon
//! (`crates/cli/tests/linux/balloon.rs`). Benches: `round_trip` (target to done through the
//! socket) and `agents_load` (1,000 agents' stats).

pub mod error;
pub mod hub;
pub mod server;
pub mod session;
pub mod socket;

pub use error::ServerError;
