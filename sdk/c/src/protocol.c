/*
 * protocol.c: decoding the lines memtide sends an agent and encoding the lines an agent
 * sends, with every rule of docs/balloon-protocol.md, version 1: integers in [0, 2^53 - 1]
 * written without fraction or exponent, strings within their lengths, unknown fields
 * ignored, unknown types refused.
 */
#include "protocol.h"

#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const code_names[] = {
    [MTB_CODE_MALFORMED] = "malformed",
    [MTB_CODE_TOO_LONG] = "too_long",
    [MTB_CODE_UNKNOWN_TYPE] = "unknown_type",
    [MTB_CODE_BAD_FIELD] = "bad_field",
    [MTB_CODE_VERSION] = "version",
    [MTB_CODE_NOT_REGISTERED] = "not_registered",
    [MTB_CODE_ALREADY_REGISTERED] = "already_registered",
    [MTB_CODE_IDENTITY] = "identity",
    [MTB_CODE_BUSY] = "busy",
    [MTB_CODE_UNKNOWN_SEQ] = "unknown_seq",
    [MTB_CODE_VIOLATIONS] = "violations",
    [MTB_CODE_DEAD] = "dead",
    [MTB_CODE_DEADLINE] = "deadline",
    [MTB_CODE_DISHONEST] = "dishonest",
};

#define CODE_COUNT (sizeof code_names / sizeof code_names[0])

const char *mtb_code_name(mtb_code code)
{
    return (size_t)code < CODE_COUNT ? code_names[code] : "unknown";
}

int mtb_code_parse(const char *s, size_t n, mtb_code *code)
{
    for (size_t i = 0; i < CODE_COUNT; i++) {
        if (strlen(code_names[i]) == n && memcmp(code_names[i], s, n) == 0) {
            *code = (mtb_code)i;
            return 0;
        }
    }
    return -1;
}

bool mtb_code_always_fatal(mtb_code code)
{
    switch (code) {
    case MTB_CODE_IDENTITY:
    case MTB_CODE_BUSY:
    case MTB_CODE_VERSION:
    case MTB_CODE_DEAD:
    case MTB_CODE_DEADLINE:
    case MTB_CODE_DISHONEST:
    case MTB_CODE_VIOLATIONS:
        return true;
    default:
        return false;
    }
}

static const char *const kind_names[] = {
    [MTB_KIND_BUFFER_POOL] = "buffer_pool",
    [MTB_KIND_HEAP] = "heap",
    [MTB_KIND_CACHE] = "cache",
    [MTB_KIND_OTHER] = "other",
};

const char *mtb_kind_name(mtb_kind kind)
{
    return (size_t)kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[kind] : NULL;
}

int mtb_kind_parse(const char *name, mtb_kind *kind)
{
    for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++) {
        if (name != NULL && strcmp(name, kind_names[i]) == 0) {
            *kind = (mtb_kind)i;
            return 0;
        }
    }
    errno = EINVAL;
    return -1;
}

/* ---- decoding ---- */

enum key {
    K_TYPE,
    K_VERSION,
    K_TENANT,
    K_STATS_INTERVAL_MS,
    K_DEAD_AFTER_MS,
    K_SEQ,
    K_POOL_BYTES,
    K_DEADLINE_MS,
    K_REASON,
    K_CODE,
    K_MESSAGE,
    K_FATAL,
    K_COUNT
};

/* Every key of the messages memtide sends. */
static const char *const keys[K_COUNT] = {
    [K_TYPE] = "type",
    [K_VERSION] = "version",
    [K_TENANT] = "tenant",
    [K_STATS_INTERVAL_MS] = "stats_interval_ms",
    [K_DEAD_AFTER_MS] = "dead_after_ms",
    [K_SEQ] = "seq",
    [K_POOL_BYTES] = "pool_bytes",
    [K_DEADLINE_MS] = "deadline_ms",
    [K_REASON] = "reason",
    [K_CODE] = "code",
    [K_MESSAGE] = "message",
    [K_FATAL] = "fatal",
};

/* The line being decoded. */
typedef struct decoding {
    const char *type;
    mtb_json_value values[K_COUNT];
    mtb_decode_error *error;
} decoding;

static int refuse(mtb_decode_error *error, mtb_code code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(mtb_decode_error *error, mtb_code code, const char *format, ...)
{
    va_list args;
    error->code = code;
    va_start(args, format);
    vsnprintf(error->message, sizeof error->message, format, args);
    va_end(args);
    return -1;
}

/* Writes a value as an error message shows it. */
static void show(const mtb_json_value *v, char *out, size_t size)
{
    switch (v->kind) {
    case MTB_JSON_STRING:
        mtb_json_quote(out, size, v->text, v->len, 48);
        break;
    case MTB_JSON_OBJECT:
        snprintf(out, size, "an object");
        break;
    case MTB_JSON_ARRAY:
        snprintf(out, size, "an array");
        break;
    default: /* a number or a literal: ASCII as written */
        if (v->len > 40)
            snprintf(out, size, "%.40s...", v->text);
        else
            snprintf(out, size, "%.*s", (int)v->len, v->text);
        break;
    }
}

/* Reads key k as an integer in [min, MTB_MAX_VALUE]. */
static int get_uint(decoding *d, enum key k, uint64_t min, uint64_t *out)
{
    const mtb_json_value *v = &d->values[k];
    char shown[160];
    if (v->kind == MTB_JSON_ABSENT)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s is missing", d->type, keys[k]);
    show(v, shown, sizeof shown);
    if (v->kind != MTB_JSON_NUMBER || memchr(v->text, '.', v->len) != NULL ||
        memchr(v->text, 'e', v->len) != NULL || memchr(v->text, 'E', v->len) != NULL)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s = %s is not an integer", d->type,
                      keys[k], shown);
    bool negative = v->text[0] == '-';
    uint64_t value = 0;
    for (size_t i = negative ? 1 : 0; i < v->len; i++) {
        value = value * 10 + (uint64_t)(v->text[i] - '0');
        if (value > MTB_MAX_VALUE)
            return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s = %s is above 2^53 - 1", d->type,
                          keys[k], shown);
    }
    if (negative && value != 0)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s = %s is negative", d->type, keys[k],
                      shown);
    if (value < min)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s = %s is below %" PRIu64, d->type,
                      keys[k], shown, min);
    *out = value;
    return 0;
}

/* Reads key k as a string of at most max_bytes; *present says whether it was there, and
 * with present NULL the key is required. */
static int get_string(decoding *d, enum key k, size_t max_bytes, mtb_text *out, bool *present)
{
    const mtb_json_value *v = &d->values[k];
    char shown[160];
    if (v->kind == MTB_JSON_ABSENT) {
        if (present == NULL)
            return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s is missing", d->type, keys[k]);
        *present = false;
        return 0;
    }
    show(v, shown, sizeof shown);
    if (v->kind != MTB_JSON_STRING)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s = %s is not a string", d->type,
                      keys[k], shown);
    if (v->len > max_bytes)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "%s.%s is %zu bytes, over %zu", d->type,
                      keys[k], v->len, max_bytes);
    if (present != NULL)
        *present = true;
    out->ptr = v->text;
    out->len = v->len;
    return 0;
}

static int decode_welcome(decoding *d, mtb_welcome *welcome)
{
    uint64_t version;
    if (get_uint(d, K_VERSION, 0, &version) < 0)
        return -1;
    if (version != MTB_PROTOCOL_VERSION)
        return refuse(d->error, MTB_CODE_VERSION,
                      "welcome.version = %" PRIu64 ": this agent speaks version %d", version,
                      MTB_PROTOCOL_VERSION);
    if (get_string(d, K_TENANT, SIZE_MAX, &welcome->tenant, NULL) < 0)
        return -1;
    if (welcome->tenant.len == 0)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "welcome.tenant is empty");
    if (get_uint(d, K_STATS_INTERVAL_MS, 1, &welcome->stats_interval_ms) < 0 ||
        get_uint(d, K_DEAD_AFTER_MS, 1, &welcome->dead_after_ms) < 0)
        return -1;
    if (welcome->dead_after_ms < welcome->stats_interval_ms)
        return refuse(d->error, MTB_CODE_BAD_FIELD,
                      "welcome.dead_after_ms = %" PRIu64 " is below stats_interval_ms = %" PRIu64,
                      welcome->dead_after_ms, welcome->stats_interval_ms);
    return 0;
}

static int decode_target(decoding *d, mtb_target *target)
{
    if (get_uint(d, K_SEQ, 1, &target->seq) < 0 ||
        get_uint(d, K_POOL_BYTES, 0, &target->pool_bytes) < 0 ||
        get_uint(d, K_DEADLINE_MS, 1, &target->deadline_ms) < 0)
        return -1;
    return 0;
}

static int decode_bye(decoding *d, mtb_bye *bye)
{
    return get_string(d, K_REASON, MTB_REASON_MAX, &bye->reason, &bye->has_reason);
}

static int decode_error(decoding *d, mtb_error_message *error)
{
    mtb_text code;
    char shown[160];
    if (get_string(d, K_CODE, SIZE_MAX, &code, NULL) < 0)
        return -1;
    if (mtb_code_parse(code.ptr, code.len, &error->code) < 0) {
        show(&d->values[K_CODE], shown, sizeof shown);
        return refuse(d->error, MTB_CODE_BAD_FIELD, "error.code = %s names no error code",
                      shown);
    }
    if (get_string(d, K_MESSAGE, SIZE_MAX, &error->message, NULL) < 0)
        return -1;
    const mtb_json_value *fatal = &d->values[K_FATAL];
    if (fatal->kind == MTB_JSON_ABSENT)
        return refuse(d->error, MTB_CODE_BAD_FIELD, "error.fatal is missing");
    if (fatal->kind != MTB_JSON_BOOL) {
        show(fatal, shown, sizeof shown);
        return refuse(d->error, MTB_CODE_BAD_FIELD, "error.fatal = %s is not true or false",
                      shown);
    }
    error->fatal = fatal->boolean;
    return 0;
}

int mtb_decode(char *line, size_t len, mtb_incoming *msg, mtb_decode_error *error)
{
    static const struct {
        const char *name;
        mtb_incoming_type type;
    } types[] = {{"welcome", MTB_IN_WELCOME},
                 {"target", MTB_IN_TARGET},
                 {"bye", MTB_IN_BYE},
                 {"error", MTB_IN_ERROR}};
    decoding d = {.error = error};
    char shown[160];

    if (len + 1 > MTB_LINE_MAX)
        return refuse(error, MTB_CODE_TOO_LONG, "a line of %zu bytes, over %d", len + 1,
                      MTB_LINE_MAX);
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (mtb_json_read_object(line, len, keys, d.values, K_COUNT, error->message,
                             sizeof error->message) < 0) {
        error->code = MTB_CODE_MALFORMED;
        return -1;
    }
    const mtb_json_value *type = &d.values[K_TYPE];
    if (type->kind == MTB_JSON_ABSENT)
        return refuse(error, MTB_CODE_UNKNOWN_TYPE, "the message has no type");
    show(type, shown, sizeof shown);
    if (type->kind != MTB_JSON_STRING)
        return refuse(error, MTB_CODE_UNKNOWN_TYPE, "type = %s is not a string", shown);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strlen(types[i].name) != type->len || memcmp(types[i].name, type->text, type->len))
            continue;
        d.type = types[i].name;
        msg->type = types[i].type;
        switch (msg->type) {
        case MTB_IN_WELCOME:
            return decode_welcome(&d, &msg->as.welcome);
        case MTB_IN_TARGET:
            return decode_target(&d, &msg->as.target);
        case MTB_IN_BYE:
            return decode_bye(&d, &msg->as.bye);
        case MTB_IN_ERROR:
            return decode_error(&d, &msg->as.error);
        }
    }
    return refuse(error, MTB_CODE_UNKNOWN_TYPE, "type = %s names no message memtide sends",
                  shown);
}

/* ---- encoding ---- */

static void put_text(mtb_json_writer *w, const char *key, const char *s, size_t max_bytes)
{
    mtb_json_put_string(w, key, s, strlen(s), max_bytes);
}

size_t mtb_encode_hello(const mtb_hello *hello, char *buf, size_t cap)
{
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    put_text(&w, "type", "hello", SIZE_MAX);
    mtb_json_put_uint(&w, "version", MTB_PROTOCOL_VERSION);
    put_text(&w, "app", hello->app, MTB_APP_MAX);
    put_text(&w, "kind", mtb_kind_name(hello->kind), SIZE_MAX);
    mtb_json_put_uint(&w, "pid", hello->pid);
    mtb_json_put_uint(&w, "pool_bytes", hello->pool_bytes);
    mtb_json_put_uint(&w, "min_bytes", hello->min_bytes);
    mtb_json_put_uint(&w, "max_bytes", hello->max_bytes);
    mtb_json_put_uint(&w, "granule_bytes", hello->granule_bytes);
    return mtb_json_close(&w);
}

size_t mtb_encode_progress(const mtb_progress *progress, char *buf, size_t cap)
{
    static const char *const statuses[] = {
        [MTB_PROGRESS_WORKING] = "working",
        [MTB_PROGRESS_DONE] = "done",
        [MTB_PROGRESS_FAILED] = "failed",
    };
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    put_text(&w, "type", "progress", SIZE_MAX);
    mtb_json_put_uint(&w, "seq", progress->seq);
    mtb_json_put_uint(&w, "pool_bytes", progress->pool_bytes);
    put_text(&w, "status", statuses[progress->status], SIZE_MAX);
    if (progress->reason != NULL)
        put_text(&w, "reason", progress->reason, MTB_REASON_MAX);
    return mtb_json_close(&w);
}

size_t mtb_encode_stats(const mtb_stats_message *stats, char *buf, size_t cap)
{
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    put_text(&w, "type", "stats", SIZE_MAX);
    mtb_json_put_uint(&w, "pool_bytes", stats->pool_bytes);
    mtb_json_put_uint(&w, "used_bytes", stats->stats.used_bytes);
    mtb_json_put_uint(&w, "hits", stats->stats.hits);
    mtb_json_put_uint(&w, "misses", stats->stats.misses);
    mtb_json_put_uint(&w, "evictions", stats->stats.evictions);
    mtb_json_put_uint(&w, "dirty_bytes", stats->stats.dirty_bytes);
    return mtb_json_close(&w);
}

size_t mtb_encode_bye(const char *reason, char *buf, size_t cap)
{
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    put_text(&w, "type", "bye", SIZE_MAX);
    if (reason != NULL)
        put_text(&w, "reason", reason, MTB_REASON_MAX);
    return mtb_json_close(&w);
}

size_t mtb_encode_error(mtb_code code, const char *message, bool fatal, char *buf, size_t cap)
{
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    put_text(&w, "type", "error", SIZE_MAX);
    put_text(&w, "code", mtb_code_name(code), SIZE_MAX);
    put_text(&w, "message", message, SIZE_MAX);
    mtb_json_put_bool(&w, "fatal", fatal);
    return mtb_json_close(&w);
}

/* ---- the pool's facts ---- */

static int why_not(char *why, size_t why_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int why_not(char *why, size_t why_size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(why, why_size, format, args);
    va_end(args);
    return -1;
}

/* True when s holds a control character (C0, DEL or C1); s is valid UTF-8. */
static bool has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F)
            return true;
        if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9F)
            return true;
    }
    return false;
}

int mtb_check_pool(const mtb_pool *pool, char *why, size_t why_size)
{
    char shown[160];
    if (pool->app == NULL || pool->app[0] == '\0')
        return why_not(why, why_size, "pool.app is empty");
    size_t app_len = strlen(pool->app);
    mtb_json_quote(shown, sizeof shown, pool->app, app_len, 48);
    if (app_len > MTB_APP_MAX)
        return why_not(why, why_size, "pool.app = %s is %zu bytes, over %d", shown, app_len,
                       MTB_APP_MAX);
    if (mtb_utf8_valid_prefix(pool->app, app_len) != app_len)
        return why_not(why, why_size, "pool.app = %s is not UTF-8", shown);
    if (has_control(pool->app, app_len))
        return why_not(why, why_size, "pool.app = %s holds a control character", shown);
    if (mtb_kind_name(pool->kind) == NULL)
        return why_not(why, why_size, "pool.kind = %d names no kind", (int)pool->kind);
    const struct {
        const char *name;
        uint64_t value;
    } sizes[] = {{"pool_bytes", pool->pool_bytes},
                 {"min_bytes", pool->min_bytes},
                 {"max_bytes", pool->max_bytes},
                 {"granule_bytes", pool->granule_bytes}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value > MTB_MAX_VALUE)
            return why_not(why, why_size, "pool.%s = %" PRIu64 " is above 2^53 - 1",
                           sizes[i].name, sizes[i].value);
    if (pool->min_bytes > pool->max_bytes)
        return why_not(why, why_size,
                       "pool.min_bytes = %" PRIu64 " is above max_bytes = %" PRIu64,
                       pool->min_bytes, pool->max_bytes);
    if (pool->pool_bytes < pool->min_bytes || pool->pool_bytes > pool->max_bytes)
        return why_not(why, why_size,
                       "pool.pool_bytes = %" PRIu64 " is outside [min_bytes, max_bytes] = [%" PRIu64
                       ", %" PRIu64 "]",
                       pool->pool_bytes, pool->min_bytes, pool->max_bytes);
    if (pool->granule_bytes == 0)
        return why_not(why, why_size, "pool.granule_bytes = 0 is below 1");
    if (pool->max_bytes > 0 && pool->granule_bytes > pool->max_bytes)
        return why_not(why, why_size,
                       "pool.granule_bytes = %" PRIu64 " is above max_bytes = %" PRIu64,
                       pool->granule_bytes, pool->max_bytes);
    return 0;
}
