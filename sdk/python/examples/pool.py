#!/usr/bin/env python3
"""A sample application for memtide's Python balloon SDK: a pool that memtide resizes.

The pool is a list of anonymous ``mmap`` granules. Growing maps a granule and makes every page
of it resident (``MAP_POPULATE``, or a write to each page where Python has no such flag);
shrinking unmaps granules, which gives their memory straight back to the OS (Python's own
allocator would keep freed small objects in its arenas). The process registers the pool with
memtide and obeys its targets until SIGINT or SIGTERM, and a small workload of random lookups
gives memtide hits and misses to go by. Every resize is logged with the process's RSS.

    python3 examples/pool.py --pool 1G --min 256M --max 2G --granule 1M [--socket PATH]
"""

from __future__ import annotations

import argparse
import logging
import mmap
import random
import re
import signal
import threading
import time
from collections.abc import Sequence

from memtide_balloon import Agent, PoolKind, Stats

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux, from Python 3.10
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

logger = logging.getLogger("pool")


def rss_bytes() -> int:
    """This process's resident set size, from /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmRSS line")


def parse_size(text: str) -> int:
    """A size in bytes from ``4096``, ``64K``, ``512M``, ``2G`` or ``1T`` (binary units)."""
    match = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 4096, 512M or 2G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


class MmapPool:
    """A pool of ``granule_bytes`` anonymous mappings, each resident while it is in the pool.

    Thread-safe: the agent calls ``shrink``, ``grow`` and ``stats`` from its threads while the
    application looks pages up. The lock is taken per granule, so ``stats`` sees a resize
    advance.
    """

    def __init__(self, granule_bytes: int) -> None:
        if granule_bytes <= 0 or granule_bytes % mmap.PAGESIZE:
            raise ValueError(
                f"granule = {granule_bytes} bytes: not a positive multiple of the "
                f"{mmap.PAGESIZE}-byte page"
            )
        self.granule_bytes = granule_bytes
        self._granules: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    @property
    def pool_bytes(self) -> int:
        with self._lock:
            return len(self._granules) * self.granule_bytes

    def grow(self, target_bytes: int) -> None:
        """Maps granules, each made resident, until the pool is ``target_bytes``."""
        start = time.perf_counter()
        while self.pool_bytes < target_bytes:
            granule = self._resident_granule()
            with self._lock:
                self._granules.append(granule)
        _log_resize("grew", target_bytes, start)

    def shrink(self, target_bytes: int) -> None:
        """Unmaps granules, giving their memory back to the OS, until the pool is
        ``target_bytes``."""
        start = time.perf_counter()
        while True:
            with self._lock:
                if len(self._granules) * self.granule_bytes <= target_bytes:
                    break
                granule = self._granules.pop()
                self._evictions += 1
            granule.close()
        _log_resize("shrank", target_bytes, start)

    def look_up(self, index: int) -> bool:
        """Looks up granule ``index`` of the largest pool: a hit if the pool holds it now."""
        with self._lock:
            hit = index < len(self._granules)
            if hit:
                self._hits += 1
            else:
                self._misses += 1
        return hit

    def stats(self) -> Stats:
        with self._lock:
            size = len(self._granules) * self.granule_bytes
            return Stats(
                pool_bytes=size,
                used_bytes=size,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                dirty_bytes=0,
            )

    def _resident_granule(self) -> mmap.mmap:
        if _POPULATE:
            return mmap.mmap(
                -1, self.granule_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE
            )
        granule = mmap.mmap(-1, self.granule_bytes)
        with memoryview(granule) as view:
            view[:: mmap.PAGESIZE] = bytes(self.granule_bytes // mmap.PAGESIZE)
        return granule


def _log_resize(verb: str, target_bytes: int, start: float) -> None:
    logger.info(
        "%s to %d MiB in %.3f s; RSS %d MiB",
        verb,
        target_bytes >> 20,
        time.perf_counter() - start,
        rss_bytes() >> 20,
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A pool of mmap granules that memtide shrinks and grows."
    )
    parser.add_argument("--app", default="python-sample-pool", help="the app name memtide sees")
    parser.add_argument(
        "--kind", default=PoolKind.CACHE.value, choices=[kind.value for kind in PoolKind]
    )
    parser.add_argument("--pool", type=parse_size, default=parse_size("256M"), help="start size")
    parser.add_argument("--min", type=parse_size, default=0, help="smallest size")
    parser.add_argument("--max", type=parse_size, default=parse_size("1G"), help="largest size")
    parser.add_argument("--granule", type=parse_size, default=parse_size("1M"), help="unit")
    parser.add_argument(
        "--socket",
        help="memtide's balloon socket (default: $MEMTIDE_BALLOON_SOCKET, else "
        "/run/memtide/balloon.sock)",
    )
    parser.add_argument(
        "--lookups-per-second", type=int, default=1000, help="the workload's rate (0: none)"
    )
    args = parser.parse_args(argv)
    if not args.min <= args.pool <= args.max:
        parser.error(f"--pool {args.pool} is not within --min {args.min} and --max {args.max}")
    if any(size % args.granule for size in (args.pool, args.min, args.max)):
        parser.error(f"--pool, --min and --max must be multiples of --granule {args.granule}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        pool = MmapPool(args.granule)
    except ValueError as error:
        raise SystemExit(f"pool.py: {error}") from None
    pool.grow(args.pool)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    granules = args.max // args.granule
    with Agent(
        app=args.app,
        kind=PoolKind(args.kind),
        min_bytes=args.min,
        max_bytes=args.max,
        granule_bytes=args.granule,
        shrink=pool.shrink,
        grow=pool.grow,
        stats=pool.stats,
        socket_path=args.socket,
    ):
        while not stopping.wait(0.1):
            for _ in range(args.lookups_per_second // 10):
                if granules:
                    pool.look_up(random.randrange(granules))
    logger.info("stopped; pool %d MiB, RSS %d MiB", pool.pool_bytes >> 20, rss_bytes() >> 20)


if __name__ == "__main__":
    main()
