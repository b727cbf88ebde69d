/*
 * player.c: the test harness that plays memtide against the agent (see player.h).
 */
#define _GNU_SOURCE /* accept4 */
#include "player.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

bool player_open(player *p, char *why, size_t why_size)
{
    const char *tmp = getenv("TMPDIR");
    p->listener = p->fd = -1;
    p->len = 0;
    p->path[0] = '\0';
    snprintf(p->dir, sizeof p->dir, "%s/mtb-test-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(p->dir) == NULL) {
        snprintf(why, why_size, "mkdtemp %s: %s", p->dir, strerror(errno));
        return false;
    }
    if (!player_listen(p, "balloon.sock", why, why_size)) {
        player_close(p);
        return false;
    }
    return true;
}

bool player_listen(player *p, const char *name, char *why, size_t why_size)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (p->listener >= 0)
        close(p->listener);
    if (p->path[0] != '\0')
        unlink(p->path);
    snprintf(p->path, sizeof p->path, "%s/%s", p->dir, name);
    if (strlen(p->path) >= sizeof address.sun_path) {
        snprintf(why, why_size, "the socket path %s is too long", p->path);
        return false;
    }
    memcpy(address.sun_path, p->path, strlen(p->path) + 1);
    p->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->listener < 0 ||
        bind(p->listener, (const struct sockaddr *)&address, sizeof address) < 0 ||
        listen(p->listener, 8) < 0) {
        snprintf(why, why_size, "listening on %s: %s", p->path, strerror(errno));
        return false;
    }
    return true;
}

void player_drop(player *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->len = 0;
}

void player_close(player *p)
{
    player_drop(p);
    if (p->listener >= 0)
        close(p->listener);
    p->listener = -1;
    if (p->path[0] != '\0')
        unlink(p->path);
    rmdir(p->dir);
}

bool player_accept(player *p, int timeout_ms, char *why, size_t why_size)
{
    struct pollfd fd = {.fd = p->listener, .events = POLLIN};
    player_drop(p);
    if (poll(&fd, 1, timeout_ms) != 1) {
        snprintf(why, why_size, "the agent did not connect within %d ms", timeout_ms);
        return false;
    }
    p->fd = accept4(p->listener, NULL, NULL, SOCK_CLOEXEC);
    if (p->fd < 0) {
        snprintf(why, why_size, "accept: %s", strerror(errno));
        return false;
    }
    return true;
}

bool player_send_raw(player *p, const char *bytes, size_t n)
{
    while (n > 0) {
        ssize_t sent = send(p->fd, bytes, n, MSG_NOSIGNAL);
        if (sent < 0)
            return false;
        bytes += sent;
        n -= (size_t)sent;
    }
    return true;
}

bool player_send(player *p, const char *line)
{
    return player_send_raw(p, line, strlen(line)) && player_send_raw(p, "\n", 1);
}

/* Reads the next line into line (NUL-terminated, no '\n'): 1, 0 at the end of the
 * connection, -1 at a timeout or an error. */
static int read_line(player *p, long long deadline, char *line, size_t size)
{
    for (;;) {
        char *newline = memchr(p->buf, '\n', p->len);
        if (newline != NULL) {
            size_t n = (size_t)(newline - p->buf);
            snprintf(line, size, "%.*s", (int)n, p->buf);
            memmove(p->buf, newline + 1, p->len - n - 1);
            p->len -= n + 1;
            return 1;
        }
        long long left = deadline - now_ms();
        struct pollfd fd = {.fd = p->fd, .events = POLLIN};
        if (left <= 0 || p->len == sizeof p->buf || poll(&fd, 1, (int)left) != 1)
            return -1;
        ssize_t got = recv(p->fd, p->buf + p->len, sizeof p->buf - p->len, 0);
        if (got == 0)
            return 0;
        if (got < 0)
            return -1;
        p->len += (size_t)got;
    }
}

static jt *next_before(player *p, long long deadline, char *why, size_t why_size)
{
    static char line[1 << 17];
    int got = read_line(p, deadline, line, sizeof line);
    if (got <= 0) {
        snprintf(why, why_size, got == 0 ? "the agent closed the connection"
                                         : "no line from the agent in time");
        return NULL;
    }
    char parse_why[128];
    jt *msg = jt_parse(line, strlen(line), parse_why, sizeof parse_why);
    if (msg == NULL)
        snprintf(why, why_size, "the agent sent a line that is not JSON (%s): %.200s", parse_why,
                 line);
    return msg;
}

jt *player_next(player *p, int timeout_ms, char *why, size_t why_size)
{
    return next_before(p, now_ms() + timeout_ms, why, why_size);
}

static bool is(const char *s, const char *value)
{
    return s != NULL && strcmp(s, value) == 0;
}

/* The skip rule: stats and working progress, unless want asks for that type and status. */
static bool skipped(const jt *msg, const jt *want)
{
    const char *type = jt_string(msg, "type");
    const char *want_type = want != NULL ? jt_string(want, "type") : NULL;
    if (is(type, "stats"))
        return !is(want_type, "stats");
    if (is(type, "progress") && is(jt_string(msg, "status"), "working"))
        return !(is(want_type, "progress") && is(jt_string(want, "status"), "working"));
    return false;
}

/* Writes a parsed line back as text for a message. */
static void show(const jt *v, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; v->kind == JT_OBJECT && i < v->count && n + 1 < size; i++) {
        const jt *item = v->items[i];
        const char *text = item->kind == JT_BOOL ? (item->boolean ? "true" : "false")
                           : item->kind == JT_NULL ? "null"
                           : item->text != NULL    ? item->text
                                                   : "...";
        n += (size_t)snprintf(out + n, size - n, "%s%s=%.80s", i ? " " : "", v->keys[i], text);
    }
}

bool player_expect(player *p, const jt *want, char *why, size_t why_size)
{
    long long deadline = now_ms() + PLAYER_WAIT_MS;
    for (;;) {
        jt *msg = next_before(p, deadline, why, why_size);
        if (msg == NULL)
            return false;
        if (skipped(msg, want)) {
            jt_free(msg);
            continue;
        }
        bool ok = jt_holds(msg, want);
        if (!ok) {
            char got[512], wanted[512];
            show(msg, got, sizeof got);
            show(want, wanted, sizeof wanted);
            snprintf(why, why_size, "expected {%s}, got {%s}", wanted, got);
        }
        jt_free(msg);
        return ok;
    }
}

bool player_expect_json(player *p, const char *want, char *why, size_t why_size)
{
    jt *w = jt_parse(want, strlen(want), why, why_size);
    if (w == NULL)
        return false;
    bool ok = player_expect(p, w, why, why_size);
    jt_free(w);
    return ok;
}

bool player_expect_closed(player *p, char *why, size_t why_size)
{
    long long deadline = now_ms() + PLAYER_WAIT_MS;
    static char line[1 << 17];
    for (;;) {
        int got = read_line(p, deadline, line, sizeof line);
        if (got == 0)
            return true;
        if (got < 0) {
            snprintf(why, why_size, "the agent kept the connection open for %d ms",
                     PLAYER_WAIT_MS);
            return false;
        }
        char parse_why[128];
        jt *msg = jt_parse(line, strlen(line), parse_why, sizeof parse_why);
        bool skip = msg != NULL && skipped(msg, NULL);
        jt_free(msg);
        if (!skip) {
            snprintf(why, why_size, "expected the connection to close, got %.200s", line);
            return false;
        }
    }
}
