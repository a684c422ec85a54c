/* SPDX-License-Identifier: MIT */
/* CONVGRAD_TRACE=FILE: what every emulated core did in each launch, as
 * Chrome trace-event JSON (complete events, one track a core), which
 * Perfetto and chrome://tracing open. Off unless the variable is set when
 * the first launch starts; off, every hook is one predictable branch. */
#ifndef CG_TRACE_H
#define CG_TRACE_H
#include <stdint.h>

#include "convgrad.h"

extern int cg_trace_on; /* set once, before the first launch */

/* Where a region started: wall and thread CPU time (ns); zeros when off. */
typedef struct cg_trace_mark {
    int64_t wall, cpu;
} cg_trace_mark;

/* Reads CONVGRAD_TRACE and opens the file (once, before the first launch). */
void cg_trace_init(void);

cg_trace_mark cg_trace_start_now(void);
void cg_trace_region_at(cg_phase phase, cg_phase inner, cg_trace_mark from);
void cg_trace_inner_add(int64_t ns);
int64_t cg_trace_wall_ns(void);

static inline cg_trace_mark cg_trace_start(void)
{
    if (__builtin_expect(cg_trace_on, 0))
        return cg_trace_start_now();
    return (cg_trace_mark){0, 0};
}

/* The calling core's region [from, now), shown as `phase`; the time added
 * with cg_trace_inner() since `from` (packing interleaved with the sums, or
 * the finish interleaved with a reduction) is shown first, as `inner`. */
static inline void cg_trace_region(cg_phase phase, cg_phase inner, cg_trace_mark from)
{
    if (__builtin_expect(cg_trace_on, 0))
        cg_trace_region_at(phase, inner, from);
}

/* Time of an inner step: start with cg_trace_inner_start(), end with
 * cg_trace_inner_end(). */
static inline int64_t cg_trace_inner_start(void)
{
    return __builtin_expect(cg_trace_on, 0) ? cg_trace_wall_ns() : 0;
}

static inline void cg_trace_inner_end(int64_t start)
{
    if (__builtin_expect(cg_trace_on, 0))
        cg_trace_inner_add(cg_trace_wall_ns() - start);
}

/* A barrier event of the calling core from `since` (a wall time, ns) to
 * now: how long a launch took to reach it. */
void cg_trace_waited_since_at(int64_t since);
static inline void cg_trace_waited_since(int64_t since)
{
    if (__builtin_expect(cg_trace_on, 0))
        cg_trace_waited_since_at(since);
}

/* The calling core's label for this launch's events: the operation and
 * its shape (printf style). */
void cg_trace_label(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The launcher: before handing core_mask its launch, clears the cores'
 * events; once every core has returned, appends them to the file (they
 * stay, for cg_trace_last_launch, until the cores' next launch). */
void cg_trace_begin(uint32_t core_mask);
void cg_trace_flush(uint32_t core_mask);
#endif
