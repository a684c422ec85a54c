/* SPDX-License-Identifier: MIT */
/* The subset of Criterion's API the tests use, run in one process.
 *
 * Criterion's runner cannot start under ThreadSanitizer (its boxfort arena
 * maps memory where TSan keeps its shadow: Snaipe/Criterion#274), so the TSan
 * tree compiles the same test files against this header and runs every test
 * in turn in the test executable's own process. Fatal assertions on the test's
 * own thread end the test (longjmp); on any other thread they are recorded and
 * execution goes on, as the test cannot be unwound from there. */
#ifndef CG_INPROCESS_CRITERION_H
#define CG_INPROCESS_CRITERION_H

#include <stdbool.h>
#include <stddef.h>

/* Criterion's per-test options, accepted and ignored (ctest's TIMEOUT applies). */
struct cg_test_options {
    double timeout;
    const char *description;
    bool disabled;
};

void cg_test_register(const char *suite, const char *name, void (*fn)(void));
void cg_test_check(bool ok, bool fatal, const char *file, int line, const char *expr,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void cg_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cg_test_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(suite, name, ...)                                                                     \
    static void suite##_##name##_body(void);                                                       \
    __attribute__((constructor)) static void suite##_##name##_register(void)                      \
    {                                                                                              \
        (void)(struct cg_test_options){__VA_ARGS__};                                         \
        cg_test_register(#suite, #name, suite##_##name##_body);                                    \
    }                                                                                              \
    static void suite##_##name##_body(void)

#define CG_CHECK_(fatal, cond, expr, ...)                                                          \
    cg_test_check((cond) ? true : false, fatal, __FILE__, __LINE__, expr, "" __VA_ARGS__)

#define cr_assert(cond, ...) CG_CHECK_(true, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) CG_CHECK_(false, cond, #cond, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CG_CHECK_(true, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CG_CHECK_(false, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CG_CHECK_(true, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) CG_CHECK_(false, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CG_CHECK_(true, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CG_CHECK_(false, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CG_CHECK_(true, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CG_CHECK_(true, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CG_CHECK_(true, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) CG_CHECK_(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CG_CHECK_(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_fail(...) CG_CHECK_(true, false, "failure", __VA_ARGS__)
#define cr_skip_test(...) cg_test_skip("" __VA_ARGS__)
#define cr_log_info(...) cg_test_log(__VA_ARGS__)
#define cr_log_warn(...) cg_test_log(__VA_ARGS__)

#endif
