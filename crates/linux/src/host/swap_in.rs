//! Swap-in ahead (`Moves::swap_in`): a worker thread reads a waking tenant's swapped memory back with `process_madvise(MADV_WILLNEED)` over each of its processes' anonymous mappings, so the tenant takes minor faults on pages already in memory instead of one major fault per page.
//!
//! The kernel (5.10 and later) walks each range's page tables and starts a swap read for every
//! page table entry that points into swap; on zram the read is the decompression itself. The
//! pages go into the swap cache charged to the cgroup that swapped them out (the tenant's, not
//! memtide's), which the limit the policy just raised has room for. The tenant's tasks then find
//! them there; the time spent reading is the worker's, not theirs, so the tenant's own PSI does
//! not count it. Which ranges: every private writable mapping with no file behind it (heap,
//! stacks, anonymous mmaps: where swapped pages of a process live), read from
//! `/proc/PID/maps`; shared memory and tmpfs are left to the tenant's own faults.
//!
//! Bounds: one worker per tenant at a time (a move while one runs is dropped: the next tick asks
//! again if the tenant still faults); at most [`MAX_PROCESSES`] processes and [`MAX_RANGES`]
//! ranges a process, 1,024 ranges (the kernel's `UIO_MAXIOV`) a call. A process that exits
//! meanwhile is skipped. Cost: about 0.7 ms of a core per MiB read back from zram on this
//! project's test host (100 MiB in 72 ms), none of it in the tenant.
//!
//! Written against `libc` directly: neither `pidfd_open` nor `process_madvise` has a wrapper in
//! `libc` 0.2 or in a crate the workspace already uses, and each is one `syscall`.

use memtide_model::{Bytes, Pages, TenantId, WorldEvent};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Instant;

/// Most processes of one tenant read back by one worker.
pub const MAX_PROCESSES: usize = 4096;

/// Most ranges of one process (the kernel's default `vm.max_map_count` is 65,530).
pub const MAX_RANGES: usize = 65_536;

/// Ranges per `process_madvise` call: the kernel's `UIO_MAXIOV`.
const RANGES_PER_CALL: usize = 1024;

/// One tenant's read-back in flight.
#[derive(Debug)]
pub struct SwapIn {
    asked: Pages,
    started: Instant,
    worker: JoinHandle<Outcome>,
}

/// What a worker did.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    /// Mappings the kernel took the advice for.
    advised: Bytes,
    /// Processes whose mappings were advised.
    processes: u32,
    /// The first failure other than a process gone, where one happened.
    error: Option<String>,
}

impl SwapIn {
    /// Starts reading back `asked` of swapped memory from the processes `pids` (a tenant's
    /// cgroup.procs), their maps read under `proc_root`.
    pub fn start(proc_root: &Path, pids: &[u32], asked: Pages) -> io::Result<SwapIn> {
        let proc_root = proc_root.to_path_buf();
        let pids: Vec<u32> = pids.iter().copied().take(MAX_PROCESSES).collect();
        let worker = std::thread::Builder::new()
            .name("memtide-swap-in".to_string())
            .spawn(move || read_back(&proc_root, &pids))?;
        Ok(SwapIn {
            asked,
            started: Instant::now(),
            worker,
        })
    }

    /// The worker has ended.
    pub fn done(&self) -> bool {
        self.worker.is_finished()
    }

    /// The event that says what the ended worker did for tenant `id`.
    pub fn event(self, id: TenantId) -> WorldEvent {
        let took = self.started.elapsed();
        let outcome = self.worker.join().unwrap_or_else(|_| Outcome {
            error: Some("the swap-in worker panicked".to_string()),
            ..Outcome::default()
        });
        WorldEvent::SwappedIn {
            id,
            asked: self.asked,
            advised: outcome.advised,
            processes: outcome.processes,
            took,
            error: outcome.error,
        }
    }
}

fn read_back(proc_root: &Path, pids: &[u32]) -> Outcome {
    let mut out = Outcome::default();
    let mut ranges = Vec::new();
    for &pid in pids {
        let maps = proc_root.join(format!("proc/{pid}/maps"));
        match advise(pid, &maps, &mut ranges) {
            Ok(Some(bytes)) => {
                out.advised += bytes;
                out.processes += 1;
            }
            Ok(None) => {}
            Err(e) => {
                if out.error.is_none() {
                    out.error = Some(e);
                }
            }
        }
    }
    out
}

/// Advises `pid`'s anonymous private writable mappings WILLNEED: the bytes advised, or `None`
/// when the process is gone.
fn advise(pid: u32, maps: &Path, ranges: &mut Vec<libc::iovec>) -> Result<Option<Bytes>, String> {
    // The pidfd first: the maps read after it are this process's, not a successor's.
    let Some(pidfd) = pidfd_open(pid).map_err(|e| format!("pidfd_open({pid}): {e}"))? else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(maps) {
        Ok(t) => t,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", maps.display())),
    };
    ranges.clear();
    ranges.extend(
        text.lines()
            .filter_map(anonymous_range)
            .take(MAX_RANGES)
            .map(|(start, end)| libc::iovec {
                iov_base: start as *mut libc::c_void,
                iov_len: (end - start) as usize,
            }),
    );
    let mut advised = Bytes::ZERO;
    for batch in ranges.chunks(RANGES_PER_CALL) {
        // SAFETY: `batch` is a live slice of iovecs; the kernel only reads it, and the
        // addresses in it are the target process's, never dereferenced here.
        let done = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                batch.as_ptr(),
                batch.len(),
                libc::MADV_WILLNEED,
                0u32,
            )
        };
        if done < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Gone meanwhile.
                Some(libc::ESRCH) => return Ok(None),
                // A range unmapped or changed since the maps were read: the others still count.
                Some(libc::ENOMEM) | Some(libc::EINVAL) => continue,
                _ => return Err(format!("process_madvise(WILLNEED) of pid {pid}: {e}")),
            }
        }
        advised += Bytes(done as u64);
    }
    Ok(Some(advised))
}

/// A pidfd for `pid`, or `None` when it has exited.
fn pidfd_open(pid: u32) -> io::Result<Option<OwnedFd>> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ESRCH) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel just returned this descriptor to us, and nothing else owns it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
}

fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
        || e.kind() == io::ErrorKind::NotFound
}

/// The address range of a `/proc/PID/maps` line when it is a private writable mapping with no
/// file behind it (inode 0; no name, or `[heap]` or `[stack]`): where a process's swapped pages
/// are. `None` for anything else, a malformed line included.
fn anonymous_range(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_ascii_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    let (_offset, _device, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let name = fields.next();
    let private_writable = perms.len() == 4 && &perms[1..2] == "w" && &perms[3..4] == "p";
    let anonymous = inode == "0" && matches!(name, None | Some("[heap]") | Some("[stack]"));
    if !(private_writable && anonymous) {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    (end > start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_writable_anonymous_mappings_are_read_back() {
        let maps = "\
55d4c8a00000-55d4c8a21000 rw-p 00000000 00:00 0                          [heap]
7f1000000000-7f1008000000 rw-p 00000000 00:00 0 \n\
7f2000000000-7f2000001000 r--p 00000000 00:00 0 \n\
7f3000000000-7f3000100000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)
7f4000000000-7f4000200000 rw-p 00001000 08:01 5678                       /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd10000000-7ffd10002000 r--p 00000000 00:00 0                          [vvar]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
garbage line
";
        let ranges: Vec<_> = maps.lines().filter_map(anonymous_range).collect();
        assert_eq!(
            ranges,
            vec![
                (0x55d4c8a00000, 0x55d4c8a21000),
                (0x7f1000000000, 0x7f1008000000),
                (0x7ffd00000000, 0x7ffd00021000),
            ]
        );
    }

    #[test]
    fn a_process_that_has_exited_is_skipped_not_an_error() {
        let root = Path::new("/");
        // No process has pid 0x3fffffff (above the kernel's pid_max limit).
        let out = read_back(root, &[0x3fff_ffff]);
        assert_eq!(out, Outcome::default());
    }
}
