/* SPDX-License-Identifier: MIT */
/* Packing space of the calling thread, for work that runs on it outside an
 * emulated core's launch (`_p`, cg_gemm): grown on demand, kept until the
 * thread exits, so a thread's repeated calls of one shape allocate nothing. */
#ifndef CG_THREAD_SCRATCH_H
#define CG_THREAD_SCRATCH_H
#include <stddef.h>

/* At least `floats` floats, 64-byte aligned, or NULL when memory ran out
 * (the old space, if any, is kept). */
float *cg_thread_floats(size_t floats);

/* While the calling thread runs emulated core `core`'s share of a launch
 * (cm_run_here), cg_thread_floats gives that core's space, not the thread's
 * own, which may hold the call's staged tensors; -1 returns to its own.
 * A core belongs to one launch at a time, so its space has one user. */
void cg_thread_floats_as_core(int core);
#endif
