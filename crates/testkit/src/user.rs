//! A real unprivileged user for the security tests: made with `useradd` for one test, its
//! programs copied where it can run them, removed with `userdel` on drop; and a group made
//! with `groupadd` for one test ([`UnprivilegedGroup`]), which a user can be a member of as
//! an application's user is of `memtide-agents` (`useradd -G`), removed with `groupdel`.
//!
//! The repository may sit under a directory other users cannot enter (`/root` in CI), so
//! [`UnprivilegedUser::command`] copies the program into a fresh 0755 directory of its own
//! first. Every attack that needs more than `curl` runs `memtide-attack` (this crate's
//! `src/bin/attack.rs`) this way.

use crate::{skip_or_fail, TestCgroup};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A user with no privileges and no home, made for one test.
pub struct UnprivilegedUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Every group its programs run with: its own and those it was made a member of.
    pub groups: Vec<u32>,
    bin: PathBuf,
}

/// A group made for one test; removed on drop (drop its members first: declare it before
/// them).
pub struct UnprivilegedGroup {
    pub name: String,
    pub gid: u32,
}

impl UnprivilegedGroup {
    /// Makes the group `mtgrp<pid><tag>`; `None` (after skipping or failing) without root or
    /// `groupadd`.
    pub fn create(test: &str, tag: &str) -> Option<UnprivilegedGroup> {
        if unsafe { libc::geteuid() } != 0 {
            skip_or_fail(test, "making a group needs root");
            return None;
        }
        let name = format!("mtgrp{}{tag}", std::process::id());
        run_or_skip(test, Command::new("groupadd").arg("--system").arg(&name))?;
        let out = Command::new("getent")
            .args(["group", &name])
            .output()
            .expect("run getent");
        let gid = String::from_utf8_lossy(&out.stdout)
            .split(':')
            .nth(2)
            .and_then(|g| g.trim().parse().ok())
            .expect("getent group prints name:x:gid:members");
        Some(UnprivilegedGroup { name, gid })
    }
}

impl Drop for UnprivilegedGroup {
    fn drop(&mut self) {
        let _ = Command::new("groupdel").arg(&self.name).status();
    }
}

impl UnprivilegedUser {
    /// Makes the user `mtsec<pid><tag>` (names stay under 32 characters); `None` (after
    /// skipping or failing) without root or `useradd`.
    pub fn create(test: &str, tag: &str) -> Option<UnprivilegedUser> {
        UnprivilegedUser::make(test, tag, None)
    }

    /// [`UnprivilegedUser::create`], the user also a member of `group` (a supplementary
    /// group, `useradd -G`): its programs run with it.
    pub fn create_in(test: &str, tag: &str, group: &UnprivilegedGroup) -> Option<UnprivilegedUser> {
        UnprivilegedUser::make(test, tag, Some(group))
    }

    fn make(test: &str, tag: &str, group: Option<&UnprivilegedGroup>) -> Option<UnprivilegedUser> {
        if unsafe { libc::geteuid() } != 0 {
            skip_or_fail(test, "making a user needs root");
            return None;
        }
        let name = format!("mtsec{}{tag}", std::process::id());
        let mut useradd = Command::new("useradd");
        useradd.args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
        ]);
        if let Some(group) = group {
            useradd.args(["--groups", &group.name]);
        }
        run_or_skip(test, useradd.arg(&name))?;
        let id = |flag: &str| -> Vec<u32> {
            let o = Command::new("id")
                .args([flag, &name])
                .output()
                .expect("run id");
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(|n| n.parse().expect("id prints numbers"))
                .collect()
        };
        let (uid, gid, groups) = (id("-u")[0], id("-g")[0], id("-G"));
        let bin = std::env::temp_dir().join(format!("memtide-user-{name}"));
        std::fs::create_dir_all(&bin).expect("make the user's program directory");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(UnprivilegedUser {
            name,
            uid,
            gid,
            groups,
            bin,
        })
    }

    /// `program` run as this user, with its groups: a system program (`curl`) as it is, any
    /// other path copied into the user's own 0755 directory first.
    pub fn command(&self, program: &Path) -> Command {
        self.command_joining(program, None)
    }

    /// [`UnprivilegedUser::command`] in `cgroup`: the process joins it as root, just before it
    /// takes the user's credentials (the user cannot write root's `cgroup.procs`), so that
    /// everything it runs is the tenant's from the start.
    pub fn command_in(&self, program: &Path, cgroup: &TestCgroup) -> Command {
        let procs = cgroup.dir().join("cgroup.procs");
        let procs = CString::new(procs.as_os_str().as_bytes()).expect("a path without NUL");
        self.command_joining(program, Some(procs))
    }

    fn command_joining(&self, program: &Path, procs: Option<CString>) -> Command {
        let path = if program.starts_with("/usr") || program.starts_with("/bin") {
            program.to_path_buf()
        } else {
            let copy = self.bin.join(program.file_name().expect("a program file"));
            if !copy.exists() {
                std::fs::copy(program, &copy).expect("copy the program for the user");
                std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            copy
        };
        let mut command = Command::new(path);
        command.current_dir(&self.bin);
        let (uid, gid, groups) = (self.uid, self.gid, self.groups.clone());
        // std's `uid`/`gid` would drop every supplementary group (its `groups` is unstable),
        // so the child takes the user's credentials itself, groups first.
        // SAFETY: between fork and exec the closure makes only async-signal-safe system calls
        // (open, write, close, setgroups, setgid, setuid) on memory allocated before the fork.
        unsafe {
            command.pre_exec(move || {
                if let Some(procs) = &procs {
                    join_cgroup(procs)?;
                }
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    }

    /// `memtide-attack` run as this user.
    pub fn attack(&self) -> Command {
        self.command(&attack_path())
    }
}

impl Drop for UnprivilegedUser {
    fn drop(&mut self) {
        // Anything still running as the user would keep userdel from working.
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(&self.bin);
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs` (`0`: the writer
/// itself, in both cgroup versions). Called between fork and exec: no allocation.
fn join_cgroup(procs: &CString) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path alive for the call; the descriptor is ours and closed.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

/// Runs `command` (`useradd`, `groupadd`); `None` after skipping or failing when it fails.
fn run_or_skip(test: &str, command: &mut Command) -> Option<()> {
    let what = command.get_program().to_string_lossy().into_owned();
    match command.output() {
        Ok(o) if o.status.success() => Some(()),
        Ok(o) => {
            skip_or_fail(
                test,
                &format!("{what}: {}", String::from_utf8_lossy(&o.stderr).trim()),
            );
            None
        }
        Err(e) => {
            skip_or_fail(test, &format!("{what}: {e}"));
            None
        }
    }
}

/// memtide-attack, built beside memtide (same target directory).
pub fn attack_path() -> PathBuf {
    let path = crate::memtide_path().with_file_name("memtide-attack");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo test --workspace builds it)",
        path.display()
    );
    path
}
