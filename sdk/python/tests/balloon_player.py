"""Test support: a player that acts as memtide on a Unix socket, and a pool for agents to resize.

``Player`` listens in a directory the test owns (a temporary one, never /run) and hands out a
``Peer`` for each agent connection; a ``Peer`` runs the steps of protocol/vectors/agent
exchanges as docs/balloon-protocol.md "Test vectors" describes. ``FakePool`` is a pool whose
callbacks comply or refuse, as an exchange's ``app`` says.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from memtide_balloon import Agent, PoolKind, ResizeRefused, Stats

VECTORS = Path(__file__).resolve().parents[3] / "protocol" / "vectors"
TIMEOUT_S = 5.0


def json_equal(a: object, b: object) -> bool:
    """Equal as JSON values: 1 is not true and 1 is not 1.0."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def load_vector(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as file:
        vector: dict[str, Any] = json.load(file)
    return vector


class Peer:
    """memtide's end of one agent connection."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self.seen: list[dict[str, Any]] = []  # every message read, skipped ones included

    def send(self, line: str) -> None:
        self._sock.sendall(line.encode("utf-8") + b"\n")

    def send_bytes(self, data: bytes) -> None:
        self._sock.sendall(data)

    def read(self, timeout: float = TIMEOUT_S) -> dict[str, Any] | None:
        """The next message from the agent, or None at end of file."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line from the agent within {timeout} s")
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65_536)
            except socket.timeout:
                continue
            if not data:
                if self._buffer:
                    raise AssertionError(f"the agent closed mid-line: {self._buffer!r}")
                return None
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise AssertionError(f"the agent sent {line!r}, not a message")
        self.seen.append(message)
        return message

    def expect(self, wanted: Mapping[str, Any], timeout: float = TIMEOUT_S) -> dict[str, Any]:
        """The next message holding every key of ``wanted``, skipping stats and working
        progress unless ``wanted`` asks for them; any other message fails."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.read(max(deadline - time.monotonic(), 0.001))
            if message is None:
                raise AssertionError(f"the agent closed the connection; expected {wanted}")
            if all(key in message and json_equal(message[key], wanted[key]) for key in wanted):
                return message
            if not _skipped(message, wanted):
                raise AssertionError(f"expected {dict(wanted)}, the agent sent {message}")

    def expect_closed(self, timeout: float = TIMEOUT_S) -> None:
        """The agent closes the connection within ``timeout``, sending nothing but stats and
        working progress before."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.read(max(deadline - time.monotonic(), 0.001))
            if message is None:
                return
            if not _skipped(message, {}):
                raise AssertionError(f"expected the agent to close, it sent {message}")

    def play(self, steps: Sequence[Mapping[str, Any]]) -> None:
        for number, step in enumerate(steps, 1):
            try:
                if "send" in step:
                    self.send(step["send"])
                elif "expect" in step:
                    self.expect(step["expect"])
                elif step.get("expect_closed") is True:
                    self.expect_closed()
                else:
                    raise AssertionError(f"a step the player does not know: {step}")
            except AssertionError as error:
                raise AssertionError(f"step {number}: {error}") from None

    def close(self) -> None:
        self._sock.close()


def _skipped(message: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    kind = message["type"]
    if kind == "stats":
        return wanted.get("type") != "stats"
    if kind == "progress" and message.get("status") == "working":
        return not (wanted.get("type") == "progress" and wanted.get("status") == "working")
    return False


class Player:
    """A listening socket at ``directory``/``name`` that plays memtide."""

    def __init__(self, directory: str, name: str = "balloon.sock") -> None:
        self.path = os.path.join(directory, name)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._peers: list[Peer] = []

    def accept(self, timeout: float = TIMEOUT_S) -> Peer:
        self._listener.settimeout(timeout)
        try:
            sock, _ = self._listener.accept()
        except socket.timeout:
            raise AssertionError(f"no agent connected within {timeout} s") from None
        peer = Peer(sock)
        self._peers.append(peer)
        return peer

    def close(self) -> None:
        for peer in self._peers:
            peer.close()
        self._listener.close()


class FakePool:
    """A pool that complies with each resize or refuses it, and counts the calls.

    ``gate``, when given, holds each callback until it is set; ``delay_s`` makes each take
    that long.
    """

    def __init__(
        self,
        pool_bytes: int,
        *,
        comply: bool = True,
        delay_s: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        self._pool_bytes = pool_bytes
        self._comply = comply
        self._delay_s = delay_s
        self._gate = gate
        self._lock = threading.Lock()
        self.calls: list[tuple[str, int]] = []
        self.called = threading.Event()

    @property
    def pool_bytes(self) -> int:
        with self._lock:
            return self._pool_bytes

    def shrink(self, target_bytes: int) -> None:
        self._resize("shrink", target_bytes)

    def grow(self, target_bytes: int) -> None:
        self._resize("grow", target_bytes)

    def stats(self) -> Stats:
        size = self.pool_bytes
        return Stats(
            pool_bytes=size, used_bytes=size // 2, hits=10, misses=1, evictions=0, dirty_bytes=0
        )

    def _resize(self, direction: str, target_bytes: int) -> None:
        with self._lock:
            self.calls.append((direction, target_bytes))
        self.called.set()
        if self._gate is not None:
            self._gate.wait(TIMEOUT_S)
        time.sleep(self._delay_s)
        if not self._comply:
            raise ResizeRefused("the test pool refuses to move")
        with self._lock:
            self._pool_bytes = target_bytes


VECTOR_FACTS: dict[str, Any] = load_vector(VECTORS / "agent" / "grows.json")["pool"]
"""The pool every agent exchange uses: 512 MiB in [64 MiB, 1 GiB], 1 MiB granules."""


def agent_for(
    pool: FakePool,
    socket_path: str | None,
    facts: Mapping[str, Any] = VECTOR_FACTS,
    *,
    shrink: Callable[[int], None] | None = None,
) -> Agent:
    """An agent for ``pool`` with ``facts`` (a vector's ``pool``), connecting to
    ``socket_path`` (None: where the environment says)."""
    return Agent(
        app=facts["app"],
        kind=PoolKind(facts["kind"]),
        min_bytes=facts["min_bytes"],
        max_bytes=facts["max_bytes"],
        granule_bytes=facts["granule_bytes"],
        shrink=pool.shrink if shrink is None else shrink,
        grow=pool.grow,
        stats=pool.stats,
        socket_path=socket_path,
    )
