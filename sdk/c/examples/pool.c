/*
 * pool.c: the sample application. It holds a pool of real memory in granules (see
 * granule_pool.h), looks pages up in it at a steady rate as a cache would, registers the pool
 * with memtide through libmemtide_balloon and obeys memtide's targets, printing the pool's
 * size and the process's resident memory (VmRSS) as they change. Stops on SIGINT or SIGTERM.
 *
 *   pool [--socket PATH] [--app NAME] [--kind KIND] [--pool SIZE] [--min SIZE] [--max SIZE]
 *        [--granule SIZE] [--lookups N] [--no-huge-pages] [--verbose]
 */
#define _POSIX_C_SOURCE 200809L
#include "granule_pool.h"
#include "memtide_balloon.h"
#include "sizes.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *socket_path;
    const char *app;
    mtb_kind kind;
    uint64_t pool_bytes;
    uint64_t min_bytes;
    uint64_t max_bytes;
    uint64_t granule_bytes;
    unsigned lookups_per_second;
    bool huge_pages;
    bool verbose;
} options;

static volatile sig_atomic_t stop_requested;

static void on_signal(int signal_number)
{
    (void)signal_number;
    stop_requested = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pool [--socket PATH] [--app NAME] [--kind KIND] [--pool SIZE] [--min SIZE]\n"
            "            [--max SIZE] [--granule SIZE] [--lookups N] [--no-huge-pages] [--verbose]\n"
            "  --socket PATH    memtide's balloon socket (default: $%s, else %s)\n"
            "  --app NAME       the application's name (default: pool-sample)\n"
            "  --kind KIND      buffer_pool, heap, cache or other (default: cache)\n"
            "  --pool SIZE      the pool's size at start, e.g. 512M (default: 256M)\n"
            "  --min SIZE       the smallest it accepts (default: 0)\n"
            "  --max SIZE       the largest it can grow to (default: 1G)\n"
            "  --granule SIZE   the unit it moves in (default: 2M)\n"
            "  --lookups N      page lookups a second, spread over the largest pool (default: 1000)\n"
            "  --no-huge-pages  do not advise transparent huge pages\n"
            "  --verbose        log every message to and from memtide\n",
            MTB_SOCKET_ENV, MTB_DEFAULT_SOCKET);
}

/* Reads the flags; exits with status 2 and one line on a bad one. */
static options parse_options(int argc, char **argv)
{
    options o = {.app = "pool-sample",
                 .kind = MTB_KIND_CACHE,
                 .pool_bytes = (uint64_t)256 << 20,
                 .max_bytes = (uint64_t)1 << 30,
                 .granule_bytes = (uint64_t)2 << 20,
                 .lookups_per_second = 1000,
                 .huge_pages = true};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *size = strcmp(flag, "--pool") == 0      ? &o.pool_bytes
                         : strcmp(flag, "--min") == 0     ? &o.min_bytes
                         : strcmp(flag, "--max") == 0     ? &o.max_bytes
                         : strcmp(flag, "--granule") == 0 ? &o.granule_bytes
                                                          : NULL;
        if (strcmp(flag, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(flag, "--no-huge-pages") == 0) {
            o.huge_pages = false;
            continue;
        } else if (strcmp(flag, "--verbose") == 0) {
            o.verbose = true;
            continue;
        }
        if (value == NULL) {
            fprintf(stderr, "pool: %s needs a value (see --help)\n", flag);
            exit(2);
        }
        i++;
        if (size != NULL) {
            if (parse_size(value, size) < 0) {
                fprintf(stderr, "pool: %s %s is not a size such as 512M or 2G\n", flag, value);
                exit(2);
            }
        } else if (strcmp(flag, "--socket") == 0) {
            o.socket_path = value;
        } else if (strcmp(flag, "--app") == 0) {
            o.app = value;
        } else if (strcmp(flag, "--kind") == 0) {
            if (mtb_kind_parse(value, &o.kind) < 0) {
                fprintf(stderr, "pool: --kind %s is not buffer_pool, heap, cache or other\n",
                        value);
                exit(2);
            }
        } else if (strcmp(flag, "--lookups") == 0) {
            char *end;
            unsigned long n = strtoul(value, &end, 10);
            if (*value == '\0' || *end != '\0' || n > 1000000) {
                fprintf(stderr, "pool: --lookups %s is not a count up to 1000000\n", value);
                exit(2);
            }
            o.lookups_per_second = (unsigned)n;
        } else {
            fprintf(stderr, "pool: unknown flag %s (see --help)\n", flag);
            exit(2);
        }
    }
    return o;
}

static bool verbose;

static void log_line(void *user, mtb_log_level level, const char *message)
{
    static const char *const levels[] = {"debug", "info", "warning", "error"};
    (void)user;
    if (level > MTB_LOG_DEBUG || verbose)
        fprintf(stderr, "pool: memtide agent %s: %s\n", levels[level], message);
}

static void report(granule_pool *pool)
{
    char size[32], rss[32];
    mtb_stats st;
    granule_pool_stats(pool, &st);
    printf("pool %s, resident %s, hits %llu, misses %llu\n",
           format_size(granule_pool_bytes(pool), size, sizeof size),
           format_size(resident_bytes(), rss, sizeof rss), (unsigned long long)st.hits,
           (unsigned long long)st.misses);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static granule_pool pool;
    char why[256];
    mtb_error error;
    mtb_agent *agent;
    const options opts = parse_options(argc, argv);
    const options *o = &opts;
    verbose = o->verbose;

    struct sigaction action = {.sa_handler = on_signal};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);

    if (granule_pool_init(&pool, o->granule_bytes, o->pool_bytes, o->max_bytes, o->huge_pages,
                          why, sizeof why) < 0) {
        fprintf(stderr, "pool: %s\n", why);
        return 1;
    }
    report(&pool);
    mtb_config config = {
        .socket_path = o->socket_path,
        .pool = {.app = o->app,
                 .kind = o->kind,
                 .pool_bytes = o->pool_bytes,
                 .min_bytes = o->min_bytes,
                 .max_bytes = o->max_bytes,
                 .granule_bytes = o->granule_bytes},
        .callbacks = {.shrink = granule_pool_shrink,
                      .grow = granule_pool_grow,
                      .stats = granule_pool_stats,
                      .log = log_line,
                      .user = &pool},
    };
    if (mtb_agent_start(&config, &agent, &error) < 0) {
        fprintf(stderr, "pool: cannot start the memtide agent: %s\n", error.message);
        granule_pool_destroy(&pool);
        return 1;
    }

    /* Look pages up at the asked rate, in 10 ms slices, and report every 250 ms while the
     * pool moves. */
    uint64_t pages = o->max_bytes / pool.page_bytes;
    uint64_t last_pool = granule_pool_bytes(&pool);
    unsigned per_slice = o->lookups_per_second / 100;
    unsigned long slices = 0;
    unsigned seed = (unsigned)time(NULL);
    struct timespec slice = {.tv_nsec = 10 * 1000000};
    while (!stop_requested) {
        for (unsigned i = 0; i < per_slice && pages > 0; i++)
            granule_pool_lookup(&pool, ((uint64_t)rand_r(&seed) << 31 | (uint64_t)rand_r(&seed)) % pages);
        nanosleep(&slice, NULL);
        if (++slices % 25 != 0)
            continue;
        uint64_t now = granule_pool_bytes(&pool);
        if (now != last_pool) {
            last_pool = now;
            report(&pool);
        }
    }

    mtb_agent_stop(agent);
    report(&pool);
    granule_pool_destroy(&pool);
    return 0;
}
