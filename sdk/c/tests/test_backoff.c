/*
 * test_backoff.c: unit tests of the waits between reconnects (src/backoff.c).
 */
#include "backoff.h"
#include "check.h"

static void waits_double_from_the_first_to_the_longest_with_jitter(void)
{
    mtb_backoff b;
    mtb_backoff_init(&b, 100, 30000, 42);
    uint32_t step = 100;
    for (int i = 0; i < 12; i++) {
        uint32_t wait = mtb_backoff_next(&b);
        CHECK(wait >= step / 2 && wait <= step, "wait %d is %u ms, outside [%u, %u]", i, wait,
              step / 2, step);
        step = step * 2 > 30000 ? 30000 : step * 2;
    }
    CHECK(step == 30000, "the steps did not reach the longest");
}

static void jitter_spreads_the_waits(void)
{
    mtb_backoff b;
    uint32_t lowest = UINT32_MAX, highest = 0;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        mtb_backoff_init(&b, 30000, 30000, seed);
        uint32_t wait = mtb_backoff_next(&b);
        lowest = wait < lowest ? wait : lowest;
        highest = wait > highest ? wait : highest;
    }
    CHECK(highest - lowest > 5000, "50 agents' first waits all within [%u, %u] ms", lowest,
          highest);
}

static void reset_starts_again_from_the_first_wait(void)
{
    mtb_backoff b;
    mtb_backoff_init(&b, 100, 30000, 7);
    for (int i = 0; i < 8; i++)
        mtb_backoff_next(&b);
    mtb_backoff_reset(&b);
    uint32_t wait = mtb_backoff_next(&b);
    CHECK(wait >= 50 && wait <= 100, "the wait after a reset is %u ms", wait);
}

static void a_first_wait_of_one_millisecond_stays_positive(void)
{
    mtb_backoff b;
    mtb_backoff_init(&b, 1, 1, 3);
    for (int i = 0; i < 4; i++)
        CHECK(mtb_backoff_next(&b) == 1, "a wait other than 1 ms");
}

void backoff_tests(void)
{
    RUN(waits_double_from_the_first_to_the_longest_with_jitter);
    RUN(jitter_spreads_the_waits);
    RUN(reset_starts_again_from_the_first_wait);
    RUN(a_first_wait_of_one_millisecond_stays_positive);
}
