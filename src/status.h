/* SPDX-License-Identifier: MIT */
/* The calling thread's last status and its detail. */
#ifndef CG_STATUS_H
#define CG_STATUS_H
#include "convgrad.h"

/* Longest detail kept, terminator included; longer ones are cut. */
enum { CG_DETAIL_MAX = 256 };

/* The sentence that explains an error ("x is NULL"), carried from where the
 * problem is found to the entry point that records it. Filled only when
 * something fails, so a call that succeeds formats nothing. */
typedef struct cg_error {
    char detail[CG_DETAIL_MAX];
} cg_error;

/* Fills err (when not NULL) with a printf-style detail; returns s. Helpers
 * that record nothing pass err NULL and pay for no formatting. */
cg_status cg_fail(cg_error *err, cg_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* CG_ERR_NULL_POINTER naming the first of ptrs[0..n) that is NULL ("x is
 * NULL"), or CG_OK. A NULL name skips that pointer (an argument the
 * operation does not take). */
cg_status cg_require(const void *const *ptrs, const char *const *names, int n, cg_error *err);

/* Records s as the calling thread's last status, with err's detail (filled
 * by cg_fail) when s is an error, "" when it is CG_OK; returns s. */
cg_status cg_record(cg_status s, const cg_error *err);

/* Public symbols are the only ones exported from the shared library. */
#define CG_API __attribute__((visibility("default")))
#endif
