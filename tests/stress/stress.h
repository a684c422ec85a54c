/* SPDX-License-Identifier: MIT */
/* convgrad-stress: the random case generator shared by the tool's parts.
 *
 * A case is a pure function of (run seed, case index, --cores): the same
 * triple always gives the same shape, mode, mask, buffers and data, so a
 * failure is reproduced from the one line the tool prints for it. */
#ifndef CG_STRESS_H
#define CG_STRESS_H

#include <stddef.h>
#include <stdint.h>

#include "support.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { STRESS_MAX_CORES = 32 };

/* Case `index` of the run `seed`, with core masks inside bits 0..cores-1. */
cgt_case stress_case(uint64_t seed, uint64_t index, int cores);

/* The emulated cores the case occupies while it runs: its mask for `_s`
 * (host or SPMD) and `_p` SPMD, none for `_p` called from the host thread.
 * Two cases whose sets are disjoint may run at the same time. */
uint32_t stress_case_cores(const cgt_case *c);

/* "convgrad-stress --replay 0xSEED:I[,J...][ --cores K]" for n indices. */
void stress_reproducer(char *buf, size_t len, uint64_t seed, const uint64_t *idx, int n, int cores);

#ifdef __cplusplus
}
#endif
#endif
