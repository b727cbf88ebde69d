"""Splits the bytes read from memtide's socket into lines of at most 65,536 bytes.

A line over the limit is reported once as a ``too_long`` ``ProtocolError`` and the rest of it,
up to the next ``\\n``, is dropped as it arrives, so a peer cannot make the agent buffer more
than one line.
"""

from __future__ import annotations

from .messages import MAX_LINE_BYTES, ErrorCode, ProtocolError


class LineSplitter:
    """Feeds on chunks of a byte stream and hands back its complete lines, without ``\\n``."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._dropping = False

    def feed(self, data: bytes) -> list[bytes | ProtocolError]:
        """The lines completed by ``data``, in order; a ``ProtocolError`` for each too long."""
        self._buffer += data
        lines: list[bytes | ProtocolError] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                # MAX_LINE_BYTES bytes and no newline yet: with its newline the line is over.
                if not self._dropping and len(self._buffer) >= MAX_LINE_BYTES:
                    lines.append(_too_long())
                    self._dropping = True
                if self._dropping:
                    self._buffer.clear()
                return lines
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if self._dropping:
                self._dropping = False
            elif end + 1 > MAX_LINE_BYTES:
                lines.append(_too_long())
            else:
                lines.append(line)


def _too_long() -> ProtocolError:
    return ProtocolError(
        ErrorCode.TOO_LONG,
        f"a line over {MAX_LINE_BYTES:,} bytes; the rest of it up to the next newline is dropped",
    )
