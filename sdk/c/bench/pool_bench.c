/*
 * pool_bench.c: how fast the sample pool (examples/granule_pool.c) shrinks to 0 and grows
 * back. First in-process, calling the same shrink and grow functions the agent calls; then
 * end to end, with a tiny memtide in this process that listens on a socket in a temporary
 * directory, welcomes the agent and times each target from sending it to reading its
 * `progress done`. Prints every run, the median of each way, and the resident memory (VmRSS)
 * after each move.
 *
 *   pool_bench [--size SIZE] [--granule SIZE] [--runs N] [--no-huge-pages]
 */
#define _GNU_SOURCE /* mkdtemp, accept4 */
#include "granule_pool.h"
#include "memtide_balloon.h"
#include "sizes.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 15

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *values, int n)
{
    double sorted[MAX_RUNS];
    memcpy(sorted, values, (size_t)n * sizeof *values);
    qsort(sorted, (size_t)n, sizeof *sorted, by_value);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void print_move(const char *how, int run, const char *way, double seconds)
{
    char rss[32];
    printf("%-11s run %d: %-6s %.3f s, resident after: %s\n", how, run, way, seconds,
           format_size(resident_bytes(), rss, sizeof rss));
}

static void in_process(granule_pool *pool, uint64_t size, int runs, double *shrink, double *grow)
{
    for (int i = 0; i < runs; i++) {
        double start = now_s();
        granule_pool_shrink(pool, 0, NULL);
        shrink[i] = now_s() - start;
        print_move("in-process", i + 1, "shrink", shrink[i]);
        start = now_s();
        if (!granule_pool_grow(pool, size, NULL)) {
            fprintf(stderr, "pool_bench: growing failed: %s\n", strerror(errno));
            exit(1);
        }
        grow[i] = now_s() - start;
        print_move("in-process", i + 1, "grow", grow[i]);
    }
}

/* The tiny memtide: one connection and its lines. */
typedef struct memtide {
    char dir[128];
    char path[160];
    int listener;
    int fd;
    size_t len;
    char buf[4096];
} memtide;

static void fail(const char *what)
{
    fprintf(stderr, "pool_bench: %s: %s\n", what, errno ? strerror(errno) : "unexpected");
    exit(1);
}

static void memtide_listen(memtide *m)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    const char *tmp = getenv("TMPDIR");
    snprintf(m->dir, sizeof m->dir, "%s/mtb-bench-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(m->dir) == NULL)
        fail("mkdtemp");
    snprintf(m->path, sizeof m->path, "%s/balloon.sock", m->dir);
    memcpy(address.sun_path, m->path, strlen(m->path) + 1);
    m->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m->listener < 0 || bind(m->listener, (struct sockaddr *)&address, sizeof address) < 0 ||
        listen(m->listener, 1) < 0)
        fail("listening");
    m->len = 0;
}

static void memtide_send(memtide *m, const char *line)
{
    size_t n = strlen(line);
    if (send(m->fd, line, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail("sending");
}

/* Reads lines until one holds every part given; returns when it does. */
static void memtide_await(memtide *m, const char *part1, const char *part2)
{
    for (;;) {
        char *newline;
        while ((newline = memchr(m->buf, '\n', m->len)) != NULL) {
            *newline = '\0';
            bool found = strstr(m->buf, part1) != NULL && strstr(m->buf, part2) != NULL;
            if (strstr(m->buf, "\"status\":\"failed\"") != NULL) {
                fprintf(stderr, "pool_bench: the agent failed: %s\n", m->buf);
                exit(1);
            }
            size_t used = (size_t)(newline - m->buf) + 1;
            memmove(m->buf, newline + 1, m->len - used);
            m->len -= used;
            if (found)
                return;
        }
        struct pollfd fd = {.fd = m->fd, .events = POLLIN};
        errno = 0;
        if (m->len == sizeof m->buf || poll(&fd, 1, 60000) != 1)
            fail("waiting for the agent");
        ssize_t got = recv(m->fd, m->buf + m->len, sizeof m->buf - m->len, 0);
        if (got <= 0)
            fail("reading from the agent");
        m->len += (size_t)got;
    }
}

static void end_to_end(granule_pool *pool, uint64_t size, int runs, double *shrink, double *grow)
{
    memtide m;
    mtb_agent *agent;
    mtb_error error;
    char line[256], seq_part[64];
    memtide_listen(&m);
    mtb_config config = {
        .socket_path = m.path,
        .pool = {.app = "pool-bench",
                 .kind = MTB_KIND_CACHE,
                 .pool_bytes = granule_pool_bytes(pool),
                 .min_bytes = 0,
                 .max_bytes = size,
                 .granule_bytes = pool->granule_bytes},
        .callbacks = {.shrink = granule_pool_shrink,
                      .grow = granule_pool_grow,
                      .stats = granule_pool_stats,
                      .user = pool},
    };
    if (mtb_agent_start(&config, &agent, &error) < 0) {
        fprintf(stderr, "pool_bench: cannot start the agent: %s\n", error.message);
        exit(1);
    }
    m.fd = accept4(m.listener, NULL, NULL, SOCK_CLOEXEC);
    if (m.fd < 0)
        fail("accept");
    memtide_await(&m, "\"type\":\"hello\"", "");
    memtide_send(&m, "{\"type\":\"welcome\",\"version\":1,\"tenant\":\"bench\","
                     "\"stats_interval_ms\":60000,\"dead_after_ms\":180000}\n");
    memtide_await(&m, "\"type\":\"stats\"", "");
    unsigned seq = 0;
    for (int i = 0; i < runs; i++) {
        for (int way = 0; way < 2; way++) {
            uint64_t target = way == 0 ? 0 : size;
            seq++;
            snprintf(line, sizeof line,
                     "{\"type\":\"target\",\"seq\":%u,\"pool_bytes\":%llu,\"deadline_ms\":60000}\n",
                     seq, (unsigned long long)target);
            snprintf(seq_part, sizeof seq_part, "\"seq\":%u,", seq);
            double start = now_s();
            memtide_send(&m, line);
            memtide_await(&m, seq_part, "\"status\":\"done\"");
            double took = now_s() - start;
            (way == 0 ? shrink : grow)[i] = took;
            print_move("end-to-end", i + 1, way == 0 ? "shrink" : "grow", took);
        }
    }
    mtb_agent_stop(agent);
    close(m.fd);
    close(m.listener);
    unlink(m.path);
    rmdir(m.dir);
}

int main(int argc, char **argv)
{
    uint64_t size = (uint64_t)2 << 30, granule = (uint64_t)2 << 20;
    int runs = 3;
    bool huge_pages = true;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--no-huge-pages") == 0) {
            huge_pages = false;
        } else if (strcmp(argv[i], "--size") == 0 && parse_size(value, &size) == 0) {
            i++;
        } else if (strcmp(argv[i], "--granule") == 0 && parse_size(value, &granule) == 0) {
            i++;
        } else if (strcmp(argv[i], "--runs") == 0 && atoi(value) >= 1 && atoi(value) <= MAX_RUNS) {
            runs = atoi(value);
            i++;
        } else {
            fprintf(stderr, "usage: pool_bench [--size SIZE] [--granule SIZE] [--runs 1-%d] "
                            "[--no-huge-pages]\n",
                    MAX_RUNS);
            return 2;
        }
    }

    granule_pool pool;
    char why[256], shown[32];
    double shrink[2][MAX_RUNS], grow[2][MAX_RUNS];
    double start = now_s();
    if (granule_pool_init(&pool, granule, size, size, huge_pages, why, sizeof why) < 0) {
        fprintf(stderr, "pool_bench: %s\n", why);
        return 1;
    }
    printf("pool of %s in granules of %s, %s\n", format_size(size, shown, sizeof shown),
           format_size(granule, why, sizeof why),
           pool.huge_pages ? "advised for transparent huge pages" : "in base pages");
    print_move("first map", 0, "grow", now_s() - start);
    in_process(&pool, size, runs, shrink[0], grow[0]);
    end_to_end(&pool, size, runs, shrink[1], grow[1]);
    printf("median of %d: in-process shrink %.3f s, grow %.3f s; "
           "end-to-end shrink %.3f s, grow %.3f s\n",
           runs, median(shrink[0], runs), median(grow[0], runs), median(shrink[1], runs),
           median(grow[1], runs));
    granule_pool_destroy(&pool);
    return 0;
}
