#!/usr/bin/env python3
"""bench-vms.py: the timing helpers of scripts/bench-vms.sh (python3, standard library only).

  bench-vms.py balloon --qmp SOCK --pid QEMU_PID [--console FILE] [--step 256M] [--reps 5]
      Inflates a booted guest's virtio balloon by STEP and deflates it back, REPS times, over QMP
      (the greeting, qmp_capabilities, then `balloon` and `query-balloon`). Each move is timed
      from sending `balloon` to `query-balloon`'s `actual` within 1 MiB of the target, polled
      every 5 ms. After each inflate it also follows the QEMU process's RSS (VmRSS, every 50 ms)
      until it has not fallen for 3 s (at most 20 s): how far it fell and when it stopped.
      With --console (the guest's console, its toucher reporting each second and holding more
      memory in its first phase than in its second), it first follows the RSS from the switch to
      the second phase until it is steady for 5 s: what free page reporting gave back alone.
  bench-vms.py limit --cgroup DIR --toucher PATH [--step 256M] [--reps 5]
                     [--active 300M] [--idle 300M]
      The same STEP through a cgroup v1 memory limit: REPS times, a fresh toucher in DIR
      (already created, under our own memory cgroup) writes its ACTIVE + IDLE; once its usage is
      steady the limit is set there (L0), then written STEP lower (timed until the write returns
      and usage_in_bytes is under it) and raised back to L0 (timed likewise); then the toucher
      is stopped and the limit lifted.

Both print one JSON object on stdout; progress goes to stderr.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

MIB = 1 << 20


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def log(*words):
    print("bench-vms.py:", *words, file=sys.stderr, flush=True)


def summary(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "all": values,
    }


class Qmp:
    """A minimal blocking QMP client: one command at a time, events skipped."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        greeting = self._read()
        if "QMP" not in greeting:
            raise RuntimeError(f"no QMP greeting: {greeting}")
        self.command("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("QMP connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name, **arguments):
        msg = {"execute": name}
        if arguments:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise RuntimeError(f"{name}: {reply['error']}")
            return reply["return"]


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def reporting(args):
    """Follows the QEMU RSS while the guest's toucher leaves its first phase (the console shows
    "phase":1) until it has not moved for the 5 s since: how far it fell from its peak, and how long the
    fall took, from the last sample at the peak to the first at the final level."""
    samples, seen, start = [], None, time.monotonic()
    while True:
        now = time.monotonic() - start
        samples.append((now, rss(args.pid)))
        if seen is None:
            with open(args.console, errors="replace") as f:
                if '"phase":1' in f.read():
                    seen = now
        elif now - seen > 5 and all(abs(r - samples[-1][1]) <= MIB for t, r in samples if t >= now - 5):
            break
        if now > 120:
            raise RuntimeError("the guest's toucher did not reach its second phase in 120 s")
        time.sleep(0.05)
    peak = max(r for _, r in samples)
    final = samples[-1][1]
    peak_end = max(t for t, r in samples if r >= peak - MIB)
    final_start = min(t for t, r in samples if t >= peak_end and r <= final + MIB)
    log(f"reporting: QEMU RSS {peak / MIB:.0f} -> {final / MIB:.0f} MiB in {final_start - peak_end:.2f} s")
    return {"peak_bytes": peak, "final_bytes": final, "fall_bytes": peak - final, "fall_s": final_start - peak_end}


def balloon(args):
    qmp = Qmp(args.qmp)
    step = size(args.step)
    full = qmp.command("query-balloon")["actual"]
    log(f"balloon: guest memory {full // MIB} MiB, moving it by {step // MIB} MiB {args.reps} times")

    def move(target):
        start = time.monotonic()
        qmp.command("balloon", value=target)
        polls = 0
        while True:
            actual = qmp.command("query-balloon")["actual"]
            polls += 1
            if abs(actual - target) <= MIB:
                return time.monotonic() - start
            if time.monotonic() - start > args.timeout:
                raise RuntimeError(
                    f"the balloon did not reach {target // MIB} MiB in {args.timeout} s "
                    f"(actual {actual // MIB} MiB)"
                )
            time.sleep(0.005)

    reported = reporting(args) if args.console else None
    inflate, deflate, falls, fall_times, rss_before = [], [], [], [], []
    for rep in range(args.reps):
        time.sleep(args.settle)
        before = rss(args.pid)
        took = move(full - step)
        inflate.append(took)
        # Follow the RSS until it has not fallen for 3 s.
        lowest, lowest_at, start = before, 0.0, time.monotonic()
        while time.monotonic() - start < 20:
            now = rss(args.pid)
            if now < lowest - MIB:
                lowest, lowest_at = now, time.monotonic() - start
            elif time.monotonic() - start - lowest_at > 3:
                break
            time.sleep(0.05)
        fall = max(before - lowest, 0)
        rss_before.append(before)
        falls.append(fall)
        fall_times.append(took + lowest_at)
        log(
            f"  inflate {rep + 1}: {took:.3f} s; QEMU RSS {before / MIB:.0f} -> "
            f"{lowest / MIB:.0f} MiB ({fall / MIB:.0f} MiB less) within {took + lowest_at:.2f} s"
        )
        time.sleep(args.settle)
        took = move(full)
        deflate.append(took)
        log(f"  deflate {rep + 1}: {took:.3f} s; QEMU RSS {rss(args.pid) / MIB:.0f} MiB")
    json.dump(
        {
            "guest_bytes": full,
            "step_bytes": step,
            "inflate_s": summary(inflate),
            "deflate_s": summary(deflate),
            "rss_before_bytes": rss_before,
            "rss_fall_bytes": summary(falls),
            "rss_fall_s": summary(fall_times),
            "reported": reported,
        },
        sys.stdout,
    )
    print()


def cg_read(cgroup, name):
    with open(os.path.join(cgroup, name)) as f:
        return f.read().strip()


def cg_write(cgroup, name, value):
    with open(os.path.join(cgroup, name), "w") as f:
        f.write(str(value))


def limit(args):
    step = size(args.step)
    want = size(args.active) + size(args.idle)
    lower, raise_, swapped, levels = [], [], [], []
    for rep in range(args.reps):
        cg_write(args.cgroup, "memory.limit_in_bytes", -1)
        procs = os.path.join(args.cgroup, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write("0")

        child = subprocess.Popen(
            [args.toucher, "--active", args.active, "--idle", args.idle, "--report-every-ms", "60000"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            preexec_fn=join,
        )
        try:
            # Steady: usage over ACTIVE + IDLE and unchanged (within 1 MiB) for 1 s.
            start, last, since = time.monotonic(), -1, time.monotonic()
            while True:
                usage = int(cg_read(args.cgroup, "memory.usage_in_bytes"))
                if abs(usage - last) > MIB:
                    last, since = usage, time.monotonic()
                elif usage >= want and time.monotonic() - since >= 1:
                    break
                if time.monotonic() - start > 60:
                    raise RuntimeError(f"the toucher's usage did not settle ({usage // MIB} MiB)")
                time.sleep(0.05)
            time.sleep(args.settle)  # the idle set ages onto the inactive list
            level = (int(cg_read(args.cgroup, "memory.usage_in_bytes")) + MIB - 1) // MIB * MIB
            cg_write(args.cgroup, "memory.limit_in_bytes", level)
            levels.append(level)

            def write(value):
                start = time.monotonic()
                cg_write(args.cgroup, "memory.limit_in_bytes", value)
                while int(cg_read(args.cgroup, "memory.usage_in_bytes")) > value:
                    if time.monotonic() - start > args.timeout:
                        raise RuntimeError(f"usage stayed over {value // MIB} MiB")
                    time.sleep(0.001)
                return time.monotonic() - start

            took = write(level - step)
            lower.append(took)
            stat = dict(line.split() for line in cg_read(args.cgroup, "memory.stat").splitlines())
            swapped.append(int(stat.get("swap", 0)))
            time.sleep(args.settle)
            up = write(level)
            raise_.append(up)
            log(
                f"  limit {rep + 1}: {level // MIB} -> {(level - step) // MIB} MiB in {took:.3f} s "
                f"(swap {int(stat.get('swap', 0)) // MIB} MiB), back in {up * 1e3:.3f} ms"
            )
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait()
    cg_write(args.cgroup, "memory.limit_in_bytes", -1)
    json.dump(
        {
            "step_bytes": step,
            "level_bytes": levels,
            "lower_s": summary(lower),
            "raise_s": summary(raise_),
            "swapped_bytes": swapped,
        },
        sys.stdout,
    )
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("balloon")
    b.add_argument("--qmp", required=True)
    b.add_argument("--pid", required=True, type=int)
    b.add_argument("--console", help="first follow the RSS while the guest's toucher leaves its first phase")
    l = sub.add_parser("limit")
    l.add_argument("--cgroup", required=True)
    l.add_argument("--toucher", required=True)
    l.add_argument("--active", default="300M")
    l.add_argument("--idle", default="300M")
    for p in (b, l):
        p.add_argument("--step", default="256M")
        p.add_argument("--reps", type=int, default=5)
        p.add_argument("--settle", type=float, default=2.0, help="seconds between moves")
        p.add_argument("--timeout", type=float, default=120.0, help="seconds a move may take")
    args = parser.parse_args()
    try:
        {"balloon": balloon, "limit": limit}[args.cmd](args)
    except (OSError, RuntimeError) as e:
        log(f"error: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
