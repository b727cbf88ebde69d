/*
 * connection.h: an agent's connection to memtide's Unix socket (internal): connecting,
 * sending whole lines, and cutting what arrives into lines of at most MTB_LINE_MAX bytes,
 * dropping longer ones.
 */
#ifndef MTB_CONNECTION_H
#define MTB_CONNECTION_H

#include "protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct mtb_connection {
    int fd;
    char buf[MTB_LINE_MAX];
    size_t start;    /* where the bytes not yet taken begin */
    size_t len;      /* where they end */
    bool discarding; /* dropping the rest of a line that was too long */
} mtb_connection;

/* Connects to the socket at path (at most 107 bytes). Returns 0, or -1 with errno set. */
int mtb_connection_open(mtb_connection *c, const char *path);
void mtb_connection_close(mtb_connection *c);

/* Sends line[0, len) whole, waiting at most 5 s for room. Returns 0, or -1 with errno set
 * (ETIMEDOUT when memtide does not read). */
int mtb_connection_send(mtb_connection *c, const char *line, size_t len);

/* Reads what the socket holds into the buffer. Returns the bytes read, 0 at end of file, or
 * -1 with errno set. */
ssize_t mtb_connection_fill(mtb_connection *c);

typedef enum mtb_take {
    MTB_TAKE_NONE,     /* no whole line yet */
    MTB_TAKE_LINE,     /* *line, *len: the next line without its '\n', valid until the next fill */
    MTB_TAKE_TOO_LONG  /* a line went past MTB_LINE_MAX: the rest of it up to its '\n' is dropped */
} mtb_take;

mtb_take mtb_connection_take(mtb_connection *c, char **line, size_t *len);

#endif
