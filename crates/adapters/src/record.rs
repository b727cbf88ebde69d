//! The pool's size as the adapter first found it, given back when the adapter stops: kept in a record file (`--restore-file`, the daemon's `<state dir>/app-<tenant>.pool`) so that it outlives a killed adapter or daemon, whose successor would otherwise find the pool memtide shrank and take that for the server's own.
//!
//! At start the record is read when it exists, else the size the server reports is written
//! to it (a fresh 0600 file renamed into place, never through a link: `memtide-files`). On a
//! stop (SIGTERM, SIGINT) the adapter gives the pool back to that size and removes the record,
//! whether or not the server took it: a server that is gone restarts at its own configured
//! size, and the failure is on stderr with the size to set by hand. An adapter killed (with
//! its daemon, by the parent-death signal) leaves the record for the next one. Without a file
//! the size found at start is kept in memory only.

use std::path::PathBuf;

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Read(#[from] memtide_files::FilesError),
    #[error("pool record {path}: {text:?} is not a size in bytes (remove the file to record the pool as it is now)")]
    Garbled { path: PathBuf, text: String },
    #[error("pool record {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where the pool's original size is kept, if anywhere.
pub struct Record {
    path: Option<PathBuf>,
}

impl Record {
    pub fn new(path: Option<PathBuf>) -> Record {
        Record { path }
    }

    /// The size to give back at exit: the one recorded, else `found` (recorded now).
    pub fn original(&self, found: u64) -> Result<u64, RecordError> {
        let Some(path) = &self.path else {
            return Ok(found);
        };
        if let Some(text) = memtide_files::read_plain(path, "pool record")? {
            return text.trim().parse().map_err(|_| RecordError::Garbled {
                path: path.clone(),
                text: text.chars().take(64).collect(),
            });
        }
        memtide_files::write_fresh(path, format!("{found}\n").as_bytes()).map_err(|source| {
            RecordError::Write {
                path: path.clone(),
                source,
            }
        })?;
        Ok(found)
    }

    /// Forgets the record: the adapter stopped and gave the pool back (or tried to).
    pub fn remove(&self) {
        if let Some(path) = &self.path {
            if let Err(e) = std::fs::remove_file(path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("memtide-adapter: pool record {}: {e}", path.display());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_size_found_is_recorded_and_a_later_start_gets_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app-db.pool");
        let first = Record::new(Some(path.clone()));
        assert_eq!(first.original(512 << 20).unwrap(), 512 << 20);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "536870912\n");
        // A killed adapter's successor finds the pool shrunk, and the record.
        let next = Record::new(Some(path.clone()));
        assert_eq!(next.original(128 << 20).unwrap(), 512 << 20);
        next.remove();
        assert!(!path.exists(), "removed at a clean stop");
        next.remove();
    }

    #[test]
    fn without_a_file_the_size_found_is_the_original() {
        assert_eq!(Record::new(None).original(42).unwrap(), 42);
    }

    #[test]
    fn a_garbled_record_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app-db.pool");
        std::fs::write(&path, "lots\n").unwrap();
        let e = Record::new(Some(path.clone())).original(1).unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("app-db.pool") && said.contains("\"lots\\n\""),
            "{said}"
        );
    }

    #[test]
    fn a_record_reached_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "1\n").unwrap();
        let path = dir.path().join("app-db.pool");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(
            Record::new(Some(path)).original(5),
            Err(RecordError::Read(_))
        ));
    }
}
