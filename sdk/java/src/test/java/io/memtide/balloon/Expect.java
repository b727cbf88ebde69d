/*
 * Expect: the test vectors' expectations (docs/balloon-protocol.md, "Test vectors") on a Player's
 * connection: the next line must be a JSON object holding every key of the expected object with
 * an equal value, skipping stats lines and "progress working" lines unless those are what is
 * expected; or the agent must close the connection within 5 s. Lines are read with org.json, a
 * parser independent of the SDK's.
 */
package io.memtide.balloon;

import java.io.IOException;
import java.time.Duration;
import org.json.JSONObject;

final class Expect {
    /** How long one expectation waits. */
    static final Duration TIMEOUT = Duration.ofSeconds(5);

    private Expect() {}

    /** Reads past skippable lines to the next one and checks it against {@code expected}. */
    static JSONObject line(Player.Peer peer, JSONObject expected) throws IOException {
        long end = System.nanoTime() + TIMEOUT.toNanos();
        while (true) {
            Duration left = Duration.ofNanos(Math.max(1, end - System.nanoTime()));
            String line = peer.readLine(left);
            if (line == null) {
                throw new AssertionError("the agent closed the connection; expected " + expected);
            }
            JSONObject got = new JSONObject(line);
            if (skipped(got, expected)) {
                continue;
            }
            for (String key : expected.keySet()) {
                if (!got.has(key) || !sameValue(got.get(key), expected.get(key))) {
                    throw new AssertionError("expected a line holding " + expected + ", got " + line);
                }
            }
            return got;
        }
    }

    /** Checks that the agent closes the connection, skipping stats and working progress. */
    static void closed(Player.Peer peer) throws IOException {
        long end = System.nanoTime() + TIMEOUT.toNanos();
        while (true) {
            Duration left = Duration.ofNanos(Math.max(1, end - System.nanoTime()));
            String line = peer.readLine(left);
            if (line == null) {
                return;
            }
            if (!skipped(new JSONObject(line), new JSONObject())) {
                throw new AssertionError("expected the connection closed, got " + line);
            }
        }
    }

    private static boolean skipped(JSONObject got, JSONObject expected) {
        String type = got.optString("type");
        String status = got.optString("status");
        boolean asked = type.equals(expected.optString("type"))
                && (!type.equals("progress") || status.equals(expected.optString("status")));
        boolean skippable = type.equals("stats") || (type.equals("progress") && status.equals("working"));
        return skippable && !asked;
    }

    /** JSON equality: numbers by value (1 and 1L are equal), the rest as org.json compares. */
    static boolean sameValue(Object a, Object b) {
        return new JSONObject().put("v", a).similar(new JSONObject().put("v", b));
    }
}
