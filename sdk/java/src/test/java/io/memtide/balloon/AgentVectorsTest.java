/*
 * AgentVectorsTest: every exchange in protocol/vectors/agent/, played by a Player (the test
 * memtide, on a socket in a temporary directory) against a real agent whose pool starts as the
 * vector's "pool" says and whose callbacks comply or refuse as its "app" says.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

class AgentVectorsTest {
    @TempDir
    Path dir;

    private static List<Path> exchanges() throws IOException {
        try (Stream<Path> files = Files.list(Vectors.dir().resolve("agent"))) {
            return files.filter(f -> f.toString().endsWith(".json")).sorted().toList();
        }
    }

    @Test
    void thereAreAgentExchanges() throws IOException {
        // Guards the factory below against a moved or emptied directory: it would run nothing.
        assertTrue(exchanges().size() >= 10, "agent exchanges in " + Vectors.dir());
    }

    @TestFactory
    Stream<DynamicTest> everyAgentExchangePlaysAsTheVectorSays() throws IOException {
        return exchanges().stream().map(file -> DynamicTest.dynamicTest(file.getFileName().toString(), () -> {
            play(Vectors.read(file));
        }));
    }

    private void play(JSONObject vector) throws IOException {
        JSONObject facts = vector.getJSONObject("pool");
        FakePool pool = new FakePool(facts.getLong("pool_bytes"));
        String app = vector.getString("app");
        Resizer resizer = switch (app) {
            case "comply" -> pool::comply;
            case "refuse" -> pool::refuse;
            default -> throw new IllegalArgumentException("unknown app " + app);
        };
        Path socket = dir.resolve(vector.getString("name") + ".sock");
        try (Player player = new Player(socket)) {
            BalloonAgent agent = BalloonAgent.builder()
                    .app(facts.getString("app"))
                    .kind(PoolKind.valueOf(facts.getString("kind").toUpperCase(Locale.ROOT)))
                    .minBytes(facts.getLong("min_bytes"))
                    .maxBytes(facts.getLong("max_bytes"))
                    .granuleBytes(facts.getLong("granule_bytes"))
                    .stats(pool::stats)
                    .shrink(resizer)
                    .grow(resizer)
                    .socket(socket)
                    .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(100))
                    .start();
            try (Player.Peer peer = player.accept(Expect.TIMEOUT)) {
                JSONArray steps = vector.getJSONArray("steps");
                for (int i = 0; i < steps.length(); i++) {
                    step(peer, steps.getJSONObject(i));
                }
            } finally {
                agent.close();
            }
        }
    }

    private static void step(Player.Peer peer, JSONObject step) throws IOException {
        if (step.has("send")) {
            peer.send(step.getString("send"));
        } else if (step.has("expect")) {
            Expect.line(peer, step.getJSONObject("expect"));
        } else if (step.optBoolean("expect_closed")) {
            Expect.closed(peer);
        } else {
            throw new IllegalArgumentException("unknown step " + step);
        }
    }
}
