/*
 * run_tests.c: the test program's main and runner (see check.h). Usage:
 *   run_tests VECTORS_DIR [NAME_PART]   (NAME_PART: run only the cases whose name holds it)
 */
#include "check.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *vectors_dir;

static const char *only;
static int passed, failed, case_failures;

void check_failed(const char *file, int line, const char *format, ...)
{
    va_list args;
    printf("    %s:%d: ", file, line);
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    putchar('\n');
    case_failures++;
}

static bool wanted(const char *name)
{
    if (only != NULL && strstr(name, only) == NULL)
        return false;
    case_failures = 0;
    fflush(stdout);
    return true;
}

static void report(const char *name)
{
    if (case_failures == 0) {
        passed++;
        printf("ok   %s\n", name);
    } else {
        failed++;
        printf("FAIL %s\n", name);
    }
    fflush(stdout);
}

void run_case(const char *name, void (*run)(void))
{
    if (wanted(name)) {
        run();
        report(name);
    }
}

void run_case_with(const char *name, void (*run)(const void *arg), const void *arg)
{
    if (wanted(name)) {
        run(arg);
        report(name);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s VECTORS_DIR [NAME_PART]\n", argv[0]);
        return 2;
    }
    vectors_dir = argv[1];
    only = argc == 3 ? argv[2] : NULL;
    json_tests();
    backoff_tests();
    message_vector_tests();
    exchange_vector_tests();
    agent_tests();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
