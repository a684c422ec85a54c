/* SPDX-License-Identifier: MIT */
/* The grouped weight gradient for groups of a few channels (as many in as
 * out), its loops written once: each kernel (ref/dwconv.c, avx2/dwconv.c,
 * avx512/dwconv.c) inlines this body with its own chunk function.
 *
 * With G channels a group, dw[g*G + co][tap][ci] sums x[in(row, tap)][g*G +
 * ci] * dy[row][g*G + co]. For a shift d = co - ci that is, over all channels
 * c at once, the depthwise sum of x[.][c] * dy[.][c + d]: vectorised along
 * the channels, one FMA a shift, where a GEMM a group would pack a few
 * floats a call. A chunk of channels keeps its 2G - 1 sums in registers over
 * a block of rows (its x and dy lines then read from L1 or L2 once a tap);
 * the lanes whose c and c + d fall in different groups are masked off (about
 * half the lanes, (G - 1) / (2G - 1)). */
#ifndef CG_KERNELS_GROUPED_ROWS_BODY_H
#define CG_KERNELS_GROUPED_ROWS_BODY_H
#include <stdint.h>

#include "kernels.h"
#include "kernels/geometry.h"

/* Rows a block: their x and dy lines stay in L2 across the chunks and taps;
 * a chunk's (2 * 64 bytes a row), in L1 across its taps. */
enum { CG_GROUPED_BLOCK_ROWS = 512, CG_GROUPED_SUMS_MOST = 32 * 16 };

/* One chunk of `lanes` channels from cb (relative to c_first; n channels in
 * all) and taps [kw0, kw0 + count) of kernel row kh, over rows [r0, r1):
 * sums[(t * (2G - 1) + s) * lanes + l] = the sum of x[in(row, (kh, kw0 +
 * t))][c + max(0, -d)] * dy[row][c + max(0, d)], c = c_first + cb + l, d = s
 * - (G - 1), for the lanes whose two channels are of one group (the others:
 * zero). */
typedef void cg_grouped_chunk_fn(const cg_plan *plan, const void *dy, const void *x,
                                 int64_t c_first, int64_t n, int64_t cb, int64_t kh, int64_t kw0,
                                 int64_t count, int64_t r0, int64_t r1, float *sums);

/* The lanes l < valid (<= lanes) of a chunk from channel c0 (counted from a
 * multiple of g) whose channel c pairs with c + e of its group, 0 <= c % g
 * + e < g, as bits; where the chunk starts a group and holds whole groups,
 * from the pattern of one group, without a division a lane. */
static inline unsigned cg_grouped_pair_bits(int64_t c0, int64_t e, int64_t g, int valid, int lanes)
{
    const unsigned valid_bits = valid >= 32 ? ~0u : (1u << valid) - 1u;
    unsigned bits = 0;
    if (c0 % g == 0 && lanes % g == 0) {
        const int64_t lo = e < 0 ? -e : 0, hi = e > 0 ? g - e : g; /* c % g in [lo, hi) */
        for (int l = 0; l < lanes; l += (int)g)
            bits |= (((1u << (hi - lo)) - 1u) << lo) << l;
        return bits & valid_bits;
    }
    for (int l = 0; l < valid; l++) {
        const int64_t k = (c0 + l) % g + e;
        bits |= (unsigned)(k >= 0 && k < g) << l;
    }
    return bits;
}

/* The rows of a chunk, a run at a time: the pixels of one output row
 * within [r0, r1) whose kernel row kh lies inside the image. */
typedef struct cg_grouped_run {
    int64_t y, at; /* dy's and x's elements at its first pixel, the chunk's first channel */
    int64_t ix;    /* the column of tap kw0 there */
    int64_t length, inner_lo, inner_hi; /* pixels; [inner_lo, inner_hi): all taps inside */
} cg_grouped_run;

typedef struct cg_grouped_walk {
    const cg_plan *plan;
    cg_pixel px;
    int64_t row, last, c0, kh, kw0, count;
} cg_grouped_walk;

static inline cg_grouped_walk cg_grouped_walk_start(const cg_plan *plan, int64_t c0, int64_t kh,
                                                    int64_t kw0, int64_t count, int64_t r0,
                                                    int64_t r1)
{
    return (cg_grouped_walk){plan, cg_pixel_of_row(plan, r0), r0, r1, c0, kh, kw0, count};
}

/* The next run into *run; 0 when none is left. */
static inline int cg_grouped_next_run(cg_grouped_walk *w, cg_grouped_run *run)
{
    const cg_plan *p = w->plan;
    while (w->row < w->last) {
        const cg_pixel px = w->px;
        const int64_t length =
            p->out_w - px.ow < w->last - w->row ? p->out_w - px.ow : w->last - w->row;
        const int64_t row = w->row;
        w->row += length;
        w->px.ow += length;
        if (w->px.ow == p->out_w) {
            w->px.ow = 0;
            if (++w->px.oh == p->out_h) {
                w->px.oh = 0;
                w->px.n++;
            }
        }
        const int64_t iy = px.oh * p->stride_h + w->kh * p->dil_h - p->pad_u;
        if (iy < 0 || iy >= p->in_h)
            continue;
        const int64_t sw = p->stride_w, ix = px.ow * sw + w->kw0 * p->dil_w - p->pad_l;
        const int64_t room = p->in_w - 1 - (w->count - 1) * p->dil_w - ix; /* for the last tap */
        int64_t lo = ix >= 0 ? 0 : (-ix + sw - 1) / sw, hi = room >= 0 ? room / sw + 1 : 0;
        hi = hi < length ? hi : length;
        lo = lo < hi ? lo : hi;
        *run = (cg_grouped_run){row * p->cout + w->c0,
                                ((px.n * p->in_h + iy) * p->in_w + ix) * p->cin + w->c0,
                                ix,
                                length,
                                lo,
                                hi};
        return 1;
    }
    return 0;
}

/* Whether lane channel c (relative to c_first) of shift d pairs channels of
 * one group: (ci, ci + d) for d >= 0, (co - d, co) for d < 0. */
static inline int cg_grouped_lane(int64_t c, int64_t d, int64_t g)
{
    return d >= 0 ? c % g + d < g : c % g - d < g;
}

/* Elements [from, to) of a tensor into L2, a line at a time. */
static inline void cg_grouped_prefetch(const void *tensor, size_t dtype_size, int64_t from,
                                       int64_t to)
{
    const char *p = (const char *)tensor + from * (int64_t)dtype_size;
    for (int64_t b = 0; b < (to - from) * (int64_t)dtype_size; b += 64)
        __builtin_prefetch(p + b, 0, 2);
}

/* The lines of dy and x that rows [r0, r1) read: the chunks' loads stride
 * across rows (one line in every few), which no hardware prefetcher follows
 * from memory. */
static inline void cg_grouped_prefetch_rows(const cg_plan *plan, const void *dy, const void *x,
                                            int64_t r0, int64_t r1)
{
    if (r0 >= r1)
        return;
    cg_grouped_prefetch(dy, plan->dtype_size, r0 * plan->cout, r1 * plan->cout);
    const cg_pixel a = cg_pixel_of_row(plan, r0), b = cg_pixel_of_row(plan, r1 - 1);
    int64_t lo = a.oh * plan->stride_h - plan->pad_u;
    int64_t hi = b.oh * plan->stride_h + (plan->kernel_h - 1) * plan->dil_h - plan->pad_u;
    lo = lo < 0 ? 0 : lo;
    hi = hi >= plan->in_h ? plan->in_h - 1 : hi;
    const int64_t line = plan->in_w * plan->cin;
    if (hi >= 0 && lo < plan->in_h)
        cg_grouped_prefetch(x, plan->dtype_size, (a.n * plan->in_h + lo) * line,
                            (b.n * plan->in_h + hi + 1) * line);
}

/* cg_grouped_rows_fn's contract (kernels/list.h) on `chunk`, whose sums
 * take at most `most` vectors (taps a call: most / (2G - 1)). */
static inline __attribute__((always_inline)) void
cg_grouped_rows_body(cg_grouped_chunk_fn *chunk, const int lanes, const int most,
                     const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                     int64_t c_last, int64_t first, int64_t last, float beta, float *dst)
{
    const int64_t n = c_last - c_first, g = plan->cin_g, shifts = 2 * g - 1;
    const int64_t row_len = plan->row_len, per_call = most / shifts;
    float sums[CG_GROUPED_SUMS_MOST];
    if (beta == 0.0f)
        memset(dst, 0, (size_t)(n * row_len) * sizeof(float));
    cg_grouped_prefetch_rows(plan, dy, x, first,
                             first + CG_GROUPED_BLOCK_ROWS < last ? first + CG_GROUPED_BLOCK_ROWS
                                                                  : last);
    for (int64_t r0 = first; r0 < last; r0 += CG_GROUPED_BLOCK_ROWS) {
        const int64_t r1 = r0 + CG_GROUPED_BLOCK_ROWS < last ? r0 + CG_GROUPED_BLOCK_ROWS : last;
        /* the next block's lines arrive while this one computes */
        cg_grouped_prefetch_rows(
            plan, dy, x, r1, r1 + CG_GROUPED_BLOCK_ROWS < last ? r1 + CG_GROUPED_BLOCK_ROWS : last);
        for (int64_t cb = 0; cb < n; cb += lanes) {
            /* where each lane of each shift goes in dst (tap 0), or -1 */
            int64_t to[CG_GROUPED_SUMS_MOST];
            for (int64_t s = 0; s < shifts; s++)
                for (int64_t l = 0; l < lanes; l++) {
                    const int64_t c = cb + l, d = s - (g - 1);
                    /* c is x's channel (d >= 0) or dy's (d < 0) */
                    const int64_t ci = d >= 0 ? c % g : c % g - d, co = ci + d;
                    to[s * lanes + l] =
                        c < n && cg_grouped_lane(c, d, g) ? (c / g * g + co) * row_len + ci : -1;
                }
            for (int64_t kh = 0; kh < plan->kernel_h; kh++)
                for (int64_t kw0 = 0; kw0 < plan->kernel_w; kw0 += per_call) {
                    const int64_t count =
                        plan->kernel_w - kw0 < per_call ? plan->kernel_w - kw0 : per_call;
                    chunk(plan, dy, x, c_first, n, cb, kh, kw0, count, r0, r1, sums);
                    for (int64_t t = 0; t < count; t++) {
                        float *dst_t = dst + (kh * plan->kernel_w + kw0 + t) * g;
                        const float *sum = sums + t * shifts * lanes;
                        for (int64_t e = 0; e < shifts * lanes; e++)
                            if (to[e] >= 0)
                                dst_t[to[e]] += sum[e];
                    }
                }
        }
    }
}
#endif
