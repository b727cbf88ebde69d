//! Page sharing on this machine's real kernel: the daemon drives KSM; two launched tenants with identical 200 MiB merge and their memory falls, a unique-content tenant and an isolated one do not merge, ksmd stays within its CPU budget, and KSM's settings are back after the daemon exits.

use crate::host::*;
use memtide_linux::fs::ksm;
use std::path::Path;
use std::time::{Duration, Instant};

/// The CPU budget the test gives ksmd (a fraction of one core).
const BUDGET: f64 = 0.25;

fn config(toucher: &str) -> String {
    let launched = |name: &str, active: &str, content: &str, extra: &str| {
        format!(
            r#"
[[tenant]]
name = "{name}"
command = ["{toucher}", "--active", "{active}", "--content", "{content}", "--pause-ms", "500"]
min = "16M"
max = "1G"
{extra}
"#
        )
    };
    let head = config_head("500ms", "self", "4G");
    format!(
        r#"{head}
[sharing]
enabled = true
# As fast as ksmd can go: the CPU budget, not the rate, must hold it back.
idle_rate = 1000000
pressed_rate = 1000000
cpu_budget = {BUDGET}
{}{}{}{}"#,
        launched("twin-a", "200M", "seeded:7", ""),
        launched("twin-b", "200M", "seeded:7", ""),
        launched("unique", "100M", "unique", ""),
        launched("isolated", "100M", "seeded:7", "isolated = true"),
    )
}

/// The processes of launched tenant `name` (its cgroup is `<own cgroup>/<name>`).
fn pids_of(linux: &Linux, name: &str) -> Vec<u32> {
    let path = format!(
        "{}/{name}",
        linux.hierarchy.own_cgroup.trim_end_matches('/')
    );
    linux.memory_cgroup(&path).pids().unwrap_or_default()
}

fn usage_of(linux: &Linux, name: &str) -> u64 {
    let path = format!(
        "{}/{name}",
        linux.hierarchy.own_cgroup.trim_end_matches('/')
    );
    linux.memory_cgroup(&path).sample().map_or(0, |s| s.usage.0)
}

/// The tenant's processes' `ksm_stat`, summed: (merging + zero pages, any merge_any: yes).
fn ksm_stat(linux: &Linux, name: &str) -> (u64, bool) {
    let mut pages = 0;
    let mut merge_any = false;
    for pid in pids_of(linux, name) {
        if let Ok(Some(p)) = ksm::read_process(Path::new("/"), pid) {
            pages += p.merging_pages.unwrap_or(0) + p.zero_pages.unwrap_or(0);
            merge_any |= p.merge_any == Some(true);
        }
    }
    (pages, merge_any)
}

fn ksmd_cpu(pid: Option<u32>) -> Option<Duration> {
    ksm::read_cpu(Path::new("/"), pid?).ok().flatten()
}

#[test]
fn identical_tenants_merge_within_the_cpu_budget_unique_and_isolated_ones_do_not_and_ksm_is_restored(
) {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "identical_tenants_merge_within_the_cpu_budget_unique_and_isolated_ones_do_not_and_ksm_is_restored";
    let Some(linux) = linux(test) else {
        return;
    };
    let root = Path::new("/");
    if ksm::read_counters(root).ok().flatten().is_none() {
        skip_or_fail(test, "this kernel has no KSM (/sys/kernel/mm/ksm)");
        return;
    }
    let before = ksm::read_knobs(root).expect("read KSM's knobs");
    let ksmd = ksm::find_ksmd(root);
    let page = 4096u64;

    let dir = tempfile::tempdir().unwrap();
    let toucher = toucher_path();
    let mut daemon = Daemon::start(dir.path(), &config(toucher.to_str().unwrap()), &[]);
    let started = Instant::now();
    let cpu_at_start = ksmd_cpu(ksmd);
    daemon.wait_until("KSM running under memtide", Duration::from_secs(10), |s| {
        s.host
            .sharing
            .as_ref()
            .is_some_and(|x| x.scan_rate_pages_per_s > 0)
    });
    assert_eq!(
        ksm::read_knobs(root).unwrap().run,
        1,
        "memtide turned ksmd on"
    );

    // The twins' 200 MiB each merge: at least 180 MiB of each shows in the API.
    let twin = 180 * MIB;
    let merged = daemon.wait_until("the twins merged", Duration::from_secs(120), |s| {
        let shared = |n: &str| {
            s.tenants
                .iter()
                .find(|t| t.name == n)
                .and_then(|t| t.shared_bytes)
                .unwrap_or(0)
        };
        shared("twin-a") >= twin && shared("twin-b") >= twin
    });
    let took = started.elapsed();
    let cpu_at_merge = ksmd_cpu(ksmd);
    let sharing = merged.host.sharing.clone().unwrap();

    // Their own ksm_stat says so too, and that they were asked to merge.
    for name in ["twin-a", "twin-b"] {
        let (pages, merge_any) = ksm_stat(&linux, name);
        assert!(
            pages * page >= twin,
            "{name}: ksm_stat shows {:.0} MiB merged",
            mib(pages * page)
        );
        assert!(merge_any, "{name} launched with PR_SET_MEMORY_MERGE");
    }
    // The twins' memory falls: one copy of 200 MiB is freed (a merged page is charged to one
    // cgroup), so together they hold at most 400 MiB − 150 MiB plus the touchers' own few MiB.
    let twins_usage = usage_of(&linux, "twin-a") + usage_of(&linux, "twin-b");
    assert!(
        twins_usage <= 400 * MIB - 150 * MIB + 16 * MIB,
        "the twins still hold {:.0} MiB",
        mib(twins_usage)
    );
    assert!(
        sharing.reclaimed_bytes >= 150 * MIB,
        "KSM reclaims {:.0} MiB",
        mib(sharing.reclaimed_bytes)
    );

    // Unique content never merges (beyond the toucher's own few pages of zeros); the isolated
    // tenant, with the twins' very content, was never asked to and has nothing merged.
    let unique = daemon.tenant("unique");
    let unique_shared = unique
        .shared_bytes
        .expect("a launched tenant has a ksm_stat");
    assert!(
        unique_shared <= 2 * MIB,
        "unique content merged {:.1} MiB",
        mib(unique_shared)
    );
    let (isolated_pages, isolated_any) = ksm_stat(&linux, "isolated");
    assert!(!isolated_any, "the isolated tenant was asked to merge");
    assert_eq!(isolated_pages, 0, "the isolated tenant has merged pages");
    assert_eq!(daemon.tenant("isolated").shared_bytes, Some(0));

    // ksmd's CPU over the whole run to the merge, and once merged, against the budget. The
    // first tick runs at the assumed cost (5 µs a page) until the first measurement.
    let used = |a: Option<Duration>, b: Option<Duration>, wall: Duration| {
        b.zip(a)
            .map(|(b, a)| (b - a).as_secs_f64() / wall.as_secs_f64())
    };
    let to_merge = used(cpu_at_start, cpu_at_merge, took);
    std::thread::sleep(Duration::from_secs(10));
    let cpu_at_end = ksmd_cpu(ksmd);
    let steady = used(cpu_at_merge, cpu_at_end, Duration::from_secs(10));
    let status = daemon.status();
    let (uniq_mib, twins_mib) = (mib(unique_shared), mib(twins_usage));
    eprintln!(
        "{test}: merged in {:.1} s; KSM reclaims {:.0} MiB (shared {:.0} MiB, zeros {:?}, own \
         {:?} B); twins hold {twins_mib:.0} MiB; unique merged {uniq_mib:.1} MiB; ksmd CPU {:?} \
         to the merge, {:?} after (budget {BUDGET}); rate now {} pages/s",
        took.as_secs_f64(),
        mib(sharing.reclaimed_bytes),
        mib(sharing.shared_bytes),
        sharing.zero_bytes.map(mib),
        sharing.metadata_bytes,
        to_merge,
        steady,
        status
            .host
            .sharing
            .as_ref()
            .map_or(0, |s| s.scan_rate_pages_per_s),
    );
    if let (Some(to_merge), Some(steady)) = (to_merge, steady) {
        // Clock ticks are 10 ms: a few of them of slack over a window of seconds.
        assert!(
            to_merge <= BUDGET * 1.1 + 0.02,
            "ksmd used {to_merge:.3} of a core up to the merge, budget {BUDGET}"
        );
        assert!(
            steady <= BUDGET * 1.1 + 0.02,
            "ksmd used {steady:.3} of a core after the merge, budget {BUDGET}"
        );
    } else if required() {
        panic!("ksmd's CPU time could not be read (ksmd pid {ksmd:?})");
    }

    // A clean stop gives KSM's settings back and removes memtide's copy of them.
    assert!(daemon.signal_and_wait(libc::SIGTERM).success());
    assert_eq!(
        ksm::read_knobs(root).unwrap(),
        before,
        "KSM's settings restored"
    );
    assert!(
        !dir.path().join("ksm.json").exists(),
        "the saved settings are removed after a restore"
    );
}
