/*
 * check.h: the tests' small runner: named cases, CHECK (records a failure and goes on) and
 * REQUIRE (records it and ends the case), and the suites run_tests.c calls. The run ends
 * with "N passed, N failed" and exits non-zero when a case failed.
 */
#ifndef CHECK_H
#define CHECK_H

#include <stdbool.h>

/* The directory of protocol/vectors, from the command line. */
extern const char *vectors_dir;

void check_failed(const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...) ((cond) ? (void)0 : check_failed(__FILE__, __LINE__, __VA_ARGS__))
#define REQUIRE(cond, ...)                                                                    \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            check_failed(__FILE__, __LINE__, __VA_ARGS__);                                    \
            return;                                                                           \
        }                                                                                     \
    } while (0)

/* Runs one case, reported as name: run(), or run(arg). */
void run_case(const char *name, void (*run)(void));
void run_case_with(const char *name, void (*run)(const void *arg), const void *arg);

/* A case named after its function. */
#define RUN(fn) run_case(#fn, fn)

/* The suites. */
void json_tests(void);
void backoff_tests(void);
void message_vector_tests(void);
void exchange_vector_tests(void);
void agent_tests(void);

#endif
