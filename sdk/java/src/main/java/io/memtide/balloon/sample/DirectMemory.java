/*
 * DirectMemory: frees a direct ByteBuffer's memory at once. Java 17 has no supported way to do
 * it: a direct buffer's memory is freed by its Cleaner only after the GC finds the buffer
 * unreachable, which for a buffer that lived long enough to reach the old generation may be
 * never without a full collection. sun.misc.Unsafe.invokeCleaner (module jdk.unsupported, the
 * call Netty and Lucene make) runs the Cleaner now; the buffer must never be touched after. It
 * is looked up by reflection, as Lucene does, so that the build does not depend on the class.
 */
package io.memtide.balloon.sample;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;

final class DirectMemory {
    private static final MethodHandle INVOKE_CLEANER = invokeCleaner();

    private DirectMemory() {}

    /** Frees {@code buffer}'s memory now (a direct buffer, not a slice or duplicate of one). */
    static void free(ByteBuffer buffer) {
        try {
            INVOKE_CLEANER.invokeExact(buffer);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            // invokeCleaner declares no checked exception.
            throw new IllegalStateException("freeing a direct buffer: " + e, e);
        }
    }

    private static MethodHandle invokeCleaner() {
        try {
            Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
            Field field = unsafeClass.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            return MethodHandles.lookup()
                    .findVirtual(unsafeClass, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
                    .bindTo(field.get(null));
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException(
                    "sun.misc.Unsafe.invokeCleaner is not available, so direct buffers cannot be freed at once: "
                            + e, e);
        }
    }
}
