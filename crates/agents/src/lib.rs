//! memtide's side of the application balloon protocol (docs/balloon-protocol.md): the socket applications' agents connect to, its event loop, and the hub where each tenant's agent, pool and takeovers are kept for the worlds to read.
//!
//! - [`socket`]: the socket file (mode, stale sockets, removal) and the peer's pid;
//! - [`server`]: one thread serving every connection with mio, for any [`server::Handler`];
//! - [`session`]: one connection's session as a socket-free state machine (lines and times
//!   in; lines, a close and events out; the tenant's lever read from it), which the
//!   simulator drives too;
//! - [`hub`]: the sessions by connection and tenant as that handler (identity, one agent per
//!   tenant), and the [`hub::Hub`] a world holds: levers read, moves carried out, events taken.
//!
//! The wire format itself (messages, framing) is `memtide-balloon`'s, the crate applications
//! link; this crate is what memtide adds to it.

pub mod error;
pub mod hub;
pub mod server;
pub mod session;
pub mod socket;

pub use error::SocketError;
