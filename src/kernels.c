/* SPDX-License-Identifier: MIT */
#include "kernels.h"

#include <string.h>

#include "gemm/gemm.h"
#include "kernels/context.h"
#include "kernels/geometry.h"
#include "trace.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t round_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

/* ---- the packed driver of the weight gradient ------------------------- */

/* dw's block (+)= dy^T im2col(x) in the manner of BLIS: for each pass of kc
 * rows of the sum, dy's channels are packed into A panels (kc steps of mr
 * floats), then im2col(x) one B micro-panel (kc steps of nr floats) at a
 * time, straight from the tensors (fp16 converted on the way), each
 * multiplied by every A panel while it is fresh in L1. The packing reads
 * through tables made once a pass (cg_pack_rows: where each row's segment
 * of x starts and which of its columns are inside the input), so a
 * micro-panel is one pack_rows call a segment, not a call a row. The panels
 * are read in order, so no step of the sum touches a new line of dy or x,
 * as reading them in place did. */

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

/* An im2col row is made of segments, each one run of x: a kernel row where
 * the group is all of x's channels and dilation_w is 1, else a tap. */
static int by_kernel_rows(const cg_plan *p)
{
    return p->cin_g == p->cin && p->dil_w == 1;
}

static int64_t segment_width(const cg_plan *p)
{
    return by_kernel_rows(p) ? p->kernel_w * p->cin : p->cin_g;
}

/* Segments [*s0, *s1) hold columns [c0, c1). */
static void segments_of(const cg_plan *p, int64_t c0, int64_t c1, int64_t *s0, int64_t *s1)
{
    const int64_t w = segment_width(p);
    *s0 = c0 / w;
    *s1 = c1 > c0 ? (c1 - 1) / w + 1 : *s0;
}

/* Whether blk's groups are packed together: groups whose whole dw block
 * fits one A panel and one B micro-panel (few channels a group) pack from
 * one read of each row of dy and tap of x for all of them, each group's
 * columns into its own panels, where a pass per group would pack a few
 * floats a call. */
static int groups_together(const cg_plan *p, const cg_dw_block *blk, const cg_gemm_blocking *bl)
{
    return blk->group_last - blk->group_first > 1 && blk->co_first == 0 &&
           blk->co_last == p->cout_g && p->cout_g <= bl->mr && blk->col_first == 0 &&
           blk->col_last == p->row_len && p->row_len <= bl->nr && !by_kernel_rows(p);
}

/* Whether blk is whole groups of a few channels each, as many in as out:
 * the grouped_rows kernels' shifted depthwise sums (kernels/grouped_rows_body.h)
 * rather than packed GEMMs of a few floats a row. */
static int grouped_few(const cg_plan *p, const cg_dw_block *blk)
{
    return cg_grouped_few(p) && blk->co_first == 0 && blk->co_last == p->cout_g &&
           blk->col_first == 0 && blk->col_last == p->row_len;
}

/* Whether blk is whole rows of whole groups of small dw rows: the
 * outer_rows kernels' sums in registers (kernels/outer_rows_body.h). */
static int outer_rows(const cg_plan *p, const cg_dw_block *blk)
{
    return cg_outer_rows_fit(p) && blk->co_first == 0 && blk->co_last == p->cout_g &&
           blk->col_first == 0 && blk->col_last == p->row_len;
}

/* ---- the weight gradient in place (gemm_runs) ------------------------- */

/* Where a group has few output channels, the packed path's B micro-panel
 * (im2col(x), from L2) serves few rows of A and its packing is a fifth of
 * the time (r50_3x3_56: 64 channels). There dy's channels and x's are read
 * where they lie instead: for one tap, consecutive output pixels of an output
 * row are evenly spaced in dy (cout floats) and in x (stride_w * cin), so a
 * stretch of an output row through a tap is a run of the gemm_runs kernel,
 * which broadcasts dy's channels and loads x's in vectors, a pass's dy
 * staying in L1 from one tap to the next. The choice depends on the shape
 * alone, so every mask and `_p` take the same path and sum in the same
 * order: each pass (whole output rows) from zero, in row order, padding
 * skipped. Measured against the packed path (in-process A/B, medians and
 * bests of 31 interleaved pairs, the Xeon of the README): r50_3x3_56
 * 1.04-1.09x, its batch-1 layer 1.04-1.11x; with 128 output channels a group
 * 0.93-0.95x, so not there.
 *
 * A 1x1 kernel whose x rows are at most four vectors (narrow_one_tap) takes
 * the runs too, whatever its output channels: with one tap there is no reuse
 * of dy from tap to tap to keep in L1, so its passes are the packed path's kc
 * rows, whose dy the runs read from L2 once per chunk of x's channels (two
 * chunks at most), where the packed path wrote and read all of it again in
 * panels for only those chunks. In-process A/B on the AMD EPYC of the README
 * (family 26, medians of 11 pairs, 1 / 2 cores): 1x1 64 -> 256 on 56x56
 * (r50_1x1_56) 1.07x / 1.11x, 32 -> 128 1.60x / 1.62x, 48 -> 256 1.12x /
 * 1.23x, 64 -> 512 1.13x / 1.14x, fp16 64 -> 256 0.99x / 1.00x; with 96
 * input channels 0.97x / 1.09x, with 128 or more 0.81-0.97x and with stride 2
 * 0.89x / 1.00x, so not there; on the AVX2 kernels 32 -> 128 1.20x / 1.20x,
 * but 64 -> 256 (eight vectors) 0.86x / 0.87x. */
enum {
    RUNS_MIN_CHANNELS = 16, /* a tap's input channels, a vector at least */
    RUNS_MOST_COUT = 64,    /* output channels a group */
    RUNS_MIN_WIDTH = 8,     /* output pixels a row: a run's steps */
    RUNS_MOST = 72          /* runs a pass and tap */
};

/* A 1x1 kernel of stride 1 whose x rows are at most four of the kernels'
 * vectors. */
static int narrow_one_tap(const cg_plan *p)
{
    return p->taps == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->cin_g <= 4 * cg_gemm_blocking_here()->vec;
}

/* Rows a pass of runs_rows: at most kc, and, but for narrow_one_tap, as many
 * as keep the pass's dy (a group's channels a row) in three quarters of L1;
 * whole output rows where that holds one. */
static int64_t runs_pass(const cg_plan *p, int64_t kc)
{
    const int64_t fit = cg_kernels()->l1_bytes * 3 / 4 / (p->cout_g * (int64_t)sizeof(float));
    kc = max64(1, narrow_one_tap(p) ? kc : min64(kc, fit));
    return kc >= p->out_w ? kc / p->out_w * p->out_w : kc;
}

/* Output rows a pass touches at most (a pass may start inside one): a run
 * each per tap. */
static int64_t pass_output_rows(const cg_plan *p, int64_t kc)
{
    return (runs_pass(p, kc) + p->out_w - 1) / p->out_w + 1;
}

/* Whether fp16's copies of a pass's input rows (runs_rows: in_w * cin_g
 * floats each) stay in L2, so the runs read them from cache. */
static int row_copies_fit(const cg_plan *p, int64_t kc)
{
    return pass_output_rows(p, kc) * p->in_w * p->cin_g <=
           cg_kernels()->l2_bytes / (int64_t)sizeof(float);
}

/* fp16 tensors reach the runs as floats: a pass's rows of dy (the block's
 * channels), and the input rows of its output rows, converted into the
 * core's scratch once a pass (x: and kernel row), where the packed path
 * converted each of them once a pass and tap (hp_ 0.65x fp_ on the stem's
 * weight gradient with fp32 in place, fp16 packed). The runs are the fp32
 * ones, so the two sum the same products in the same order. */
static int halves(const cg_plan *p)
{
    return p->dtype_size != sizeof(float);
}

static int in_place(const cg_plan *p, int64_t kc)
{
    return cg_kernels()->gemm_runs && p->cin_g >= RUNS_MIN_CHANNELS &&
           (p->cout_g <= RUNS_MOST_COUT || narrow_one_tap(p)) && p->out_w >= RUNS_MIN_WIDTH &&
           pass_output_rows(p, kc) <= RUNS_MOST && (!halves(p) || row_copies_fit(p, kc));
}

/* Where the runs find dy: row r's first channel of the block at
 * at + (r - first_row) * step. */
typedef struct dy_view {
    const float *at;
    int64_t first_row, step;
} dy_view;

/* dy's rows [r0, r1), channels [c0, c0 + cn): in place (fp32), else
 * converted into buf (pass * cn floats). */
static dy_view dy_view_of(const cg_plan *p, const void *dy, int64_t r0, int64_t r1, int64_t c0,
                          int64_t cn, float *buf)
{
    if (!halves(p))
        return (dy_view){(const float *)dy + c0, 0, p->cout};
    const int64_t packing = cg_trace_inner_start();
    for (int64_t r = r0; r < r1; r++)
        cg_load_floats(buf + (r - r0) * cn, dy, r * p->cout + c0, cn, p->dtype_size);
    cg_trace_inner_end(packing);
    return (dy_view){buf, r0, cn};
}

/* Where the runs find x: in place, pixel = cin floats a pixel; or, for
 * the pass's output row t, a copy of its input row at rows + t * row_floats,
 * channels from c_first, pixel floats a pixel. */
typedef struct x_view {
    const float *x, *rows;
    int64_t row_floats, pixel, c_first;
} x_view;

/* x's rows for kernel row kh of the pass [r0, r1): in place (fp32), else
 * each output row's input row, channels [c0, c0 + cn), converted into buf
 * (pass_output_rows rows of in_w * cn floats; the runs never reach the
 * padding). */
static x_view x_view_of(const cg_plan *p, const void *x, int64_t r0, int64_t r1, int64_t kh,
                        int64_t c0, int64_t cn, float *buf)
{
    if (!halves(p))
        return (x_view){x, NULL, 0, p->cin, 0};
    const int64_t row_floats = p->in_w * cn, packing = cg_trace_inner_start();
    int64_t t = 0;
    for (int64_t row = r0; row < r1; t++) {
        const cg_pixel px = cg_pixel_of_row(p, row);
        const int64_t iy = px.oh * p->stride_h + kh * p->dil_h - p->pad_u;
        const int64_t at = (px.n * p->in_h + iy) * p->in_w * p->cin + c0;
        const int64_t pieces = cn == p->cin ? 1 : p->in_w; /* the whole row, or a pixel's */
        for (int64_t i = 0; iy >= 0 && iy < p->in_h && i < pieces; i++)
            cg_load_floats(buf + t * row_floats + i * cn, x, at + i * p->cin, row_floats / pieces,
                           p->dtype_size);
        row = min64(r1, row + p->out_w - px.ow);
    }
    cg_trace_inner_end(packing);
    return (x_view){NULL, buf, row_floats, cn, c0};
}

/* Channel c of pixel ix of input row iy of image n, which output row t of
 * the pass reads. */
static const float *x_at(const cg_plan *p, const x_view *v, int64_t t, int64_t n, int64_t iy,
                         int64_t ix, int64_t c)
{
    const float *row =
        v->rows ? v->rows + t * v->row_floats : v->x + (n * p->in_h + iy) * p->in_w * v->pixel;
    return row + ix * v->pixel + (c - v->c_first);
}

/* The runs of rows [r0, r1) of the sum through tap (kh, kw), x's channels
 * from ci0: the stretches of each output row whose source pixel is inside
 * x. Returns their count. */
static int tap_runs(const cg_plan *p, const dy_view *dy, const x_view *x, int64_t r0, int64_t r1,
                    int64_t kh, int64_t kw, int64_t ci0, cg_gemm_run *run)
{
    /* output columns whose tap kw reads inside x: ix = ow*sw + kw*dw - pl */
    const int64_t off = kw * p->dil_w - p->pad_l;
    const int64_t ow_lo = off >= 0 ? 0 : (-off + p->stride_w - 1) / p->stride_w;
    const int64_t ow_hi =
        off >= p->in_w ? 0 : min64(p->out_w, (p->in_w - 1 - off) / p->stride_w + 1);
    int n = 0;
    for (int64_t row = r0, t = 0; row < r1; t++) {
        const cg_pixel px = cg_pixel_of_row(p, row);
        const int64_t end = min64(r1, row + p->out_w - px.ow);
        const int64_t iy = px.oh * p->stride_h + kh * p->dil_h - p->pad_u;
        const int64_t lo = max64(px.ow, ow_lo), hi = min64(px.ow + (end - row), ow_hi);
        if (iy >= 0 && iy < p->in_h && lo < hi) {
            const int64_t first = row + (lo - px.ow);
            run[n++] = (cg_gemm_run){dy->at + (first - dy->first_row) * dy->step,
                                     x_at(p, x, t, px.n, iy, lo * p->stride_w + off, ci0), hi - lo};
        }
        row = end;
    }
    return n;
}

/* ---- prefetching the next pass -------------------------------------- */

/* The packers (or, on the runs, the kernels' first calls) read dy and x
 * from memory once a pass, and the kernels then compute from the caches for
 * far longer than that takes: each kernel call prefetches its share of the
 * next pass's lines into L2 (list.h), so the pass finds them there. */
enum { LINE = 64, MOST_PREFETCH_BYTES = 1 << 20 };

typedef struct prefetcher {
    const char *at[2]; /* dy's and x's spans */
    int64_t left[2];   /* bytes of each still to prefetch */
    int64_t per_call;  /* lines a kernel call */
} prefetcher;

/* Span i: elements [first, last) of a tensor of `total`, clamped to it. */
static void span(prefetcher *pf, int i, const void *base, int64_t first, int64_t last,
                 int64_t total, size_t dtype_size)
{
    first = first < 0 ? 0 : first > total ? total : first;
    last = last < first ? first : last > total ? total : last;
    pf->at[i] = (const char *)base + first * (int64_t)dtype_size;
    pf->left[i] = min64((last - first) * (int64_t)dtype_size, MOST_PREFETCH_BYTES);
}

/* What the pass over rows [r, r + kb) reads, spread over `calls` kernel
 * calls: dy's rows, and the input lines their pixels' kernel rows reach. */
static prefetcher prefetch_pass(const cg_plan *p, const void *dy, const void *x, int64_t r,
                                int64_t kb, int64_t calls)
{
    prefetcher pf = {{NULL, NULL}, {0, 0}, 0};
    if (kb <= 0)
        return pf;
    span(&pf, 0, dy, r * p->cout, (r + kb) * p->cout, p->rows * p->cout, p->dtype_size);
    int64_t first, last;
    cg_input_span(p, r, kb, &first, &last);
    span(&pf, 1, x, first, last, p->batch * p->in_h * p->in_w * p->cin, p->dtype_size);
    const int64_t lines = (pf.left[0] + pf.left[1]) / LINE + 2;
    pf.per_call = (lines + calls - 1) / calls;
    return pf;
}

/* The next call's share of the lines: [*from, *to), or NULL, NULL. */
static void prefetch_share(prefetcher *pf, const char **from, const char **to)
{
    const int i = pf->left[0] > 0 ? 0 : 1;
    *from = *to = NULL;
    if (pf->left[i] <= 0)
        return;
    const int64_t bytes = min64(pf->left[i], pf->per_call * LINE);
    *from = pf->at[i];
    *to = *from + bytes;
    pf->at[i] += bytes;
    pf->left[i] -= bytes;
}

/* Scratch of runs_rows: none for fp32; fp16's converted dy and x rows. */
static int64_t runs_scratch_floats(const cg_plan *p, int64_t kc, const cg_dw_block *blk)
{
    return halves(p) ? runs_pass(p, kc) * (blk->co_last - blk->co_first) +
                           pass_output_rows(p, kc) * p->in_w * p->cin_g
                     : 0;
}

/* db_sums (cg_general_rows') += dy's rows [r0, r1), every channel. */
static void add_db(const cg_plan *p, const void *dy, int64_t r0, int64_t r1, double *db_sums)
{
    if (db_sums)
        cg_kernels()->sum_rows(db_sums, (const float *)dy + r0 * p->cout, p->cout, r1 - r0,
                               p->cout);
}

/* cg_general_rows on the gemm_runs kernel (in_place). For each pass: a
 * kernel row, a chunk of its channels, then its taps (the x lines of the
 * chunk stay in L1 from one tap to the next), then the blocks of mr output
 * channels. A chunk is at most a micro-panel wide, shared out in whole
 * vectors (cg_rows_panel). */
static void runs_rows(const cg_plan *p, const void *dy, const void *x, const cg_dw_block *blk,
                      int64_t first, int64_t last, int64_t kc, float *scratch, float beta,
                      float *dst, double *db_sums)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    cg_gemm_runs_fn *kernel = cg_kernels()->gemm_runs;
    const int64_t m = blk->co_last - blk->co_first, cin_g = p->cin_g;
    const int64_t chunks = (cin_g + bl->nr - 1) / bl->nr;
    const int64_t pass = runs_pass(p, kc);
    const int64_t calls = (blk->group_last - blk->group_first) * p->taps * chunks *
                          ((m + bl->mr - 1) / bl->mr); /* kernel calls a pass, at most */
    float *dy_buf = scratch, *x_buf = halves(p) ? scratch + pass * m : NULL; /* fp16 only */
    cg_gemm_run run[RUNS_MOST], moved[RUNS_MOST];
    for (int64_t r0 = first; r0 < last; r0 += pass) {
        const int64_t r1 = min64(last, r0 + pass);
        const float step_beta = r0 == first ? beta : 1.0f;
        prefetcher next = prefetch_pass(p, dy, x, r1, min64(pass, last - r1), calls);
        add_db(p, dy, r0, r1, db_sums);
        for (int64_t g = blk->group_first; g < blk->group_last; g++) {
            float *dst_g = dst + (g - blk->group_first) * m * p->row_len;
            const dy_view dyr = dy_view_of(p, dy, r0, r1, g * p->cout_g + blk->co_first, m, dy_buf);
            for (int64_t kh = 0; kh < p->kernel_h; kh++) {
                const x_view xr = x_view_of(p, x, r0, r1, kh, g * cin_g, cin_g, x_buf);
                for (int64_t q = 0; q < chunks; q++) {
                    int64_t c0, width;
                    cg_rows_panel(bl, cin_g, 1, q, &c0, &width);
                    for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                        /* the chunk's columns in the block */
                        const int64_t tap = kh * p->kernel_w + kw;
                        const int64_t j0 = max64(blk->col_first, tap * cin_g + c0);
                        const int64_t j1 = min64(blk->col_last, tap * cin_g + c0 + width);
                        if (j0 >= j1)
                            continue;
                        const int runs = tap_runs(p, &dyr, &xr, r0, r1, kh, kw,
                                                  g * cin_g + j0 - tap * cin_g, run);
                        for (int64_t i = 0; i < m; i += bl->mr) {
                            const char *from, *to;
                            prefetch_share(&next, &from, &to);
                            for (int k = 0; k < runs; k++)
                                moved[k] = (cg_gemm_run){run[k].a + i, run[k].b, run[k].len};
                            kernel((int)min64(bl->mr, m - i), (int)(j1 - j0), runs, moved, dyr.step,
                                   p->stride_w * xr.pixel, step_beta, dst_g + i * p->row_len + j0,
                                   (int)p->row_len, from, to);
                        }
                    }
                }
            }
        }
    }
}

/* ---- a few input channels: kernel rows in place, dw transposed -------- */

/* Where the one group has fewer input channels than a vector (a first
 * layer: the stem's 3), or fewer than two vectors of them and at most
 * RUNS_MOST_COUT output channels (16 -> 32: the runs' one-vector tiles are
 * load-bound; this path 1.3-1.4x there, 0.9-0.97x with 128 or more), and
 * its taps are adjacent (dilation 1), a pixel's kernel row is one stretch
 * of x, kernel_w * cin floats, and consecutive output pixels' are
 * stride_w * cin floats apart. The gemm_runs kernel then broadcasts a
 * kernel row's floats and loads dy's channels in vectors: it sums dw's
 * transpose ([column][channel]) in the core's scratch, which is transposed
 * into dst once a call (dw is small here: the stem's 37 KB). The input row
 * a run reads is first copied with its padding as zeros (ring_row), so an
 * output row is one run whatever its edges (the packed path's panels are 48 columns
 * wide for the stem's 147: 4 panels, the last of 3, and its packing was a
 * third of the time). fp16's dy is converted a pass at a time, as in
 * runs_rows. */
enum { FEW_MOST_ROWS = RUNS_MOST }; /* output rows a pass */

/* The padded input rows few_rows keeps: a pass's, for all its kernel rows
 * (input row o * stride_h + kh * dil_h of output row o in slot (o * per_row
 * + kh * per_kernel_row) % slots), so that a row the next pass reads again
 * (the stem: 5 of each output row's 7) is copied once, not once for each
 * output row reading it. Where that span is more rows than a pass reads (a
 * stride or dilation far past the kernel: rows shared seldom or never), a
 * slot an output row instead, reused from one kernel row to the next. Either
 * way one kernel row's rows in a pass take distinct slots. */
typedef struct ring_shape {
    int64_t slots, per_row, per_kernel_row;
} ring_shape;

static ring_shape ring_of(const cg_plan *p, int64_t kc)
{
    const int64_t rows = pass_output_rows(p, kc);
    const int64_t span = (rows - 1) * p->stride_h + (p->kernel_h - 1) * p->dil_h + 1;
    if (span > rows * p->kernel_h)
        return (ring_shape){rows, 1, 0};
    return (ring_shape){span, p->stride_h, p->dil_h};
}

static int few_in_place(const cg_plan *p, int64_t kc)
{
    const int few =
        p->cin < RUNS_MIN_CHANNELS || (p->cin < 2 * RUNS_MIN_CHANNELS && p->cout <= RUNS_MOST_COUT);
    return cg_kernels()->gemm_runs && p->groups == 1 && p->dil_w == 1 && few &&
           !cg_outer_rows_fit(p) && p->cout >= RUNS_MIN_CHANNELS && p->out_w >= RUNS_MIN_WIDTH &&
           pass_output_rows(p, kc) <= FEW_MOST_ROWS && cg_padded_row_near_x(p);
}

/* Scratch of few_rows: the transposed sums, the ring of padded input rows
 * and its tags, and fp16's converted dy. */
static int64_t few_scratch_floats(const cg_plan *p, int64_t kc, const cg_dw_block *blk)
{
    const int64_t co_n = blk->co_last - blk->co_first;
    return p->row_len * co_n + ring_of(p, kc).slots * (cg_padded_row_floats(p) + 2) + 1 +
           (halves(p) ? runs_pass(p, kc) * co_n : 0);
}

/* Input row iy of image n, padded (cg_pad_row), in the ring's slot for
 * output row o = n * out_h + oh reading it through kernel row kh: copied
 * only where the slot holds another row (tags: n * in_h + iy, -1 for none).
 * The rows of one kernel row and pass take distinct slots, so none is
 * overwritten while its run waits for the kernel. */
static const float *ring_row(const cg_plan *p, const void *x, const cg_pixel *px, int64_t iy,
                             int64_t kh, float *ring, int64_t *tags, const ring_shape *rs)
{
    const int64_t o = px->n * p->out_h + px->oh, line = px->n * p->in_h + iy;
    const int64_t slot = (o * rs->per_row + kh * rs->per_kernel_row) % rs->slots;
    float *row = ring + slot * cg_padded_row_floats(p);
    if (tags[slot] != line) {
        const int64_t packing = cg_trace_inner_start();
        cg_pad_row(p, x, px->n, iy, row);
        cg_trace_inner_end(packing);
        tags[slot] = line;
    }
    return row;
}

/* cg_general_rows for few_in_place: per pass and kernel row, a run an
 * output row (its input row padded into `rows`), each block of columns of
 * the kernel row against each chunk of the block's channels. */
static void few_rows(const cg_plan *p, const void *dy, const void *x, const cg_dw_block *blk,
                     int64_t first, int64_t last, int64_t kc, float *scratch, float beta,
                     float *dst, double *db_sums)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    cg_gemm_runs_fn *kernel = cg_kernels()->gemm_runs;
    const int64_t co_n = blk->co_last - blk->co_first, seg = p->kernel_w * p->cin;
    /* the block's channels at once where the kernel's tile is that wide (the
     * stem's 64: AVX-512's 7 x 64 tiles read each kernel row's floats once,
     * not once for each 32 channels), else chunks of micro-panels */
    const int whole = co_n <= cg_kernels()->entry.gemm_runs->nr;
    const int64_t pass = runs_pass(p, kc), chunks = whole ? 1 : (co_n + bl->nr - 1) / bl->nr;
    /* kernel calls a pass, at most */
    const int64_t calls = p->kernel_h * chunks * ((seg + bl->mr - 1) / bl->mr);
    const ring_shape rs = ring_of(p, kc);
    float *sums = scratch, *ring = scratch + p->row_len * co_n; /* sums[j][co] */
    float *dy_buf = ring + rs.slots * cg_padded_row_floats(p);
    const int64_t tags_at = round_up(dy_buf - scratch + (halves(p) ? pass * co_n : 0), 2);
    int64_t *tags = (int64_t *)(void *)(scratch + tags_at); /* 8-byte aligned */
    for (int64_t j = blk->col_first; j < blk->col_last; j++)
        cg_zero_floats(sums + j * co_n, co_n);
    for (int64_t slot = 0; slot < rs.slots; slot++)
        tags[slot] = -1;
    cg_gemm_run run[FEW_MOST_ROWS], moved[FEW_MOST_ROWS];
    for (int64_t r0 = first; r0 < last; r0 += pass) {
        const int64_t r1 = min64(last, r0 + pass);
        prefetcher next = prefetch_pass(p, dy, x, r1, min64(pass, last - r1), calls);
        const dy_view dyr = dy_view_of(p, dy, r0, r1, blk->co_first, co_n, dy_buf);
        add_db(p, dy, r0, r1, db_sums);
        for (int64_t kh = 0; kh < p->kernel_h; kh++) {
            /* the kernel row's columns in the block */
            const int64_t j0 = max64(blk->col_first, kh * seg);
            const int64_t j1 = min64(blk->col_last, (kh + 1) * seg);
            if (j0 >= j1)
                continue;
            int runs = 0;
            for (int64_t row = r0; row < r1;) {
                const cg_pixel px = cg_pixel_of_row(p, row);
                const int64_t end = min64(r1, row + p->out_w - px.ow);
                const int64_t iy = px.oh * p->stride_h + kh * p->dil_h - p->pad_u;
                if (iy >= 0 && iy < p->in_h) {
                    const float *padded = ring_row(p, x, &px, iy, kh, ring, tags, &rs);
                    run[runs++] =
                        (cg_gemm_run){padded + px.ow * p->stride_w * p->cin + (j0 - kh * seg),
                                      dyr.at + (row - dyr.first_row) * dyr.step, end - row};
                }
                row = end;
            }
            for (int64_t q = 0; q < chunks; q++) {
                int64_t c0 = 0, width = co_n;
                if (!whole)
                    cg_rows_panel(bl, co_n, 1, q, &c0, &width);
                for (int64_t i = j0; i < j1; i += bl->mr) {
                    const char *from, *to;
                    prefetch_share(&next, &from, &to);
                    for (int k = 0; k < runs; k++)
                        moved[k] = (cg_gemm_run){run[k].a + (i - j0), run[k].b + c0, run[k].len};
                    kernel((int)min64(bl->mr, j1 - i), (int)width, runs, moved,
                           p->stride_w * p->cin, dyr.step, 1.0f, sums + i * co_n + c0, (int)co_n,
                           from, to);
                }
            }
        }
    }
    for (int64_t co = 0; co < co_n; co++) /* dst (+)= the sums' transpose */
        for (int64_t j = blk->col_first; j < blk->col_last; j++) {
            float *d = dst + co * p->row_len + j;
            *d = beta != 0.0f ? *d + sums[j * co_n + co] : sums[j * co_n + co];
        }
}

/* The A panels (a multiple of mr floats a step) and a B micro-panel, or each
 * group's (groups_together), and the tables of dy's rows and of x's
 * segments, for kc rows a pass. */
int64_t cg_general_scratch_floats(const cg_plan *plan, int64_t kc, const cg_dw_block *blk)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    if (few_in_place(plan, kc))
        return few_scratch_floats(plan, kc, blk);
    if (grouped_few(plan, blk) || outer_rows(plan, blk))
        return 0; /* their sums stay in registers */
    if (in_place(plan, kc))
        return runs_scratch_floats(plan, kc, blk);
    int64_t s0, s1;
    segments_of(plan, blk->col_first, blk->col_last, &s0, &s1);
    const int64_t tables = 3 * kc * (1 + s1 - s0); /* int64s */
    const int64_t panels = groups_together(plan, blk, bl)
                               ? (blk->group_last - blk->group_first) * (bl->mr + bl->nr)
                               : round_up(blk->co_last - blk->co_first, bl->mr) + bl->nr;
    return kc * panels + tables * (int64_t)(sizeof(int64_t) / sizeof(float));
}

/* Row t of segment s (relative to the first): at[s*kc + t], lo, hi. */
typedef struct tables {
    int64_t *at, *lo, *hi;
    int64_t kc;
} tables;

static cg_pack_rows rows_of(const tables *tb, int64_t s)
{
    return (cg_pack_rows){tb->at + s * tb->kc, tb->lo + s * tb->kc, tb->hi + s * tb->kc};
}

static void set_row(const tables *tb, int64_t s, int64_t t, int64_t at, int64_t lo, int64_t hi)
{
    tb->at[s * tb->kc + t] = at;
    tb->lo[s * tb->kc + t] = lo;
    tb->hi[s * tb->kc + t] = hi > lo ? hi : lo;
}

/* Segments [s0, s1) of the im2col rows [first, first + kb), as table rows
 * 1.. (row 0 is dy's): a kernel row is x from (iy, ix0), cut where it leaves
 * the input; a tap is all of x's channels at one pixel (group g's are its
 * columns g*cin_g...), or padding. One table serves every group. */
static void make_x_tables(const cg_plan *p, int64_t s0, int64_t s1, int64_t first, int64_t kb,
                          const tables *tb)
{
    const int64_t w = segment_width(p), line = p->in_w * p->cin;
    const int by_kernel_row = by_kernel_rows(p);
    cg_pixel px = cg_pixel_of_row(p, first);
    for (int64_t t = 0; t < kb; t++, cg_next_pixel(p, &px))
        for (int64_t s = s0; s < s1; s++) {
            const int64_t row = 1 + s - s0;
            if (!by_kernel_row) {
                const int64_t at = cg_x_index(p, &px, s / p->kernel_w, s % p->kernel_w, 0);
                set_row(tb, row, t, at < 0 ? 0 : at, 0, at < 0 ? 0 : p->cin);
                continue;
            }
            const int64_t iy = px.oh * p->stride_h + s * p->dil_h - p->pad_u;
            const int64_t ix0 = px.ow * p->stride_w - p->pad_l;
            if (iy < 0 || iy >= p->in_h) {
                set_row(tb, row, t, 0, 0, 0);
                continue;
            }
            const int64_t lo = ix0 < 0 ? min64(-ix0 * p->cin, w) : 0;
            set_row(tb, row, t, (px.n * p->in_h + iy) * line + ix0 * p->cin, lo,
                    min64(w, (p->in_w - ix0) * p->cin));
        }
}

static cg_panel_layout panel_steps(int64_t width, int64_t kb)
{
    return (cg_panel_layout){width, width, kb * width};
}

/* pack_rows or pack_rows_f16, as the plan's tensors are fp32 or fp16. */
static void pack_tensor(const cg_plan *p, float *dst, const cg_panel_layout *to, int64_t kb,
                        int64_t n, const void *src, const cg_pack_rows *rows, int64_t a)
{
    if (p->dtype_size == sizeof(float))
        cg_kernels()->pack_rows(dst, to, kb, n, src, rows, a);
    else
        cg_kernels()->pack_rows_f16(dst, to, kb, n, src, rows, a);
}

/* One pass of groups_together: every group's A panel (its cout_g channels,
 * zeros past them) and B micro-panel (its taps, zeros past row_len), then a
 * kernel call a group. */
static void together_pass(const cg_plan *plan, const void *dy, const void *x,
                          const cg_dw_block *blk, int64_t s0, int64_t s1, int64_t kb,
                          const tables *tb, float *a, float *b, float step_beta, float *dst,
                          prefetcher *next)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const cg_kernel_context *k = cg_kernels();
    const int64_t mr = bl->mr, nr = bl->nr, m = plan->cout_g, row_len = plan->row_len;
    const int64_t groups = blk->group_last - blk->group_first, g0 = blk->group_first;
    const cg_pack_rows dy_rows = rows_of(tb, 0);
    const cg_panel_layout a_groups = {mr, m, kb * mr}, a_rest = {mr, mr - m, kb * mr};
    const cg_panel_layout b_groups = {nr, plan->cin_g, kb * nr},
                          b_rest = {nr, nr - row_len, kb * nr};
    const int64_t packing = cg_trace_inner_start();
    if (m < mr)
        k->pack_rows(a + m, &a_rest, kb, groups * (mr - m), NULL, NULL, 0);
    if (row_len < nr)
        k->pack_rows(b + row_len, &b_rest, kb, groups * (nr - row_len), NULL, NULL, 0);
    pack_tensor(plan, a, &a_groups, kb, groups * m, dy, &dy_rows, g0 * m);
    for (int64_t s = s0; s < s1; s++) { /* tap s: every group's cin_g channels */
        const cg_pack_rows rows = rows_of(tb, 1 + s - s0);
        const int64_t at = g0 * plan->cin_g, n = groups * plan->cin_g;
        pack_tensor(plan, b + s * plan->cin_g, &b_groups, kb, n, x, &rows, at);
    }
    cg_trace_inner_end(packing);
    for (int64_t g = 0; g < groups; g++) {
        const char *from, *to;
        prefetch_share(next, &from, &to);
        bl->kernel((int)m, (int)row_len, (int)kb, a + g * kb * mr, b + g * kb * nr, step_beta, NULL,
                   dst + g * m * row_len, (int)row_len, from, to);
    }
}

/* The way cg_general_rows sums blk's rows: one place decides it for the call
 * and for cg_general_rows_take_turns. */
typedef enum {
    ROWS_GROUPED_FEW,
    ROWS_OUTER,
    ROWS_FEW_IN_PLACE,
    ROWS_IN_PLACE,
    ROWS_PACKED
} rows_path;

static rows_path rows_path_of(const cg_plan *plan, const cg_dw_block *blk, int64_t kc)
{
    if (grouped_few(plan, blk))
        return ROWS_GROUPED_FEW;
    if (outer_rows(plan, blk))
        return ROWS_OUTER;
    if (few_in_place(plan, kc))
        return ROWS_FEW_IN_PLACE;
    return in_place(plan, kc) ? ROWS_IN_PLACE : ROWS_PACKED;
}

int cg_general_rows_take_turns(const cg_plan *plan, const cg_dw_block *blk, int64_t kc)
{
    return blk->group_last - blk->group_first == 1 && rows_path_of(plan, blk, kc) == ROWS_PACKED &&
           !groups_together(plan, blk, cg_gemm_blocking_here());
}

/* The next run of blk's micro-panels in this pass, [*j0, *j1): all of them
 * once (*j1 starts below 0), or what turns gives. */
static int next_panels(const cg_column_turns *turns, int64_t pass, int64_t panels, int64_t *j0,
                       int64_t *j1)
{
    if (turns)
        return turns->take(turns->ctx, pass, j0, j1);
    if (*j1 >= 0)
        return 0;
    *j0 = 0;
    *j1 = panels;
    return panels > 0;
}

void cg_general_rows(const cg_plan *plan, const void *dy, const void *x, const cg_dw_block *blk,
                     int64_t first, int64_t last, int64_t kc, float *scratch, float beta,
                     float *dst, const cg_column_turns *turns, double *db_sums)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const cg_kernel_context *k = cg_kernels();
    if (db_sums)
        memset(db_sums, 0, (size_t)plan->cout * sizeof(double));
    switch (rows_path_of(plan, blk, kc)) {
    case ROWS_GROUPED_FEW:
        k->grouped_rows(plan, dy, x, blk->group_first * plan->cin_g, blk->group_last * plan->cin_g,
                        first, last, beta, dst);
        add_db(plan, dy, first, last, db_sums);
        return;
    case ROWS_OUTER:
        k->outer_rows(plan, dy, x, blk->group_first, blk->group_last, first, last, beta, dst);
        add_db(plan, dy, first, last, db_sums);
        return;
    case ROWS_FEW_IN_PLACE:
        few_rows(plan, dy, x, blk, first, last, kc, scratch, beta, dst, db_sums);
        return;
    case ROWS_IN_PLACE:
        runs_rows(plan, dy, x, blk, first, last, kc, scratch, beta, dst, db_sums);
        return;
    case ROWS_PACKED:
        break;
    }
    const int64_t mr = bl->mr, nr = bl->nr;
    const int64_t m = blk->co_last - blk->co_first, row_len = plan->row_len;
    const int64_t c0 = blk->col_first, c1 = blk->col_last, seg = segment_width(plan);
    const int64_t groups = blk->group_last - blk->group_first;
    const int64_t calls = groups * ((c1 - c0 + nr - 1) / nr) * ((m + mr - 1) / mr) /
                          (turns ? turns->sharers : 1); /* a pass, this core's */
    const int together = groups_together(plan, blk, bl);
    int64_t s0, s1;
    segments_of(plan, c0, c1, &s0, &s1);
    float *a = scratch, *b = a + kc * (together ? groups * mr : round_up(m, mr));
    int64_t *ints = (int64_t *)(b + kc * (together ? groups * nr : nr));
    const int64_t per_table = kc * (1 + s1 - s0);
    const tables tb = {ints, ints + per_table, ints + 2 * per_table, kc};
    const int64_t panels = (c1 - c0 + nr - 1) / nr;
    for (int64_t r0 = first; r0 < last; r0 += kc) {
        const int64_t kb = min64(kc, last - r0);
        const float step_beta = r0 == first ? beta : 1.0f;
        prefetcher next = prefetch_pass(plan, dy, x, r0 + kb, min64(kc, last - r0 - kb), calls);
        /* a table row a row of the sum: dy's row, then x's segments */
        int64_t packing = cg_trace_inner_start();
        for (int64_t t = 0; t < kb; t++)
            set_row(&tb, 0, t, (r0 + t) * plan->cout + blk->co_first, 0, plan->cout);
        make_x_tables(plan, s0, s1, r0, kb, &tb);
        cg_trace_inner_end(packing);
        add_db(plan, dy, r0, r0 + kb, db_sums);
        if (together) {
            together_pass(plan, dy, x, blk, s0, s1, kb, &tb, a, b, step_beta, dst, &next);
            continue;
        }
        const cg_pack_rows dy_rows = rows_of(&tb, 0);
        const cg_panel_layout a_panels = panel_steps(mr, kb), b_panel = panel_steps(nr, kb);
        if (m % mr) /* the last A panel's rows past m: zero for the pass, every group */
            k->pack_rows(a + m / mr * kb * mr + m % mr, &a_panels, kb, mr - m % mr, NULL, NULL, 0);
        for (int64_t g = blk->group_first; g < blk->group_last; g++) {
            float *dst_g = dst + (g - blk->group_first) * m * row_len;
            /* A: the block's channels of group g */
            packing = cg_trace_inner_start();
            pack_tensor(plan, a, &a_panels, kb, m, dy, &dy_rows, g * plan->cout_g);
            cg_trace_inner_end(packing);
            /* a tap's columns of group g start at g*cin_g in x's channels */
            const int64_t group_at = by_kernel_rows(plan) ? 0 : g * plan->cin_g;
            for (int64_t p0 = 0, p1 = -1; next_panels(turns, (r0 - first) / kc, panels, &p0, &p1);)
                for (int64_t j = c0 + p0 * nr; j < min64(c1, c0 + p1 * nr); j += nr) {
                    const int64_t w = min64(nr, c1 - j), s_j = j / seg;
                    /* B: columns [j, j + w), packed by the first kernel call
                     * where they lie in one segment, else a pack_rows call
                     * per segment they cross */
                    const int fused = k->gemm_panel_packing && (j + w - 1) / seg == s_j;
                    const cg_pack_rows b_rows = rows_of(&tb, 1 + s_j - s0);
                    packing = cg_trace_inner_start();
                    for (int64_t sg = j / seg; !fused && sg * seg < j + w; sg++) {
                        const int64_t lo = sg * seg > j ? sg * seg : j,
                                      hi = min64(j + w, (sg + 1) * seg);
                        const cg_pack_rows rows = rows_of(&tb, 1 + sg - s0);
                        const int64_t at = group_at + lo - sg * seg;
                        pack_tensor(plan, b + (lo - j), &b_panel, kb, hi - lo, x, &rows, at);
                    }
                    if (w < nr && !fused)
                        k->pack_rows(b + w, &b_panel, kb, nr - w, NULL, NULL, 0);
                    cg_trace_inner_end(packing);
                    for (int64_t i = 0; i < m; i += mr) {
                        const char *from, *to;
                        prefetch_share(&next, &from, &to);
                        const int rows = (int)min64(mr, m - i);
                        if (fused && i == 0)
                            k->gemm_panel_packing(rows, (int)w, (int)kb, a, b, x,
                                                  plan->dtype_size != sizeof(float), &b_rows,
                                                  group_at + j - s_j * seg, step_beta, NULL,
                                                  dst_g + j, (int)row_len, from, to);
                        else
                            bl->kernel(rows, (int)w, (int)kb, a + i * kb, b, step_beta, NULL,
                                       dst_g + i * row_len + j, (int)row_len, from, to);
                    }
                }
        }
        if (turns)
            turns->pass_end(turns->ctx);
    }
}

void cg_depthwise_rows(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                       int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                       float *dst, double *db_sums)
{
    const cg_kernel_context *k = cg_kernels();
    /* the 3x3 kernels: adjacent taps, an output channel an input channel */
    const int three = plan->kernel_h == 3 && plan->kernel_w == 3 && plan->dil_h == 1 &&
                      plan->dil_w == 1 && plan->cout_g == 1;
    cg_dwconv_rows_fn *rows = three && k->dwconv3x3_rows ? k->dwconv3x3_rows : k->dwconv_rows;
    rows(plan, dy, x, c_first, c_last, first, last, acc, resume, dst, db_sums);
}
