/*
 * AgentTest: the agent's behaviour over a real socket beyond the vectors: it says hello with
 * its pid and its pool's size now, reconnects and says hello again when the connection drops or
 * memtide says bye, keeps trying until memtide listens, says bye when stopped and then stays
 * away, sends stats every stats interval, reports "working" while a callback runs, lets a newer
 * target supersede an older one, and answers out-of-order or oversized input with non-fatal
 * errors.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.json.JSONObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(20)
class AgentTest {
    private static final long MIB = 1 << 20;
    private static final String WELCOME = "{\"type\":\"welcome\",\"version\":1,\"tenant\":\"t\","
            + "\"stats_interval_ms\":60000,\"dead_after_ms\":180000}";

    @TempDir
    Path dir;

    private final FakePool app = new FakePool(512 * MIB);
    private BalloonAgent agent;

    @AfterEach
    void stopAgent() {
        if (agent != null) {
            agent.close();
        }
    }

    private Path socket() {
        return dir.resolve("balloon.sock");
    }

    private BalloonAgent start(Resizer shrink, Resizer grow) {
        agent = BalloonAgent.builder()
                .app("agent-test").kind(PoolKind.BUFFER_POOL)
                .minBytes(64 * MIB).maxBytes(1024 * MIB).granuleBytes(MIB)
                .stats(app::stats).shrink(shrink).grow(grow)
                .socket(socket())
                .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(40))
                .start();
        return agent;
    }

    private BalloonAgent start() {
        return start(app::comply, app::comply);
    }

    private static JSONObject expect(Player.Peer peer, String json) throws IOException {
        return Expect.line(peer, new JSONObject(json));
    }

    /** Accepts the agent, reads its hello and welcomes it; stats at once follow. */
    private static Player.Peer welcomed(Player player) throws IOException {
        Player.Peer peer = player.accept(Expect.TIMEOUT);
        expect(peer, "{\"type\":\"hello\"}");
        peer.send(WELCOME);
        expect(peer, "{\"type\":\"stats\"}");
        return peer;
    }

    @Test
    void saysHelloWithItsPidAndThePoolsSizeNow() throws IOException {
        app.size.set(300 * MIB);
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = player.accept(Expect.TIMEOUT)) {
                JSONObject hello = expect(peer, "{\"type\":\"hello\",\"version\":1,\"app\":\"agent-test\","
                        + "\"kind\":\"buffer_pool\",\"pool_bytes\":314572800}");
                assertEquals(ProcessHandle.current().pid(), hello.getLong("pid"));
            }
        }
    }

    @Test
    void reconnectsAndSaysHelloAgainWhenTheConnectionDrops() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            welcomed(player).close();
            app.size.set(128 * MIB);
            try (Player.Peer again = player.accept(Expect.TIMEOUT)) {
                expect(again, "{\"type\":\"hello\",\"pool_bytes\":134217728}");
            }
        }
    }

    @Test
    void reconnectsWhenMemtideSaysBye() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = welcomed(player)) {
                peer.send("{\"type\":\"bye\",\"reason\":\"restarting\"}");
                Expect.closed(peer);
            }
            try (Player.Peer again = player.accept(Expect.TIMEOUT)) {
                expect(again, "{\"type\":\"hello\"}");
            }
        }
    }

    @Test
    void keepsTryingUntilMemtideListens() throws IOException, InterruptedException {
        start();
        Thread.sleep(200);
        try (Player player = new Player(socket()); Player.Peer peer = player.accept(Expect.TIMEOUT)) {
            expect(peer, "{\"type\":\"hello\"}");
        }
    }

    @Test
    void saysByeWhenStoppedAndDoesNotComeBack() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = welcomed(player)) {
                agent.close();
                expect(peer, "{\"type\":\"bye\"}");
                Expect.closed(peer);
            }
            assertNull(player.tryAccept(Duration.ofMillis(300)), "the agent reconnected after close");
        }
    }

    @Test
    void stopsPromptlyWhileMemtideIsAway() {
        start();
        long begin = System.nanoTime();
        agent.close();
        assertTrue(System.nanoTime() - begin < TimeUnit.SECONDS.toNanos(1), "close took over a second");
    }

    @Test
    void sendsStatsEveryStatsInterval() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = player.accept(Expect.TIMEOUT)) {
                expect(peer, "{\"type\":\"hello\"}");
                peer.send("{\"type\":\"welcome\",\"version\":1,\"tenant\":\"t\",\"stats_interval_ms\":50,"
                        + "\"dead_after_ms\":1000}");
                long begin = System.nanoTime();
                for (int i = 0; i < 5; i++) {
                    expect(peer, "{\"type\":\"stats\",\"pool_bytes\":536870912,\"used_bytes\":0,\"hits\":0,"
                            + "\"misses\":0,\"evictions\":0,\"dirty_bytes\":0}");
                }
                // The first at once, four more 50 ms apart: 200 ms at the least.
                assertTrue(System.nanoTime() - begin >= TimeUnit.MILLISECONDS.toNanos(190),
                        "five stats came faster than every 50 ms");
            }
        }
    }

    @Test
    void reportsWorkingWhileACallbackRunsThenDone() throws IOException, InterruptedException {
        CountDownLatch release = new CountDownLatch(1);
        try (Player player = new Player(socket())) {
            start(request -> {
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return app.comply(request);
            }, app::comply);
            try (Player.Peer peer = welcomed(player)) {
                peer.send("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":268435456,\"deadline_ms\":30000}");
                expect(peer, "{\"type\":\"progress\",\"seq\":1,\"status\":\"working\",\"pool_bytes\":536870912}");
                release.countDown();
                expect(peer, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\",\"pool_bytes\":268435456}");
            }
        }
    }

    @Test
    void aNewerTargetSupersedesTheOneInProgress() throws IOException, InterruptedException {
        AtomicBoolean firstSawSuperseded = new AtomicBoolean();
        CountDownLatch started = new CountDownLatch(1);
        try (Player player = new Player(socket())) {
            start(request -> {
                if (request.targetBytes() == 256 * MIB) {
                    started.countDown();
                    while (!request.isSuperseded()) {
                        Thread.onSpinWait();
                    }
                    firstSawSuperseded.set(true);
                    return Result.failure("superseded");
                }
                return app.comply(request);
            }, app::comply);
            try (Player.Peer peer = welcomed(player)) {
                peer.send("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":268435456,\"deadline_ms\":30000}");
                assertTrue(started.await(5, TimeUnit.SECONDS), "the first callback did not start");
                peer.send("{\"type\":\"target\",\"seq\":2,\"pool_bytes\":134217728,\"deadline_ms\":30000}");
                // The next answer is seq 2's: seq 1's failure is not sent.
                expect(peer, "{\"type\":\"progress\",\"seq\":2,\"status\":\"done\",\"pool_bytes\":134217728}");
                assertTrue(firstSawSuperseded.get());
            }
        }
    }

    @Test
    void aTargetBeforeTheWelcomeIsNotRegistered() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = player.accept(Expect.TIMEOUT)) {
                expect(peer, "{\"type\":\"hello\"}");
                peer.send("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":268435456,\"deadline_ms\":30000}");
                expect(peer, "{\"type\":\"error\",\"code\":\"not_registered\",\"fatal\":false}");
                assertEquals(0, app.calls.get());
            }
        }
    }

    @Test
    void aTargetWhoseSeqDoesNotGrowIsABadField() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = welcomed(player)) {
                peer.send("{\"type\":\"target\",\"seq\":5,\"pool_bytes\":268435456,\"deadline_ms\":30000}");
                expect(peer, "{\"type\":\"progress\",\"seq\":5,\"status\":\"done\"}");
                peer.send("{\"type\":\"target\",\"seq\":5,\"pool_bytes\":134217728,\"deadline_ms\":30000}");
                expect(peer, "{\"type\":\"error\",\"code\":\"bad_field\",\"fatal\":false,"
                        + "\"message\":\"target.seq = 5 is not above the last target's 5\"}");
                assertEquals(1, app.calls.get());
            }
        }
    }

    @Test
    void aLineOverTheLimitIsTooLongAndTheSessionGoesOn() throws IOException {
        try (Player player = new Player(socket())) {
            start();
            try (Player.Peer peer = welcomed(player)) {
                peer.send("{\"type\":\"bye\",\"reason\":\"" + "x".repeat(70_000) + "\"}");
                expect(peer, "{\"type\":\"error\",\"code\":\"too_long\",\"fatal\":false}");
                peer.send("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":268435456,\"deadline_ms\":30000}");
                expect(peer, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
            }
        }
    }

    @Test
    void aPoolOutsideMinMaxIsNotRegisteredUntilItIsBack() throws IOException {
        app.size.set(2048 * MIB);
        try (Player player = new Player(socket())) {
            start();
            assertNull(player.tryAccept(Duration.ofMillis(200)), "connected with a pool above max");
            app.size.set(1024 * MIB);
            try (Player.Peer peer = player.accept(Expect.TIMEOUT)) {
                expect(peer, "{\"type\":\"hello\",\"pool_bytes\":1073741824}");
            }
        }
    }
}
