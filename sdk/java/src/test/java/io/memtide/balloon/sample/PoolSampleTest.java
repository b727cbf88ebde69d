/*
 * PoolSampleTest: the sample's flags: sizes with binary suffixes, defaults, and one-line errors
 * naming the flag and the value.
 */
package io.memtide.balloon.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.memtide.balloon.PoolKind;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class PoolSampleTest {
    private static String refused(String... args) {
        return assertThrows(IllegalArgumentException.class, () -> PoolSample.parse(args)).getMessage();
    }

    @Test
    void readsSizesInBytesOrWithBinarySuffixes() {
        assertEquals(4096, PoolSample.size("--x", "4096"));
        assertEquals(512L << 10, PoolSample.size("--x", "512k"));
        assertEquals(512L << 20, PoolSample.size("--x", "512M"));
        assertEquals(2L << 30, PoolSample.size("--x", "2G"));
        assertEquals(1L << 40, PoolSample.size("--x", "1T"));
    }

    @Test
    void aSizeThatIsNotOneNamesTheFlag() {
        assertEquals("--pool = 12X: not a size (bytes, or a number with K, M, G or T)", refused("--pool", "12X"));
        assertEquals("--min = -1M: not a size (bytes, or a number with K, M, G or T)", refused("--min", "-1M"));
        assertEquals("--max = 99999999999T: not a size (bytes, or a number with K, M, G or T)",
                refused("--max", "99999999999T"));
    }

    @Test
    void takesEveryFlagAndDefaultsTheRest() {
        assertEquals(new PoolSample.Options(256L << 20, 0, 1L << 30, 1 << 20, "pool-sample", PoolKind.CACHE, null),
                PoolSample.parse(new String[0]));
        assertEquals(new PoolSample.Options(2L << 30, 1L << 30, 4L << 30, 64 << 20, "db", PoolKind.BUFFER_POOL,
                        Path.of("/tmp/b.sock")),
                PoolSample.parse(new String[] {"--pool", "2G", "--min", "1G", "--max", "4G", "--granule", "64M",
                    "--app", "db", "--kind", "buffer_pool", "--socket", "/tmp/b.sock"}));
        assertNull(PoolSample.parse(new String[] {"--help"}));
    }

    @Test
    void refusesFlagsThatDoNotFitTogether() {
        assertEquals("--pool = 3145728: must be a multiple of --granule = 2097152",
                refused("--pool", "3M", "--granule", "2M"));
        assertEquals("--pool = 2147483648: must be within --min = 0 and --max = 1073741824", refused("--pool", "2G"));
        assertEquals("--granule = 4294967296: a granule is one direct ByteBuffer, at most 2147483647 bytes",
                refused("--granule", "4G", "--max", "8G"));
        assertEquals("--granule = 1000: must be a multiple of 4K", refused("--granule", "1000"));
        assertEquals("--kind = disk: must be buffer_pool, heap, cache or other", refused("--kind", "disk"));
        assertEquals("unknown flag --size", refused("--size", "1G"));
        assertEquals("--pool needs a value", refused("--pool"));
    }

    @Test
    void warnsUnlessEveryGranuleIsItsOwnMapping() {
        int mib = 1 << 20;
        assertEquals(Optional.empty(), PoolSample.retentionWarning(mib, "131072"));
        assertEquals(Optional.empty(), PoolSample.retentionWarning(mib, "1048576"));
        assertEquals(Optional.empty(), PoolSample.retentionWarning(64 * mib, null));
        assertTrue(PoolSample.retentionWarning(mib, null).isPresent());
        assertTrue(PoolSample.retentionWarning(mib, "2097152").isPresent());
        assertEquals(Optional.of("MALLOC_MMAP_THRESHOLD_ = lots is not a size of at most the granule (1048576):"
                + " glibc may keep freed granules in its arenas, so a shrink would not give their memory back"
                + " (see sdk/java/README.md)"), PoolSample.retentionWarning(mib, "lots"));
    }
}
