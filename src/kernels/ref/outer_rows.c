/* SPDX-License-Identifier: MIT */
/* The outer-product weight gradient of small dw rows in plain C: the oracle
 * of the outer_rows slot and the path of every CPU the others do not serve.
 * One FMA a row and element (fmaf), as the vector kernels do. */
#include <math.h>

#include "kernels/list.h"
#include "kernels/outer_rows_body.h"

/* The whole block as one tile: the sums in memory. */
static void outer_tile(int64_t jn, int64_t valid, const float *cols, const float *d, int64_t ld_d,
                       int64_t rows, float *sums, int64_t ld_sums)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < jn; j++) {
            const float v = cols[j * CG_OUTER_CHUNK_ROWS + r];
            for (int64_t co = 0; co < valid; co++)
                sums[j * ld_sums + co] = fmaf(d[r * ld_d + co], v, sums[j * ld_sums + co]);
        }
}

void cg_f32_outer_rows_ref(const cg_plan *plan, const void *dy, const void *x, int64_t g_first,
                           int64_t g_last, int64_t first, int64_t last, float beta, float *dst)
{
    cg_outer_rows_body(outer_tile, cg_copy_floats, 16, 1 << 20, 4, plan, dy, x, g_first, g_last,
                       first, last, beta, dst);
}
