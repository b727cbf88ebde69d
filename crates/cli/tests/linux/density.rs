//! `memtide bench density` in short, checked on its invariants only (its figures are docs/benchmarks.md's, from full runs): a Redis and a memcached tenant under a 64 MiB budget with zram, static sizing and memtide's sampling policy, 15-second trials. Every trial ran the same seeded load, none OOM-killed a server, each tenant's windows cover the run and hold what its schedule sends, only windows the hypervisor stole from are left out of the attainment, static sizing ran only where its limits fit the budget, the report was written, and nothing of the benchmark is left on the host; and on a cgroup v1 host the `senpai` policy is refused in one line.

use crate::host::*;
use memtide_demand::{Demand, Schedule};
use serde_json::Value;
use std::path::Path;

/// The cgroups under the test's own cgroup whose name starts with `memtide-density-`, and the
/// processes in any cgroup of that name.
fn leftovers(linux: &Linux) -> Vec<String> {
    let mut left = Vec::new();
    let own = linux.hierarchy.dir_of(&linux.hierarchy.own_cgroup);
    for e in std::fs::read_dir(own).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("memtide-density-") {
            left.push(e.path().display().to_string());
        }
    }
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cg = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        if cg.contains("/memtide-density-") {
            left.push(format!("process {}", e.file_name().to_string_lossy()));
        }
    }
    left
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_short_density_run_keeps_its_invariants_and_leaves_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_short_density_run_keeps_its_invariants_and_leaves_nothing";
    let Some(linux) = linux(test) else { return };
    for program in ["redis-server", "memcached"] {
        if crate::host::redis::find_program(program).is_none() {
            skip_or_fail(test, &format!("needs {program}"));
            return;
        }
    }
    let Some(_swap) = zram(test, "1G") else {
        return;
    };
    memtide_testkit::samples::build_binaries();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("density.toml");
    let (bursty, busy) = ("bursty:every=6s,burst=4s,rate=200", "busy:rate=100");
    std::fs::write(
        &config,
        format!(
            "budget = \"64M\"\nduration = \"15s\"\nwindow = \"5s\"\nwarmup = \"3s\"\nseed = 3\n\
             policies = [\"static\", \"sampling\"]\nstart = 2\nstep = 1\nmax = 2\n\n\
             [slo]\np99 = \"50ms\"\nwake = \"5s\"\nmin_requests = 20\n\n\
             [[mix]]\nserver = \"redis\"\nkeys = 5000\nvalue_bytes = \"4K\"\ndemand = \"{bursty}\"\n\n\
             [[mix]]\nserver = \"memcached\"\nkeys = 5000\nvalue_bytes = \"4K\"\ndemand = \"{busy}\"\n"
        ),
    )
    .unwrap();
    // `memtide bench density` on the set-up at `config`, writing to `out`.
    let bench = |out: &Path| {
        memtide(&[
            "bench",
            "density",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = bench(&out);
    println!("{stderr}\n{stdout}");
    assert_eq!(code, 0, "{stderr}");

    let results: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let budget = 64u64 << 20;
    let mut ran = 0;
    let mut bursts_of: Vec<Option<Value>> = vec![None, None];
    for r in &results {
        let (policy, n) = (r["policy"].as_str().unwrap(), r["n"].as_u64().unwrap());
        let what = format!("{policy} n={n}");
        assert_eq!(r["oom_kills"], 0, "{what}: {r}");
        assert_eq!(r["died"], Value::Array(vec![]), "{what}: {r}");
        let reserved = r["reserved"].as_u64().unwrap();
        if policy == "static" {
            assert_eq!(r["fits"].as_bool(), Some(reserved <= budget), "{what}: {r}");
        } else {
            assert_eq!(r["fits"].as_bool(), Some(true), "{what}");
        }
        if r["fits"] != true {
            continue;
        }
        ran += 1;
        // The windows the hypervisor stole from are left out of the attainment that decides,
        // and only those.
        let (ours, all) = (&r["attainment"], &r["attainment_all"]);
        let stolen = r["stolen"].as_array().unwrap();
        for k in ["active", "met"] {
            let (o, a) = (ours[k].as_u64().unwrap(), all[k].as_u64().unwrap());
            assert!(o <= a && (o == a || !stolen.is_empty()), "{what}: {r}");
        }
        for w in stolen {
            assert!(w["share"].as_f64().unwrap() >= 0.02, "{what}: {r}");
        }
        let dir = out.join(format!("{policy}-n{n:03}"));
        for (i, seen) in bursts_of.iter_mut().enumerate().take(n as usize) {
            let l = lines(&dir.join(format!("t{i:03}.jsonl")));
            let of = |kind: &'static str| l.iter().filter(move |v| v["kind"] == kind);
            let demand = if i % 2 == 0 { bursty } else { busy };
            let schedule = Schedule::new(
                &Demand::parse(demand).unwrap(),
                memtide_demand::tenant_seed(3, i as u64),
                15.0,
            )
            .unwrap();
            // The same seeded bursts in every trial.
            let bursts = of("start").next().unwrap()["bursts"].clone();
            let expected: Vec<(f64, f64)> = schedule.bursts().to_vec();
            assert_eq!(
                serde_json::from_value::<Vec<(f64, f64)>>(bursts.clone()).unwrap(),
                expected,
                "{what} t{i:03}"
            );
            if let Some(before) = seen.as_ref() {
                assert_eq!(before, &bursts, "{what} t{i:03}: another trial's load");
            }
            *seen = Some(bursts);
            // Three windows of 5 s cover the run; each holds what the schedule sends.
            let windows: Vec<&Value> = of("window").collect();
            assert_eq!(windows.len(), 3, "{what} t{i:03}: {windows:?}");
            for w in windows {
                let start = w["start"].as_f64().unwrap();
                let due = schedule.requests_between(start, start + 5.0);
                let sent = w["requests"].as_f64().unwrap();
                assert!(
                    (sent - due).abs() <= 2.0,
                    "{what} t{i:03}: {w} against {due:.1} due"
                );
            }
        }
    }
    assert!(ran >= 2, "at least one trial per policy ran: {results:?}");

    let table = std::fs::read_to_string(out.join("density.md")).unwrap();
    for p in ["static", "sampling"] {
        assert!(table.contains(&format!("| {p} |")), "{table}");
    }
    let svg = std::fs::read_to_string(out.join("density.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("sampling (carries"),
        "{svg}"
    );
    assert_eq!(
        leftovers(&linux),
        Vec::<String>::new(),
        "the benchmark left these"
    );

    // Senpai needs a cgroup's own memory.pressure: on a v1 host (this one and CI's) the
    // benchmark says so in one line, exit 2, before it starts anything (scripts/density-guest.sh
    // runs it in a cgroup v2 guest).
    if linux.hierarchy.version == memtide_linux::fs::hierarchy::CgroupVersion::V1 {
        std::fs::write(tmp.path().join("senpai.py"), "").unwrap();
        let text = std::fs::read_to_string(&config).unwrap().replacen(
            "policies = [\"static\", \"sampling\"]",
            "policies = [\"senpai\"]\nsenpai = \"senpai.py\"",
            1,
        );
        std::fs::write(&config, text).unwrap();
        let again = tmp.path().join("senpai-out");
        let (code, _, stderr) = bench(&again);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("the senpai policy needs cgroup v2") && stderr.lines().count() == 1,
            "{stderr}"
        );
        assert!(!again.exists() && leftovers(&linux).is_empty());
    }
}
