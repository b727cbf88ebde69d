/*
 * PoolStats: the pool's statistics that the agent sends memtide in "stats" (and whose size it
 * reports in hello and progress).
 */
package io.memtide.balloon;

/**
 * The application's pool as it is now.
 *
 * @param poolBytes the pool's size
 * @param usedBytes the part of it holding data, at most poolBytes
 * @param hits lookups served from the pool since the application started, never decreasing
 * @param misses lookups the pool could not serve, never decreasing
 * @param evictions entries dropped to make room, never decreasing
 * @param dirtyBytes pool memory not yet written back, at most poolBytes
 */
public record PoolStats(
        long poolBytes, long usedBytes, long hits, long misses, long evictions, long dirtyBytes) {
    /** The largest integer the protocol carries: 2^53 − 1, exact in every language's JSON. */
    public static final long MAX_INTEGER = (1L << 53) - 1;

    public PoolStats {
        checkInteger("poolBytes", poolBytes);
        checkInteger("usedBytes", usedBytes);
        checkInteger("hits", hits);
        checkInteger("misses", misses);
        checkInteger("evictions", evictions);
        checkInteger("dirtyBytes", dirtyBytes);
        if (usedBytes > poolBytes) {
            throw new IllegalArgumentException(
                    "usedBytes = " + usedBytes + " > poolBytes = " + poolBytes);
        }
        if (dirtyBytes > poolBytes) {
            throw new IllegalArgumentException(
                    "dirtyBytes = " + dirtyBytes + " > poolBytes = " + poolBytes);
        }
    }

    /** Statistics of a pool of {@code poolBytes} with no data, traffic or dirty memory. */
    public static PoolStats ofSize(long poolBytes) {
        return new PoolStats(poolBytes, 0, 0, 0, 0, 0);
    }

    static void checkInteger(String name, long value) {
        if (value < 0 || value > MAX_INTEGER) {
            throw new IllegalArgumentException(
                    name + " = " + value + ": must be from 0 to " + MAX_INTEGER);
        }
    }
}
