/*
 * AgentBuilderTest: start() refuses a builder with a fact missing or against the protocol's
 * rules, in one line naming it, before any thread starts; the socket comes from the builder,
 * else from MEMTIDE_BALLOON_SOCKET, else the default path.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class AgentBuilderTest {
    private final FakePool app = new FakePool(0);

    private BalloonAgent.Builder complete() {
        return BalloonAgent.builder().app("test").kind(PoolKind.HEAP)
                .minBytes(0).maxBytes(1 << 30).granuleBytes(1 << 20)
                .stats(app::stats).shrink(app::comply).grow(app::comply);
    }

    @Test
    void aMissingFactIsNamed() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> BalloonAgent.builder().app("test").minBytes(0).maxBytes(1).granuleBytes(1)
                        .shrink(app::comply).grow(app::comply).start());
        assertEquals("memtide-balloon: stats was not set", e.getMessage());
    }

    @Test
    void factsAgainstTheProtocolsRulesAreRefused() {
        assertEquals("hello.min_bytes = 2147483648 > max_bytes = 1073741824", assertThrows(
                IllegalArgumentException.class, () -> complete().minBytes(2L << 30).start()).getMessage());
        assertEquals("hello.granule_bytes = 0: must be at least 1", assertThrows(
                IllegalArgumentException.class, () -> complete().granuleBytes(0).start()).getMessage());
        assertEquals("hello.granule_bytes = 2147483648 > max_bytes = 1073741824", assertThrows(
                IllegalArgumentException.class, () -> complete().granuleBytes(2L << 30).start()).getMessage());
        assertEquals("hello.app is 0 bytes: must be 1 to 128", assertThrows(
                IllegalArgumentException.class, () -> complete().app("").start()).getMessage());
        assertEquals("hello.max_bytes = -1: must be from 0 to 9007199254740991", assertThrows(
                IllegalArgumentException.class, () -> complete().maxBytes(-1).start()).getMessage());
    }

    @Test
    void theSocketIsTheBuildersElseTheEnvironmentsElseTheDefault() {
        Path set = Path.of("/tmp/set.sock");
        assertEquals(set, BalloonAgent.Builder.socketPath(set, "/tmp/env.sock"));
        assertEquals(Path.of("/tmp/env.sock"), BalloonAgent.Builder.socketPath(null, "/tmp/env.sock"));
        assertEquals(BalloonAgent.DEFAULT_SOCKET, BalloonAgent.Builder.socketPath(null, ""));
        assertEquals(Path.of("/run/memtide/balloon.sock"), BalloonAgent.Builder.socketPath(null, null));
    }
}
