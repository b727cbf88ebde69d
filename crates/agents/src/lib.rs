//! memtide's side of the application balloon protocol (docs/balloon-protocol.md): the socket applications' agents connect to, its event loop, and the hub where each tenant's agent, pool and takeovers are kept for the worlds to read.
//!
//! - [`socket`]: the socket file (mode, stale sockets, removal) and the peer's pid;
//! - [`server`]: one thread serving every connection with mio, for any [`server::Handler`];
//! - [`hub`]: the protocol's sessions and rules as that handler, and the [`hub::Hub`] a world
//!   holds: pools read, targets asked, measured memory reported, takeovers and events taken.
//!
//! The wire format itself (messages, framing) is `memtide-balloon`'s, the crate applications
//! link; this crate is what memtide adds to it.

pub mod error;
pub mod hub;
pub mod server;
pub mod socket;

pub use error::SocketError;
