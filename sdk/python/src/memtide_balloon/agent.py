"""The balloon agent: keeps an application's pool registered with memtide and obeys its targets.

``Agent`` runs on a daemon thread of its own. It connects to memtide's Unix socket, says
``hello``, sends ``stats`` at once after the ``welcome`` and then every ``stats_interval_ms``,
and answers each ``target`` by calling the application's shrink or grow callback on a worker
thread (one callback at a time), with ``progress working`` about once a second while it runs
and ``done`` or ``failed`` when it returns. When the connection drops, or memtide says ``bye``
or sends a fatal error, the agent reconnects with exponential back-off until ``stop``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import random
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable

from .framing import LineSplitter
from .messages import (
    MAX_REASON_BYTES,
    Bye,
    ErrorCode,
    ErrorMessage,
    Hello,
    MessageToAgent,
    MessageToMemtide,
    PoolKind,
    Progress,
    ProgressStatus,
    ProtocolError,
    Stats,
    Target,
    Welcome,
    decode,
    encode,
)

DEFAULT_SOCKET_PATH = "/run/memtide/balloon.sock"
"""Where memtide listens unless its configuration says otherwise."""

SOCKET_PATH_VARIABLE = "MEMTIDE_BALLOON_SOCKET"
"""The environment variable that overrides ``DEFAULT_SOCKET_PATH``."""

WORKING_EVERY_S = 1.0
"""How often a ``progress working`` is sent while a callback runs."""

SEND_TIMEOUT_S = 10.0
"""How long a line may wait for memtide to read before the connection is dropped."""

_LONGEST_WAIT_S = 3600.0  # select() refuses a timeout as long as 2^53 ms

_logger = logging.getLogger(__name__)

Resize = Callable[[int], None]
"""A shrink or grow callback: resizes the pool to the given bytes, or raises to refuse."""

StatsSource = Callable[[], Stats]
"""Returns the pool's statistics now; called from the agent's thread."""


class ResizeRefused(Exception):
    """Raised by a shrink or grow callback that will not resize; the message is the reason."""


def socket_path_from_environment() -> str:
    """``$MEMTIDE_BALLOON_SOCKET`` when set and not empty, else ``DEFAULT_SOCKET_PATH``."""
    return os.environ.get(SOCKET_PATH_VARIABLE) or DEFAULT_SOCKET_PATH


class Backoff:
    """Delays between reconnections: ``first`` doubling up to ``longest``, with jitter.

    Each delay is drawn from the upper half of the current step, so agents that lost memtide
    together do not all come back in the same instant.
    """

    def __init__(
        self,
        first: float = 0.1,
        longest: float = 30.0,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < first <= longest:
            raise ValueError(f"back-off first = {first} s: not in (0, longest = {longest} s]")
        self._first = first
        self._longest = longest
        self._uniform = uniform
        self._step = first

    def next_delay(self) -> float:
        """The delay before the next try, in seconds; the step after it is doubled."""
        delay = self._step * (0.5 + 0.5 * self._uniform())
        self._step = min(self._step * 2, self._longest)
        return delay

    def reset(self) -> None:
        """Back to ``first``: a session got as far as a ``welcome``."""
        self._step = self._first


def _clip(text: str, max_bytes: int = MAX_REASON_BYTES) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8, on a character boundary."""
    data = text.encode("utf-8", "backslashreplace")
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    return data[: max_bytes - 3].decode("utf-8", "ignore") + "..."


@dataclass
class _Job:
    target: Target
    resize: Resize
    direction: str
    connection: _Connection  # a job outliving its connection goes unanswered


@dataclass
class _Finished:
    job: _Job
    refusal: str | None  # None when the callback returned


class Agent:
    """Registers one application pool with memtide and resizes it on memtide's targets.

    ``shrink`` and ``grow`` are called with the target size in bytes on a worker thread, one
    call at a time; each returns when the pool is at that size with its memory given back to
    the OS (for ``shrink``), or raises (``ResizeRefused`` with a reason, or any exception) to
    leave it where it is. ``stats`` returns the pool's ``Stats`` and is called from the
    agent's thread, possibly while a callback runs, so it must be thread-safe; its
    ``pool_bytes`` is the size the agent reports, in its ``hello`` too.

    ``socket_path`` defaults to ``$MEMTIDE_BALLOON_SOCKET``, else ``/run/memtide/balloon.sock``.
    Use ``start``/``stop``, or ``with Agent(...) as agent:``.
    """

    def __init__(
        self,
        *,
        app: str,
        kind: PoolKind,
        min_bytes: int,
        max_bytes: int,
        granule_bytes: int,
        shrink: Resize,
        grow: Resize,
        stats: StatsSource,
        socket_path: str | os.PathLike[str] | None = None,
    ) -> None:
        # The facts are checked as a hello at the smallest pool; start() checks the real one.
        facts = Hello(
            app=app,
            kind=kind,
            pid=os.getpid(),
            pool_bytes=min_bytes,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            granule_bytes=granule_bytes,
        )
        self._app = facts.app
        self._kind = facts.kind
        self._min_bytes = facts.min_bytes
        self._max_bytes = facts.max_bytes
        self._granule_bytes = facts.granule_bytes
        self._shrink = shrink
        self._grow = grow
        self._stats = stats
        if socket_path is None:
            self._path = socket_path_from_environment()
        else:
            self._path = os.fspath(socket_path)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._finished: queue.SimpleQueue[_Finished] = queue.SimpleQueue()
        self._job: _Job | None = None
        self._last_pool_bytes = facts.pool_bytes
        self._tenant: str | None = None

    @property
    def socket_path(self) -> str:
        """The socket the agent connects to."""
        return self._path

    @property
    def tenant(self) -> str | None:
        """The tenant memtide registered the pool for, while a session is open."""
        return self._tenant

    def start(self) -> None:
        """Checks the pool's stats against its facts and starts the agent's thread.

        Raises ``ValueError`` if the pool is outside ``[min_bytes, max_bytes]``, and whatever
        the ``stats`` callback raises.
        """
        if self._thread is not None:
            raise RuntimeError("this Agent was already started; an Agent starts once")
        self._hello()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._thread = threading.Thread(target=self._run, name="memtide-balloon-agent", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Says ``bye`` to memtide, closes the connection and ends the agent's thread.

        A callback still running is not interrupted: it finishes on its own thread.
        """
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._wake()
        thread.join(timeout)
        if thread.is_alive():
            _logger.warning("the memtide balloon agent did not stop within %s s", timeout)

    def __enter__(self) -> Agent:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- the agent's thread ---------------------------------------------------------------

    def _run(self) -> None:
        backoff = Backoff()
        try:
            while not self._stopping.is_set():
                try:
                    if self._connect_and_serve():
                        backoff.reset()
                except Exception:
                    # A bug must not end the agent for the rest of the application's life.
                    _logger.exception("the session with memtide failed")
                if self._stopping.wait(backoff.next_delay()):
                    break
        finally:
            for end in (self._wake_r, self._wake_w):
                if end is not None:
                    end.close()

    def _connect_and_serve(self) -> bool:
        """One connection, until it closes; whether memtide welcomed the agent on it."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(SEND_TIMEOUT_S)
            try:
                sock.connect(self._path)
            except OSError as error:
                _logger.info("cannot connect to memtide at %s: %s", self._path, error)
                return False
            _logger.info("connected to memtide at %s", self._path)
            connection = _Connection(self, sock)
            try:
                connection.serve()
            except OSError as error:
                _logger.warning("the connection to memtide at %s failed: %s", self._path, error)
            finally:
                self._tenant = None
            return connection.welcome is not None

    def _hello(self) -> Hello:
        stats = self._stats()
        return Hello(
            app=self._app,
            kind=self._kind,
            pid=os.getpid(),
            pool_bytes=stats.pool_bytes,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            granule_bytes=self._granule_bytes,
        )

    def _read_stats(self) -> Stats | None:
        """The pool's stats, or None (logged) when the callback fails or breaks max_bytes."""
        try:
            stats = self._stats()
        except Exception:
            _logger.exception("the pool's stats callback failed")
            return None
        if not isinstance(stats, Stats):
            _logger.error("the pool's stats callback returned %r, not a Stats", stats)
            return None
        if stats.pool_bytes > self._max_bytes:
            _logger.error(
                "the pool's stats say pool_bytes = %d > max_bytes = %d",
                stats.pool_bytes,
                self._max_bytes,
            )
            return None
        self._last_pool_bytes = stats.pool_bytes
        return stats

    def _pool_bytes(self) -> int:
        """The pool's size now, or the last one known if the stats cannot be read."""
        stats = self._read_stats()
        return self._last_pool_bytes if stats is None else stats.pool_bytes

    def _check(self, target: Target) -> str | None:
        """Why the pool cannot take ``target``, or None."""
        size = target.pool_bytes
        if size % self._granule_bytes:
            return (
                f"target.pool_bytes = {size}: not a multiple of granule_bytes = "
                f"{self._granule_bytes}"
            )
        if size < self._min_bytes:
            return f"target.pool_bytes = {size} < min_bytes = {self._min_bytes}"
        if size > self._max_bytes:
            return f"target.pool_bytes = {size} > max_bytes = {self._max_bytes}"
        return None

    def _work(self, job: _Job) -> None:
        """Runs one callback on a worker thread and hands its outcome to the agent's thread."""
        refusal: str | None = f"{job.direction} did not return"
        try:
            job.resize(job.target.pool_bytes)
            refusal = None
        except ResizeRefused as error:
            refusal = str(error) or f"{job.direction} refused"
        except Exception as error:
            _logger.exception("%s(%d) failed", job.direction, job.target.pool_bytes)
            refusal = f"{job.direction} failed: {type(error).__name__}: {error}"
        finally:
            self._finished.put(_Finished(job, refusal))
            self._wake()

    def _wake(self) -> None:
        """Wakes the agent's thread out of its wait for the socket."""
        wake = self._wake_w
        if wake is None:
            return
        # Closed: the thread ended. Full: a wake-up is pending anyway.
        with contextlib.suppress(OSError):
            wake.send(b"\0")


class _Connection:
    """One connection to memtide, served on the agent's thread."""

    def __init__(self, agent: Agent, sock: socket.socket) -> None:
        self._agent = agent
        self._sock = sock
        self._lines = LineSplitter()
        self.welcome: Welcome | None = None
        self._last_seq = 0
        self._answering: int | None = None  # the seq of the target still to be answered
        self._pending: Target | None = None  # waits for a callback still running
        self._next_stats = float("inf")
        self._next_working = float("inf")

    def serve(self) -> None:
        """Says hello and serves memtide's lines until either side closes."""
        agent = self._agent
        try:
            hello = agent._hello()
        except Exception as error:
            _logger.error("cannot register the pool: %s", error)
            return
        self._send(hello)
        wake = agent._wake_r
        assert wake is not None  # set by start() before the thread runs
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while not agent._stopping.is_set():
                self._take_finished()
                self._send_due(time.monotonic())
                wait = min(self._next_stats, self._next_working) - time.monotonic()
                for key, _ in selector.select(min(max(wait, 0.0), _LONGEST_WAIT_S)):
                    if key.fileobj is wake:
                        _drain(wake)
                    elif not self._read():
                        return
            self._send(Bye("the application stopped its agent"))

    def _read(self) -> bool:
        """Reads what memtide sent; False when the connection is to close."""
        data = self._sock.recv(65_536)
        if not data:
            _logger.warning("memtide closed the connection")
            return False
        for line in self._lines.feed(data):
            if isinstance(line, ProtocolError):
                keep = self._refuse(line)
            else:
                _logger.debug("memtide sent %r", line)
                try:
                    keep = self._take(decode(line))
                except ProtocolError as error:
                    keep = self._refuse(error)
            if not keep:
                return False
        return True

    def _refuse(self, error: ProtocolError) -> bool:
        """Answers a line the agent cannot take; only a version mismatch closes."""
        fatal = error.code is ErrorCode.VERSION
        _logger.warning("memtide sent a line the agent cannot take: %s", error.message)
        self._send(ErrorMessage(error.code, _clip(error.message), fatal))
        return not fatal

    def _take(self, message: MessageToAgent) -> bool:
        """Acts on one message from memtide; False when the connection is to close."""
        if isinstance(message, Welcome):
            self._take_welcome(message)
        elif isinstance(message, Target):
            self._take_target(message)
        elif isinstance(message, Bye):
            _logger.info("memtide said bye: %s", message.reason or "no reason given")
            return False
        elif message.fatal:
            _logger.warning("memtide closed the session: %s: %s", message.code, message.message)
            return False
        else:
            _logger.warning("memtide reported an error: %s: %s", message.code, message.message)
        return True

    def _take_welcome(self, welcome: Welcome) -> None:
        if self.welcome is not None:
            self._send_error(ErrorCode.ALREADY_REGISTERED, "a second welcome on this connection")
            return
        self.welcome = welcome
        self._agent._tenant = welcome.tenant
        _logger.info("registered with memtide for tenant %s", welcome.tenant)
        self._next_stats = time.monotonic()

    def _take_target(self, target: Target) -> None:
        if self.welcome is None:
            self._send_error(ErrorCode.NOT_REGISTERED, "a target before the welcome")
            return
        if target.seq <= self._last_seq:
            self._send_error(
                ErrorCode.BAD_FIELD,
                f"target.seq = {target.seq}: not above the last target's {self._last_seq}",
            )
            return
        self._last_seq = target.seq
        problem = self._agent._check(target)
        if problem is not None:
            self._send_error(ErrorCode.BAD_FIELD, problem)
            return
        if self._answering is None:
            self._next_working = time.monotonic() + WORKING_EVERY_S
        self._answering = target.seq
        if self._agent._job is None:
            self._begin(target)
        else:
            self._pending = target  # taken up when the running callback returns

    def _begin(self, target: Target) -> None:
        agent = self._agent
        pool = agent._read_stats()
        if pool is None:
            self._answer(
                target.seq,
                ProgressStatus.FAILED,
                agent._last_pool_bytes,
                "the pool's stats cannot be read",
            )
            return
        if target.pool_bytes == pool.pool_bytes:
            self._answer(target.seq, ProgressStatus.DONE, pool.pool_bytes)
            return
        if target.pool_bytes < pool.pool_bytes:
            job = _Job(target, agent._shrink, "shrink", self)
        else:
            job = _Job(target, agent._grow, "grow", self)
        agent._job = job
        threading.Thread(
            target=agent._work, args=(job,), name="memtide-balloon-resize", daemon=True
        ).start()

    def _take_finished(self) -> None:
        """Answers the callbacks that returned and starts the target waiting for them."""
        agent = self._agent
        while True:
            try:
                finished = agent._finished.get_nowait()
            except queue.Empty:
                break
            agent._job = None
            job = finished.job
            if job.connection is not self or job.target.seq != self._answering:
                continue  # superseded, or asked for on a connection now gone
            size = agent._pool_bytes()
            if finished.refusal is not None:
                self._answer(job.target.seq, ProgressStatus.FAILED, size, finished.refusal)
            elif size == job.target.pool_bytes:
                self._answer(job.target.seq, ProgressStatus.DONE, size)
            else:
                self._answer(
                    job.target.seq,
                    ProgressStatus.FAILED,
                    size,
                    f"{job.direction} returned but the pool is {size} bytes, "
                    f"not {job.target.pool_bytes}",
                )
        if agent._job is None and self._pending is not None:
            target, self._pending = self._pending, None
            self._begin(target)

    def _answer(
        self, seq: int, status: ProgressStatus, size: int, reason: str | None = None
    ) -> None:
        if status is ProgressStatus.DONE:
            _logger.info("target %d done: the pool is %d bytes", seq, size)
        else:
            _logger.warning("target %d failed at %d bytes: %s", seq, size, reason)
        self._send(Progress(seq, size, status, None if reason is None else _clip(reason)))
        self._answering = None
        self._next_working = float("inf")

    def _send_due(self, now: float) -> None:
        welcome = self.welcome
        if welcome is not None and now >= self._next_stats:
            self._next_stats = now + welcome.stats_interval_ms / 1000
            stats = self._agent._read_stats()
            if stats is not None:
                self._send(stats)
        if self._answering is not None and now >= self._next_working:
            self._next_working = now + WORKING_EVERY_S
            self._send(Progress(self._answering, self._agent._pool_bytes(), ProgressStatus.WORKING))

    def _send_error(self, code: ErrorCode, message: str) -> None:
        _logger.warning("memtide sent a message the agent cannot take: %s", message)
        self._send(ErrorMessage(code, message, False))

    def _send(self, message: MessageToMemtide) -> None:
        line = encode(message)
        _logger.debug("sending %r", line)
        self._sock.sendall(line)


def _drain(wake: socket.socket) -> None:
    with contextlib.suppress(BlockingIOError):
        while wake.recv(4096):
            pass
