/* SPDX-License-Identifier: MIT */
/* The bias gradient of NHWC dy, db[c] = sum over dy's rows of dy[row][c],
 * cut as the weight gradient's long sum is (cg_sum_slices), so that db has
 * the same bits on every core_mask, and whether it is summed alone
 * (cg_conv2d_backward_bias) or while the weight gradient reads dy
 * (cg_conv2d_backward_weights_bias). Sums in double: dy has N*OH*OW terms a
 * channel, too many for float. */
#ifndef CG_BIAS_H
#define CG_BIAS_H
#include <stdint.h>

#include "plan.h"

/* Slices of dy's rows on `members` cores: the weight gradient's. With one,
 * db is summed by blocks of channels (cg_bias_channels), else each slice
 * from zero (cg_bias_slice) and the slices added in order (cg_bias_reduce). */
int64_t cg_bias_slices(const cg_plan *p, int members);

/* Doubles a slice's sums take: cout, rounded up to whole cache lines. */
int64_t cg_bias_slice_doubles(const cg_plan *p);

/* sum[c] = dy[first][c] + ... + dy[last - 1][c] for every channel, rows in
 * order: slice i of `slices` is rows cg_split_range(p->rows, i, slices). */
void cg_bias_slice(const cg_plan *p, const float *dy, int64_t first, int64_t last, double *sum);

/* One slice: logical core `rank`'s blocks of channels of db, each over every
 * row of dy (the same bits as cg_bias_slice over all rows). */
void cg_bias_channels(const cg_plan *p, const float *dy, int rank, int members, float *db);

/* More than one: core `rank`'s blocks of channels of db, the slices' sums
 * (sums[i], cg_bias_slice's) added in slice order. */
void cg_bias_reduce(const cg_plan *p, const double *const *sums, int64_t slices, int rank,
                    int members, float *db);
#endif
