//! What memtide's integration tests share: the one skip rule ([`skip_or_fail`]), the gate that
//! keeps the tests of one former test file apart from another's ([`file_gate`]), the real host
//! ([`linux`], [`TestCgroup`], [`Zram`]), a `memtide daemon` driven through its API
//! ([`Daemon`]), the waits ([`wait_for`]), the SDKs' sample pools ([`samples`]) and a real
//! unprivileged user, in a group if need be, with its attack tool ([`UnprivilegedUser`],
//! [`UnprivilegedGroup`], `memtide-attack`).
//!
//! A dev-dependency only, never published. The skip rule skips with the reason, and fails
//! instead under `CI` or `MEMTIDE_REQUIRE_LINUX=1`; `tests/purity.rs` proves the pure crates'
//! `clippy.toml` refuses each family of I/O, clock and randomness.

pub mod browser;
mod daemon;
mod gate;
mod host;
pub mod samples;
mod skip;
mod user;
mod wait;
mod zram;

pub use daemon::{
    adopt_config, config_head, daemon_to_exit, daemon_to_exit_on, memtide, memtide_path, Daemon,
};
pub use gate::{file_gate, FileGate};
pub use host::{
    limit_bytes, linux, mib, remove_tree, swap_total, toucher_path, Linux, TestCgroup, Toucher, MIB,
};
pub use skip::{required, skip_or_fail, REQUIRE_VAR};
pub use user::{attack_path, UnprivilegedGroup, UnprivilegedUser};
pub use wait::wait_for;
pub use zram::{zram, Zram};

use std::net::TcpListener;
use std::path::PathBuf;

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
