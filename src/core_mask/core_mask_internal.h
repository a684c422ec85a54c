/* SPDX-License-Identifier: MIT */
/* What the operator needs from the emulated-core runtime beyond the public
 * vendor names. Knows nothing of convolutions. */
#ifndef CG_CORE_MASK_INTERNAL_H
#define CG_CORE_MASK_INTERNAL_H
#include <stddef.h>
#include "convgrad.h"
#include "status.h"

/* core_mask_launch, with err saying what failed instead of recording it:
 * for the library's own launches (host mode), whose entry point records. */
cg_status cm_run(int core_mask, void (*entry)(void *arg), void *arg, cg_error *err);

/* cm_run for the library's own launches: a calling thread that is no
 * emulated core runs the lowest core's share itself, as that core, while the
 * others run on their threads. It would only wait otherwise, and on a small
 * guest each wake-up of a sleeping thread, the core's at the start and the
 * caller's at the end, cost 30-100 us (an empty launch on 2 cores: 70-100 us
 * on its own threads, 0.2-0.4 us joined). core_mask_launch keeps every core
 * on its own thread, as code written for the chip expects. */
cg_status cm_run_here(int core_mask, void (*entry)(void *arg), void *arg, cg_error *err);

/* Mask of the launch the calling thread runs in as an emulated core; 0 outside. */
int cm_launch_mask(void);

/* The CPUs the process may run on (its affinity), on which the cores'
 * threads are bound. Where a launch has more cores than this, it emulates a
 * larger chip, and the library's own work keeps the chip's equal shares
 * rather than taking work in turn. */
int cm_cpus(void);

/* Barrier of the library's own (user ids 0..15 are never touched) across the
 * cores of core_mask, a subset of the calling launch. Disjoint subsets of one
 * launch have separate barriers. Returns nonzero iff every arriving core
 * passed ok != 0, so cores agree on failures without deadlock. Outside a
 * launch it returns ok at once. */
int cm_bar_all(int core_mask, int ok);

/* The calling core's scratch, grown to at least `bytes` (64-byte aligned) and
 * kept across launches, so steady-state calls allocate nothing. NULL if it
 * cannot grow or the caller is not an emulated core. */
void *cm_core_scratch(size_t bytes);

/* cm_core_scratch(bytes) on every core of core_mask (a subset of the calling
 * launch) at once, *mem NULL for 0 bytes: CG_OK on every core if every core
 * got its scratch, else CG_ERR_NO_MEMORY on every core, each with the same
 * err naming the first core of core_mask that failed and its byte count.
 * Agreeing first means a failure leaves every output untouched. */
cg_status cm_scratch_all(int core_mask, size_t bytes, void **mem, cg_error *err);

/* The scratch of logical core `rank` of core_mask (the calling launch's),
 * as its last cm_scratch_all gave it: how cores read each other's results
 * in SPMD mode, where they share no call. Valid from that call's return
 * until the cores' next barrier-separated cm_scratch_all. */
void *cm_scratch_of(int core_mask, int rank);
#endif
