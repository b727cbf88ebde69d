/*
 * granule_pool.c: the sample's pool of granules that really map and unmap their memory (see
 * granule_pool.h).
 */
#define _GNU_SOURCE /* MADV_HUGEPAGE, MAP_ANONYMOUS */
#include "granule_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

int granule_pool_init(granule_pool *pool, uint64_t granule_bytes, uint64_t pool_bytes,
                      uint64_t max_bytes, bool huge_pages, char *why, size_t why_size)
{
    memset(pool, 0, sizeof *pool);
    if (granule_bytes == 0 || pool_bytes % granule_bytes || max_bytes % granule_bytes ||
        pool_bytes > max_bytes) {
        snprintf(why, why_size, "the pool and its max must be multiples of the granule, pool <= max");
        return -1;
    }
    pool->page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    if (granule_bytes % pool->page_bytes != 0) {
        snprintf(why, why_size, "the granule must be a multiple of the page size, %zu bytes",
                 pool->page_bytes);
        return -1;
    }
    pool->granule_bytes = (size_t)granule_bytes;
    pool->max_granules = (size_t)(max_bytes / granule_bytes);
    pool->huge_pages = huge_pages && granule_bytes % HUGE_PAGE_BYTES == 0;
    pool->granules = calloc(pool->max_granules ? pool->max_granules : 1, sizeof *pool->granules);
    if (pool->granules == NULL) {
        snprintf(why, why_size, "out of memory for %zu granules", pool->max_granules);
        return -1;
    }
    pthread_mutex_init(&pool->lock, NULL);
    if (!granule_pool_grow(pool, pool_bytes, NULL)) {
        snprintf(why, why_size, "could not map %llu bytes: %s", (unsigned long long)pool_bytes,
                 strerror(errno));
        granule_pool_destroy(pool);
        return -1;
    }
    return 0;
}

void granule_pool_destroy(granule_pool *pool)
{
    granule_pool_shrink(pool, 0, NULL);
    pthread_mutex_destroy(&pool->lock);
    free(pool->granules);
    pool->granules = NULL;
}

uint64_t granule_pool_bytes(granule_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    uint64_t bytes = (uint64_t)pool->count * pool->granule_bytes;
    pthread_mutex_unlock(&pool->lock);
    return bytes;
}

/* Maps one granule (aligned to 2 MiB for huge pages) and writes to each of its pages. */
static char *map_granule(const granule_pool *pool)
{
    size_t size = pool->granule_bytes;
    size_t slack = pool->huge_pages ? HUGE_PAGE_BYTES : 0;
    char *base = mmap(NULL, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    char *start = base;
    if (slack != 0) {
        start = (char *)(((uintptr_t)base + slack - 1) & ~(uintptr_t)(slack - 1));
        if (start > base)
            munmap(base, (size_t)(start - base));
        if (start + size < base + size + slack)
            munmap(start + size, (size_t)(base + size + slack - (start + size)));
        madvise(start, size, MADV_HUGEPAGE);
    }
    for (size_t offset = 0; offset < size; offset += pool->page_bytes)
        ((volatile char *)start)[offset] = 1;
    return start;
}

bool granule_pool_shrink(void *user, uint64_t target_bytes, mtb_resize *resize)
{
    granule_pool *pool = user;
    size_t target = (size_t)(target_bytes / pool->granule_bytes);
    for (;;) {
        if (resize != NULL && mtb_resize_cancelled(resize))
            return false;
        pthread_mutex_lock(&pool->lock);
        if (pool->count <= target) {
            pthread_mutex_unlock(&pool->lock);
            return true;
        }
        char *granule = pool->granules[--pool->count];
        pool->evictions += pool->granule_bytes / pool->page_bytes;
        uint64_t now = (uint64_t)pool->count * pool->granule_bytes;
        pthread_mutex_unlock(&pool->lock);
        munmap(granule, pool->granule_bytes);
        if (resize != NULL)
            mtb_resize_progress(resize, now);
    }
}

bool granule_pool_grow(void *user, uint64_t target_bytes, mtb_resize *resize)
{
    granule_pool *pool = user;
    size_t target = (size_t)(target_bytes / pool->granule_bytes);
    for (;;) {
        if (resize != NULL && mtb_resize_cancelled(resize))
            return false;
        pthread_mutex_lock(&pool->lock);
        size_t count = pool->count;
        pthread_mutex_unlock(&pool->lock);
        if (count >= target)
            return true;
        char *granule = map_granule(pool);
        if (granule == NULL)
            return resize == NULL ? false
                                  : mtb_resize_fail(resize, "mapping granule %zu failed: %s",
                                                    count, strerror(errno));
        pthread_mutex_lock(&pool->lock);
        pool->granules[pool->count++] = granule;
        uint64_t now = (uint64_t)pool->count * pool->granule_bytes;
        pthread_mutex_unlock(&pool->lock);
        if (resize != NULL)
            mtb_resize_progress(resize, now);
    }
}

void granule_pool_stats(void *user, mtb_stats *stats)
{
    granule_pool *pool = user;
    pthread_mutex_lock(&pool->lock);
    stats->used_bytes = (uint64_t)pool->count * pool->granule_bytes;
    stats->hits = pool->hits;
    stats->misses = pool->misses;
    stats->evictions = pool->evictions;
    stats->dirty_bytes = 0; /* nothing to write back: the pool is a cache of nothing on disk */
    pthread_mutex_unlock(&pool->lock);
}

void granule_pool_lookup(granule_pool *pool, uint64_t page)
{
    size_t pages_per_granule = pool->granule_bytes / pool->page_bytes;
    size_t granule = (size_t)(page / pages_per_granule);
    pthread_mutex_lock(&pool->lock);
    if (granule < pool->count) {
        pool->granules[granule][(page % pages_per_granule) * pool->page_bytes]++;
        pool->hits++;
    } else {
        pool->misses++;
    }
    pthread_mutex_unlock(&pool->lock);
}

uint64_t resident_bytes(void)
{
    char line[256];
    unsigned long long kib = 0;
    FILE *status = fopen("/proc/self/status", "r");
    if (status == NULL)
        return 0;
    while (fgets(line, sizeof line, status) != NULL)
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
            break;
    fclose(status);
    return (uint64_t)kib * 1024;
}
