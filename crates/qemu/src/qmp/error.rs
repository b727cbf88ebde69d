//! Errors from talking QMP to one QEMU: each names the monitor socket, and the command, value or time limit concerned.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// At most this many characters of an offending line or value are kept in an error.
pub(crate) const EXCERPT_CHARS: usize = 160;

/// What went wrong on a QMP connection. Every message is one line naming the socket, so a log
/// line is enough to find the VM; after `Io`, `Protocol` or `Closed` the connection is done
/// with (connect again), after `TimedOut` or `Command` it can go on.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    /// The socket could not be connected (no QEMU listening, or not a socket).
    #[error("cannot connect to the QMP socket {}: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },

    /// Reading or writing the socket failed for a reason other than those below.
    #[error("QMP socket {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// Nothing complete arrived (or could be sent) within the time limit.
    #[error("QMP socket {}: no {waiting_for} within {after:?}", path.display())]
    TimedOut {
        path: PathBuf,
        /// What was awaited: "greeting", "answer to query-balloon", "room to send balloon".
        waiting_for: String,
        after: Duration,
    },

    /// The first line was not QEMU's greeting (`{"QMP": {"version": ..., "capabilities": ...}}`).
    #[error("QMP socket {}: expected QEMU's greeting, got {got}", path.display())]
    Greeting { path: PathBuf, got: String },

    /// QEMU answered the command with an error.
    #[error("QMP socket {}: {command} failed: {class}: {desc}", path.display())]
    Command {
        path: PathBuf,
        command: String,
        class: String,
        desc: String,
    },

    /// The VM has no active balloon device (QEMU's `DeviceNotActive`, or none found in QOM).
    #[error("QMP socket {}: the VM has no active virtio balloon device", path.display())]
    NoBalloon { path: PathBuf },

    /// A line or value that QMP does not allow here.
    #[error("QMP socket {}: {why}: {excerpt}", path.display())]
    Protocol {
        path: PathBuf,
        /// The start of the offending line or value.
        excerpt: String,
        why: String,
    },

    /// The socket reached its end: QEMU closed the monitor, or exited.
    #[error("QMP socket {} closed: QEMU exited or closed the monitor", path.display())]
    Closed { path: PathBuf },
}

impl QmpError {
    /// The monitor socket the error is about.
    pub fn path(&self) -> &Path {
        match self {
            QmpError::Connect { path, .. }
            | QmpError::Io { path, .. }
            | QmpError::TimedOut { path, .. }
            | QmpError::Greeting { path, .. }
            | QmpError::Command { path, .. }
            | QmpError::NoBalloon { path }
            | QmpError::Protocol { path, .. }
            | QmpError::Closed { path } => path,
        }
    }

    /// True when QEMU is gone (or closed the monitor): the VM should be taken as exited.
    pub fn is_closed(&self) -> bool {
        matches!(self, QmpError::Closed { .. })
    }

    /// QEMU's error class (`GenericError`, `DeviceNotFound`, ...) when QEMU refused a command.
    pub fn class(&self) -> Option<&str> {
        match self {
            QmpError::Command { class, .. } => Some(class),
            _ => None,
        }
    }

    pub(crate) fn protocol(path: &Path, excerpt: &str, why: impl Into<String>) -> QmpError {
        QmpError::Protocol {
            path: path.to_path_buf(),
            excerpt: excerpt_of(excerpt),
            why: why.into(),
        }
    }
}

/// The start of `text`, cut at a character boundary, with `…` when cut; one line.
pub(crate) fn excerpt_of(text: &str) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    let mut out: String = text
        .chars()
        .take(EXCERPT_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_socket_and_the_value_on_one_line() {
        let path = || PathBuf::from("/run/vm1/qmp.sock");
        let cases: Vec<(QmpError, Vec<&str>)> = vec![
            (
                QmpError::Connect {
                    path: path(),
                    source: io::Error::from_raw_os_error(libc::ECONNREFUSED),
                },
                vec!["/run/vm1/qmp.sock", "connect"],
            ),
            (
                QmpError::TimedOut {
                    path: path(),
                    waiting_for: "answer to query-balloon".into(),
                    after: Duration::from_millis(250),
                },
                vec!["/run/vm1/qmp.sock", "query-balloon", "250ms"],
            ),
            (
                QmpError::Greeting {
                    path: path(),
                    got: "{\"hello\": 1}".into(),
                },
                vec!["/run/vm1/qmp.sock", "greeting", "hello"],
            ),
            (
                QmpError::Command {
                    path: path(),
                    command: "qom-get".into(),
                    class: "DeviceNotFound".into(),
                    desc: "Device '/machine/peripheral/nope' not found".into(),
                },
                vec!["/run/vm1/qmp.sock", "qom-get", "DeviceNotFound", "nope"],
            ),
            (
                QmpError::NoBalloon { path: path() },
                vec!["/run/vm1/qmp.sock", "balloon"],
            ),
            (
                QmpError::protocol(&path(), "{\"return\": 1}\r\n", "answer to id 7, expected 8"),
                vec!["/run/vm1/qmp.sock", "id 7", "{\"return\": 1}"],
            ),
            (
                QmpError::Closed { path: path() },
                vec!["/run/vm1/qmp.sock", "closed"],
            ),
        ];
        for (err, wants) in cases {
            let msg = err.to_string();
            assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg:?}");
            for want in wants {
                assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            }
            assert_eq!(err.path(), Path::new("/run/vm1/qmp.sock"));
        }
    }

    #[test]
    fn an_excerpt_is_cut_at_a_character_and_marked() {
        let long = "é".repeat(EXCERPT_CHARS + 10);
        let ex = excerpt_of(&long);
        assert_eq!(ex.chars().count(), EXCERPT_CHARS + 1);
        assert!(ex.ends_with('…'));
        assert_eq!(excerpt_of("short\r\n"), "short");
        assert_eq!(excerpt_of("a\tb"), "a b");
    }

    #[test]
    fn only_command_errors_have_a_class() {
        let refused = QmpError::Command {
            path: PathBuf::from("/s"),
            command: "balloon".into(),
            class: "GenericError".into(),
            desc: "Parameter 'target' expects a size".into(),
        };
        assert_eq!(refused.class(), Some("GenericError"));
        assert!(!refused.is_closed());
        let gone = QmpError::Closed {
            path: PathBuf::from("/s"),
        };
        assert_eq!(gone.class(), None);
        assert!(gone.is_closed());
    }
}
