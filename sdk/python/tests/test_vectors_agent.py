"""Plays every exchange of protocol/vectors/agent/ against the agent, one test per vector.

The player listens on a socket in a temporary directory, accepts the agent's connection and
runs the vector's steps; the agent's pool complies or refuses as the vector's ``app`` says.
"""

from __future__ import annotations

import logging
import re
import tempfile
import unittest
from pathlib import Path
from typing import Callable

from balloon_player import VECTORS, FakePool, Player, agent_for, load_vector


class AgentExchangeTests(unittest.TestCase):
    """One test_vector_* method per file of protocol/vectors/agent/."""

    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory(prefix="memtide-py-")
        self.addCleanup(directory.cleanup)
        self.player = Player(directory.name)
        self.addCleanup(self.player.close)

    def play(self, path: Path) -> None:
        vector = load_vector(path)
        facts = vector["pool"]
        pool = FakePool(facts["pool_bytes"], comply=vector["app"] == "comply")
        agent = agent_for(pool, self.player.path, facts)
        # The agent logs what it refuses and why; the vectors check what it sends.
        with self.assertLogs("memtide_balloon", logging.DEBUG), agent:
            self.player.accept().play(vector["steps"])


def _test_for(path: Path) -> Callable[[AgentExchangeTests], None]:
    def test(self: AgentExchangeTests) -> None:
        self.play(path)

    test.__doc__ = load_vector(path)["description"]
    return test


_PATHS = sorted((VECTORS / "agent").glob("*.json"))
for _path in _PATHS:
    setattr(
        AgentExchangeTests,
        "test_vector_" + re.sub(r"\W", "_", _path.stem),
        _test_for(_path),
    )


class VectorSetTests(unittest.TestCase):
    def test_every_agent_exchange_has_a_test(self) -> None:
        self.assertGreaterEqual(len(_PATHS), 12)
        tests = [name for name in dir(AgentExchangeTests) if name.startswith("test_vector_")]
        self.assertEqual(len(tests), len(_PATHS))


if __name__ == "__main__":
    unittest.main()
