//! Who may change settings through the API: the bearer token for TCP and the peer of the Unix socket (root or a member of its group).
//!
//! The socket's file is `memtide_files::socket`'s, as the balloon socket's is: made with its
//! owner and mode in a private directory before anyone can reach it, never put over a live
//! daemon's socket (see `SocketServer::start`).
//!
//! **The token.** The file must be a regular file owned by root and readable or writable by no
//! one else (opened with `O_NOFOLLOW`, checked on the descriptor). Tokens are compared in
//! constant time (no timing tells how much of a guess was right); the token appears in no
//! error, log line or `Debug` output.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::ApiError;

/// Largest token file read.
const MAX_TOKEN_BYTES: u64 = 4096;

/// The bearer token that allows changes over TCP.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

impl Token {
    /// Reads the token from `path`: root's file, no access for group or others, one
    /// non-empty line (surrounding white space dropped).
    pub fn read(path: &Path) -> Result<Token, ApiError> {
        let bad = |why: String| ApiError::TokenFile {
            path: path.to_path_buf(),
            why,
        };
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| bad(format!("cannot open it: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| bad(format!("cannot read its owner and mode: {e}")))?;
        Token::check_meta(meta.is_file(), meta.uid(), meta.mode()).map_err(bad)?;
        let mut text = Vec::new();
        (&mut file)
            .take(MAX_TOKEN_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| bad(format!("cannot read it: {e}")))?;
        if text.len() as u64 > MAX_TOKEN_BYTES {
            return Err(bad(format!("is longer than {MAX_TOKEN_BYTES} bytes")));
        }
        Token::from_text(&text).map_err(bad)
    }

    /// A token given as text (one non-empty line, surrounding white space dropped).
    pub fn from_text(text: &[u8]) -> Result<Token, String> {
        let token = text.trim_ascii();
        if token.is_empty() {
            return Err("holds no token".to_string());
        }
        if token.iter().any(|b| !b.is_ascii_graphic()) {
            return Err("holds more than one word (white space or control bytes inside)".into());
        }
        Ok(Token(token.to_vec()))
    }

    fn check_meta(is_file: bool, uid: u32, mode: u32) -> Result<(), String> {
        if !is_file {
            return Err("is not a regular file".to_string());
        }
        if uid != 0 {
            return Err(format!("is owned by uid {uid}, not root"));
        }
        if mode & 0o077 != 0 {
            return Err(format!(
                "has mode {:04o}; group and others must have no access (chmod 600)",
                mode & 0o7777
            ));
        }
        Ok(())
    }

    /// Whether `given` is this token, in time that depends only on the lengths.
    pub(crate) fn matches(&self, given: &str) -> bool {
        let given = given.as_bytes();
        if given.len() != self.0.len() {
            return false;
        }
        let diff = self
            .0
            .iter()
            .zip(given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

/// The credentials of a Unix socket's peer (`SO_PEERCRED`): as it connected.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PeerCred {
    pub(crate) pid: i32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Reads `SO_PEERCRED` of a connected Unix socket (`memtide_agents::socket::peer_cred`).
pub(crate) fn peer_cred(stream: &impl AsRawFd) -> io::Result<PeerCred> {
    let cred = memtide_agents::socket::peer_cred(stream)
        .ok_or_else(|| io::Error::other("cannot read the peer's SO_PEERCRED"))?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// Who may change settings through the Unix socket: root, and the members of `group`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PeerRule {
    pub(crate) group: Option<u32>,
}

impl PeerRule {
    /// Whether the peer may change settings: uid 0, or `group` as its gid or among the
    /// supplementary groups of its process (`/proc/<pid>/status`, `Groups:`).
    pub(crate) fn allows(&self, peer: PeerCred, proc_status: impl FnOnce() -> String) -> bool {
        if peer.uid == 0 {
            return true;
        }
        let Some(group) = self.group else {
            return false;
        };
        peer.gid == group || supplementary_groups(&proc_status()).contains(&group)
    }
}

/// The `Groups:` line of a `/proc/<pid>/status` text (none when absent or unreadable).
fn supplementary_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The text of `/proc/<pid>/status` (empty when the process is gone).
pub(crate) fn proc_status(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default()
}

/// The gid of a group given by name (or as a number).
pub fn group_id(name: &str) -> Result<u32, ApiError> {
    let unknown = |why: String| ApiError::Group {
        name: name.to_string(),
        why,
    };
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let c_name = CString::new(name).map_err(|_| unknown("contains a NUL byte".into()))?;
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the sizes given; `found` points into `grp` or is null.
    let rc = unsafe {
        libc::getgrnam_r(
            c_name.as_ptr(),
            &mut grp,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(unknown(io::Error::from_raw_os_error(rc).to_string()));
    }
    if found.is_null() {
        return Err(unknown("no such group".into()));
    }
    Ok(grp.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> Token {
        Token::from_text(text.as_bytes()).unwrap()
    }

    #[test]
    fn only_the_same_token_matches() {
        let t = token("  abc123\n");
        assert!(t.matches("abc123"));
        assert!(!t.matches("abc124"));
        assert!(!t.matches("abc12"));
        assert!(!t.matches("abc1234"));
        assert!(!t.matches(""));
    }

    #[test]
    fn a_token_file_must_hold_one_word() {
        assert!(Token::from_text(b" \n").unwrap_err().contains("no token"));
        assert!(Token::from_text(b"a b").unwrap_err().contains("one word"));
    }

    #[test]
    fn a_token_never_shows_in_debug() {
        assert_eq!(format!("{:?}", token("s3cret")), "Token(<hidden>)");
    }

    #[test]
    fn a_token_file_must_be_roots_and_private() {
        assert_eq!(Token::check_meta(true, 0, 0o100600), Ok(()));
        assert_eq!(Token::check_meta(true, 0, 0o100400), Ok(()));
        let err = Token::check_meta(true, 1000, 0o100600).unwrap_err();
        assert_eq!(err, "is owned by uid 1000, not root");
        let err = Token::check_meta(true, 0, 0o100640).unwrap_err();
        assert!(err.contains("mode 0640"), "{err}");
        assert!(Token::check_meta(true, 0, 0o100604).is_err());
        assert!(Token::check_meta(false, 0, 0o40700).is_err());
    }

    #[test]
    fn reading_a_token_file_names_it_and_never_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        fs::write(&path, "s3cret\n").unwrap();
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let err = Token::read(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        let missing = Token::read(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("cannot open it"), "{missing}");
    }

    const ALICE: PeerCred = PeerCred {
        pid: 42,
        uid: 1000,
        gid: 1000,
    };

    #[test]
    fn root_may_always_change() {
        let root = PeerCred { uid: 0, ..ALICE };
        assert!(PeerRule { group: None }.allows(root, String::new));
    }

    #[test]
    fn others_need_the_group_as_gid_or_supplementary() {
        let rule = PeerRule { group: Some(500) };
        let status = || "Name:\tx\nGroups:\t27 500 1000 \n".to_string();
        assert!(!PeerRule { group: None }.allows(ALICE, status));
        assert!(rule.allows(ALICE, status));
        assert!(rule.allows(PeerCred { gid: 500, ..ALICE }, String::new));
        assert!(!rule.allows(ALICE, || "Groups:\t27 1000\n".to_string()));
        assert!(!rule.allows(ALICE, || "Groups:\n".to_string()));
        assert!(
            !rule.allows(ALICE, String::new),
            "a process gone is refused"
        );
    }

    #[test]
    fn groups_are_named_or_numbered() {
        assert_eq!(group_id("0").unwrap(), 0);
        assert_eq!(group_id("root").unwrap(), 0);
        let err = group_id("no-such-group-memtide").unwrap_err().to_string();
        assert!(err.contains("no-such-group-memtide"), "{err}");
    }
}
