/*
 * test_exchanges.c: every exchange of protocol/vectors/agent/, played by the harness (as
 * memtide) against a real agent whose pool starts as the vector's `pool` and whose callbacks
 * comply or refuse as its `app` says.
 */
#include "check.h"
#include "json_tree.h"
#include "player.h"
#include "test_app.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void play(const void *arg)
{
    const char *path = arg;
    char why[512];
    jt *vector = jt_parse_file(path, why, sizeof why);
    REQUIRE(vector != NULL, "%s: %s", path, why);
    const jt *pool = jt_get(vector, "pool");
    const jt *steps = jt_get(vector, "steps");
    const char *behaviour = jt_string(vector, "app");
    mtb_kind kind;
    if (pool == NULL || steps == NULL || steps->kind != JT_ARRAY || behaviour == NULL ||
        mtb_kind_parse(jt_string(pool, "kind"), &kind) < 0) {
        jt_free(vector);
        REQUIRE(false, "%s is not an exchange", path);
    }

    player p;
    test_app app;
    mtb_agent *agent = NULL;
    mtb_error error;
    test_app_init(&app);
    app.refuse = strcmp(behaviour, "refuse") == 0;
    app.reason = "the vector's application refuses";
    app.pool_bytes = jt_uint(pool, "pool_bytes");
    mtb_config config = test_app_config(&app, NULL);
    config.pool = (mtb_pool){.app = jt_string(pool, "app"),
                             .kind = kind,
                             .pool_bytes = jt_uint(pool, "pool_bytes"),
                             .min_bytes = jt_uint(pool, "min_bytes"),
                             .max_bytes = jt_uint(pool, "max_bytes"),
                             .granule_bytes = jt_uint(pool, "granule_bytes")};
    bool opened = player_open(&p, why, sizeof why);
    bool ok = opened;
    if (ok) {
        config.socket_path = p.path;
        ok = mtb_agent_start(&config, &agent, &error) == 0;
        if (!ok)
            snprintf(why, sizeof why, "the agent did not start: %s", error.message);
    }
    if (ok)
        ok = player_accept(&p, PLAYER_WAIT_MS, why, sizeof why);
    CHECK(ok, "%s", why);
    CHECK(strcmp(behaviour, "comply") == 0 || strcmp(behaviour, "refuse") == 0,
          "an app that does %s", behaviour);

    for (size_t i = 0; ok && i < steps->count; i++) {
        const jt *step = steps->items[i];
        const jt *send = jt_get(step, "send");
        const jt *expect = jt_get(step, "expect");
        if (send != NULL)
            ok = player_send(&p, send->text);
        else if (expect != NULL)
            ok = player_expect(&p, expect, why, sizeof why);
        else if (jt_bool(step, "expect_closed"))
            ok = player_expect_closed(&p, why, sizeof why);
        else
            snprintf(why, sizeof why, "a step that is not send, expect or expect_closed");
        if (send != NULL && !ok)
            snprintf(why, sizeof why, "the line could not be sent");
        CHECK(ok, "step %zu: %s", i + 1, why);
    }
    if (app.refuse)
        CHECK(test_app_pool(&app) == config.pool.pool_bytes, "a refusing pool changed");
    mtb_agent_stop(agent);
    if (opened)
        player_close(&p);
    test_app_destroy(&app);
    jt_free(vector);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t found;

static void the_exchanges_are_there(void)
{
    CHECK(found > 0, "no exchanges in %s/agent", vectors_dir);
}

void exchange_vector_tests(void)
{
    char dir_path[1024], name[512];
    char *files[256];
    snprintf(dir_path, sizeof dir_path, "%s/agent", vectors_dir);
    DIR *dir = opendir(dir_path);
    struct dirent *entry;
    found = 0;
    while (dir != NULL && (entry = readdir(dir)) != NULL && found < 256) {
        size_t n = strlen(entry->d_name);
        if (n > 5 && strcmp(entry->d_name + n - 5, ".json") == 0) {
            files[found] = malloc(strlen(dir_path) + n + 2);
            if (files[found] != NULL)
                sprintf(files[found++], "%s/%s", dir_path, entry->d_name);
        }
    }
    if (dir != NULL)
        closedir(dir);
    RUN(the_exchanges_are_there);
    qsort(files, found, sizeof files[0], by_name);
    for (size_t i = 0; i < found; i++) {
        snprintf(name, sizeof name, "agent/%s", strrchr(files[i], '/') + 1);
        run_case_with(name, play, files[i]);
        free(files[i]);
    }
}
