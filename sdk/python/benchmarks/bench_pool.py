#!/usr/bin/env python3
"""Benchmark of the sample pool (examples/pool.py): shrink it to 0 and grow it back.

In process, the pool's ``shrink`` and ``grow`` (the callbacks the agent calls) are timed
directly. End to end, the sample runs as a child process whose agent answers a tiny memtide
here over a Unix socket in a temporary directory: each figure is from sending the ``target``
to reading its ``done``. Each way is run ``--runs`` times and the median printed, with the
RSS after it (the in-process one from /proc/self/status, the child's from /proc/PID/status).
The same size mapped and unmapped as one region first shows what the kernel alone costs.

    PYTHONPATH=sdk/python/src python3 sdk/python/benchmarks/bench_pool.py [--size 2G]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import mmap
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pool.py"
MiB = 1 << 20


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pool_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS line")


def report(where: str, way: str, seconds: list[float], rss: int) -> None:
    runs = ", ".join(f"{s:.3f}" for s in seconds)
    print(
        f"{where:<11} {way:<6} median {statistics.median(seconds):.3f} s  (runs {runs})  "
        f"RSS after {rss // MiB} MiB"
    )


def kernel_floor(size: int, runs: int) -> None:
    """The same memory as one mapping made resident and unmapped: what the kernel's page
    faults and unmapping cost, with no Python in between."""
    maps, unmaps = [], []
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    for _ in range(runs):
        started = time.perf_counter()
        region = mmap.mmap(-1, size, flags=flags)
        maps.append(time.perf_counter() - started)
        mapped = rss_of(os.getpid())
        started = time.perf_counter()
        region.close()
        unmaps.append(time.perf_counter() - started)
    report("one mmap", "unmap", unmaps, rss_of(os.getpid()))
    report("one mmap", "map", maps, mapped)


def in_process(example: ModuleType, size: int, granule: int, runs: int) -> None:
    pool = example.MmapPool(granule)
    started = time.perf_counter()
    pool.grow(size)
    print(f"in process: first grow to {size // MiB} MiB {time.perf_counter() - started:.3f} s")
    shrinks, grows = [], []
    for _ in range(runs):
        started = time.perf_counter()
        pool.shrink(0)
        shrinks.append(time.perf_counter() - started)
        shrunk = example.rss_bytes()
        started = time.perf_counter()
        pool.grow(size)
        grows.append(time.perf_counter() - started)
    report("in process", "shrink", shrinks, shrunk)
    report("in process", "grow", grows, example.rss_bytes())
    pool.shrink(0)


class TinyMemtide:
    """Just enough memtide to welcome one agent and time its targets."""

    def __init__(self, sock: socket.socket) -> None:
        self._file = sock.makefile("rwb")
        self._seq = 0

    def read(self) -> dict[str, object]:
        line = self._file.readline()
        if not line:
            raise RuntimeError("the sample closed the connection")
        message: dict[str, object] = json.loads(line)
        return message

    def send(self, message: dict[str, object]) -> None:
        self._file.write(json.dumps(message).encode() + b"\n")
        self._file.flush()

    def resize(self, pool_bytes: int) -> float:
        """Seconds from sending a target to reading its done."""
        self._seq += 1
        started = time.perf_counter()
        self.send(
            {"type": "target", "seq": self._seq, "pool_bytes": pool_bytes, "deadline_ms": 60_000}
        )
        while True:
            message = self.read()
            if message.get("type") == "progress" and message.get("seq") == self._seq:
                if message["status"] == "done":
                    return time.perf_counter() - started
                if message["status"] == "failed":
                    raise RuntimeError(f"the sample failed target {self._seq}: {message}")


def end_to_end(size: int, granule: int, runs: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="memtide-bench-") as directory,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener,
        open(os.path.join(directory, "pool.log"), "w+") as log,
    ):
        path = os.path.join(directory, "balloon.sock")
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(120)
        child = subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLE),
                f"--pool={size}",
                "--min=0",
                f"--max={size}",
                f"--granule={granule}",
                f"--socket={path}",
                "--lookups-per-second=0",
            ],
            stderr=log,
        )
        try:
            sock, _ = listener.accept()
            with sock:
                memtide = TinyMemtide(sock)
                hello = memtide.read()
                if hello.get("type") != "hello":
                    raise RuntimeError(f"the sample said {hello}, not hello")
                memtide.send(
                    {
                        "type": "welcome",
                        "version": 1,
                        "tenant": "bench",
                        "stats_interval_ms": 1000,
                        "dead_after_ms": 5000,
                    }
                )
                shrinks, grows = [], []
                for _ in range(runs):
                    shrinks.append(memtide.resize(0))
                    shrunk = rss_of(child.pid)
                    grows.append(memtide.resize(size))
                report("end to end", "shrink", shrinks, shrunk)
                report("end to end", "grow", grows, rss_of(child.pid))
                memtide.send({"type": "bye", "reason": "benchmark over"})
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read())
            raise
        finally:
            child.terminate()
            child.wait(30)


def main() -> None:
    example = load_example()
    parser = argparse.ArgumentParser(description="Shrink the sample pool to 0 and grow it back.")
    parser.add_argument("--size", type=example.parse_size, default=example.parse_size("2G"))
    parser.add_argument("--granule", type=example.parse_size, default=example.parse_size("1M"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("pool").setLevel(logging.WARNING)
    populate = "MAP_POPULATE" if getattr(example, "_POPULATE", 0) else "a write to each page"
    print(
        f"pool {args.size // MiB} MiB in {args.granule // MiB} MiB granules; Python "
        f"{sys.version.split()[0]}; pages made resident by {populate}"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    kernel_floor(args.size, args.runs)
    in_process(example, args.size, args.granule, args.runs)
    end_to_end(args.size, args.granule, args.runs)


if __name__ == "__main__":
    main()
