#!/usr/bin/env python3
"""bench-senpai.py: the tables of scripts/bench-senpai.sh (python3, standard library only).

  bench-senpai.py [--idle SECONDS] [--markdown] CONSOLE...

Each CONSOLE is one guest's serial console (MANAGER.console, the manager's name taken from the
file name; `none` is the baseline). Reads its `bench: ` lines and prints, per workload (the
toucher pair: tenants busy and idle; redis: its idle phase [0, IDLE) and busy phase [IDLE, end)),
one row per figure and one column per manager:

- memory: the mean over the run of the workload's summed memory.current (the time integral
  divided by the time, trapezoids over the samples), its saving against `none` over the same
  span, and the same for the last 30 s;
- within 5% of the end: the first time after which every one of them stays within 5% of its
  value at the end of the span (a slow creep settles by the windows, not by this);
- settle: the first time after which no 10 s window of any of the workload's tenants' memory.high
  (where set) or memory.current spans more than 5% (`never` when the last window still does);
- the busy tenant's throughput and latency: the toucher's passes per second and pass times (the
  time of the last pass at each 1 s report; mean, 95th percentile, max), redis-benchmark's GETs
  per second and p50/p99 (median over its windows in the busy phase);
- refaults and major faults over the span (memory.stat deltas), per tenant;
- memory.pressure `some`: avg10 peak and mean over the samples, total stall (µs) delta;
- the manager's CPU: utime+stime of its processes over the whole run (all three tenants).
"""

import argparse
import os
import statistics
import sys

MIB = 1 << 20


def parse(path):
    samples = {}  # tenant -> list of dicts
    cpu = []
    toucher = []
    redis = []
    info = {}
    for raw in open(path, errors="replace"):
        line = raw.strip()
        at = line.find("bench: ")
        if at < 0:
            continue
        words = line[at + len("bench: "):].split()
        if not words:
            continue
        kind, fields = words[0], {}
        for w in words[1:]:
            if "=" in w:
                k, v = w.split("=", 1)
                fields[k] = v
        if kind == "sample":
            samples.setdefault(fields["tenant"], []).append(fields)
        elif kind == "cpu":
            cpu.append((float(fields["t"]), int(fields["ticks"]), int(fields["hz"])))
        elif kind == "toucher":
            toucher.append(fields["json"])
        elif kind == "redis":
            redis.append(fields)
        elif kind == "toucher-clock":
            info["stamp"] = (float(fields["t"]), float(fields["t_s"]))
        elif kind in ("start", "manager-started", "busy-phase", "redis-stats", "oom", "filled"):
            info[kind] = " ".join(words[1:])
    return samples, cpu, toucher, redis, info


def num(s, key):
    v = s.get(key, "")
    if v in ("", "max"):
        return None
    return float(v)


def series(samples, key):
    out = []
    for s in samples:
        v = num(s, key)
        if v is not None:
            out.append((float(s["t"]), v))
    return out


def mean_over(points, lo, hi):
    """Time-weighted mean of a step-free (trapezoid) series within [lo, hi]."""
    pts = [(t, v) for t, v in points if lo <= t <= hi]
    if len(pts) < 2:
        return pts[0][1] if pts else None
    area = sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(pts, pts[1:]))
    return area / (pts[-1][0] - pts[0][0])


def summed(samples, tenants, key="current"):
    by_t = {}
    for n in tenants:
        for s in samples.get(n, []):
            v = num(s, key)
            by_t.setdefault(s["t"], []).append(v or 0.0)
    return sorted((float(t), sum(v)) for t, v in by_t.items() if len(v) == len(tenants))


def settle(samples, tenants, lo, hi):
    """First time (from lo) after which no 10 s window of high (where set) or current moves >5%."""
    last_bad = None
    for n in tenants:
        ss = [s for s in samples.get(n, []) if lo <= float(s["t"]) <= hi]
        for key in ("high", "current"):
            pts = [(float(s["t"]), num(s, key)) for s in ss]
            for i, (t0, v0) in enumerate(pts):
                window = [v for t, v in pts[i:] if t <= t0 + 10]
                if any(v is None for v in window):
                    # high is "max" somewhere in the window: moving only if it changes state
                    if all(v is None for v in window):
                        continue
                    bad = True
                else:
                    bad = max(window) > min(window) * 1.05
                if bad:
                    end = max(t for t, _ in pts[i:] if t <= t0 + 10)
                    last_bad = end if last_bad is None else max(last_bad, end)
    if last_bad is None:
        return 0.0
    if last_bad >= hi - 10:
        return None
    return last_bad - lo


def near_end(samples, tenants, lo, hi):
    """First time (from lo) after which every tenant's memory.high (where set) and
    memory.current stay within 5% of their values at hi: catches a slow creep, which the 10 s
    windows of settle() do not see."""
    first = 0.0
    for n in tenants:
        ss = [s for s in samples.get(n, []) if lo <= float(s["t"]) <= hi]
        if not ss:
            continue
        for key in ("high", "current"):
            final = num(ss[-1], key)
            for s in ss:
                v = num(s, key)
                off = (v is None) != (final is None) or (
                    v is not None and abs(v - final) > 0.05 * final)
                if off:
                    first = max(first, float(s["t"]) - lo)
    return first


def delta(samples, tenant, key, lo, hi):
    ss = [s for s in samples.get(tenant, []) if lo <= float(s["t"]) <= hi]
    if len(ss) < 2:
        return None
    a, b = num(ss[0], key), num(ss[-1], key)
    return None if a is None or b is None else b - a


def pressure(samples, tenant, lo, hi):
    ss = [s for s in samples.get(tenant, []) if lo <= float(s["t"]) <= hi]
    avg = [num(s, "some_avg10") or 0.0 for s in ss]
    return (max(avg) if avg else None, statistics.mean(avg) if avg else None,
            delta(samples, tenant, "some_total", lo, hi))


def toucher_figures(lines, stamp, run_end, lo, hi):
    """passes/s and pass times of the busy toucher within [lo, hi] of the run's clock.

    The toucher's t_s is its own clock from its start; the run's t = 0 is the manager's start.
    `stamp` is (run t, toucher t_s) read together in the guest at the end; without it (older
    consoles) the last report is taken as the run's last sample, a few seconds late."""
    import json

    reps = [json.loads(x) for x in lines if x.startswith("{")]
    if not reps:
        return None
    if stamp:
        shift = stamp[1] - stamp[0]
    else:
        shift = reps[-1]["t_s"] - run_end
    sel = [r for r in reps if lo <= r["t_s"] - shift <= hi and r.get("pass_ms_last") is not None]
    if len(sel) < 2:
        return None
    rate = (sel[-1]["passes"] - sel[0]["passes"]) / (sel[-1]["t_s"] - sel[0]["t_s"])
    times = sorted(r["pass_ms_last"] for r in sel)
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    return rate, statistics.mean(times), p95, times[-1]


def redis_figures(rows, lo, hi):
    rps, p50, p99 = [], [], []
    for r in rows:
        if float(r["from"]) < lo or float(r["to"]) > hi + 30:
            continue
        cols = [c.strip('"') for c in r.get("csv", "").split(",")]
        if len(cols) < 7 or cols[0] != "GET":
            continue
        rps.append(float(cols[1]))
        p50.append(float(cols[4]))
        p99.append(float(cols[6]))
    if not rps:
        return None
    return statistics.median(rps), statistics.median(p50), statistics.median(p99), len(rps)


def fmt(v, f="{:.0f}"):
    return "—" if v is None else f.format(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=90)
    ap.add_argument("consoles", nargs="+")
    a = ap.parse_args()
    runs = {}
    for c in a.consoles:
        name = os.path.basename(c).removesuffix(".console")
        runs[name] = parse(c)
    names = list(runs)
    base = runs.get("none")
    end = {m: max(float(s["t"]) for s in r[0]["busy"]) for m, r in runs.items()}
    common = min(end.values())

    def table(title, tenants, lo, hi, busy, rows_extra):
        print(f"\n### {title} (t = {lo:.0f} to {hi:.0f} s after the manager's start)\n")
        print("| figure | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        rows = []
        mem = {m: mean_over(summed(r[0], tenants), lo, hi) for m, r in runs.items()}
        last = {m: mean_over(summed(r[0], tenants), hi - 30, hi) for m, r in runs.items()}
        rows.append(("mean Σ memory.current (MiB)", {m: fmt(v / MIB) for m, v in mem.items()}))
        if base:
            b, bl = mem["none"], last["none"]
            rows.append(("saved vs none, whole span", {m: f"{(1 - v / b) * 100:.1f}% ({(b - v) / MIB:.0f} MiB)" for m, v in mem.items()}))
            rows.append(("mean Σ memory.current, last 30 s (MiB)", {m: fmt(v / MIB) for m, v in last.items()}))
            rows.append(("saved vs none, last 30 s", {m: f"{(1 - v / bl) * 100:.1f}% ({(bl - v) / MIB:.0f} MiB)" for m, v in last.items()}))
        for n in tenants:
            for key, label in (("current", "memory.current"), ("high", "memory.high"), ("swap", "swap")):
                cells = {}
                for m, r in runs.items():
                    ss = [s for s in r[0][n] if float(s["t"]) <= hi]
                    v = num(ss[-1], key) if ss else None
                    cells[m] = "max" if ss and v is None else fmt(v and v / MIB)
                rows.append((f"{n}: {label} at the end (MiB)", cells))
        rows.append(("settle (s; 10 s windows within 5%)", {m: ("never" if (v := settle(r[0], tenants, lo, hi)) is None else f"{v:.0f}") for m, r in runs.items()}))
        rows.append(("within 5% of its end value from (s)", {m: f"{near_end(r[0], tenants, lo, hi):.0f}" for m, r in runs.items()}))
        rows.extend(rows_extra())
        for n in tenants:
            for key, label in (("workingset_refault_anon", "refaults anon"), ("workingset_refault_file", "refaults file"), ("pgmajfault", "major faults")):
                rows.append((f"{n}: {label}", {m: fmt(delta(r[0], n, key, lo, hi)) for m, r in runs.items()}))
        for n in tenants:
            pr = {m: pressure(r[0], n, lo, hi) for m, r in runs.items()}
            rows.append((f"{n}: PSI some avg10 peak / mean (%)", {m: f"{fmt(p[0], '{:.2f}')} / {fmt(p[1], '{:.2f}')}" for m, p in pr.items()}))
            rows.append((f"{n}: PSI some stall (ms)", {m: fmt(None if p[2] is None else p[2] / 1000, "{:.1f}") for m, p in pr.items()}))
        for label, vals in rows:
            print(f"| {label} | " + " | ".join(vals.get(m, "—") for m in names) + " |")

    def toucher_rows():
        out = {}
        for m, r in runs.items():
            f = toucher_figures(r[2], r[4].get("stamp"), end[m], 0, common)
            out[m] = f
        return [
            ("busy: passes/s (throughput)", {m: fmt(f and f[0], "{:.2f}") for m, f in out.items()}),
            ("busy: pass time mean / p95 / max (ms)", {m: "—" if not f else f"{f[1]:.0f} / {f[2]:.0f} / {f[3]:.0f}" for m, f in out.items()}),
        ]

    table("Toucher pair: busy (200 MiB touched every pass) and idle (8 MiB active, 200 MiB idle)",
          ["busy", "idle"], 0, common, "busy", toucher_rows)

    def redis_idle_rows():
        return []

    table("Redis, idle phase", ["redis"], 0, a.idle, None, redis_idle_rows)

    def redis_busy_rows():
        out = {m: redis_figures(r[3], a.idle, common) for m, r in runs.items()}
        return [
            ("GET/s, median of windows", {m: fmt(f and f[0]) for m, f in out.items()}),
            ("p50 / p99 (ms), median of windows", {m: "—" if not f else f"{f[1]:.3f} / {f[2]:.3f}" for m, f in out.items()}),
            ("windows", {m: fmt(f and f[3]) for m, f in out.items()}),
        ]

    table("Redis, busy phase", ["redis"], a.idle, common, None, redis_busy_rows)

    print("\n### Manager CPU over the whole run (all three tenants)\n")
    print("| figure | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    cells = {}
    for m, r in runs.items():
        c = [x for x in r[1] if x[0] <= common]
        if len(c) < 2 or m == "none":
            cells[m] = "—"
            continue
        secs = (c[-1][1] - c[0][1]) / c[-1][2]
        cells[m] = f"{secs:.2f} s ({secs / (c[-1][0] - c[0][0]) * 100:.2f}% of a core)"
    print("| utime+stime | " + " | ".join(cells[m] for m in names) + " |")
    print()
    for m, r in runs.items():
        print(f"{m}: {r[4]}", file=sys.stderr)


if __name__ == "__main__":
    main()
