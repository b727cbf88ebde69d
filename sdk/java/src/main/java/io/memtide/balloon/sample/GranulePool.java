/*
 * GranulePool: the sample's pool: memory held in granules, each a direct ByteBuffer whose every
 * page is written once so that it is resident, grown by allocating granules and shrunk by
 * freeing the most recently allocated ones at once (DirectMemory). Its statistics count all of
 * it as used and the granules dropped as evictions; it serves no lookups, so hits and misses
 * stay 0.
 */
package io.memtide.balloon.sample;

import io.memtide.balloon.PoolStats;
import io.memtide.balloon.ResizeRequest;
import io.memtide.balloon.Result;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.function.BooleanSupplier;

public final class GranulePool {
    /** The stride of the touches: every 4 KiB page (and so every larger page) is written. */
    static final int PAGE = 4096;

    private final int granuleBytes;
    private final Deque<ByteBuffer> granules = new ArrayDeque<>();
    private volatile long sizeBytes;
    private volatile long evictions;

    /**
     * A pool of {@code granuleBytes} granules; empty until resized.
     *
     * @throws IllegalArgumentException when the granule is not a positive multiple of 4 KiB
     */
    public GranulePool(int granuleBytes) {
        if (granuleBytes <= 0 || granuleBytes % PAGE != 0) {
            throw new IllegalArgumentException(
                    "granule = " + granuleBytes + " bytes: must be a positive multiple of " + PAGE);
        }
        this.granuleBytes = granuleBytes;
    }

    /** The pool's size and counters now; safe from any thread. */
    public PoolStats stats() {
        long size = sizeBytes;
        return new PoolStats(size, size, 0, 0, evictions, 0);
    }

    /**
     * Grows or shrinks the pool to the request's target, a granule at a time, stopping early
     * when the request is superseded. Shrinking frees each granule's memory before it returns.
     */
    public Result resize(ResizeRequest request) {
        return resizeTo(request.targetBytes(), request::isSuperseded);
    }

    /** {@link #resize}, asking {@code superseded} before each granule. */
    synchronized Result resizeTo(long target, BooleanSupplier superseded) {
        if (target % granuleBytes != 0) {
            return Result.failure("target " + target + " is not a multiple of the granule " + granuleBytes);
        }
        while (sizeBytes > target) {
            if (superseded.getAsBoolean()) {
                return Result.failure("superseded at " + sizeBytes + " bytes");
            }
            DirectMemory.free(granules.pop());
            sizeBytes -= granuleBytes;
            evictions++;
        }
        while (sizeBytes < target) {
            if (superseded.getAsBoolean()) {
                return Result.failure("superseded at " + sizeBytes + " bytes");
            }
            ByteBuffer granule;
            try {
                granule = ByteBuffer.allocateDirect(granuleBytes);
            } catch (OutOfMemoryError e) {
                return Result.failure("grew to " + sizeBytes + " bytes only: " + e.getMessage()
                        + " (raise -XX:MaxDirectMemorySize)");
            }
            for (int page = 0; page < granuleBytes; page += PAGE) {
                granule.put(page, (byte) 1);
            }
            granules.push(granule);
            sizeBytes += granuleBytes;
        }
        return Result.success();
    }
}
