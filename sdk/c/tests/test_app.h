/*
 * test_app.h: the application the tests put behind the agent: a pool that only counts its
 * bytes and complies with targets or refuses them, optionally slowly, with the statistics it
 * reports and the agent's log lines kept for the tests to read.
 */
#ifndef TEST_APP_H
#define TEST_APP_H

#include "memtide_balloon.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define TEST_APP_LOG_LINES 256

typedef struct test_app {
    pthread_mutex_t lock;
    uint64_t pool_bytes; /* the pool as the callbacks left it */
    bool refuse;         /* shrink and grow fail, leaving the pool as it is */
    const char *reason;  /* the reason they fail with; NULL: none given */
    unsigned slow_ms;    /* each resize takes this long, unless cancelled first */
    uint64_t fail_at;    /* when not 0: each resize reports this size, then fails */
    unsigned shrinks;    /* callbacks made */
    unsigned grows;
    unsigned cancelled;  /* resizes that saw mtb_resize_cancelled */
    mtb_stats stats;     /* what the stats callback reports */
    mtb_agent *agent;    /* for the callback that tries to stop it */
    bool stop_in_callback;
    int stop_errno;      /* errno of mtb_agent_stop called from a callback */
    unsigned log_count;
    char log[TEST_APP_LOG_LINES][512];
} test_app;

/* The vectors' pool: 512 MiB in 1 MiB granules, within [64 MiB, 1 GiB]. */
#define TEST_POOL_BYTES UINT64_C(536870912)
#define TEST_MIN_BYTES UINT64_C(67108864)
#define TEST_MAX_BYTES UINT64_C(1073741824)
#define TEST_GRANULE_BYTES UINT64_C(1048576)

void test_app_init(test_app *app);
void test_app_destroy(test_app *app);
/* A config with the vectors' pool ("vector-test", buffer_pool), the app's callbacks, the
 * socket path and quick reconnects (10 ms to 100 ms). */
mtb_config test_app_config(test_app *app, const char *socket_path);
/* Reads a figure under the lock. */
uint64_t test_app_pool(test_app *app);
unsigned test_app_count(test_app *app, const unsigned *counter);
/* True when a log line holds part. */
bool test_app_logged(test_app *app, const char *part);

#endif
