/*
 * backoff.c: exponential back-off with jitter for reconnecting to memtide (see backoff.h).
 */
#include "backoff.h"

void mtb_backoff_init(mtb_backoff *b, uint32_t min_ms, uint32_t max_ms, uint64_t seed)
{
    b->min_ms = min_ms;
    b->max_ms = max_ms;
    b->step_ms = min_ms;
    b->random = seed != 0 ? seed : UINT64_C(0x9E3779B97F4A7C15);
}

uint32_t mtb_backoff_next(mtb_backoff *b)
{
    b->random ^= b->random << 13;
    b->random ^= b->random >> 7;
    b->random ^= b->random << 17;
    uint32_t half = b->step_ms / 2;
    uint32_t wait = b->step_ms - (uint32_t)(b->random % ((uint64_t)half + 1));
    b->step_ms = b->step_ms > b->max_ms / 2 ? b->max_ms : b->step_ms * 2;
    return wait > 0 ? wait : 1;
}

void mtb_backoff_reset(mtb_backoff *b)
{
    b->step_ms = b->min_ms;
}
