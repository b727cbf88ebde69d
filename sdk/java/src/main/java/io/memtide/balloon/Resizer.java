/*
 * Resizer: the application's shrink or grow callback.
 */
package io.memtide.balloon;

/**
 * Shrinks or grows the application's pool to {@link ResizeRequest#targetBytes()}.
 *
 * <p>The agent calls it on its own resize thread, one call at a time, and only with a target that
 * is a multiple of the granule within [min, max]: the shrink callback with a target below the
 * pool's size, the grow callback with one above it. A shrink must give the memory back to the OS
 * (freed, not just unused) before it answers {@link Result#success()}. A long resize should
 * check {@link ResizeRequest#isSuperseded()} between granules and return early when it is set: a
 * newer target (or the end of the session) has replaced this one and its result is not sent.
 * An exception thrown here is answered as a failure naming it.
 */
@FunctionalInterface
public interface Resizer {
    Result resize(ResizeRequest request);
}
