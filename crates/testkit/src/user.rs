//! A real unprivileged user for the security tests: made with `useradd` for one test, its
//! programs copied where it can run them, removed with `userdel` on drop.
//!
//! The repository may sit under a directory other users cannot enter (`/root` in CI), so
//! [`UnprivilegedUser::command`] copies the program into a fresh 0755 directory of its own
//! first. Every attack that needs more than `curl` runs `memtide-attack` (this crate's
//! `src/bin/attack.rs`) this way.

use crate::skip_or_fail;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A user with no privileges and no home, made for one test.
pub struct UnprivilegedUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    bin: PathBuf,
}

impl UnprivilegedUser {
    /// Makes the user `mtsec<pid><tag>` (names stay under 32 characters); `None` (after
    /// skipping or failing) without root or `useradd`.
    pub fn create(test: &str, tag: &str) -> Option<UnprivilegedUser> {
        if unsafe { libc::geteuid() } != 0 {
            skip_or_fail(test, "making a user needs root");
            return None;
        }
        let name = format!("mtsec{}{tag}", std::process::id());
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                skip_or_fail(
                    test,
                    &format!(
                        "useradd {name}: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                );
                return None;
            }
            Err(e) => {
                skip_or_fail(test, &format!("useradd: {e}"));
                return None;
            }
        }
        let id = |flag: &str| -> u32 {
            let o = Command::new("id")
                .args([flag, &name])
                .output()
                .expect("run id");
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .expect("id prints a number")
        };
        let (uid, gid) = (id("-u"), id("-g"));
        let bin = std::env::temp_dir().join(format!("memtide-user-{name}"));
        std::fs::create_dir_all(&bin).expect("make the user's program directory");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(UnprivilegedUser {
            name,
            uid,
            gid,
            bin,
        })
    }

    /// `program` run as this user: a system program (`curl`) as it is, any other path copied
    /// into the user's own 0755 directory first.
    pub fn command(&self, program: &Path) -> Command {
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
        // std drops the supplementary groups (setgroups(0)) when root sets the uid.
        command.uid(self.uid).gid(self.gid);
        command.current_dir(&self.bin);
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
