/* SPDX-License-Identifier: MIT */
/* The calling thread's last status and its detail. */
#ifndef CG_STATUS_H
#define CG_STATUS_H
#include "convgrad.h"

/* Longest detail kept, terminator included; longer ones are cut. */
enum { CG_DETAIL_MAX = 256 };

/* A status with the sentence that explains it ("x is NULL"), carried from
 * where a problem is found to the entry point that records it. */
typedef struct cg_error {
    cg_status status;
    char detail[CG_DETAIL_MAX];
} cg_error;

/* Fills *err (when not NULL) with s and a printf-style detail; returns s. */
cg_status cg_fail(cg_error *err, cg_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records s as the calling thread's last status, with no detail beyond the
 * status's own message, and returns it. */
cg_status cg_record_status(cg_status s);
/* Records err (status and detail) as the calling thread's last; returns its
 * status. A CG_OK error clears the detail. */
cg_status cg_record_error(const cg_error *err);

/* Public symbols are the only ones exported from the shared library. */
#define CG_API __attribute__((visibility("default")))
#endif
