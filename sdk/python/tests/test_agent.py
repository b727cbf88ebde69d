"""Tests of the agent beyond the exchange vectors: reconnection, stop, stats timing, working
progress, superseded targets, failing callbacks, the socket path, and the back-off."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import unittest
from typing import Any
from unittest import mock

from balloon_player import TIMEOUT_S, VECTOR_FACTS, FakePool, Peer, Player, agent_for

from memtide_balloon import (
    DEFAULT_SOCKET_PATH,
    Agent,
    Backoff,
    PoolKind,
    Stats,
    socket_path_from_environment,
)

MiB = 1 << 20
START = VECTOR_FACTS["pool_bytes"]  # 512 MiB in [64 MiB, 1 GiB], 1 MiB granules
HELLO = {"type": "hello", "version": 1, "pid": os.getpid()}


def welcome(interval_ms: int = 60_000) -> str:
    return (
        '{"type":"welcome","version":1,"tenant":"db",'
        f'"stats_interval_ms":{interval_ms},"dead_after_ms":{interval_ms * 3}}}'
    )


def target(seq: int, pool_bytes: int) -> str:
    return f'{{"type":"target","seq":{seq},"pool_bytes":{pool_bytes},"deadline_ms":30000}}'


def register(peer: Peer, interval_ms: int = 60_000) -> None:
    peer.expect(HELLO)
    peer.send(welcome(interval_ms))
    peer.expect({"type": "stats"})


class AgentTestCase(unittest.TestCase):
    """A player in a temporary directory; ``run`` starts an agent stopped at cleanup."""

    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory(prefix="memtide-py-")
        self.addCleanup(directory.cleanup)
        self.directory = directory.name
        self.player = Player(directory.name)
        self.addCleanup(self.player.close)
        # The agent logs every refusal and reconnection: keep them out of the test output.
        logger = logging.getLogger("memtide_balloon")
        patch = mock.patch.multiple(logger, handlers=[logging.NullHandler()], propagate=False)
        patch.start()
        self.addCleanup(patch.stop)

    def run_agent(self, pool: FakePool, **options: Any) -> Agent:
        agent = agent_for(pool, self.player.path, **options)
        agent.start()
        self.addCleanup(agent.stop)
        return agent

    def connect(self, pool: FakePool | None = None, interval_ms: int = 60_000) -> Peer:
        """A registered session of an agent for ``pool`` (a complying one by default)."""
        self.run_agent(pool or FakePool(START))
        peer = self.player.accept()
        register(peer, interval_ms)
        return peer


class ReconnectionTests(AgentTestCase):
    def test_agent_says_hello_again_with_its_pool_now_after_the_connection_drops(self) -> None:
        peer = self.connect()
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "progress", "seq": 1, "status": "done"})
        peer.close()
        again = self.player.accept()
        again.expect({**HELLO, "pool_bytes": 256 * MiB})

    def test_agent_reconnects_after_memtide_says_bye(self) -> None:
        peer = self.connect()
        peer.send('{"type":"bye","reason":"memtide is stopping"}')
        peer.expect_closed()
        register(self.player.accept())

    def test_agent_reconnects_after_a_fatal_error(self) -> None:
        self.run_agent(FakePool(START))
        peer = self.player.accept()
        peer.expect(HELLO)
        peer.send('{"type":"error","code":"busy","message":"db has an agent","fatal":true}')
        peer.expect_closed()
        register(self.player.accept())

    def test_agent_connects_once_memtide_starts_listening(self) -> None:
        path = os.path.join(self.directory, "later.sock")
        agent = agent_for(FakePool(START), path)
        agent.start()
        self.addCleanup(agent.stop)
        time.sleep(0.5)  # a few failed tries: the back-off is at 0.4 s by now
        late = Player(self.directory, name="later.sock")
        self.addCleanup(late.close)
        register(late.accept(timeout=2.0))
        self.assertEqual(agent.tenant, "db")

    def test_an_unexpected_failure_in_a_session_is_logged_and_the_agent_reconnects(
        self,
    ) -> None:
        peer = self.connect()
        failure = mock.patch(
            "memtide_balloon.agent._Connection._take_target", side_effect=RuntimeError("bug")
        )
        with failure, self.assertLogs("memtide_balloon", logging.ERROR) as logs:
            peer.send(target(1, 256 * MiB))
            peer.expect_closed()
            again = self.player.accept()  # the failure was logged before the agent came back
        self.assertIn("RuntimeError: bug", logs.output[0])
        register(again)

    def test_waits_between_tries_double_from_100_ms_up_to_30_s(self) -> None:
        backoff = Backoff(uniform=lambda: 1.0)
        delays = [backoff.next_delay() for _ in range(12)]
        self.assertEqual(delays[:4], [0.1, 0.2, 0.4, 0.8])
        self.assertEqual(delays[-3:], [30.0, 30.0, 30.0])

    def test_jitter_draws_each_wait_from_the_upper_half_of_its_step(self) -> None:
        self.assertEqual(Backoff(uniform=lambda: 0.0).next_delay(), 0.05)
        backoff = Backoff()
        for step in (0.1, 0.2, 0.4):
            self.assertTrue(step / 2 <= backoff.next_delay() <= step)

    def test_reset_starts_the_waits_over(self) -> None:
        backoff = Backoff(uniform=lambda: 1.0)
        for _ in range(5):
            backoff.next_delay()
        backoff.reset()
        self.assertEqual(backoff.next_delay(), 0.1)


class StopTests(AgentTestCase):
    def test_stop_sends_bye_and_closes(self) -> None:
        agent = agent_for(FakePool(START), self.player.path)
        agent.start()
        peer = self.player.accept()
        register(peer)
        agent.stop()
        peer.expect({"type": "bye"})
        peer.expect_closed()
        with self.assertRaises(AssertionError):
            self.player.accept(timeout=0.5)  # and does not come back

    def test_leaving_the_with_block_sends_bye(self) -> None:
        with agent_for(FakePool(START), self.player.path) as agent:
            peer = self.player.accept()
            register(peer)
            self.assertEqual(agent.tenant, "db")
        peer.expect({"type": "bye"})
        peer.expect_closed()
        self.assertIsNone(agent.tenant)

    def test_stop_returns_at_once_while_memtide_is_unreachable(self) -> None:
        agent = agent_for(FakePool(START), os.path.join(self.directory, "absent.sock"))
        agent.start()
        time.sleep(0.3)
        begun = time.monotonic()
        agent.stop()
        self.assertLess(time.monotonic() - begun, 1.0)

    def test_an_agent_starts_once(self) -> None:
        agent = self.run_agent(FakePool(START))
        with self.assertRaises(RuntimeError):
            agent.start()


class StatsTests(AgentTestCase):
    def test_stats_go_at_once_after_the_welcome(self) -> None:
        self.run_agent(FakePool(START))
        peer = self.player.accept()
        peer.expect(HELLO)
        peer.send(welcome(interval_ms=60_000))
        message = peer.read(timeout=1.0)  # not a minute later
        assert message is not None
        self.assertEqual(message["type"], "stats")

    def test_stats_go_every_interval_with_the_pool_figures(self) -> None:
        self.run_agent(FakePool(START))
        peer = self.player.accept()
        peer.expect(HELLO)
        peer.send(welcome(interval_ms=100))
        times: list[float] = []
        first: dict[str, Any] | None = None
        while len(times) < 5:
            message = peer.read()
            assert message is not None
            self.assertEqual(message["type"], "stats")
            first = first or message
            times.append(time.monotonic())
        self.assertEqual(
            first,
            {
                "type": "stats",
                "pool_bytes": START,
                "used_bytes": START // 2,
                "hits": 10,
                "misses": 1,
                "evictions": 0,
                "dirty_bytes": 0,
            },
        )
        # Four intervals of 100 ms: not all at once, and not a second apart.
        self.assertGreater(times[-1] - times[0], 0.25)
        self.assertLess(times[-1] - times[0], 2.0)

    def test_a_failing_stats_callback_skips_stats_and_the_session_goes_on(self) -> None:
        pool = FakePool(START)
        broken = threading.Event()

        def stats() -> Stats:
            if broken.is_set():
                raise OSError("counters unavailable")
            return pool.stats()

        agent = Agent(
            app="db",
            kind=PoolKind.CACHE,
            min_bytes=0,
            max_bytes=1 << 30,
            granule_bytes=MiB,
            shrink=pool.shrink,
            grow=pool.grow,
            stats=stats,
            socket_path=self.player.path,
        )
        agent.start()
        self.addCleanup(agent.stop)
        peer = self.player.accept()
        peer.expect(HELLO)
        broken.set()
        with self.assertLogs("memtide_balloon", logging.ERROR) as logs:
            peer.send(welcome(interval_ms=100))
            time.sleep(0.35)
        self.assertIn("stats callback failed", logs.output[0])
        broken.clear()
        message = peer.read()
        assert message is not None
        self.assertEqual(message["type"], "stats")


class TargetTests(AgentTestCase):
    def test_working_progress_goes_about_once_a_second_while_a_callback_runs(self) -> None:
        peer = self.connect(FakePool(START, delay_s=2.5))
        peer.send(target(1, 256 * MiB))
        sent = time.monotonic()
        answers: list[dict[str, Any]] = []
        while not answers or answers[-1]["status"] == "working":
            message = peer.read()
            assert message is not None
            if message["type"] == "progress":
                answers.append(message)
                if len(answers) == 1:
                    self.assertGreater(time.monotonic() - sent, 0.8)  # not at once
        self.assertEqual([answer["status"] for answer in answers], ["working", "working", "done"])
        self.assertEqual(answers[0], {**answers[0], "seq": 1, "pool_bytes": START})
        self.assertEqual(answers[-1]["pool_bytes"], 256 * MiB)

    def test_a_newer_target_supersedes_one_in_progress(self) -> None:
        gate = threading.Event()
        pool = FakePool(START, gate=gate)
        peer = self.connect(pool)
        peer.send(target(1, 256 * MiB))
        self.assertTrue(pool.called.wait(TIMEOUT_S))
        peer.send(target(2, 768 * MiB))
        # Working on seq 2 means the agent took it while the shrink for seq 1 still runs.
        peer.expect({"type": "progress", "seq": 2, "status": "working"})
        gate.set()
        peer.expect({"type": "progress", "seq": 2, "status": "done", "pool_bytes": 768 * MiB})
        self.assertEqual(pool.calls, [("shrink", 256 * MiB), ("grow", 768 * MiB)])
        answered = [m["seq"] for m in peer.seen if m["type"] == "progress"]
        self.assertNotIn(1, answered)

    def test_an_exception_in_a_callback_is_failed_with_its_message(self) -> None:
        pool = FakePool(START)

        def shrink(target_bytes: int) -> None:
            raise RuntimeError("the disk is on fire")

        self.run_agent(pool, shrink=shrink)
        peer = self.player.accept()
        register(peer)
        with self.assertLogs("memtide_balloon", logging.ERROR) as logs:
            peer.send(target(1, 256 * MiB))
            answer = peer.expect({"type": "progress", "seq": 1, "status": "failed"})
        self.assertEqual(answer["reason"], "shrink failed: RuntimeError: the disk is on fire")
        self.assertEqual(answer["pool_bytes"], START)
        self.assertIn("Traceback", logs.output[0])

    def test_a_refusal_is_failed_with_its_reason_and_the_pool_as_it_is(self) -> None:
        peer = self.connect(FakePool(START, comply=False))
        peer.send(target(1, 768 * MiB))
        answer = peer.expect({"type": "progress", "seq": 1, "status": "failed"})
        self.assertEqual(answer["reason"], "the test pool refuses to move")
        self.assertEqual(answer["pool_bytes"], START)

    def test_a_callback_that_leaves_the_pool_elsewhere_is_failed(self) -> None:
        pool = FakePool(START)

        def shrink(target_bytes: int) -> None:
            pool.shrink(target_bytes + MiB)  # one granule short

        self.run_agent(pool, shrink=shrink)
        peer = self.player.accept()
        register(peer)
        peer.send(target(1, 256 * MiB))
        answer = peer.expect({"type": "progress", "seq": 1, "status": "failed"})
        self.assertEqual(answer["pool_bytes"], 257 * MiB)
        self.assertEqual(
            answer["reason"], f"shrink returned but the pool is {257 * MiB} bytes, not {256 * MiB}"
        )

    def test_a_target_at_the_pool_size_is_done_without_a_callback(self) -> None:
        pool = FakePool(START)
        peer = self.connect(pool)
        peer.send(target(1, START))
        peer.expect({"type": "progress", "seq": 1, "status": "done", "pool_bytes": START})
        self.assertEqual(pool.calls, [])

    def test_a_target_whose_seq_is_not_above_the_last_is_bad_field(self) -> None:
        pool = FakePool(START)
        peer = self.connect(pool)
        peer.send(target(5, 256 * MiB))
        peer.expect({"type": "progress", "seq": 5, "status": "done"})
        peer.send(target(5, 128 * MiB))
        error = peer.expect({"type": "error", "code": "bad_field", "fatal": False})
        self.assertEqual(error["message"], "target.seq = 5: not above the last target's 5")
        self.assertEqual(pool.calls, [("shrink", 256 * MiB)])

    def test_a_target_before_the_welcome_is_not_registered(self) -> None:
        pool = FakePool(START)
        self.run_agent(pool)
        peer = self.player.accept()
        peer.expect(HELLO)
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "error", "code": "not_registered", "fatal": False})
        self.assertEqual(pool.calls, [])

    def test_a_second_welcome_is_already_registered_and_the_session_goes_on(self) -> None:
        peer = self.connect()
        peer.send(welcome())
        peer.expect({"type": "error", "code": "already_registered", "fatal": False})
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "progress", "seq": 1, "status": "done"})


class LineTests(AgentTestCase):
    def test_a_line_over_65536_bytes_is_too_long_and_the_session_goes_on(self) -> None:
        peer = self.connect()
        peer.send_bytes(b'{"type":"bye","reason":"' + b"y" * 70_000 + b'"}\n')
        peer.expect({"type": "error", "code": "too_long", "fatal": False})
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "progress", "seq": 1, "status": "done"})

    def test_bytes_that_are_not_utf8_are_malformed_and_the_session_goes_on(self) -> None:
        peer = self.connect()
        peer.send_bytes(b'{"type":"\xff"}\n')
        error = peer.expect({"type": "error", "code": "malformed", "fatal": False})
        self.assertEqual(error["message"], "the line is not UTF-8 (byte 9)")
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "progress", "seq": 1, "status": "done"})

    def test_a_non_fatal_error_from_memtide_keeps_the_session(self) -> None:
        peer = self.connect()
        peer.send('{"type":"error","code":"unknown_seq","message":"seq 9","fatal":false}')
        peer.send(target(1, 256 * MiB))
        peer.expect({"type": "progress", "seq": 1, "status": "done"})


class FactsTests(unittest.TestCase):
    def test_pool_facts_that_break_the_rules_are_refused_naming_the_rule(self) -> None:
        pool = FakePool(0)
        with self.assertRaises(ValueError) as caught:
            Agent(
                app="db",
                kind=PoolKind.HEAP,
                min_bytes=2 << 30,
                max_bytes=1 << 30,
                granule_bytes=MiB,
                shrink=pool.shrink,
                grow=pool.grow,
                stats=pool.stats,
            )
        self.assertEqual(
            str(caught.exception), "hello.min_bytes = 2147483648 > max_bytes = 1073741824"
        )

    def test_start_refuses_a_pool_outside_min_and_max(self) -> None:
        agent = agent_for(FakePool(2 << 30), "/nonexistent/balloon.sock")
        with self.assertRaises(ValueError) as caught:
            agent.start()
        self.assertEqual(
            str(caught.exception), "hello.pool_bytes = 2147483648 > max_bytes = 1073741824"
        )


class SocketPathTests(unittest.TestCase):
    def test_the_environment_names_the_socket(self) -> None:
        with mock.patch.dict(os.environ, {"MEMTIDE_BALLOON_SOCKET": "/tmp/x/balloon.sock"}):
            self.assertEqual(socket_path_from_environment(), "/tmp/x/balloon.sock")
            agent = agent_for(FakePool(START), None)
            self.assertEqual(agent.socket_path, "/tmp/x/balloon.sock")

    def test_without_the_environment_the_socket_is_the_default(self) -> None:
        with mock.patch.dict(os.environ, {"MEMTIDE_BALLOON_SOCKET": ""}):
            self.assertEqual(socket_path_from_environment(), DEFAULT_SOCKET_PATH)
        self.assertEqual(DEFAULT_SOCKET_PATH, "/run/memtide/balloon.sock")

    def test_a_path_given_beats_the_environment(self) -> None:
        with mock.patch.dict(os.environ, {"MEMTIDE_BALLOON_SOCKET": "/tmp/x/balloon.sock"}):
            agent = agent_for(FakePool(START), "/tmp/y/balloon.sock")
        self.assertEqual(agent.socket_path, "/tmp/y/balloon.sock")


if __name__ == "__main__":
    unittest.main()
