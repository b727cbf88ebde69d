//! Container engines and libvirt as memtide finds its tenants through them: Docker's Engine API and Podman's Docker-compatible API, each over the engine's Unix socket, and libvirt's domains through `virsh`.
//!
//! A platform engineer names a container (`container = "redis-a"`), not its cgroup. The
//! engine knows which process is the container's (`GET /containers/NAME/json`: its
//! `State.Pid`), and `/proc/PID/cgroup` names the memory cgroup memtide then manages as it
//! would an adopted one. The cgroup changes when the container is made again (a new id, so
//! a new cgroup) and is removed and made again when it restarts; the engine's event stream
//! (`GET /events`) says when, so memtide asks the engine again only for a container whose
//! name an event touched, or after the stream broke ([`Watcher`]), never by walking cgroups.
//!
//! What memtide does not do through the engine: set limits. Both engines write a
//! container's limit into its cgroup when it starts and leave it alone while it runs (with
//! the cgroupfs driver; under the systemd driver a `systemctl daemon-reload` may write the
//! unit's back), so memtide writes the cgroup directly, as for any cgroup, and gives back at
//! exit what it found there, which is the engine's own setting; `docker stats` shows the
//! cgroup's limit and so agrees. The engine's update call was not used: it rewrites and
//! fsyncs the container's configuration at every change, it cannot say "no limit" (0 means
//! "unchanged"), Podman 4.3 has none in its Docker-compatible API, and its own (libpod) update
//! is neither kept nor shown by `podman inspect`. docs/containers.md has the measurements.
//!
//! - [`Engine`]: one engine's client (inspect a container, list them, which engine answers);
//! - [`Container`]: what inspect says of one, and [`valid_name`], the engines' name rule;
//! - [`Watcher`]: a thread on the engine's event stream that marks the names it touched.
//!
//! libvirt ([`libvirt`]) is the same for a VM libvirt runs: a domain is named, virsh says
//! whether it runs, its QEMU's pid (so its cgroup), its balloon's model and statistics, and
//! moves its balloon (`setmem --live`: unlike a container's limit, the balloon is libvirt's
//! to move, through QEMU); [`libvirt::DomainWatcher`] follows `virsh event` as [`Watcher`]
//! follows an engine's stream, with the same [`Stamp`].
//!
//! - [`libvirt::Virsh`]: libvirt at one URI, one `virsh` child per call, bounded in time
//!   and output, its failures classified ([`libvirt::Failure`]);
//! - [`libvirt::DomainWatcher`]: a thread on `virsh event` that marks the domains it touched.

mod client;
mod container;
mod error;
mod events;
pub mod libvirt;
mod watch;

pub use client::{Engine, Listed};
pub use container::{valid_name, Container, NAME_RULE};
pub use error::EngineError;
pub use events::Watcher;
pub use watch::Stamp;

use std::path::{Path, PathBuf};

/// A container engine memtide can ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    /// Its name as configured (`engine = "docker"`) and logged.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// The engine named `name`, as configured.
    pub fn parse(name: &str) -> Option<EngineKind> {
        match name {
            "docker" => Some(EngineKind::Docker),
            "podman" => Some(EngineKind::Podman),
            _ => None,
        }
    }

    /// Where a rootful engine listens by default: dockerd's socket, and Podman's service's
    /// (`podman.socket`, or `podman system service`).
    pub fn default_socket(self) -> PathBuf {
        match self {
            EngineKind::Docker => PathBuf::from("/var/run/docker.sock"),
            EngineKind::Podman => PathBuf::from("/run/podman/podman.sock"),
        }
    }

    /// The engine whose socket (as `socket_of` gives it) exists, Docker first; `None` when
    /// neither does.
    pub fn present(socket_of: impl Fn(EngineKind) -> PathBuf) -> Option<EngineKind> {
        EngineKind::present_by(socket_of, is_socket)
    }

    /// [`EngineKind::present`] with `socket_at` saying whether a socket is at a path.
    pub fn present_by(
        socket_of: impl Fn(EngineKind) -> PathBuf,
        socket_at: impl Fn(&Path) -> bool,
    ) -> Option<EngineKind> {
        [EngineKind::Docker, EngineKind::Podman]
            .into_iter()
            .find(|&k| socket_at(&socket_of(k)))
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `path` is a Unix socket (following a link: Podman's docker socket is one).
pub fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_round_trip_and_unknown_names_are_none() {
        for k in [EngineKind::Docker, EngineKind::Podman] {
            assert_eq!(EngineKind::parse(k.name()), Some(k));
        }
        assert_eq!(EngineKind::parse("containerd"), None);
    }

    #[test]
    fn the_present_engine_is_the_first_whose_socket_exists() {
        let dir = tempfile::tempdir().unwrap();
        let podman = dir.path().join("podman.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&podman).unwrap();
        let plain = dir.path().join("docker.sock");
        std::fs::write(&plain, "not a socket").unwrap();
        let socket_of = |k: EngineKind| match k {
            EngineKind::Docker => plain.clone(),
            EngineKind::Podman => podman.clone(),
        };
        assert_eq!(EngineKind::present(socket_of), Some(EngineKind::Podman));
        assert_eq!(EngineKind::present(|_| dir.path().join("none.sock")), None);
    }
}
