/*
 * Backoff: the agent's delays between connection attempts: exponential from an initial delay,
 * doubling up to a ceiling, each drawn at random from its upper half (jitter, so that the agents
 * of a restarted memtide do not all come back at once).
 */
package io.memtide.balloon;

import java.time.Duration;
import java.util.random.RandomGenerator;

final class Backoff {
    private static final Duration MAX = Duration.ofDays(1);

    private final long initialNanos;
    private final long maxNanos;
    private final RandomGenerator random;
    private long nextNanos;

    Backoff(Duration initial, Duration max, RandomGenerator random) {
        if (initial.isNegative() || initial.isZero()) {
            throw new IllegalArgumentException("initial back-off " + initial + " must be positive");
        }
        if (max.compareTo(MAX) > 0) {
            throw new IllegalArgumentException("largest back-off " + max + " is over a day");
        }
        if (max.compareTo(initial) < 0) {
            throw new IllegalArgumentException(
                    "largest back-off " + max + " is below the initial " + initial);
        }
        this.initialNanos = initial.toNanos();
        this.maxNanos = max.toNanos();
        this.random = random;
        this.nextNanos = initialNanos;
    }

    /** The delay before the next attempt, in [d/2, d] for the current d, which then doubles. */
    Duration next() {
        long ceiling = nextNanos;
        nextNanos = Math.min(maxNanos, ceiling * 2);
        long floor = ceiling / 2;
        return Duration.ofNanos(floor + random.nextLong(ceiling - floor + 1));
    }

    /** Starts again from the initial delay (after a session that was welcomed). */
    void reset() {
        nextNanos = initialNanos;
    }
}
