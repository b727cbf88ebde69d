/*
 * connection.c: the Unix-socket connection to memtide and its line framing (see
 * connection.h). Sends use MSG_NOSIGNAL, so a closed peer is an EPIPE error, never SIGPIPE.
 */
#include "connection.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int mtb_connection_open(mtb_connection *c, const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    struct timeval send_timeout = {.tv_sec = 5};
    size_t n = strlen(path);
    if (n >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, path, n + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout) < 0 ||
        connect(c->fd, (const struct sockaddr *)&address, sizeof address) < 0) {
        int saved = errno;
        close(c->fd);
        c->fd = -1;
        errno = saved;
        return -1;
    }
    c->start = c->len = 0;
    c->discarding = false;
    return 0;
}

void mtb_connection_close(mtb_connection *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

int mtb_connection_send(mtb_connection *c, const char *line, size_t len)
{
    while (len > 0) {
        ssize_t n = send(c->fd, line, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                errno = ETIMEDOUT;
            return -1;
        }
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

ssize_t mtb_connection_fill(mtb_connection *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            c->len += (size_t)n;
        return n;
    }
}

mtb_take mtb_connection_take(mtb_connection *c, char **line, size_t *len)
{
    for (;;) {
        char *begin = c->buf + c->start;
        char *newline = memchr(begin, '\n', c->len - c->start);
        if (newline != NULL) {
            c->start = (size_t)(newline - c->buf) + 1;
            if (c->discarding) {
                c->discarding = false;
                continue;
            }
            *line = begin;
            *len = (size_t)(newline - begin);
            return MTB_TAKE_LINE;
        }
        if (c->discarding) {
            c->start = c->len = 0;
            return MTB_TAKE_NONE;
        }
        if (c->start == 0 && c->len == sizeof c->buf) {
            c->start = c->len = 0;
            c->discarding = true;
            return MTB_TAKE_TOO_LONG;
        }
        memmove(c->buf, begin, c->len - c->start);
        c->len -= c->start;
        c->start = 0;
        return MTB_TAKE_NONE;
    }
}
