/*
 * agent.c: the agent behind mtb_agent_start(): its two threads, the session with memtide,
 * reconnecting with back-off, and the resizes it hands to the application's callbacks.
 *
 * The agent thread owns the connection: it sends hello, stats and progress, reads memtide's
 * lines and answers them, and waits on poll() for the socket, its timers and a wake-up pipe.
 * The resize thread runs one shrink or grow at a time, taken from a one-job queue: a newer
 * target replaces a queued one and cancels the running one. The resize thread writes to the
 * pipe when a resize ends, as mtb_agent_stop() does to stop the agent thread.
 */
#define _GNU_SOURCE /* pipe2 */
#include "backoff.h"
#include "connection.h"
#include "json.h"
#include "protocol.h"

#include "memtide_balloon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RECONNECT_MIN_MS 100
#define DEFAULT_RECONNECT_MAX_MS 30000
/* How often `progress working` goes out while a target is being worked on. */
#define WORKING_INTERVAL_MS 1000
/* The longest single poll() wait; longer waits are taken in turns. */
#define MAX_POLL_MS 60000

/* A target handed to the resize thread. */
typedef struct job {
    uint64_t session; /* the connection it came on */
    uint64_t seq;
    uint64_t target;
} job;

struct mtb_resize {
    mtb_agent *agent;
    bool has_reason;
    char reason[MTB_REASON_MAX + 1];
};

struct mtb_agent {
    /* Set by mtb_agent_start(), read only after. */
    char *socket_path;
    char *app;
    mtb_kind kind;
    uint64_t min_bytes;
    uint64_t max_bytes;
    uint64_t granule_bytes;
    mtb_callbacks callbacks;
    uint32_t reconnect_min_ms;
    uint32_t reconnect_max_ms;
    int wake_read;
    int wake_write;
    pthread_t agent_thread;
    pthread_t resize_thread;
    /* The agent thread's own. */
    mtb_connection connection;

    atomic_bool cancelled; /* the running resize is no longer wanted */

    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t work;  /* a job was queued, or the agent is stopping */
    bool stopping;
    uint64_t pool_bytes; /* the pool's size as last known */
    bool has_queued;
    job queued;
    bool running;
    job current;
    bool has_result; /* a resize ended: its job, outcome and reason */
    job result;
    bool result_ok;
    char result_reason[MTB_REASON_MAX + 1];
};

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void say(mtb_agent *a, mtb_log_level level, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void say(mtb_agent *a, mtb_log_level level, const char *format, ...)
{
    char message[512];
    va_list args;
    if (a->callbacks.log == NULL)
        return;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    a->callbacks.log(a->callbacks.user, level, message);
}

static void wake(mtb_agent *a)
{
    /* A full pipe already holds a wake-up, so EAGAIN loses nothing. */
    ssize_t n = write(a->wake_write, "w", 1);
    (void)n;
}

static void drain_wakes(mtb_agent *a)
{
    char sink[64];
    while (read(a->wake_read, sink, sizeof sink) > 0) {
    }
}

static uint64_t pool_now(mtb_agent *a)
{
    pthread_mutex_lock(&a->lock);
    uint64_t pool = a->pool_bytes;
    pthread_mutex_unlock(&a->lock);
    return pool;
}

static bool is_stopping(mtb_agent *a)
{
    pthread_mutex_lock(&a->lock);
    bool stopping = a->stopping;
    pthread_mutex_unlock(&a->lock);
    return stopping;
}

/* ---- the resize thread ---- */

void mtb_resize_progress(mtb_resize *resize, uint64_t pool_bytes)
{
    mtb_agent *a = resize->agent;
    if (pool_bytes < a->min_bytes)
        pool_bytes = a->min_bytes;
    if (pool_bytes > a->max_bytes)
        pool_bytes = a->max_bytes;
    pthread_mutex_lock(&a->lock);
    a->pool_bytes = pool_bytes;
    pthread_mutex_unlock(&a->lock);
}

bool mtb_resize_cancelled(const mtb_resize *resize)
{
    return atomic_load(&resize->agent->cancelled);
}

bool mtb_resize_fail(mtb_resize *resize, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(resize->reason, sizeof resize->reason, format, args);
    va_end(args);
    resize->has_reason = true;
    return false;
}

static void *resize_main(void *arg)
{
    mtb_agent *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stopping && !a->has_queued)
            pthread_cond_wait(&a->work, &a->lock);
        if (a->stopping)
            break;
        job j = a->queued;
        uint64_t from = a->pool_bytes;
        a->has_queued = false;
        a->running = true;
        a->current = j;
        atomic_store(&a->cancelled, false);
        pthread_mutex_unlock(&a->lock);

        mtb_resize resize = {.agent = a};
        const char *direction = j.target < from ? "shrink" : "grow";
        bool ok = true;
        if (j.target < from)
            ok = a->callbacks.shrink(a->callbacks.user, j.target, &resize);
        else if (j.target > from)
            ok = a->callbacks.grow(a->callbacks.user, j.target, &resize);

        pthread_mutex_lock(&a->lock);
        if (ok)
            a->pool_bytes = j.target;
        else if (resize.has_reason)
            snprintf(a->result_reason, sizeof a->result_reason, "%s", resize.reason);
        else
            snprintf(a->result_reason, sizeof a->result_reason,
                     "the application's %s callback failed", direction);
        a->running = false;
        a->has_result = true;
        a->result = j;
        a->result_ok = ok;
        pthread_mutex_unlock(&a->lock);
        wake(a);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* ---- the session ---- */

typedef struct session {
    mtb_agent *a;
    uint64_t id;
    bool welcomed;
    uint64_t stats_interval_ms;
    uint64_t next_stats_ms;
    uint64_t last_seq;  /* the highest target seq seen */
    uint64_t answering; /* the seq whose answer is owed; 0: none */
    uint64_t next_working_ms;
    mtb_stats sent; /* the counters last sent */
} session;

typedef enum step { GO_ON, END } step;

static void show_line(const char *line, size_t len, char *out, size_t size)
{
    mtb_json_quote(out, size, line, len, 200);
}

static step send_line(session *s, const char *line, size_t len)
{
    char shown[512];
    if (len == 0) {
        say(s->a, MTB_LOG_ERROR, "a message did not fit in a line; not sent");
        return GO_ON;
    }
    show_line(line, len - 1, shown, sizeof shown);
    say(s->a, MTB_LOG_DEBUG, "sent %s", shown);
    if (mtb_connection_send(&s->a->connection, line, len) < 0) {
        say(s->a, MTB_LOG_WARNING, "lost the connection to memtide: %s", strerror(errno));
        return END;
    }
    return GO_ON;
}

/* Sends an error; errors whose code is always fatal end the session. */
static step send_error(session *s, mtb_code code, const char *message)
{
    char line[2048];
    bool fatal = mtb_code_always_fatal(code);
    say(s->a, MTB_LOG_WARNING, "answered memtide with %s%s: %s", fatal ? "fatal " : "",
        mtb_code_name(code), message);
    if (send_line(s, line, mtb_encode_error(code, message, fatal, line, sizeof line)) == END)
        return END;
    return fatal ? END : GO_ON;
}

static uint64_t at_most(uint64_t value, uint64_t limit)
{
    return value < limit ? value : limit;
}

static uint64_t counter(uint64_t value, uint64_t sent)
{
    value = at_most(value, MTB_MAX_VALUE);
    return value > sent ? value : sent;
}

static step send_stats(session *s)
{
    char line[512];
    mtb_stats stats = {0};
    mtb_stats_message m = {.pool_bytes = pool_now(s->a)};
    s->a->callbacks.stats(s->a->callbacks.user, &stats);
    m.stats.used_bytes = at_most(stats.used_bytes, m.pool_bytes);
    m.stats.dirty_bytes = at_most(stats.dirty_bytes, m.pool_bytes);
    m.stats.hits = s->sent.hits = counter(stats.hits, s->sent.hits);
    m.stats.misses = s->sent.misses = counter(stats.misses, s->sent.misses);
    m.stats.evictions = s->sent.evictions = counter(stats.evictions, s->sent.evictions);
    return send_line(s, line, mtb_encode_stats(&m, line, sizeof line));
}

static step send_progress(session *s, uint64_t seq, mtb_progress_status status, const char *reason)
{
    char line[MTB_REASON_MAX * 6 + 256]; /* every byte of the reason escaped */
    mtb_progress p = {.seq = seq, .pool_bytes = pool_now(s->a), .status = status, .reason = reason};
    return send_line(s, line, mtb_encode_progress(&p, line, sizeof line));
}

static step on_welcome(session *s, const mtb_welcome *welcome)
{
    char tenant[160];
    if (s->welcomed)
        return send_error(s, MTB_CODE_ALREADY_REGISTERED, "a second welcome on this connection");
    s->welcomed = true;
    s->stats_interval_ms = welcome->stats_interval_ms;
    mtb_json_quote(tenant, sizeof tenant, welcome->tenant.ptr, welcome->tenant.len, 128);
    say(s->a, MTB_LOG_INFO, "registered with memtide for tenant %s; stats every %" PRIu64 " ms",
        tenant, s->stats_interval_ms);
    s->next_stats_ms = now_ms() + s->stats_interval_ms;
    return send_stats(s);
}

/* Hands a target to the resize thread, cancelling the resize that runs. */
static void queue_resize(session *s, const mtb_target *target)
{
    mtb_agent *a = s->a;
    pthread_mutex_lock(&a->lock);
    if (a->running)
        atomic_store(&a->cancelled, true);
    a->queued = (job){.session = s->id, .seq = target->seq, .target = target->pool_bytes};
    a->has_queued = true;
    pthread_cond_signal(&a->work);
    pthread_mutex_unlock(&a->lock);
}

static step on_target(session *s, const mtb_target *target)
{
    mtb_agent *a = s->a;
    char why[256];
    uint64_t bytes = target->pool_bytes;
    if (!s->welcomed)
        return send_error(s, MTB_CODE_NOT_REGISTERED, "a target before the welcome");
    if (target->seq <= s->last_seq) {
        snprintf(why, sizeof why,
                 "target.seq = %" PRIu64 " is not above the last target's %" PRIu64, target->seq,
                 s->last_seq);
        return send_error(s, MTB_CODE_BAD_FIELD, why);
    }
    s->last_seq = target->seq;
    if (bytes % a->granule_bytes != 0)
        snprintf(why, sizeof why,
                 "target.pool_bytes = %" PRIu64 " is not a multiple of granule_bytes = %" PRIu64,
                 bytes, a->granule_bytes);
    else if (bytes < a->min_bytes)
        snprintf(why, sizeof why, "target.pool_bytes = %" PRIu64 " is below min_bytes = %" PRIu64,
                 bytes, a->min_bytes);
    else if (bytes > a->max_bytes)
        snprintf(why, sizeof why, "target.pool_bytes = %" PRIu64 " is above max_bytes = %" PRIu64,
                 bytes, a->max_bytes);
    else
        why[0] = '\0';
    if (why[0] != '\0')
        return send_error(s, MTB_CODE_BAD_FIELD, why);
    say(a, MTB_LOG_INFO, "target %" PRIu64 ": the pool to %" PRIu64 " bytes within %" PRIu64 " ms",
        target->seq, bytes, target->deadline_ms);
    queue_resize(s, target);
    s->answering = target->seq;
    s->next_working_ms = now_ms() + WORKING_INTERVAL_MS;
    return GO_ON;
}

static step on_line(session *s, char *line, size_t len)
{
    mtb_incoming msg;
    mtb_decode_error error;
    char shown[512];
    show_line(line, len, shown, sizeof shown);
    say(s->a, MTB_LOG_DEBUG, "received %s", shown);
    if (mtb_decode(line, len, &msg, &error) < 0)
        return send_error(s, error.code, error.message);
    switch (msg.type) {
    case MTB_IN_WELCOME:
        return on_welcome(s, &msg.as.welcome);
    case MTB_IN_TARGET:
        return on_target(s, &msg.as.target);
    case MTB_IN_BYE:
        if (msg.as.bye.has_reason)
            mtb_json_quote(shown, sizeof shown, msg.as.bye.reason.ptr, msg.as.bye.reason.len,
                           MTB_REASON_MAX);
        else
            snprintf(shown, sizeof shown, "no reason");
        say(s->a, MTB_LOG_INFO, "memtide said bye (%s)", shown);
        return END;
    case MTB_IN_ERROR: {
        const mtb_error_message *e = &msg.as.error;
        bool fatal = e->fatal || mtb_code_always_fatal(e->code);
        mtb_json_quote(shown, sizeof shown, e->message.ptr, e->message.len, 400);
        say(s->a, fatal ? MTB_LOG_ERROR : MTB_LOG_WARNING, "memtide reported %s%s: %s",
            fatal ? "fatal " : "", mtb_code_name(e->code), shown);
        return fatal ? END : GO_ON;
    }
    }
    return GO_ON;
}

/* Answers the target whose resize ended, unless a newer target or session replaced it. */
static step on_resize_end(session *s)
{
    mtb_agent *a = s->a;
    char reason[MTB_REASON_MAX + 1];
    pthread_mutex_lock(&a->lock);
    bool has_result = a->has_result;
    job j = a->result;
    bool ok = a->result_ok;
    uint64_t pool = a->pool_bytes;
    snprintf(reason, sizeof reason, "%s", a->result_reason);
    a->has_result = false;
    pthread_mutex_unlock(&a->lock);
    if (!has_result || j.session != s->id || j.seq != s->answering)
        return GO_ON;
    s->answering = 0;
    if (ok) {
        say(a, MTB_LOG_INFO, "target %" PRIu64 ": done, the pool is %" PRIu64 " bytes", j.seq, pool);
        return send_progress(s, j.seq, MTB_PROGRESS_DONE, NULL);
    }
    say(a, MTB_LOG_WARNING, "target %" PRIu64 ": failed with the pool at %" PRIu64 " bytes: %s",
        j.seq, pool, reason);
    return send_progress(s, j.seq, MTB_PROGRESS_FAILED, reason);
}

static step on_readable(session *s)
{
    mtb_connection *c = &s->a->connection;
    char *line;
    size_t len;
    ssize_t n = mtb_connection_fill(c);
    if (n == 0) {
        say(s->a, MTB_LOG_WARNING, "memtide closed the connection");
        return END;
    }
    if (n < 0) {
        say(s->a, MTB_LOG_WARNING, "lost the connection to memtide: %s", strerror(errno));
        return END;
    }
    for (;;) {
        switch (mtb_connection_take(c, &line, &len)) {
        case MTB_TAKE_NONE:
            return GO_ON;
        case MTB_TAKE_TOO_LONG:
            if (send_error(s, MTB_CODE_TOO_LONG, "a line over 65536 bytes; dropped") == END)
                return END;
            break;
        case MTB_TAKE_LINE:
            if (on_line(s, line, len) == END)
                return END;
            break;
        }
    }
}

static step on_timers(session *s)
{
    uint64_t now = now_ms();
    if (s->welcomed && now >= s->next_stats_ms) {
        s->next_stats_ms = now + s->stats_interval_ms;
        if (send_stats(s) == END)
            return END;
    }
    if (s->answering != 0 && now >= s->next_working_ms) {
        s->next_working_ms = now + WORKING_INTERVAL_MS;
        if (send_progress(s, s->answering, MTB_PROGRESS_WORKING, NULL) == END)
            return END;
    }
    return GO_ON;
}

static int poll_timeout(const session *s)
{
    uint64_t now = now_ms();
    uint64_t wait = MAX_POLL_MS;
    if (s->welcomed)
        wait = at_most(wait, s->next_stats_ms > now ? s->next_stats_ms - now : 0);
    if (s->answering != 0)
        wait = at_most(wait, s->next_working_ms > now ? s->next_working_ms - now : 0);
    return (int)wait;
}

/* Runs one session on the open connection until it ends; returns whether memtide welcomed
 * the agent in it. */
static bool run_session(mtb_agent *a, uint64_t id)
{
    session s = {.a = a, .id = id};
    char line[512];
    mtb_hello hello = {
        .app = a->app,
        .kind = a->kind,
        .pid = (uint64_t)getpid(),
        .pool_bytes = pool_now(a),
        .min_bytes = a->min_bytes,
        .max_bytes = a->max_bytes,
        .granule_bytes = a->granule_bytes,
    };
    say(a, MTB_LOG_INFO, "connected to memtide at %s", a->socket_path);
    step next = send_line(&s, line, mtb_encode_hello(&hello, line, sizeof line));
    while (next == GO_ON) {
        struct pollfd fds[2] = {{.fd = a->connection.fd, .events = POLLIN},
                                {.fd = a->wake_read, .events = POLLIN}};
        if (poll(fds, 2, poll_timeout(&s)) < 0 && errno != EINTR) {
            say(a, MTB_LOG_ERROR, "poll failed: %s", strerror(errno));
            break;
        }
        if (fds[1].revents != 0) {
            drain_wakes(a);
            if (is_stopping(a)) {
                send_line(&s, line, mtb_encode_bye("the application stopped its agent", line,
                                                   sizeof line));
                break;
            }
            next = on_resize_end(&s);
        }
        if (next == GO_ON && fds[0].revents != 0)
            next = on_readable(&s);
        if (next == GO_ON)
            next = on_timers(&s);
    }
    return s.welcomed;
}

/* Cancels what the session left to the resize thread: its targets went with it. */
static void end_session(mtb_agent *a, uint64_t id)
{
    pthread_mutex_lock(&a->lock);
    if (a->running && a->current.session == id)
        atomic_store(&a->cancelled, true);
    if (a->has_queued && a->queued.session == id)
        a->has_queued = false;
    pthread_mutex_unlock(&a->lock);
}

/* Waits ms milliseconds, or less if the agent is stopped meanwhile. */
static void pause_unless_stopped(mtb_agent *a, uint32_t ms)
{
    uint64_t until = now_ms() + ms;
    for (;;) {
        uint64_t now = now_ms();
        if (is_stopping(a) || now >= until)
            return;
        struct pollfd fd = {.fd = a->wake_read, .events = POLLIN};
        if (poll(&fd, 1, (int)(until - now)) > 0)
            drain_wakes(a);
    }
}

static void *agent_main(void *arg)
{
    mtb_agent *a = arg;
    mtb_backoff backoff;
    uint64_t sessions = 0;
    mtb_backoff_init(&backoff, a->reconnect_min_ms, a->reconnect_max_ms,
                     now_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)a);
    while (!is_stopping(a)) {
        if (mtb_connection_open(&a->connection, a->socket_path) < 0) {
            say(a, MTB_LOG_WARNING, "cannot connect to memtide at %s: %s", a->socket_path,
                strerror(errno));
        } else {
            bool welcomed = run_session(a, ++sessions);
            mtb_connection_close(&a->connection);
            end_session(a, sessions);
            if (welcomed)
                mtb_backoff_reset(&backoff);
        }
        if (is_stopping(a))
            break;
        uint32_t wait = mtb_backoff_next(&backoff);
        say(a, MTB_LOG_DEBUG, "reconnecting in %" PRIu32 " ms", wait);
        pause_unless_stopped(a, wait);
    }
    return NULL;
}

/* ---- starting and stopping ---- */

static int refuse(mtb_error *error, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int refuse(mtb_error *error, const char *format, ...)
{
    if (error != NULL) {
        va_list args;
        va_start(args, format);
        vsnprintf(error->message, sizeof error->message, format, args);
        va_end(args);
    }
    errno = EINVAL;
    return -1;
}

/* Frees an agent whose threads have ended (or never started). */
static void destroy(mtb_agent *a)
{
    if (a->wake_read >= 0)
        close(a->wake_read);
    if (a->wake_write >= 0)
        close(a->wake_write);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->lock);
    free(a->socket_path);
    free(a->app);
    free(a);
}

/* Ends the agent's threads: started says which of them run. */
static void join(mtb_agent *a, bool agent_started, bool resize_started)
{
    pthread_mutex_lock(&a->lock);
    a->stopping = true;
    atomic_store(&a->cancelled, true);
    a->has_queued = false;
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    wake(a);
    if (agent_started)
        pthread_join(a->agent_thread, NULL);
    if (resize_started)
        pthread_join(a->resize_thread, NULL);
}

static int fail_system(mtb_agent *a, mtb_error *error, const char *what, int code)
{
    if (error != NULL)
        snprintf(error->message, sizeof error->message, "%s failed: %s", what, strerror(code));
    destroy(a);
    errno = code;
    return -1;
}

static const char *socket_path_of(const mtb_config *config)
{
    const char *from_env;
    if (config->socket_path != NULL)
        return config->socket_path;
    from_env = getenv(MTB_SOCKET_ENV);
    return from_env != NULL && from_env[0] != '\0' ? from_env : MTB_DEFAULT_SOCKET;
}

int mtb_agent_start(const mtb_config *config, mtb_agent **agent, mtb_error *error)
{
    char why[256];
    if (config == NULL || agent == NULL)
        return refuse(error, "mtb_agent_start needs a config and somewhere to put the agent");
    const mtb_callbacks *cb = &config->callbacks;
    if (cb->shrink == NULL || cb->grow == NULL || cb->stats == NULL)
        return refuse(error, "callbacks.%s is NULL",
                      cb->shrink == NULL ? "shrink" : cb->grow == NULL ? "grow" : "stats");
    if (mtb_check_pool(&config->pool, why, sizeof why) < 0)
        return refuse(error, "%s", why);
    const char *path = socket_path_of(config);
    struct sockaddr_un address;
    if (path[0] == '\0')
        return refuse(error, "socket_path is empty");
    if (strlen(path) >= sizeof address.sun_path)
        return refuse(error, "socket path %s is %zu bytes, over %zu", path, strlen(path),
                      sizeof address.sun_path - 1);
    uint32_t min_ms = config->reconnect_min_ms ? config->reconnect_min_ms : DEFAULT_RECONNECT_MIN_MS;
    uint32_t max_ms = config->reconnect_max_ms ? config->reconnect_max_ms : DEFAULT_RECONNECT_MAX_MS;
    if (min_ms > max_ms)
        return refuse(error, "reconnect_min_ms = %" PRIu32 " is above reconnect_max_ms = %" PRIu32,
                      min_ms, max_ms);

    mtb_agent *a = calloc(1, sizeof *a);
    if (a == NULL) {
        if (error != NULL)
            snprintf(error->message, sizeof error->message, "out of memory for the agent");
        errno = ENOMEM;
        return -1;
    }
    a->wake_read = a->wake_write = -1;
    a->connection.fd = -1;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->work, NULL);
    atomic_init(&a->cancelled, false);
    a->socket_path = strdup(path);
    a->app = strdup(config->pool.app);
    if (a->socket_path == NULL || a->app == NULL)
        return fail_system(a, error, "copying the config", ENOMEM);
    a->kind = config->pool.kind;
    a->pool_bytes = config->pool.pool_bytes;
    a->min_bytes = config->pool.min_bytes;
    a->max_bytes = config->pool.max_bytes;
    a->granule_bytes = config->pool.granule_bytes;
    a->callbacks = *cb;
    a->reconnect_min_ms = min_ms;
    a->reconnect_max_ms = max_ms;
    int wake_pipe[2];
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return fail_system(a, error, "pipe2", errno);
    a->wake_read = wake_pipe[0];
    a->wake_write = wake_pipe[1];

    /* The threads start with every signal blocked, so the application's handlers run on the
     * application's own threads. */
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    int rc = pthread_create(&a->resize_thread, NULL, resize_main, a);
    if (rc == 0) {
        rc = pthread_create(&a->agent_thread, NULL, agent_main, a);
        if (rc != 0)
            join(a, false, true);
    }
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (rc != 0)
        return fail_system(a, error, "pthread_create", rc);
    *agent = a;
    return 0;
}

int mtb_agent_stop(mtb_agent *agent)
{
    if (agent == NULL)
        return 0;
    pthread_t self = pthread_self();
    if (pthread_equal(self, agent->agent_thread) || pthread_equal(self, agent->resize_thread)) {
        errno = EDEADLK;
        return -1;
    }
    join(agent, true, true);
    destroy(agent);
    return 0;
}
