/* SPDX-License-Identifier: MIT */
/* The training step on the cores of a mask: forward, input gradient, weight
 * gradient and bias gradient, NHWC with OHWI weights or NCHW with OIHW.
 *
 * Each operation is a sequence of packed tiles and one GEMM per group:
 *   forward   y  = col(x) w^T     tiles of output pixels, split among cores
 *   weights   dw = dy^T col(x)    the same tiles; per-core partials, reduced in core order
 *   data      dx = gather(dy) w   tiles of input pixels of one stride phase
 * The input gradient gathers rather than scatters (col2im): all input pixels
 * of one stride phase (iy mod stride_h, ix mod stride_w) are reached by the
 * same kernel taps, so a tile of them is one dense GEMM over exactly those
 * taps. Every dx element is written once, by one core: no zeroing pass, no
 * atomics, and a strided convolution skips the taps that would multiply
 * zeros. NHWC tiles are pixel-major ([pixel][tap][channel]: runs of
 * channels), NCHW tiles channel-major ([channel][tap][pixel]: runs of an
 * image row); either way the column order is the weights' own. Depthwise
 * NHWC (a channel a group) needs no GEMM: see depthwise_core. Bias: each
 * core's sums over its rows of dy, then added in core order. */
#include "conv2d.h"

#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "bias.h"
#include "core_mask/core_mask_internal.h"
#include "fault.h"
#include "gemm/gemm.h"
#include "grad_filter.h"
#include "kernels.h"
#include "kernels/geometry.h"
#include "kernels/tile_prefetch.h"
#include "reduce/reduce.h"
#include "status.h"
#include "thread_scratch.h"
#include "trace.h"

/* Reduction slices and scratch offsets are whole cache lines. */
enum { LINE_FLOATS = 16 };

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

/* ---- the descriptor ---------------------------------------------------- */

/* The validator's words for a cg_conv2d: its own fields, never the
 * operator's. Batches are one field; OH and OW are the output size. */
static const cg_words CONV2D_WORDS = {
    .field = {[CG_F_OUTPUT_BATCH] = "batch",    [CG_F_INPUT_BATCH] = "batch",
              [CG_F_INPUT_H] = "in_h",          [CG_F_INPUT_W] = "in_w",
              [CG_F_OUTPUT_H] = "OH",           [CG_F_OUTPUT_W] = "OW",
              [CG_F_INPUT_CHANNEL] = "in_c",    [CG_F_OUTPUT_CHANNEL] = "out_c",
              [CG_F_KERNEL_H] = "kernel_h",     [CG_F_KERNEL_W] = "kernel_w",
              [CG_F_GROUP] = "groups",          [CG_F_PAD_L] = "pad_left",
              [CG_F_PAD_U] = "pad_top",         [CG_F_DILATION_H] = "dilation_h",
              [CG_F_DILATION_W] = "dilation_w", [CG_F_STRIDE_H] = "stride_h",
              [CG_F_STRIDE_W] = "stride_w",     [CG_F_BUFFER_SIZE] = "the library's buffer",
              [CG_F_PAD_D] = "pad_bottom",      [CG_F_PAD_R] = "pad_right"},
    .x = "x and dx",
    .dy = "y and dy",
    .dw = "w and dw"};

/* One axis of the output size, OH or OW, and the fields it comes from:
 * input, pad before, pad after, kernel, dilation, stride. */
typedef struct extent {
    const char *axis; /* "height" or "width" */
    const char *const *name;
    const int *v;
    int64_t padded, kernel, out; /* the padded input, the dilated kernel, OH or OW */
} extent;

static const char *const HEIGHT_FIELDS[6] = {"in_h",     "pad_top",    "pad_bottom",
                                             "kernel_h", "dilation_h", "stride_h"};
static const char *const WIDTH_FIELDS[6] = {"in_w",     "pad_left",   "pad_right",
                                            "kernel_w", "dilation_w", "stride_w"};

static extent extent_of(const char *axis, const char *const *name, const int *v)
{
    extent e = {axis, name, v, (int64_t)v[0] + v[1] + v[2], (int64_t)v[4] * (v[3] - 1) + 1, 0};
    e.out = e.padded < e.kernel ? 0 : (e.padded - e.kernel) / v[5] + 1;
    return e;
}

static cg_status extent_positive(const extent *e, cg_error *err)
{
    if (e->out >= 1)
        return CG_OK;
    const char *const *n = e->name;
    return cg_fail(err, CG_ERR_BAD_SIZE,
                   "the output %s would be < 1: %s=%d + %s=%d + %s=%d = %lld is under the "
                   "dilated kernel %s %lld = %s=%d*(%s=%d-1)+1",
                   e->axis, n[0], e->v[0], n[1], e->v[1], n[2], e->v[2], (long long)e->padded,
                   e->axis, (long long)e->kernel, n[4], e->v[4], n[3], e->v[3]);
}

/* OH and OW are GEMM dimensions: ints. */
static cg_status extent_fits(const extent *e, cg_error *err)
{
    if (e->out <= INT_MAX)
        return CG_OK;
    const char *const *n = e->name;
    return cg_fail(err, CG_ERR_OVERFLOW,
                   "the output %s %lld = (%s=%d + %s=%d + %s=%d - %lld)/%s=%d + 1 exceeds INT_MAX",
                   e->axis, (long long)e->out, n[0], e->v[0], n[1], e->v[1], n[2], e->v[2],
                   (long long)e->kernel, n[5], e->v[5]);
}

cg_status cg_conv2d_plan(const cg_conv2d *c, cg_plan *plan, cg_error *err)
{
    if (!c)
        return cg_fail(err, CG_ERR_NULL_POINTER, "conv is NULL");
    if (c->layout != CG_LAYOUT_NHWC && c->layout != CG_LAYOUT_NCHW)
        return cg_fail(err, CG_ERR_BAD_LAYOUT,
                       "layout=%d is neither CG_LAYOUT_NHWC (0) nor CG_LAYOUT_NCHW (1)",
                       (int)c->layout);
    /* the operator's rules, on its parameters; the output size comes after */
    ConvParameter p = {.output_batch_ = c->batch,
                       .input_batch_ = c->batch,
                       .input_h_ = c->in_h,
                       .input_w_ = c->in_w,
                       .output_h_ = 1,
                       .output_w_ = 1,
                       .input_channel_ = c->in_c,
                       .output_channel_ = c->out_c,
                       .kernel_h_ = c->kernel_h,
                       .kernel_w_ = c->kernel_w,
                       .group_ = c->groups,
                       .pad_l_ = c->pad_left,
                       .pad_u_ = c->pad_top,
                       .dilation_h_ = c->dilation_h,
                       .dilation_w_ = c->dilation_w,
                       .stride_h_ = c->stride_h,
                       .stride_w_ = c->stride_w,
                       .buffer_size_ = INT_MAX,
                       .pad_d_ = c->pad_bottom,
                       .pad_r_ = c->pad_right};
    cg_status s = cg_plan_check(&p, sizeof(float), &CONV2D_WORDS, plan, err);
    if (s != CG_OK)
        return s;
    const int hv[6] = {c->in_h, c->pad_top, c->pad_bottom, c->kernel_h, c->dilation_h, c->stride_h};
    const int wv[6] = {c->in_w, c->pad_left, c->pad_right, c->kernel_w, c->dilation_w, c->stride_w};
    const extent h = extent_of("height", HEIGHT_FIELDS, hv),
                 w = extent_of("width", WIDTH_FIELDS, wv);
    s = extent_positive(&h, err);
    s = s != CG_OK ? s : extent_positive(&w, err);
    s = s != CG_OK ? s : extent_fits(&h, err);
    s = s != CG_OK ? s : extent_fits(&w, err);
    if (s != CG_OK)
        return s;
    /* image planes are GEMM leading dimensions (int); OH, OW <= INT_MAX here,
     * so their product fits int64 */
    if (h.out * w.out > INT_MAX)
        return cg_fail(err, CG_ERR_OVERFLOW, "the output plane OH=%lld * OW=%lld exceeds INT_MAX",
                       (long long)h.out, (long long)w.out);
    if ((int64_t)c->in_h * c->in_w > INT_MAX)
        return cg_fail(err, CG_ERR_OVERFLOW, "the input plane in_h=%d * in_w=%d exceeds INT_MAX",
                       c->in_h, c->in_w);
    p.output_h_ = (int)h.out;
    p.output_w_ = (int)w.out;
    return cg_plan_check(&p, sizeof(float), &CONV2D_WORDS, plan, err);
}

CG_API cg_status cg_conv2d_check(const cg_conv2d *conv)
{
    cg_plan plan;
    cg_error err;
    return cg_record(cg_conv2d_plan(conv, &plan, &err), &err);
}

CG_API int cg_conv2d_output_h(const cg_conv2d *conv)
{
    cg_plan plan;
    return cg_conv2d_plan(conv, &plan, NULL) == CG_OK ? (int)plan.out_h : 0;
}

CG_API int cg_conv2d_output_w(const cg_conv2d *conv)
{
    cg_plan plan;
    return cg_conv2d_plan(conv, &plan, NULL) == CG_OK ? (int)plan.out_w : 0;
}

/* ---- tensors, taps and tiles ------------------------------------------ */

/* Where element (n, c, h, w) of an activation tensor lives, in elements. */
typedef struct geometry {
    int64_t sn, sc, sh, sw; /* strides */
    int64_t h, w;           /* extent of the image */
} geometry;

static geometry geometry_of(int nchw, int64_t channels, int64_t h, int64_t w)
{
    if (nchw)
        return (geometry){channels * h * w, h * w, w, 1, h, w};
    return (geometry){h * w * channels, 1, w * channels, channels, h, w};
}

/* Taps along one axis: tap t of grid coordinate i reads source coordinate
 * off[t] + i * step. */
typedef struct axis {
    const int64_t *off;
    int64_t count, step;
} axis;

/* Pixels [first, first + count) of the grid of `height` x `width` pixels
 * of image n and, past its end, of the images after it. */
typedef struct tile {
    int64_t n, height, width, first, count;
} tile;

/* A walk over a tile's pixels: grid row i, column j of image n. */
typedef struct tile_pos {
    int64_t n, i, j;
} tile_pos;

static tile_pos tile_start(const tile *tl)
{
    return (tile_pos){tl->n, tl->first / tl->width, tl->first % tl->width};
}

/* Moves `by` <= width pixels along the grid's rows, onto the next image's
 * first row past the last. */
static void tile_advance(const tile *tl, tile_pos *at, int64_t by)
{
    at->j += by;
    if (at->j < tl->width)
        return;
    at->j -= tl->width;
    if (++at->i == tl->height) {
        at->i = 0;
        at->n++;
    }
}

/* [*lo, *hi): the grid columns j in [j0, j1) with 0 <= off + j*step < size. */
static void inside(int64_t off, int64_t step, int64_t size, int64_t j0, int64_t j1, int64_t *lo,
                   int64_t *hi)
{
    int64_t begin, end;
    if (step == 1) { /* the common case, without two divisions */
        begin = -off;
        end = size - off;
    } else {
        begin = off >= 0 ? 0 : (-off + step - 1) / step;
        end = off >= size ? 0 : (size - 1 - off) / step + 1;
    }
    *lo = min64(j1, max64(j0, begin));
    *hi = max64(*lo, min64(j1, end));
}

/* Taps whose source columns are adjacent: one run per kernel row. */
static int adjacent_taps(axis a)
{
    for (int64_t t = 1; t < a.count; t++)
        if (a.off[t] != a.off[t - 1] + 1)
            return 0;
    return a.step >= 1;
}

/* Pixel-major, for `groups` adjacent runs of nc channels from c0 at once:
 * dst[t][g][(th * aw.count + tw) * nc + c] = src(n, c0 + g*nc + c,
 * ah.off[th] + i*ah.step, aw.off[tw] + j*aw.step) for tile pixel t = (i, j),
 * 0 outside the source. Channels are contiguous (sc == 1). */
static void pack_pixel_major(const float *src, const geometry *gm, const tile *tl, axis ah, axis aw,
                             int64_t c0, int64_t nc, int64_t groups, float *dst)
{
    const int64_t tap_row = aw.count * nc, group_len = ah.count * tap_row;
    const int64_t row_len = groups * group_len;
    /* the whole pixel, adjacent taps: a kernel row is one run */
    const int one_run = groups == 1 && nc == gm->sw && adjacent_taps(aw);
    tile_pos at = tile_start(tl);
    for (int64_t t = 0; t < tl->count; t++, tile_advance(tl, &at, 1)) {
        for (int64_t th = 0; th < ah.count; th++) {
            float *seg = dst + t * row_len + th * tap_row;
            int64_t h = ah.off[th] + at.i * ah.step;
            if (h < 0 || h >= gm->h) {
                for (int64_t g = 0; g < groups; g++)
                    cg_zero_floats(seg + g * group_len, tap_row);
                continue;
            }
            const float *line = src + at.n * gm->sn + h * gm->sh + c0;
            if (one_run) {
                int64_t lo, hi, w0 = aw.off[0] + at.j * aw.step;
                inside(w0, 1, gm->w, 0, aw.count, &lo, &hi);
                cg_zero_floats(seg, lo * nc);
                cg_copy_floats(seg + lo * nc, line + (w0 + lo) * gm->sw, (hi - lo) * nc);
                cg_zero_floats(seg + hi * nc, (aw.count - hi) * nc);
                continue;
            }
            for (int64_t tw = 0; tw < aw.count; tw++) {
                int64_t w = aw.off[tw] + at.j * aw.step;
                for (int64_t g = 0; g < groups; g++) {
                    float *to = seg + g * group_len + tw * nc;
                    if (w < 0 || w >= gm->w)
                        cg_zero_floats(to, nc);
                    else
                        cg_copy_floats(to, line + w * gm->sw + g * nc, nc);
                }
            }
        }
    }
}

/* Pixel-minor: dst[row][t], the same elements, row (c * ah.count + th) *
 * aw.count + tw (OIHW's order), or (th * aw.count + tw) * nc + c with
 * tap_major (OHWI's); a grid row's pixels are one run where the source row
 * is contiguous and the step is 1. */
static void pack_channel_major(const float *src, const geometry *gm, const tile *tl, axis ah,
                               axis aw, int64_t c0, int64_t nc, int tap_major, float *dst)
{
    const int64_t count = tl->count;
    for (int64_t c = 0; c < nc; c++)
        for (int64_t th = 0; th < ah.count; th++)
            for (int64_t tw = 0; tw < aw.count; tw++) {
                const int64_t row =
                    tap_major ? (th * aw.count + tw) * nc + c : (c * ah.count + th) * aw.count + tw;
                float *d = dst + row * count;
                tile_pos at = tile_start(tl);
                /* one grid row (or the part of it in the tile) at a time */
                for (int64_t t = 0, j = at.j; t < count; t += tl->width - j, j = 0) {
                    int64_t end = min64(tl->width, j + count - t), lo = end, hi = end;
                    int64_t h = ah.off[th] + at.i * ah.step;
                    float *out = d + t - j; /* out[k] is grid column k of this row */
                    if (h >= 0 && h < gm->h)
                        inside(aw.off[tw], aw.step, gm->w, j, end, &lo, &hi);
                    cg_zero_floats(out + j, lo - j);
                    if (hi > lo) {
                        const float *line = src + at.n * gm->sn + (c0 + c) * gm->sc + h * gm->sh;
                        if (aw.step == 1 && gm->sw == 1)
                            cg_copy_floats(out + lo, line + aw.off[tw] + lo, hi - lo);
                        else
                            for (int64_t k = lo; k < hi; k++)
                                out[k] = line[(aw.off[tw] + k * aw.step) * gm->sw];
                    }
                    cg_zero_floats(out + hi, end - hi);
                    tile_advance(tl, &at, tl->width - j);
                }
            }
}

/* The tile's pixel (i, j) is dst's (h0 + i*step_h, w0 + j*step_w), always
 * inside: dst(n, c0 + c, that pixel) = res[t][c] (pixel-major) or res[c][t]
 * (channel-major). */
static void store_tile(const float *res, int channel_major, float *dst, const geometry *gm,
                       const tile *tl, int64_t h0, int64_t step_h, int64_t w0, int64_t step_w,
                       int64_t c0, int64_t nc)
{
    tile_pos at = tile_start(tl);
    for (int64_t t = 0; t < tl->count; t++, tile_advance(tl, &at, 1)) {
        float *px = dst + at.n * gm->sn + (h0 + at.i * step_h) * gm->sh +
                    (w0 + at.j * step_w) * gm->sw + c0 * gm->sc;
        if (channel_major)
            for (int64_t c = 0; c < nc; c++)
                px[c * gm->sc] = res[c * tl->count + t];
        else
            cg_copy_floats(px, res + t * nc, nc);
    }
}

/* ---- one launch -------------------------------------------------------- */

typedef struct job job;

struct job {
    cg_conv2d_op op;
    cg_plan plan;
    int nchw;
    const float *in0, *in1, *bias;
    float *out;
    float *db; /* backward weights and bias: the second output */
    int core_mask, members;
    int64_t tile_rows;                      /* 0: the library's choice */
    cg_weights_call weights;                /* NHWC weights: the operator's driver */
    const float *partial[CG_MAX_SLICES];    /* weights: each slice's partial dw */
    const double *bias_sums[CG_MAX_SLICES]; /* bias: each slice's sums */
    const float *phase_w;                   /* data: w by stride phase, in core 0's scratch */
    const float *packed_w;    /* forward, data on the packed driver: B's panels, core 0's scratch */
    atomic_llong tiles_taken; /* the packed driver's tiles taken in turn (tile_queue) */
    atomic_ullong panels_taken[CG_CORES_MOST]; /* its micro-panels by core (cg_take_item) */
    atomic_llong slices_taken; /* NHWC weights: the slices taken (cg_weights_call) */
    atomic_ullong column_ranges[2 * CG_CORES_MOST]; /* NHWC weights: dw's columns shared */
    job *nhwc;                 /* NCHW through the NHWC paths: the job on the staged copies */
    job *data; /* op BACKWARD: its input gradient's job, run by the weight gradient's pieces */
    /* cg_conv2d_backward's input gradient by the weight gradient's pieces
     * (this job op BACKWARD_DATA): whether each core (by id) has put w in
     * order in its space this call */
    unsigned char by_tap_ready[CG_CORES_MOST];
    cg_status status;          /* of the whole launch, set by logical core 0 */
    cg_error *err;             /* the caller's: logical core 0 says there what failed */
};

/* The forward's and the input gradient's GEMMs (OpenBLAS) run best on
 * tiles of at least this many rows, whatever the 2 MiB target gives for
 * wide rows (measured on 7x7x512: 83 -> 95 GFLOP/s forward, 75 -> 91 input
 * gradient); the weight gradient's long sum gains nothing from it. */
enum { GEMM_MIN_ROWS = 256 };

static int64_t rows_per_tile(const job *jb, int64_t width, int64_t rows, int64_t at_least)
{
    if (jb->tile_rows > 0)
        return min64(jb->tile_rows, rows);
    return min64(rows, max64(cg_shared_tile_rows(width, rows), at_least));
}

/* The calling core's scratch: `ints` int64s, then `floats` floats from the
 * next cache line (the kernels' vector loads of packed panels must not
 * straddle lines). Every core of the launch learns whether all got theirs
 * before anything is written, so a failure leaves the outputs untouched. */
static cg_status core_scratch(const job *jb, int64_t ints, int64_t floats, int64_t **int_part,
                              float **float_part, cg_error *err)
{
    ints = (ints + LINE_FLOATS / 2 - 1) / (LINE_FLOATS / 2) * (LINE_FLOATS / 2);
    size_t bytes = (size_t)ints * sizeof(int64_t) + (size_t)floats * sizeof(float);
    void *mem;
    cg_status s = cm_scratch_all(jb->core_mask, bytes, &mem, err);
    *int_part = mem;
    *float_part = mem ? (float *)((int64_t *)mem + ints) : NULL;
    return s;
}

/* ---- forward and weight gradient: tiles of output pixels -------------- */

static void kernel_taps(const cg_plan *p, int64_t *off_h, int64_t *off_w, axis *ah, axis *aw)
{
    for (int64_t kh = 0; kh < p->kernel_h; kh++)
        off_h[kh] = kh * p->dil_h - p->pad_u;
    for (int64_t kw = 0; kw < p->kernel_w; kw++)
        off_w[kw] = kw * p->dil_w - p->pad_l;
    *ah = (axis){off_h, p->kernel_h, p->stride_h};
    *aw = (axis){off_w, p->kernel_w, p->stride_w};
}

/* NHWC x of one channel is NCHW's layout, and packs channel-major too: a
 * kernel row is then one copy per pixel row rather than a run of one float
 * per tap. */
static int x_channel_major(const job *jb)
{
    return jb->nchw || jb->plan.cin == 1;
}

/* Floats a tile row of x's im2col takes: one group's (channel-major, a
 * group at a time) or every group's (pixel-major, all in one pass). */
static int64_t x_tile_width(const job *jb)
{
    return x_channel_major(jb) ? jb->plan.row_len : jb->plan.groups * jb->plan.row_len;
}

/* Group g's im2col of x over a tile, and its leading dimension: [K][pixel]
 * (x_channel_major: packed now) or [pixel][K] (every group packed at g = 0,
 * group g's K columns at g*K of each row). Call for g = 0, 1, ... in turn. */
static const float *x_tile(const job *jb, const tile *tl, axis ah, axis aw, int64_t g, float *col,
                           int64_t *ld)
{
    const cg_plan *p = &jb->plan;
    geometry gx = geometry_of(jb->nchw, p->cin, p->in_h, p->in_w);
    const int64_t packing = cg_trace_inner_start();
    if (x_channel_major(jb)) {
        pack_channel_major(jb->in0, &gx, tl, ah, aw, g * p->cin_g, p->cin_g, !jb->nchw, col);
        cg_trace_inner_end(packing);
        *ld = tl->count;
        return col;
    }
    if (g == 0)
        pack_pixel_major(jb->in0, &gx, tl, ah, aw, 0, p->cin_g, p->groups, col);
    cg_trace_inner_end(packing);
    *ld = p->groups * p->row_len;
    return col + g * p->row_len;
}

/* Group g's block of y or dy over a tile, and its leading dimension:
 * [co][pixel] (NCHW) or [pixel][co] (NHWC). */
static const float *output_block(const job *jb, const float *base, const tile *tl, int64_t g,
                                 int64_t *ld)
{
    const cg_plan *p = &jb->plan;
    const int64_t plane = p->out_h * p->out_w;
    *ld = jb->nchw ? plane : p->cout;
    if (jb->nchw)
        return base + (tl->n * p->cout + g * p->cout_g) * plane + tl->first;
    return base + (tl->n * plane + tl->first) * p->cout + g * p->cout_g;
}

/* Below this many output channels a group, NHWC's forward computes
 * y^T = w col^T (a wide product) and transposes it into y: y = col w^T
 * would give the GEMM only a few columns. The grouped input gradient does the
 * same below this many input channels a group (measured: with one group the
 * long sum over all of dy's channels is faster as it is). */
enum { FEW_COLUMNS = 16 };

/* y over a tile; `spare` holds count * cout_g floats. */
static void forward_tile(const job *jb, const tile *tl, axis ah, axis aw, float *col, float *spare)
{
    const cg_plan *p = &jb->plan;
    const int64_t k = p->row_len, count = tl->count;
    const int by_channel = x_channel_major(jb); /* col is [K][pixel], else [pixel][K] */
    const int transposed = jb->nchw || p->cout_g < FEW_COLUMNS; /* the product is [co][pixel] */
    for (int64_t g = 0; g < p->groups; g++) {
        const float *w = jb->in1 + g * p->cout_g * k, *b = jb->bias ? jb->bias + g * p->cout_g : 0;
        int64_t ld, ld_col;
        float *y = (float *)output_block(jb, jb->out, tl, g, &ld);
        const float *col_g = x_tile(jb, tl, ah, aw, g, col, &ld_col);
        if (!transposed) { /* y[pixel][co] = col w[co][K]^T */
            for (int64_t t = 0; b && t < count; t++)
                memcpy(y + t * ld, b, (size_t)p->cout_g * sizeof(float));
            cg_gemm(by_channel, 1, (int)count, (int)p->cout_g, (int)k, col_g, (int)ld_col, w,
                    (int)k, b ? 1.0f : 0.0f, y, (int)ld);
            continue;
        }
        /* [co][pixel] = w[co][K] col^T: y itself (NCHW), or spare, then y */
        float *dst = jb->nchw ? y : spare;
        const int64_t ld_dst = jb->nchw ? ld : count;
        for (int64_t co = 0; b && co < p->cout_g; co++)
            for (int64_t t = 0; t < count; t++)
                dst[co * ld_dst + t] = b[co];
        cg_gemm(0, !by_channel, (int)p->cout_g, (int)count, (int)k, w, (int)k, col_g, (int)ld_col,
                b ? 1.0f : 0.0f, dst, (int)ld_dst);
        for (int64_t t = 0; !jb->nchw && t < count; t++)
            for (int64_t co = 0; co < p->cout_g; co++)
                y[t * ld + co] = spare[co * count + t];
    }
}

/* dw[co][K] (+)= dy^T col, into this core's partial (NCHW: NHWC runs the
 * operator's packed driver, weights_nhwc_core). */
static void weights_tile(const job *jb, const tile *tl, axis ah, axis aw, float *col, float beta,
                         float *dw)
{
    const cg_plan *p = &jb->plan;
    const int64_t k = p->row_len, count = tl->count;
    for (int64_t g = 0; g < p->groups; g++) {
        int64_t ld, ld_col;
        const float *dy = output_block(jb, jb->in1, tl, g, &ld);
        const float *col_g = x_tile(jb, tl, ah, aw, g, col, &ld_col);
        cg_gemm(0, 1, (int)p->cout_g, (int)k, (int)count, dy, (int)ld, col_g, (int)ld_col, beta,
                dw + g * p->cout_g * k, (int)k);
    }
}

/* Sums the slices' partials into this core's part of dw, in slice order. */
static void reduce_weights(const job *jb, int rank, int64_t slices)
{
    const cg_plan *p = &jb->plan;
    size_t begin, end;
    cg_reduce_slice(p->dw_elems, LINE_FLOATS, rank, jb->members, &begin, &end);
    if (begin < end)
        cg_reduce_partials(jb->out + begin, jb->partial, (int)slices, begin, end);
}

static int64_t bias_floats(const job *jb, int rank);
static void bias_sums(job *jb, int rank, float *mem);

/* NCHW's weight gradient: the slices of the sum (cg_row_slices: cut by the
 * shape alone), each from im2col tiles into its own partial (the one slice
 * straight into dw), then the partials added in slice order; then db, if
 * asked for (its scratch taken with dw's, so that neither is written
 * unless both can be). */
static cg_status weights_nchw_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    const int64_t plane = p->out_h * p->out_w, slices = cg_slices_on(cg_row_slices(p), jb->members);
    const int into_out = slices == 1;
    int64_t s0, s1;
    cg_split_range(slices, rank, jb->members, &s0, &s1);
    const int64_t width = x_tile_width(jb);
    const int64_t tile_rows = rows_per_tile(jb, width, (p->rows + slices - 1) / slices, 1);
    int64_t *offs;
    float *col;
    const int64_t floats =
        s0 < s1 ? tile_rows * width + (into_out ? 0 : (s1 - s0) * (int64_t)p->dw_elems) : 0;
    const int64_t db_at = round_up(floats, LINE_FLOATS);
    if (core_scratch(jb, p->kernel_h + p->kernel_w, jb->db ? db_at + bias_floats(jb, rank) : floats,
                     &offs, &col, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    axis ah, aw;
    kernel_taps(p, offs, offs + p->kernel_h, &ah, &aw);
    cg_trace_mark since = cg_trace_start();
    for (int64_t i = s0; i < s1; i++) {
        float *dw = into_out ? jb->out : col + tile_rows * width + (i - s0) * (int64_t)p->dw_elems;
        int64_t first, last;
        cg_split_range(p->rows, (int)i, (int)slices, &first, &last);
        for (int64_t row = first; row < last;) {
            tile tl = {row / plane, p->out_h, p->out_w, row % plane, 0};
            tl.count = min64(tile_rows, min64(last - row, plane - tl.first)); /* within an image */
            weights_tile(jb, &tl, ah, aw, col, row == first ? 0.0f : 1.0f, dw);
            row += tl.count;
        }
        jb->partial[i] = dw;
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
    if (!into_out) {
        cm_bar_all(jb->core_mask, 1); /* every partial written */
        since = cg_trace_start();
        reduce_weights(jb, rank, slices);
        cg_trace_region(CG_PHASE_REDUCE, CG_PHASE_REDUCE, since);
    }
    if (jb->db)
        bias_sums(jb, rank, col + db_at);
    return CG_OK;
}

/* The rows (pixels) of the forward's and the input gradient's products, in
 * slices [s0, s1) for core `rank`. On the library's kernels, every element
 * of a product is the same sum whatever tile it is in (K is blocked by the
 * shape alone), so each core takes one balanced slice (the packed driver's
 * forward and input gradient take tiles instead: tile_queue). OpenBLAS's sums
 * depend on the product's sizes, so with it the rows are cut by the shape
 * alone (cg_slices_of: a power of two of slices, at least `least` rows
 * each, at least 4 where there are 32 rows a slice), the tiles restarting
 * at every slice: the same products on every core_mask. */
typedef struct row_slices {
    int64_t total, count, s0, s1;
    int64_t longest; /* rows of the longest slice: what sizes the tiles */
} row_slices;

static row_slices row_slices_of(const job *jb, int64_t total, int64_t least, int rank)
{
    row_slices rs = {total, jb->members, rank, rank + 1, 0};
    if (!cg_gemm_uses_packed()) {
        rs.count =
            cg_slices_on(max64(cg_slices_of(total, least, 0), min64(4, cg_slices_of(total, 32, 0))),
                         jb->members);
        cg_split_range(rs.count, rank, jb->members, &rs.s0, &rs.s1);
    }
    rs.longest = (total + rs.count - 1) / rs.count;
    return rs;
}

static void slice_rows(const row_slices *rs, int64_t i, int64_t *first, int64_t *last)
{
    cg_split_range(rs->total, (int)i, (int)rs->count, first, last);
}

static cg_status output_pixels_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    const int64_t plane = p->out_h * p->out_w;
    const row_slices rs = row_slices_of(jb, p->rows, GEMM_MIN_ROWS, rank);
    /* a tile row: im2col, then the forward's transposed product (spare) */
    const int64_t width = x_tile_width(jb), spare_width = p->cout_g;
    const int64_t tile_rows = rows_per_tile(jb, width + spare_width, rs.longest, GEMM_MIN_ROWS);
    int64_t *offs;
    float *col;
    int64_t floats = rs.s0 < rs.s1 ? tile_rows * (width + spare_width) : 0;
    if (core_scratch(jb, p->kernel_h + p->kernel_w, floats, &offs, &col, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    axis ah, aw;
    kernel_taps(p, offs, offs + p->kernel_h, &ah, &aw);
    const cg_trace_mark since = cg_trace_start();
    for (int64_t i = rs.s0; i < rs.s1; i++) {
        int64_t first, last;
        slice_rows(&rs, i, &first, &last);
        for (int64_t row = first; row < last;) {
            tile tl = {row / plane, p->out_h, p->out_w, row % plane, 0};
            /* NHWC's rows run on into the next image; NCHW's do not */
            const int64_t room = jb->nchw ? plane - tl.first : last - row;
            tl.count = min64(tile_rows, min64(last - row, room));
            forward_tile(jb, &tl, ah, aw, col, col + tile_rows * width);
            row += tl.count;
        }
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
    return CG_OK;
}

/* ---- forward and input gradient on the packed driver ----------------- */

/* NHWC products [pixel][channel] run on cg_gemm_rows, with A packed from x
 * (or dy) through row tables and w packed into B's panels once per call,
 * wherever the library's kernels are wider than OpenBLAS's (the rule of
 * cg_gemm_uses_packed): no im2col tile, no second pack of it. The other
 * shapes (NCHW, one input channel, few channels a group: transposed
 * products) keep the tiles. */
static int forward_on_rows(const job *jb)
{
    return !x_channel_major(jb) && jb->plan.cout_g >= FEW_COLUMNS && cg_gemm_uses_packed();
}

/* A tile's row tables over `src` (geometry gm), taps ah x aw, as
 * cg_rows_matrix reads them: at, then lo, then hi, each [segment][pixel].
 * A segment is a kernel row where `runs` (the taps adjacent, one group:
 * aw.count * channels floats from the first tap's pixel, cut where it leaves
 * the image), else a tap (the pixel's channels, or padding). */
static void row_tables(const geometry *gm, const tile *tl, axis ah, axis aw, int runs, int64_t *tab)
{
    const int64_t count = tl->count, channels = gm->sw, segments = ah.count * (runs ? 1 : aw.count);
    int64_t *at = tab, *lo = tab + segments * count, *hi = tab + 2 * segments * count;
    tile_pos pos = tile_start(tl);
    for (int64_t t = 0; t < count; t++, tile_advance(tl, &pos, 1))
        for (int64_t th = 0; th < ah.count; th++) {
            const int64_t h = ah.off[th] + pos.i * ah.step, line = pos.n * gm->sn + h * gm->sh;
            const int row_inside = h >= 0 && h < gm->h;
            if (runs) {
                const int64_t w0 = aw.off[0] + pos.j * aw.step, e = th * count + t;
                int64_t first, end;
                inside(w0, 1, gm->w, 0, row_inside ? aw.count : 0, &first, &end);
                at[e] = line + w0 * channels;
                lo[e] = first * channels;
                hi[e] = end * channels;
                continue;
            }
            for (int64_t tw = 0; tw < aw.count; tw++) {
                const int64_t w = aw.off[tw] + pos.j * aw.step,
                              e = (th * aw.count + tw) * count + t;
                const int in = row_inside && w >= 0 && w < gm->w;
                at[e] = in ? line + w * channels : 0;
                lo[e] = 0;
                hi[e] = in ? channels : 0;
            }
        }
}

/* ---- rows by a border together ---------------------------------------- */

/* The packed driver skips, in each register tile of rows, the pieces of A
 * (taps) that are padding in all its rows (cg_gemm_rows), where asked. Rows
 * in pixel order mix the borders' pixels with the inside ones, so where the
 * borders hold a fifth of the pixels or more a tile's rows are put in order
 * of their class first: which taps of each axis stay inside (the inside
 * ones first), pixel order within a class; the product goes to a scratch C
 * in that order and each row is then copied to its pixel. For 3x3 with
 * padding 1 the terms computed: on 7x7 pixels (49% by a border) 82% of
 * them (the padding's share skipped; 99% in pixel order), on 14x14 (27%,
 * tiles of 240 pixels) 95% (97%); on 28x28 (14%) 97-98% either way, where
 * the copy and the calls a register tile instead of a block cost as much
 * (0.99x), so it is not done. */
enum {
    MOST_CLASSES = 16,   /* an axis's, else its pixels are not sorted */
    SORT_BORDER_PART = 5 /* sorted where at least 1/5 of the pixels are by a border */
};

typedef struct row_classes {
    const int64_t *h, *w; /* the class of each grid row and column */
    int64_t count_w;      /* of the columns' classes; 0: no sorting */
} row_classes;

/* Ints classes_of needs for a grid of grid_h x grid_w positions. */
static int64_t class_ints(int64_t grid_h, int64_t grid_w)
{
    return grid_h + grid_w;
}

/* The classes of grid positions [0, grid) of an axis whose tap t reads
 * source position a.off[t] + i * a.step, inside [0, size): positions with
 * the same taps inside share one, class 0 those with all inside. Returns
 * their number, 0 where they are more than MOST_CLASSES or the taps more
 * than 64. */
static int64_t axis_classes(axis a, int64_t size, int64_t grid, int64_t *cls)
{
    if (a.count > 64)
        return 0;
    uint64_t seen[MOST_CLASSES] = {a.count == 64 ? ~0ull : (1ull << a.count) - 1};
    int64_t classes = 1;
    for (int64_t i = 0; i < grid; i++) {
        uint64_t in = 0;
        for (int64_t t = 0; t < a.count; t++) {
            const int64_t at = a.off[t] + i * a.step;
            in |= (uint64_t)(at >= 0 && at < size) << t;
        }
        int64_t c = 0;
        while (c < classes && seen[c] != in)
            c++;
        if (c == classes) {
            if (classes == MOST_CLASSES)
                return 0;
            seen[classes++] = in;
        }
        cls[i] = c;
    }
    return classes;
}

/* The classes of a grid's rows and columns, into `ints` (class_ints). */
static row_classes classes_of(axis ah, axis aw, int64_t size_h, int64_t size_w, int64_t grid_h,
                              int64_t grid_w, int64_t *ints)
{
    const int64_t nh = axis_classes(ah, size_h, grid_h, ints);
    const int64_t nw = axis_classes(aw, size_w, grid_w, ints + grid_h);
    return (row_classes){ints, ints + grid_h, nh > 0 ? nw : 0};
}

/* The order of a tile's rows by class (row_classes): order[i] the tile row
 * that goes i-th; tables `tab` (row_tables', `segments` a row) permuted so
 * into `sorted`. Returns `sorted`, or `tab` where every row is inside (no
 * order made). */
static const int64_t *sorted_tables(const row_classes *rc, const tile *tl, const int64_t *tab,
                                    int64_t segments, int64_t *order, int64_t *sorted)
{
    if (rc->count_w == 0)
        return tab;
    int64_t start[MOST_CLASSES * MOST_CLASSES + 1] = {0};
    const int64_t classes = MOST_CLASSES * rc->count_w;
    tile_pos pos = tile_start(tl);
    for (int64_t t = 0; t < tl->count; t++, tile_advance(tl, &pos, 1))
        start[rc->h[pos.i] * rc->count_w + rc->w[pos.j] + 1]++;
    if (start[1] == tl->count)
        return tab;
    for (int64_t c = 1; c <= classes; c++)
        start[c] += start[c - 1];
    pos = tile_start(tl);
    for (int64_t t = 0; t < tl->count; t++, tile_advance(tl, &pos, 1))
        order[start[rc->h[pos.i] * rc->count_w + rc->w[pos.j]]++] = t;
    for (int64_t e = 0; e < 3 * segments; e++) /* at, lo, hi: each [segment][row] */
        for (int64_t i = 0; i < tl->count; i++)
            sorted[e * tl->count + i] = tab[e * tl->count + order[i]];
    return sorted;
}

/* The positions of a grid of `grid`, `step` apart, whose taps all read
 * inside [0, size): position 0's first tap reads `first`, the others `dil`
 * apart (the taps descend where dil < 0). */
static int64_t inside_positions(int64_t first, int64_t taps, int64_t dil, int64_t step,
                                int64_t grid, int64_t size)
{
    const int64_t last = first + (taps - 1) * dil, lo = min64(first, last), hi = max64(first, last);
    int64_t inside = 0;
    for (int64_t i = 0; i < grid; i++)
        inside += lo + i * step >= 0 && hi + i * step < size;
    return inside;
}

/* Whether the forward's (or the input gradient's, at stride 1) tiles on
 * the packed driver sort their rows (sorted_tables): one group, A read in
 * place (pieces of `piece` floats), and a fifth of the grid's pixels or
 * more by a border (a tap of theirs through the padding). */
static int sorts_rows(const cg_plan *p, int64_t piece, int forward)
{
    if (p->groups != 1 || !cg_rows_reads_a_in_place(cg_gemm_blocking_here(), piece))
        return 0;
    /* the grid and what it reads: the forward's output pixels reading x,
     * the input gradient's dx pixels reading dy at i + pad - k * dil */
    const int64_t grid_h = forward ? p->out_h : p->in_h, grid_w = forward ? p->out_w : p->in_w;
    const int64_t inside =
        forward
            ? inside_positions(-p->pad_u, p->kernel_h, p->dil_h, p->stride_h, grid_h, p->in_h) *
                  inside_positions(-p->pad_l, p->kernel_w, p->dil_w, p->stride_w, grid_w, p->in_w)
            : inside_positions(p->pad_u, p->kernel_h, -p->dil_h, 1, grid_h, p->out_h) *
                  inside_positions(p->pad_l, p->kernel_w, -p->dil_w, 1, grid_w, p->out_w);
    return SORT_BORDER_PART * (grid_h * grid_w - inside) >= grid_h * grid_w;
}

/* The micro-panels of B (of each group's n columns, in `parts` shares:
 * cg_rows_panel) a core computes. */
typedef struct panels {
    int64_t first, last;
    int parts;
} panels;

static panels all_panels(int64_t n)
{
    return (panels){0, cg_rows_panels(cg_gemm_blocking_here(), n, 1), 1};
}

/* The columns [*first, *last) of n that the micro-panels q hold. */
static void panel_columns(panels q, int64_t n, int64_t *first, int64_t *last)
{
    int64_t width;
    cg_rows_panel(cg_gemm_blocking_here(), n, q.parts, q.last - 1, last, &width);
    *last += width;
    cg_rows_panel(cg_gemm_blocking_here(), n, q.parts, q.first, first, &width);
}

/* A core's row tables for the packed driver's tiles (tab: row_tables', or
 * the forward's padded_tables), sorted by border class where asked
 * (sorted_tables), and which tile they are: a tile's micro-panels, where
 * they are the items, come one after another, so its tables are made once. */
typedef struct tile_order {
    row_classes classes; /* count_w 0: the rows stay in pixel order */
    int64_t *tab, *sorted, *order;
    int64_t made;        /* the first pixel of the tile whose tables these are; -1: none */
    const int64_t *rows; /* its tables: tab, or sorted */
} tile_order;

/* Ints a tile_order takes past its tables (tab_ints), sorting tiles of
 * tile_rows pixels of a grid_h x grid_w grid, or not. */
static int64_t order_ints(int sorts, int64_t tab_ints, int64_t tile_rows, int64_t grid_h,
                          int64_t grid_w)
{
    return sorts ? tab_ints + tile_rows + class_ints(grid_h, grid_w) : 0;
}

/* A tile_order at `ints` (tab_ints, then order_ints); where it sorts, the
 * grid's classes by the taps ah, aw reading a size_h x size_w source. */
static tile_order tile_order_at(int64_t *ints, int64_t tab_ints, int64_t tile_rows, int sorts,
                                axis ah, axis aw, int64_t size_h, int64_t size_w, int64_t grid_h,
                                int64_t grid_w)
{
    tile_order to = {{NULL, NULL, 0}, ints, NULL, NULL, -1, ints};
    if (sorts) {
        to.sorted = ints + tab_ints;
        to.order = to.sorted + tab_ints;
        to.classes = classes_of(ah, aw, size_h, size_w, grid_h, grid_w, to.order + tile_rows);
    }
    return to;
}

/* Tables just made in to->tab are tile tl's, from pixel `first`: its rows'
 * order. */
static void order_tile(tile_order *to, const tile *tl, int64_t segments, int64_t first)
{
    to->rows = sorted_tables(&to->classes, tl, to->tab, segments, to->order, to->sorted);
    to->made = first;
}

static int tile_sorted(const tile_order *to)
{
    return to->rows != to->tab;
}

/* A sorted tile's product (res: its count rows in to's order, ld floats
 * apart) into their pixels' rows of dst, the columns of the micro-panels
 * `cols` of n. */
static void unsort_rows(const tile_order *to, panels cols, int64_t n, float *dst, const float *res,
                        int64_t ld, int64_t count)
{
    int64_t c0, c1;
    panel_columns(cols, n, &c0, &c1);
    for (int64_t i = 0; i < count; i++)
        memcpy(dst + to->order[i] * ld + c0, res + i * ld + c0, (size_t)(c1 - c0) * sizeof(float));
}

/* Bytes the next tile reads from a tensor (cg_rows_matrix.next). */
typedef struct span {
    const char *at;
    int64_t bytes;
} span;

/* The lines of x (fp32) that the tile after one ending at `row` (of at most
 * `rows` pixels, before `last`) reaches: nothing where there is none. */
static span next_input_lines(const cg_plan *p, const float *x, int64_t row, int64_t rows,
                             int64_t last)
{
    if (row >= last)
        return (span){NULL, 0};
    int64_t first, end;
    cg_input_span(p, row, min64(rows, last - row), &first, &end);
    return (span){(const char *)(x + first), (end - first) * (int64_t)sizeof(float)};
}

/* The lines of dy (fp32) that the input gradient's tile after one ending at
 * dx's pixel `q` (of at most `rows` pixels, before `last`) reads, at stride
 * 1: nothing where there is none. */
static span next_dy_lines(const cg_plan *p, const float *dy, int64_t q, int64_t rows, int64_t last)
{
    if (q >= last)
        return (span){NULL, 0};
    const int64_t in_plane = p->in_h * p->in_w, z = min64(q + rows, last) - 1;
    int64_t top = q % in_plane / p->in_w + p->pad_u - (p->kernel_h - 1) * p->dil_h;
    int64_t bottom = z % in_plane / p->in_w + p->pad_u + 1;
    top = max64(0, min64(top, p->out_h));
    bottom = max64(0, min64(bottom, p->out_h));
    const int64_t line = p->out_w * p->cout;
    const int64_t first = (q / in_plane * p->out_h + top) * line;
    const int64_t end = (z / in_plane * p->out_h + bottom) * line;
    return (span){(const char *)(dy + first), max64(0, end - first) * (int64_t)sizeof(float)};
}

/* C[pixel][channel] for each group g: group g's columns of A (segments of
 * seg_len made of pieces, a tap's channels each; group g's from column g *
 * group_cols of each) times group g's B (b: packed, groups b_group floats
 * apart, or from w, groups w_group floats apart), written into the columns
 * of its micro-panels `cols` of group g's n columns of c, each row starting
 * from the bias (NULL: none). */
static void rows_product(const job *jb, const float *src, const int64_t *tab, int64_t segments,
                         int64_t count, int64_t seg_len, int64_t piece, int64_t group_cols,
                         int64_t k, int64_t n, panels cols, const cg_rows_b *b, int64_t b_group,
                         int64_t w_group, const float *bias, float *c, int64_t ldc, float *pack,
                         span next, int sorted)
{
    const int64_t e = segments * count;
    for (int64_t g = 0; g < jb->plan.groups; g++) {
        const cg_rows_matrix a = {.src = src,
                                  .at = tab,
                                  .lo = tab + e,
                                  .hi = tab + 2 * e,
                                  .apart = count,
                                  .seg_len = seg_len,
                                  .piece = piece,
                                  .col0 = g * group_cols,
                                  .next = next.at,
                                  .next_bytes = next.bytes,
                                  .skips_padding = sorted};
        cg_rows_b bg = *b;
        if (bg.packed)
            bg.packed += g * b_group;
        else
            bg.src += g * w_group;
        cg_gemm_rows(cg_gemm_blocking_here(), count, n, k, &a, &bg, cols.first, cols.last, 0.0f,
                     bias ? bias + g * n : NULL, c + g * n, ldc, pack);
    }
}

/* Whether the forward packs w's B (b_floats packed, every group's) a
 * micro-panel at a time as each core's kernels reach it (cg_rows_b), rather
 * than all of it before them: where it is larger than L2 (the packed copy
 * went to memory and back, and a core read panels another had packed:
 * r50_3x3_7's 9.4 MB, its packing 10% of the forward, perf), A is read in
 * place (a tap's `piece` channels), and each core's `rows` are one block of
 * A (else every block would pack all of B again). */
static int packs_b_as_it_goes(int64_t b_floats, int64_t rows, int64_t piece)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    return b_floats * (int64_t)sizeof(float) > cg_kernels()->l2_bytes &&
           cg_rows_reads_a_in_place(bl, piece) && rows <= cg_rows_tile_most(bl, 0);
}

/* The calling core's share of the kc-row blocks of B (the blocks dealt out
 * in turn, counted by *block across calls): block pc of the k x n matrix
 * whose element (p, j) is x[j*stride_j + p*stride_p], its columns in
 * `parts` shares, packed at dst, a micro-panel at a time (cg_rows_panel). */
static void pack_b_share(const job *jb, int rank, int64_t *block, const float *x, size_t stride_j,
                         size_t stride_p, int64_t k, int64_t n, int parts, int64_t kc, float *dst)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t np = (int64_t)cg_rows_b_floats(bl, 1, n, parts);
    for (int64_t pc = 0; pc < k; pc += kc, ++*block) {
        if (*block % jb->members != rank)
            continue;
        const int64_t kb = min64(kc, k - pc);
        for (int64_t q = 0; q * bl->nr < np; q++) {
            int64_t first, width;
            cg_rows_panel(bl, n, parts, q, &first, &width);
            cg_pack_panels(x + pc * stride_p + first * stride_j, stride_j, stride_p, (int)width,
                           (int)kb, bl->nr, dst + pc * np + q * bl->nr * kb);
        }
    }
}

/* Pixels a tile of the packed driver takes: its A block (mc) unless the
 * caller chose. */
static int64_t rows_tile(const job *jb, int64_t rows, int b_packed)
{
    const int64_t want =
        jb->tile_rows > 0 ? jb->tile_rows : cg_rows_tile_most(cg_gemm_blocking_here(), b_packed);
    return max64(1, min64(want, rows));
}

/* Whether the cores split B's micro-panels of n columns (the forward's
 * output channels, the input gradient's input channels) rather than the
 * `pixels`: where each core's share of them is less than one A block, every
 * core would stream all of w's packed B (9.4 MB for 512 -> 512 3x3) for a
 * few pixels; by columns each streams its part of B, and all of x or dy,
 * which is then the smaller (r50_3x3_7: 0.8 MB). One group. */
static int splits_channels(const job *jb, int64_t pixels, int64_t n)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    return jb->plan.groups == 1 && jb->members > 1 && cg_rows_panels(bl, n, 1) >= jb->members &&
           pixels < jb->members * (int64_t)bl->mc;
}

/* The calling core's share of the micro-panels of n columns: an equal share
 * of the columns (cg_rows_panel's parts). */
static panels panels_share(const job *jb, int rank, int64_t n)
{
    panels q = {0, 0, jb->members};
    cg_rows_share(cg_gemm_blocking_here(), n, q.parts, rank, &q.first, &q.last);
    return q;
}

/* The tiles of `rows` pixels (tile_rows each, the last shorter) a core of
 * the packed driver runs: every one where each core computes its columns of
 * all the pixels (`all`), else its share. Where the launch has no more cores
 * than the process has CPUs, the cores take the tiles in turn from a count
 * they share, whichever core is free taking the next, so a core whose CPU
 * runs slower (another guest's work beside it on a shared host, a smaller
 * core) leaves more tiles to the others instead of holding them all back: a
 * static split ran 2-core calls at the slower CPU's pace, the cores'
 * compute times 1.2-2x apart (and a range of tiles a core, the rest taken
 * from the fullest one's back, 0.92-0.97x of tiles in turn: r50_3x3_14's
 * and the batch-1 layer's forward, 2 cores). Every element of a product is
 * the same sum whatever tile or core computes it, so the bits do not change.
 * A launch of more cores than CPUs emulates a larger chip: each core then
 * takes an equal range, as it would there. */
typedef enum { TILES_OWN, TILES_IN_TURN, OWN_RANGE_FIRST } tile_sharing;

typedef struct tile_queue {
    job *jb;
    int rank;
    tile_sharing sharing;
    int64_t items, tiles, next, end; /* items: tiles, or (micro-panel, tile) pairs */
    int64_t per_tile; /* a tile's micro-panels where they are items, else 0 */
} tile_queue;

/* Where the cores split the columns (`all`) and A is read in place, a
 * tile's `per_tile` micro-panels are the items (0: each core its own share
 * of every tile): an item runs its panel's whole sum, and with A read in
 * place there is no packing to repeat, a call a panel costs only A's row
 * pointers; so the panels of a few-pixel layer (r50_3x3_7: one or two tiles)
 * balance as its tiles cannot. Each core takes first from its own range of
 * them, micro-panel by micro-panel (its columns: its part of B), then from
 * the back of the fullest other range: taken in turn, each core streamed
 * nearly all of B (r50_3x3_7's 9.4 MB w, packed), 0.90-0.92x (forward and
 * input gradient, 2 cores). */
static tile_queue tile_queue_of(job *jb, int rank, int64_t rows, int64_t tile_rows, int all,
                                int64_t per_tile)
{
    const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
    const int turns = jb->members <= cm_cpus();
    tile_queue q = {jb, rank, TILES_OWN, tiles, tiles, 0, 0, 0};
    if (all && turns && per_tile > 0) {
        q.sharing = OWN_RANGE_FIRST;
        q.items = tiles * per_tile;
        q.per_tile = per_tile;
    } else if (all) {
        q.end = tiles;
    } else if (turns) {
        q.sharing = TILES_IN_TURN;
    } else {
        cg_split_range(tiles, rank, jb->members, &q.next, &q.end);
    }
    return q;
}

/* Items of consecutive pixels (the depthwise and grouped pixel paths):
 * each core first takes its own range of them from the front, then the back
 * of the range with most left (cg_take_item), so that a core whose CPU runs
 * slower leaves its last items to the others while the cores' pieces stay
 * contiguous (a piece's source rows overlap its neighbour's: taken in turn,
 * every piece's edge rows would be read by both cores); a launch of more
 * cores than CPUs takes equal ranges (see tile_queue). */
static tile_queue pieces_queue_of(job *jb, int rank, int64_t items)
{
    tile_queue q = {jb, rank, OWN_RANGE_FIRST, items, items, 0, 0, 0};
    if (jb->members > cm_cpus()) {
        q.sharing = TILES_OWN;
        cg_split_range(items, rank, jb->members, &q.next, &q.end);
    }
    return q;
}

/* The next item's number, items or more when none is left. */
static int64_t take_tile(tile_queue *q)
{
    if (q->sharing == TILES_IN_TURN)
        return (int64_t)atomic_fetch_add_explicit(&q->jb->tiles_taken, 1, memory_order_relaxed);
    if (q->sharing == TILES_OWN)
        return q->next < q->end ? q->next++ : q->items;
    int64_t at;
    return cg_take_item(q->jb->panels_taken, q->items, q->jb->members, q->rank, &at) ? at
                                                                                     : q->items;
}

/* Item i's tile, and its micro-panels: one, or the core's share `cols`
 * (items go micro-panel by micro-panel: a range of them is columns). */
static int64_t item_tile(const tile_queue *q, int64_t i)
{
    return q->per_tile ? i % q->tiles : i;
}

static panels item_panels(const tile_queue *q, int64_t i, panels cols)
{
    if (!q->per_tile)
        return cols;
    return (panels){i / q->tiles, i / q->tiles + 1, cols.parts};
}

/* A few channels a tap, many a kernel row (the stem's 3 and 21): the
 * forward's kernel rows are read in place by the indirect kernel, whole, from
 * a copy of each input row a tile reads with its padding as zeros (the
 * transposing pack of 3-float pieces and its tables were a third of the
 * stem's forward). */
static int forward_padded(const job *jb)
{
    const cg_plan *p = &jb->plan;
    return p->groups == 1 && p->dil_w == 1 && p->cin < CG_INDIRECT_MIN_PIECE &&
           cg_rows_reads_a_in_place(cg_gemm_blocking_here(), p->kernel_w * p->cin) &&
           cg_padded_row_near_x(p);
}

/* Padded input rows a tile of `count` pixels takes at most: one an output
 * row it touches and kernel row, and one of zeros. */
static int64_t padded_rows(const cg_plan *p, int64_t count)
{
    return ((count + p->out_w - 1) / p->out_w + 1) * p->kernel_h + 1;
}

/* The rows of a tile for forward_padded, over `pad` (padded_rows rows):
 * segment kh of pixel t, its kernel row in a padded copy of input row iy
 * (the zero row where iy is outside x), starts at at[kh * count + t] (the
 * driver's cg_rows_matrix.rows, which the kernel reads as they are: no
 * tables to turn into pointers each block). An input row the output row
 * before also read keeps its copy (the stem's 7 kernel rows at stride 2: 2
 * copies an output row, not 7). */
static void padded_rows_of(const job *jb, const tile *tl, float *pad, const float **at)
{
    const cg_plan *p = &jb->plan;
    const int64_t count = tl->count, len = cg_padded_row_floats(p);
    const int64_t pixel = p->stride_w * p->cin; /* an output pixel's step in a copy */
    int64_t copies = 1;
    cg_zero_floats(pad, len); /* copy 0: the zero row */
    tile_pos pos = tile_start(tl);
    int64_t before = -1, before_j = 0, before_n = 0, before_iy = 0; /* the output row before */
    for (int64_t t = 0; t < count;) {
        const int64_t run = min64(count - t, tl->width - pos.j); /* the rest of an output row */
        const int64_t iy0 = pos.i * p->stride_h - p->pad_u;
        for (int64_t kh = 0; kh < p->kernel_h; kh++) {
            const int64_t iy = iy0 + kh * p->dil_h, d = iy - before_iy;
            const float *row = pad; /* the zero row */
            if (iy >= 0 && iy < p->in_h) {
                if (before >= 0 && pos.n == before_n && d >= 0 && d % p->dil_h == 0 &&
                    d / p->dil_h < p->kernel_h) { /* kernel row d / dil_h of the row before */
                    row = at[d / p->dil_h * count + before] - before_j * pixel;
                } else {
                    float *copy = pad + copies++ * len;
                    cg_pad_row(p, jb->in0, pos.n, iy, copy);
                    row = copy;
                }
            }
            for (int64_t i = 0; i < run; i++)
                at[kh * count + t + i] = row + (pos.j + i) * pixel;
        }
        before = t;
        before_j = pos.j;
        before_n = pos.n;
        before_iy = iy0;
        t += run;
        tile_advance(tl, &pos, run);
    }
}

/* y = im2col(x) w^T (+ b) over this core's pixels; B (w^T by group) packed by
 * all cores together first. */
static cg_status forward_rows_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int runs = p->groups == 1 && p->dil_w == 1, padded = forward_padded(jb);
    const int64_t segments = runs ? p->kernel_h : p->taps,
                  seg_len = runs ? p->kernel_w * p->cin : p->cin_g;
    panels cols = all_panels(p->cout_g);
    const int by_channels = splits_channels(jb, p->rows, p->cout_g);
    if (by_channels)
        cols = panels_share(jb, rank, p->cout_g);
    const int64_t k = p->row_len, b_group = (int64_t)cg_rows_b_floats(bl, k, p->cout_g, cols.parts);
    /* every core decides alike: by the shape and the core count alone */
    const int as_it_goes = packs_b_as_it_goes(
        p->groups * b_group, by_channels ? p->rows : (p->rows + jb->members - 1) / jb->members,
        padded ? seg_len : p->cin_g);
    const int64_t tile_rows = rows_tile(
        jb, by_channels ? p->rows : (p->rows + jb->members - 1) / jb->members, !as_it_goes);
    const int64_t a_floats = (int64_t)cg_rows_a_floats(bl);
    const int64_t pad_floats = padded ? padded_rows(p, tile_rows) * cg_padded_row_floats(p) : 0;
    const int64_t b_at = a_floats + round_up(pad_floats, LINE_FLOATS);
    const int64_t piece = padded ? seg_len : p->cin_g, kc = cg_rows_kc(bl, k, piece);
    const int64_t b_floats = as_it_goes  ? (int64_t)cg_rows_b_floats(bl, kc, 1, 1)
                             : rank == 0 ? p->groups * b_group
                                         : 0;
    const int sorts = !padded && sorts_rows(p, piece, 1);
    const int64_t tab_ints = 3 * segments * tile_rows;
    const int64_t sort_ints = order_ints(sorts, tab_ints, tile_rows, p->out_h, p->out_w);
    const int64_t res_at = b_at + round_up(b_floats, LINE_FLOATS);
    int64_t *ints;
    float *mem;
    if (core_scratch(jb, p->kernel_h + p->kernel_w + tab_ints + sort_ints,
                     res_at + (sorts ? tile_rows * p->cout : 0), &ints, &mem, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    float *pad = mem + a_floats;
    cg_rows_b b = {.src = jb->in1, .ld = k, .panel = mem + b_at, .parts = cols.parts, .kc = kc};
    if (!as_it_goes) {
        if (rank == 0)
            jb->packed_w = mem + b_at;
        cm_bar_all(jb->core_mask, 1); /* core 0's buffer is known */
        const cg_trace_mark packing = cg_trace_start();
        int64_t block = 0;
        for (int64_t g = 0; g < p->groups; g++)
            pack_b_share(jb, rank, &block, jb->in1 + g * p->cout_g * k, (size_t)k, 1, k, p->cout_g,
                         cols.parts, kc, (float *)jb->packed_w + g * b_group);
        cg_trace_region(CG_PHASE_PACK, CG_PHASE_PACK, packing);
        cm_bar_all(jb->core_mask, 1); /* B is packed */
        b.packed = jb->packed_w;
    }
    const cg_trace_mark since = cg_trace_start();
    axis ah, aw;
    kernel_taps(p, ints, ints + p->kernel_h, &ah, &aw);
    tile_order order = tile_order_at(ints + p->kernel_h + p->kernel_w, tab_ints, tile_rows, sorts,
                                     ah, aw, p->in_h, p->in_w, p->out_h, p->out_w);
    /* forward_padded's tiles keep their rows' pointers where the others keep tables */
    const float **const padded_at = (const float **)(void *)order.tab;
    const geometry gx = geometry_of(0, p->cin, p->in_h, p->in_w);
    const int64_t plane = p->out_h * p->out_w;
    tile_queue queue = tile_queue_of(
        jb, rank, p->rows, tile_rows, by_channels,
        cg_rows_reads_a_in_place(bl, piece) ? cg_rows_panels(bl, p->cout_g, cols.parts) : 0);
    for (int64_t t = take_tile(&queue); t < queue.items;) {
        const int64_t row = item_tile(&queue, t) * tile_rows, next = take_tile(&queue);
        const int64_t next_row = item_tile(&queue, next) * tile_rows;
        const panels mine = item_panels(&queue, t, cols);
        const tile tl = {row / plane, p->out_h, p->out_w, row % plane,
                         min64(tile_rows, p->rows - row)};
        float *y = jb->out + row * p->cout;
        if (order.made != row && padded) { /* and the padded copies */
            const int64_t packing = cg_trace_inner_start();
            padded_rows_of(jb, &tl, pad, padded_at);
            cg_trace_inner_end(packing);
            order.made = row;
        } else if (order.made != row) {
            row_tables(&gx, &tl, ah, aw, runs, order.tab);
            order_tile(&order, &tl, segments, row);
        }
        if (padded) { /* whole kernel rows of the padded copies: a piece each */
            const cg_rows_matrix a = {
                .apart = tl.count, .seg_len = seg_len, .piece = seg_len, .rows = padded_at};
            cg_gemm_rows(bl, tl.count, p->cout_g, k, &a, &b, mine.first, mine.last, 0.0f, jb->bias,
                         y, p->cout, mem);
        } else {
            const int sorted = tile_sorted(&order);
            float *res = sorted ? mem + res_at : y;
            rows_product(
                jb, jb->in0, order.rows, segments, tl.count, seg_len, p->cin_g, p->cin_g, k,
                p->cout_g, mine, &b, b_group, p->cout_g * k, jb->bias, res, p->cout, mem,
                next_row == row ? (span){NULL, 0}
                                : next_input_lines(p, jb->in0, next_row, tile_rows, p->rows),
                sorted);
            if (sorted)
                unsort_rows(&order, mine, p->cout_g, y, res, p->cout, tl.count);
        }
        t = next;
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
    return CG_OK;
}

/* ---- input gradient: tiles of input pixels of one stride phase -------- */

/* The taps of one axis by stride phase. Phase a (an input coordinate mod
 * stride, a < count) is reached by the kernel positions k with
 * k*dilation - pad = a (mod stride); they are listed in descending k, so
 * their offsets into dy, (a + pad - k*dilation) / stride, ascend. Positions
 * whose phase has no input pixel (a >= the input extent) are left out. */
typedef struct phases {
    int64_t count;  /* min(stride, input extent) */
    int64_t *start; /* [count + 1]: phase a's taps are [start[a], start[a+1]) */
    int64_t *off;   /* [kernel]: offsets into dy, grouped by phase */
    int64_t *phase; /* [kernel]: the phase of kernel position k, or -1 */
    int64_t *slot;  /* [kernel]: k's place among its phase's taps */
    int64_t *tap;   /* [kernel]: the kernel position of each of off's taps */
    int64_t used;   /* start[count]: kernel positions that reach an input pixel */
} phases;

/* int64s build_phases needs: start, a cursor per phase, off, phase, slot, tap. */
static int64_t phase_ints(int64_t kernel, int64_t stride, int64_t in)
{
    return 2 * min64(stride, in) + 1 + 4 * kernel;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* Kernel positions of one residue mod stride are spaced stride/gcd apart. */
static int64_t most_taps_per_phase(int64_t kernel, int64_t dilation, int64_t stride)
{
    int64_t spacing = stride / gcd64(stride, dilation);
    return (kernel + spacing - 1) / spacing;
}

static void build_phases(phases *ph, int64_t *ints, int64_t kernel, int64_t dilation, int64_t pad,
                         int64_t stride, int64_t in)
{
    ph->count = min64(stride, in);
    ph->start = ints;
    ph->off = ph->start + ph->count + 1;
    ph->phase = ph->off + kernel;
    ph->slot = ph->phase + kernel;
    ph->tap = ph->slot + kernel;
    int64_t *cursor = ph->tap + kernel;
    memset(ph->start, 0, (size_t)(ph->count + 1) * sizeof(int64_t));
    for (int64_t k = 0; k < kernel; k++) {
        int64_t r = ((k * dilation - pad) % stride + stride) % stride;
        ph->phase[k] = r < ph->count ? r : -1;
        if (r < ph->count)
            ph->start[r + 1]++;
    }
    for (int64_t a = 0; a < ph->count; a++) {
        ph->start[a + 1] += ph->start[a];
        cursor[a] = ph->start[a];
    }
    ph->used = ph->start[ph->count];
    for (int64_t k = kernel - 1; k >= 0; k--) {
        int64_t a = ph->phase[k];
        if (a < 0)
            continue;
        ph->slot[k] = cursor[a] - ph->start[a];
        ph->tap[cursor[a]] = k;
        ph->off[cursor[a]++] = (a + pad - k * dilation) / stride;
    }
}

static int64_t taps_of(const phases *ph, int64_t a)
{
    return ph->start[a + 1] - ph->start[a];
}

/* Grid extent of phase a: input coordinates a, a + stride, ... < in. */
static int64_t phase_extent(int64_t a, int64_t stride, int64_t in)
{
    return (in - a + stride - 1) / stride;
}

typedef struct data_tables {
    phases h, w;
    int64_t group_block; /* floats of one group's phase-ordered weights */
} data_tables;

/* Rows (tap, output channel) of a group's phase-ordered weights before phase
 * (a, b)'s. */
static int64_t phase_rows_before(const cg_plan *p, const data_tables *dt, int64_t a, int64_t b)
{
    return (dt->h.start[a] * dt->w.used + taps_of(&dt->h, a) * dt->w.start[b]) * p->cout_g;
}

/* Offset of phase (a, b)'s weights within a group's block. */
static int64_t phase_weights_at(const cg_plan *p, const data_tables *dt, int64_t a, int64_t b)
{
    return phase_rows_before(p, dt, a, b) * p->cin_g;
}

/* Row of tap (th, tw) and channel co within phase (a, b)'s weights: the
 * order of the gathered dy tile's columns (pixel-major) or rows. */
static int64_t phase_row(const job *jb, const data_tables *dt, int64_t a, int64_t b, int64_t th,
                         int64_t tw, int64_t co)
{
    int64_t nh = taps_of(&dt->h, a), nw = taps_of(&dt->w, b);
    if (jb->nchw)
        return (co * nh + th) * nw + tw;
    return (th * nw + tw) * jb->plan.cout_g + co;
}

/* Phase-ordered weights [group][phase][row][ci] for output channels
 * [co_first, co_last). */
static void pack_phase_weights(const job *jb, const data_tables *dt, int64_t co_first,
                               int64_t co_last, float *dst)
{
    const cg_plan *p = &jb->plan;
    for (int64_t co = co_first; co < co_last; co++) {
        const int64_t g = co / p->cout_g, col = co % p->cout_g;
        for (int64_t kh = 0; kh < p->kernel_h; kh++) {
            const int64_t a = dt->h.phase[kh];
            for (int64_t kw = 0; a >= 0 && kw < p->kernel_w; kw++) {
                const int64_t b = dt->w.phase[kw];
                if (b < 0)
                    continue;
                float *row =
                    dst + g * dt->group_block + phase_weights_at(p, dt, a, b) +
                    phase_row(jb, dt, a, b, dt->h.slot[kh], dt->w.slot[kw], col) * p->cin_g;
                const int64_t tap = kh * p->kernel_w + kw;
                for (int64_t ci = 0; ci < p->cin_g; ci++)
                    row[ci] = jb->nchw ? jb->in1[(co * p->cin_g + ci) * p->taps + tap]
                                       : jb->in1[(co * p->taps + tap) * p->cin_g + ci];
            }
        }
    }
}

/* A core's space for the input gradient's tiles: the gathered dy and the
 * product (tiles), or the row tables, A's packing space and the product
 * (the packed driver). */
typedef struct data_space {
    float *gathered, *res, *pack;
    tile_order *order; /* the packed driver's tables (sorted at stride 1, where asked) */
    panels cols;       /* the packed driver's micro-panels of dx's channels this core computes */
} data_space;

/* Whether the input gradient runs on the packed driver (see forward_on_rows):
 * NHWC, the product [pixel][ci]. */
static int data_on_rows(const job *jb)
{
    const cg_plan *p = &jb->plan;
    return !jb->nchw && !(p->groups > 1 && p->cin_g < FEW_COLUMNS) && cg_gemm_uses_packed();
}

/* Floats of a group's B for the packed driver: every phase's rows, each
 * its micro-panels' floats (cin_g columns in `parts` shares). */
static int64_t data_b_group(const cg_plan *p, const data_tables *dt, int parts)
{
    return dt->h.used * dt->w.used * p->cout_g *
           (int64_t)cg_rows_b_floats(cg_gemm_blocking_here(), 1, p->cin_g, parts);
}

/* The calling core's share of B's kc blocks (dealt out in turn) for the
 * packed driver: for each group and phase, its weights' rows (tap, output
 * channel) in the phase's order, packed straight from w by the pack_rows
 * kernel through a table of where each row starts. */
enum { PACK_ROWS_TOGETHER = 8 };

static void pack_data_weights(const job *jb, const data_tables *dt, int rank, int parts, float *dst)
{
    const cg_plan *p = &jb->plan;
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t np = (int64_t)cg_rows_b_floats(bl, 1, p->cin_g, parts),
                  b_group = data_b_group(p, dt, parts);
    int64_t at[CG_KC_MOST], lo[CG_KC_MOST], hi[CG_KC_MOST], block = 0;
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t a = 0; a < dt->h.count; a++)
            for (int64_t b = 0; b < dt->w.count; b++) {
                const int64_t nw = taps_of(&dt->w, b), kp = taps_of(&dt->h, a) * nw * p->cout_g;
                float *d = dst + g * b_group + phase_rows_before(p, dt, a, b) * np;
                for (int64_t pc = 0; pc < kp; pc += bl->kc, block++) {
                    const int64_t kb = min64(bl->kc, kp - pc);
                    if (block % jb->members != rank)
                        continue;
                    for (int64_t t = 0; t < kb; t++) {
                        const int64_t q = pc + t, co = g * p->cout_g + q % p->cout_g;
                        const int64_t kh = dt->h.tap[dt->h.start[a] + q / (nw * p->cout_g)];
                        const int64_t kw = dt->w.tap[dt->w.start[b] + q / p->cout_g % nw];
                        at[t] = (co * p->taps + kh * p->kernel_w + kw) * p->cin_g;
                        lo[t] = 0;
                        hi[t] = p->cin_g;
                    }
                    const cg_panel_layout to = {bl->nr, bl->nr, kb * bl->nr};
                    /* a few rows at a time across all the panels: each row
                     * (cin_g floats of w) is read whole while its lines are
                     * in L1, where a panel at a time over kb rows (taps *
                     * cin_g floats apart) came back to every row once a
                     * panel */
                    for (int64_t t0 = 0; t0 < kb; t0 += PACK_ROWS_TOGETHER) {
                        const int64_t tb = min64(PACK_ROWS_TOGETHER, kb - t0);
                        const cg_pack_rows some = {at + t0, lo + t0, hi + t0};
                        for (int64_t q = 0; q * bl->nr < np; q++) { /* cg_rows_panel's columns */
                            int64_t first, width;
                            cg_rows_panel(bl, p->cin_g, parts, q, &first, &width);
                            float *panel = d + pc * np + q * bl->nr * kb + t0 * bl->nr;
                            cg_kernels()->pack_rows(panel, &to, tb, width, jb->in1, &some, first);
                            cg_kernels()->pack_rows(panel + width, &to, tb, bl->nr - width, NULL,
                                                    NULL, 0);
                        }
                    }
                }
            }
}

/* dx over a tile of phase (a, b)'s grid on the packed driver: A is dy's rows
 * at the phase's taps (a kernel row's taps one run where they are adjacent),
 * every group's product written into dx (stride 1: the tile is consecutive
 * pixels of dx) or into sp->res, then stored. */
static void data_rows_tile(const job *jb, const data_tables *dt, const tile *tl, int64_t a,
                           int64_t b, const data_space *sp, span next)
{
    const cg_plan *p = &jb->plan;
    const geometry gdy = geometry_of(0, p->cout, p->out_h, p->out_w);
    const geometry gdx = geometry_of(0, p->cin, p->in_h, p->in_w);
    const int64_t nh = taps_of(&dt->h, a), nw = taps_of(&dt->w, b), kp = nh * nw * p->cout_g;
    const axis ah = {dt->h.off + dt->h.start[a], nh, 1}, aw = {dt->w.off + dt->w.start[b], nw, 1};
    const int direct = dt->h.count == 1 && dt->w.count == 1;
    const int64_t first = tl->n * p->in_h * p->in_w + tl->first; /* direct: dx's pixel */
    float *dx = jb->out + first * p->cin;
    float *c = direct ? dx : sp->res;
    if (kp == 0) { /* no tap reaches these pixels */
        /* zeros in every group's columns; with one group, in the core's share */
        int64_t c0 = 0, c1 = p->cin;
        if (p->groups == 1)
            panel_columns(sp->cols, p->cin, &c0, &c1);
        for (int64_t t = 0; t < tl->count; t++)
            cg_zero_floats(c + t * p->cin + c0, c1 - c0);
    } else {
        const int runs = p->groups == 1 && adjacent_taps(aw);
        const int64_t segments = nh * (runs ? 1 : nw);
        tile_order *order = sp->order;
        if (!direct || order->made != first) { /* a phase's tiles: their tables each time */
            row_tables(&gdy, tl, ah, aw, runs, order->tab);
            if (direct)
                order_tile(order, tl, segments, first);
        }
        const int64_t *rows = direct ? order->rows : order->tab;
        const int sorted = direct && tile_sorted(order);
        const int parts = sp->cols.parts;
        const int64_t np = (int64_t)cg_rows_b_floats(cg_gemm_blocking_here(), 1, p->cin_g, parts);
        const cg_rows_b packed = {.packed = jb->packed_w + phase_rows_before(p, dt, a, b) * np,
                                  .parts = parts,
                                  .kc = cg_gemm_blocking_here()->kc};
        if (sorted)
            c = sp->res;
        rows_product(jb, jb->in0, rows, segments, tl->count, runs ? nw * p->cout : p->cout_g,
                     p->cout_g, p->cout_g, kp, p->cin_g, sp->cols, &packed,
                     data_b_group(p, dt, parts), 0, NULL, c, p->cin, sp->pack, next, sorted);
        if (sorted)
            unsort_rows(order, sp->cols, p->cin, dx, sp->res, p->cin, tl->count);
    }
    if (!direct)
        store_tile(sp->res, 0, jb->out, &gdx, tl, a, p->stride_h, b, p->stride_w, 0, p->cin);
}

/* dx over a tile of phase (a, b)'s grid, every group. */
static void data_tile(const job *jb, const data_tables *dt, const tile *tl, int64_t a, int64_t b,
                      const data_space *sp, span next)
{
    if (data_on_rows(jb)) {
        data_rows_tile(jb, dt, tl, a, b, sp, next);
        return;
    }
    float *gathered = sp->gathered, *res = sp->res;
    const cg_plan *p = &jb->plan;
    const geometry gdy = geometry_of(jb->nchw, p->cout, p->out_h, p->out_w);
    const geometry gdx = geometry_of(jb->nchw, p->cin, p->in_h, p->in_w);
    const int64_t nh = taps_of(&dt->h, a), nw = taps_of(&dt->w, b), kp = nh * nw * p->cout_g;
    const int64_t count = tl->count, in_plane = p->in_h * p->in_w;
    /* the product is [ci][pixel] (NCHW, or grouped NHWC with few channels a
     * group: see FEW_COLUMNS) or [pixel][ci] */
    const int by_channel = jb->nchw || (p->groups > 1 && p->cin_g < FEW_COLUMNS);
    /* stride 1 and dx's own orientation: the tile is consecutive pixels of
     * dx, written in place */
    const int direct = p->stride_h == 1 && p->stride_w == 1 && by_channel == jb->nchw;
    const axis ah = {dt->h.off + dt->h.start[a], nh, 1}, aw = {dt->w.off + dt->w.start[b], nw, 1};
    if (!jb->nchw && kp) /* NHWC: every group's gathered dy in one pass, [pixel][group][row] */
        pack_pixel_major(jb->in0, &gdy, tl, ah, aw, 0, p->cout_g, p->groups, gathered);
    for (int64_t g = 0; g < p->groups; g++) {
        const float *w = jb->phase_w + g * dt->group_block + phase_weights_at(p, dt, a, b);
        float *dst = res;
        int64_t ld = by_channel ? count : p->cin_g;
        if (direct) {
            dst = jb->nchw ? jb->out + (tl->n * p->cin + g * p->cin_g) * in_plane + tl->first
                           : jb->out + (tl->n * in_plane + tl->first) * p->cin + g * p->cin_g;
            ld = jb->nchw ? in_plane : p->cin;
        }
        if (kp == 0) { /* no tap reaches these pixels */
            for (int64_t r = 0; r < (by_channel ? p->cin_g : count); r++)
                cg_zero_floats(dst + r * ld, by_channel ? count : p->cin_g);
        } else if (jb->nchw) { /* dx[ci][pixel] = w[row][ci]^T gathered[row][pixel] */
            pack_channel_major(jb->in0, &gdy, tl, ah, aw, g * p->cout_g, p->cout_g, 0, gathered);
            cg_gemm(1, 0, (int)p->cin_g, (int)count, (int)kp, w, (int)p->cin_g, gathered,
                    (int)count, 0.0f, dst, (int)ld);
        } else { /* dx = gathered w, or dx^T = w^T gathered^T */
            const float *d = gathered + g * kp;
            const int64_t ld_d = p->groups * kp;
            if (by_channel)
                cg_gemm(1, 1, (int)p->cin_g, (int)count, (int)kp, w, (int)p->cin_g, d, (int)ld_d,
                        0.0f, dst, (int)ld);
            else
                cg_gemm(0, 0, (int)count, (int)p->cin_g, (int)kp, d, (int)ld_d, w, (int)p->cin_g,
                        0.0f, dst, (int)ld);
        }
        if (!direct)
            store_tile(res, by_channel, jb->out, &gdx, tl, a, p->stride_h, b, p->stride_w,
                       g * p->cin_g, p->cin_g);
    }
}

/* Runs data_tile over the part [first, last) of the pixel order (image,
 * phase a, phase b, grid pixel); `then` is the first pixel this core takes
 * after it (the pixels' count: none). */
static void data_pixels(const job *jb, const data_tables *dt, int64_t first, int64_t last,
                        int64_t then, int64_t tile_rows, const data_space *sp)
{
    const cg_plan *p = &jb->plan;
    const int64_t in_plane = p->in_h * p->in_w;
    if (dt->h.count == 1 && dt->w.count == 1 && !jb->nchw) {
        /* one phase, the whole image: NHWC's tiles run on into the next
         * image, and each asks for the lines of dy its core's next reads */
        const int64_t pixels = p->batch * in_plane;
        for (int64_t q = first; q < last; q += tile_rows) {
            tile tl = {q / in_plane, p->in_h, p->in_w, q % in_plane, min64(tile_rows, last - q)};
            const int64_t next = q + tl.count < last ? q + tl.count : then;
            data_tile(jb, dt, &tl, 0, 0, sp, next_dy_lines(p, jb->in0, next, tile_rows, pixels));
        }
        return;
    }
    for (int64_t n = first / in_plane, at = n * in_plane; at < last; n++)
        for (int64_t a = 0; a < dt->h.count; a++)
            for (int64_t b = 0; b < dt->w.count; b++) {
                const int64_t height = phase_extent(a, p->stride_h, p->in_h);
                const int64_t width = phase_extent(b, p->stride_w, p->in_w);
                const int64_t size = height * width;
                for (int64_t q = max64(first, at) - at; q < min64(last - at, size);) {
                    tile tl = {n, height, width, q, min64(tile_rows, min64(last - at, size) - q)};
                    data_tile(jb, dt, &tl, a, b, sp, (span){NULL, 0});
                    q += tl.count;
                }
                at += size;
            }
}

static cg_status data_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    const int on_rows = data_on_rows(jb);
    data_tables dt;
    int64_t co_first, co_last;
    const int64_t pixels = p->batch * p->in_h * p->in_w;
    row_slices rs = row_slices_of(jb, pixels, GEMM_MIN_ROWS, rank);
    panels cols = all_panels(p->cin_g);
    /* stride 1 only: a strided phase's tile is stored into dx whole */
    const int by_channels =
        on_rows && p->stride_h == 1 && p->stride_w == 1 && splits_channels(jb, pixels, p->cin_g);
    if (by_channels) {
        rs = (row_slices){pixels, 1, 0, 1, pixels}; /* every core all the pixels */
        cols = panels_share(jb, rank, p->cin_g);
    }
    cg_split_range(p->cout, rank, jb->members, &co_first, &co_last);
    const int64_t most_taps = most_taps_per_phase(p->kernel_h, p->dil_h, p->stride_h) *
                              most_taps_per_phase(p->kernel_w, p->dil_w, p->stride_w);
    /* a tile row: gathered dy (NHWC: every group's), then the product */
    const int64_t gathered_width = (jb->nchw ? 1 : p->groups) * most_taps * p->cout_g;
    const int64_t a_floats = on_rows ? (int64_t)cg_rows_a_floats(cg_gemm_blocking_here()) : 0;
    const int64_t tile_rows =
        on_rows ? rows_tile(jb, rs.longest, 1)
                : rows_per_tile(jb, gathered_width + p->cin_g, rs.longest, GEMM_MIN_ROWS);
    const int64_t ints_h = phase_ints(p->kernel_h, p->stride_h, p->in_h);
    const int64_t ints_w = phase_ints(p->kernel_w, p->stride_w, p->in_w);
    const int64_t tab_ints = on_rows ? 3 * most_taps * tile_rows : 0;
    const int sorts =
        on_rows && p->stride_h == 1 && p->stride_w == 1 && sorts_rows(p, p->cout_g, 0);
    const int64_t sort_ints = order_ints(sorts, tab_ints, tile_rows, p->in_h, p->in_w);
    int64_t floats = !(rs.s0 < rs.s1) ? 0
                     : on_rows        ? a_floats + tile_rows * p->cin
                                      : tile_rows * (gathered_width + p->cin_g);
    const int64_t weights_at = round_up(floats, LINE_FLOATS);
    floats = weights_at;
    if (rank == 0) /* B's panels for every tap (the phases use at most all) */
        floats += on_rows ? p->groups * p->taps * p->cout_g *
                                (int64_t)cg_rows_b_floats(cg_gemm_blocking_here(), 1, p->cin_g,
                                                          cols.parts)
                          : (int64_t)p->dw_elems;
    int64_t *ints;
    float *mem;
    if (core_scratch(jb, ints_h + ints_w + tab_ints + sort_ints, floats, &ints, &mem, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    build_phases(&dt.h, ints, p->kernel_h, p->dil_h, p->pad_u, p->stride_h, p->in_h);
    build_phases(&dt.w, ints + ints_h, p->kernel_w, p->dil_w, p->pad_l, p->stride_w, p->in_w);
    dt.group_block = dt.h.used * dt.w.used * p->cout_g * p->cin_g;
    if (rank == 0 && on_rows)
        jb->packed_w = mem + weights_at;
    else if (rank == 0)
        jb->phase_w = mem + weights_at;
    cm_bar_all(jb->core_mask, 1); /* core 0's weight buffer is known */
    cg_trace_mark since = cg_trace_start();
    if (on_rows)
        pack_data_weights(jb, &dt, rank, cols.parts, (float *)jb->packed_w);
    else
        pack_phase_weights(jb, &dt, co_first, co_last, (float *)jb->phase_w);
    cg_trace_region(CG_PHASE_PACK, CG_PHASE_PACK, since);
    cm_bar_all(jb->core_mask, 1); /* the weights are packed */
    since = cg_trace_start();
    tile_order order = tile_order_at(ints + ints_h + ints_w, tab_ints, tile_rows, sorts,
                                     (axis){dt.h.off + dt.h.start[0], taps_of(&dt.h, 0), 1},
                                     (axis){dt.w.off + dt.w.start[0], taps_of(&dt.w, 0), 1},
                                     p->out_h, p->out_w, p->in_h, p->in_w);
    const data_space sp =
        on_rows ? (data_space){NULL, mem + a_floats, mem, &order, cols}
                : (data_space){mem, mem + tile_rows * gathered_width, NULL, NULL, cols};
    if (on_rows) { /* tiles of the pixel order shared out as they come */
        tile_queue queue =
            tile_queue_of(jb, rank, pixels, tile_rows, by_channels,
                          cg_rows_reads_a_in_place(cg_gemm_blocking_here(), p->cout_g)
                              ? cg_rows_panels(cg_gemm_blocking_here(), p->cin_g, cols.parts)
                              : 0);
        for (int64_t t = take_tile(&queue); t < queue.items;) {
            const int64_t q = item_tile(&queue, t) * tile_rows, next = take_tile(&queue);
            const int64_t then = item_tile(&queue, next) * tile_rows;
            data_space mine = sp;
            mine.cols = item_panels(&queue, t, cols);
            data_pixels(jb, &dt, q, min64(pixels, q + tile_rows),
                        then == q ? pixels : min64(pixels, then), tile_rows, &mine);
            t = next;
        }
    } else {
        for (int64_t i = rs.s0; i < rs.s1; i++) {
            int64_t first, last;
            slice_rows(&rs, i, &first, &last);
            data_pixels(jb, &dt, first, last, pixels, tile_rows, &sp);
        }
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
    return CG_OK;
}

/* ---- the taps of an axis that stay inside ------------------------------ */

/* One axis of a convolution seen from its output: output position o reads
 * source position o*step + k*tap + off through tap k < taps, inside when in
 * [0, len). A forward (and col2im) reads x: step the stride, tap the
 * dilation, off -pad; a depthwise input gradient of stride 1 reads dy: step
 * 1, tap -dilation, off +pad. */
typedef struct dw_axis {
    int64_t step, tap, off, len, taps;
} dw_axis;

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The taps [*k0, *k1) through which position o reads inside the source. */
static void axis_taps(const dw_axis *a, int64_t o, int64_t *k0, int64_t *k1)
{
    const int64_t below = o * a->step + a->off, above = a->len - 1 - below;
    const int64_t t = a->tap > 0 ? a->tap : -a->tap;
    /* inside: below + k*tap >= 0 and <= len - 1 */
    const int64_t lo = -floor_div(a->tap > 0 ? below : above, t);
    const int64_t hi = floor_div(a->tap > 0 ? above : below, t) + 1;
    *k0 = lo < 0 ? 0 : lo;
    *k1 = hi > a->taps ? a->taps : hi < *k0 ? *k0 : hi;
}

/* The positions [*o_lo, *o_hi) of [0, out) whose taps are all inside. */
static void axis_inside(const dw_axis *a, int64_t out, int64_t *o_lo, int64_t *o_hi)
{
    const int64_t reach = (a->taps - 1) * a->tap; /* the last tap's offset from the first */
    const int64_t least = reach < 0 ? reach : 0, most = reach > 0 ? reach : 0;
    const int64_t lo = -floor_div(least + a->off, a->step);
    const int64_t hi = floor_div(a->len - 1 - most - a->off, a->step) + 1;
    *o_lo = lo < 0 ? 0 : lo > out ? out : lo;
    *o_hi = hi > out ? out : hi < *o_lo ? *o_lo : hi;
}

/* ---- input gradient of few input channels: columns, then col2im ------- */

/* Whether the input gradient computes im2col's columns, dcol = dy w (a
 * pixel's taps x cin of them, summed over cout), and adds each pixel's into
 * the dx pixels its taps reach (col2im), rather than a product a stride
 * phase: with few input channels a phase's product is cin columns wide, a
 * sliver of the kernel's tile (the 7x7 stem's 3 of 16), where dcol is taps x
 * cin wide (147). NHWC, one group, on the packed driver. */
static int data_by_columns(const job *jb)
{
    const cg_plan *p = &jb->plan;
    return !jb->nchw && p->groups == 1 && p->cin < FEW_COLUMNS && p->taps > 1 &&
           cg_gemm_uses_packed();
}

/* dx[n][ih][iw] += the taps' columns of dcol's pixel (n, oh, ow) (its row
 * of taps x cin), for the taps whose ih is in the band [h0, h1). */
static void add_columns(const cg_plan *p, const float *col, int64_t n, int64_t oh, int64_t ow,
                        int64_t h0, int64_t h1, float *dx)
{
    const int64_t c = p->cin, iw0 = ow * p->stride_w - p->pad_l;
    /* the rows of the band (the band as the source), the columns of dx */
    const dw_axis v = {p->stride_h, p->dil_h, -p->pad_u - h0, h1 - h0, p->kernel_h};
    const dw_axis h = {p->stride_w, p->dil_w, -p->pad_l, p->in_w, p->kernel_w};
    int64_t kh0, kh1, kw0, kw1;
    axis_taps(&v, oh, &kh0, &kh1);
    axis_taps(&h, ow, &kw0, &kw1);
    for (int64_t kh = kh0; kh < kh1; kh++) {
        const int64_t ih = oh * p->stride_h + kh * p->dil_h - p->pad_u;
        float *line = dx + (n * p->in_h + ih) * p->in_w * c;
        const float *taps = col + kh * p->kernel_w * c;
        if (p->dil_w == 1) { /* adjacent taps: one run of dx's row */
            for (int64_t e = kw0 * c; e < kw1 * c; e++)
                line[iw0 * c + e] += taps[e];
            continue;
        }
        for (int64_t kw = kw0; kw < kw1; kw++)
            for (int64_t ci = 0; ci < c; ci++)
                line[(iw0 + kw * p->dil_w) * c + ci] += taps[kw * c + ci];
    }
}

/* The band [h0, h1) of dx's rows of image n: dx = 0, then for the output
 * rows whose taps reach it, a tile of pixels at a time, dcol = dy w on the
 * packed driver (B, w's rows, packed at b) and col2im into the band. */
static void data_band(const job *jb, int64_t n, int64_t h0, int64_t h1, int64_t tile_rows,
                      const float *b, float *dcol, float *pack, int64_t *tab)
{
    const cg_plan *p = &jb->plan;
    const int64_t plane = p->out_h * p->out_w;
    /* oh from the first whose last tap reaches h0 to the last whose first reaches h1 - 1 */
    const int64_t below = h0 + p->pad_u - (p->kernel_h - 1) * p->dil_h;
    const int64_t oh_lo = below > 0 ? (below + p->stride_h - 1) / p->stride_h : 0;
    const int64_t oh_hi = min64(p->out_h, (h1 - 1 + p->pad_u) / p->stride_h + 1);
    float *dx = jb->out;
    memset(dx + (n * p->in_h + h0) * p->in_w * p->cin, 0,
           (size_t)((h1 - h0) * p->in_w * p->cin) * sizeof(float));
    for (int64_t px = oh_lo * p->out_w; px < oh_hi * p->out_w;) {
        const int64_t count = min64(tile_rows, oh_hi * p->out_w - px);
        for (int64_t t = 0; t < count; t++) { /* A: dy's rows, one segment each */
            tab[t] = (n * plane + px + t) * p->cout;
            tab[count + t] = 0;
            tab[2 * count + t] = p->cout;
        }
        const cg_rows_matrix a = {.src = jb->in0,
                                  .at = tab,
                                  .lo = tab + count,
                                  .hi = tab + 2 * count,
                                  .apart = count,
                                  .seg_len = p->cout,
                                  .piece = p->cout};
        const panels cols = all_panels(p->row_len);
        const cg_rows_b packed = {.packed = b, .parts = 1, .kc = cg_gemm_blocking_here()->kc};
        cg_gemm_rows(cg_gemm_blocking_here(), count, p->row_len, p->cout, &a, &packed, cols.first,
                     cols.last, 0.0f, NULL, dcol, p->row_len, pack);
        for (int64_t t = 0, oh = px / p->out_w, ow = px % p->out_w; t < count; t++) {
            add_columns(p, dcol + t * p->row_len, n, oh, ow, h0, h1, dx);
            if (++ow == p->out_w) {
                ow = 0;
                oh++;
            }
        }
        px += count;
    }
}

/* The input gradient by columns (data_by_columns), split by rows of dx (all
 * images' in turn): each core zeroes its rows and adds into them alone,
 * computing the columns of the output rows that reach its band (those by a
 * band's edge twice, once a side). B, w as a cout x (taps x cin) matrix, is
 * packed by all cores together first. */
static cg_status data_columns_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    const int64_t b_floats = (int64_t)cg_rows_b_floats(bl, p->cout, p->row_len, 1);
    int64_t first, last;
    cg_split_range(p->batch * p->in_h, rank, jb->members, &first, &last);
    const int64_t tile_rows = rows_tile(jb, p->out_w * p->out_h, 1);
    const int64_t a_floats = (int64_t)cg_rows_a_floats(bl);
    const int64_t dcol_at = round_up(a_floats, LINE_FLOATS);
    const int64_t b_at = round_up(dcol_at + tile_rows * p->row_len, LINE_FLOATS);
    int64_t *tab;
    float *mem;
    if (core_scratch(jb, 3 * tile_rows, b_at + (rank == 0 ? b_floats : 0), &tab, &mem, err) !=
        CG_OK)
        return CG_ERR_NO_MEMORY;
    if (rank == 0)
        jb->packed_w = mem + b_at;
    cm_bar_all(jb->core_mask, 1); /* core 0's buffer is known */
    cg_trace_mark since = cg_trace_start();
    int64_t block = 0;
    pack_b_share(jb, rank, &block, jb->in1, 1, (size_t)p->row_len, p->cout, p->row_len, 1,
                 cg_gemm_blocking_here()->kc, (float *)jb->packed_w);
    cg_trace_region(CG_PHASE_PACK, CG_PHASE_PACK, since);
    cm_bar_all(jb->core_mask, 1); /* B is packed */
    since = cg_trace_start();
    for (int64_t row = first; row < last;) { /* a band of one image's rows */
        const int64_t n = row / p->in_h, h0 = row % p->in_h, h1 = min64(p->in_h, h0 + last - row);
        data_band(jb, n, h0, h1, tile_rows, jb->packed_w, mem + dcol_at, mem, tab);
        row += h1 - h0;
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
    return CG_OK;
}

/* ---- bias gradient: rows of dy, then the cores' sums added ------------ */

/* Sums in double: dy has N*OH*OW terms per channel, too many for float.
 * NHWC: dy's rows cut as the weight gradient's sum is (bias.h), so that
 * cg_conv2d_backward_weights_bias gives the same bits. NCHW: images, each
 * (image, channel) plane a run, cut into slices by the shape alone
 * (cg_slices_of). Each slice is summed for all channels by the core that
 * takes it, reading its part of dy once, in order: split by channels,
 * every core would stream all of dy for a few floats of each row. Then
 * each core adds the slices' sums of a block of channels, in slice order:
 * the same bits on every core_mask. */
static int64_t bias_slices(const job *jb)
{
    const cg_plan *p = &jb->plan;
    return jb->nchw ? cg_slices_on(cg_slices_of(p->batch, 1, p->cout * (int64_t)sizeof(double)),
                                   jb->members)
                    : cg_bias_slices(p, jb->members);
}

/* The dy and db of the bias gradient, or of the weight gradient's second
 * output (cg_conv2d_backward_weights_bias). */
static const float *dy_of(const job *jb)
{
    return jb->op == CG_CONV2D_BACKWARD_BIAS ? jb->in0 : jb->in1;
}

static float *db_of(const job *jb)
{
    return jb->op == CG_CONV2D_BACKWARD_BIAS ? jb->out : jb->db;
}

static void nchw_bias_slice(const job *jb, int64_t first, int64_t last, double *sum)
{
    const cg_plan *p = &jb->plan;
    const int64_t plane = p->out_h * p->out_w;
    const int64_t whole = plane / LINE_FLOATS, rest = plane % LINE_FLOATS;
    cg_sum_rows_fn *sum_rows = cg_kernels()->sum_rows;
    for (int64_t c = 0; c < p->cout; c++)
        sum[c] = 0.0;
    for (int64_t n = first; n < last; n++) /* a plane as rows of LINE_FLOATS columns */
        for (int64_t c = 0; c < p->cout; c++) {
            const float *run = dy_of(jb) + (n * p->cout + c) * plane;
            double cols[LINE_FLOATS] = {0};
            sum_rows(cols, run, LINE_FLOATS, whole, LINE_FLOATS);
            sum_rows(cols, run + whole * LINE_FLOATS, LINE_FLOATS, 1, rest);
            for (int k = 0; k < LINE_FLOATS; k++)
                sum[c] += cols[k];
        }
}

/* Floats of the bias's scratch on core `rank`: its slices' sums. */
static int64_t bias_floats(const job *jb, int rank)
{
    const int64_t slices = bias_slices(jb);
    int64_t s0, s1;
    cg_split_range(slices, rank, jb->members, &s0, &s1);
    /* NHWC's one slice is summed by channels, straight into db */
    const int none = !jb->nchw && slices == 1;
    return none ? 0 : (s1 - s0) * cg_bias_slice_doubles(&jb->plan) * 2;
}

/* db on core `rank`, its scratch (bias_floats) at `mem`. */
static void bias_sums(job *jb, int rank, float *mem)
{
    const cg_plan *p = &jb->plan;
    const int64_t slices = bias_slices(jb);
    cg_trace_mark since = cg_trace_start();
    if (!jb->nchw && slices == 1) {
        cg_bias_channels(p, dy_of(jb), rank, jb->members, db_of(jb));
        cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_COMPUTE, since);
        return;
    }
    int64_t s0, s1;
    cg_split_range(slices, rank, jb->members, &s0, &s1);
    for (int64_t i = s0; i < s1; i++) {
        double *sum = (double *)mem + (i - s0) * cg_bias_slice_doubles(p);
        int64_t first, last;
        cg_split_range(jb->nchw ? p->batch : p->rows, (int)i, (int)slices, &first, &last);
        if (jb->nchw)
            nchw_bias_slice(jb, first, last, sum);
        else
            cg_bias_slice(p, dy_of(jb), first, last, sum);
        jb->bias_sums[i] = sum;
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_COMPUTE, since);
    cm_bar_all(jb->core_mask, 1); /* every slice's sums are there */
    since = cg_trace_start();
    cg_bias_reduce(p, jb->bias_sums, slices, rank, jb->members, db_of(jb));
    cg_trace_region(CG_PHASE_REDUCE, CG_PHASE_REDUCE, since);
}

static cg_status bias_core(job *jb, int rank, cg_error *err)
{
    int64_t *unused;
    float *mem;
    if (core_scratch(jb, 0, bias_floats(jb, rank), &unused, &mem, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    bias_sums(jb, rank, mem);
    return CG_OK;
}

/* ---- depthwise NHWC: vectors of channels, no GEMM --------------------- */

/* One input channel per group, and one output channel or a few (the
 * channel multiplier m, where the groups fill the kernels' vectors:
 * cg_depthwise_kernels_take): a GEMM per group would be a dot product of `taps`
 * terms, so the pixels are walked directly, each tap a multiply-add over
 * the output channels' vector, with w as [tap][channel]. With m > 1 the
 * forward reads x's rows with each channel repeated m times (dw_repeats),
 * and the input gradient sums each group's m channels of its products. */
static int depthwise_nhwc(const job *jb)
{
    return !jb->nchw && cg_depthwise_kernels_take(&jb->plan);
}

/* NHWC groups of a few channels, as many in as out: the forward and the
 * input gradient go pixel by pixel like the depthwise ones, each channel's
 * sum over the taps and its group's G channels (the grouped_pixel
 * kernels), where a GEMM a group would multiply matrices of a few
 * columns. */
static int grouped_nhwc(const job *jb)
{
    const cg_plan *p = &jb->plan;
    return !jb->nchw && cg_grouped_few(p) && p->cin_g > 1;
}

/* Weights by tap and partner, [tap][j][channel], as the pixel kernels read
 * them: for each lane c and j < G, the weight that pairs channel c with
 * channel j of its group (depthwise, G = 1: w's [channel][tap] transposed);
 * the forward's lane is an output channel and j an input one, the input
 * gradient's the other way round. */
static void weights_by_tap(const job *jb, float *by_tap)
{
    const cg_plan *p = &jb->plan;
    const int64_t g = p->cin_g, c_all = p->cout;
    const int data = jb->op == CG_CONV2D_BACKWARD_DATA;
    for (int64_t tap = 0; tap < p->taps; tap++)
        for (int64_t j = 0; j < g; j++)
            for (int64_t c = 0; c < c_all; c++) /* forward: w[c][tap][j]; data: w[c's j][tap][c] */
                by_tap[(tap * g + j) * c_all + c] =
                    data ? jb->in1[((c - c % g + j) * p->taps + tap) * g + c % g]
                         : jb->in1[(c * p->taps + tap) * g + j];
}

/* ---- depthwise input gradients of a stride over 1: a pixel at a time ---- */

/* An input position of class `cls` (its index modulo the stride) meets tap k
 * (k * dilation - pad congruent to it): which taps each pixel meets, for 3x3
 * and stride 2 one, two or four of the nine. A pixel's call walks those
 * alone, their weights side by side (weights_by_class): `mbv1_dw_28_s2`'s
 * input gradient was measured 1.20x faster than with all nine taps
 * tested for each 16 channels (1 core; 2 cores 1.27x, AVX2 1.33x). */
static int64_t tap_class(int64_t k, int64_t dilation, int64_t pad, int64_t stride)
{
    return ((k * dilation - pad) % stride + stride) % stride;
}

/* tap_class(k, ...) == cls, in one division: on each pixel's path */
static int class_meets(int64_t cls, int64_t k, int64_t dilation, int64_t pad, int64_t stride)
{
    return (cls + pad - k * dilation) % stride == 0;
}

/* Taps of one axis that class `cls` meets, and those of the classes before it. */
static void class_taps(int64_t cls, int64_t taps, int64_t dilation, int64_t pad, int64_t stride,
                       int64_t *meets, int64_t *before)
{
    *meets = *before = 0;
    for (int64_t k = 0; k < taps; k++) {
        const int64_t c = tap_class(k, dilation, pad, stride);
        *meets += c == cls;
        *before += c < cls;
    }
}

/* Where tap (k, of `taps` along an axis) falls in its class: the taps of
 * its class before it. */
static int64_t rank_in_class(int64_t k, int64_t dilation, int64_t pad, int64_t stride)
{
    const int64_t cls = tap_class(k, dilation, pad, stride);
    int64_t before = 0;
    for (int64_t j = 0; j < k; j++)
        before += class_meets(cls, j, dilation, pad, stride);
    return before;
}

/* The depthwise input gradient's weights class by class (row class, then
 * column class), each class's taps in order (kh, then kw): by_tap[(the
 * class's first tap + i) * c + channel], so that a pixel's call walks the
 * taps it meets. Tap by tap, not class by class: a stride may be far larger
 * than the kernel. */
static void weights_by_class(const job *jb, float *by_tap)
{
    const cg_plan *p = &jb->plan;
    const int64_t c = p->cout;
    for (int64_t kh = 0; kh < p->kernel_h; kh++) {
        const int64_t a = tap_class(kh, p->dil_h, p->pad_u, p->stride_h);
        int64_t rows_a, rows_before;
        class_taps(a, p->kernel_h, p->dil_h, p->pad_u, p->stride_h, &rows_a, &rows_before);
        const int64_t row_rank = rank_in_class(kh, p->dil_h, p->pad_u, p->stride_h);
        for (int64_t kw = 0; kw < p->kernel_w; kw++) {
            const int64_t b = tap_class(kw, p->dil_w, p->pad_l, p->stride_w);
            int64_t cols_b, cols_before;
            class_taps(b, p->kernel_w, p->dil_w, p->pad_l, p->stride_w, &cols_b, &cols_before);
            const int64_t t = rows_before * p->kernel_w + rows_a * cols_before + row_rank * cols_b +
                              rank_in_class(kw, p->dil_w, p->pad_l, p->stride_w);
            for (int64_t ch = 0; ch < c; ch++)
                by_tap[t * c + ch] = jb->in1[ch * p->taps + kh * p->kernel_w + kw];
        }
    }
}

/* ---- depthwise by runs of a row ---- */

/* The first or the last source row (image * len + sy) that output pixel
 * `at`'s row reaches. */
static int64_t source_row(const dw_axis *v, int64_t out_h, int64_t out_w, int64_t at, int last)
{
    const int64_t image = at / (out_h * out_w), oy = at / out_w % out_h;
    const int64_t reach_all = v->taps > 0 ? (v->taps - 1) * v->tap : 0; /* < 0: taps run up */
    const int64_t reach = oy * v->step + v->off + ((reach_all > 0) == last ? reach_all : 0);
    return image * v->len + max64(0, min64(v->len - 1, reach));
}

/* Plans asking for the source rows (whole) that the output row of pixel
 * `next` (none at or past `total`) reaches beyond row *asked (all of them
 * where `next` does not follow the row before: a core's next piece), a few lines at
 * each of this row's `blocks` (8 pixels by a line of channels; the kernels
 * step once a block of their own: fewer steps ask for the rows' first part,
 * more ask for all of them sooner), and moves *asked on. The kernels read a
 * few vectors of a pixel's channels at a time, a stream for each of the
 * many pixels a run's taps reach, which the hardware prefetchers do not
 * follow.
 * Against asking for the rows all at once at the row's start at stride 1
 * and not at stride 2 (Zen 5, in-process A/B over three runs, 1 and 2 cores,
 * both kernel sets; the host's noise moved them run to run):
 * mbv1_dw_28_s2's forward 1.04-1.67x, mbv1_dw_56's input gradient
 * 0.97-1.76x, mbv1_dw_112's 0.98-1.20x, the stride-1 forwards 0.89-1.22x.
 * Not asking at all made the stride-1 layers 0.71-0.94x as fast. Spread
 * over all the row's blocks rather than its first half (half as many lines
 * asked at each): the training step's forward on mbv1_dw_28_s2 1.04x /
 * 1.07x (1 / 2 cores), mbv1_dw_56's 1.00x / 1.03x, input gradients
 * 1.03-1.07x at 2 cores, the AVX2 kernels 1.02-1.05x (Xeon family 6 model
 * 207, medians of 11 alternated pairs). */
static void plan_next_row(cg_tile_prefetch *ask, const dw_axis *v, const float *src,
                          int64_t row_floats, int64_t out_h, int64_t out_w, int64_t next,
                          int64_t total, int jump, int64_t blocks, int64_t *asked)
{
    if (next >= total) {
        cg_range_prefetch_plan(ask, src, src, 0);
        return;
    }
    const int64_t bottom = source_row(v, out_h, out_w, next, 1);
    const int64_t from = jump ? source_row(v, out_h, out_w, next, 0) : *asked + 1;
    cg_range_prefetch_plan(ask, src + from * row_floats, src + (bottom + 1) * row_floats,
                           max64(1, blocks));
    *asked = jump ? bottom : max64(*asked, bottom);
}

/* The channel multiplier's rows (depthwise_nhwc with m > 1): the
 * forward's source rows with each channel repeated m times, in `slots`
 * rows (tags: the source row each holds, -1: none), a source row's slot its
 * index modulo the kernel's span of rows, so that a row the next output row
 * reads again is made once, or, where that span is far more rows than the
 * kernel's (a large dilation), the kernel row's (`by_kernel_row`: made for
 * each output row); the input gradient's products of an output row, each
 * group's m then summed into dx. */
typedef struct dw_repeats {
    int64_t m, slots;
    int by_kernel_row;
    float *rows;
    int64_t *tags;
} dw_repeats;

/* dst[i * m + j] = s[i], i < n, j < m; loops of a constant m for 2 and 4,
 * which the compiler vectorises (the general one was 3x the kernel's time). */
static void repeat_each(float *restrict dst, const float *restrict s, int64_t n, int64_t m)
{
    if (m == 2) {
        for (int64_t i = 0; i < n; i++)
            dst[2 * i] = dst[2 * i + 1] = s[i];
    } else if (m == 4) {
        for (int64_t i = 0; i < n; i++)
            dst[4 * i] = dst[4 * i + 1] = dst[4 * i + 2] = dst[4 * i + 3] = s[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++)
                dst[i * m + j] = s[i];
    }
}

/* Source row `row` (image * len + y) of src (pixels of c / m channels, len
 * a row), each channel repeated m times, from its slot (kernel row kh's). */
static const float *repeated_row(const dw_repeats *r, const float *src, int64_t row, int64_t kh,
                                 int64_t len, int64_t c)
{
    const int64_t slot = r->by_kernel_row ? kh : row % r->slots;
    float *dst = r->rows + slot * len * c;
    if (r->tags[slot] != row) {
        repeat_each(dst, src + row * len * (c / r->m), len * (c / r->m), r->m);
        r->tags[slot] = row;
    }
    return dst;
}

/* dx's pixels [0, count) = the sums of each group's m products in t, in
 * order; a constant m for 2 and 4, as repeat_each. */
static void sum_groups(float *restrict dx, const float *restrict t, int64_t count, int64_t groups,
                       int64_t m)
{
    const int64_t n = count * groups;
    if (m == 2) {
        for (int64_t i = 0; i < n; i++)
            dx[i] = t[2 * i] + t[2 * i + 1];
    } else if (m == 4) {
        for (int64_t i = 0; i < n; i++)
            dx[i] = ((t[4 * i] + t[4 * i + 1]) + t[4 * i + 2]) + t[4 * i + 3];
    } else {
        for (int64_t i = 0; i < n; i++) {
            float sum = t[i * m];
            for (int64_t j = 1; j < m; j++)
                sum += t[i * m + j];
            dx[i] = sum;
        }
    }
}

/* Whether an output of `floats` floats goes past the caches: larger than
 * the last-level cache (at most 16 MiB of it: kernels/context.c), it goes
 * to memory whatever reads it next; written by non-temporal stores, it is
 * not read in first. */
static int past_caches(int64_t floats)
{
    return floats * (int64_t)sizeof(float) > cg_kernels()->stream_bytes;
}

/* The depthwise (one input channel a group) forward, or input gradient of
 * stride 1, over output pixels [first, last) of `total`, out_h x out_w images: each output
 * row's pixels whose taps are all inside as one run of the dwconv_run
 * kernel, the others (by the edges) a run each, through their inside taps;
 * `rows` holds 2 * kernel_h pointers: a run's rows, and the source lines of
 * the output row's kernel rows. The last row asks for the rows of pixel
 * `then`'s (the core's next piece); *asked: the last source row asked for.
 * `rep`: the multiplier's rows (NULL where it is 1). */
static void depthwise_runs(const job *jb, const dw_axis *v, const dw_axis *h, const float *src,
                           const float *init, int64_t out_h, int64_t out_w, const float *by_tap,
                           const float **rows, const dw_repeats *rep, int64_t first, int64_t last,
                           int64_t then, int64_t *asked)
{
    const int forward = jb->op == CG_CONV2D_FORWARD;
    const int64_t m = rep ? rep->m : 1, c = jb->plan.cout, total = jb->plan.batch * out_h * out_w;
    const int64_t src_c = forward ? c / m : c, out_c = forward ? c : c / m; /* a pixel's */
    const int summed = rep && !forward; /* the products in rep->rows first */
    int64_t in_lo, in_hi;
    axis_inside(h, out_w, &in_lo, &in_hi);
    const float **line = rows + v->taps;
    const int64_t row_floats = h->len * src_c;
    const int stream = !summed && past_caches(total * out_c);
    for (int64_t at = first; at < last;) { /* a piece of an output row */
        const int64_t image = at / (out_h * out_w), oy = at / out_w % out_h, ox0 = at % out_w;
        const int64_t ox1 = min64(out_w, ox0 + last - at);
        cg_tile_prefetch ask;
        const int64_t blocks = (ox1 - ox0 + 7) / 8 * ((c + 15) / 16); /* 8 pixels x 64 bytes */
        const int64_t next = at + out_w - ox0;
        plan_next_row(&ask, v, src, row_floats, out_h, out_w, next < last ? next : then, total,
                      next >= last && then != last, blocks, asked);
        for (int64_t kh = 0; kh < v->taps; kh++) {
            const int64_t sy = oy * v->step + kh * v->tap + v->off;
            line[kh] = sy < 0 || sy >= v->len ? NULL
                       : rep != NULL && forward
                           ? repeated_row(rep, src, image * v->len + sy, kh, h->len, c)
                           : src + (image * v->len + sy) * h->len * c;
        }
        float *out = jb->out + ((image * out_h + oy) * out_w + ox0) * out_c;
        float *products = summed ? rep->rows : out;
        const int64_t inside0 = in_lo < ox0 ? ox0 : in_lo > ox1 ? ox1 : in_lo;
        const int64_t inside1 = in_hi < inside0 ? inside0 : in_hi > ox1 ? ox1 : in_hi;
        for (int64_t ox = ox0; ox < ox1;) {
            int64_t k0 = 0, k1 = h->taps, end = inside1;
            if (ox < inside0 || ox >= inside1) {
                axis_taps(h, ox, &k0, &k1);
                end = ox + 1;
            }
            for (int64_t kh = 0; kh < v->taps; kh++) /* at the run's first pixel and tap */
                rows[kh] = line[kh] && k0 < k1
                               ? line[kh] + (ox * h->step + h->off + k0 * h->tap) * c
                               : NULL;
            const cg_dwconv_run run = {.rows = rows,
                                       .kernel_h = v->taps,
                                       .kernel_w = h->taps,
                                       .kw0 = k0,
                                       .kw1 = k1,
                                       .pixel_step = h->step * c,
                                       .tap_step = h->tap * c,
                                       .ask = &ask,
                                       .stream = stream};
            cg_kernels()->dwconv_run(products + (ox - ox0) * c, init, &run, by_tap, end - ox, c);
            ox = end;
        }
        if (summed)
            sum_groups(out, products, ox1 - ox0, out_c, m);
        at += ox1 - ox0;
    }
}

/* ---- grouped: by pixels ---- */

/* Pixels a pixel call takes: the grouped kernels share each weight among
 * several; a depthwise input gradient's taps differ a pixel. */
static int64_t pixels_a_call(const cg_plan *p)
{
    return p->cin_g == 1 ? 1 : CG_GROUPED_PIXELS;
}

/* `count` pixels, `taps` rows each: out = init + the taps' rows times the
 * weights by tap, a pixel's channels after another's. */
static void some_pixels(const job *jb, float *out, const float *init, const float *const *rows,
                        const float *by_tap, int64_t count)
{
    const cg_plan *p = &jb->plan;
    cg_kernels()->grouped_pixel(out, p->cout, init, rows, by_tap, p->taps, p->cin_g, p->cout,
                                count);
}

/* y[row] = b + sum over taps of x(tap) * w[tap], for output pixels [first,
 * last); `rows` holds a pointer a tap for pixels_a_call pixels. */
static void forward_by_pixels(const job *jb, const float *by_tap, const float **rows, int64_t first,
                              int64_t last)
{
    const cg_plan *p = &jb->plan;
    const int64_t c = p->cout;
    cg_pixel px = cg_pixel_of_row(p, first); /* stepped, not divided, a pixel */
    for (int64_t row0 = first; row0 < last; row0 += pixels_a_call(p)) {
        const int64_t count = min64(pixels_a_call(p), last - row0);
        for (int64_t i = 0; i < count; i++, cg_next_pixel(p, &px))
            for (int64_t kh = 0; kh < p->kernel_h; kh++) {
                const int64_t ih = px.oh * p->stride_h + kh * p->dil_h - p->pad_u;
                for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                    const int64_t iw = px.ow * p->stride_w + kw * p->dil_w - p->pad_l;
                    const int inside_x = ih >= 0 && ih < p->in_h && iw >= 0 && iw < p->in_w;
                    rows[i * p->taps + kh * p->kernel_w + kw] =
                        inside_x ? jb->in0 + ((px.n * p->in_h + ih) * p->in_w + iw) * c : NULL;
                }
            }
        some_pixels(jb, jb->out + row0 * c, jb->bias, rows, by_tap, count);
    }
}

/* Output coordinate that input coordinate `in` meets through kernel
 * position k, or -1. */
static int64_t output_of(int64_t in, int64_t k, int64_t dilation, int64_t pad, int64_t stride,
                         int64_t out)
{
    const int64_t t = in + pad - k * dilation;
    if (stride == 1) /* no division */
        return t >= 0 && t < out ? t : -1;
    if (t < 0 || t % stride)
        return -1;
    return t / stride < out ? t / stride : -1;
}

/* dx[pixel] = sum over the taps that reach it of dy(tap) * w[tap], for input
 * pixels [first, last); `rows` holds a pointer a tap for pixels_a_call
 * pixels. */
static void data_by_pixels(const job *jb, const float *by_tap, const float **rows, int64_t first,
                           int64_t last)
{
    const cg_plan *p = &jb->plan;
    const int64_t c = p->cout, plane = p->in_h * p->in_w;
    /* the input pixel, stepped, not divided, a pixel */
    int64_t n = first / plane, ih = first % plane / p->in_w, iw = first % p->in_w;
    for (int64_t pixel0 = first; pixel0 < last; pixel0 += pixels_a_call(p)) {
        const int64_t count = min64(pixels_a_call(p), last - pixel0);
        for (int64_t i = 0; i < count; i++) {
            for (int64_t kh = 0; kh < p->kernel_h; kh++) {
                const int64_t oh = output_of(ih, kh, p->dil_h, p->pad_u, p->stride_h, p->out_h);
                for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                    const int64_t ow =
                        oh < 0 ? -1 : output_of(iw, kw, p->dil_w, p->pad_l, p->stride_w, p->out_w);
                    rows[i * p->taps + kh * p->kernel_w + kw] =
                        ow >= 0 ? jb->in0 + ((n * p->out_h + oh) * p->out_w + ow) * c : NULL;
                }
            }
            if (++iw == p->in_w) {
                iw = 0;
                if (++ih == p->in_h) {
                    ih = 0;
                    n++;
                }
            }
        }
        some_pixels(jb, jb->out + pixel0 * c, NULL, rows, by_tap, count);
    }
}

/* The depthwise input gradient of a stride over 1, for input pixels [first,
 * last): each pixel through the taps of its class (weights_by_class); `rows`
 * holds a pointer a tap; `rep`: the multiplier's products (NULL where it is
 * 1). */
static void data_by_classes(const job *jb, const float *by_class, const float **rows,
                            const dw_repeats *rep, int64_t first, int64_t last)
{
    const cg_plan *p = &jb->plan;
    const int64_t c = p->cout, plane = p->in_h * p->in_w, m = p->cout_g;
    const int stream = !rep && past_caches(p->batch * plane * c);
    for (int64_t pixel = first; pixel < last;) { /* a piece of an input row */
        const int64_t n = pixel / plane, ih = pixel % plane / p->in_w, iw0 = pixel % p->in_w;
        const int64_t iw1 = min64(p->in_w, iw0 + last - pixel), a = ih % p->stride_h;
        int64_t rows_a, rows_before;
        class_taps(a, p->kernel_h, p->dil_h, p->pad_u, p->stride_h, &rows_a, &rows_before);
        for (int64_t iw = iw0; iw < iw1; iw++) {
            const int64_t b = iw % p->stride_w;
            int64_t cols_b, cols_before, t = 0;
            class_taps(b, p->kernel_w, p->dil_w, p->pad_l, p->stride_w, &cols_b, &cols_before);
            for (int64_t kh = 0; kh < p->kernel_h; kh++) {
                if (!class_meets(a, kh, p->dil_h, p->pad_u, p->stride_h))
                    continue;
                const int64_t oh = output_of(ih, kh, p->dil_h, p->pad_u, p->stride_h, p->out_h);
                for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                    if (!class_meets(b, kw, p->dil_w, p->pad_l, p->stride_w))
                        continue;
                    const int64_t ow =
                        oh < 0 ? -1 : output_of(iw, kw, p->dil_w, p->pad_l, p->stride_w, p->out_w);
                    rows[t++] =
                        ow >= 0 ? jb->in0 + ((n * p->out_h + oh) * p->out_w + ow) * c : NULL;
                }
            }
            const int64_t first_tap = rows_before * p->kernel_w + rows_a * cols_before;
            float *out = jb->out + (pixel + iw - iw0) * (c / m);
            cg_kernels()->dwconv_pixel(rep ? rep->rows : out, NULL, rows, by_class + first_tap * c,
                                       t, c, stream);
            if (rep)
                sum_groups(out, rep->rows, 1, c / m, m);
        }
        pixel += iw1 - iw0;
    }
    if (stream)
        cg_stream_fence();
}

/* Forward and input gradient, depthwise or grouped_nhwc, split by pixels:
 * depthwise by runs of a row (the input gradient where its stride is 1) or
 * a pixel at a time through its class's taps, grouped pixels_a_call pixels
 * a call. The pixels go in pieces of whole rows, about PIECES_A_CORE a core
 * (pieces_queue_of). */
enum { PIECES_A_CORE = 64 };

/* How a core's depthwise (or grouped) forward or input gradient goes: its
 * space (a pointer a tap for each pixel of a call, or a run's 2 x
 * kernel_h; w by tap; the multiplier's rows) and the axes of its runs. */
typedef struct dw_pass {
    int forward, runs, by_class;
    int64_t width, height, pointers, weights, rep_floats;
    dw_axis v, h;
    dw_repeats rep;
} dw_pass;

static dw_pass dw_pass_of(const job *jb)
{
    const cg_plan *p = &jb->plan;
    dw_pass d;
    d.forward = jb->op == CG_CONV2D_FORWARD;
    d.width = d.forward ? p->out_w : p->in_w;
    d.height = d.forward ? p->out_h : p->in_h;
    d.weights = round_up(p->taps * p->cin_g * p->cout, LINE_FLOATS);
    d.pointers = max64(p->taps * pixels_a_call(p), 2 * p->kernel_h);
    /* the multiplier's rows: the forward's repeated source rows (enough
     * slots for an output row's kernel rows), the input gradient's products
     * of a row */
    const int64_t m = p->cin_g == 1 ? p->cout_g : 1;
    const int64_t reach = (p->kernel_h - 1) * p->dil_h + 1; /* source rows an output row spans */
    const int by_kernel_row = reach > 2 * p->kernel_h;
    d.rep = (dw_repeats){m, m > 1 && d.forward ? (by_kernel_row ? p->kernel_h : reach) : 0,
                         by_kernel_row, NULL, NULL};
    d.rep_floats = m == 1 ? 0 : d.forward ? d.rep.slots * p->in_w * p->cout : d.width * p->cout;
    d.by_class = p->cin_g == 1 && !d.forward && (p->stride_h > 1 || p->stride_w > 1);
    d.runs = p->cin_g == 1 && (d.forward || (p->stride_h == 1 && p->stride_w == 1));
    d.v = d.forward ? (dw_axis){p->stride_h, p->dil_h, -p->pad_u, p->in_h, p->kernel_h}
                    : (dw_axis){1, -p->dil_h, p->pad_u, p->out_h, p->kernel_h};
    d.h = d.forward ? (dw_axis){p->stride_w, p->dil_w, -p->pad_l, p->in_w, p->kernel_w}
                    : (dw_axis){1, -p->dil_w, p->pad_l, p->out_w, p->kernel_w};
    return d;
}

/* w in the pass's order: by class of pixels, or by tap. */
static void dw_pass_weights(const job *jb, const dw_pass *d, float *by_tap)
{
    const cg_trace_mark since = cg_trace_start();
    if (d->by_class)
        weights_by_class(jb, by_tap);
    else
        weights_by_tap(jb, by_tap);
    cg_trace_region(CG_PHASE_PACK, CG_PHASE_PACK, since);
}

/* The pass's space from a core's scratch, and w in order in it. */
static void dw_pass_setup(const job *jb, dw_pass *d, int64_t *rows, float *by_tap)
{
    d->rep.rows = by_tap + d->weights;
    d->rep.tags = rows + d->pointers;
    for (int64_t s = 0; s < d->rep.slots; s++)
        d->rep.tags[s] = -1; /* x is the call's */
    dw_pass_weights(jb, d, by_tap);
}

/* Output pixels [at, end) of the pass (`then`: the core's next piece). */
static void dw_pass_piece(const job *jb, dw_pass *d, const float *by_tap, const float **ptrs,
                          int64_t at, int64_t end, int64_t then, int64_t *asked)
{
    const dw_repeats *rep = d->rep.m > 1 ? &d->rep : NULL;
    if (*asked < 0 && d->runs)
        *asked = source_row(&d->v, d->height, d->width, at, 1);
    if (d->runs)
        depthwise_runs(jb, &d->v, &d->h, jb->in0, d->forward ? jb->bias : NULL, d->height, d->width,
                       by_tap, ptrs, rep, at, end, then, asked);
    else if (d->forward)
        forward_by_pixels(jb, by_tap, ptrs, at, end);
    else if (d->by_class)
        data_by_classes(jb, by_tap, ptrs, rep, at, end);
    else
        data_by_pixels(jb, by_tap, ptrs, at, end);
}

static cg_status depthwise_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    dw_pass d = dw_pass_of(jb);
    const int64_t pixels = p->batch * d.height * d.width, rows_total = p->batch * d.height;
    const int64_t piece = d.width * max64(1, rows_total / (jb->members * PIECES_A_CORE));
    const int64_t pieces = (pixels + piece - 1) / piece;
    int64_t first, last, *rows;
    float *by_tap;
    cg_split_range(pieces, rank, jb->members, &first, &last);
    const int some = first < last; /* a core with no range of its own leaves the pieces to
                                      the others; pointers are int64-sized here */
    if (core_scratch(jb, some ? d.pointers + d.rep.slots : 0, some ? d.weights + d.rep_floats : 0,
                     &rows, &by_tap, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    if (!some)
        return CG_OK;
    dw_pass_setup(jb, &d, rows, by_tap);
    const cg_trace_mark since = cg_trace_start();
    tile_queue queue = pieces_queue_of(jb, rank, pieces);
    int64_t asked = -1; /* the source rows asked for: the first piece's are read on demand */
    for (int64_t t = take_tile(&queue); t < queue.items;) {
        const int64_t next = take_tile(&queue);
        const int64_t at = t * piece, end = min64(pixels, at + piece);
        const int64_t then = next < queue.items ? next * piece : pixels;
        dw_pass_piece(jb, &d, by_tap, (const float **)rows, at, end, then, &asked);
        t = next;
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_COMPUTE, since);
    return CG_OK;
}

/* ---- NCHW depthwise forward and input gradient, a band of rows at a time -- */

/* NCHW's depthwise forward and input gradient go a band of an image's
 * output rows (about BAND_BYTES of output) at a time: each core transposes
 * the band's source rows into an NHWC image in its scratch, computes the
 * band there (the NHWC pass, on a job of one image) and transposes it into
 * the caller's output, so that the tensors are read and written once,
 * where the staged copies (run_staged) were written to memory and read
 * back. mbv1_dw_56 in NCHW (Xeon family 6 model 207, with the transposes
 * by columns, kernels/avx2/gemm_panel.c): forward and input gradient 1.55x
 * as fast as staged on 1 core, 1.6-2.4x on 2; still 3x the NHWC calls'
 * time, the transposes most of it. */
enum { BAND_BYTES = 128 << 10 };

/* The source rows (of the image) that output rows [r0, r1) reach, at most:
 * [*lo, *hi] (empty where *lo > *hi). */
static void band_source_rows(const cg_plan *p, int forward, int64_t r0, int64_t r1, int64_t *lo,
                             int64_t *hi)
{
    const int64_t reach = (p->kernel_h - 1) * p->dil_h, len = forward ? p->in_h : p->out_h;
    if (forward) {
        *lo = r0 * p->stride_h - p->pad_u;
        *hi = (r1 - 1) * p->stride_h - p->pad_u + reach;
    } else {
        *lo = floor_div(r0 + p->pad_u - reach, p->stride_h);
        *hi = floor_div(r1 - 1 + p->pad_u, p->stride_h);
    }
    *lo = max64(*lo, 0);
    *hi = min64(*hi, len - 1);
}

static cg_status depthwise_bands_core(job *jb, int rank, cg_error *err)
{
    const cg_plan *p = &jb->plan;
    job image = *jb; /* one NHWC image in this core's scratch */
    image.nchw = 0;
    image.plan.batch = 1;
    dw_pass d = dw_pass_of(&image);
    const int64_t src_c = d.forward ? p->cin : p->cout, out_c = d.forward ? p->cout : p->cin;
    const int64_t src_pixels = d.forward ? p->in_h * p->in_w : p->out_h * p->out_w;
    const int64_t band = max64(1, BAND_BYTES / (d.width * out_c * (int64_t)sizeof(float)));
    const int64_t bands = (d.height + band - 1) / band;
    int64_t first, last, *rows;
    float *by_tap;
    cg_split_range(p->batch * bands, rank, jb->members, &first, &last);
    const int some = first < last;
    /* w by tap, the multiplier's rows, the source image, the output image */
    const int64_t src_at = d.weights + round_up(d.rep_floats, LINE_FLOATS);
    const int64_t out_at = src_at + round_up(src_pixels * src_c, LINE_FLOATS);
    if (core_scratch(jb, some ? d.pointers + d.rep.slots : 0,
                     some ? out_at + d.height * d.width * out_c : 0, &rows, &by_tap, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    if (!some)
        return CG_OK;
    dw_pass_setup(&image, &d, rows, by_tap);
    float *src = by_tap + src_at;
    image.in0 = src;
    image.out = by_tap + out_at;
    cg_transpose_fn *transpose = cg_kernels()->transpose;
    const cg_trace_mark since = cg_trace_start();
    for (int64_t u = first; u < last; u++) {
        const int64_t n = u / bands, r0 = u % bands * band, r1 = min64(d.height, r0 + band);
        int64_t lo, hi;
        band_source_rows(p, d.forward, r0, r1, &lo, &hi);
        const float *in = jb->in0 + n * src_c * src_pixels;
        const int64_t src_w = d.forward ? p->in_w : p->out_w;
        if (lo <= hi) /* [c][p] -> [p][c] */
            transpose(src + lo * src_w * src_c, src_c, in + lo * src_w, src_pixels, src_c,
                      (hi + 1 - lo) * src_w);
        for (int64_t s = 0; s < d.rep.slots; s++)
            d.rep.tags[s] = -1; /* the image's rows are another's */
        int64_t asked = -1;
        dw_pass_piece(&image, &d, by_tap, (const float **)rows, r0 * d.width, r1 * d.width,
                      r1 * d.width, &asked);
        const int64_t pixels = d.height * d.width, at = r0 * d.width, count = (r1 - r0) * d.width;
        transpose(jb->out + n * out_c * pixels + at, pixels, image.out + at * out_c, out_c, count,
                  out_c);
    }
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_COMPUTE, since);
    return CG_OK;
}

/* NCHW's depthwise forward and input gradient (one input channel a group,
 * the depthwise kernels'): by bands, not on staged copies. */
static int depthwise_by_bands(const job *jb)
{
    return jb->nchw && jb->plan.cin_g == 1 && cg_depthwise_kernels_take(&jb->plan) &&
           (jb->op == CG_CONV2D_FORWARD || jb->op == CG_CONV2D_BACKWARD_DATA);
}

/* ---- the whole backward pass: dx by the weight gradient's pieces ------- */

/* cg_conv2d_backward of a depthwise layer (multiplier 1, any stride; NCHW
 * on its staged NHWC copies, x and dy transposed once for both gradients):
 * its input gradient runs inside the weight gradient, a piece of each
 * core's slice of dy at a time: after
 * the weight gradient has read a piece's dy (and x), the input gradient's
 * rows whose last dy row is in that piece are computed from the dy still
 * in cache, so dy comes from memory once for both where the two calls read
 * it twice (the bias gradient is summed from the same reads). Memory-bound
 * layers, whose time is their bytes: see the README. Each dx row is one
 * core's whole and the weight gradient's sums keep their order: the bits
 * are the separate calls'. */
static int backward_in_pieces(const cg_plan *p)
{
    return p->cin_g == 1 && p->cout_g == 1 && cg_depthwise_kernels_take(p);
}

/* About this much of dy a piece: with its x, well inside L2 beside the
 * rows the previous piece left there. */
enum { PIECE_DY_BYTES = 256 << 10 };

/* Output pixels a piece: whole output rows (tests force others: any
 * number is right). */
static int64_t piece_rows(const cg_plan *p)
{
    const int64_t row_bytes = p->out_w * p->cout * (int64_t)sizeof(float);
    return max64(1, PIECE_DY_BYTES / row_bytes) * p->out_w;
}

/* A core's space for the input gradient's pieces: its pass's w in order,
 * then the pass's pointers (int64-sized, as depthwise_core's). */
static int64_t piece_space_floats(const job *data)
{
    const dw_pass d = dw_pass_of(data);
    return d.weights + d.pointers * (int64_t)(sizeof(int64_t) / sizeof(float));
}

/* The first input row (image * in_h + iy) whose last dy row (at most
 * min(out_h - 1, (iy + pad_u) / stride_h), the lowest output row it can
 * reach) is at or past output pixel `pixel`'s row; batch * in_h past the
 * last. */
static int64_t first_input_row(const cg_plan *p, int64_t pixel)
{
    const int64_t per_image = p->out_h * p->out_w;
    if (pixel >= p->batch * per_image)
        return p->batch * p->in_h;
    const int64_t n = pixel / per_image;
    const int64_t iy = pixel % per_image / p->out_w * p->stride_h - p->pad_u;
    return n * p->in_h + (iy >= p->in_h ? p->in_h : max64(0, iy));
}

/* cg_weights_call.after_piece: the input gradient's rows whose last dy row
 * the weight gradient's piece [first, last) of output pixels has read. */
static void data_after_piece(void *ctx, int64_t first, int64_t last, float *space)
{
    job *jb = ctx;
    const cg_plan *p = &jb->plan;
    const int64_t q0 = first_input_row(p, first), q1 = first_input_row(p, last);
    if (q0 == q1)
        return;
    dw_pass d = dw_pass_of(jb); /* the input gradient's, multiplier 1: no rows of its own */
    float *by_tap = space;
    const int core = get_core_id();
    if (!jb->by_tap_ready[core]) {
        dw_pass_weights(jb, &d, by_tap);
        jb->by_tap_ready[core] = 1;
    }
    int64_t asked = -1;
    dw_pass_piece(jb, &d, by_tap, (const float **)(space + d.weights), q0 * p->in_w, q1 * p->in_w,
                  q1 * p->in_w, &asked);
}

/* ---- entry points ------------------------------------------------------ */

/* By operation: the public function's name. */
static const char *const FUNCTION_NAMES[] = {
    "cg_conv2d_forward",       "cg_conv2d_backward_data",         "cg_conv2d_backward_weights",
    "cg_conv2d_backward_bias", "cg_conv2d_backward_weights_bias", "cg_conv2d_backward"};

/* The weight gradient, with db or not, and dx or not. */
static int weights_op(cg_conv2d_op op)
{
    return op == CG_CONV2D_BACKWARD_WEIGHTS || op == CG_CONV2D_BACKWARD_WEIGHTS_BIAS ||
           op == CG_CONV2D_BACKWARD;
}

/* ---- NCHW through the NHWC paths --------------------------------------- */

/* NCHW's forward, input and weight gradients run on NHWC copies of their
 * tensors (x, dy; w as OHWI; the output), made in the calling thread's
 * space by every core's share of transposes (the `transpose` kernels): the
 * NHWC paths read a pixel's channels as vectors and through pointers (the
 * indirect, in-place and depthwise kernels), where NCHW's own im2col tiles
 * multiply a few output channels by rows of pixels. In-process A/B against
 * NCHW's own path (the Xeon of the README, 1 core, medians of 9 pairs),
 * forward / input / weight gradient: 3x3 64 -> 64 on 56x56 1.24x / 1.21x /
 * 1.18x, 256 -> 256 on 14x14 1.31x / 1.46x / 1.51x, 16 -> 32 on 14x14
 * (batch 32) 2.29x / 2.67x / 1.94x, 1 -> 16 on 28x28 0.77x / 2.40x /
 * 4.30x. The forward of one input channel keeps NCHW's own path (its x is
 * NHWC's already, and the NHWC forward of one channel runs on the same
 * tiles): staging only added the transposes. A staging past
 * NCHW_STAGED_MOST_BYTES in all also keeps NCHW's own path. */
enum { NCHW_STAGED_MOST_BYTES = 512 << 20, STAGE_PIXELS = 256 };

/* Elements of an activation of c channels (the input's or the output's). */
static int64_t image_elems(const cg_plan *p, int64_t c, int input)
{
    return p->batch * c * (input ? p->in_h * p->in_w : p->out_h * p->out_w);
}

/* The calling core's share of an activation of `channels` and `pixels` an
 * image: NCHW to NHWC (to_nhwc) or back, in units of STAGE_PIXELS pixels of
 * an image. */
static void stage_image(const job *jb, int rank, const float *src, float *dst, int64_t channels,
                        int64_t pixels, int to_nhwc)
{
    const int64_t per_image = (pixels + STAGE_PIXELS - 1) / STAGE_PIXELS;
    cg_transpose_fn *transpose = cg_kernels()->transpose;
    int64_t first, last;
    cg_split_range(jb->plan.batch * per_image, rank, jb->members, &first, &last);
    for (int64_t u = first; u < last; u++) {
        const int64_t n = u / per_image, p0 = u % per_image * STAGE_PIXELS;
        const int64_t count = min64(STAGE_PIXELS, pixels - p0), plane = n * channels * pixels;
        if (to_nhwc) /* [c][p] -> [p][c] */
            transpose(dst + plane + p0 * channels, channels, src + plane + p0, pixels, channels,
                      count);
        else
            transpose(dst + plane + p0, pixels, src + plane + p0 * channels, channels, count,
                      channels);
    }
}

/* The calling core's share of w or dw: OIHW to OHWI (to_ohwi) or back. */
static void stage_weights(const job *jb, int rank, const float *src, float *dst, int to_ohwi)
{
    const cg_plan *p = &jb->plan;
    cg_transpose_fn *transpose = cg_kernels()->transpose;
    int64_t first, last;
    cg_split_range(p->cout, rank, jb->members, &first, &last);
    for (int64_t co = first; co < last; co++) {
        const float *s = src + co * p->row_len;
        float *d = dst + co * p->row_len;
        if (to_ohwi) /* [ci][tap] -> [tap][ci] */
            transpose(d, p->cin_g, s, p->taps, p->cin_g, p->taps);
        else
            transpose(d, p->taps, s, p->cin_g, p->taps, p->cin_g);
    }
}

/* The calling core's share of the staging: the inputs into the NHWC copies
 * (in), or the NHWC output into the caller's (out). */
static void stage(const job *jb, int rank, int in)
{
    const cg_plan *p = &jb->plan;
    const job *to = jb->nhwc;
    const int64_t in_pixels = p->in_h * p->in_w, out_pixels = p->out_h * p->out_w;
    switch (jb->op) {
    case CG_CONV2D_FORWARD:
        if (in) {
            stage_image(jb, rank, jb->in0, (float *)to->in0, p->cin, in_pixels, 1);
            stage_weights(jb, rank, jb->in1, (float *)to->in1, 1);
        } else {
            stage_image(jb, rank, to->out, jb->out, p->cout, out_pixels, 0);
        }
        break;
    case CG_CONV2D_BACKWARD_DATA:
        if (in) {
            stage_image(jb, rank, jb->in0, (float *)to->in0, p->cout, out_pixels, 1);
            stage_weights(jb, rank, jb->in1, (float *)to->in1, 1);
        } else {
            stage_image(jb, rank, to->out, jb->out, p->cin, in_pixels, 0);
        }
        break;
    default: /* the weight gradient (with db or not: db needs no staging), with dx or not */
        if (in) {
            stage_image(jb, rank, jb->in0, (float *)to->in0, p->cin, in_pixels, 1);
            stage_image(jb, rank, jb->in1, (float *)to->in1, p->cout, out_pixels, 1);
            if (jb->data)
                stage_weights(jb, rank, jb->data->in1, (float *)to->data->in1, 1);
        } else {
            stage_weights(jb, rank, to->out, jb->out, 0);
            if (jb->data)
                stage_image(jb, rank, to->data->out, jb->data->out, p->cin, in_pixels, 0);
        }
        break;
    }
}

/* Floats of the NHWC copies of op's tensors: its two inputs and output,
 * then, for cg_conv2d_backward, its input gradient's w and dx. */
static int64_t staged_floats(cg_conv2d_op op, const cg_plan *p, int64_t *in0, int64_t *in1)
{
    const int64_t x = image_elems(p, p->cin, 1), y = image_elems(p, p->cout, 0),
                  w = (int64_t)p->dw_elems;
    *in0 = op == CG_CONV2D_BACKWARD_DATA ? y : x;
    *in1 = weights_op(op) ? y : w;
    const int64_t out = op == CG_CONV2D_FORWARD ? y : op == CG_CONV2D_BACKWARD_DATA ? x : w;
    return *in0 + *in1 + out + (op == CG_CONV2D_BACKWARD ? w + x : 0);
}

/* The operation of jb on the calling core. */
static cg_status run_op(job *jb, int rank, cg_error *err)
{
    const int depthwise = depthwise_nhwc(jb), by_pixel = depthwise || grouped_nhwc(jb);
    switch (jb->op) {
    case CG_CONV2D_FORWARD:
        return depthwise_by_bands(jb) ? depthwise_bands_core(jb, rank, err)
               : by_pixel             ? depthwise_core(jb, rank, err)
               : forward_on_rows(jb)  ? forward_rows_core(jb, rank, err)
                                      : output_pixels_core(jb, rank, err);
    case CG_CONV2D_BACKWARD_WEIGHTS:
    case CG_CONV2D_BACKWARD_WEIGHTS_BIAS:
    case CG_CONV2D_BACKWARD:
        return jb->nchw ? weights_nchw_core(jb, rank, err)
                        : cg_weights_core(&jb->weights, rank, err);
    case CG_CONV2D_BACKWARD_DATA:
        return depthwise_by_bands(jb) ? depthwise_bands_core(jb, rank, err)
               : by_pixel             ? depthwise_core(jb, rank, err)
               : data_by_columns(jb)  ? data_columns_core(jb, rank, err)
                                      : data_core(jb, rank, err);
    default: /* CG_CONV2D_BACKWARD_BIAS */
        return bias_core(jb, rank, err);
    }
}

/* NCHW staged (jb->nhwc): the inputs transposed into the NHWC copies, the
 * NHWC operation on them, then its output transposed into the caller's;
 * every core's share of each, a barrier between them (no output written
 * unless every core's NHWC operation succeeded: their scratch is agreed). */
static cg_status run_staged(job *jb, int rank, cg_error *err)
{
    cg_trace_mark since = cg_trace_start();
    stage(jb, rank, 1);
    cg_trace_region(CG_PHASE_PACK, CG_PHASE_PACK, since);
    cm_bar_all(jb->core_mask, 1); /* the copies are whole */
    const cg_status s = run_op(jb->nhwc, rank, err);
    if (s != CG_OK)
        return s;
    cm_bar_all(jb->core_mask, 1); /* the NHWC output is whole */
    since = cg_trace_start();
    stage(jb, rank, 0);
    cg_trace_region(CG_PHASE_FINISH, CG_PHASE_FINISH, since);
    return CG_OK;
}

static void core_entry(void *arg)
{
    job *jb = arg;
    int rank = GetLogicCoreId(jb->core_mask, get_core_id());
    cg_error mine; /* the other cores' copy of the same error */
    cg_error *err = rank == 0 ? jb->err : &mine;
    cg_plan_trace_label(FUNCTION_NAMES[jb->op], &jb->plan);
    const cg_status s = jb->nhwc ? run_staged(jb, rank, err) : run_op(jb, rank, err);
    if (rank == 0)
        jb->status = s;
}

static const char *const ARGUMENT_NAMES[][4] = {{"x", "w", "y"},         {"dy", "w", "dx"},
                                                {"x", "dy", "dw"},       {"dy", NULL, "db"},
                                                {"x", "dy", "dw", "db"}, {"x", "dy", "dw"}};

/* Host mode only: the library launches the cores itself. */
static cg_status from_host(cg_conv2d_op op, cg_error *err)
{
    const int core = get_core_id();
    if (core < 0)
        return CG_OK;
    return cg_fail(err, CG_ERR_INSIDE_LAUNCH,
                   "%s was called on emulated core %d: call cg_conv2d_* from an ordinary thread",
                   FUNCTION_NAMES[op], core);
}

static cg_status backward_in_turn(const cg_conv2d *conv, const float *x, const float *dy,
                                  const float *w, float *dx, float *dw, float *db, int core_mask,
                                  int64_t tile_rows, cg_error *err);

/* op on core_mask; `data` (op CG_CONV2D_BACKWARD only): its input
 * gradient's job, run by the weight gradient's pieces (NCHW: on the staged
 * copies, or, where they cannot be had, the two operations in turn). */
static cg_status conv2d_run(cg_conv2d_op op, const cg_conv2d *conv, const float *in0,
                            const float *in1, const float *bias, float *out, float *db,
                            int core_mask, int64_t tile_rows, job *data, cg_error *err)
{
    const char *const *arg = ARGUMENT_NAMES[op];
    const char *const names[] = {"conv", arg[0], arg[1], arg[2], arg[3]};
    const void *const ptrs[] = {conv, in0, in1, out, db};
    cg_status s = cg_require(ptrs, names, arg[3] ? 5 : 4, err);
    if (s != CG_OK)
        return s;
    job jb = {.op = op,
              .nchw = conv->layout == CG_LAYOUT_NCHW,
              .in0 = in0,
              .in1 = in1,
              .bias = bias,
              .out = out,
              .db = db,
              .core_mask = core_mask,
              .tile_rows = tile_rows,
              .data = data,
              .err = err};
    s = cg_conv2d_plan(conv, &jb.plan, err);
    if (s == CG_OK)
        s = from_host(op, err);
    if (s != CG_OK)
        return s;
    if (core_mask == 0)
        return cg_fail(err, CG_ERR_CORE_MASK, "core_mask is 0");
    jb.members = GetCoreNum(core_mask);
    job nhwc, nhwc_data;
    if (jb.nchw && op != CG_CONV2D_BACKWARD_BIAS && !depthwise_by_bands(&jb) &&
        !(op == CG_CONV2D_FORWARD && jb.plan.cin == 1)) {
        int64_t n0, n1;
        const int64_t floats = staged_floats(op, &jb.plan, &n0, &n1);
        const int fits = floats * (int64_t)sizeof(float) <= NCHW_STAGED_MOST_BYTES;
        float *copies = fits && !cg_fault_should_fail(CG_FAULT_NCHW_STAGING)
                            ? cg_thread_floats((size_t)floats)
                            : NULL;
        if (copies) { /* else NCHW's own path */
            nhwc = jb;
            nhwc.nchw = 0;
            nhwc.in0 = copies;
            nhwc.in1 = copies + n0;
            nhwc.out = copies + n0 + n1;
            jb.nhwc = &nhwc;
            if (data) { /* dy's copy, then w's and dx's after dw's */
                nhwc_data = *data;
                nhwc_data.in0 = nhwc.in1;
                nhwc_data.in1 = nhwc.out + jb.plan.dw_elems;
                nhwc_data.out = (float *)nhwc_data.in1 + jb.plan.dw_elems;
                nhwc.data = &nhwc_data;
            }
        } else if (data) {
            return backward_in_turn(conv, in0, in1, data->in1, data->out, out, db, core_mask,
                                    tile_rows, err);
        }
    }
    job *run = jb.nhwc ? jb.nhwc : &jb;
    if (weights_op(op) && !run->nchw) /* fp32 OHWI dw: the operator's */
        run->weights =
            (cg_weights_call){.plan = jb.plan,
                              .dy = run->in1,
                              .x = run->in0,
                              .out_dw = run->out,
                              .overwrite = 1,
                              .kc_forced = tile_rows,
                              .core_mask = core_mask,
                              .core_num = jb.members,
                              .out_db = db,
                              .db_sums = run->bias_sums,
                              .slices_taken = jb.members <= cm_cpus() ? &run->slices_taken : NULL,
                              .partials = run->partial,
                              .column_ranges = jb.members <= cm_cpus() ? run->column_ranges : NULL};
    if (data) {
        run->data->plan = jb.plan;
        run->weights.after_piece = data_after_piece;
        run->weights.piece_ctx = run->data;
        run->weights.piece_rows = tile_rows > 0 ? tile_rows : piece_rows(&jb.plan);
        run->weights.piece_floats = piece_space_floats(run->data);
    }
    s = cm_run_here(core_mask, core_entry, &jb, err);
    return s != CG_OK ? s : jb.status;
}

cg_status cg_conv2d_run(cg_conv2d_op op, const cg_conv2d *conv, const float *in0, const float *in1,
                        const float *bias, float *out, float *db, int core_mask, int64_t tile_rows)
{
    cg_error err;
    return cg_record(
        conv2d_run(op, conv, in0, in1, bias, out, db, core_mask, tile_rows, NULL, &err), &err);
}

/* The input gradient, then the weight gradient (and db). */
static cg_status backward_in_turn(const cg_conv2d *conv, const float *x, const float *dy,
                                  const float *w, float *dx, float *dw, float *db, int core_mask,
                                  int64_t tile_rows, cg_error *err)
{
    const cg_conv2d_op weights = db ? CG_CONV2D_BACKWARD_WEIGHTS_BIAS : CG_CONV2D_BACKWARD_WEIGHTS;
    const cg_status s = conv2d_run(CG_CONV2D_BACKWARD_DATA, conv, dy, w, NULL, dx, NULL, core_mask,
                                   tile_rows, NULL, err);
    if (s != CG_OK)
        return s;
    return conv2d_run(weights, conv, x, dy, NULL, dw, db, core_mask, tile_rows, NULL, err);
}

/* The input gradient by the weight gradient's pieces in one launch where
 * backward_in_pieces, else the two operations one after the other. The
 * arguments are checked before either. */
static cg_status backward_run(const cg_conv2d *conv, const float *x, const float *dy,
                              const float *w, float *dx, float *dw, float *db, int core_mask,
                              int64_t tile_rows, cg_error *err)
{
    const char *const names[] = {"conv", "x", "dy", "w", "dx", "dw"};
    const void *const ptrs[] = {conv, x, dy, w, dx, dw};
    cg_plan plan;
    cg_status s = cg_require(ptrs, names, 6, err);
    if (s == CG_OK)
        s = cg_conv2d_plan(conv, &plan, err);
    if (s == CG_OK)
        s = from_host(CG_CONV2D_BACKWARD, err);
    if (s != CG_OK)
        return s;
    if (backward_in_pieces(&plan)) {
        job data = {.op = CG_CONV2D_BACKWARD_DATA, .in0 = dy, .in1 = w, .out = dx};
        return conv2d_run(CG_CONV2D_BACKWARD, conv, x, dy, NULL, dw, db, core_mask, tile_rows,
                          &data, err);
    }
    return backward_in_turn(conv, x, dy, w, dx, dw, db, core_mask, tile_rows, err);
}

cg_status cg_conv2d_run_backward(const cg_conv2d *conv, const float *x, const float *dy,
                                 const float *w, float *dx, float *dw, float *db, int core_mask,
                                 int64_t tile_rows)
{
    cg_error err;
    return cg_record(backward_run(conv, x, dy, w, dx, dw, db, core_mask, tile_rows, &err), &err);
}

CG_API cg_status cg_conv2d_forward(const cg_conv2d *conv, const float *x, const float *w,
                                   const float *b, float *y, int core_mask)
{
    return cg_conv2d_run(CG_CONV2D_FORWARD, conv, x, w, b, y, NULL, core_mask, 0);
}

CG_API cg_status cg_conv2d_backward_data(const cg_conv2d *conv, const float *dy, const float *w,
                                         float *dx, int core_mask)
{
    return cg_conv2d_run(CG_CONV2D_BACKWARD_DATA, conv, dy, w, NULL, dx, NULL, core_mask, 0);
}

CG_API cg_status cg_conv2d_backward_weights(const cg_conv2d *conv, const float *x, const float *dy,
                                            float *dw, int core_mask)
{
    return cg_conv2d_run(CG_CONV2D_BACKWARD_WEIGHTS, conv, x, dy, NULL, dw, NULL, core_mask, 0);
}

CG_API cg_status cg_conv2d_backward_bias(const cg_conv2d *conv, const float *dy, float *db,
                                         int core_mask)
{
    return cg_conv2d_run(CG_CONV2D_BACKWARD_BIAS, conv, dy, NULL, NULL, db, NULL, core_mask, 0);
}

CG_API cg_status cg_conv2d_backward_weights_bias(const cg_conv2d *conv, const float *x,
                                                 const float *dy, float *dw, float *db,
                                                 int core_mask)
{
    return cg_conv2d_run(CG_CONV2D_BACKWARD_WEIGHTS_BIAS, conv, x, dy, NULL, dw, db, core_mask, 0);
}

CG_API cg_status cg_conv2d_backward(const cg_conv2d *conv, const float *x, const float *dy,
                                    const float *w, float *dx, float *dw, float *db, int core_mask)
{
    return cg_conv2d_run_backward(conv, x, dy, w, dx, dw, db, core_mask, 0);
}
