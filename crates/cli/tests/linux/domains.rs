//! libvirt domains on this machine: the fixture (crate::host::libvirt) starts a libvirtd of the
//! test's own whose domains' memory cgroups lie beneath the test's cgroup, boots test domains
//! from the guest image, and leaves nothing behind. Run with
//! `cargo test --release -p memtide-cli --test linux -- domains:: --nocapture`.

use crate::host::engines::{cgroup_dirs, cgroup_mounts, processes_naming};
use crate::host::libvirt::{alive, is_domain_cgroup, Libvirt, SOCKET};
use crate::host::*;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The guests' workload: 64 MiB kept active.
const WORKLOAD: &str = "memtide-toucher --active 64M";

/// `virsh dommemstat NAME`'s `actual` (KiB), when it shows one.
fn balloon_actual(lv: &Libvirt, name: &str) -> Option<u64> {
    lv.ok(&["dommemstat", name]).lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == "actual").then(|| v.trim().parse().ok()).flatten()
    })
}

/// The fixture starts libvirtd and virtlogd, boots a domain with a virtio balloon and one with
/// none, both with memory cgroups beneath `parent()` (the test's own cgroup), the balloon
/// follows `setmem --live` and the other refuses it, both run on in the same cgroups across a
/// libvirtd restart, and dropping the fixture leaves no process, cgroup (in any hierarchy),
/// definition, file or directory of theirs.
#[test]
fn libvirt_fixture_boots_domains_beneath_the_test_cgroup_and_cleans_up() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "libvirt_fixture_boots_domains_beneath_the_test_cgroup_and_cleans_up";
    let Some(linux) = linux(test) else {
        return;
    };
    let machine_before: Vec<bool> = cgroup_mounts()
        .iter()
        .map(|m| m.join("machine").exists())
        .collect();
    let Some(mut lv) = Libvirt::start(&linux, test) else {
        return;
    };
    assert_eq!(lv.uri(), "qemu:///system");
    let parent = lv.parent();
    let me = std::process::id();
    let defining = Instant::now();
    let ballooned = lv.define(&format!("mt{me}-bal"), 512, WORKLOAD, true);
    let plain = lv.define(&format!("mt{me}-nob"), 512, WORKLOAD, false);
    println!(
        "{test}: both defined in {:.2} s",
        defining.elapsed().as_secs_f64()
    );
    let domains = [&ballooned, &plain];
    for d in domains {
        assert_eq!(d.state(), "shut off", "{} once defined", d.name);
        let took = d.start();
        println!(
            "{test}: virsh start {} took {:.2} s",
            d.name,
            took.as_secs_f64()
        );
    }
    for d in domains {
        let took = d.wait_ready(Duration::from_secs(120));
        println!(
            "{test}: {} was ready {:.2} s later",
            d.name,
            took.as_secs_f64()
        );
    }

    // Each domain's memory cgroup is `<parent>/qemu-<ID>-<NAME>.libvirt-qemu`, beneath the
    // test's own cgroup.
    let own = &linux.hierarchy.own_cgroup;
    assert!(
        parent.starts_with(&format!("{}/", own.trim_end_matches('/'))),
        "{parent} is not beneath {own}"
    );
    let mut before = Vec::new();
    for d in domains {
        let cg = d.cgroup();
        let id = d.id();
        assert_eq!(
            cg,
            format!("{parent}/qemu-{id}-{}.libvirt-qemu", d.name),
            "{}'s memory cgroup",
            d.name
        );
        let dir = linux.hierarchy.dir_of(&cg);
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        assert!(
            procs.lines().any(|l| l.trim() == d.pid().to_string()),
            "QEMU {} is not in {}: {procs:?}",
            d.pid(),
            dir.display()
        );
        before.push((d.pid(), cg, id));
    }

    // The balloon follows setmem; the domain without one refuses it.
    lv.ok(&["setmem", &ballooned.name, "300M", "--live"]);
    let start = Instant::now();
    loop {
        let actual = balloon_actual(&lv, &ballooned.name);
        if actual == Some(300 * 1024) {
            println!(
                "{test}: the balloon reached 300 MiB in {:.2} s",
                start.elapsed().as_secs_f64()
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}'s balloon did not reach 300 MiB within 10 s: actual {actual:?} KiB",
            ballooned.name
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = lv.virsh(&["setmem", &plain.name, "300M", "--live"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("without the balloon device"),
        "setmem on {} (no balloon): {} {err}",
        plain.name,
        out.status
    );
    assert_eq!(
        balloon_actual(&lv, &plain.name),
        None,
        "{} has no balloon",
        plain.name
    );

    // libvirtd restarts; the domains run on in the same QEMUs and cgroups.
    lv.restart_daemon();
    for (d, (pid, cg, id)) in domains.iter().zip(&before) {
        assert_eq!(d.state(), "running", "{} after libvirtd restarted", d.name);
        assert_eq!(
            (d.pid(), d.cgroup(), d.id()),
            (*pid, cg.clone(), id.clone())
        );
        assert!(guest_trouble_free(d), "{}", d.console());
    }
    assert_eq!(balloon_actual(&lv, &ballooned.name), Some(300 * 1024));

    // Drop: nothing of the fixture's is left.
    let names: Vec<String> = domains.iter().map(|d| d.name.clone()).collect();
    let (libvirtd, virtlogd) = lv.daemon_pids();
    let dir = lv.dir().to_path_buf();
    let own_cg = lv.cgroup().to_string();
    let dropping = Instant::now();
    drop(lv);
    println!(
        "{test}: the fixture dropped in {:.2} s",
        dropping.elapsed().as_secs_f64()
    );
    for (pid, what) in before
        .iter()
        .map(|(pid, _, _)| (*pid, "QEMU"))
        .chain([(libvirtd, "libvirtd"), (virtlogd, "virtlogd")])
    {
        assert!(!alive(pid), "{what} (pid {pid}) survived the fixture");
    }
    assert!(
        UnixStream::connect(SOCKET).is_err(),
        "a libvirtd still answers on {SOCKET}"
    );
    assert_eq!(
        processes_naming(&dir),
        Vec::new(),
        "processes naming {}",
        dir.display()
    );
    assert!(!dir.exists(), "{} is left", dir.display());
    for path in before
        .iter()
        .map(|(_, cg, _)| cg.clone())
        .chain([parent.clone(), own_cg])
    {
        assert_eq!(
            cgroup_dirs(&path),
            Vec::<PathBuf>::new(),
            "cgroup {path} is left"
        );
    }
    for (m, existed) in cgroup_mounts().iter().zip(machine_before) {
        let machine = m.join("machine");
        assert_eq!(
            machine.exists(),
            existed,
            "{} existed {existed} before the fixture",
            machine.display()
        );
        for entry in std::fs::read_dir(&machine).into_iter().flatten().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !names.iter().any(|n| is_domain_cgroup(&file, n)),
                "{} is left",
                entry.path().display()
            );
        }
    }
    for name in &names {
        for f in [
            format!("/etc/libvirt/qemu/{name}.xml"),
            format!("/run/libvirt/qemu/{name}.xml"),
            format!("/run/libvirt/qemu/{name}.pid"),
            format!("/var/log/libvirt/qemu/{name}.log"),
        ] {
            assert!(!Path::new(&f).exists(), "{f} is left");
        }
    }
    let named: Vec<PathBuf> = ["/etc/libvirt/qemu", "/run/libvirt", "/var/lib/libvirt/qemu"]
        .iter()
        .flat_map(|d| files_under(Path::new(d)))
        .filter(|f| {
            let f = f.display().to_string();
            names.iter().any(|n| f.contains(n.as_str()))
        })
        .collect();
    assert_eq!(
        named,
        Vec::<PathBuf>::new(),
        "files naming the domains are left"
    );
}

/// Every file and directory under `dir` (not following links).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files_under(&p));
        }
        out.push(p);
    }
    out
}

/// Whether the domain's console shows no OOM kill and no ended workload.
fn guest_trouble_free(d: &crate::host::libvirt::Domain) -> bool {
    crate::host::vm::guest_trouble(&d.console()).is_none()
}
