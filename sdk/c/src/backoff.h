/*
 * backoff.h: the waits between an agent's attempts to reach memtide (internal): exponential
 * from a first wait to a longest one, each drawn at random from the upper half of its step so
 * that agents restarted together do not reconnect together.
 */
#ifndef MTB_BACKOFF_H
#define MTB_BACKOFF_H

#include <stdint.h>

typedef struct mtb_backoff {
    uint32_t min_ms;
    uint32_t max_ms;
    uint32_t step_ms; /* the step the next wait is drawn from */
    uint64_t random;  /* xorshift64 state, never 0 */
} mtb_backoff;

/* Starts at min_ms (>= 1) with steps up to max_ms (>= min_ms); seed picks the jitter. */
void mtb_backoff_init(mtb_backoff *b, uint32_t min_ms, uint32_t max_ms, uint64_t seed);
/* The next wait, in [step / 2, step] (at least 1 ms); then the step doubles, up to max_ms. */
uint32_t mtb_backoff_next(mtb_backoff *b);
/* Back to the first step, as after a session memtide welcomed. */
void mtb_backoff_reset(mtb_backoff *b);

#endif
