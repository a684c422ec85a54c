/* SPDX-License-Identifier: MIT */
/* The in-process runner behind criterion/criterion.h (see there for why). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "criterion/criterion.h"

enum { MAX_TESTS = 1024 };
enum outcome { PASSED, FAILED, SKIPPED };

typedef struct test {
    const char *suite, *name;
    void (*fn)(void);
} test;

static test tests[MAX_TESTS];
static int test_count;
static pthread_t runner_thread;
static jmp_buf test_exit;
static int failures_in_test; /* written from any thread: guarded below */
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

void cg_test_register(const char *suite, const char *name, void (*fn)(void))
{
    if (test_count == MAX_TESTS) {
        fprintf(stderr, "in-process runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[test_count++] = (test){suite, name, fn};
}

static void print_message(const char *fmt, va_list ap)
{
    if (fmt && *fmt) {
        fputs("    ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
}

void cg_test_check(bool ok, bool fatal, const char *file, int line, const char *expr,
                   const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[FAIL] %s:%d: %s\n", file, line, expr);
    print_message(fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&failures_lock);
    failures_in_test++;
    pthread_mutex_unlock(&failures_lock);
    if (fatal && pthread_equal(pthread_self(), runner_thread))
        longjmp(test_exit, FAILED);
}

void cg_test_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[SKIP] ");
    print_message(fmt, ap);
    va_end(ap);
    longjmp(test_exit, SKIPPED);
}

void cg_test_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_message(fmt, ap);
    va_end(ap);
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static enum outcome run_one(const test *t)
{
    pthread_mutex_lock(&failures_lock);
    failures_in_test = 0;
    pthread_mutex_unlock(&failures_lock);
    volatile int jumped = setjmp(test_exit);
    if (jumped == 0)
        t->fn();
    if (jumped == SKIPPED)
        return SKIPPED;
    pthread_mutex_lock(&failures_lock);
    int failures = failures_in_test;
    pthread_mutex_unlock(&failures_lock);
    return failures ? FAILED : PASSED;
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* Criterion's options (--jobs ...) do not apply here */
    runner_thread = pthread_self();
    int counts[3] = {0, 0, 0};
    static const char *labels[3] = {"PASS", "FAIL", "SKIP"};
    for (int i = 0; i < test_count; i++) {
        double t0 = seconds_now();
        enum outcome o = run_one(&tests[i]);
        counts[o]++;
        fprintf(stderr, "[%s] %s::%s (%.2fs)\n", labels[o], tests[i].suite, tests[i].name,
                seconds_now() - t0);
    }
    printf("%d passed, %d failed, %d skipped\n", counts[PASSED], counts[FAILED], counts[SKIPPED]);
    return counts[FAILED] ? 1 : 0;
}
