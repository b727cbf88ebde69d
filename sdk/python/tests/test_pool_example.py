"""Tests of examples/pool.py, the sample application: its pool really takes memory from the
OS when it grows and gives it back when it shrinks (RSS from /proc/self/status), and its
command line."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import logging
import unittest
from pathlib import Path
from types import ModuleType

MiB = 1 << 20


def _load_example() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "examples" / "pool.py"
    spec = importlib.util.spec_from_file_location("pool_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()


class MmapPoolTests(unittest.TestCase):
    def setUp(self) -> None:
        self.pool = example.MmapPool(MiB)
        self.addCleanup(self.pool.shrink, 0)
        logger = logging.getLogger("pool")  # each resize logs its RSS: not in test output
        self.addCleanup(logger.setLevel, logger.level)
        logger.setLevel(logging.WARNING)

    def test_growing_makes_the_granules_resident(self) -> None:
        before = example.rss_bytes()
        self.pool.grow(64 * MiB)
        self.assertGreaterEqual(example.rss_bytes() - before, 60 * MiB)
        self.assertEqual(self.pool.stats().pool_bytes, 64 * MiB)

    def test_shrinking_gives_the_memory_back_to_the_os(self) -> None:
        self.pool.grow(64 * MiB)
        grown = example.rss_bytes()
        self.pool.shrink(16 * MiB)
        self.assertGreaterEqual(grown - example.rss_bytes(), 44 * MiB)
        stats = self.pool.stats()
        self.assertEqual((stats.pool_bytes, stats.evictions), (16 * MiB, 48))

    def test_look_ups_are_hits_inside_the_pool_and_misses_beyond_it(self) -> None:
        self.pool.grow(4 * MiB)
        self.assertEqual(
            [self.pool.look_up(index) for index in (0, 3, 4, 9)], [True, True, False, False]
        )
        stats = self.pool.stats()
        self.assertEqual((stats.hits, stats.misses), (2, 2))

    def test_a_granule_that_is_not_whole_pages_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            example.MmapPool(MiB + 1)


class CommandLineTests(unittest.TestCase):
    def test_sizes_take_binary_units(self) -> None:
        self.assertEqual(
            [example.parse_size(text) for text in ("4096", "64K", "512M", "2G", "2GiB")],
            [4096, 64 << 10, 512 << 20, 2 << 30, 2 << 30],
        )

    def test_a_size_without_a_number_is_refused(self) -> None:
        with self.assertRaises(argparse.ArgumentTypeError):
            example.parse_size("lots")

    def test_flags_set_the_pool(self) -> None:
        args = example.parse_args(["--pool", "2G", "--max", "4G", "--granule", "2M"])
        self.assertEqual(
            (args.pool, args.min, args.max, args.granule), (2 << 30, 0, 4 << 30, 2 << 20)
        )

    def test_a_pool_outside_min_and_max_is_refused(self) -> None:
        with contextlib.redirect_stderr(io.StringIO()) as errors, self.assertRaises(SystemExit):
            example.parse_args(["--pool", "2G", "--max", "1G"])
        self.assertIn("is not within", errors.getvalue())


if __name__ == "__main__":
    unittest.main()
