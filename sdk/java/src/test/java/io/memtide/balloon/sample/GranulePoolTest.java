/*
 * GranulePoolTest: the sample pool really holds its memory and gives it back: VmRSS rises by the
 * pool's size when it grows and falls again when it shrinks (granules of 64 MiB, which glibc
 * always maps and unmaps on its own, so the test does not depend on MALLOC_MMAP_THRESHOLD_); it
 * moves in whole granules, counts evictions, and stops when its request is superseded.
 */
package io.memtide.balloon.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.memtide.balloon.PoolStats;
import io.memtide.balloon.ResizeRequest;
import io.memtide.balloon.Result;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class GranulePoolTest {
    private static final long MIB = 1 << 20;

    private static ResizeRequest to(long bytes) {
        return new ResizeRequest(bytes, Duration.ofSeconds(30));
    }

    @Test
    void growingMakesThePoolResidentAndShrinkingGivesItBackToTheOs() {
        GranulePool pool = new GranulePool((int) (64 * MIB));
        long before = Rss.bytes().orElseThrow();
        assertEquals(Result.success(), pool.resize(to(256 * MIB)));
        long grown = Rss.bytes().orElseThrow();
        assertTrue(grown - before >= 240 * MIB, "VmRSS rose by " + ((grown - before) >> 20) + " MiB only");
        assertEquals(Result.success(), pool.resize(to(0)));
        long shrunk = Rss.bytes().orElseThrow();
        assertTrue(grown - shrunk >= 240 * MIB, "VmRSS fell by " + ((grown - shrunk) >> 20) + " MiB only");
    }

    @Test
    void movesInWholeGranulesAndCountsEvictions() {
        GranulePool pool = new GranulePool((int) MIB);
        pool.resize(to(8 * MIB));
        pool.resize(to(3 * MIB));
        assertEquals(new PoolStats(3 * MIB, 3 * MIB, 0, 0, 5, 0), pool.stats());
        assertInstanceOf(Result.Failure.class, pool.resize(to(MIB + 4096)));
        assertEquals(3 * MIB, pool.stats().poolBytes());
    }

    @Test
    void stopsWhenItsRequestIsSuperseded() {
        GranulePool pool = new GranulePool((int) MIB);
        pool.resize(to(4 * MIB));
        int[] asked = {0};
        Result result = pool.resizeTo(0, () -> ++asked[0] > 2);
        assertEquals("superseded at 2097152 bytes", assertInstanceOf(Result.Failure.class, result).reason());
        assertEquals(2 * MIB, pool.stats().poolBytes());
    }

    @Test
    void refusesAGranuleThatIsNotWholePages() {
        assertThrows(IllegalArgumentException.class, () -> new GranulePool(1000));
    }
}
