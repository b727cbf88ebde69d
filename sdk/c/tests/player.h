/*
 * player.h: the test harness that plays memtide: it listens on a Unix socket in a new
 * temporary directory, accepts the agent's connection, sends lines and reads the agent's,
 * with the "Test vectors" rules of docs/balloon-protocol.md (an expectation skips `stats`
 * and `progress` working lines unless it asks for them).
 */
#ifndef PLAYER_H
#define PLAYER_H

#include "json_tree.h"

#include <stdbool.h>
#include <stddef.h>

/* How long an expectation waits for its line, or for the end of the connection. */
#define PLAYER_WAIT_MS 5000

typedef struct player {
    char dir[256];  /* the temporary directory, removed by player_close */
    char path[300]; /* the socket in it */
    int listener;
    int fd; /* the accepted connection, or -1 */
    size_t len;
    char buf[1 << 17];
} player;

/* Listens in a new temporary directory. Returns false with why filled in when it cannot. */
bool player_open(player *p, char *why, size_t why_size);
/* Listens at another socket of the directory instead (dropping the one before). */
bool player_listen(player *p, const char *name, char *why, size_t why_size);
/* Stops listening, closes the connection, removes the socket and the directory. */
void player_close(player *p);
/* Accepts the agent's next connection, waiting at most timeout_ms. */
bool player_accept(player *p, int timeout_ms, char *why, size_t why_size);
/* Closes the connection from memtide's side. */
void player_drop(player *p);
/* Writes bytes as they are (player_send adds the '\n'). */
bool player_send_raw(player *p, const char *bytes, size_t n);
bool player_send(player *p, const char *line);
/* The next line the agent sends, parsed; NULL (why filled in) at a timeout, the end of the
 * connection or a line that is not JSON. */
jt *player_next(player *p, int timeout_ms, char *why, size_t why_size);
/* Reads lines until one is not skipped; true when it holds every member of want. */
bool player_expect(player *p, const jt *want, char *why, size_t why_size);
/* player_expect with want written as JSON. */
bool player_expect_json(player *p, const char *want, char *why, size_t why_size);
/* True when the agent closes the connection within PLAYER_WAIT_MS, sending no line that an
 * expectation would not skip. */
bool player_expect_closed(player *p, char *why, size_t why_size);

#endif
