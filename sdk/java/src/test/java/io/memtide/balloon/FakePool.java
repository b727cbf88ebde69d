/*
 * FakePool: an application pool for tests: a size that the callbacks set, statistics read off
 * it, and a count of callback calls. "comply" and "refuse" are the vectors' two applications.
 */
package io.memtide.balloon;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

final class FakePool {
    final AtomicLong size;
    final AtomicInteger calls = new AtomicInteger();

    FakePool(long size) {
        this.size = new AtomicLong(size);
    }

    PoolStats stats() {
        return PoolStats.ofSize(size.get());
    }

    /** Resizes to the target and succeeds. */
    Result comply(ResizeRequest request) {
        calls.incrementAndGet();
        size.set(request.targetBytes());
        return Result.success();
    }

    /** Fails with a reason and leaves the pool as it is. */
    Result refuse(ResizeRequest request) {
        calls.incrementAndGet();
        return Result.failure("the application keeps its pool");
    }
}
