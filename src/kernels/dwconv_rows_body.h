/* SPDX-License-Identifier: MIT */
/* The depthwise weight gradient's loops for any kernel size, written once:
 * the reference (ref/dwconv.c) and the copies the compiler vectorises for
 * wider ISAs (avx2/dwconv.c, avx512/dwconv.c) are this body, inlined into a
 * function of each target. */
#ifndef CG_KERNELS_DWCONV_ROWS_BODY_H
#define CG_KERNELS_DWCONV_ROWS_BODY_H
#include "kernels.h"
#include "kernels/geometry.h"

#define CG_INLINE_BODY static inline __attribute__((always_inline))

CG_INLINE_BODY void cg_multiply_add(float *restrict acc, const float *restrict dy,
                                    const float *restrict x, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        acc[c] += dy[c] * x[c];
}

/* cg_dwconv_rows_fn's contract (kernels/list.h), for every kernel size and
 * multiplier m: each row's dy is split into m planes (plane j: output
 * channel j of every group) once a row, so that a tap is m multiply-adds
 * over x's contiguous input channels, where expanding x (each input channel
 * m times) would cost a copy a tap; acc[(tap * m + j) * groups + g]. */
CG_INLINE_BODY void cg_dwconv_rows_multiplied(const cg_plan *plan, const void *dy, const void *x,
                                              int64_t c_first, int64_t c_last, int64_t first,
                                              int64_t last, float *acc, int resume, float *dst,
                                              double *db_sums, const int64_t m)
{
    const int64_t channels = c_last - c_first, taps = plan->taps;
    const int64_t groups = channels / m;
    const int fp32 = plan->dtype_size == sizeof(float);
    float dy_floats[CG_DEPTHWISE_MAX_BLOCK], x_floats[CG_DEPTHWISE_MAX_BLOCK];
    float planes[CG_DEPTHWISE_MAX_BLOCK];
    if (!resume) {
        memset(acc, 0, (size_t)(taps * channels) * sizeof(float));
        if (db_sums)
            memset(db_sums, 0, (size_t)channels * sizeof(double));
    }
    cg_pixel px = cg_pixel_of_row(plan, first);
    for (int64_t row = first; row < last; row++, cg_next_pixel(plan, &px)) {
        const float *dy_row = dy_floats;
        if (fp32)
            dy_row = (const float *)dy + row * plan->cout + c_first;
        else
            cg_load_floats(dy_floats, dy, row * plan->cout + c_first, channels, 2);
        if (db_sums)
            for (int64_t c = 0; c < channels; c++)
                db_sums[c] += dy_row[c];
        if (m > 1) {
            for (int64_t g = 0; g < groups; g++)
                for (int64_t j = 0; j < m; j++)
                    planes[j * groups + g] = dy_row[g * m + j];
            dy_row = planes;
        }
        for (int64_t kh = 0; kh < plan->kernel_h; kh++)
            for (int64_t kw = 0; kw < plan->kernel_w; kw++) {
                int64_t at = cg_x_index(plan, &px, kh, kw, c_first / m);
                if (at < 0)
                    continue;
                const float *x_row = x_floats;
                if (fp32)
                    x_row = (const float *)x + at;
                else
                    cg_load_floats(x_floats, x, at, groups, 2);
                for (int64_t j = 0; j < m; j++)
                    cg_multiply_add(acc + ((kh * plan->kernel_w + kw) * m + j) * groups,
                                    dy_row + j * groups, x_row, groups);
            }
    }
    for (int64_t g = 0; dst && g < groups; g++) /* tap-major sums -> dw rows [c][tap] */
        for (int64_t j = 0; j < m; j++)
            for (int64_t tap = 0; tap < taps; tap++)
                dst[(g * m + j) * taps + tap] = acc[(tap * m + j) * groups + g];
}

/* cg_dwconv_rows_fn's contract: multiplier 1 compiled apart, a constant (a
 * multiplier read from the plan made the loops of a 5x5 kernel 0.79x as
 * fast). */
CG_INLINE_BODY void cg_dwconv_rows_body(const cg_plan *plan, const void *dy, const void *x,
                                        int64_t c_first, int64_t c_last, int64_t first,
                                        int64_t last, float *acc, int resume, float *dst,
                                        double *db_sums)
{
    if (plan->cout_g == 1)
        cg_dwconv_rows_multiplied(plan, dy, x, c_first, c_last, first, last, acc, resume, dst,
                                  db_sums, 1);
    else
        cg_dwconv_rows_multiplied(plan, dy, x, c_first, c_last, first, last, acc, resume, dst,
                                  db_sums, plan->cout_g);
}
#endif
