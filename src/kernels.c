/* SPDX-License-Identifier: MIT */
#include "kernels.h"

#include <limits.h>
#include <string.h>

#include "gemm/gemm.h"
#include "kernels/context.h"
#include "kernels/geometry.h"

/* fp16 channels converted at once on the stack while packing (floats). */
enum { PACK_CONVERT_FLOATS = 1024 };

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Columns [c0, c1) of one kernel row of one im2col row, when the group is
 * all of x's channels and dilation_w is 1: the taps (kh, 0..kernel_w-1) are
 * one run of x, cut only where it leaves the input. */
static void pack_kernel_row(const cg_plan *p, const void *x, const cg_pixel *px, int64_t kh,
                            int64_t c0, int64_t c1, float *dst)
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
    memset(dst, 0, (size_t)(lo - c0) * sizeof(float));
    if (hi > lo)
        cg_load_floats(dst + (lo - c0), x, ((px->n * p->in_h + iy) * p->in_w + ix0) * p->cin + lo,
                       hi - lo, p->dtype_size);
    memset(dst + (hi - c0), 0, (size_t)(c1 - hi) * sizeof(float));
}

/* Columns [col_first, col_last) of the im2col of `count` rows, for each
 * group of blk: group g's tile starts at col + (g - group_first) * count *
 * width, one row of `width` columns per row of the sum; column k of a row is
 * x at tap k / cin_g, channel k % cin_g. The groups' channels are adjacent in
 * x, so each tap is one pass over one run of x, split among the groups. */
static void pack_im2col(const cg_plan *p, const void *x, const cg_dw_block *blk, int64_t first,
                        int64_t count, float *col)
{
    const int64_t groups = blk->group_last - blk->group_first, run = p->cin_g;
    const int64_t c0 = blk->col_first, c1 = blk->col_last, width = c1 - c0;
    const int64_t group_stride = count * width;
    const int fp32 = p->dtype_size == sizeof(float);
    const int64_t row_width = p->kernel_w * run; /* columns of one kernel row */
    float converted[PACK_CONVERT_FLOATS];
    cg_pixel px = cg_pixel_of_row(p, first);
    if (run == p->cin && p->dil_w == 1) {
        for (int64_t t = 0; t < count; t++, cg_next_pixel(p, &px))
            for (int64_t kh = c0 / row_width; kh * row_width < c1; kh++) {
                int64_t lo = kh * row_width > c0 ? kh * row_width : c0;
                int64_t hi = min64(c1, (kh + 1) * row_width);
                pack_kernel_row(p, x, &px, kh, lo - kh * row_width, hi - kh * row_width,
                                col + t * width + (lo - c0));
            }
        return;
    }
    for (int64_t t = 0; t < count; t++, cg_next_pixel(p, &px))
        for (int64_t tap = c0 / run; tap * run < c1; tap++) {
            int64_t lo = tap * run > c0 ? tap * run : c0, hi = min64(c1, (tap + 1) * run);
            int64_t at = cg_x_index(p, &px, tap / p->kernel_w, tap % p->kernel_w,
                                    blk->group_first * run + (lo - tap * run));
            float *dst = col + t * width + (lo - c0);
            /* fp16: the groups' runs converted in one go where they fit */
            const float *src = fp32 && at >= 0 ? (const float *)x + at : converted;
            int64_t span = (groups - 1) * run + (hi - lo);
            int one_go = !fp32 && at >= 0 && span <= PACK_CONVERT_FLOATS;
            if (one_go)
                cg_load_floats(converted, x, at, span, p->dtype_size);
            for (int64_t g = 0; g < groups; g++, dst += group_stride) {
                if (at < 0)
                    memset(dst, 0, (size_t)(hi - lo) * sizeof(float));
                else if (fp32 || one_go)
                    cg_copy_floats(dst, src + g * run, hi - lo);
                else
                    cg_load_floats(dst, x, at + g * run, hi - lo, p->dtype_size);
            }
        }
}

/* dyt[t][c] = dy[first + t][channel + c] as floats. */
static void pack_dy(const cg_plan *p, const void *dy, int64_t channel, int64_t channels,
                    int64_t first, int64_t count, float *dyt)
{
    for (int64_t t = 0; t < count; t++)
        cg_load_floats(dyt + t * channels, dy, (first + t) * p->cout + channel, channels,
                       p->dtype_size);
}

/* dy's channels a block reads: from its first group's co_first to its last
 * group's co_last, one span of each row of dy. */
static int64_t dy_span(const cg_plan *p, const cg_dw_block *blk)
{
    return (blk->group_last - blk->group_first - 1) * p->cout_g + blk->co_last - blk->co_first;
}

int64_t cg_general_scratch_floats(const cg_plan *plan, int64_t tile_rows, const cg_dw_block *blk)
{
    if (plan->path == CG_PATH_1X1 && plan->dtype_size == sizeof(float))
        return 0;
    int64_t groups = blk->group_last - blk->group_first, width = blk->col_last - blk->col_first;
    int64_t dy_tile = plan->dtype_size == sizeof(float) ? 0 : tile_rows * dy_span(plan, blk);
    return tile_rows * width * groups + dy_tile;
}

/* Rows of the sum from `row` on that are contiguous in both dy and x and all
 * inside the input, for fp32 1x1 (stride 1, no pad: pixel (n, oh, ow) reads
 * x[n][oh][ow]). Returns 0 and sets *skip where the rows read only zeros. */
static int64_t direct_run(const cg_plan *p, int64_t row, int64_t last, int64_t *skip)
{
    cg_pixel px = cg_pixel_of_row(p, row);
    *skip = 0;
    if (px.oh >= p->in_h) { /* the rest of this image is below the input */
        *skip = min64(last, (px.n + 1) * p->out_h * p->out_w) - row;
        return 0;
    }
    if (px.ow >= p->in_w) { /* the rest of this line is right of the input */
        *skip = min64(last, row + p->out_w - px.ow) - row;
        return 0;
    }
    if (p->out_w != p->in_w) /* to the end of the line's valid part */
        return min64(last - row, min64(p->in_w, p->out_w) - px.ow);
    if (p->out_h != p->in_h) /* to the end of the image's valid lines */
        return min64(last, (px.n * p->out_h + min64(p->in_h, p->out_h)) * p->out_w) - row;
    return last - row;
}

static void direct_1x1_rows(const cg_plan *p, const float *dy, const float *x,
                            const cg_dw_block *blk, int64_t first, int64_t last, float beta,
                            float *dst)
{
    const int channels = (int)(blk->co_last - blk->co_first);
    const int width = (int)(blk->col_last - blk->col_first);
    const int64_t co_first = blk->co_first;
    dst += blk->col_first;
    int wrote = 0;
    for (int64_t row = first; row < last;) {
        int64_t skip, len = min64(direct_run(p, row, last, &skip), INT_MAX / 2);
        if (len == 0) {
            row += skip;
            continue;
        }
        cg_pixel px = cg_pixel_of_row(p, row);
        const float *xrow =
            x + ((px.n * p->in_h + px.oh) * p->in_w + px.ow) * p->cin + blk->col_first;
        cg_gemm_atb(channels, width, (int)len, dy + row * p->cout + co_first, (int)p->cout, xrow,
                    (int)p->cin, wrote ? 1.0f : beta, dst, (int)p->cin);
        wrote = 1;
        row += len;
    }
    if (!wrote && beta == 0.0f) /* every row read padding: the sum is zero */
        for (int co = 0; co < channels; co++)
            memset(dst + (size_t)co * (size_t)p->cin, 0, (size_t)width * sizeof(float));
}

void cg_general_rows(const cg_plan *plan, const void *dy, const void *x, const cg_dw_block *blk,
                     int64_t first, int64_t last, int64_t tile_rows, float *scratch, float beta,
                     float *dst)
{
    const int64_t channels = blk->co_last - blk->co_first, row_len = plan->row_len;
    if (plan->path == CG_PATH_1X1 && plan->dtype_size == sizeof(float)) {
        direct_1x1_rows(plan, dy, x, blk, first, last, beta, dst);
        return;
    }
    const int64_t groups = blk->group_last - blk->group_first;
    const int64_t width = blk->col_last - blk->col_first;
    float *col = scratch, *dy_tile = scratch + groups * tile_rows * width;
    const int64_t span = dy_span(plan, blk),
                  span_first = blk->group_first * plan->cout_g + blk->co_first;
    for (int64_t row = first; row < last; row += tile_rows) {
        int64_t count = min64(tile_rows, last - row);
        pack_im2col(plan, x, blk, row, count, col);
        /* A of group g: dy's rows in place (fp32), or converted once for all groups */
        const float *a = dy_tile;
        int64_t lda = span;
        if (plan->dtype_size == sizeof(float)) {
            a = (const float *)dy + row * plan->cout + span_first;
            lda = plan->cout;
        } else {
            pack_dy(plan, dy, span_first, span, row, count, dy_tile);
        }
        for (int64_t g = 0; g < groups; g++)
            cg_gemm_atb((int)channels, (int)width, (int)count, a + g * plan->cout_g, (int)lda,
                        col + g * count * width, (int)width, row == first ? beta : 1.0f,
                        dst + g * channels * row_len + blk->col_first, (int)row_len);
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
