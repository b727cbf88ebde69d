//! Root's files in places others may reach: the checks that a directory or file memtide trusts
//! (its state directory, its configuration) can only have been written by root, and the writes
//! that cannot be turned into root writing somewhere else.
//!
//! memtide runs as root and acts on what its state directory holds (cgroups to restore,
//! processes to stop) and on what its configuration says (commands to launch). Whoever can
//! write either could make root act for them, so the daemon refuses to start when one is owned
//! by anyone but root (or the user memtide runs as) or is writable by group or others, in the
//! manner of OpenSSH's `StrictModes`: [`check_trusted`] walks every directory from `/` down to
//! the path itself, after resolving links, and allows a world-writable ancestor only when its
//! sticky bit keeps others from replacing root's entries (`/tmp`).
//!
//! Even in a trusted directory root never writes through a name it did not just create:
//! [`write_fresh`] creates its temporary with `O_CREAT | O_EXCL` (which does not follow a link;
//! one left behind or planted is unlinked, never its target) and mode 0600, syncs it and
//! renames it over the file, so a link at the file itself is replaced, not followed.
//! [`open_append`] opens a log with `O_NOFOLLOW` and refuses anything but a regular file with
//! one link, so neither a symbolic nor a hard link planted there reaches another file.
//! [`socket::BoundSocket`] binds a Unix socket root serves (the balloon socket, the API's) in a
//! trusted directory, with its group and mode set before it appears, never over a live socket
//! or another file, and removes it at the end only if it is still the one bound.
//!
//! Written here rather than taken from a crate: the checks are a few `stat` calls whose errors
//! must name memtide's own paths and the chmod that fixes them.

pub mod socket;

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why memtide will not trust or write a file; each message names the file, what is wrong and
/// the fix.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{what} {path}: owned by uid {owner}, not by root{runner}; memtide acts on it as root, so \
         only root may own it (chown root {path})"
    )]
    Owner {
        what: &'static str,
        path: PathBuf,
        owner: u32,
        runner: String,
    },
    #[error(
        "{what} {path}: writable by {who} (mode {mode:04o}); memtide acts on it as root, so only \
         root may write it (chmod go-w {path})"
    )]
    Writable {
        what: &'static str,
        path: PathBuf,
        who: &'static str,
        mode: u32,
    },
    #[error("{what} {path}: not a regular file with one link; refusing to write through it")]
    NotPlain { what: &'static str, path: PathBuf },
}

/// Checks that `path` (a directory or file memtide trusts, named `what` in errors) and every
/// directory above it are owned by root or by the user memtide runs as, and writable by no one
/// else; an ancestor writable by others passes only with its sticky bit set.
pub fn check_trusted(path: &Path, what: &'static str) -> Result<(), FilesError> {
    let io = |path: &Path, source| FilesError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    let real = path.canonicalize().map_err(|e| io(path, e))?;
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut at = Some(real.as_path());
    let mut last = true;
    while let Some(dir) = at {
        let meta = std::fs::metadata(dir).map_err(|e| io(dir, e))?;
        if meta.uid() != 0 && meta.uid() != me {
            return Err(FilesError::Owner {
                what,
                path: dir.to_path_buf(),
                owner: meta.uid(),
                runner: if me == 0 {
                    String::new()
                } else {
                    format!(" or uid {me}, which memtide runs as")
                },
            });
        }
        let mode = meta.permissions().mode() & 0o7777;
        let sticky = meta.is_dir() && mode & 0o1000 != 0;
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (_, true) => Some("others"),
            (true, false) => Some("its group"),
            (false, false) => None,
        };
        if let Some(who) = who.filter(|_| last || !sticky) {
            return Err(FilesError::Writable {
                what,
                path: dir.to_path_buf(),
                who,
                mode,
            });
        }
        last = false;
        at = dir.parent();
    }
    Ok(())
}

/// Creates `dir` (and its parents, mode 0755 before the umask) when missing, then checks it
/// with [`check_trusted`].
pub fn trusted_dir(dir: &Path, what: &'static str) -> Result<(), FilesError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| FilesError::Io {
            what,
            path: dir.to_path_buf(),
            source,
        })?;
    check_trusted(dir, what)
}

/// Writes `bytes` to `path` whole or not at all: a fresh 0600 temporary beside it (`.tmp`
/// appended), synced, then renamed over `path`. A file or link already at the temporary's
/// name is unlinked, never followed.
pub fn write_fresh(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
    };
    let mut file = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp)?;
            create()?
        }
        other => other?,
    };
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Reads the small file at `path` (one root wrote with [`write_fresh`]) without following a
/// link: `None` when there is none; a symbolic or hard link, or anything but a regular file,
/// is refused (`what` names it in errors), so a planted link cannot make root read, and act
/// on, another file.
pub fn read_plain(path: &Path, what: &'static str) -> Result<Option<String>, FilesError> {
    use std::io::Read;
    let io = |source| FilesError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW on a symbolic link.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(FilesError::NotPlain {
                what,
                path: path.to_path_buf(),
            })
        }
        other => other.map_err(io)?,
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(FilesError::NotPlain {
            what,
            path: path.to_path_buf(),
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io)?;
    Ok(Some(text))
}

/// Opens the log at `path` for appending, created 0640 when missing, without following a
/// link; refuses anything but a regular file with one link (`what` names it in errors).
pub fn open_append(path: &Path, what: &'static str) -> Result<std::fs::File, FilesError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| FilesError::Io {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| FilesError::Io {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(FilesError::NotPlain {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_directory_and_file_are_trusted() {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let file = dir.path().join("memtide.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o644);
        check_trusted(dir.path(), "state directory").unwrap();
        check_trusted(&file, "config file").unwrap();
    }

    #[test]
    fn a_directory_others_can_write_is_refused_naming_it_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o777);
        let msg = check_trusted(dir.path(), "state directory")
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("state directory "), "{msg}");
        assert!(msg.contains("writable by others (mode 0777)"), "{msg}");
        assert!(msg.contains("chmod go-w"), "{msg}");
        // Sticky does not excuse the directory itself.
        chmod(dir.path(), 0o1777);
        assert!(check_trusted(dir.path(), "state directory").is_err());
    }

    #[test]
    fn a_group_writable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memtide.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o664);
        let msg = check_trusted(&file, "config file").unwrap_err().to_string();
        assert!(msg.contains("writable by its group (mode 0664)"), "{msg}");
    }

    #[test]
    fn a_file_under_a_writable_ancestor_is_refused_unless_the_ancestor_is_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        chmod(&inner, 0o700);
        chmod(dir.path(), 0o777);
        let msg = check_trusted(&inner, "state directory")
            .unwrap_err()
            .to_string();
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
        chmod(dir.path(), 0o1777);
        check_trusted(&inner, "state directory").unwrap();
    }

    #[test]
    fn a_link_is_judged_by_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let link = dir.path().join("state");
        symlink(&open, &link).unwrap();
        let msg = check_trusted(&link, "state directory")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("/open"), "{msg}");
    }

    #[test]
    fn a_file_owned_by_another_user_is_refused() {
        if unsafe { libc::geteuid() } != 0 {
            return; // only root can give a file away; the check itself is the same
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memtide.toml");
        std::fs::write(&file, "").unwrap();
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        let msg = check_trusted(&file, "config file").unwrap_err().to_string();
        assert!(msg.contains("owned by uid 65534, not by root"), "{msg}");
    }

    #[test]
    fn a_link_planted_at_the_temporary_or_the_file_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "root's own\n").unwrap();
        let path = dir.path().join("ksm.json");
        symlink(&victim, dir.path().join("ksm.json.tmp")).unwrap();
        write_fresh(&path, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
        std::fs::remove_file(&path).unwrap();
        symlink(&victim, &path).unwrap();
        write_fresh(&path, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
    }

    #[test]
    fn a_plain_file_is_read_a_missing_one_is_none_and_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app-db.pool");
        assert!(read_plain(&file, "pool record").unwrap().is_none());
        write_fresh(&file, b"536870912\n").unwrap();
        assert_eq!(
            read_plain(&file, "pool record").unwrap().as_deref(),
            Some("536870912\n")
        );
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "1").unwrap();
        let soft = dir.path().join("soft.pool");
        symlink(&target, &soft).unwrap();
        let hard = dir.path().join("hard.pool");
        std::fs::hard_link(&target, &hard).unwrap();
        for link in [soft, hard] {
            let e = read_plain(&link, "pool record").unwrap_err();
            assert!(
                matches!(e, FilesError::NotPlain { .. }),
                "{}: {e}",
                link.display()
            );
        }
    }

    #[test]
    fn a_log_reached_through_a_symbolic_or_hard_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "root's own\n").unwrap();
        let soft = dir.path().join("soft.log");
        symlink(&victim, &soft).unwrap();
        assert!(open_append(&soft, "tenant log").is_err());
        let hard = dir.path().join("hard.log");
        std::fs::hard_link(&victim, &hard).unwrap();
        let msg = open_append(&hard, "tenant log").unwrap_err().to_string();
        assert!(msg.contains("not a regular file with one link"), "{msg}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's own\n");
        let mut log = open_append(&dir.path().join("db.log"), "tenant log").unwrap();
        log.write_all(b"started\n").unwrap();
    }
}
