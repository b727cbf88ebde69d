/*
 * BackoffTest: reconnection delays double from the initial delay up to the ceiling, each drawn
 * from the upper half of its step, and start again after a reset.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BackoffTest {
    private static void assertWithin(long lowMs, long highMs, Duration delay) {
        assertTrue(delay.compareTo(Duration.ofMillis(lowMs)) >= 0 && delay.compareTo(Duration.ofMillis(highMs)) <= 0,
                () -> delay.toMillis() + " ms is outside [" + lowMs + ", " + highMs + "] ms");
    }

    @Test
    void doublesFromTheInitialDelayUpToTheCeilingWithJitter() {
        Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(30), new SplittableRandom(1));
        long step = 100;
        for (int i = 0; i < 12; i++) {
            assertWithin(step / 2, step, backoff.next());
            step = Math.min(30_000, step * 2);
        }
        assertEquals(30_000, step);
        assertWithin(15_000, 30_000, backoff.next());
    }

    @Test
    void jitterSpreadsTheDelays() {
        Backoff backoff = new Backoff(Duration.ofSeconds(1), Duration.ofSeconds(1), new SplittableRandom(7));
        Duration first = backoff.next();
        boolean varied = false;
        for (int i = 0; i < 20 && !varied; i++) {
            varied = !backoff.next().equals(first);
        }
        assertTrue(varied, "twenty delays at the ceiling were all " + first);
    }

    @Test
    void startsAgainAfterAReset() {
        Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(30), new SplittableRandom(2));
        for (int i = 0; i < 8; i++) {
            backoff.next();
        }
        backoff.reset();
        assertWithin(50, 100, backoff.next());
        assertWithin(100, 200, backoff.next());
    }

    @Test
    void refusesBoundsThatMakeNoSense() {
        assertThrows(IllegalArgumentException.class,
                () -> new Backoff(Duration.ZERO, Duration.ofSeconds(1), new SplittableRandom()));
        assertThrows(IllegalArgumentException.class,
                () -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1), new SplittableRandom()));
        assertThrows(IllegalArgumentException.class,
                () -> new Backoff(Duration.ofSeconds(1), Duration.ofDays(2), new SplittableRandom()));
    }
}
