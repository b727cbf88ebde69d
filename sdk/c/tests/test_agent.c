/*
 * test_agent.c: the agent's behaviour beyond the vectors, against the harness playing
 * memtide: reconnecting, stopping, stats, working progress, superseded targets, framing,
 * the checks on targets and on the config.
 */
#define _GNU_SOURCE /* setenv */
#include "check.h"
#include "json_tree.h"
#include "player.h"
#include "test_app.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WELCOME(stats_ms)                                                                     \
    "{\"type\":\"welcome\",\"version\":1,\"tenant\":\"t\",\"stats_interval_ms\":" #stats_ms      \
    ",\"dead_after_ms\":600000}"
#define TARGET(seq, bytes)                                                                    \
    "{\"type\":\"target\",\"seq\":" #seq ",\"pool_bytes\":" #bytes ",\"deadline_ms\":30000}"
#define MIB(n) ((uint64_t)(n) << 20)

/* A harness, an application and its agent. */
typedef struct fixture {
    player p;
    test_app app;
    mtb_agent *agent;
    bool opened;
    char why[1024];
} fixture;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* Opens the harness and the application; the agent is not started. */
static bool prepare(fixture *f)
{
    memset(f, 0, sizeof *f);
    test_app_init(&f->app);
    f->opened = player_open(&f->p, f->why, sizeof f->why);
    return f->opened;
}

static bool start(fixture *f, const mtb_config *config)
{
    mtb_error error;
    if (mtb_agent_start(config, &f->agent, &error) == 0)
        return true;
    snprintf(f->why, sizeof f->why, "the agent did not start: %s", error.message);
    return false;
}

/* prepare, start the agent on the harness's socket, accept it and read its hello. */
static bool connect_agent(fixture *f)
{
    if (!prepare(f))
        return false;
    mtb_config config = test_app_config(&f->app, f->p.path);
    return start(f, &config) && player_accept(&f->p, PLAYER_WAIT_MS, f->why, sizeof f->why) &&
           player_expect_json(&f->p, "{\"type\":\"hello\"}", f->why, sizeof f->why);
}

/* connect_agent, then welcome it with stats every stats_ms and read its first stats. */
static bool register_agent(fixture *f, const char *welcome)
{
    return connect_agent(f) && player_send(&f->p, welcome) &&
           player_expect_json(&f->p, "{\"type\":\"stats\"}", f->why, sizeof f->why);
}

static void finish(fixture *f)
{
    mtb_agent_stop(f->agent);
    f->agent = NULL;
    if (f->opened)
        player_close(&f->p);
    test_app_destroy(&f->app);
}

#define EXPECT(f, json) CHECK(player_expect_json(&(f)->p, json, (f)->why, sizeof (f)->why), "%s", (f)->why)
#define SEND(f, line) CHECK(player_send(&(f)->p, line), "could not send %s", line)

static void says_hello_with_its_pid_and_pool(void)
{
    fixture f;
    char want[512];
    bool ok = prepare(&f);
    mtb_config config = test_app_config(&f.app, f.p.path);
    ok = ok && start(&f, &config) && player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    CHECK(ok, "%s", f.why);
    snprintf(want, sizeof want,
             "{\"type\":\"hello\",\"version\":1,\"app\":\"vector-test\",\"kind\":\"buffer_pool\","
             "\"pid\":%d,\"pool_bytes\":536870912,\"min_bytes\":67108864,"
             "\"max_bytes\":1073741824,\"granule_bytes\":1048576}",
             (int)getpid());
    if (ok)
        EXPECT(&f, want);
    finish(&f);
}

static void reconnects_and_says_hello_again_after_the_connection_drops(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    player_drop(&f.p);
    CHECK(player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why), "%s", f.why);
    EXPECT(&f, "{\"type\":\"hello\",\"app\":\"vector-test\",\"pool_bytes\":536870912}");
    CHECK(test_app_logged(&f.app, "memtide closed the connection"), "the drop was not logged");
    finish(&f);
}

static void reconnects_after_memtide_says_bye(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, "{\"type\":\"bye\",\"reason\":\"memtide is stopping\"}");
    CHECK(player_expect_closed(&f.p, f.why, sizeof f.why), "%s", f.why);
    CHECK(player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why), "%s", f.why);
    EXPECT(&f, "{\"type\":\"hello\"}");
    CHECK(test_app_logged(&f.app, "memtide said bye (\"memtide is stopping\")"),
          "the bye was not logged with its reason");
    finish(&f);
}

static void reconnects_after_a_fatal_error(void)
{
    fixture f;
    CHECK(connect_agent(&f), "%s", f.why);
    SEND(&f, "{\"type\":\"error\",\"code\":\"busy\",\"message\":\"tenant t has an agent\",\"fatal\":true}");
    CHECK(player_expect_closed(&f.p, f.why, sizeof f.why), "%s", f.why);
    CHECK(player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why), "%s", f.why);
    EXPECT(&f, "{\"type\":\"hello\"}");
    CHECK(test_app_logged(&f.app, "memtide reported fatal busy: \"tenant t has an agent\""),
          "the error was not logged");
    finish(&f);
}

static void keeps_trying_until_memtide_listens(void)
{
    fixture f;
    char path[400];
    bool ok = prepare(&f);
    snprintf(path, sizeof path, "%s/later.sock", f.p.dir);
    mtb_config config = test_app_config(&f.app, path);
    ok = ok && start(&f, &config);
    sleep_ms(100);
    ok = ok && player_listen(&f.p, "later.sock", f.why, sizeof f.why) &&
         player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    CHECK(ok, "%s", f.why);
    if (ok)
        EXPECT(&f, "{\"type\":\"hello\"}");
    CHECK(test_app_logged(&f.app, "cannot connect to memtide at"), "the failures were not logged");
    finish(&f);
}

static void stop_sends_bye_and_closes(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    CHECK(mtb_agent_stop(f.agent) == 0, "stop failed");
    f.agent = NULL;
    EXPECT(&f, "{\"type\":\"bye\",\"reason\":\"the application stopped its agent\"}");
    CHECK(player_expect_closed(&f.p, f.why, sizeof f.why), "%s", f.why);
    finish(&f);
}

static void stop_cuts_a_long_reconnect_wait_short(void)
{
    fixture f;
    char path[400];
    bool ok = prepare(&f);
    snprintf(path, sizeof path, "%s/nobody.sock", f.p.dir);
    mtb_config config = test_app_config(&f.app, path);
    config.reconnect_min_ms = config.reconnect_max_ms = 30000;
    ok = ok && start(&f, &config);
    CHECK(ok, "%s", f.why);
    sleep_ms(50);
    long long before = now_ms();
    CHECK(mtb_agent_stop(f.agent) == 0, "stop failed");
    f.agent = NULL;
    CHECK(now_ms() - before < 5000, "stop waited out the 30 s reconnect wait");
    finish(&f);
}

static void stop_of_no_agent_does_nothing(void)
{
    CHECK(mtb_agent_stop(NULL) == 0, "stopping NULL failed");
}

static void sends_stats_at_once_and_every_interval(void)
{
    fixture f;
    bool ok = prepare(&f);
    f.app.stats = (mtb_stats){.used_bytes = MIB(100), .hits = 10, .misses = 2, .evictions = 1,
                              .dirty_bytes = MIB(1)};
    mtb_config config = test_app_config(&f.app, f.p.path);
    ok = ok && start(&f, &config) && player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    ok = ok && player_expect_json(&f.p, "{\"type\":\"hello\"}", f.why, sizeof f.why);
    CHECK(ok, "%s", f.why);
    SEND(&f, WELCOME(50));
    for (int i = 0; ok && i < 4; i++) {
        jt *msg = player_next(&f.p, 1000, f.why, sizeof f.why);
        REQUIRE(msg != NULL, "stats %d: %s", i, f.why);
        const char *stats = "{\"type\":\"stats\",\"pool_bytes\":536870912,\"used_bytes\":104857600,"
                            "\"hits\":10,\"misses\":2,\"evictions\":1,\"dirty_bytes\":1048576}";
        jt *want = jt_parse(stats, strlen(stats), f.why, sizeof f.why);
        CHECK(want != NULL && jt_equal(msg, want), "line %d is not the stats", i);
        jt_free(msg);
        jt_free(want);
    }
    finish(&f);
}

static void stats_are_cut_to_the_pool_and_counters_never_fall(void)
{
    fixture f;
    bool ok = prepare(&f);
    f.app.stats = (mtb_stats){.used_bytes = MIB(2048), .hits = 100, .dirty_bytes = MIB(4096)};
    mtb_config config = test_app_config(&f.app, f.p.path);
    ok = ok && start(&f, &config) && player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    ok = ok && player_expect_json(&f.p, "{\"type\":\"hello\"}", f.why, sizeof f.why);
    CHECK(ok, "%s", f.why);
    SEND(&f, WELCOME(50));
    EXPECT(&f, "{\"type\":\"stats\",\"used_bytes\":536870912,\"dirty_bytes\":536870912,\"hits\":100}");
    pthread_mutex_lock(&f.app.lock);
    f.app.stats.hits = 40;
    pthread_mutex_unlock(&f.app.lock);
    EXPECT(&f, "{\"type\":\"stats\"}"); /* possibly read before the change */
    EXPECT(&f, "{\"type\":\"stats\",\"hits\":100}");
    finish(&f);
}

static void answers_working_progress_while_a_slow_resize_runs(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.slow_ms = 1500;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"working\",\"pool_bytes\":536870912}");
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\",\"pool_bytes\":268435456}");
    finish(&f);
}

static void a_newer_target_cancels_the_running_one(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.slow_ms = 4000;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    long long until = now_ms() + PLAYER_WAIT_MS;
    while (test_app_count(&f.app, &f.app.shrinks) == 0 && now_ms() < until)
        sleep_ms(5);
    pthread_mutex_lock(&f.app.lock);
    f.app.slow_ms = 0;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(2, 134217728));
    /* Nothing is said about seq 1: the next line that is not skipped answers seq 2. */
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":2,\"status\":\"done\",\"pool_bytes\":134217728}");
    CHECK(test_app_count(&f.app, &f.app.cancelled) == 1, "the first resize was not cancelled");
    CHECK(test_app_count(&f.app, &f.app.shrinks) == 2, "%u shrinks", f.app.shrinks);
    CHECK(test_app_pool(&f.app) == MIB(128), "the pool is not at the second target");
    finish(&f);
}

static void a_target_at_the_pool_size_is_done_without_a_callback(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, TARGET(1, 536870912));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\",\"pool_bytes\":536870912}");
    CHECK(test_app_count(&f.app, &f.app.shrinks) + test_app_count(&f.app, &f.app.grows) == 0,
          "a callback was made");
    finish(&f);
}

static void a_refusal_sends_its_reason(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.refuse = true;
    f.app.reason = "pages pinned by running queries";
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"failed\",\"pool_bytes\":536870912,"
               "\"reason\":\"pages pinned by running queries\"}");
    finish(&f);
}

static void a_refusal_without_a_reason_says_which_callback_failed(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.refuse = true;
    f.app.reason = NULL;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 1073741824));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"failed\","
               "\"reason\":\"the application's grow callback failed\"}");
    finish(&f);
}

static void a_failed_resize_keeps_the_size_it_reached(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.fail_at = MIB(400);
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"failed\",\"pool_bytes\":419430400,"
               "\"reason\":\"stopped at 419430400 bytes\"}");
    player_drop(&f.p);
    CHECK(player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why), "%s", f.why);
    EXPECT(&f, "{\"type\":\"hello\",\"pool_bytes\":419430400}");
    finish(&f);
}

static void a_long_reason_is_cut_to_1024_bytes(void)
{
    fixture f;
    static char reason[2001];
    memset(reason, 'r', 2000);
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.refuse = true;
    f.app.reason = reason;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    jt *msg = player_next(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    const char *got = jt_string(msg, "reason");
    CHECK(got != NULL && strlen(got) == 1024 && strspn(got, "r") == 1024,
          "the reason is not 1024 bytes of it");
    jt_free(msg);
    finish(&f);
}

static void hello_after_a_reconnect_gives_the_resized_pool(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, TARGET(1, 805306368));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    player_drop(&f.p);
    CHECK(player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why), "%s", f.why);
    EXPECT(&f, "{\"type\":\"hello\",\"pool_bytes\":805306368}");
    finish(&f);
}

static void a_target_before_the_welcome_is_not_registered(void)
{
    fixture f;
    CHECK(connect_agent(&f), "%s", f.why);
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"not_registered\",\"fatal\":false}");
    SEND(&f, WELCOME(60000));
    EXPECT(&f, "{\"type\":\"stats\"}");
    finish(&f);
}

static void a_target_whose_seq_does_not_grow_is_a_bad_field(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, TARGET(5, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":5,\"status\":\"done\"}");
    SEND(&f, TARGET(5, 134217728));
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"bad_field\",\"fatal\":false,"
               "\"message\":\"target.seq = 5 is not above the last target's 5\"}");
    finish(&f);
}

static void a_target_off_the_granule_names_the_granule(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, TARGET(1, 268435457));
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"bad_field\",\"message\":"
               "\"target.pool_bytes = 268435457 is not a multiple of granule_bytes = 1048576\"}");
    CHECK(test_app_count(&f.app, &f.app.shrinks) + test_app_count(&f.app, &f.app.grows) == 0,
          "a callback was made");
    finish(&f);
}

static void a_second_welcome_is_already_registered(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, WELCOME(60000));
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"already_registered\",\"fatal\":false}");
    finish(&f);
}

static void a_welcome_with_a_bad_field_is_answered_and_another_awaited(void)
{
    fixture f;
    CHECK(connect_agent(&f), "%s", f.why);
    SEND(&f, "{\"type\":\"welcome\",\"version\":1,\"tenant\":\"\",\"stats_interval_ms\":1000,"
             "\"dead_after_ms\":5000}");
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"bad_field\",\"fatal\":false,"
               "\"message\":\"welcome.tenant is empty\"}");
    SEND(&f, WELCOME(60000));
    EXPECT(&f, "{\"type\":\"stats\"}");
    finish(&f);
}

static void a_non_fatal_error_from_memtide_keeps_the_session(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    SEND(&f, "{\"type\":\"error\",\"code\":\"unknown_seq\",\"message\":\"no seq 9\",\"fatal\":false}");
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    CHECK(test_app_logged(&f.app, "memtide reported unknown_seq: \"no seq 9\""),
          "the error was not logged");
    finish(&f);
}

static void a_line_over_65536_bytes_is_too_long_and_the_session_goes_on(void)
{
    fixture f;
    static char line[70001];
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    memset(line, 'x', 70000);
    line[70000] = '\n';
    CHECK(player_send_raw(&f.p, line, sizeof line), "could not send the long line");
    EXPECT(&f, "{\"type\":\"error\",\"code\":\"too_long\",\"fatal\":false}");
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    finish(&f);
}

static void a_line_of_exactly_65536_bytes_is_read(void)
{
    fixture f;
    static char line[65536];
    const char *head = "{\"type\":\"target\",\"seq\":1,\"pool_bytes\":268435456,"
                       "\"deadline_ms\":30000,\"pad\":\"";
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    memset(line, 'p', sizeof line);
    memcpy(line, head, strlen(head));
    memcpy(line + sizeof line - 4, "\"}\r\n", 4);
    CHECK(player_send_raw(&f.p, line, sizeof line), "could not send the line");
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    finish(&f);
}

static void a_line_split_across_reads_is_read_whole(void)
{
    fixture f;
    const char *line = TARGET(1, 268435456) "\n";
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    CHECK(player_send_raw(&f.p, line, 20), "could not send");
    sleep_ms(50);
    CHECK(player_send_raw(&f.p, line + 20, strlen(line) - 20), "could not send");
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    finish(&f);
}

static void finds_the_socket_in_the_environment(void)
{
    fixture f;
    bool ok = prepare(&f);
    mtb_config config = test_app_config(&f.app, NULL);
    setenv(MTB_SOCKET_ENV, f.p.path, 1);
    ok = ok && start(&f, &config);
    unsetenv(MTB_SOCKET_ENV);
    ok = ok && player_accept(&f.p, PLAYER_WAIT_MS, f.why, sizeof f.why);
    CHECK(ok, "%s", f.why);
    if (ok)
        EXPECT(&f, "{\"type\":\"hello\"}");
    finish(&f);
}

static void start_refuses(test_app *app, void (*spoil)(mtb_config *), const char *message)
{
    mtb_config config = test_app_config(app, "/tmp/unused.sock");
    mtb_agent *agent = NULL;
    mtb_error error = {{0}};
    spoil(&config);
    errno = 0;
    CHECK(mtb_agent_start(&config, &agent, &error) < 0 && errno == EINVAL && agent == NULL,
          "started, or failed without EINVAL, for \"%s\"", message);
    CHECK(strcmp(error.message, message) == 0, "said \"%s\", not \"%s\"", error.message,
          message);
    mtb_agent_stop(agent);
}

static void no_shrink(mtb_config *c) { c->callbacks.shrink = NULL; }
static void no_stats(mtb_config *c) { c->callbacks.stats = NULL; }
static void min_above_max(mtb_config *c) { c->pool.min_bytes = MIB(2048); }
static void granule_zero(mtb_config *c) { c->pool.granule_bytes = 0; }
static void empty_app(mtb_config *c) { c->pool.app = ""; }
static void past_2_53(mtb_config *c) { c->pool.max_bytes = UINT64_C(1) << 53; }
static void long_path(mtb_config *c)
{
    static char path[200];
    memset(path, 'p', sizeof path - 1);
    c->socket_path = path;
}
static void reconnect_backwards(mtb_config *c) { c->reconnect_min_ms = 500; c->reconnect_max_ms = 100; }

static void start_refuses_a_bad_config_naming_the_field(void)
{
    test_app app;
    test_app_init(&app);
    start_refuses(&app, no_shrink, "callbacks.shrink is NULL");
    start_refuses(&app, no_stats, "callbacks.stats is NULL");
    start_refuses(&app, min_above_max, "pool.min_bytes = 2147483648 is above max_bytes = 1073741824");
    start_refuses(&app, granule_zero, "pool.granule_bytes = 0 is below 1");
    start_refuses(&app, empty_app, "pool.app is empty");
    start_refuses(&app, past_2_53, "pool.max_bytes = 9007199254740992 is above 2^53 - 1");
    char too_long[256];
    snprintf(too_long, sizeof too_long, "socket path %.199s is 199 bytes, over 107",
             "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
             "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
             "pppppppppppppppppppppppppppppppp");
    start_refuses(&app, long_path, too_long);
    start_refuses(&app, reconnect_backwards, "reconnect_min_ms = 500 is above reconnect_max_ms = 100");
    CHECK(mtb_agent_start(NULL, NULL, NULL) < 0 && errno == EINVAL, "NULL config accepted");
    test_app_destroy(&app);
}

static void stop_from_a_callback_fails_with_edeadlk(void)
{
    fixture f;
    CHECK(register_agent(&f, WELCOME(60000)), "%s", f.why);
    pthread_mutex_lock(&f.app.lock);
    f.app.agent = f.agent;
    f.app.stop_in_callback = true;
    pthread_mutex_unlock(&f.app.lock);
    SEND(&f, TARGET(1, 268435456));
    EXPECT(&f, "{\"type\":\"progress\",\"seq\":1,\"status\":\"done\"}");
    pthread_mutex_lock(&f.app.lock);
    int stop_errno = f.app.stop_errno;
    pthread_mutex_unlock(&f.app.lock);
    CHECK(stop_errno == EDEADLK, "stop from a callback gave errno %d", stop_errno);
    finish(&f);
}

void agent_tests(void)
{
    RUN(says_hello_with_its_pid_and_pool);
    RUN(reconnects_and_says_hello_again_after_the_connection_drops);
    RUN(reconnects_after_memtide_says_bye);
    RUN(reconnects_after_a_fatal_error);
    RUN(keeps_trying_until_memtide_listens);
    RUN(stop_sends_bye_and_closes);
    RUN(stop_cuts_a_long_reconnect_wait_short);
    RUN(stop_of_no_agent_does_nothing);
    RUN(sends_stats_at_once_and_every_interval);
    RUN(stats_are_cut_to_the_pool_and_counters_never_fall);
    RUN(answers_working_progress_while_a_slow_resize_runs);
    RUN(a_newer_target_cancels_the_running_one);
    RUN(a_target_at_the_pool_size_is_done_without_a_callback);
    RUN(a_refusal_sends_its_reason);
    RUN(a_refusal_without_a_reason_says_which_callback_failed);
    RUN(a_failed_resize_keeps_the_size_it_reached);
    RUN(a_long_reason_is_cut_to_1024_bytes);
    RUN(hello_after_a_reconnect_gives_the_resized_pool);
    RUN(a_target_before_the_welcome_is_not_registered);
    RUN(a_target_whose_seq_does_not_grow_is_a_bad_field);
    RUN(a_target_off_the_granule_names_the_granule);
    RUN(a_second_welcome_is_already_registered);
    RUN(a_welcome_with_a_bad_field_is_answered_and_another_awaited);
    RUN(a_non_fatal_error_from_memtide_keeps_the_session);
    RUN(a_line_over_65536_bytes_is_too_long_and_the_session_goes_on);
    RUN(a_line_of_exactly_65536_bytes_is_read);
    RUN(a_line_split_across_reads_is_read_whole);
    RUN(finds_the_socket_in_the_environment);
    RUN(start_refuses_a_bad_config_naming_the_field);
    RUN(stop_from_a_callback_fails_with_edeadlk);
}
