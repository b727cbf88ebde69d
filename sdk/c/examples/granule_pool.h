/*
 * granule_pool.h: the sample's pool, a cache of pages held in granules. Each granule is its
 * own anonymous mapping: growing maps granules and writes to every page of them, so the
 * memory is resident at once; shrinking unmaps granules, so their memory goes back to the OS
 * at once (RSS falls by exactly what was unmapped). Granules that are multiples of 2 MiB are
 * aligned to 2 MiB and advised for transparent huge pages, unless told not to.
 *
 * Its shrink, grow and stats functions are the agent's callbacks; the benchmark calls the same
 * functions itself, with a NULL resize (no progress to report, never cancelled).
 */
#ifndef GRANULE_POOL_H
#define GRANULE_POOL_H

#include "memtide_balloon.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct granule_pool {
    pthread_mutex_t lock; /* guards the granules and the counters */
    size_t granule_bytes;
    size_t page_bytes;
    size_t max_granules;
    bool huge_pages;
    size_t count;     /* granules held: granules[0, count) */
    char **granules;  /* [max_granules] */
    uint64_t hits;    /* lookups of a page the pool holds */
    uint64_t misses;  /* lookups of a page it does not */
    uint64_t evictions; /* pages dropped by shrinking */
} granule_pool;

/* Sets up a pool of pool_bytes in granules of granule_bytes, able to grow to max_bytes (all
 * multiples of granule_bytes). Returns 0, or -1 with why filled in. */
int granule_pool_init(granule_pool *pool, uint64_t granule_bytes, uint64_t pool_bytes,
                      uint64_t max_bytes, bool huge_pages, char *why, size_t why_size);
/* Unmaps every granule. */
void granule_pool_destroy(granule_pool *pool);
uint64_t granule_pool_bytes(granule_pool *pool);

/* The agent's callbacks; user is the granule_pool. */
bool granule_pool_shrink(void *user, uint64_t target_bytes, mtb_resize *resize);
bool granule_pool_grow(void *user, uint64_t target_bytes, mtb_resize *resize);
void granule_pool_stats(void *user, mtb_stats *stats);

/* Looks up page `page` of the pool at its largest: a hit (and a write to the page) when the
 * pool holds it, else a miss. */
void granule_pool_lookup(granule_pool *pool, uint64_t page);

/* The process's resident memory (VmRSS of /proc/self/status), or 0 when unreadable. */
uint64_t resident_bytes(void);

#endif
