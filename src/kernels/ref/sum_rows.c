/* SPDX-License-Identifier: MIT */
/* Column sums in double, a row at a time (the bias gradient): the oracle and
 * the portable path. Each column's sum is one chain in row order, so every
 * kernel of the slot gives these bits. */
#include "kernels/list.h"

void cg_f32_sum_rows_ref(double *sum, const float *src, int64_t ld, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < n; k++)
            sum[k] += (double)src[r * ld + k];
}
