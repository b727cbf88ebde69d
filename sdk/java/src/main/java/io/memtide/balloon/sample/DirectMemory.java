/*
 * DirectMemory: frees a direct ByteBuffer's memory at once. Java 17 has no supported way to do
 * it: a direct buffer's memory is freed by its Cleaner only after the GC finds the buffer
 * unreachable, which for a buffer that lived long enough to reach the old generation may be
 * never without a full collection. sun.misc.Unsafe.invokeCleaner (module jdk.unsupported, the
 * call Netty and Lucene make) runs the Cleaner now; the buffer must never be touched after.
 */
package io.memtide.balloon.sample;

import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import sun.misc.Unsafe;

final class DirectMemory {
    private static final Unsafe UNSAFE = unsafe();

    private DirectMemory() {}

    /** Frees {@code buffer}'s memory now (a direct buffer, not a slice or duplicate of one). */
    static void free(ByteBuffer buffer) {
        UNSAFE.invokeCleaner(buffer);
    }

    private static Unsafe unsafe() {
        try {
            Field field = Unsafe.class.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            return (Unsafe) field.get(null);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException(
                    "sun.misc.Unsafe is not available, so direct buffers cannot be freed at once: " + e, e);
        }
    }
}
