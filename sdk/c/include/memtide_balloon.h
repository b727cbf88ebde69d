/*
 * memtide_balloon.h: the public API of libmemtide_balloon, the C agent of memtide's
 * application balloon protocol, version 1 (docs/balloon-protocol.md).
 *
 * An application that keeps a pool of memory (a buffer pool, a heap, a cache) starts one
 * agent with the facts of its pool and three callbacks: shrink the pool, grow it, and read
 * its statistics. The agent connects to memtide over a Unix socket, registers the pool, sends
 * the statistics, and answers memtide's targets by calling the shrink and grow callbacks. It
 * reconnects by itself (with exponential back-off) when memtide is absent, goes away or says
 * bye, until the application stops it.
 *
 * Threads. mtb_agent_start() starts two threads, both with every signal blocked:
 *   - the agent thread does the socket's I/O and timers, and calls `stats` and `log`;
 *   - the resize thread calls `shrink` and `grow`, one call at a time.
 * So `stats` may run while `shrink` or `grow` runs, and must be safe against them.
 * Callbacks must not call mtb_agent_stop() (it fails with EDEADLK). A child of fork() has
 * no agent (threads do not survive fork): it may start its own. Writes to the socket use
 * MSG_NOSIGNAL, so a closed connection never raises SIGPIPE.
 *
 * Ownership. The agent copies what it keeps from mtb_config (the strings included), so the
 * caller's config may be freed once mtb_agent_start() returns. `user` is never dereferenced
 * by the agent: it must stay valid until mtb_agent_stop() returns, after which no callback
 * runs. An mtb_resize is lent to one shrink or grow call and is invalid once it returns.
 *
 * Return codes and errno. Functions returning int return 0 on success, or -1 with errno set
 * (and, where an mtb_error is given, a one-line message in it naming what is wrong).
 * Nothing in this API raises signals or aborts on what memtide sends: lines the agent cannot
 * read are answered with the protocol's `error` message and the session goes on.
 */
#ifndef MEMTIDE_BALLOON_H
#define MEMTIDE_BALLOON_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MTB_API __attribute__((visibility("default")))
#define MTB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define MTB_API
#define MTB_PRINTF(fmt, args)
#endif

/* The protocol version this library speaks. */
#define MTB_PROTOCOL_VERSION 1
/* Where memtide listens unless MTB_SOCKET_ENV or mtb_config.socket_path says otherwise. */
#define MTB_DEFAULT_SOCKET "/run/memtide/balloon.sock"
/* The environment variable naming memtide's socket. */
#define MTB_SOCKET_ENV "MEMTIDE_BALLOON_SOCKET"
/* The largest byte count or counter on the wire: 2^53 - 1. */
#define MTB_MAX_VALUE UINT64_C(9007199254740991)
/* The longest application name, in bytes. */
#define MTB_APP_MAX 128
/* The longest failure reason sent to memtide, in bytes (longer ones are cut). */
#define MTB_REASON_MAX 1024

/* What the pool is. */
typedef enum mtb_kind {
    MTB_KIND_BUFFER_POOL,
    MTB_KIND_HEAP,
    MTB_KIND_CACHE,
    MTB_KIND_OTHER
} mtb_kind;

/* The wire name of a kind ("buffer_pool", ...), or NULL for a value that names no kind. */
MTB_API const char *mtb_kind_name(mtb_kind kind);

/* Reads a kind from its wire name. Returns 0, or -1 with errno EINVAL for any other name. */
MTB_API int mtb_kind_parse(const char *name, mtb_kind *kind);

/* The pool's facts at registration. All sizes are in bytes, at most MTB_MAX_VALUE. */
typedef struct mtb_pool {
    const char *app;        /* 1 to MTB_APP_MAX bytes of UTF-8, no control characters */
    mtb_kind kind;
    uint64_t pool_bytes;    /* its size now: min_bytes <= pool_bytes <= max_bytes */
    uint64_t min_bytes;     /* the smallest size the application accepts */
    uint64_t max_bytes;     /* the largest size it can grow to */
    uint64_t granule_bytes; /* the unit it moves in: >= 1, and <= max_bytes when max_bytes > 0 */
} mtb_pool;

/* The pool's statistics, as the `stats` callback fills them. The agent sends them with the
 * pool's size; it cuts used_bytes and dirty_bytes to the pool's size, every figure to
 * MTB_MAX_VALUE, and keeps the counters from going down within a session, so that what it
 * sends is always valid. */
typedef struct mtb_stats {
    uint64_t used_bytes;  /* the part of the pool holding data */
    uint64_t hits;        /* lookups served from the pool since the application started */
    uint64_t misses;      /* lookups the pool could not serve since the application started */
    uint64_t evictions;   /* entries evicted since the application started */
    uint64_t dirty_bytes; /* pool memory not yet written back */
} mtb_stats;

/* One shrink or grow in progress, lent to the callback that carries it out. */
typedef struct mtb_resize mtb_resize;

/* Reports the pool's size while a resize goes on; memtide sees it in `progress working`
 * messages and `stats`, and it stays the pool's size if the callback then fails. */
MTB_API void mtb_resize_progress(mtb_resize *resize, uint64_t pool_bytes);

/* True once this resize is no longer wanted: memtide sent a newer target, the connection
 * ended, or the agent is stopping. A long callback should poll it and return early (either
 * way: its answer is not sent, but the size it reached is kept). */
MTB_API bool mtb_resize_cancelled(const mtb_resize *resize);

/* Records why the resize failed (printf-style; cut to MTB_REASON_MAX bytes) and returns
 * false, so a callback can end with `return mtb_resize_fail(resize, "...", ...);`. */
MTB_API bool mtb_resize_fail(mtb_resize *resize, const char *format, ...) MTB_PRINTF(2, 3);

/* How much a log message matters. */
typedef enum mtb_log_level {
    MTB_LOG_DEBUG,   /* every message sent and received */
    MTB_LOG_INFO,    /* registered, targets and their outcomes, bye */
    MTB_LOG_WARNING, /* memtide unreachable, connection lost, lines that could not be read */
    MTB_LOG_ERROR    /* errors memtide reported */
} mtb_log_level;

/* What the application does for the agent. */
typedef struct mtb_callbacks {
    /* Shrink the pool to target_bytes (a multiple of the granule within [min, max], below the
     * pool's size) and give the memory back to the OS. Return true when the pool is at the
     * target; otherwise return mtb_resize_fail(resize, reason) and report with
     * mtb_resize_progress() where the pool stands, if not where it started. Required. */
    bool (*shrink)(void *user, uint64_t target_bytes, mtb_resize *resize);
    /* Grow the pool to target_bytes (above the pool's size); as shrink otherwise. Required. */
    bool (*grow)(void *user, uint64_t target_bytes, mtb_resize *resize);
    /* Fill in the pool's statistics now. Called on the agent thread, at registration and
     * every stats interval memtide asks for; keep it quick. Required. */
    void (*stats)(void *user, mtb_stats *stats);
    /* Receives one line (no newline) about what the agent does. Optional: NULL for none. */
    void (*log)(void *user, mtb_log_level level, const char *message);
    /* Handed to every callback as is. */
    void *user;
} mtb_callbacks;

/* How to start an agent. Zero-initialize it, then set the fields: 0 and NULL mean defaults. */
typedef struct mtb_config {
    /* memtide's socket; NULL: the environment's MEMTIDE_BALLOON_SOCKET when set and not
     * empty, else MTB_DEFAULT_SOCKET. At most 107 bytes (a Unix socket address). */
    const char *socket_path;
    mtb_pool pool;
    mtb_callbacks callbacks;
    /* The first wait before reconnecting, doubled after each failed attempt up to
     * reconnect_max_ms; each wait is drawn at random from its upper half (jitter).
     * Defaults: 100 ms and 30,000 ms. The first wait comes back once a session is welcomed. */
    uint32_t reconnect_min_ms;
    uint32_t reconnect_max_ms;
} mtb_config;

/* A one-line description of why a call failed. */
typedef struct mtb_error {
    char message[256];
} mtb_error;

/* A running agent (opaque). */
typedef struct mtb_agent mtb_agent;

/*
 * Checks the config and starts an agent on its own threads; the agent connects in the
 * background, so memtide need not be running yet. On success stores the agent in *agent and
 * returns 0. Otherwise returns -1 with errno EINVAL (the config: error->message names the
 * field and its value), ENOMEM, or what pipe2() or pthread_create() failed with, and leaves
 * *agent untouched. error may be NULL.
 */
MTB_API int mtb_agent_start(const mtb_config *config, mtb_agent **agent, mtb_error *error);

/*
 * Stops the agent: says bye to memtide if connected (waiting at most 5 s for the socket to
 * take it) and closes the connection, cancels a running resize (see mtb_resize_cancelled) and
 * waits for its callback to return, then frees the agent. Returns 0 (also for a NULL agent), or -1 with errno EDEADLK when called from one
 * of the agent's callbacks, in which case nothing is stopped. Call it once per agent, from
 * any thread but the agent's.
 */
MTB_API int mtb_agent_stop(mtb_agent *agent);

#ifdef __cplusplus
}
#endif

#endif /* MEMTIDE_BALLOON_H */
