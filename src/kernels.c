/* SPDX-License-Identifier: MIT */
#include "kernels.h"

#include <string.h>

#include "gemm/gemm.h"
#include "kernels/context.h"
#include "kernels/geometry.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t round_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

/* ---- packing into panels ------------------------------------------------ */

/* The panels' cursor (kernels/list.h) at a step: the panels are `width`
 * floats a step and kb steps long, one after the other, so a step's columns
 * run on from the end of one panel's step into the next panel's. Columns are
 * put in order, each once, by the context's pack_run kernel. */
typedef struct cursor {
    cg_panel_cursor at;
    cg_pack_run_fn *put;
    cg_pack_run_f16_fn *put_halves;
} cursor;

static cursor cursor_at(float *panels, int64_t width, int64_t kb, int64_t step)
{
    const cg_kernel_context *k = cg_kernels();
    return (cursor){
        {panels + step * width, width, width, (kb - 1) * width}, k->pack_run, k->pack_run_f16};
}

/* The next n columns: src[0, n), or zeros where src is NULL. */
static void put_floats(cursor *cur, const float *src, int64_t n)
{
    if (n > 0)
        cur->put(&cur->at, src, n);
}

/* The next n columns from tensor[index, index + n), fp32 or fp16. */
static void put_tensor(cursor *cur, const void *tensor, int64_t index, int64_t n, size_t dtype_size)
{
    if (dtype_size == sizeof(float))
        put_floats(cur, (const float *)tensor + index, n);
    else if (n > 0)
        cur->put_halves(&cur->at, (const uint16_t *)tensor + index, n);
}

/* Columns [c0, c1) of one kernel row of one im2col row, when the group is
 * all of x's channels and dilation_w is 1: the taps (kh, 0..kernel_w-1) are
 * one run of x, cut only where it leaves the input. */
static void put_kernel_row(const cg_plan *p, const void *x, const cg_pixel *px, int64_t kh,
                           int64_t c0, int64_t c1, cursor *cur)
{
    const int64_t iy = px->oh * p->stride_h + kh * p->dil_h - p->pad_u;
    const int64_t ix0 = px->ow * p->stride_w - p->pad_l;
    int64_t lo = c0, hi = c1; /* the part of [c0, c1) inside the input */
    if (iy < 0 || iy >= p->in_h) {
        hi = lo;
    } else {
        if (ix0 < 0)
            lo = lo > -ix0 * p->cin ? lo : min64(-ix0 * p->cin, c1);
        hi = min64(hi, (p->in_w - ix0) * p->cin);
        if (hi < lo)
            hi = lo;
    }
    put_floats(cur, NULL, lo - c0);
    if (hi > lo)
        put_tensor(cur, x, ((px->n * p->in_h + iy) * p->in_w + ix0) * p->cin + lo, hi - lo,
                   p->dtype_size);
    put_floats(cur, NULL, c1 - hi);
}

/* Columns [c0, c1) of group g's im2col row at pixel *px: column k is x at
 * tap k / cin_g, channel k % cin_g of the group. Where the group is all of
 * x's channels and dilation_w is 1, a kernel row is one run of x. */
static void put_im2col_row(const cg_plan *p, const void *x, int64_t g, int64_t c0, int64_t c1,
                           const cg_pixel *px, cursor *cur)
{
    const int64_t run = p->cin_g;
    if (run == p->cin && p->dil_w == 1) {
        const int64_t row_width = p->kernel_w * run; /* columns of one kernel row */
        for (int64_t kh = c0 / row_width; kh * row_width < c1; kh++) {
            int64_t lo = kh * row_width > c0 ? kh * row_width : c0;
            int64_t hi = min64(c1, (kh + 1) * row_width);
            put_kernel_row(p, x, px, kh, lo - kh * row_width, hi - kh * row_width, cur);
        }
        return;
    }
    for (int64_t tap = c0 / run; tap * run < c1; tap++) {
        int64_t lo = tap * run > c0 ? tap * run : c0, hi = min64(c1, (tap + 1) * run);
        int64_t at =
            cg_x_index(p, px, tap / p->kernel_w, tap % p->kernel_w, g * run + (lo - tap * run));
        if (at < 0)
            put_floats(cur, NULL, hi - lo);
        else
            put_tensor(cur, x, at, hi - lo, p->dtype_size);
    }
}

/* ---- the packed driver of the weight gradient ------------------------- */

/* dw's block (+)= dy^T im2col(x) in the manner of BLIS: for each pass of kc
 * rows of the sum, dy's channels are packed into A panels (kc steps of mr
 * floats) and, nc columns at a time, im2col(x) into B micro-panels (kc steps
 * of nr floats), both straight from the tensors (fp16 converted on the way);
 * the gemm_panel kernel then runs over every (A panel, B micro-panel) pair,
 * a B micro-panel staying in L1 while the A panels stream past it. The
 * panels are read in order, so no step of the sum touches a new line of dy
 * or x, as reading them in place did. */
/* The blocking's kc, or twice that where C's block is more than half of L2:
 * each pass then reads and writes all of it from further away, and fewer
 * passes outweigh B's micro-panel outgrowing L1; the rows shared evenly
 * among the passes, so none is a sliver. */
int64_t cg_general_rows_per_pass(const cg_dw_block *blk, int64_t rows)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t c_bytes = (blk->group_last - blk->group_first) * (blk->co_last - blk->co_first) *
                            (blk->col_last - blk->col_first) * (int64_t)sizeof(float);
    const int64_t most = c_bytes > cg_kernels()->l2_bytes / 2 ? 2 * bl->kc : bl->kc;
    const int64_t passes = rows > most ? (rows + most - 1) / most : 1;
    return rows > 1 ? (rows + passes - 1) / passes : 1;
}

/* A panels (a multiple of mr floats a step) and the B micro-panels of nc
 * columns, for kc rows a pass. */
int64_t cg_general_scratch_floats(int64_t kc, const cg_dw_block *blk)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t m = blk->co_last - blk->co_first;
    const int64_t cols = min64(bl->nc, blk->col_last - blk->col_first);
    return kc * (round_up(m, bl->mr) + round_up(cols, bl->nr));
}

/* A panels of dy's channels [c, c + m) over rows [first, first + kb):
 * panel q holds channel c + q*mr + i of row first + t at q*kb*mr + t*mr + i,
 * zero past m. */
static void pack_dy_panels(const cg_plan *p, const void *dy, int64_t c, int64_t m, int64_t first,
                           int64_t kb, int64_t mr, float *dst)
{
    for (int64_t t = 0; t < kb; t++) {
        cursor cur = cursor_at(dst, mr, kb, t);
        put_tensor(&cur, dy, (first + t) * p->cout + c, m, p->dtype_size);
        put_floats(&cur, NULL, round_up(m, mr) - m);
    }
}

/* B micro-panels of group g's im2col columns [c0, c0 + w) over rows [first,
 * first + kb): panel q holds column c0 + q*nr + j of row first + t at
 * q*kb*nr + t*nr + j, zero past w. */
static void pack_x_panels(const cg_plan *p, const void *x, int64_t g, int64_t c0, int64_t w,
                          int64_t first, int64_t kb, int64_t nr, float *dst)
{
    cg_pixel px = cg_pixel_of_row(p, first);
    for (int64_t t = 0; t < kb; t++, cg_next_pixel(p, &px)) {
        cursor cur = cursor_at(dst, nr, kb, t);
        put_im2col_row(p, x, g, c0, c0 + w, &px, &cur);
        put_floats(&cur, NULL, round_up(w, nr) - w);
    }
}

/* ---- prefetching the next pass -------------------------------------- */

/* The packers read dy and x from memory once a pass, and the kernels then
 * compute from the caches for far longer than that takes: each kernel call
 * prefetches its share of the next pass's lines into L2, spread over its
 * steps, so the packing finds them there. */
enum { LINE = 64, MOST_PREFETCH_BYTES = 1 << 20 };

typedef struct prefetcher {
    const char *at[2], *end[2]; /* dy's and x's spans */
    int64_t per_call;           /* lines a kernel call */
} prefetcher;

static void span(prefetcher *pf, int i, const void *base, int64_t first, int64_t last,
                 size_t dtype_size)
{
    if (last < first)
        last = first;
    const int64_t bytes = min64((last - first) * (int64_t)dtype_size, MOST_PREFETCH_BYTES);
    pf->at[i] = (const char *)base + first * (int64_t)dtype_size;
    pf->end[i] = pf->at[i] + bytes;
}

/* What the pass over rows [r, r + kb) reads, spread over `calls` kernel
 * calls: dy's rows, and the input lines their pixels' kernel rows reach. */
static prefetcher prefetch_pass(const cg_plan *p, const void *dy, const void *x, int64_t r,
                                int64_t kb, int64_t calls)
{
    prefetcher pf = {{NULL, NULL}, {NULL, NULL}, 0};
    if (kb <= 0)
        return pf;
    span(&pf, 0, dy, r * p->cout, (r + kb) * p->cout, p->dtype_size);
    const cg_pixel a = cg_pixel_of_row(p, r), z = cg_pixel_of_row(p, r + kb - 1);
    const int64_t top = a.oh * p->stride_h - p->pad_u;
    const int64_t bottom = z.oh * p->stride_h - p->pad_u + (p->kernel_h - 1) * p->dil_h + 1;
    const int64_t line = p->in_w * p->cin;
    span(&pf, 1, x, (a.n * p->in_h + (top < 0 ? 0 : top)) * line,
         (z.n * p->in_h + min64(bottom, p->in_h)) * line, p->dtype_size);
    const int64_t lines = (pf.end[0] - pf.at[0] + pf.end[1] - pf.at[1]) / LINE + 2;
    pf.per_call = (lines + calls - 1) / calls;
    return pf;
}

/* The next call's share of the lines: [*from, *to). */
static void prefetch_share(prefetcher *pf, const char **from, const char **to)
{
    int i = pf->at[0] < pf->end[0] ? 0 : 1;
    const int64_t left = pf->end[i] - pf->at[i];
    *from = pf->at[i];
    *to = *from + min64(left > 0 ? left : 0, pf->per_call * LINE);
    pf->at[i] = *to;
}

void cg_general_rows(const cg_plan *plan, const void *dy, const void *x, const cg_dw_block *blk,
                     int64_t first, int64_t last, int64_t kc, float *scratch, float beta,
                     float *dst)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t mr = bl->mr, nr = bl->nr;
    const int64_t m = blk->co_last - blk->co_first, row_len = plan->row_len;
    const int64_t cols = blk->col_last - blk->col_first, nc = min64(bl->nc, cols);
    const int64_t calls = (cols + nr - 1) / nr * ((m + mr - 1) / mr); /* kernel calls a pass */
    float *a = scratch, *b = a + kc * round_up(m, mr);
    for (int64_t g = blk->group_first; g < blk->group_last; g++) {
        float *dst_g = dst + (g - blk->group_first) * m * row_len;
        for (int64_t r0 = first; r0 < last; r0 += kc) {
            const int64_t kb = min64(kc, last - r0);
            const float step_beta = r0 == first ? beta : 1.0f;
            prefetcher next = prefetch_pass(plan, dy, x, r0 + kb, min64(kc, last - r0 - kb), calls);
            pack_dy_panels(plan, dy, g * plan->cout_g + blk->co_first, m, r0, kb, mr, a);
            for (int64_t c0 = blk->col_first; c0 < blk->col_last; c0 += nc) {
                const int64_t w = min64(nc, blk->col_last - c0);
                pack_x_panels(plan, x, g, c0, w, r0, kb, nr, b);
                for (int64_t j = 0; j < w; j += nr)
                    for (int64_t i = 0; i < m; i += mr) {
                        const char *from, *to;
                        prefetch_share(&next, &from, &to);
                        bl->kernel((int)min64(mr, m - i), (int)min64(nr, w - j), (int)kb,
                                   a + i * kb, b + j * kb, step_beta, dst_g + i * row_len + c0 + j,
                                   (int)row_len, from, to);
                    }
            }
        }
    }
}

void cg_depthwise_rows(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                       int64_t c_last, int64_t first, int64_t last, float *acc, float *dst)
{
    const cg_kernel_context *k = cg_kernels();
    cg_dwconv_rows_fn *rows = plan->kernel_h == 3 && plan->kernel_w == 3 && k->dwconv3x3_rows
                                  ? k->dwconv3x3_rows
                                  : k->dwconv_rows;
    rows(plan, dy, x, c_first, c_last, first, last, acc, dst);
}
