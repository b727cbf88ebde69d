//! Launching a tenant's command inside a new cgroup: the child joins the cgroup (and, on cgroup v1 with disk I/O managed, its blkio cgroup) before it executes, so none of its memory or I/O is charged elsewhere, and (an adapter) may be tied to memtide's life; stopping it again.

use super::error::LinuxError;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a started process asks of the kernel before it executes, besides its cgroups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asks {
    /// Merge all its memory's identical pages (`prctl(PR_SET_MEMORY_MERGE)`, Linux 6.4+: kept
    /// across fork and, since 6.7, exec).
    pub merge: bool,
    /// Be killed (SIGKILL) when memtide dies (`prctl(PR_SET_PDEATHSIG)`), and not start when
    /// memtide died before it could ask. The kernel sends it when the *thread* that started the
    /// process exits: start it from one that lives as long as memtide (the daemon's main
    /// thread, which runs its loop).
    pub dies_with_memtide: bool,
}

/// Starts `argv` with its process placed in the cgroup at `dir` (a directory that already
/// exists) and in the cgroups at `also` of other v1 hierarchies (the tenant's blkio
/// cgroup), asking the kernel what `asks` says. Output goes to `log` when given (appended),
/// else to /dev/null.
pub fn spawn_in_cgroup(
    tenant: &str,
    argv: &[String],
    dir: &Path,
    also: &[PathBuf],
    log: Option<&Path>,
    asks: Asks,
) -> Result<Child, LinuxError> {
    let launch_error = |error| LinuxError::Launch {
        tenant: tenant.to_string(),
        program: argv.first().cloned().unwrap_or_default(),
        error,
    };
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| launch_error(std::io::Error::other("empty command")))?;
    let procs_of = |dir: &Path| {
        CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|e| launch_error(std::io::Error::other(e)))
    };
    let procs = procs_of(dir)?;
    let also = also
        .iter()
        .map(|d| procs_of(d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    match log {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(launch_error)?;
            }
            let file = memtide_files::open_append(path, "tenant log")
                .map_err(|e| launch_error(std::io::Error::other(e)))?;
            command
                .stdout(file.try_clone().map_err(launch_error)?)
                .stderr(file);
        }
        None => {
            command.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    // SAFETY: getpid(2) has no preconditions and cannot fail.
    let memtide = unsafe { libc::getpid() };
    // SAFETY: between fork and exec the closure only makes raw system calls (open, write,
    // close, prctl, getppid) on memory prepared before the fork; it allocates nothing and
    // takes no locks.
    unsafe {
        command.pre_exec(move || {
            for procs in std::iter::once(&procs).chain(&also) {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0" moves the writing process itself.
                let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if written < 0 {
                    return Err(err);
                }
            }
            if asks.merge && libc::prctl(super::ksm::PR_SET_MEMORY_MERGE, 1, 0, 0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if asks.dies_with_memtide {
                let kill = libc::SIGKILL as libc::c_ulong;
                if libc::prctl(libc::PR_SET_PDEATHSIG, kill, 0, 0, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // memtide died before the prctl: nothing would ever send the signal.
                if libc::getppid() != memtide {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            Ok(())
        });
    }
    command.spawn().map_err(launch_error)
}

/// Asks every process in `pids` to stop (SIGTERM), waits up to `grace` for `alive` to report
/// none left, then kills what remains (SIGKILL). Returns how many had to be killed.
pub fn stop_processes(
    pids: impl Fn() -> Vec<u32>,
    grace: Duration,
    mut reap: impl FnMut(),
) -> usize {
    for pid in pids() {
        signal(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        reap();
        if pids().is_empty() {
            return 0;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = pids();
    for &pid in &left {
        signal(pid, libc::SIGKILL);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !pids().is_empty() {
        reap();
        std::thread::sleep(Duration::from_millis(20));
    }
    left.len()
}

fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) has no memory-safety preconditions; a stale pid yields ESRCH.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_into_a_missing_cgroup_fails_naming_the_tenant_and_program() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = spawn_in_cgroup(
            "db",
            &["/bin/true".to_string()],
            &missing,
            &[],
            None,
            Asks::default(),
        )
        .expect_err("no cgroup.procs to join");
        let msg = err.to_string();
        assert!(msg.contains("\"db\"") && msg.contains("/bin/true"), "{msg}");
    }

    #[test]
    fn the_child_writes_itself_into_cgroup_procs_before_exec() {
        // A plain directory stands in for the cgroup: the child's write lands in a file.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let mut child = spawn_in_cgroup(
            "t",
            &["/bin/true".to_string()],
            dir.path(),
            &[],
            None,
            Asks::default(),
        )
        .unwrap();
        assert!(child.wait().unwrap().success());
        let written = std::fs::read_to_string(dir.path().join("cgroup.procs")).unwrap();
        assert_eq!(written, "0\n");
    }

    #[test]
    fn the_child_joins_a_second_hierarchy_s_cgroup_too() {
        let memory = tempfile::tempdir().unwrap();
        let blkio = tempfile::tempdir().unwrap();
        for d in [memory.path(), blkio.path()] {
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
        }
        let argv = ["/bin/true".to_string()];
        let mut child = spawn_in_cgroup(
            "t",
            &argv,
            memory.path(),
            &[blkio.path().to_path_buf()],
            None,
            Asks::default(),
        )
        .unwrap();
        assert!(child.wait().unwrap().success());
        for d in [memory.path(), blkio.path()] {
            let written = std::fs::read_to_string(d.join("cgroup.procs")).unwrap();
            assert_eq!(written, "0\n", "{}", d.display());
        }
        let missing = blkio.path().join("gone");
        assert!(
            spawn_in_cgroup("t", &argv, memory.path(), &[missing], None, Asks::default()).is_err()
        );
    }

    #[test]
    fn a_child_that_dies_with_memtide_is_killed_when_the_thread_that_started_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let cgroup = dir.path().to_path_buf();
        let asks = Asks {
            dies_with_memtide: true,
            ..Asks::default()
        };
        let argv = ["sleep".to_string(), "30".to_string()];
        let started = std::time::Instant::now();
        let mut child = std::thread::spawn(move || {
            spawn_in_cgroup("t", &argv, &cgroup, &[], None, asks).unwrap()
        })
        .join()
        .unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn an_empty_command_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(spawn_in_cgroup("t", &[], dir.path(), &[], None, Asks::default()).is_err());
    }

    #[test]
    fn stop_processes_terminates_a_running_child() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let exited = std::cell::Cell::new(false);
        let killed = stop_processes(
            || if exited.get() { vec![] } else { vec![pid] },
            Duration::from_secs(5),
            || {
                if let Ok(Some(_)) = child.try_wait() {
                    exited.set(true);
                }
            },
        );
        assert_eq!(killed, 0, "sleep stops on SIGTERM");
        assert!(exited.get());
    }
}
