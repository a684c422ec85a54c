/* SPDX-License-Identifier: MIT */
/* Depthwise kernels in plain C: the oracles of the dwconv slots and the
 * path of every CPU the others do not serve. */
#include "kernels/dwconv_rows_body.h"
#include "kernels/grouped_rows_body.h"
#include "kernels/list.h"

void cg_f32_dwconv_pixel_ref(float *restrict out, const float *restrict init, const float *const *x,
                             const float *restrict w, int64_t taps, int64_t n, int stream)
{
    (void)stream; /* plain stores */
    for (int64_t c = 0; c < n; c++)
        out[c] = init ? init[c] : 0.0f;
    for (int64_t t = 0; t < taps; t++)
        if (x[t])
            cg_multiply_add(out, x[t], w + t * n, n);
}

void cg_f32_dwconv_run_ref(float *restrict out, const float *restrict init,
                           const cg_dwconv_run *run, const float *restrict w, int64_t pixels,
                           int64_t n)
{
    for (int64_t i = 0; i < pixels; i++) {
        float *o = out + i * n;
        for (int64_t c = 0; c < n; c++)
            o[c] = init ? init[c] : 0.0f;
        for (int64_t kh = 0; kh < run->kernel_h; kh++)
            for (int64_t kw = run->kw0; run->rows[kh] && kw < run->kw1; kw++)
                cg_multiply_add(
                    o, run->rows[kh] + i * run->pixel_step + (kw - run->kw0) * run->tap_step,
                    w + (kh * run->kernel_w + kw) * n, n);
    }
}

void cg_f32_grouped_pixel_ref(float *restrict out, int64_t ld, const float *restrict init,
                              const float *const *x, const float *restrict w, int64_t taps,
                              int64_t g, int64_t n, int64_t pixels)
{
    for (int64_t i = 0; i < pixels; i++)
        for (int64_t c = 0; c < n; c++) {
            float sum = init ? init[c] : 0.0f;
            for (int64_t t = 0; t < taps; t++) {
                const float *row = x[i * taps + t];
                for (int64_t j = 0; row && j < g; j++)
                    sum += row[c - c % g + j] * w[(t * g + j) * n + c];
            }
            out[i * ld + c] = sum;
        }
}

void cg_f32_dwconv_rows_ref(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                            int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                            float *dst, double *db_sums)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, resume, dst, db_sums);
}

enum { LANES = 16 };

/* The chunk in plain C: sixteen lanes, each shift's products over all of
 * them (the body drops the lanes that pair channels across groups), so the
 * compiler can vectorise the loop along the lanes. */
static void grouped_chunk(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                          int64_t n, int64_t cb, int64_t kh, int64_t kw0, int64_t count, int64_t r0,
                          int64_t r1, float *sums)
{
    const int64_t g = plan->cin_g, shifts = 2 * g - 1;
    const int64_t width = n - cb < LANES + g - 1 ? n - cb : LANES + g - 1; /* channels read */
    float xs[LANES + CG_GROUPED_MOST] = {0}, ds[LANES + CG_GROUPED_MOST] = {0};
    memset(sums, 0, (size_t)(count * shifts * LANES) * sizeof(float));
    cg_pixel px = cg_pixel_of_row(plan, r0);
    for (int64_t row = r0; row < r1; row++, cg_next_pixel(plan, &px)) {
        cg_load_floats(ds, dy, row * plan->cout + c_first + cb, width, plan->dtype_size);
        for (int64_t t = 0; t < count; t++) {
            const int64_t at = cg_x_index(plan, &px, kh, kw0 + t, c_first + cb);
            if (at < 0)
                continue;
            cg_load_floats(xs, x, at, width, plan->dtype_size);
            for (int64_t s = 0; s < shifts; s++) {
                const int64_t d = s - (g - 1);
                const float *xd = xs + (d < 0 ? -d : 0), *dd = ds + (d > 0 ? d : 0);
                float *sum = sums + (t * shifts + s) * LANES;
                for (int l = 0; l < LANES; l++)
                    sum[l] += xd[l] * dd[l];
            }
        }
    }
}

void cg_f32_grouped_rows_ref(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                             int64_t c_last, int64_t first, int64_t last, float beta, float *dst)
{
    cg_grouped_rows_body(grouped_chunk, LANES, 24, plan, dy, x, c_first, c_last, first, last, beta,
                         dst);
}
