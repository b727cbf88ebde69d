"""Tests of ``LineSplitter``: lines split across reads, and the 65,536-byte limit."""

from __future__ import annotations

import unittest

from memtide_balloon import MAX_LINE_BYTES, ErrorCode, ProtocolError
from memtide_balloon.framing import LineSplitter


class LineSplitterTests(unittest.TestCase):
    def test_lines_split_across_reads_come_out_whole_and_in_order(self) -> None:
        splitter = LineSplitter()
        self.assertEqual(splitter.feed(b'{"type":'), [])
        self.assertEqual(splitter.feed(b'"bye"}\n{"a"'), [b'{"type":"bye"}'])
        self.assertEqual(splitter.feed(b":1}\r\n\n"), [b'{"a":1}\r', b""])

    def test_line_of_65536_bytes_with_its_newline_is_kept(self) -> None:
        line = b"x" * (MAX_LINE_BYTES - 1)
        self.assertEqual(LineSplitter().feed(line + b"\n"), [line])

    def test_longer_line_is_reported_too_long_once_and_the_next_line_is_read(self) -> None:
        splitter = LineSplitter()
        items = splitter.feed(b"y" * MAX_LINE_BYTES + b"\nnext\n")
        self.assertEqual(len(items), 2)
        self.assertIsInstance(items[0], ProtocolError)
        assert isinstance(items[0], ProtocolError)
        self.assertEqual(items[0].code, ErrorCode.TOO_LONG)
        self.assertEqual(items[1], b"next")

    def test_too_long_is_reported_before_the_newline_and_the_rest_is_dropped(self) -> None:
        splitter = LineSplitter()
        chunk = b"z" * 40_000
        self.assertEqual(splitter.feed(chunk), [])
        items = splitter.feed(chunk)
        self.assertEqual([getattr(item, "code", None) for item in items], [ErrorCode.TOO_LONG])
        for _ in range(10):  # 400 kB more of the same line: nothing kept, nothing reported
            self.assertEqual(splitter.feed(chunk), [])
        self.assertEqual(splitter.feed(b"tail\nafter\n"), [b"after"])


if __name__ == "__main__":
    unittest.main()
