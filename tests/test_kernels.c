/* SPDX-License-Identifier: MIT */
/* Each optimised kernel against the plain kernel beside it, on its edge
 * cases: channel counts below, equal to, above and multiples of its 32-lane
 * block, borders, strides, fp16, and accumulator blocks resumed across tiles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "support.h"

static void check_depthwise(const cgt_shape *s, size_t dtype_size, cgt_rng *rng)
{
    ConvParameter p = cgt_param(s);
    cg_plan plan;
    cr_assert_eq(cg_plan_make(&p, dtype_size, &plan), CG_OK);
    size_t dy_n = ref_dy_elems(&p), x_n = ref_x_elems(&p), dw_n = ref_dw_elems(&p);
    void *dy = malloc(dy_n * dtype_size), *x = malloc(x_n * dtype_size);
    if (dtype_size == 4) {
        cgt_fill_f32(rng, dy, dy_n, 1.0);
        cgt_fill_f32(rng, x, x_n, 1.0);
    } else {
        cgt_fill_f16(rng, dy, dy_n, 1.0);
        cgt_fill_f16(rng, x, x_n, 1.0);
    }
    float *acc = malloc(sizeof(float) * plan.taps * plan.cout);
    float *fast = malloc(sizeof(float) * dw_n), *plain = malloc(sizeof(float) * dw_n);
    /* a core's share that starts and ends mid-image */
    int64_t first = plan.rows / 3, last = plan.rows - plan.rows / 5;
    cg_depthwise3x3_rows_avx512(&plan, dy, x, 0, plan.cout, first, last, acc, fast);
    cg_depthwise_rows_reference(&plan, dy, x, 0, plan.cout, first, last, acc, plain);
    for (size_t i = 0; i < dw_n; i++)
        cr_assert(fabsf(fast[i] - plain[i]) <= 1e-4f * (1.0f + fabsf(plain[i])),
                  "C %d stride %d %dx%d pad %d/%d fp%zu: dw[%zu] %g vs %g", s->cin, s->sh, s->h,
                  s->w, s->pu, s->pd, dtype_size * 8, i, fast[i], plain[i]);
    free(dy);
    free(x);
    free(acc);
    free(fast);
    free(plain);
}

Test(kernels, depthwise3x3_avx512_matches_the_plain_kernel)
{
    if (!cg_depthwise3x3_avx512_runs_here())
        cr_skip_test("this CPU has no AVX-512 (BW, VL)");
    const int channels[] = {1, 3, 15, 16, 17, 31, 32, 33, 47, 64, 67, 96, 100};
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (size_t i = 0; i < sizeof channels / sizeof *channels; i++)
        for (int stride = 1; stride <= 3; stride++)
            for (int pad = 0; pad <= 2; pad++)
                for (size_t dtype = 2; dtype <= 4; dtype += 2) {
                    int c = channels[i];
                    cgt_shape s = {.n = 2,
                                   .h = 9 + stride,
                                   .w = 6 + pad,
                                   .cin = c,
                                   .cout = c,
                                   .kh = 3,
                                   .kw = 3,
                                   .g = c,
                                   .sh = stride,
                                   .sw = 3 - stride + 1,
                                   .pu = pad,
                                   .pd = 2 - pad,
                                   .pl = 1,
                                   .pr = pad};
                    check_depthwise(&s, dtype, &rng);
                }
}

/* More output pixels than one tile, so the sums rest in the accumulator
 * block and resume. */
Test(kernels, depthwise3x3_avx512_resumes_across_tiles)
{
    if (!cg_depthwise3x3_avx512_runs_here())
        cr_skip_test("this CPU has no AVX-512 (BW, VL)");
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    cgt_shape s = {.n = 3,
                   .h = 23,
                   .w = 19,
                   .cin = 40,
                   .cout = 40,
                   .kh = 3,
                   .kw = 3,
                   .g = 40,
                   .pu = 1,
                   .pd = 1,
                   .pl = 1,
                   .pr = 1};
    check_depthwise(&s, 4, &rng);
    check_depthwise(&s, 2, &rng);
}

/* The training step's depthwise pixel: every channel count around the
 * vector width, taps missing (padding), with and without a starting value. */
Test(kernels, depthwise_pixel_avx512_matches_the_plain_kernel)
{
    if (!cg_depthwise3x3_avx512_runs_here())
        cr_skip_test("no AVX-512 on this CPU");
    enum { TAPS = 9, MOST = 70 };
    static float x[TAPS][MOST], w[TAPS * MOST], init[MOST], got[MOST + 1], want[MOST + 1];
    cgt_rng r;
    cgt_rng_seed(&r, cgt_base_seed());
    for (int n = 1; n <= MOST; n++)
        for (int with_init = 0; with_init < 2; with_init++) {
            const float *rows[TAPS];
            for (int t = 0; t < TAPS; t++) {
                for (int c = 0; c < n; c++) {
                    x[t][c] = (float)cgt_rng_int(&r, -3, 3);
                    w[t * n + c] = (float)cgt_rng_int(&r, -3, 3);
                }
                rows[t] = cgt_rng_int(&r, 0, 3) ? x[t] : NULL;
            }
            for (int c = 0; c < n; c++)
                init[c] = (float)cgt_rng_int(&r, -4, 4);
            got[n] = want[n] = 12345.0f; /* nothing past n is written */
            cg_depthwise_pixel_avx512(got, with_init ? init : NULL, rows, w, TAPS, n);
            cg_depthwise_pixel_reference(want, with_init ? init : NULL, rows, w, TAPS, n);
            cr_assert(memcmp(got, want, (size_t)(n + 1) * sizeof(float)) == 0,
                      "%d channels, init %d", n, with_init);
        }
}
