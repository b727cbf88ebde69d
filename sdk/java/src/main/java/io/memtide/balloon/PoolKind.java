/*
 * PoolKind: what kind of pool an application registers (hello's "kind").
 */
package io.memtide.balloon;

import java.util.Locale;

/** What kind of pool the application's is; memtide reports it, it changes no rule. */
public enum PoolKind {
    /** A database's buffer pool (InnoDB, PostgreSQL's shared buffers). */
    BUFFER_POOL,
    /** A language runtime's heap. */
    HEAP,
    /** A cache (memcached, an in-process LRU). */
    CACHE,
    /** Anything else. */
    OTHER;

    /** The kind as written on the wire, e.g. {@code buffer_pool}. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
