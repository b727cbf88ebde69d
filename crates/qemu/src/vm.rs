//! What a VM tenant is before it runs: a QEMU command line memtide launches (kernel, initramfs or disk, memory, CPUs, extra arguments), or a running QEMU to adopt by its QMP socket; the checks that refuse a launch before anything starts.

use memtide_model::Bytes;
use std::path::{Path, PathBuf};

/// The QMP id memtide gives the balloon device of a VM it launches, and so its QOM path.
pub const BALLOON_ID: &str = "balloon0";

/// How a VM joins: launched by memtide, or adopted while it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmSource {
    Launch(LaunchSpec),
    /// A running QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`). Its QEMU process
    /// must be alone in its memory cgroup (libvirt and systemd-machined put each VM in a
    /// scope of its own), which memtide manages as it adopts any cgroup.
    Adopt {
        qmp: PathBuf,
    },
}

/// A VM memtide starts: the QEMU command is built from these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    /// The QEMU program (`qemu-system-x86_64`, found on `PATH`, unless a path is given).
    pub qemu: String,
    /// The guest kernel (`-kernel`).
    pub kernel: Option<PathBuf>,
    /// Its initramfs (`-initrd`).
    pub initrd: Option<PathBuf>,
    /// A disk image (`-drive file=…,if=virtio`).
    pub disk: Option<PathBuf>,
    /// The guest's memory (`-m`).
    pub memory: Bytes,
    pub cpus: u32,
    /// The kernel command line (`-append`).
    pub append: Option<String>,
    /// Anything else, passed last.
    pub args: Vec<String>,
    /// KVM rather than TCG. Off by default: a `/dev/kvm` that opens is no proof that KVM
    /// runs guests (on this project's hosts it opens, and a guest under it never boots).
    pub kvm: bool,
}

/// Why a VM cannot be launched; nothing was started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VmError {
    #[error("{what} {path} does not exist or is not a readable file")]
    Missing { what: &'static str, path: String },
    #[error("a VM needs a kernel or a disk image to boot from")]
    NothingToBoot,
    #[error("memory {memory} MiB is more than the host's {host} MiB")]
    MoreThanHost { memory: u64, host: u64 },
    #[error("memory {memory} MiB is less than the 64 MiB a guest needs")]
    TooSmall { memory: u64 },
    #[error("cpus = {0}: must be between 1 and 64")]
    Cpus(u32),
    #[error("QEMU program {0:?} is not on PATH")]
    NoQemu(String),
}

impl LaunchSpec {
    /// Checks what can be checked before anything starts: the files exist, the memory fits
    /// the host (`host`: its MemTotal), the CPUs are sane, QEMU is there.
    pub fn check(&self, host: Bytes) -> Result<(), VmError> {
        if self.kernel.is_none() && self.disk.is_none() {
            return Err(VmError::NothingToBoot);
        }
        for (what, path) in [
            ("kernel", &self.kernel),
            ("initrd", &self.initrd),
            ("disk", &self.disk),
        ] {
            if let Some(p) = path {
                if std::fs::File::open(p).map_or(true, |f| !f.metadata().is_ok_and(|m| m.is_file()))
                {
                    return Err(VmError::Missing {
                        what,
                        path: p.display().to_string(),
                    });
                }
            }
        }
        let mib = |b: Bytes| b.0 >> 20;
        if self.memory > host {
            return Err(VmError::MoreThanHost {
                memory: mib(self.memory),
                host: mib(host),
            });
        }
        if self.memory < Bytes::from_mib(64) {
            return Err(VmError::TooSmall {
                memory: mib(self.memory),
            });
        }
        if !(1..=64).contains(&self.cpus) {
            return Err(VmError::Cpus(self.cpus));
        }
        if find_program(&self.qemu).is_none() {
            return Err(VmError::NoQemu(self.qemu.clone()));
        }
        Ok(())
    }

    /// The QEMU command: TCG (KVM when asked), no display, the balloon device with free page
    /// reporting (the guest hands back freed pages by itself) and deflate on OOM (a guest
    /// about to OOM-kill takes pages back from the balloon instead), statistics, QMP on `qmp`,
    /// the serial console into `console`.
    pub fn argv(&self, qmp: &Path, console: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec![self.qemu.clone()];
        let mut push = |s: &[&str]| a.extend(s.iter().map(|s| s.to_string()));
        push(&["-machine", "q35"]);
        // TCG's translation cache is 1 GiB by default: bounded, so the VM's cgroup holds the
        // guest and not an emulator's cache.
        push(&["-accel", if self.kvm { "kvm" } else { "tcg,tb-size=64" }]);
        push(&["-nodefaults", "-no-user-config", "-display", "none"]);
        let memory = format!("{}M", self.memory.0 >> 20);
        let cpus = self.cpus.to_string();
        push(&["-m", &memory, "-smp", &cpus]);
        if let Some(k) = &self.kernel {
            push(&["-kernel", &k.display().to_string()]);
        }
        if let Some(i) = &self.initrd {
            push(&["-initrd", &i.display().to_string()]);
        }
        if let Some(cmdline) = &self.append {
            push(&["-append", cmdline]);
        }
        if let Some(d) = &self.disk {
            push(&[
                "-drive",
                &format!("file={},if=virtio,format=raw", d.display()),
            ]);
        }
        push(&[
            "-device",
            &format!("virtio-balloon-pci,id={BALLOON_ID},free-page-reporting=on,deflate-on-oom=on"),
        ]);
        // Entropy for the guest: without it a guest's first read of random numbers waits.
        push(&["-device", "virtio-rng-pci"]);
        push(&[
            "-qmp",
            &format!("unix:{},server=on,wait=off", qmp.display()),
        ]);
        push(&["-serial", &format!("file:{}", console.display())]);
        a.extend(self.args.iter().cloned());
        a
    }
}

/// `program` itself when it holds a slash, else the first match on `PATH`.
fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path) -> LaunchSpec {
        let kernel = dir.join("vmlinuz");
        std::fs::write(&kernel, b"k").unwrap();
        LaunchSpec {
            qemu: "/bin/sh".to_string(),
            kernel: Some(kernel),
            initrd: None,
            disk: None,
            memory: Bytes::from_mib(512),
            cpus: 1,
            append: Some("console=ttyS0 memtide.run=\"sleep 1\"".to_string()),
            args: vec!["-snapshot".to_string()],
            kvm: false,
        }
    }

    #[test]
    fn a_launch_is_tcg_with_the_balloon_qmp_and_the_console_and_extra_arguments_last() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path());
        let a = s.argv(Path::new("/run/a.qmp"), Path::new("/run/a.log"));
        let line = a.join(" ");
        assert!(line.contains("-machine q35 -accel tcg,tb-size=64"));
        assert!(line.contains("-m 512M -smp 1"));
        assert!(line.contains(
            "-device virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on"
        ));
        assert!(line.contains("-qmp unix:/run/a.qmp,server=on,wait=off"));
        assert!(line.contains("-serial file:/run/a.log"));
        // The command line stays one argument.
        assert!(a.contains(&"console=ttyS0 memtide.run=\"sleep 1\"".to_string()));
        assert_eq!(a.last().unwrap(), "-snapshot");
        let kvm = LaunchSpec { kvm: true, ..s }
            .argv(Path::new("/q"), Path::new("/c"))
            .join(" ");
        assert!(kvm.contains("-accel kvm") && !kvm.contains("tb-size"));
    }

    #[test]
    fn a_missing_kernel_more_memory_than_the_host_or_no_qemu_is_refused_before_anything_starts() {
        let dir = tempfile::tempdir().unwrap();
        let host = Bytes::from_mib(1024);
        assert_eq!(spec(dir.path()).check(host), Ok(()));
        let mut s = spec(dir.path());
        s.kernel = Some(dir.path().join("nope"));
        let e = s.check(host).unwrap_err();
        assert!(e.to_string().starts_with("kernel ") && e.to_string().contains("nope"));
        let mut s = spec(dir.path());
        s.memory = Bytes::from_mib(2048);
        assert_eq!(
            s.check(host).unwrap_err().to_string(),
            "memory 2048 MiB is more than the host's 1024 MiB"
        );
        let mut s = spec(dir.path());
        s.qemu = "memtide-no-such-qemu".to_string();
        assert!(matches!(s.check(host), Err(VmError::NoQemu(_))));
        let mut s = spec(dir.path());
        s.kernel = None;
        assert_eq!(s.check(host), Err(VmError::NothingToBoot));
        let mut s = spec(dir.path());
        s.cpus = 0;
        assert_eq!(s.check(host), Err(VmError::Cpus(0)));
    }
}
