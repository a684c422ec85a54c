/* SPDX-License-Identifier: MIT */
/* Depthwise kernels in plain C: the oracles of the dwconv slots and the
 * path of every CPU the others do not serve. */
#include "kernels/dwconv_rows_body.h"
#include "kernels/list.h"

void cg_f32_dwconv_pixel_ref(float *restrict out, const float *restrict init, const float *const *x,
                             const float *restrict w, int64_t taps, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        out[c] = init ? init[c] : 0.0f;
    for (int64_t t = 0; t < taps; t++)
        if (x[t])
            cg_multiply_add(out, x[t], w + t * n, n);
}

void cg_f32_dwconv_rows_ref(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                            int64_t c_last, int64_t first, int64_t last, float *acc, float *dst)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, dst);
}
