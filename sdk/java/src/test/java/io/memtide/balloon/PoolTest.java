/*
 * PoolTest: a target is checked against the granule, min and max before any callback; a resize
 * calls the shrink callback below the pool's size, the grow callback above it and neither at it;
 * and every way a callback goes wrong (throwing, returning null, succeeding without reaching the
 * target) becomes a failure that says so.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class PoolTest {
    private static final long MIB = 1 << 20;

    private final FakePool app = new FakePool(512 * MIB);
    private final List<String> called = new ArrayList<>();

    private Pool pool(Resizer shrink, Resizer grow) {
        return new Pool("test", PoolKind.CACHE, 64 * MIB, 1024 * MIB, MIB, app::stats, shrink, grow);
    }

    private Pool complying() {
        return pool(r -> {
            called.add("shrink");
            return app.comply(r);
        }, r -> {
            called.add("grow");
            return app.comply(r);
        });
    }

    private static ResizeRequest to(long bytes) {
        return new ResizeRequest(bytes, Duration.ofSeconds(30));
    }

    private static String reason(Result result) {
        return assertInstanceOf(Result.Failure.class, result).reason();
    }

    @Test
    void checksATargetAgainstGranuleMinAndMax() {
        Pool pool = complying();
        assertEquals(Optional.empty(), pool.check(64 * MIB));
        assertEquals(Optional.empty(), pool.check(1024 * MIB));
        assertEquals(Optional.of("target.pool_bytes = 1048577 is not a multiple of granule_bytes = 1048576"),
                pool.check(MIB + 1));
        assertEquals(Optional.of("target.pool_bytes = 33554432 < min_bytes = 67108864"), pool.check(32 * MIB));
        assertEquals(Optional.of("target.pool_bytes = 2147483648 > max_bytes = 1073741824"), pool.check(2048 * MIB));
    }

    @Test
    void shrinksBelowGrowsAboveAndLeavesAPoolAtItsTargetAlone() {
        Pool pool = complying();
        assertEquals(Result.success(), pool.resize(to(256 * MIB)));
        assertEquals(Result.success(), pool.resize(to(768 * MIB)));
        assertEquals(Result.success(), pool.resize(to(768 * MIB)));
        assertEquals(List.of("shrink", "grow"), called);
        assertEquals(768 * MIB, app.size.get());
    }

    @Test
    void passesTheApplicationsFailureOn() {
        Pool pool = pool(app::refuse, app::refuse);
        assertEquals("the application keeps its pool", reason(pool.resize(to(256 * MIB))));
    }

    @Test
    void aCallbackThatThrowsIsAFailureNamingTheException() {
        Pool pool = pool(r -> {
            throw new IllegalStateException("pages pinned");
        }, app::comply);
        assertEquals("the shrink callback threw java.lang.IllegalStateException: pages pinned",
                reason(pool.resize(to(256 * MIB))));
        Pool starved = pool(app::comply, r -> {
            throw new OutOfMemoryError("Direct buffer memory");
        });
        assertEquals("the grow callback threw java.lang.OutOfMemoryError: Direct buffer memory",
                reason(starved.resize(to(768 * MIB))));
    }

    @Test
    void aCallbackThatReturnsNullIsAFailure() {
        assertEquals("the shrink callback returned null", reason(pool(r -> null, app::comply).resize(to(0))));
    }

    @Test
    void aSuccessThatLeavesThePoolElsewhereIsAFailure() {
        Pool pool = pool(r -> Result.success(), app::comply);
        assertEquals("the shrink callback succeeded but the pool is 536870912 bytes, not the target 268435456",
                reason(pool.resize(to(256 * MIB))));
    }

    @Test
    void aStatsSupplierThatFailsIsAFailureAndTheLastSizeIsKept() {
        boolean[] broken = {false};
        Pool pool = new Pool("test", PoolKind.CACHE, 0, 1024 * MIB, MIB, () -> {
            if (broken[0]) {
                throw new IllegalStateException("stats lock poisoned");
            }
            return app.stats();
        }, app::comply, app::comply);
        assertEquals(512 * MIB, pool.poolBytes());
        broken[0] = true;
        assertEquals("cannot read the pool's size: java.lang.IllegalStateException: stats lock poisoned",
                reason(pool.resize(to(0))));
        assertEquals(512 * MIB, pool.poolBytes());
    }
}
