//! serde readers for the daemon config's fields whose text has its own syntax (an address and port, a path, the parent cgroup, octal permission bits): each refusal is one message, which the loader shows at the field with its value.

use super::ParentCgroup;
use serde::de::Error;
use serde::{Deserialize, Deserializer};
use std::net::SocketAddr;
use std::path::PathBuf;

/// What a path may be, for messages.
pub(super) const PATH_RULE: &str =
    "is not a path; expected a non-empty path without NUL characters";

/// `listen = "127.0.0.1:9464"`: an IP address and a port.
pub(super) fn address<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    String::deserialize(d)?.trim().parse().map_err(|_| {
        D::Error::custom(
            "is not an IP address and port such as \"127.0.0.1:9464\" or \"[::1]:9464\"",
        )
    })
}

/// A file-system path: a non-empty string without NUL.
pub(super) fn path<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    let text = String::deserialize(d)?;
    if is_path(&text) {
        Ok(PathBuf::from(text))
    } else {
        Err(D::Error::custom(PATH_RULE))
    }
}

/// An optional path (a key that is absent stays `None` through `#[serde(default)]`).
pub(super) fn some_path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    path(d).map(Some)
}

/// Whether `text` may be a path.
pub(super) fn is_path(text: &str) -> bool {
    !text.is_empty() && !text.contains('\0')
}

/// `parent = "self"` or an absolute cgroup path, normalised.
pub(super) fn parent<'de, D: Deserializer<'de>>(d: D) -> Result<ParentCgroup, D::Error> {
    let text = String::deserialize(d)?;
    if text == "self" {
        return Ok(ParentCgroup::OwnCgroup);
    }
    cgroup_path(&text).map(ParentCgroup::Path).map_err(|why| {
        D::Error::custom(format!(
            "is not a cgroup path: it {why}; write \"self\" or an absolute path inside the \
                 cgroup hierarchy such as \"/memtide\""
        ))
    })
}

/// `mode = "0660"`: permission bits in octal.
pub(super) fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    u32::from_str_radix(String::deserialize(d)?.trim(), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            D::Error::custom("is not a mode; expected octal permission bits such as \"0660\"")
        })
}

/// A cgroup path as written, normalised: starts with `/`, no `.` or `..` components, no
/// control characters; repeated and trailing slashes dropped. The error says why not.
pub(super) fn cgroup_path(text: &str) -> std::result::Result<String, String> {
    if !text.starts_with('/') {
        return Err("does not start with \"/\"".to_string());
    }
    if text.chars().any(char::is_control) {
        return Err("contains a control character".to_string());
    }
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(p) = parts.iter().find(|p| **p == "." || **p == "..") {
        return Err(format!("has a \"{p}\" component"));
    }
    Ok(format!("/{}", parts.join("/")))
}
