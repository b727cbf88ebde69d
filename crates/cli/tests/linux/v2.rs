//! memtide on a real cgroup v2 hierarchy (issue 29), inside a QEMU guest since this host's
//! memory controller is v1 only: the idle tax on three adopted tenants with every file given
//! back on SIGTERM, the floor honouring a tenant's own memory.swap.max, a SIGKILL and restart,
//! a second daemon refused, TWS converging, a shrink held (and the tenant rescued) on its own
//! PSI and on its throttling, `parent = "self"` delegation, an emptied tenant and one removed
//! by SIGHUP given back at once, a memory.reclaim refused with EAGAIN held and not retried
//! each tick, memory.oom.group left alone with the balloon socket's v2 identity check in the
//! same guest, disk tenants' io.weight and io.max set and given back, and a paused QEMU VM
//! adopted in a v2 cgroup, paged out through memory.high and left as found (nested TCG boots
//! a VM too slowly to test its balloon here: docs/linux.md). Each test boots one guest
//! (host/v2guest.rs) whose workload prints what the guest's kernel files read; the assertions
//! here are made on those lines. Guest times are printed (`--nocapture`).

use crate::host::v2guest::{run, run_with, Extra, Line, Run, IMAGE_IN_GUEST};
use crate::host::{mib, MIB};
use std::time::Duration;

/// How long one guest may run before it counts as hung (TCG on 2 vCPUs, a busy host).
const GUEST_TIMEOUT: Duration = Duration::from_secs(150);

/// A daemon config for the guest: tick 500 ms, tenants under /memtide, sampling every 2 s.
/// `tenants` are `(name, min, max)`; each adopts /memtide/NAME.
fn config(
    port: u16,
    state: &str,
    budget: &str,
    policy: &str,
    tenants: &[(&str, &str, &str)],
) -> String {
    let mut text = format!(
        "[daemon]\ntick = \"500ms\"\nlisten = \"127.0.0.1:{port}\"\nstate_file = \"{state}\"\n\n\
         [host]\nparent = \"/memtide\"\nbudget = \"{budget}\"\n\n\
         [policy]\nsampling_period = \"2s\"\n{policy}\n"
    );
    for (name, min, max) in tenants {
        text.push_str(&format!(
            "\n[[tenant]]\nname = \"{name}\"\ncgroup = \"/memtide/{name}\"\nmin = \"{min}\"\n\
             max = \"{max}\"\nestimator = \"sampling\"\n"
        ));
    }
    text
}

/// Shell that writes `text` to `path` in the guest.
fn write_file(path: &str, text: &str) -> String {
    format!("cat >{path} <<'EOF'\n{text}EOF\n")
}

/// The first sample time at which `name`'s memory.current is `by` bytes below its first
/// sample's, or `None`.
fn fell_at(run: &Run, name: &str, by: u64) -> Option<f64> {
    let samples = run.samples(name);
    let first = samples.first()?.number("current");
    samples
        .iter()
        .find(|s| s.number("current") + by <= first)
        .map(|s| s.seconds("t"))
}

/// The samples' memory.current of `name`, in MiB, for a failure message.
fn trace(run: &Run, name: &str) -> String {
    run.samples(name)
        .iter()
        .map(|s| {
            format!(
                "{}:{:.0}/{}",
                s.get("t"),
                mib(s.number("current")),
                s.bytes("high")
                    .map_or("max".to_string(), |h| format!("{:.0}", mib(h)))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn assert_v2(run: &Run, log: &str) {
    let h = &run.lines("hierarchy")[0];
    assert_eq!(h.get("fstype"), "cgroup2", "{}", h.text);
    let daemon = run.log(log);
    let start = daemon
        .lines()
        .find(|l| l.contains(" start "))
        .unwrap_or_else(|| panic!("no start line in the daemon's log:\n{}", run.tail(80)));
    assert!(
        start.contains("v2"),
        "the daemon did not detect v2: {start}"
    );
}

/// Three adopted tenants on v2 under a 500 MiB budget with ESX's sampling and the idle tax at
/// 0.75: "busy" touches 250 MiB, "idle" touched 208 MiB once, "medium" touches 100 MiB of
/// 160. The idle tenant's memory falls first, the busy one's limit never goes below its
/// working set, every lowering is one bounded step (5% of what the tenant holds) or less,
/// nobody is OOM-killed, and SIGTERM gives back every file memtide may change (some set to
/// non-defaults beforehand) exactly as it read before.
///
/// Why 500 MiB: at equal shares the tax settles where an idle page costs four active ones, so
/// "idle" keeps 8 + (B − 8)/4 and "medium" 100 + (B − 100)/4 when "busy" holds B; all three
/// in the budget gives B = (budget − 81 MiB)/1.5: 246 MiB under 450 (measured: memory.high
/// 239 MiB, under the working set, as the policy intends), 279 MiB under 500.
#[test]
fn on_v2_the_idle_tenant_gives_first_the_busy_keeps_its_set_and_sigterm_restores_every_file() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test =
        "on_v2_the_idle_tenant_gives_first_the_busy_keeps_its_set_and_sigterm_restores_every_file";
    let conf = config(
        9464,
        "/run/memtide/a.json",
        "500M",
        "tax_rate = 0.75",
        &[
            ("busy", "32M", "500M"),
            ("idle", "32M", "500M"),
            ("medium", "32M", "500M"),
        ],
    );
    let body = format!(
        r#"
tenant busy --active 250M --content zero
tenant idle --active 8M --idle 200M --content zero
tenant medium --active 100M --idle 60M --content zero
# Originals that are not the kernel's defaults, so a restore is told from a reset.
echo 600M >$CG/idle/memory.high
echo 16M >$CG/busy/memory.low
echo 700M >$CG/medium/memory.max
echo 900M >$CG/busy/memory.swap.max
echo 1 >$CG/medium/memory.oom.group
filled busy $((245 << 20)) 60
filled idle $((200 << 20)) 60
filled medium $((155 << 20)) 60
files before
sample
{}daemon /etc/memtide/a.toml /run/memtide/a.log
sampler &
SP=$!
idle0=$(cat $CG/idle/memory.current)
# Until the idle tenant gave 96 MiB, then 6 s more of the busy one under the budget.
wait_until 50 sh -c "[ \$(cat $CG/idle/memory.current) -lt $((idle0 - (96 << 20))) ]" ||
    say "note what=idle-never-fell"
sleep 6
stop TERM a
kill $SP
sample
files after
dump a /run/memtide/a.log
"#,
        write_file("/etc/memtide/a.toml", &conf)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "a");
    let stopped = &run.lines("daemon")[0];
    assert_eq!(
        stopped.get("status"),
        "0",
        "{}\n{}",
        stopped.text,
        run.log("a")
    );
    let tenants = ["busy", "idle", "medium"];
    let traces = tenants
        .iter()
        .map(|t| format!("{t}: {}", trace(&run, t)))
        .collect::<Vec<_>>()
        .join("\n");
    let idle = fell_at(&run, "idle", 64 * MIB);
    let busy = fell_at(&run, "busy", 64 * MIB);
    println!("idle fell 64 MiB at {idle:?} s, busy at {busy:?} s (uptime)\n{traces}");
    let idle = idle.unwrap_or_else(|| panic!("the idle tenant never gave 64 MiB:\n{traces}"));
    assert!(
        busy.is_none_or(|b| b > idle),
        "the busy tenant gave before the idle one:\n{traces}"
    );
    for s in run.samples("busy") {
        if let Some(high) = s.bytes("high") {
            assert!(
                high >= 250 * MIB,
                "the busy tenant's memory.high went under its 250 MiB working set: {}\n{traces}",
                s.text
            );
        }
        assert!(
            s.number("anon") >= 240 * MIB,
            "the busy tenant lost its working set: {}\n{traces}",
            s.text
        );
    }
    assert!(
        run.samples("idle")
            .iter()
            .any(|s| s.bytes("high").is_some_and(|h| h < 200 * MIB)),
        "memtide never lowered the idle tenant's memory.high:\n{traces}"
    );
    let lowerings = assert_bounded_shrinks(&run, "a", 0.05);
    assert!(lowerings > 0, "no lowering logged:\n{}", run.log("a"));
    run.assert_no_oom_kill(&tenants);
    run.assert_files_equal("before", "after", &tenants);
}

/// Asserts every lowering daemon log `name` records is one bounded step or less: to at least
/// the lower of the old limit and what the tenant held, less `step` of what it held (1 MiB at
/// least), as the rails promise; the reason's figures are rounded to 0.1 MiB. Returns how many
/// lowerings it checked.
fn assert_bounded_shrinks(run: &Run, name: &str, step: f64) -> usize {
    let log = run.log(name);
    let field = |line: &str, key: &str| -> Option<f64> {
        let rest = &line[line.find(key)? + key.len()..];
        let end = rest.find([' ', '"']).unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let mut checked = 0;
    for line in log.lines().filter(|l| l.contains("outcome=lower")) {
        let to = field(line, "to_bytes=").unwrap_or_else(|| panic!("no to_bytes: {line}"));
        // A limit lowered from none has no old limit (`from_bytes=-`): what it held bounds it.
        let from = field(line, "from_bytes=").unwrap_or(f64::INFINITY);
        let held = field(line, "allocated ").unwrap_or_else(|| panic!("no allocated: {line}"))
            * MIB as f64;
        let lowest = from.min(held) - (held * step).max(MIB as f64) - 0.2 * MIB as f64;
        assert!(
            to >= lowest,
            "a lowering larger than one {step} step: {:.1} MiB held, {:.1} -> {:.1} MiB \
             (at most {:.1} down): {line}",
            held / MIB as f64,
            from / MIB as f64,
            to / MIB as f64,
            lowest / MIB as f64
        );
        checked += 1;
    }
    checked
}

/// The floor on v2 honours a tenant's own memory.swap.max: "pinned" (memory.swap.max = 0) and
/// "capped" (memory.swap.max = 64M) each hold 208 MiB they touched once, beside a busy tenant,
/// under a 350 MiB budget the idle tax wants to take from them. memtide's memory.high for each
/// stays at or above the anonymous memory the tenant cannot swap (memory.stat anon +
/// memory.swap.current − memory.swap.max), at every sample; nobody is OOM-killed; SIGTERM
/// gives every file back.
#[test]
fn on_v2_memory_high_never_goes_under_the_anon_a_tenants_own_swap_max_keeps_in_ram() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_memory_high_never_goes_under_the_anon_a_tenants_own_swap_max_keeps_in_ram";
    let conf = config(
        9464,
        "/run/memtide/b.json",
        "350M",
        "tax_rate = 0.75",
        &[
            ("busy", "32M", "500M"),
            ("pinned", "32M", "500M"),
            ("capped", "32M", "500M"),
        ],
    );
    let body = format!(
        r#"
mkdir $CG/pinned $CG/capped
echo 0 >$CG/pinned/memory.swap.max
echo 64M >$CG/capped/memory.swap.max
tenant busy --active 200M --content zero
tenant pinned --active 8M --idle 200M --content zero
tenant capped --active 8M --idle 200M --content zero
filled busy $((195 << 20)) 60
filled pinned $((205 << 20)) 60
filled capped $((205 << 20)) 60
files before
sample
{}daemon /etc/memtide/b.toml /run/memtide/b.log
sampler &
SP=$!
# Until memtide set a limit on both, then 15 s of it moving them.
wait_until 50 sh -c "! grep -qx max $CG/pinned/memory.high && ! grep -qx max $CG/capped/memory.high" ||
    say "note what=never-limited"
sleep 15
stop TERM b
kill $SP
sample
files after
dump b /run/memtide/b.log
"#,
        write_file("/etc/memtide/b.toml", &conf)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "b");
    let tenants = ["busy", "pinned", "capped"];
    let mut failures = Vec::new();
    for t in ["pinned", "capped"] {
        let samples = run.samples(t);
        let limited: Vec<&Line> = samples
            .iter()
            .filter(|s| s.bytes("high").is_some())
            .collect();
        assert!(
            !limited.is_empty(),
            "memtide never set {t}'s memory.high:\n{}\n{}",
            trace(&run, t),
            run.log("b")
        );
        let mut worst = i64::MAX;
        for s in &limited {
            let swap_max = s.bytes("swap.max").unwrap_or(u64::MAX);
            let in_ram = (s.number("anon") + s.number("swap")).saturating_sub(swap_max);
            let margin = s.number("high") as i64 - in_ram as i64;
            worst = worst.min(margin);
            if margin < 0 && failures.len() < 6 {
                failures.push(format!(
                    "{t}: memory.high {:.1} MiB, under the {:.1} MiB of anon it cannot swap: {}",
                    mib(s.number("high")),
                    mib(in_ram),
                    s.text
                ));
            }
        }
        println!(
            "{t}: memory.high at least {:.1} MiB above the anon it cannot swap ({} samples)",
            worst as f64 / MIB as f64,
            limited.len()
        );
    }
    assert!(
        failures.is_empty(),
        "memtide put memory.high under anon its swap.max keeps in RAM:\n{}\npinned: {}\ncapped: {}",
        failures.join("\n"),
        trace(&run, "pinned"),
        trace(&run, "capped")
    );
    run.assert_no_oom_kill(&tenants);
    run.assert_files_equal("before", "after", &tenants);
}

/// A daemon SIGKILLed while it holds v2 limits, restarted with the same state file, re-adopts
/// its tenants; a SIGTERM then gives back every original (non-defaults included), removes the
/// state file, and no tenant is OOM-killed.
#[test]
fn on_v2_a_sigkilled_daemon_restarted_then_stopped_gives_back_every_original() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_a_sigkilled_daemon_restarted_then_stopped_gives_back_every_original";
    let conf = config(
        9464,
        "/run/memtide/c.json",
        "200M",
        "tax_rate = 0.75",
        &[("busy", "32M", "500M"), ("idle", "32M", "500M")],
    );
    let body = format!(
        r#"
tenant busy --active 100M --content zero
tenant idle --active 8M --idle 150M --content zero
echo 600M >$CG/busy/memory.high
echo 800M >$CG/busy/memory.max
echo 8M >$CG/busy/memory.low
echo 4M >$CG/idle/memory.min
echo 700M >$CG/idle/memory.swap.max
echo 1 >$CG/idle/memory.oom.group
filled busy $((98 << 20)) 60
filled idle $((155 << 20)) 60
files before
sample
{}daemon /etc/memtide/c.toml /run/memtide/c.log
sampler &
SP=$!
wait_until 50 sh -c "[ \$(cat $CG/idle/memory.high) != max ] && [ \$(cat $CG/idle/memory.high) -lt $((120 << 20)) ]" ||
    say "note what=idle-never-limited"
say "state phase=running exists=$([ -f /run/memtide/c.json ] && echo 1 || echo 0)"
stop KILL c
files killed
say "state phase=killed exists=$([ -f /run/memtide/c.json ] && echo 1 || echo 0)"
daemon /etc/memtide/c.toml /run/memtide/c.log
logged readopted /run/memtide/c.log 30
sleep 3
stop TERM c
kill $SP
sample
files after
say "state phase=after exists=$([ -f /run/memtide/c.json ] && echo 1 || echo 0)"
dump c /run/memtide/c.log
"#,
        write_file("/etc/memtide/c.toml", &conf)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "c");
    let log = run.log("c");
    let stops = run.lines("daemon");
    assert_eq!(stops.len(), 2, "{}", run.tail(80));
    assert_eq!(stops[0].get("status"), "137", "SIGKILL: {}", stops[0].text);
    assert_eq!(
        stops[1].get("status"),
        "0",
        "SIGTERM: {}\n{log}",
        stops[1].text
    );
    let state: Vec<(String, String)> = run
        .lines("state")
        .iter()
        .map(|l| (l.get("phase").to_string(), l.get("exists").to_string()))
        .collect();
    assert_eq!(
        state,
        [("running", "1"), ("killed", "1"), ("after", "0")]
            .map(|(p, e)| (p.to_string(), e.to_string())),
        "the state file: written while running, kept by the kill, removed by the stop"
    );
    let killed = run.files("killed", "idle");
    let before = run.files("before", "idle");
    assert_ne!(
        killed.get("high"),
        before.get("high"),
        "the kill left nothing of memtide's to restore: {}",
        killed.text
    );
    assert!(log.contains("readopted"), "no re-adoption:\n{log}");
    run.assert_no_oom_kill(&["busy", "idle"]);
    run.assert_files_equal("before", "after", &["busy", "idle"]);
}

/// A second daemon (another state file, another port) configured for tenants a first one
/// manages on v2 exits with status 2, says another memtide holds them, writes no state file
/// and changes none of their files (the first is SIGSTOPped meanwhile, its locks held, so
/// only the second could change one); the first goes on and gives everything back on SIGTERM.
#[test]
fn on_v2_a_second_daemon_on_the_same_tenants_exits_2_and_changes_nothing() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_a_second_daemon_on_the_same_tenants_exits_2_and_changes_nothing";
    let tenants = [("app", "32M", "500M"), ("idle", "32M", "500M")];
    let first = config(9464, "/run/memtide/d1.json", "600M", "", &tenants);
    // Its own directory: the API socket lies beside the state file, and a socket in use would
    // refuse the second daemon before the cgroups' locks are tried.
    let second = config(9465, "/run/memtide-second/d2.json", "300M", "", &tenants);
    let body = format!(
        r#"
tenant app --active 64M --content zero
tenant idle --active 8M --idle 100M --content zero
echo 8M >$CG/app/memory.low
filled app $((62 << 20)) 60
filled idle $((105 << 20)) 60
files before
sample
{}{}daemon /etc/memtide/d1.toml /run/memtide/d1.log
wait_until 40 sh -c "[ \$(cat $CG/app/memory.low) = $((32 << 20)) ]" || say "note what=never-protected"
# The first daemon stopped (its locks held) while the second runs: it still moves memory.high
# by fractions of a MiB as usage wobbles, and only the second may change a file meanwhile.
kill -STOP $DPID
files first
mkdir -p /run/memtide-second
memtide daemon --config /etc/memtide/d2.toml >/dev/null 2>/run/memtide/d2.log
say "second status=$? state=$([ -f /run/memtide-second/d2.json ] && echo 1 || echo 0)"
files second
kill -CONT $DPID
sleep 2
say "first running=$(kill -0 $DPID 2>/dev/null && echo 1 || echo 0)"
stop TERM d1
sample
files after
dump d1 /run/memtide/d1.log
dump d2 /run/memtide/d2.log
"#,
        write_file("/etc/memtide/d1.toml", &first),
        write_file("/etc/memtide/d2.toml", &second)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "d1");
    let second = &run.lines("second")[0];
    let refusal = run.log("d2");
    assert_eq!(second.get("status"), "2", "{}\n{refusal}", second.text);
    assert!(refusal.contains("another memtide"), "{refusal}");
    assert_eq!(
        second.get("state"),
        "0",
        "the refused daemon left a state file"
    );
    let names = ["app", "idle"];
    assert_ne!(
        run.files("first", "app").get("low"),
        run.files("before", "app").get("low"),
        "the first daemon never protected app's min:\n{}",
        run.log("d1")
    );
    run.assert_files_equal("first", "second", &names);
    assert_eq!(
        run.lines("first")[0].get("running"),
        "1",
        "{}",
        run.log("d1")
    );
    assert_eq!(
        run.lines("daemon")[0].get("status"),
        "0",
        "{}",
        run.log("d1")
    );
    run.assert_no_oom_kill(&names);
    run.assert_files_equal("before", "after", &names);
}

/// TWS on a real v2 tenant: "ws" (memory.max 1G) touches 300 MiB of the 450 it holds; the
/// budget has room and `reclaim = "always"` lets the probe run (TWS as published).
/// memory.high comes down to within 20% above the working set and stays there 5 s (the time is
/// printed; v1's figure is 11 s). The probe's back-up after it touches the working set adds
/// the refaults of one epoch, which vary with the guest's timing (measured 345 and 390 MiB);
/// when it lands above the band, the cool-down and the SLOW steps after it bring it back, and
/// the guest waits (100 s at most) until the band has held. Nobody is OOM-killed; SIGTERM
/// gives every file back.
#[test]
fn on_v2_tws_brings_memory_high_down_to_the_working_set() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_tws_brings_memory_high_down_to_the_working_set";
    let conf = config(
        9464,
        "/run/memtide/e.json",
        "1200M",
        "reclaim = \"always\"",
        &[("ws", "64M", "1G")],
    )
    .replace("estimator = \"sampling\"", "estimator = \"tws\"");
    let body = format!(
        r#"
mkdir $CG/ws
echo 1G >$CG/ws/memory.max
tenant ws --active 300M --idle 150M --pause-ms 100
filled ws $((448 << 20)) 60
files before
sample
{}say "begin t=$(up)"
daemon /etc/memtide/e.toml /run/memtide/e.log
sampler &
SP=$!
# Until memory.high has stayed in the band for 6 s (the host asks 5 s of its samples): the
# probe's back-up after it meets the working set lands 15-30% above it, by how many refaults
# one epoch saw, and the SLOW steps after the cool-down bring it back into the band.
end=$(($(cut -d. -f1 /proc/uptime) + 100))
since=
while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
    h=$(cat $CG/ws/memory.high)
    now=$(cut -d. -f1 /proc/uptime)
    if [ $h != max ] && [ $h -ge $((280 << 20)) ] && [ $h -le $((360 << 20)) ]; then
        since=${{since:-$now}}
        [ $((now - since)) -ge 7 ] && break
    else
        since=
    fi
    sleep 0.2
done
stop TERM e
kill $SP
sample
files after
dump e /run/memtide/e.log
"#,
        write_file("/etc/memtide/e.toml", &conf)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "e");
    let begin = run.lines("begin")[0].seconds("t");
    let samples = run.samples("ws");
    let in_band = |s: &Line| {
        s.bytes("high")
            .is_some_and(|h| (280 * MIB..=360 * MIB).contains(&h))
    };
    // Converged: the first sample from which every sample for 5 s is in the band.
    let converged = samples.iter().enumerate().find_map(|(i, s)| {
        let t = s.seconds("t");
        let span = &samples[i..];
        let until = span.iter().position(|x| x.seconds("t") >= t + 5.0)?;
        span[..=until].iter().all(in_band).then_some(t - begin)
    });
    let trace = trace(&run, "ws");
    let converged = converged.unwrap_or_else(|| {
        panic!(
            "memory.high never stayed within [280, 360] MiB for 5 s:\n{trace}\n{}",
            run.log("e")
        )
    });
    println!(
        "tws on v2: memory.high within 20% of the 300 MiB working set {converged:.1} s after the \
         daemon started (v1: 11 s)\n{trace}"
    );
    run.assert_no_oom_kill(&["ws"]);
    run.assert_files_equal("before", "after", &["ws"]);
}

/// The back-off rails on v2's per-cgroup signals, and the v2 rescue: "hot" touches 300 MiB
/// (incompressible, so each page back from zram costs a decompression) under a 200 MiB budget,
/// with TWS. memtide shrinks it toward the budget in steps of 1% (at the default 5% it reaches
/// the budget in 2 s, before a 10 s average can rise); once its memory.high is under the
/// working set the kernel throttles the tenant, and memtide holds the shrink on the signal
/// `rails` leaves in reach (a `hold` naming it) and, its own memory.pressure (some avg10)
/// passing the default `backoff_pressure` of 10%, raises memory.high at once (`rescued`). The
/// fault back-off is set out of reach. Nobody is OOM-killed; SIGTERM gives every file back.
fn throttled_tenant_is_held_and_rescued(test: &str, log_name: &str, rails: &str, held: &str) {
    let conf = config(
        9464,
        &format!("/run/memtide/{log_name}.json"),
        "200M",
        &format!("\n[rails]\nbackoff_refaults_per_s = 1000000000\nshrink_step = 0.01\n{rails}"),
        &[("hot", "64M", "1G")],
    )
    .replace("estimator = \"sampling\"", "estimator = \"tws\"");
    let body = format!(
        r#"
mkdir $CG/hot
echo 1G >$CG/hot/memory.max
tenant hot --active 300M --pause-ms 50
filled hot $((298 << 20)) 60
files before
sample
{{}}daemon /etc/memtide/{log_name}.toml /run/memtide/{log_name}.log
sampler &
SP=$!
wait_until 50 sh -c "grep -q '{held}' /run/memtide/{log_name}.log && grep -q rescued /run/memtide/{log_name}.log" ||
    say "note what=no-hold-or-rescue"
sleep 2
stop TERM {log_name}
kill $SP
sample
files after
dump {log_name} /run/memtide/{log_name}.log
"#
    )
    .replace("{}", &write_file(&format!("/etc/memtide/{log_name}.toml"), &conf));
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, log_name);
    let trace = trace(&run, "hot");
    let peak = run
        .samples("hot")
        .iter()
        .map(|s| s.get("some_avg10").parse::<f64>().unwrap_or(0.0))
        .fold(0.0, f64::max);
    let log = run.log(log_name);
    let holds: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" hold ") && l.contains(held))
        .collect();
    let rescues: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" rescued ") && l.contains("throttled over its memory.high"))
        .collect();
    println!(
        "{held} on v2: the tenant's some avg10 peaked at {peak:.1}%\n{}\n{}\n{trace}",
        holds.join("\n"),
        rescues.join("\n")
    );
    assert!(
        peak >= 10.0,
        "the tenant's memory.pressure never reached backoff_pressure (10%): peak {peak:.1}%\n{trace}"
    );
    assert!(
        !holds.is_empty(),
        "memtide never held a shrink {held:?} (peak {peak:.1}%):\n{log}"
    );
    // Held is not enough once memory.high is under the working set: the v2 rescue raises it.
    assert!(
        !rescues.is_empty(),
        "memtide never raised the throttled tenant's memory.high (peak {peak:.1}%):\n{log}"
    );
    run.assert_no_oom_kill(&["hot"]);
    run.assert_files_equal("before", "after", &["hot"]);
}

/// The hold on the tenant's own memory.pressure, the throttling back-off out of reach.
#[test]
fn on_v2_a_shrink_holds_while_the_tenants_own_memory_pressure_is_high() {
    let _gate = memtide_testkit::file_gate(module_path!());
    throttled_tenant_is_held_and_rescued(
        "on_v2_a_shrink_holds_while_the_tenants_own_memory_pressure_is_high",
        "f",
        "backoff_throttled_per_s = 1000000000",
        "backing off: pressure",
    );
}

/// The hold on memory.events `high`: this tick's count, so the rails name it before the
/// 10-second pressure average, which lags it. At 10 a second, not the default 100: the
/// default is reckoned for a tenant charging some 25 MiB/s over its limit, and the toucher in
/// a TCG guest charges slower, so its count hovered around 100 and the pressure average
/// crossed first in one CI run in several (2026-11-30: pressure 13.6%, no throttled hold).
#[test]
fn on_v2_a_shrink_holds_while_the_kernel_throttles_the_tenant() {
    let _gate = memtide_testkit::file_gate(module_path!());
    throttled_tenant_is_held_and_rescued(
        "on_v2_a_shrink_holds_while_the_kernel_throttles_the_tenant",
        "g",
        "backoff_throttled_per_s = 10",
        "backing off: throttled",
    );
}

/// `parent = "self"` as under systemd's `Delegate=yes`: the daemon runs in /svc (a cgroup of
/// the hierarchy's children, memory offered but not enabled there) and launches two tenants
/// beside itself. It moves into /svc/memtide-daemon, enables memory for /svc's children,
/// launches both with memory files of their own and, on SIGTERM, stops them, removes their
/// cgroups, disables the controller again and moves back out of its leaf (removed). Then the
/// same from /svc2, where another process stays: the start is refused in one line naming
/// /svc2, and nothing memtide made is left.
#[test]
fn on_v2_parent_self_delegates_memory_from_memtide_s_own_leaf_and_gives_it_back() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_parent_self_delegates_memory_from_memtide_s_own_leaf_and_gives_it_back";
    let conf = |port: u16, name: &str| {
        format!(
            "[daemon]\ntick = \"500ms\"\nlisten = \"127.0.0.1:{port}\"\n\
             state_file = \"/run/memtide/{name}.json\"\n\n\
             [host]\nparent = \"self\"\nbudget = \"400M\"\n\n\
             [[tenant]]\nname = \"busy\"\ncommand = [\"memtide-toucher\", \"--active\", \"120M\", \"--content\", \"zero\"]\n\
             min = \"32M\"\nmax = \"300M\"\n\n\
             [[tenant]]\nname = \"idle\"\ncommand = [\"memtide-toucher\", \"--active\", \"8M\", \"--idle\", \"100M\", \"--content\", \"zero\"]\n\
             min = \"32M\"\nmax = \"300M\"\n"
        )
    };
    let body = format!(
        r#"
S=/sys/fs/cgroup/svc
mkdir $S /sys/fs/cgroup/svc2
# A shell in /svc starts the daemon there, as systemd starts a delegated service.
say "svc before subtree=[$(cat $S/cgroup.subtree_control)] offered=$(tr ' ' , <$S/cgroup.controllers)"
{}{}sh -c 'echo $$ >/sys/fs/cgroup/svc/cgroup.procs && exec memtide daemon --config /etc/memtide/s.toml' >/dev/null 2>>/run/memtide/s.log &
DPID=$!
wait_until 60 sh -c "[ -d $S/busy ] && [ -d $S/idle ] && [ \$(cat $S/busy/memory.current) -ge $((100 << 20)) ]" ||
    say "error what=launch subtree=[$(cat $S/cgroup.subtree_control)]"
say "svc running subtree=[$(cat $S/cgroup.subtree_control)] daemon=$(cut -d: -f3 /proc/$DPID/cgroup)" \
    "busy_high=$(cat $S/busy/memory.high) idle_high=$(cat $S/idle/memory.high)" \
    "children=$(cd $S && ls -d */ | tr -d / | tr '\n' ,)"
sleep 3
stop TERM s
say "svc after subtree=[$(cat $S/cgroup.subtree_control)] children=[$(cd $S && ls -d */ 2>/dev/null | tr -d / | tr '\n' ,)]"
dump s /run/memtide/s.log
# Another process in /svc2 besides the daemon: memory cannot be enabled there.
sleep 300 &
echo $! >/sys/fs/cgroup/svc2/cgroup.procs
sh -c 'echo $$ >/sys/fs/cgroup/svc2/cgroup.procs && exec memtide daemon --config /etc/memtide/r.toml' >/dev/null 2>/run/memtide/r.log
say "refused status=$? subtree=[$(cat /sys/fs/cgroup/svc2/cgroup.subtree_control)] children=[$(cd /sys/fs/cgroup/svc2 && ls -d */ 2>/dev/null | tr -d / | tr '\n' ,)]"
dump r /run/memtide/r.log
"#,
        write_file("/etc/memtide/s.toml", &conf(9470, "s")),
        write_file("/etc/memtide/r.toml", &conf(9471, "r")),
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "s");
    let svc = run.lines("svc");
    let phase = |p: &str| {
        svc.iter()
            .find(|l| l.text.contains(&format!("svc {p} ")))
            .unwrap_or_else(|| panic!("no {p} line:\n{}", run.tail(80)))
    };
    assert_eq!(phase("before").get("subtree"), "[]");
    let running = phase("running");
    assert_eq!(running.get("subtree"), "[memory]", "{}", running.text);
    assert_eq!(
        running.get("daemon"),
        "/svc/memtide-daemon",
        "{}",
        running.text
    );
    for t in ["busy_high", "idle_high"] {
        assert!(
            running.bytes(t).is_some(),
            "a launched tenant has no memory.high of its own: {}",
            running.text
        );
    }
    let stopped = &run.lines("daemon")[0];
    assert_eq!(
        stopped.get("status"),
        "0",
        "{}\n{}",
        stopped.text,
        run.log("s")
    );
    let after = phase("after");
    assert_eq!(
        (after.get("subtree"), after.get("children")),
        ("[]", "[]"),
        "memtide left its changes to /svc: {}\n{}",
        after.text,
        run.log("s")
    );
    let refused = &run.lines("refused")[0];
    let log = run.log("r");
    assert_ne!(refused.get("status"), "0", "{}\n{log}", refused.text);
    assert!(
        log.lines()
            .any(|l| l.contains("/svc2") && l.contains("memory controller")),
        "the refusal does not name /svc2:\n{log}"
    );
    assert_eq!(
        (refused.get("subtree"), refused.get("children")),
        ("[]", "[]"),
        "a refused start left something in /svc2: {}\n{log}",
        refused.text
    );
}

/// A tenant's life on v2 around a running daemon: "gone", whose process exits, is dropped and
/// gets back every file memtide may change while the daemon runs on; "idle", removed from the
/// config and SIGHUP sent, is released with its files as they were; "busy" is given back at
/// SIGTERM. Originals are set to non-defaults first, so a restore is told from a reset.
#[test]
fn on_v2_an_emptied_tenant_and_one_removed_by_sighup_get_their_files_back_at_once() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_an_emptied_tenant_and_one_removed_by_sighup_get_their_files_back_at_once";
    let all = [
        ("busy", "32M", "500M"),
        ("idle", "32M", "500M"),
        ("gone", "32M", "500M"),
    ];
    let three = config(9466, "/run/memtide/l.json", "220M", "tax_rate = 0.75", &all);
    let two = config(
        9466,
        "/run/memtide/l.json",
        "220M",
        "tax_rate = 0.75",
        &[all[0], all[2]],
    );
    let body = format!(
        r#"
tenant busy --active 100M --content zero
tenant idle --active 8M --idle 150M --content zero
tenant gone --active 60M --content zero
echo 600M >$CG/idle/memory.high
echo 4M >$CG/gone/memory.low
echo 900M >$CG/gone/memory.max
echo 1 >$CG/busy/memory.oom.group
filled busy $((98 << 20)) 60
filled idle $((155 << 20)) 60
filled gone $((58 << 20)) 60
files before
{}daemon /etc/memtide/l.toml /run/memtide/l.log
sampler &
SP=$!
wait_until 50 sh -c "[ \$(cat $CG/idle/memory.high) -lt $((150 << 20)) ] && [ \$(cat $CG/gone/memory.high) != max ]" ||
    say "note what=never-limited"
files limited
kill $(cat $CG/gone/cgroup.procs)
logged dropped /run/memtide/l.log 30
files dropped
{}kill -HUP $DPID
logged released /run/memtide/l.log 30
files reloaded
sleep 2
stop TERM l
kill $SP
files after
dump l /run/memtide/l.log
"#,
        write_file("/etc/memtide/l.toml", &three),
        write_file("/etc/memtide/l.toml", &two),
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "l");
    let log = run.log("l");
    for (tenant, key) in [("idle", "high"), ("gone", "high")] {
        assert_ne!(
            run.files("limited", tenant).get(key),
            run.files("before", tenant).get(key),
            "memtide never changed {tenant}'s memory.{key}:\n{log}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.contains("dropped") && l.contains("gone")),
        "{log}"
    );
    assert!(log.contains("reloaded"), "{log}");
    run.assert_files_equal("before", "dropped", &["gone"]);
    run.assert_files_equal("before", "reloaded", &["idle", "gone"]);
    let stopped = &run.lines("daemon")[0];
    assert_eq!(stopped.get("status"), "0", "{}\n{log}", stopped.text);
    run.assert_no_oom_kill(&["busy", "idle"]);
    run.assert_files_equal("before", "after", &["busy", "idle", "gone"]);
}

/// One argument for the guest's shell, single-quoted.
fn quoted(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// A QEMU VM in a v2 cgroup, adopted by its QMP socket. Nested TCG boots the tiny guest too
/// slowly for a test (docs/linux.md, "cgroup v2 in a guest": 106-166 s to its balloon driver), so the VM
/// is the one memtide would launch (q35, virtio-balloon, QMP, the same kernel and initramfs)
/// started paused (`-S`) with its 256 MiB preallocated (`-mem-prealloc`): a guest that holds
/// its memory and whose balloon driver never runs. The QEMU starts inside /memtide/vm with
/// non-default memory.high and memory.oom.group. memtide adopts it (its cgroup found from the
/// socket's peer), sees no balloon driver and asks the balloon nothing, and pages the VM out
/// through memory.high (host swap: the guest's zram takes QEMU's memory) under a 96 MiB
/// budget. After SIGTERM the VM is as found: QEMU alive in its cgroup, QMP answering, the
/// balloon where it was, still `prelaunch` (never started: memtide resumes only a VM it
/// paused itself), and every memory file of the cgroup as it read before. No OOM kill.
#[test]
fn on_v2_a_paused_vm_is_adopted_paged_out_by_memory_high_and_left_as_found() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_a_paused_vm_is_adopted_paged_out_by_memory_high_and_left_as_found";
    let Some(image) = crate::host::vm::guest(test) else {
        return;
    };
    let extra = Extra::qemu(&image);
    let share = std::path::Path::new(IMAGE_IN_GUEST);
    let spec = memtide_qemu::vm::LaunchSpec {
        qemu: "qemu-system-x86_64".to_string(),
        kernel: Some(share.join("vmlinuz")),
        initrd: Some(share.join("initramfs.cpio.gz")),
        disk: None,
        memory: memtide_model::Bytes(256 * MIB),
        cpus: 1,
        append: Some(image.append("memtide-toucher --active 64M", "memtide.zram=0")),
        // The test's own QMP monitor, on TCP for busybox's nc; memtide's is the Unix socket.
        args: [
            "-S",
            "-mem-prealloc",
            "-qmp",
            "tcp:127.0.0.1:4445,server=on,wait=off",
        ]
        .map(String::from)
        .to_vec(),
        kvm: false,
    };
    let argv = spec
        .argv(
            std::path::Path::new("/run/vm/qmp.sock"),
            std::path::Path::new("/run/vm/console.log"),
        )
        .iter()
        .map(|a| quoted(a))
        .collect::<Vec<_>>()
        .join(" ");
    let conf = config(9464, "/run/memtide/v.json", "96M", "", &[])
        + "\n[[tenant]]\nname = \"vm\"\nmin = \"32M\"\nmax = \"1G\"\nestimator = \"sampling\"\n\
           [tenant.vm]\nqmp = \"/run/vm/qmp.sock\"\n";
    let body = format!(
        r#"
# COMMAND...: QMP commands without arguments on the test's own monitor; the answers' lines.
qmp() {{
    {{ echo '{{"execute":"qmp_capabilities"}}'; for c in "$@"; do echo "{{\"execute\":\"$c\"}}"; done; sleep 2; }} |
        timeout 10 nc 127.0.0.1 4445
}}
# PHASE: the VM as QEMU tells it, and whether its process lives.
vm() {{
    a=$(qmp query-status query-balloon)
    say "vm phase=$1 status=$(echo "$a" | sed -n 's/.*"status": *"\([a-z-]*\)".*/\1/p')" \
        "actual=$(echo "$a" | sed -n 's/.*"actual": *\([0-9]*\).*/\1/p')" \
        "alive=$(kill -0 $QPID 2>/dev/null && echo 1 || echo 0)" \
        "procs=$(cat $CG/vm/cgroup.procs | tr '\n' ,)"
}}
mkdir $CG/vm /run/vm
echo 900M >$CG/vm/memory.high
echo 1 >$CG/vm/memory.oom.group
TENANTS=vm
sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' $CG/vm {argv} 2>/run/vm/qemu.err &
QPID=$!
filled vm $((256 << 20)) 90
wait_until 30 test -S /run/vm/qmp.sock || say "error what=no-qmp-socket"
say "qemu pid=$QPID t=$(up)"
vm before
files before
sample
{config}daemon /etc/memtide/v.toml /run/memtide/v.log
sampler &
SP=$!
logged adopted /run/memtide/v.log 30
# Until host swap holds 128 MiB of the VM, then 3 s more.
wait_until 60 sh -c "[ \$(cat $CG/vm/memory.swap.current) -ge $((128 << 20)) ]" ||
    say "note what=never-paged-out"
sleep 3
say "api $(wget -qO- http://127.0.0.1:9464/v1/status | tr -d ' \n' | grep -o '"vm":{{[^}}]*}}' | tr -d '"{{}}' | sed 's/^vm://; s/:/=/g; s/,/ /g')"
vm during
stop TERM v
kill $SP
sample
files after
vm after
kill $QPID
wait $QPID
dump v /run/memtide/v.log
cat /run/vm/qemu.err | sed 's/^/memtide-v2: qemu-err /'
"#,
        config = write_file("/etc/memtide/v.toml", &conf),
    );
    let Some(run) = run_with(test, &body, GUEST_TIMEOUT, &extra) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "v");
    let log = run.log("v");
    let trace = trace(&run, "vm");
    let pid = run.lines("qemu")[0].get("pid").to_string();
    for phase in ["before", "during", "after"] {
        let vm = run
            .lines("vm")
            .into_iter()
            .find(|l| l.get("phase") == phase)
            .unwrap_or_else(|| panic!("no vm line in phase {phase}:\n{}", run.tail(80)));
        // prelaunch: never started; a `cont` would have made it "running".
        assert_eq!(vm.get("status"), "prelaunch", "{}\n{log}", vm.text);
        assert_eq!(
            vm.number("actual"),
            256 * MIB,
            "the balloon moved: {}",
            vm.text
        );
        assert_eq!(vm.get("alive"), "1", "{}", vm.text);
        assert_eq!(vm.get("procs"), format!("{pid},"), "{}", vm.text);
    }
    assert!(
        log.contains("adopted tenant=vm cgroup=/memtide/vm "),
        "the VM was not adopted in its v2 cgroup:\n{log}"
    );
    let limits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" limit tenant=vm ") && l.contains("outcome=lower"))
        .collect();
    assert!(
        limits
            .iter()
            .any(|l| l.contains("no balloon driver") && l.contains("host swap")),
        "memtide never lowered the VM's memory.high for host swap:\n{log}"
    );
    assert!(
        !log.contains(" balloon tenant=vm "),
        "memtide asked a balloon without a driver:\n{log}"
    );
    // The policy blocks the VM in the low state; memtide does not pause a VM that does not
    // run, so it resumes nothing either.
    assert!(
        log.contains("blocked until at target"),
        "the budget never blocked the VM (the low state):\n{log}"
    );
    assert!(
        !log.contains("vm_paused") && !log.contains("vm_resumed"),
        "memtide paused or resumed a VM it found not running:\n{log}"
    );
    let api = &run.lines("api")[0];
    assert_eq!(api.get("balloon_target_bytes"), "null", "{}", api.text);
    assert_eq!(api.number("balloon_bytes"), 0, "{}", api.text);
    assert!(
        api.number("host_swapped_bytes") >= 128 * MIB,
        "the API shows no host swap: {}",
        api.text
    );
    let samples = run.samples("vm");
    let held = samples[0].number("current");
    let paged = samples
        .iter()
        .find(|s| s.bytes("high").is_some_and(|h| h < held / 2) && s.number("swap") >= 128 * MIB);
    let paged = paged.unwrap_or_else(|| {
        panic!("memory.high never paged half of the VM's {held} bytes into swap:\n{trace}\n{log}")
    });
    println!(
        "a paused VM on v2: memory.high {:.0} MiB, {:.0} MiB of QEMU in host swap at {} s; \
         the guest ran {:.1} s\n{trace}",
        mib(paged.number("high")),
        mib(paged.number("swap")),
        paged.get("t"),
        run.elapsed.as_secs_f64()
    );
    let stopped = &run.lines("daemon")[0];
    assert_eq!(stopped.get("status"), "0", "{}\n{log}", stopped.text);
    run.assert_no_oom_kill(&["vm"]);
    run.assert_files_equal("before", "after", &["vm"]);
}

/// The seconds of the day of a daemon log line's timestamp (`…THH:MM:SS.mmmZ`).
fn logged_at(line: &str) -> f64 {
    let ts = line
        .split_whitespace()
        .find(|w| w.len() == 24 && w.ends_with('Z') && w.as_bytes()[10] == b'T')
        .unwrap_or_else(|| panic!("no timestamp in the log line {line:?}"));
    let hms: Vec<f64> = ts[11..23]
        .split(':')
        .map(|v| v.parse().expect("a time field"))
        .collect();
    hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]
}

/// Seconds from one log line's timestamp to the next's (across midnight too).
fn since(before: &str, after: &str) -> f64 {
    (logged_at(after) - logged_at(before)).rem_euclid(86_400.0)
}

/// The `to_bytes=` a log line names (a lowering's or a failed write's target).
fn to_bytes(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("to_bytes="))
}

/// memory.reclaim answering EAGAIN is pressure, and is not asked again each tick: "pinned"
/// holds about 95 MiB of kernel memory the kernel cannot take back (the dentries and inodes
/// of 100,000 empty files on a tmpfs, which pins them; memory.stat counts them as slab, which
/// the floor does not count) and an idle 4 MiB. With TWS and `reclaim = "always"` the probe
/// lowers its memory.high under what it holds; memory.reclaim refuses (EAGAIN, a
/// `write_failed` naming it), the shrink is held with a `hold` naming the refusal (and the
/// tenant, at its limit with its reclaim refused, may be rescued), and memory.reclaim is
/// written again only after `RECLAIM_REFUSED_TICKS` ticks: consecutive refusals are at least
/// that far apart (0.5 s apart if memtide retried each tick; the gaps are printed). Nobody is
/// OOM-killed; SIGTERM gives every file back.
#[test]
fn on_v2_a_memory_reclaim_refused_with_eagain_holds_the_shrink_and_is_not_retried_each_tick() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test =
        "on_v2_a_memory_reclaim_refused_with_eagain_holds_the_shrink_and_is_not_retried_each_tick";
    let conf = config(
        9464,
        "/run/memtide/r.json",
        "600M",
        "reclaim = \"always\"",
        &[("pinned", "32M", "500M")],
    )
    .replace("estimator = \"sampling\"", "estimator = \"tws\"");
    let body = format!(
        r#"
mkdir -p /mnt/pin
mount -t tmpfs none /mnt/pin || say "error what=tmpfs"
mkdir $CG/pinned
echo 900M >$CG/pinned/memory.max
# The files are made from the tenant's cgroup, so their dentries and inodes are charged there.
sh -c 'echo $$ >"$0/cgroup.procs" && cd /mnt/pin && seq 1 100000 | xargs touch &&
    exec memtide-toucher --idle 4M --content zero' $CG/pinned >/dev/null 2>&1 &
TENANTS="$TENANTS pinned"
M=$CG/pinned/memory.stat
# Until the files are made and the toucher holds its 4 MiB.
touched() {{ [ "$(val $M anon)" -ge $((4 << 20)) ]; }}
wait_until 60 touched || say "error what=fill anon=$(val $M anon)"
say "pinned current=$(cat $CG/pinned/memory.current) slab=$(val $M slab) anon=$(val $M anon)" \
    "file=$(val $M file) shmem=$(val $M shmem) unevictable=$(val $M unevictable)"
files before
sample
{}daemon /etc/memtide/r.toml /run/memtide/r.log
sampler &
SP=$!
# Three refusals (two at least), RECLAIM_REFUSED_TICKS ticks apart if memtide backs off (0.5 s
# if not): 6-33 s measured, as the probe's cool-downs fall.
wait_until 40 sh -c "[ \$(grep -c 'write_failed.*memory.reclaim' /run/memtide/r.log) -ge 3 ]" ||
    say "note what=fewer-than-3-refusals"
stop TERM r
kill $SP
sample
files after
tail -n 300 /run/memtide/r.log | sed "s/^/memtide-v2: log name=r /"
"#,
        write_file("/etc/memtide/r.toml", &conf)
    );
    let Some(run) = run(test, &body, GUEST_TIMEOUT) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "r");
    let pinned = &run.lines("pinned")[0];
    let log = run.log("r");
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" write_failed ") && l.contains("memory.reclaim"))
        .collect();
    let holds: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" hold ") && l.contains("could not reclaim down to its limit"))
        .collect();
    let lowerings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" tenant=pinned ") && l.contains(" outcome=lower "))
        .collect();
    let rescues = log.lines().filter(|l| l.contains(" rescued ")).count();
    let gaps: Vec<f64> = refusals.windows(2).map(|w| since(w[0], w[1])).collect();
    println!(
        "{}\nrefused memory.reclaim {} times, gaps {gaps:.1?} s; {} holds naming it, {rescues} \
         rescues\n{}\n{}\nlowerings:\n{}\n{}",
        pinned.text,
        refusals.len(),
        holds.len(),
        refusals.join("\n"),
        holds.join("\n"),
        lowerings.join("\n"),
        trace(&run, "pinned")
    );
    assert!(
        pinned.number("slab") >= 80 * MIB,
        "the tenant's pinned kernel memory: {}",
        pinned.text
    );
    assert!(
        refusals.len() >= 2,
        "memory.reclaim was not refused twice:\n{log}"
    );
    assert!(
        refusals
            .iter()
            .all(|l| l.contains("EAGAIN") && l.contains("tenant=pinned")),
        "{log}"
    );
    // The tick is 500 ms; a quarter tick of the timer's slack.
    let least = f64::from(memtide_linux::host::RECLAIM_REFUSED_TICKS) * 0.5 - 0.25;
    for (gap, pair) in gaps.iter().zip(refusals.windows(2)) {
        assert!(
            *gap >= least,
            "memory.reclaim asked again {gap:.2} s after the kernel refused it (at least \
             {least} s):\n{}\n{}\n{log}",
            pair[0],
            pair[1]
        );
    }
    // A refusal holds shrinks: a hold names it after the first, and no lowering is written
    // for RECLAIM_REFUSED_TICKS ticks after any. The lowering whose reclaim was refused is
    // logged in the same tick, after it (tens of milliseconds later in a busy TCG guest): it
    // names the same target and comes before the next tick. Between two later refusals the
    // policy may only raise, and then there is no shrink to hold.
    assert!(
        holds.iter().any(|h| since(refusals[0], h) <= least + 0.5),
        "no hold naming the refusal within {} ticks after\n{}\n{log}",
        memtide_linux::host::RECLAIM_REFUSED_TICKS,
        refusals[0]
    );
    for refusal in &refusals {
        let target = to_bytes(refusal);
        let lowered = log.lines().find(|l| {
            let after = since(refusal, l);
            let its_own = to_bytes(l) == target && after < 0.5;
            l.contains(" outcome=lower ") && (0.0..least).contains(&after) && !its_own
        });
        assert!(
            lowered.is_none(),
            "a lowering {:.2} s after the kernel refused memory.reclaim:\n{refusal}\n{}\n{log}",
            since(refusal, lowered.unwrap_or_default()),
            lowered.unwrap_or_default()
        );
    }
    run.assert_no_oom_kill(&["pinned"]);
    run.assert_files_equal("before", "after", &["pinned"]);
}

/// A hello in the Rust SDK's shape for the sending process (`{pid}`: memtide-attack fills it
/// in), as the security tests send it.
const HELLO: &str = r#"{"type":"hello","version":1,"app":"probe","kind":"buffer_pool","pid":{pid},"pool_bytes":67108864,"min_bytes":16777216,"max_bytes":134217728,"granule_bytes":1048576}\n"#;

/// Two guarantees in one guest. memory.oom.group: "group" (memory.oom.group = 1, two
/// processes: 16 MiB active, 120 MiB touched once) shrinks under the idle tax beside "busy"
/// (150 MiB active) under a 250 MiB budget; memtide lowers its memory.high, never changes
/// memory.oom.group (1 at every sample), no OOM kill of either kind is counted in
/// memory.events, both processes are alive at the end, and SIGTERM gives every file back.
/// The balloon socket's identity on v2: a process in /memtide/busy/agent (below a managed
/// tenant's cgroup, `0::/memtide/busy/agent` in /proc/PID/cgroup) is welcomed as "busy"; one
/// in /memtide/elsewhere (no tenant's) and one in the root cgroup are refused with an
/// `identity` error; only the first registers.
#[test]
fn on_v2_memory_oom_group_is_left_alone_and_the_balloon_socket_knows_a_tenant_s_process() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test =
        "on_v2_memory_oom_group_is_left_alone_and_the_balloon_socket_knows_a_tenant_s_process";
    let conf = config(
        9464,
        "/run/memtide/o.json",
        "250M",
        "tax_rate = 0.75",
        &[("busy", "32M", "500M"), ("group", "32M", "500M")],
    ) + "\n[balloon]\nenabled = true\n";
    let body = format!(
        r#"
tenant busy --active 150M --content zero
mkdir $CG/group
echo 1 >$CG/group/memory.oom.group
echo 800M >$CG/group/memory.max
for set in "--active 16M" "--idle 120M"; do
    sh -c 'echo $$ >"$0/cgroup.procs" && exec memtide-toucher "$@"' $CG/group $set --content zero >/dev/null 2>&1 &
done
TENANTS="$TENANTS group"
filled busy $((148 << 20)) 60
filled group $((134 << 20)) 60
G0=$(sort -n $CG/group/cgroup.procs | tr '\n' ,)
files before
sample
{}daemon /etc/memtide/o.toml /run/memtide/o.log
sampler &
SP=$!
while :; do say "group t=$(up) oom.group=$(cat $CG/group/memory.oom.group) procs=$(sort -n $CG/group/cgroup.procs | tr '\n' ,)"; sleep 0.5; done &
GP=$!
wait_until 20 test -S /run/memtide/balloon.sock || say "error what=no-balloon-socket"
# WHERE: memtide-attack says hello from cgroup WHERE (under /sys/fs/cgroup) and reads 3 s.
agent() {{
    mkdir -p /sys/fs/cgroup/$1
    out=$(sh -c 'echo $$ >"$0/cgroup.procs" && cat /proc/$$/cgroup >&2 &&
        exec memtide-attack request --unix /run/memtide/balloon.sock --send "$1" --timeout 3' \
        /sys/fs/cgroup/$1 '{}' 2>&1)
    say "agent where=$1 cgroup=$(echo "$out" | grep '^0::' | head -n 1)" \
        "welcome=$(echo "$out" | grep -c '"type":"welcome"')" \
        "tenant=$(echo "$out" | grep -o '"tenant":"[^"]*"' | head -n 1 | cut -d'"' -f4)" \
        "identity=$(echo "$out" | grep -c '"code":"identity"')"
    echo "$out" | sed "s|^|memtide-v2: reply where=$1 |"
}}
agent memtide/busy/agent
agent memtide/elsewhere
agent .
rmdir /sys/fs/cgroup/memtide/busy/agent /sys/fs/cgroup/memtide/elsewhere
# Until group gave 48 MiB, then 4 s more.
wait_until 50 sh -c "[ \$(cat $CG/group/memory.current) -lt $((90 << 20)) ]" ||
    say "note what=group-never-fell"
sleep 4
stop TERM o
kill $SP $GP
sample
say "end procs=$(sort -n $CG/group/cgroup.procs | tr '\n' ,) before=$G0"
files after
dump o /run/memtide/o.log
"#,
        write_file("/etc/memtide/o.toml", &conf),
        HELLO
    );
    let extra = Extra::default().program(memtide_testkit::attack_path());
    let Some(run) = run_with(test, &body, GUEST_TIMEOUT, &extra) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "o");
    let log = run.log("o");
    let trace = trace(&run, "group");

    // memory.oom.group.
    let groups = run.lines("group");
    let end = &run.lines("end")[0];
    let before = end.get("before");
    println!(
        "group: {} samples, processes {before} before, {} at the end\n{trace}",
        groups.len(),
        end.get("procs")
    );
    assert_eq!(before.split(',').filter(|p| !p.is_empty()).count(), 2);
    assert_eq!(end.get("procs"), before, "a process of group died:\n{log}");
    assert!(!groups.is_empty(), "{}", run.tail(80));
    for g in &groups {
        assert_eq!(
            g.get("oom.group"),
            "1",
            "memory.oom.group changed: {}",
            g.text
        );
        assert_eq!(g.get("procs"), before, "{}", g.text);
    }
    assert!(
        run.samples("group")
            .iter()
            .any(|s| s.bytes("high").is_some_and(|h| h < 100 * MIB)),
        "memtide never lowered group's memory.high under 100 MiB:\n{trace}"
    );
    run.assert_no_oom_kill(&["busy", "group"]);
    run.assert_files_equal("before", "after", &["busy", "group"]);

    // The balloon socket's identity.
    let agents = run.lines("agent");
    let agent = |where_: &str| {
        agents
            .iter()
            .find(|a| a.get("where") == where_)
            .unwrap_or_else(|| panic!("no agent line for {where_}:\n{}", run.tail(80)))
    };
    for a in &agents {
        println!("{}", a.text);
    }
    let inside = agent("memtide/busy/agent");
    assert!(
        inside.text.contains("cgroup=0::/memtide/busy/agent"),
        "{}",
        inside.text
    );
    assert_eq!(
        (
            inside.get("welcome"),
            inside.get("tenant"),
            inside.get("identity")
        ),
        ("1", "busy", "0"),
        "a process below busy's cgroup is busy's agent: {}\n{log}",
        inside.text
    );
    for outside in ["memtide/elsewhere", "."] {
        let a = agent(outside);
        assert_eq!(
            (a.get("welcome"), a.get("identity")),
            ("0", "1"),
            "a process in no tenant was not refused: {}\n{log}",
            a.text
        );
    }
    let registered: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("agent_registered"))
        .collect();
    assert_eq!(registered.len(), 1, "{log}");
    assert!(registered[0].contains("tenant=busy"), "{log}");
}

/// Disk tenants on v2 (the guest's 64 MiB virtio disk, /dev/vda): the guest's kernel (Debian
/// 6.1 cloud) has no BFQ module in the image (vda offers none and mq-deadline) and blk-iocost
/// built in, so memtide weighs through `io.weight` (said in its `io` start line) and caps
/// through `io.max`, with `scheduler = "keep"`. "heavy" (io.weight 250 beforehand) is given
/// its configured weight 500 and its write cap (wiops=1000), "light" (riops=5000 beforehand)
/// its weight 50 and its read cap (rbps=10M, as configured: the other directions unlimited);
/// SIGTERM gives back both cgroups' weights and io.max lines, and the device's scheduler is
/// untouched.
#[test]
fn on_v2_disk_tenants_get_their_io_weight_and_io_max_and_sigterm_gives_them_back() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "on_v2_disk_tenants_get_their_io_weight_and_io_max_and_sigterm_gives_them_back";
    let conf = config(
        9464,
        "/run/memtide/i.json",
        "600M",
        "",
        &[("heavy", "16M", "500M"), ("light", "16M", "500M")],
    )
    .replace(
        "name = \"heavy\"",
        "name = \"heavy\"\nio = { weight = 500, write_iops = 1000 }",
    )
    .replace(
        "name = \"light\"",
        "name = \"light\"\nio = { weight = 50, read_bps = \"10M\" }",
    ) + "\n[io]\nenabled = true\ndevice = \"/dev/vda\"\nscheduler = \"keep\"\n";
    let body = format!(
        r#"
modprobe virtio_blk || say "error what=virtio_blk"
wait_until 10 test -b /dev/vda || say "error what=no-vda"
DEV=$(cat /sys/block/vda/dev)
mkdir $CG/heavy $CG/light
echo "default 250" >$CG/heavy/io.weight
echo "$DEV riops=5000" >$CG/light/io.max
tenant heavy --active 8M --content zero
tenant light --active 8M --content zero
filled heavy $((8 << 20)) 30
filled light $((8 << 20)) 30
# PHASE: each tenant's io.weight default and io.max line for vda (- when it has none).
io() {{
    for n in heavy light; do
        say "io phase=$1 tenant=$n weight=$(awk '$1 == "default" {{ print $2 }}' $CG/$n/io.weight)" \
            "max=$(grep "^$DEV " $CG/$n/io.max | tr ' ' , | grep . || echo -)" \
            "scheduler=$(echo $(cat /sys/block/vda/queue/scheduler) | tr ' ' ,)"
    done
}}
io before
files before
sample
{}daemon /etc/memtide/i.toml /run/memtide/i.log
wait_until 30 sh -c "grep -q 'default 500' $CG/heavy/io.weight && grep -q 'default 50\$' $CG/light/io.weight" ||
    say "note what=never-weighed"
sleep 2
io running
stop TERM i
sample
io after
files after
dump i /run/memtide/i.log
"#,
        write_file("/etc/memtide/i.toml", &conf)
    );
    let extra = Extra {
        disk_mib: Some(64),
        ..Extra::default()
    };
    let Some(run) = run_with(test, &body, GUEST_TIMEOUT, &extra) else {
        return;
    };
    run.assert_no_errors();
    assert_v2(&run, "i");
    let log = run.log("i");
    let io = |phase: &str, tenant: &str| {
        run.lines("io")
            .into_iter()
            .find(|l| l.get("phase") == phase && l.get("tenant") == tenant)
            .unwrap_or_else(|| panic!("no io line of {tenant} in {phase}:\n{}", run.tail(80)))
    };
    for l in run.lines("io") {
        println!("{}", l.text);
    }
    let start = log
        .lines()
        .find(|l| l.contains(" io device=vda"))
        .unwrap_or_else(|| panic!("no io start line:\n{log}"));
    assert!(
        start.contains("weights=io.weight") && start.contains("scheduler=none"),
        "{start}"
    );
    let dev = io("before", "heavy").get("scheduler").to_string();
    assert_eq!(dev, "[none],mq-deadline", "the guest's vda offers no BFQ");
    let want = |phase: &str, tenant: &str, weight: &str, max: &str| {
        let l = io(phase, tenant);
        let line_max = l.get("max").split_once(',').map_or("-", |(_, caps)| caps);
        assert_eq!(
            (l.get("weight"), line_max),
            (weight, max),
            "{tenant}'s io.weight and io.max in phase {phase}: {}\n{log}",
            l.text
        );
    };
    want("before", "heavy", "250", "-");
    want(
        "before",
        "light",
        "100",
        "rbps=max,wbps=max,riops=5000,wiops=max",
    );
    want(
        "running",
        "heavy",
        "500",
        "rbps=max,wbps=max,riops=max,wiops=1000",
    );
    want(
        "running",
        "light",
        "50",
        "rbps=10485760,wbps=max,riops=max,wiops=max",
    );
    for tenant in ["heavy", "light"] {
        let (b, a) = (io("before", tenant), io("after", tenant));
        assert_eq!(
            (b.get("weight"), b.get("max"), b.get("scheduler")),
            (a.get("weight"), a.get("max"), a.get("scheduler")),
            "{tenant}'s disk settings not given back:\n{}\n{}\n{log}",
            b.text,
            a.text
        );
    }
    let stopped = &run.lines("daemon")[0];
    assert_eq!(stopped.get("status"), "0", "{}\n{log}", stopped.text);
    run.assert_no_oom_kill(&["heavy", "light"]);
    run.assert_files_equal("before", "after", &["heavy", "light"]);
}
