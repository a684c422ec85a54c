/* SPDX-License-Identifier: MIT */
/* The weight gradient of small dw rows as outer products (list.h:
 * cg_outer_rows_fn), its loops written once: each kernel (ref/outer_rows.c,
 * avx2/outer_rows.c, avx512/outer_rows.c) inlines this body with its own
 * tile function.
 *
 * A row of the sum adds dy's row (cout_g floats: vectors) times its im2col
 * row (row_len floats, each broadcast) into the cout_g x row_len sums. A
 * chunk of rows has its im2col values (and fp16 dy's) gathered once into L1;
 * each tile of sums then runs over the whole chunk in registers, resting
 * between chunks in `sums`. Where a GEMM would pack panels 16 or 48 columns
 * wide for a few useful ones, nothing is wasted but the padding of the last
 * vector of channels. */
#ifndef CG_KERNELS_OUTER_ROWS_BODY_H
#define CG_KERNELS_OUTER_ROWS_BODY_H
#include <stdint.h>

#include "kernels.h"
#include "kernels/geometry.h"

/* Rows a chunk: its im2col values (row_len columns of them, CG_OUTER_CHUNK_ROWS
 * floats apart) and its dy rows stay in L1. */
enum { CG_OUTER_CHUNK_ROWS = 64 };

/* One tile: channels [0, valid) and columns [0, jn) over `rows` rows,
 * sums[j * ld_sums + co] += d[r * ld_d + co] * cols[j * CG_OUTER_CHUNK_ROWS
 * + r], one FMA a row, rows in order. */
typedef void cg_outer_tile_fn(int64_t jn, int64_t valid, const float *cols, const float *d,
                              int64_t ld_d, int64_t rows, float *sums, int64_t ld_sums);

/* The tiles' column counts: f(a, 1) ... f(a, n), for the kernels' switches
 * over compile-time widths. */
#define CG_UP_TO_2(f, a) f(a, 1) f(a, 2)
#define CG_UP_TO_3(f, a) CG_UP_TO_2(f, a) f(a, 3)
#define CG_UP_TO_4(f, a) CG_UP_TO_3(f, a) f(a, 4)
#define CG_UP_TO_6(f, a) CG_UP_TO_4(f, a) f(a, 5) f(a, 6)
#define CG_UP_TO_7(f, a) CG_UP_TO_6(f, a) f(a, 7)
#define CG_UP_TO_9(f, a) CG_UP_TO_7(f, a) f(a, 8) f(a, 9)
#define CG_UP_TO_12(f, a) CG_UP_TO_9(f, a) f(a, 10) f(a, 11) f(a, 12)
#define CG_UP_TO_14(f, a) CG_UP_TO_12(f, a) f(a, 13) f(a, 14)
#define CG_UP_TO_30(f, a)                                                                          \
    CG_UP_TO_14(f, a)                                                                              \
    f(a, 15) f(a, 16) f(a, 17) f(a, 18) f(a, 19) f(a, 20) f(a, 21) f(a, 22) f(a, 23) f(a, 24)      \
        f(a, 25) f(a, 26) f(a, 27) f(a, 28) f(a, 29) f(a, 30)

/* n floats from src to dst (n <= CG_OUTER_CHUNK_ROWS). */
typedef void cg_outer_copy_fn(float *dst, const float *src, int64_t n);

/* The pixels [*lo, *hi) of [0, len) of a run whose tap at column ix (at the
 * run's first pixel) is inside the image. */
static inline void cg_outer_inside(const cg_plan *p, int64_t ix, int64_t len, int64_t *lo,
                                   int64_t *hi)
{
    const int64_t sw = p->stride_w; /* (no division for the usual stride 1) */
    *lo = ix >= 0 ? 0 : sw == 1 ? -ix : (-ix + sw - 1) / sw;
    *hi = ix >= p->in_w ? 0 : sw == 1 ? p->in_w - ix : (p->in_w - 1 - ix) / sw + 1;
    *hi = *hi < len ? *hi : len;
    *lo = *lo < *hi ? *lo : *hi;
}

/* The im2col values of rows [r0, r0 + count) of group g into dst (elements
 * of es bytes), a column at a time: column j's CG_OUTER_CHUNK_ROWS apart.
 * Along a run of one output row a column steps through x by stride_w
 * pixels, a run of floats (copied with `copy`) where that is one element. */
static inline __attribute__((always_inline)) void
cg_outer_gather(cg_outer_copy_fn *copy, const cg_plan *p, const void *x, int64_t g, int64_t r0,
                int64_t count, unsigned char *dst, const size_t es)
{
    const int64_t sw = p->stride_w, step = sw * p->cin, cin_g = p->cin_g;
    const unsigned char *xb = (const unsigned char *)x;
    cg_pixel px = cg_pixel_of_row(p, r0);
    for (int64_t r = 0; r < count;) {
        const int64_t len = p->out_w - px.ow < count - r ? p->out_w - px.ow : count - r;
        for (int64_t kh = 0; kh < p->kernel_h; kh++) {
            const int64_t iy = px.oh * p->stride_h + kh * p->dil_h - p->pad_u;
            const int inside = iy >= 0 && iy < p->in_h;
            const int64_t line = (px.n * p->in_h + iy) * p->in_w * p->cin + g * cin_g;
            for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                const int64_t ix = px.ow * sw + kw * p->dil_w - p->pad_l;
                int64_t lo, hi;
                cg_outer_inside(p, ix, inside ? len : 0, &lo, &hi);
                for (int64_t ci = 0; ci < cin_g; ci++) {
                    const int64_t j = (kh * p->kernel_w + kw) * cin_g + ci;
                    unsigned char *col = dst + (j * CG_OUTER_CHUNK_ROWS + r) * (int64_t)es;
                    if (lo > 0)
                        memset(col, 0, (size_t)lo * es);
                    if (hi < len)
                        memset(col + hi * (int64_t)es, 0, (size_t)(len - hi) * es);
                    if (lo == hi)
                        continue;
                    const int64_t at = line + (ix + lo * sw) * p->cin + ci;
                    if (es == sizeof(float) && step == 1)
                        copy((float *)col + lo, (const float *)x + at, hi - lo);
                    else /* moves of es bytes */
                        for (int64_t i = lo; i < hi; i++)
                            memcpy(col + i * (int64_t)es, xb + (at + (i - lo) * step) * (int64_t)es,
                                   es);
                }
            }
        }
        r += len;
        px.ow += len;
        if (px.ow == p->out_w) {
            px.ow = 0;
            if (++px.oh == p->out_h) {
                px.oh = 0;
                px.n++;
            }
        }
    }
}

/* cg_outer_rows_fn's contract on `tile` and `copy`, of vectors of `lanes`, taking at
 * most `vectors` vectors of channels and `regs` registers (its sums, the
 * vectors of dy and a broadcast). */
static inline __attribute__((always_inline)) void
cg_outer_rows_body(cg_outer_tile_fn *tile, cg_outer_copy_fn *copy, const int lanes, const int regs,
                   const int vectors, const cg_plan *plan, const void *dy, const void *x,
                   int64_t g_first, int64_t g_last, int64_t first, int64_t last, float beta,
                   float *dst)
{
    const int64_t m = plan->cout_g, row_len = plan->row_len;
    /* tiles of cv vectors of channels by jb columns, evened out; with up to
     * 4 vectors of 8 or 16 lanes, ld <= round_up(m, 16) */
    const int64_t nv = (m + lanes - 1) / lanes, cblocks = (nv + vectors - 1) / vectors;
    const int64_t cv = (nv + cblocks - 1) / cblocks, jmost = (regs - cv - 1) / cv;
    const int64_t jblocks = (row_len + jmost - 1) / jmost, jb = (row_len + jblocks - 1) / jblocks;
    const int64_t ld = cblocks * cv * lanes; /* sums[j][co] */
    float sums[CG_OUTER_MOST_ROW * CG_OUTER_MOST_COUT];
    float cols[CG_OUTER_MOST_ROW * CG_OUTER_CHUNK_ROWS],
        ds[CG_OUTER_CHUNK_ROWS * CG_OUTER_MOST_COUT];
    uint16_t raw[CG_OUTER_MOST_ROW * CG_OUTER_CHUNK_ROWS];
    for (int64_t g = g_first; g < g_last; g++) {
        memset(sums, 0, (size_t)(row_len * ld) * sizeof(float));
        for (int64_t r0 = first; r0 < last; r0 += CG_OUTER_CHUNK_ROWS) {
            const int64_t n = last - r0 < CG_OUTER_CHUNK_ROWS ? last - r0 : CG_OUTER_CHUNK_ROWS;
            const float *d = (const float *)dy + r0 * plan->cout + g * m;
            int64_t ld_d = plan->cout;
            if (plan->dtype_size == sizeof(float)) {
                cg_outer_gather(copy, plan, x, g, r0, n, (unsigned char *)cols, sizeof(float));
            } else { /* the halves, then converted a column and a row of dy at a time */
                cg_outer_gather(copy, plan, x, g, r0, n, (unsigned char *)raw, 2);
                for (int64_t j = 0; j < row_len; j++)
                    cg_halves_to_floats(cols + j * CG_OUTER_CHUNK_ROWS,
                                        raw + j * CG_OUTER_CHUNK_ROWS, (size_t)n);
                for (int64_t r = 0; r < n; r++)
                    cg_halves_to_floats(
                        ds + r * ld,
                        (const unsigned char *)dy + 2 * ((r0 + r) * plan->cout + g * m), (size_t)m);
                d = ds;
                ld_d = ld;
            }
            for (int64_t c0 = 0; c0 < m; c0 += cv * lanes)
                for (int64_t j0 = 0; j0 < row_len; j0 += jb)
                    tile(row_len - j0 < jb ? row_len - j0 : jb,
                         m - c0 < cv * lanes ? m - c0 : cv * lanes, cols + j0 * CG_OUTER_CHUNK_ROWS,
                         d + c0, ld_d, n, sums + j0 * ld + c0, ld);
        }
        float *out = dst + (g - g_first) * m * row_len;
        for (int64_t co = 0; co < m; co++)
            for (int64_t j = 0; j < row_len; j++) {
                const float s = sums[j * ld + co];
                out[co * row_len + j] = beta != 0.0f ? out[co * row_len + j] + s : s;
            }
    }
}
#endif
