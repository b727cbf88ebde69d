/*
 * test_app.c: the tests' application behind the agent (see test_app.h).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "test_app.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void test_app_init(test_app *app)
{
    memset(app, 0, sizeof *app);
    pthread_mutex_init(&app->lock, NULL);
    app->pool_bytes = TEST_POOL_BYTES;
}

void test_app_destroy(test_app *app)
{
    pthread_mutex_destroy(&app->lock);
}

/* Sleeps up to ms in 10 ms steps, until the resize is cancelled; false when it was. */
static bool work(test_app *app, unsigned ms, mtb_resize *resize)
{
    struct timespec step = {.tv_nsec = 10 * 1000000};
    for (unsigned slept = 0; slept < ms; slept += 10) {
        if (mtb_resize_cancelled(resize)) {
            pthread_mutex_lock(&app->lock);
            app->cancelled++;
            pthread_mutex_unlock(&app->lock);
            return false;
        }
        nanosleep(&step, NULL);
    }
    return true;
}

static bool resize(test_app *app, uint64_t target, mtb_resize *r, unsigned *counter)
{
    pthread_mutex_lock(&app->lock);
    (*counter)++;
    bool refuse = app->refuse;
    const char *reason = app->reason;
    unsigned slow_ms = app->slow_ms;
    bool stop = app->stop_in_callback;
    uint64_t fail_at = app->fail_at;
    pthread_mutex_unlock(&app->lock);
    if (stop) {
        int rc = mtb_agent_stop(app->agent);
        pthread_mutex_lock(&app->lock);
        app->stop_errno = rc < 0 ? errno : 0;
        pthread_mutex_unlock(&app->lock);
    }
    if (!work(app, slow_ms, r))
        return false;
    if (fail_at != 0) {
        mtb_resize_progress(r, fail_at);
        pthread_mutex_lock(&app->lock);
        app->pool_bytes = fail_at;
        pthread_mutex_unlock(&app->lock);
        return mtb_resize_fail(r, "stopped at %llu bytes", (unsigned long long)fail_at);
    }
    if (refuse)
        return reason != NULL ? mtb_resize_fail(r, "%s", reason) : false;
    pthread_mutex_lock(&app->lock);
    app->pool_bytes = target;
    pthread_mutex_unlock(&app->lock);
    return true;
}

static bool shrink(void *user, uint64_t target, mtb_resize *r)
{
    test_app *app = user;
    return resize(app, target, r, &app->shrinks);
}

static bool grow(void *user, uint64_t target, mtb_resize *r)
{
    test_app *app = user;
    return resize(app, target, r, &app->grows);
}

static void stats(void *user, mtb_stats *out)
{
    test_app *app = user;
    pthread_mutex_lock(&app->lock);
    *out = app->stats;
    pthread_mutex_unlock(&app->lock);
}

static void log_line(void *user, mtb_log_level level, const char *message)
{
    static const char *const levels[] = {"debug", "info", "warning", "error"};
    test_app *app = user;
    pthread_mutex_lock(&app->lock);
    snprintf(app->log[app->log_count % TEST_APP_LOG_LINES], sizeof app->log[0], "%s: %s",
             levels[level], message);
    app->log_count++;
    pthread_mutex_unlock(&app->lock);
}

mtb_config test_app_config(test_app *app, const char *socket_path)
{
    mtb_config config = {
        .socket_path = socket_path,
        .pool = {.app = "vector-test",
                 .kind = MTB_KIND_BUFFER_POOL,
                 .pool_bytes = TEST_POOL_BYTES,
                 .min_bytes = TEST_MIN_BYTES,
                 .max_bytes = TEST_MAX_BYTES,
                 .granule_bytes = TEST_GRANULE_BYTES},
        .callbacks = {.shrink = shrink, .grow = grow, .stats = stats, .log = log_line, .user = app},
        .reconnect_min_ms = 10,
        .reconnect_max_ms = 100,
    };
    return config;
}

uint64_t test_app_pool(test_app *app)
{
    pthread_mutex_lock(&app->lock);
    uint64_t pool = app->pool_bytes;
    pthread_mutex_unlock(&app->lock);
    return pool;
}

unsigned test_app_count(test_app *app, const unsigned *counter)
{
    pthread_mutex_lock(&app->lock);
    unsigned n = *counter;
    pthread_mutex_unlock(&app->lock);
    return n;
}

bool test_app_logged(test_app *app, const char *part)
{
    bool found = false;
    pthread_mutex_lock(&app->lock);
    unsigned first = app->log_count > TEST_APP_LOG_LINES ? app->log_count - TEST_APP_LOG_LINES : 0;
    for (unsigned i = first; i < app->log_count && !found; i++)
        found = strstr(app->log[i % TEST_APP_LOG_LINES], part) != NULL;
    pthread_mutex_unlock(&app->lock);
    return found;
}
