/* SPDX-License-Identifier: MIT */
/* Fault injection control: see fault.h. Built only into the test copy of the
 * library (CONVGRAD_FAULT_INJECTION). */
#include "fault.h"

#include <stdatomic.h>
#include <stddef.h>

#ifndef CONVGRAD_FAULT_INJECTION
#error "fault.c belongs to the fault-injection test build only"
#endif

typedef struct fault_state {
    atomic_long calls;    /* since arming */
    atomic_long failures; /* since arming */
    atomic_long nth;      /* first failing call (1-based); <= 0: disarmed */
    atomic_long times;    /* failing calls from nth on; < 0: all */
} fault_state;

static fault_state g_fault[CG_FAULT_POINTS];

static fault_state *state(cg_fault_point p)
{
    return (unsigned)p < CG_FAULT_POINTS ? &g_fault[p] : NULL;
}

int cg_fault_should_fail(cg_fault_point p)
{
    fault_state *f = state(p);
    if (f == NULL)
        return 0;
    long n = atomic_fetch_add(&f->calls, 1) + 1;
    long nth = atomic_load(&f->nth), times = atomic_load(&f->times);
    if (nth <= 0 || n < nth || (times >= 0 && n - nth >= times))
        return 0;
    atomic_fetch_add(&f->failures, 1);
    return 1;
}

void cg_fault_arm(cg_fault_point p, long nth, long times)
{
    fault_state *f = state(p);
    if (f == NULL)
        return;
    atomic_store(&f->nth, 0); /* disarmed while the counts restart */
    atomic_store(&f->calls, 0);
    atomic_store(&f->failures, 0);
    atomic_store(&f->times, times);
    atomic_store(&f->nth, nth);
}

void cg_fault_disarm_all(void)
{
    for (int p = 0; p < CG_FAULT_POINTS; p++)
        cg_fault_arm((cg_fault_point)p, 0, 0);
}

long cg_fault_calls(cg_fault_point p)
{
    fault_state *f = state(p);
    return f ? atomic_load(&f->calls) : 0;
}

long cg_fault_failures(cg_fault_point p)
{
    fault_state *f = state(p);
    return f ? atomic_load(&f->failures) : 0;
}
