/* SPDX-License-Identifier: MIT */
/* Summing per-core partials in a fixed order: knows nothing of shapes. */
#ifndef CG_REDUCE_H
#define CG_REDUCE_H
#include <stddef.h>

/* sum[i - begin] = parts[0][i] + parts[1][i] + ... + parts[nparts-1][i]
 * for i in [begin, end), added in part order so results do not depend on
 * timing. nparts >= 1. */
void cg_reduce_partials(float *sum, const float *const *parts, int nparts, size_t begin,
                        size_t end);

/* The slice [begin, end) of n elements that member `rank` of `members`
 * reduces: balanced, in units of `unit` elements so slices do not share
 * cache lines. */
void cg_reduce_slice(size_t n, size_t unit, int rank, int members, size_t *begin, size_t *end);
#endif
