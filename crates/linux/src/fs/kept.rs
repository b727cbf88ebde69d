//! Kernel files read every tick, kept open: each reading is one `pread` from offset 0 (cgroupfs and procfs regenerate a file's text for a read at 0) instead of a path walk, an open, a `statx`, reads and a close — about 1 µs instead of 10 for a one-number cgroup file.
//!
//! A kept descriptor of a cgroup that was removed reads `ENODEV`; any failed reading drops the
//! descriptor and reads the path once, so a cgroup removed and made again under the same path
//! is read afresh, and a removed one is `FsError::Vanished` as with the path readers. A missing
//! file is `None` while its cgroup exists, as with the path readers.
//!
//! Descriptors are kept only within a budget, half the process's soft `RLIMIT_NOFILE` (which
//! [`raise_fd_limit`] lifts to the hard limit), so kept files never starve the rest of the
//! daemon (the API, the state file, /proc); past the budget a file is read by path each time.
//!
//! Kept files are files the kernel makes in one go (every cgroup memory file, PSI,
//! /proc/meminfo), so one `pread` that comes back short of the buffer has the whole text. Not
//! for v1 `cgroup.procs` or `tasks`: a list, and the kernel builds it when the file is opened
//! and may serve it again to later reads on the same descriptor.
//!
//! Those are opened afresh for each reading, relative to a descriptor kept on their directory
//! ([`KeptDir`]): one path component looked up instead of the whole path.
//!
//! Hand-rolled (a few lines on `std::os::unix::fs::FileExt` and `openat`): no crate offers kept
//! kernel files with this reopen-on-vanish rule and a shared descriptor budget.

use super::error::FsError;
use super::read::{as_text, is_gone, parent_gone, read_all_at};
use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Lifts the soft limit on open files to the hard limit (systemd starts services with 1024
/// soft, 524288 hard), so that kept files fit beside everything else. Returns the soft limit in
/// force afterwards; `None` when it cannot be read.
pub fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct that we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct that we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    Some(lim.rlim_cur)
}

/// Descriptors kept now, process-wide.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// How many descriptors may be kept: half the soft limit in force now (read when a descriptor
/// is to be kept, which happens once per file, so a limit raised later counts).
pub fn budget() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct that we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    usize::try_from(lim.rlim_cur / 2).unwrap_or(usize::MAX)
}

/// One kept descriptor's place in the budget, given back when dropped. Whatever keeps a
/// descriptor open for long takes one (kept files, OOM eventfds, the balloon socket's
/// connections: `host::agents::AgentDescriptors`).
#[derive(Debug)]
pub struct Slot(());

impl Slot {
    /// A place in the budget, if one is left.
    pub fn take() -> Option<Slot> {
        let budget = budget();
        KEPT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < budget).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        KEPT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Descriptors kept now, process-wide.
pub fn kept_now() -> usize {
    KEPT.load(Ordering::Relaxed)
}

/// A kernel file read again and again, kept open while the budget allows.
#[derive(Debug)]
pub struct KeptFile {
    path: PathBuf,
    open: Option<(File, Slot)>,
}

impl KeptFile {
    /// Opens nothing yet: the first reading does.
    pub fn new(path: PathBuf) -> KeptFile {
        KeptFile { path, open: None }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True while a descriptor is kept.
    pub fn is_kept(&self) -> bool {
        self.open.is_some()
    }

    /// Closes the kept descriptor (the next reading opens the path again).
    pub fn close(&mut self) {
        self.open = None;
    }

    /// Reads the whole file into `buf` (replacing what it held): `Ok(true)`. A file missing in
    /// a cgroup that exists is `Ok(false)` (a kernel feature that is absent); the cgroup gone is
    /// `FsError::Vanished`; anything else is `FsError::Read`.
    pub fn read_optional(&mut self, buf: &mut Vec<u8>) -> Result<bool, FsError> {
        if let Some((file, _)) = &self.open {
            if read_all_at(file, buf, true).is_ok() {
                return Ok(true);
            }
            // Removed (ENODEV), perhaps made again under this path: read by path.
            self.open = None;
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if is_gone(&e) => {
                return if parent_gone(&self.path) {
                    Err(self.vanished())
                } else {
                    Ok(false)
                };
            }
            Err(source) => return Err(self.read_error(source)),
        };
        if let Err(e) = read_all_at(&file, buf, true) {
            return Err(if is_gone(&e) && parent_gone(&self.path) {
                self.vanished()
            } else {
                self.read_error(e)
            });
        }
        if let Some(slot) = Slot::take() {
            self.open = Some((file, slot));
        }
        Ok(true)
    }

    /// Reads a file every cgroup of its version has, as text: a missing one is `FsError::Read`.
    pub fn read<'b>(&mut self, buf: &'b mut Vec<u8>) -> Result<&'b str, FsError> {
        if !self.read_optional(buf)? {
            return Err(self.read_error(io::Error::from(io::ErrorKind::NotFound)));
        }
        as_text(&self.path, buf)
    }

    /// [`KeptFile::read_optional`] as text.
    pub fn read_optional_str<'b>(
        &mut self,
        buf: &'b mut Vec<u8>,
    ) -> Result<Option<&'b str>, FsError> {
        if !self.read_optional(buf)? {
            return Ok(None);
        }
        as_text(&self.path, buf).map(Some)
    }

    fn vanished(&self) -> FsError {
        FsError::Vanished {
            path: self.path.clone(),
        }
    }

    fn read_error(&self, source: io::Error) -> FsError {
        FsError::Read {
            path: self.path.clone(),
            source,
        }
    }
}

/// A directory whose files are opened afresh for each reading (lists such as
/// `cgroup.procs`), relative to an `O_PATH` descriptor kept on it while the budget allows. A
/// kept descriptor of a removed directory finds nothing (`ENOENT`); the directory is then
/// opened by path again, so one made again under the same path is read afresh, and its
/// [`KeptDir::identity`] (the inode, taken at each open by path) tells it from the first.
#[derive(Debug)]
pub struct KeptDir {
    path: PathBuf,
    open: Option<(File, Slot)>,
    /// The inode of the directory last opened by path.
    ino: Option<u64>,
}

/// How much of a file [`KeptDir::read`] reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Extent {
    /// All of it.
    Whole,
    /// One `read` (at most 4096 bytes): enough to tell an empty list from one that is not.
    FirstRead,
}

impl KeptDir {
    /// Opens nothing yet: the first reading does.
    pub fn new(path: PathBuf) -> KeptDir {
        KeptDir {
            path,
            open: None,
            ino: None,
        }
    }

    /// The inode of the directory the last reading found (`None` before one, or where it could
    /// not be taken): a cgroup removed and made again under the same path has another.
    pub fn identity(&self) -> Option<u64> {
        self.ino
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True while a descriptor is kept.
    pub fn is_kept(&self) -> bool {
        self.open.is_some()
    }

    /// Reads the file `name` in the directory into `buf` (replacing what it held): `Ok(true)`.
    /// A missing file in a directory that exists is `Ok(false)`; the directory gone is
    /// `FsError::Vanished`; anything else is `FsError::Read`.
    pub fn read(
        &mut self,
        name: &CStr,
        buf: &mut Vec<u8>,
        extent: Extent,
    ) -> Result<bool, FsError> {
        if let Some((dir, _)) = &self.open {
            match open_at(dir, name) {
                Ok(file) => return self.read_file(name, &file, buf, extent).map(|()| true),
                // Removed, perhaps made again under this path: open the path again.
                Err(e) if is_gone(&e) => self.open = None,
                Err(e) => return Err(self.read_error(name, e)),
            }
        }
        let dir = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&self.path)
        {
            Ok(dir) => dir,
            Err(e) if is_gone(&e) => {
                return Err(FsError::Vanished {
                    path: self.file_path(name),
                })
            }
            Err(e) => return Err(self.read_error(name, e)),
        };
        self.ino = {
            use std::os::unix::fs::MetadataExt;
            dir.metadata().ok().map(|m| m.ino())
        };
        let file = match open_at(&dir, name) {
            Ok(file) => file,
            Err(e) if is_gone(&e) => {
                return if self.path.is_dir() {
                    Ok(false)
                } else {
                    Err(FsError::Vanished {
                        path: self.file_path(name),
                    })
                }
            }
            Err(e) => return Err(self.read_error(name, e)),
        };
        self.read_file(name, &file, buf, extent)?;
        if let Some(slot) = Slot::take() {
            self.open = Some((dir, slot));
        }
        Ok(true)
    }

    fn read_file(
        &self,
        name: &CStr,
        file: &File,
        buf: &mut Vec<u8>,
        extent: Extent,
    ) -> Result<(), FsError> {
        let result = match extent {
            Extent::Whole => read_all_at(file, buf, false),
            Extent::FirstRead => read_first(file, buf),
        };
        result.map_err(|e| {
            if is_gone(&e) && !self.path.is_dir() {
                FsError::Vanished {
                    path: self.file_path(name),
                }
            } else {
                self.read_error(name, e)
            }
        })
    }

    fn file_path(&self, name: &CStr) -> PathBuf {
        self.path.join(name.to_string_lossy().as_ref())
    }

    fn read_error(&self, name: &CStr, source: io::Error) -> FsError {
        FsError::Read {
            path: self.file_path(name),
            source,
        }
    }
}

/// Opens `name` in the directory `dir` for reading.
fn open_at(dir: &File, name: &CStr) -> io::Result<File> {
    loop {
        // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string; the new
        // descriptor is owned by the File below.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd >= 0 {
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One read from offset 0 into `buf` (replacing what it held).
fn read_first(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    buf.clear();
    buf.resize(4096, 0);
    loop {
        match file.read_at(buf, 0) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_reads_what_the_file_holds_now() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.usage_in_bytes");
        std::fs::write(&path, "4096\n").unwrap();
        let mut f = KeptFile::new(path.clone());
        let mut buf = Vec::new();
        assert_eq!(f.read(&mut buf).unwrap(), "4096\n");
        assert!(f.is_kept());
        // Rewritten in place, as the kernel regenerates it: the kept descriptor sees it.
        std::fs::write(&path, "8192\n").unwrap();
        assert_eq!(f.read(&mut buf).unwrap(), "8192\n");
        let long = "x".repeat(10_000);
        std::fs::write(&path, &long).unwrap();
        assert_eq!(f.read(&mut buf).unwrap(), long);
        std::fs::write(&path, "").unwrap();
        assert_eq!(f.read(&mut buf).unwrap(), "");
        f.close();
        assert!(!f.is_kept());
        assert_eq!(f.path(), path);
    }

    #[test]
    fn a_missing_file_is_none_while_the_cgroup_exists_and_a_gone_cgroup_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let mut f = KeptFile::new(tmp.path().join("memory.swap.current"));
        let mut buf = Vec::new();
        assert_eq!(f.read_optional_str(&mut buf).unwrap(), None);
        assert!(!f.is_kept());
        let err = f.read(&mut buf).unwrap_err();
        assert!(matches!(err, FsError::Read { .. }), "{err}");
        assert!(err.to_string().contains("memory.swap.current"));

        let mut gone = KeptFile::new(tmp.path().join("gone/memory.current"));
        assert!(gone.read_optional(&mut buf).unwrap_err().is_vanished());
    }

    #[test]
    fn a_descriptor_that_fails_is_dropped_and_the_path_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cg");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("memory.stat");
        std::fs::write(&path, "rss 1\n").unwrap();
        let mut f = KeptFile::new(path.clone());
        let mut buf = Vec::new();
        assert_eq!(f.read(&mut buf).unwrap(), "rss 1\n");
        // A descriptor that can no longer be read (as a removed cgroup's reads ENODEV): a
        // write-only one in its place.
        let write_only = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.open = Some((write_only, Slot::take().unwrap()));
        std::fs::write(&path, "rss 2\n").unwrap();
        assert_eq!(f.read(&mut buf).unwrap(), "rss 2\n", "read again by path");
        assert!(f.is_kept());
        // The cgroup removed: vanished, and nothing kept.
        let write_only = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.open = Some((write_only, Slot::take().unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(f.read(&mut buf).unwrap_err().is_vanished());
        assert!(!f.is_kept());
    }

    #[test]
    fn kept_descriptors_count_against_the_budget_and_are_given_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        std::fs::write(&path, "1").unwrap();
        let mut buf = Vec::new();
        let mut files: Vec<KeptFile> = (0..3).map(|_| KeptFile::new(path.clone())).collect();
        for f in &mut files {
            f.read(&mut buf).unwrap();
            assert!(f.is_kept());
        }
        // Other tests keep files at the same time; only bounds can be asserted.
        assert!(kept_now() >= 3);
        assert!(kept_now() <= budget());
        assert!(raise_fd_limit().is_some_and(|soft| soft > 0));
    }

    #[test]
    fn a_kept_dir_reads_its_files_afresh_and_follows_a_directory_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cg");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "12\n345\n").unwrap();
        let mut d = KeptDir::new(dir.clone());
        let mut buf = Vec::new();
        let procs = c"cgroup.procs";
        assert!(d.read(procs, &mut buf, Extent::Whole).unwrap());
        assert_eq!(buf, b"12\n345\n");
        assert!(d.is_kept());
        assert!(
            !d.read(c"tasks", &mut buf, Extent::Whole).unwrap(),
            "missing file"
        );

        // Removed and made again: the kept descriptor finds nothing, the path is opened again.
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "7\n").unwrap();
        assert!(d.read(procs, &mut buf, Extent::FirstRead).unwrap());
        assert_eq!(buf, b"7\n");

        std::fs::remove_dir_all(&dir).unwrap();
        let err = d.read(procs, &mut buf, Extent::Whole).unwrap_err();
        assert!(err.is_vanished(), "{err}");
        assert!(err.to_string().contains("cg/cgroup.procs"), "{err}");
        assert!(!d.is_kept());
        assert_eq!(d.path(), dir);
    }
}
