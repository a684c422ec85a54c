/* SPDX-License-Identifier: MIT */
/* The baseline someone would write first: im2col of the whole batch, then one
 * cblas_sgemm (one per group when group > 1), OpenBLAS on the same number of
 * threads as the cores convgrad gets. The im2col loop itself is plain,
 * single-threaded C: that is the obvious version.
 *
 * col is [P][G][Kh][Kw][Ci'] with P = N*OH*OW, so group g's columns are one
 * contiguous block of Kh*Kw*Ci' (leading dimension Kh*Kw*Cin), and
 *   dw_g[Co'][Kh*Kw*Ci'] = dy_g^T (P x Co', ld Cout) * col_g (P x Kh*Kw*Ci')
 * lands in OHWI directly. */
#include <cblas.h>
#include <string.h>

#include "bench.h"

size_t baseline_col_bytes(const bench_shape *s)
{
    return (size_t)s->n * s->oh * s->ow * (size_t)s->kh * s->kw * s->cin * sizeof(float);
}

static void im2col(const bench_shape *s, const float *x, float *col)
{
    const int G = s->group, Cip = s->cin / G;
    float *out = col;
    for (int n = 0; n < s->n; ++n) {
        for (int oh = 0; oh < s->oh; ++oh) {
            for (int ow = 0; ow < s->ow; ++ow) {
                for (int g = 0; g < G; ++g) {
                    for (int kh = 0; kh < s->kh; ++kh) {
                        const int iy = oh * s->sh + kh * s->dil_h - s->ph;
                        for (int kw = 0; kw < s->kw; ++kw) {
                            const int ix = ow * s->sw + kw * s->dil_w - s->pw;
                            if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) {
                                memset(out, 0, (size_t)Cip * sizeof(float));
                            } else {
                                const float *src =
                                    x + (((size_t)n * s->h + iy) * s->w + ix) * s->cin +
                                    (size_t)g * Cip;
                                if (Cip == 1)
                                    *out = *src; /* depthwise: one element */
                                else
                                    memcpy(out, src, (size_t)Cip * sizeof(float));
                            }
                            out += Cip;
                        }
                    }
                }
            }
        }
    }
}

void bench_blas_threads(int threads)
{
    openblas_set_num_threads(threads);
}

void baseline_run(const bench_shape *s, const float *x, const float *dy, float *dw, float *col)
{
    const int G = s->group, Cip = s->cin / G, Cop = s->cout / G;
    const int P = s->n * s->oh * s->ow;
    const int kkcp = s->kh * s->kw * Cip;
    const int kkc = s->kh * s->kw * s->cin;
    im2col(s, x, col);
    for (int g = 0; g < G; ++g)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cop, kkcp, P, 1.0f,
                    dy + (size_t)g * Cop, s->cout, col + (size_t)g * kkcp, kkc, 0.0f,
                    dw + (size_t)g * Cop * kkcp, kkcp);
}
