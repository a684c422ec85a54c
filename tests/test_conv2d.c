/* SPDX-License-Identifier: MIT */
/* The training step, cg_conv2d_*: forward (with and without bias), backward
 * data, backward weights and backward bias, in both layouts, against the
 * naive reference (conv2d_reference.c).
 *
 *   exact_*     small-integer data make every sum exact in fp32, so each
 *               function must equal the float reference bit for bit: a table
 *               of shapes x both layouts x core masks x forced tile sizes
 *   tolerance   random real data on larger shapes, within a worst-case
 *               rounding bound of the double reference
 *   gradients   dx, dw, db against central differences of L = sum(y * g),
 *               L computed with cg_conv2d_forward
 *   errors_*    every invalid descriptor field, NULL pointers, core_mask 0 and
 *               calls from inside a launch: the documented status, a detail
 *               naming cg_conv2d's field (never the operator's) and its
 *               value, nothing written, inputs untouched
 *
 * Outputs live in guard-page buffers with canaries around them and are filled
 * with NaNs before every call (an output accumulated into, or an element left
 * unwritten, shows); inputs are read-only pages. CGT_SEED changes the data. */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h" /* cg_conv2d_run: forces the rows of a tile */
#include "conv2d_reference.h"
#include "support.h"

#define TEST_TIMEOUT 300.0
#define MAX_FAILURES_SHOWN 8

#define ALL_32_CORES ((int)0xFFFFFFFFu)

/* ---- shapes ---------------------------------------------------------------- */
/* Zero groups, strides and dilations mean 1. `wide`: run on all 32 cores
 * with every tile size (the others with the automatic one). */
typedef struct shape {
    const char *name;
    int n, h, w, cin, cout, kh, kw, g;
    int sh, sw, dh, dw;
    int pt, pb, pl, pr;
    int wide;
} shape;

/* clang-format off */
static const shape SHAPES[] = {
    {"1x1", .n = 2, .h = 5, .w = 7, .cin = 3, .cout = 4, .kh = 1, .kw = 1},
    {"1x1 on a 1x1 input, 16->17", .n = 2, .h = 1, .w = 1, .cin = 16, .cout = 17, .kh = 1, .kw = 1},
    {"1x1, stride 3x2 > kernel", .n = 1, .h = 8, .w = 7, .cin = 17, .cout = 16, .kh = 1, .kw = 1,
     .sh = 3, .sw = 2, .wide = 1},
    /* more input channels than a block of K (the forward takes all of K at once) */
    {"1x1, 272->100", .n = 1, .h = 4, .w = 5, .cin = 272, .cout = 100, .kh = 1, .kw = 1},
    {"3x3 pad 1, 16->17", .n = 2, .h = 6, .w = 5, .cin = 16, .cout = 17, .kh = 3, .kw = 3,
     .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    /* K (135) past kc but A packed (15 channels a tap, taps apart): K in kc
     * blocks, the packing space's, on more pixels than an A block */
    {"3x3 dilation 1x2, 15->16 on 40x40", .n = 1, .h = 40, .w = 40, .cin = 15, .cout = 16,
     .kh = 3, .kw = 3, .dw = 2, .pt = 1, .pb = 1, .pl = 2, .pr = 2},
    {"3x3 pad 1, 64->64, batch 1", .n = 1, .h = 4, .w = 5, .cin = 64, .cout = 64, .kh = 3, .kw = 3,
     .pt = 1, .pb = 1, .pl = 1, .pr = 1, .wide = 1},
    {"3x3 pad 1, 33->1", .n = 2, .h = 5, .w = 5, .cin = 33, .cout = 1, .kh = 3, .kw = 3,
     .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"3x3, 1->33, asymmetric pads", .n = 2, .h = 5, .w = 6, .cin = 1, .cout = 33, .kh = 3, .kw = 3,
     .pt = 1, .pb = 0, .pl = 0, .pr = 2},
    {"3x3 stride 2, 3->16", .n = 2, .h = 9, .w = 10, .cin = 3, .cout = 16, .kh = 3, .kw = 3,
     .sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"2x2 stride 3 > kernel", .n = 2, .h = 11, .w = 10, .cin = 5, .cout = 7, .kh = 2, .kw = 2,
     .sh = 3, .sw = 3},
    {"3x2, asymmetric pads", .n = 2, .h = 5, .w = 6, .cin = 4, .cout = 5, .kh = 3, .kw = 2,
     .pt = 2, .pb = 0, .pl = 0, .pr = 1},
    {"pads larger than the kernel", .n = 1, .h = 4, .w = 5, .cin = 3, .cout = 4, .kh = 2, .kw = 3,
     .pt = 3, .pb = 4, .pl = 5, .pr = 3},
    {"1x5 kernel, 3x12 input", .n = 2, .h = 3, .w = 12, .cin = 6, .cout = 5, .kh = 1, .kw = 5,
     .pl = 2, .pr = 2},
    {"3x1 kernel, 20x2 input", .n = 1, .h = 20, .w = 2, .cin = 3, .cout = 3, .kh = 3, .kw = 1,
     .pt = 1, .pb = 1},
    {"2x3 dilation 1x3, 16->8", .n = 2, .h = 6, .w = 10, .cin = 16, .cout = 8, .kh = 2, .kw = 3,
     .dw = 3, .pt = 0, .pb = 1, .pl = 2, .pr = 0},
    {"7x7 stem, stride 2, 3->16", .n = 2, .h = 16, .w = 15, .cin = 3, .cout = 16, .kh = 7, .kw = 7,
     .sh = 2, .sw = 2, .pt = 3, .pb = 3, .pl = 3, .pr = 3, .wide = 1},
    /* few channels a tap, many a kernel row: the forward's padded row copies,
     * kept from one output row to the next (dilated: every other row) */
    {"5x5 dilation 2x1, 4->16, pads 3 2 2 2", .n = 2, .h = 11, .w = 9, .cin = 4, .cout = 16,
     .kh = 5, .kw = 5, .dh = 2, .pt = 3, .pb = 2, .pl = 2, .pr = 2, .wide = 1},
    {"7x7 stem, stride 2, 3->64", .n = 1, .h = 14, .w = 13, .cin = 3, .cout = 64, .kh = 7, .kw = 7,
     .sh = 2, .sw = 2, .pt = 3, .pb = 3, .pl = 3, .pr = 3},
    /* 39 output columns, almost all of them padding: no copy of a padded row
     * (that row was 1.9e9 pixels long) */
    {"1x1 6->16, a left pad of 1953853550, stride 6x50331651", .n = 1, .h = 8, .w = 4, .cin = 6,
     .cout = 16, .kh = 1, .kw = 1, .sh = 6, .sw = 50331651, .pt = 2, .pl = 1953853550, .pr = 3},
    {"output 1x1 (no pads), batch 3", .n = 3, .h = 3, .w = 3, .cin = 8, .cout = 9, .kh = 3,
     .kw = 3},
    {"output 1x1 (stride 5)", .n = 2, .h = 5, .w = 4, .cin = 4, .cout = 4, .kh = 2, .kw = 2,
     .sh = 5, .sw = 5},
    {"3x3 pad 1 on a 1x1 input, 15->16", .n = 2, .h = 1, .w = 1, .cin = 15, .cout = 16, .kh = 3,
     .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depthwise 3x3, 15 channels", .n = 2, .h = 7, .w = 6, .cin = 15, .cout = 15, .g = 15, .kh = 3,
     .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depthwise 5x5 stride 2, 33 channels, batch 1", .n = 1, .h = 9, .w = 8, .cin = 33, .cout = 33,
     .g = 33, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2, .wide = 1},
    {"depthwise 3x3, 64 channels, batch 3", .n = 3, .h = 5, .w = 4, .cin = 64, .cout = 64, .g = 64,
     .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depthwise 3x3 dilation 2, 16 channels", .n = 2, .h = 8, .w = 8, .cin = 16, .cout = 16,
     .g = 16, .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2},
    {"depthwise 2x2 stride 3 > kernel, 17 channels", .n = 2, .h = 9, .w = 10, .cin = 17,
     .cout = 17, .g = 17, .kh = 2, .kw = 2, .sh = 3, .sw = 3, .pt = 0, .pb = 1, .pl = 1, .pr = 0},
    /* narrower than the kernel: no pixel has all its taps inside, each its own range */
    {"depthwise 5x4 on 3x2, pads 2x3, dilation 1x2, 20 channels", .n = 2, .h = 3, .w = 2,
     .cin = 20, .cout = 20, .g = 20, .kh = 5, .kw = 4, .dw = 2, .pt = 2, .pb = 2, .pl = 3, .pr = 3},
    /* runs long enough for whole blocks of pixels between the edges, asymmetric pads */
    {"depthwise 3x3 on 5x29, pads 0/2 and 2/1, 17 channels", .n = 1, .h = 5, .w = 29, .cin = 17,
     .cout = 17, .g = 17, .kh = 3, .kw = 3, .pt = 0, .pb = 2, .pl = 2, .pr = 1},
    {"one channel, 3x2, asymmetric pads, batch 3", .n = 3, .h = 6, .w = 5, .cin = 1, .cout = 1,
     .kh = 3, .kw = 2, .pt = 1, .pb = 0, .pl = 1, .pr = 1},
    {"depth multiplier 2, 8 groups", .n = 2, .h = 6, .w = 6, .cin = 8, .cout = 16, .g = 8,
     .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depth multiplier 2, 3 groups, dilation 2", .n = 2, .h = 7, .w = 7, .cin = 3, .cout = 6,
     .g = 3, .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2},
    /* 32 groups or more: the depthwise kernels (cg_depthwise_kernels_take) */
    {"depth multiplier 2, 40 groups, runs past the edges", .n = 2, .h = 6, .w = 21, .cin = 40,
     .cout = 80, .g = 40, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depth multiplier 3, 32 groups, stride 2, dilation 2", .n = 2, .h = 9, .w = 8, .cin = 32,
     .cout = 96, .g = 32, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .dh = 2, .dw = 2, .pt = 2, .pb = 1,
     .pl = 2, .pr = 1},
    {"depth multiplier 4, 33 groups, 5x3 stride 2x1", .n = 1, .h = 8, .w = 9, .cin = 33,
     .cout = 132, .g = 33, .kh = 5, .kw = 3, .sh = 2, .sw = 1, .pt = 2, .pb = 2, .pl = 1, .pr = 1},
    {"depth multiplier 8, 34 groups, 3x3 stride 3", .n = 2, .h = 7, .w = 7, .cin = 34, .cout = 272,
     .g = 34, .kh = 3, .kw = 3, .sh = 3, .sw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    /* a dilation of 1.5e9 rows: only the middle kernel row meets the input (the
     * forward's repeated rows by kernel row, not by a span of 3e9 rows) */
    {"depth multiplier 2, 32 groups, dilation 1500000000 x 1", .n = 1, .h = 3, .w = 5, .cin = 32,
     .cout = 64, .g = 32, .kh = 3, .kw = 3, .dh = 1500000000, .pt = 1500000000,
     .pb = 1500000000, .pl = 1, .pr = 1},
    {"groups 2, dilation 2", .n = 2, .h = 9, .w = 8, .cin = 8, .cout = 6, .g = 2, .kh = 3, .kw = 3,
     .dh = 2, .dw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2},
    {"groups 4, 3x2 dilation 2x1, asymmetric pads, batch 3", .n = 3, .h = 7, .w = 9, .cin = 16,
     .cout = 12, .g = 4, .kh = 3, .kw = 2, .dh = 2, .dw = 1, .pt = 2, .pb = 1, .pl = 0, .pr = 1},
    {"groups 3, stride 2, dilation 2, batch 3", .n = 3, .h = 10, .w = 9, .cin = 9, .cout = 6,
     .g = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .dh = 2, .dw = 2, .pt = 2, .pb = 1, .pl = 1,
     .pr = 2, .wide = 1},
    {"3x3 stride 3x2, dilation 2x3, groups 2", .n = 2, .h = 11, .w = 10, .cin = 4, .cout = 6,
     .g = 2, .kh = 3, .kw = 3, .sh = 3, .sw = 2, .dh = 2, .dw = 3, .pt = 1, .pb = 2, .pl = 3,
     .pr = 0},
    {"2x1 kernel, stride 4 > the 2x3 input", .n = 3, .h = 2, .w = 3, .cin = 5, .cout = 3, .kh = 2,
     .kw = 1, .sh = 4, .sw = 4, .pt = 1, .pb = 0, .pl = 0, .pr = 1},
    {"groups 2, 34->32 (17 and 16 per group)", .n = 1, .h = 5, .w = 6, .cin = 34, .cout = 32,
     .g = 2, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
};
/* clang-format on */
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static cg_conv2d desc_of(const shape *s, cg_layout layout)
{
    cg_conv2d c;
    memset(&c, 0, sizeof c);
    c.layout = layout;
    c.batch = s->n;
    c.in_h = s->h;
    c.in_w = s->w;
    c.in_c = s->cin;
    c.out_c = s->cout;
    c.kernel_h = s->kh;
    c.kernel_w = s->kw;
    c.groups = s->g ? s->g : 1;
    c.stride_h = s->sh ? s->sh : 1;
    c.stride_w = s->sw ? s->sw : 1;
    c.dilation_h = s->dh ? s->dh : 1;
    c.dilation_w = s->dw ? s->dw : 1;
    c.pad_top = s->pt;
    c.pad_bottom = s->pb;
    c.pad_left = s->pl;
    c.pad_right = s->pr;
    return c;
}

static const char *layout_name(cg_layout l)
{
    return l == CG_LAYOUT_NHWC ? "NHWC" : l == CG_LAYOUT_NCHW ? "NCHW" : "bad layout";
}

static void desc_str(const cg_conv2d *c, char *buf, size_t len)
{
    snprintf(
        buf, len,
        "%s batch %d, in_h %d, in_w %d, in_c %d, out_c %d, kernel %dx%d, groups %d, stride %dx%d, "
        "dilation %dx%d, pads top %d bottom %d left %d right %d",
        layout_name(c->layout), c->batch, c->in_h, c->in_w, c->in_c, c->out_c, c->kernel_h,
        c->kernel_w, c->groups, c->stride_h, c->stride_w, c->dilation_h, c->dilation_w, c->pad_top,
        c->pad_bottom, c->pad_left, c->pad_right);
}

static uint64_t case_seed(const char *what, int i, int j)
{
    return cgt_mix64(cgt_base_seed() ^ cgt_fnv1a(what, strlen(what)) ^
                     (uint64_t)i * 0x9e3779b97f4a7c15ULL ^ (uint64_t)j * 0xbf58476d1ce4e5b9ULL);
}

/* ---- operations ---------------------------------------------------------------- */
typedef enum op_id {
    OP_FORWARD,         /* y from x, w, b */
    OP_FORWARD_NO_BIAS, /* y from x, w; b NULL */
    OP_BACKWARD_DATA,   /* dx from dy, w */
    OP_BACKWARD_WEIGHTS,
    OP_BACKWARD_BIAS,
    OP_WEIGHTS_BIAS_DW, /* cg_conv2d_backward_weights_bias: its dw checked */
    OP_WEIGHTS_BIAS_DB, /* the same call: its db checked */
    OP_BACKWARD_DX,     /* cg_conv2d_backward: its dx checked */
    OP_BACKWARD_DW,     /* the same call: its dw checked */
    OP_BACKWARD_DB,     /* the same call: its db checked */
    OP_COUNT
} op_id;

static const char *const OP_NAMES[OP_COUNT] = {"cg_conv2d_forward",
                                               "cg_conv2d_forward (b NULL)",
                                               "cg_conv2d_backward_data",
                                               "cg_conv2d_backward_weights",
                                               "cg_conv2d_backward_bias",
                                               "cg_conv2d_backward_weights_bias (dw)",
                                               "cg_conv2d_backward_weights_bias (db)",
                                               "cg_conv2d_backward (dx)",
                                               "cg_conv2d_backward (dw)",
                                               "cg_conv2d_backward (db)"};

/* One problem's tensors: inputs read-only, one output buffer per operation. */
typedef struct problem {
    cg_conv2d c;
    size_t nx, ny, nw, nb;
    cgt_buf x, w, b, dy;
    cgt_buf out[OP_COUNT];
} problem;

static size_t out_elems(const problem *p, op_id op)
{
    switch (op) {
    case OP_BACKWARD_DATA:
    case OP_BACKWARD_DX:
        return p->nx;
    case OP_BACKWARD_WEIGHTS:
    case OP_WEIGHTS_BIAS_DW:
    case OP_BACKWARD_DW:
        return p->nw;
    case OP_BACKWARD_BIAS:
    case OP_WEIGHTS_BIAS_DB:
    case OP_BACKWARD_DB:
        return p->nb;
    default:
        return p->ny;
    }
}

/* Small integers in [lo, hi] as floats. */
static void fill_ints(cgt_rng *r, float *v, size_t n, int lo, int hi)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = (float)cgt_rng_int(r, lo, hi);
}

/* Sizes, buffers and data. exact: integers (x, w, dy in -3..3, b in -4..4),
 * else uniform reals in [-1, 1]. Inputs end at a guard page; outputs have 16
 * canary bytes after them, then a guard page. */
static void problem_init(problem *p, const cg_conv2d *c, int exact, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->nx = cref_x_elems(c);
    p->ny = cref_y_elems(c);
    p->nw = cref_w_elems(c);
    p->nb = (size_t)c->out_c;
    cgt_rng r = cgt_rng_seeded(seed);
    cgt_buf *in[4] = {&p->x, &p->w, &p->b, &p->dy};
    const size_t n_in[4] = {p->nx, p->nw, p->nb, p->ny};
    for (int i = 0; i < 4; ++i) {
        cgt_buf_alloc(in[i], n_in[i] * sizeof(float), 0, CGT_AT_END);
        if (exact)
            fill_ints(&r, (float *)in[i]->ptr, n_in[i], i == 2 ? -4 : -3, i == 2 ? 4 : 3);
        else
            cgt_fill_f32(&r, (float *)in[i]->ptr, n_in[i], 1.0);
        cgt_buf_readonly(in[i]);
    }
    for (int op = 0; op < OP_COUNT; ++op)
        cgt_buf_alloc(&p->out[op], out_elems(p, (op_id)op) * sizeof(float), 16, CGT_AT_END);
}

static void problem_free(problem *p)
{
    cgt_buf_free(&p->x);
    cgt_buf_free(&p->w);
    cgt_buf_free(&p->b);
    cgt_buf_free(&p->dy);
    for (int op = 0; op < OP_COUNT; ++op)
        cgt_buf_free(&p->out[op]);
}

static const float *fptr(const cgt_buf *b)
{
    return (const float *)b->ptr;
}

/* cg_conv2d_backward_weights_bias's two outputs (either of its ops). */
static float *fused_dw(const problem *p)
{
    return (float *)p->out[OP_WEIGHTS_BIAS_DW].ptr;
}

static float *fused_db(const problem *p)
{
    return (float *)p->out[OP_WEIGHTS_BIAS_DB].ptr;
}

/* cg_conv2d_backward's three outputs (any of its ops). */
static float *backward_out(const problem *p, op_id op)
{
    return (float *)p->out[op].ptr;
}

/* Runs op on p's buffers. tile_rows 0: the public function; > 0: the
 * internal entry with that many rows a tile. */
static cg_status run_op(const problem *p, op_id op, int mask, int tile_rows)
{
    float *out = (float *)p->out[op].ptr;
    const float *x = fptr(&p->x), *w = fptr(&p->w), *b = fptr(&p->b), *dy = fptr(&p->dy);
    float *dx = backward_out(p, OP_BACKWARD_DX), *dw = backward_out(p, OP_BACKWARD_DW),
          *db = backward_out(p, OP_BACKWARD_DB);
    if (tile_rows > 0) {
        switch (op) {
        case OP_BACKWARD_DX:
        case OP_BACKWARD_DW:
        case OP_BACKWARD_DB:
            return cg_conv2d_run_backward(&p->c, x, dy, w, dx, dw, db, mask, tile_rows);
        case OP_WEIGHTS_BIAS_DW:
        case OP_WEIGHTS_BIAS_DB:
            return cg_conv2d_run(CG_CONV2D_BACKWARD_WEIGHTS_BIAS, &p->c, x, dy, NULL, fused_dw(p),
                                 fused_db(p), mask, tile_rows);
        case OP_FORWARD:
            return cg_conv2d_run(CG_CONV2D_FORWARD, &p->c, x, w, b, out, NULL, mask, tile_rows);
        case OP_FORWARD_NO_BIAS:
            return cg_conv2d_run(CG_CONV2D_FORWARD, &p->c, x, w, NULL, out, NULL, mask, tile_rows);
        case OP_BACKWARD_DATA:
            return cg_conv2d_run(CG_CONV2D_BACKWARD_DATA, &p->c, dy, w, NULL, out, NULL, mask,
                                 tile_rows);
        case OP_BACKWARD_WEIGHTS:
            return cg_conv2d_run(CG_CONV2D_BACKWARD_WEIGHTS, &p->c, x, dy, NULL, out, NULL, mask,
                                 tile_rows);
        default:
            return cg_conv2d_run(CG_CONV2D_BACKWARD_BIAS, &p->c, dy, NULL, NULL, out, NULL, mask,
                                 tile_rows);
        }
    }
    switch (op) {
    case OP_FORWARD:
        return cg_conv2d_forward(&p->c, x, w, b, out, mask);
    case OP_FORWARD_NO_BIAS:
        return cg_conv2d_forward(&p->c, x, w, NULL, out, mask);
    case OP_BACKWARD_DATA:
        return cg_conv2d_backward_data(&p->c, dy, w, out, mask);
    case OP_BACKWARD_WEIGHTS:
        return cg_conv2d_backward_weights(&p->c, x, dy, out, mask);
    case OP_WEIGHTS_BIAS_DW:
    case OP_WEIGHTS_BIAS_DB:
        return cg_conv2d_backward_weights_bias(&p->c, x, dy, fused_dw(p), fused_db(p), mask);
    case OP_BACKWARD_DX:
    case OP_BACKWARD_DW:
    case OP_BACKWARD_DB:
        return cg_conv2d_backward(&p->c, x, dy, w, dx, dw, db, mask);
    default:
        return cg_conv2d_backward_bias(&p->c, dy, out, mask);
    }
}

/* Coordinates of element i of op's output, for messages. */
static void coords_str(const cg_conv2d *c, op_id op, size_t i, char *buf, size_t len)
{
    int a, b, d, e;
    switch (op) {
    case OP_BACKWARD_DATA:
    case OP_BACKWARD_DX:
        cref_x_coords(c, i, &a, &b, &d, &e);
        snprintf(buf, len, "n=%d iy=%d ix=%d c=%d", a, b, d, e);
        break;
    case OP_BACKWARD_WEIGHTS:
    case OP_WEIGHTS_BIAS_DW:
    case OP_BACKWARD_DW:
        cref_w_coords(c, i, &a, &b, &d, &e);
        snprintf(buf, len, "co=%d kh=%d kw=%d ci=%d", a, b, d, e);
        break;
    case OP_BACKWARD_BIAS:
    case OP_WEIGHTS_BIAS_DB:
    case OP_BACKWARD_DB:
        snprintf(buf, len, "co=%zu", i);
        break;
    default:
        cref_y_coords(c, i, &a, &b, &d, &e);
        snprintf(buf, len, "n=%d oh=%d ow=%d co=%d", a, b, d, e);
        break;
    }
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Fills an output with quiet NaNs (all bytes 0xff) before a call. */
static void poison(const problem *p, op_id op)
{
    memset(p->out[op].ptr, 0xff, p->out[op].n);
}

/* A test's name and how many checks ran and failed. */
typedef struct tally {
    const char *test;
    int configs, failures;
} tally;

/* Records one failing configuration; detailed messages for the first few. */
static void report(tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(tally *t, const char *fmt, ...)
{
    ++t->failures;
    if (t->failures > MAX_FAILURES_SHOWN)
        return;
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr_expect(0, "%s: %s", t->test, msg);
}

/* The end of a test: its count of configurations (with CGT_STATS set), and
 * none may have failed. */
static void assert_no_failure(const tally *t)
{
    if (getenv("CGT_STATS"))
        fprintf(stderr, "%s: %d configurations, %d failed\n", t->test, t->configs, t->failures);
    cr_assert(t->failures == 0, "%s: %d of %d configurations failed (base seed 0x%llx)", t->test,
              t->failures, t->configs, (unsigned long long)cgt_base_seed());
}

/* ---- exactness ------------------------------------------------------------------ */
/* Every sum of the exact data is an integer of magnitude at most
 * 9*terms + 4 (|x|, |w|, |dy| <= 3, |b| <= 4): exact in fp32 in any order
 * while that is below 2^24, so the library must equal the float reference
 * bit for bit, zeros' signs included: both start their sums from +0. */

typedef struct exact_problem {
    problem p;
    float *want[OP_COUNT];
} exact_problem;

static void exact_init(exact_problem *e, const shape *s, cg_layout layout, int shape_index)
{
    const cg_conv2d c = desc_of(s, layout);
    problem_init(&e->p, &c, 1, case_seed("exact", shape_index, (int)layout));
    const problem *p = &e->p;
    for (int op = 0; op < OP_COUNT; ++op)
        e->want[op] = malloc((out_elems(p, (op_id)op) + 1) * sizeof(float));
    cref_forward_f32(&c, fptr(&p->x), fptr(&p->w), fptr(&p->b), e->want[OP_FORWARD]);
    cref_forward_f32(&c, fptr(&p->x), fptr(&p->w), NULL, e->want[OP_FORWARD_NO_BIAS]);
    cref_backward_data_f32(&c, fptr(&p->dy), fptr(&p->w), e->want[OP_BACKWARD_DATA]);
    cref_backward_weights_f32(&c, fptr(&p->x), fptr(&p->dy), e->want[OP_BACKWARD_WEIGHTS]);
    cref_backward_bias_f32(&c, fptr(&p->dy), e->want[OP_BACKWARD_BIAS]);
    memcpy(e->want[OP_WEIGHTS_BIAS_DW], e->want[OP_BACKWARD_WEIGHTS], p->nw * sizeof(float));
    memcpy(e->want[OP_WEIGHTS_BIAS_DB], e->want[OP_BACKWARD_BIAS], p->nb * sizeof(float));
    memcpy(e->want[OP_BACKWARD_DX], e->want[OP_BACKWARD_DATA], p->nx * sizeof(float));
    memcpy(e->want[OP_BACKWARD_DW], e->want[OP_BACKWARD_WEIGHTS], p->nw * sizeof(float));
    memcpy(e->want[OP_BACKWARD_DB], e->want[OP_BACKWARD_BIAS], p->nb * sizeof(float));
}

static void exact_free(exact_problem *e)
{
    for (int op = 0; op < OP_COUNT; ++op)
        free(e->want[op]);
    problem_free(&e->p);
}

/* The shape is valid, the library agrees on its output size, and the data
 * keep every sum exact. */
static void check_shape_basics(tally *t, const shape *s, const cg_conv2d *c)
{
    char d[400];
    desc_str(c, d, sizeof d);
    const cg_status st = cg_conv2d_check(c);
    if (st != CG_OK)
        report(t, "[%s] %s: cg_conv2d_check says %d (%s)", s->name, d, st, cg_status_message(st));
    const int oh = cg_conv2d_output_h(c), ow = cg_conv2d_output_w(c);
    if (oh != cref_out_h(c) || ow != cref_out_w(c))
        report(t, "[%s] %s: output size %dx%d, want %lldx%lld", s->name, d, oh, ow, cref_out_h(c),
               cref_out_w(c));
    long long most = cref_terms_forward(c);
    if (cref_terms_backward_data(c) > most)
        most = cref_terms_backward_data(c);
    if (cref_terms_backward_weights(c) > most)
        most = cref_terms_backward_weights(c);
    cr_assert(9 * most + 4 < (1LL << 24), "TEST HARNESS: [%s] sums of %lld terms may round",
              s->name, most);
}

/* One call of op on mask with tile_rows, compared bit for bit; 1 if right,
 * else 0 with the reason in msg. Touches no test state, so any thread may
 * call it. */
static int exact_call_ok(const shape *s, const exact_problem *e, op_id op, int mask, int tile_rows,
                         char *msg, size_t len)
{
    const problem *p = &e->p;
    const size_t n = out_elems(p, op);
    char tile[24], d[400];
    if (tile_rows > 0)
        snprintf(tile, sizeof tile, "%d", tile_rows);
    else
        snprintf(tile, sizeof tile, "automatic");
    desc_str(&p->c, d, sizeof d);

    /* cg_conv2d_backward's three outputs from one call: its dx's check
     * (every caller's loop takes OP_BACKWARD_DX just before DW and DB, with
     * the same arguments) poisons all three and makes the call */
    const int made = op == OP_BACKWARD_DW || op == OP_BACKWARD_DB;
    if (op == OP_BACKWARD_DX) {
        poison(p, OP_BACKWARD_DW);
        poison(p, OP_BACKWARD_DB);
    }
    if (!made)
        poison(p, op);
    const cg_status st = made ? CG_OK : run_op(p, op, mask, tile_rows);
    const cg_status last = made || tile_rows > 0 ? st : cg_last_status();
    if (st != CG_OK || last != CG_OK) {
        snprintf(msg, len,
                 "[%s] %s on mask 0x%08x, tile_rows %s: status %d (%s), cg_last_status %d\n  %s",
                 s->name, OP_NAMES[op], (unsigned)mask, tile, st, cg_status_message(st), last, d);
        return 0;
    }
    const float *got = (const float *)p->out[op].ptr, *want = e->want[op];
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
        const int same = bits_of(got[i]) == bits_of(want[i]);
        if (!same && bad++ == 0)
            first = i;
    }
    if (bad) {
        char at[96];
        coords_str(&p->c, op, first, at, sizeof at);
        snprintf(msg, len,
                 "[%s] %s on mask 0x%08x, tile_rows %s: %zu of %zu elements differ; first at %zu "
                 "(%s): got %.9g (0x%08x) want %.9g (0x%08x)\n  %s",
                 s->name, OP_NAMES[op], (unsigned)mask, tile, bad, n, first, at, (double)got[first],
                 bits_of(got[first]), (double)want[first], bits_of(want[first]), d);
        return 0;
    }
    const long long damage = cgt_buf_canary_damage(&p->out[op]);
    if (damage != -1) {
        snprintf(msg, len,
                 "[%s] %s on mask 0x%08x, tile_rows %s: byte %lld (relative to the output's "
                 "start, %zu bytes) written outside the output\n  %s",
                 s->name, OP_NAMES[op], (unsigned)mask, tile, damage, p->out[op].n, d);
        return 0;
    }
    return 1;
}

static void check_exact_call(tally *t, const shape *s, const exact_problem *e, op_id op, int mask,
                             int tile_rows)
{
    char msg[2048];
    ++t->configs;
    if (!exact_call_ok(s, e, op, mask, tile_rows, msg, sizeof msg))
        report(t, "%s", msg);
}

static const int MASKS[] = {0x1, 0x3, 0x5, 0x7, 0xF};
#define N_MASKS ((int)(sizeof MASKS / sizeof MASKS[0]))
/* 0: automatic (the public functions); else forced through cg_conv2d_run */
static const int TILES[] = {0, 1, 5};
#define N_TILES ((int)(sizeof TILES / sizeof TILES[0]))

/* Every shape in one layout: masks x tile sizes x operations. */
static void exact_layout(const char *test, cg_layout layout)
{
    tally t = {test, 0, 0};
    for (int si = 0; si < N_SHAPES; ++si) {
        const shape *s = &SHAPES[si];
        exact_problem e;
        exact_init(&e, s, layout, si);
        check_shape_basics(&t, s, &e.p.c);
        for (int m = 0; m < N_MASKS; ++m)
            for (int ti = 0; ti < N_TILES; ++ti)
                for (int op = 0; op < OP_COUNT; ++op)
                    check_exact_call(&t, s, &e, (op_id)op, MASKS[m], TILES[ti]);
        exact_free(&e);
    }
    assert_no_failure(&t);
}

Test(conv2d, exact_nhwc, .timeout = TEST_TIMEOUT)
{
    exact_layout("exact_nhwc", CG_LAYOUT_NHWC);
}

Test(conv2d, exact_nchw, .timeout = TEST_TIMEOUT)
{
    exact_layout("exact_nchw", CG_LAYOUT_NCHW);
}

/* All 32 emulated cores (more cores than batch items, rows or channels on
 * most shapes): every shape with the automatic tile, the `wide` ones with
 * every tile size. */
Test(conv2d, exact_32_cores, .timeout = TEST_TIMEOUT)
{
    tally t = {"exact_32_cores", 0, 0};
    for (int si = 0; si < N_SHAPES; ++si) {
        const shape *s = &SHAPES[si];
        const int ntiles = s->wide ? N_TILES : 1;
        for (int layout = 0; layout < 2; ++layout) {
            exact_problem e;
            exact_init(&e, s, (cg_layout)layout, si);
            for (int ti = 0; ti < ntiles; ++ti)
                for (int op = 0; op < OP_COUNT; ++op)
                    check_exact_call(&t, s, &e, (op_id)op, ALL_32_CORES, TILES[ti]);
            exact_free(&e);
        }
    }
    assert_no_failure(&t);
}

/* Depthwise (one input and one output channel a group): the shapes on
 * which cg_conv2d_backward computes dx by the weight gradient's pieces
 * (stride 1); on the others it makes the two calls. */
static int depthwise_shape(const shape *s)
{
    return s->g > 1 && s->g == s->cin && s->g == s->cout;
}

/* Every operation on each NHWC shape, on masks (ending at 0) x tile sizes
 * (ending at -1), exact; the shapes' seeds from seed_base; cg_conv2d_backward
 * on depthwise shapes only (on the others it is the two calls checked
 * here). */
static void exact_nhwc_shapes(const char *test, const shape *shapes, size_t count, const int *masks,
                              const int *tiles, int seed_base)
{
    tally t = {test, 0, 0};
    for (size_t si = 0; si < count; ++si) {
        exact_problem e;
        exact_init(&e, &shapes[si], CG_LAYOUT_NHWC, seed_base + (int)si);
        check_shape_basics(&t, &shapes[si], &e.p.c);
        for (const int *m = masks; *m; ++m)
            for (const int *ti = tiles; *ti >= 0; ++ti)
                for (int op = 0; op < OP_COUNT; ++op)
                    if (op < OP_BACKWARD_DX || depthwise_shape(&shapes[si]))
                        check_exact_call(&t, &shapes[si], &e, (op_id)op, *m, *ti);
        exact_free(&e);
    }
    assert_no_failure(&t);
}

/* NHWC shapes for the forward's and the input gradient's packed driver
 * (A packed from x or dy through row tables): K longer than a block, with
 * a tap's channels straddling the blocks; output channels past one B
 * micro-panel and a partial one; several tiles a core and, forced, a tile
 * longer than an A block; kernel rows cut by padding on either side; taps
 * one at a time (dilation, groups); stride phases, stored by the gather;
 * few pixels for many channels, where the cores split the forward's output
 * channels and the input gradient's input channels instead of the pixels;
 * input pixels no tap reaches (a stride over a 1x1 kernel), every group's
 * channels of them zero; a w larger than L2 (the forward's B packed a
 * micro-panel at a time, on CPUs whose L2 is under 4.8 MB); pixels by a
 * border a fifth or more of them (the small images here, a tile's rows
 * sorted by which taps stay inside, the padding skipped, the product copied
 * back to its pixels). Every operation, masks 1, 3 and 7 (the channels in
 * three shares), exact. */
Test(conv2d, packed_driver_edges, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    static const shape shapes[] = {
        {"3x3 48->80, pad 1", .n = 2, .h = 20, .w = 19, .cin = 48, .cout = 80, .kh = 3, .kw = 3,
         .pt = 1, .pb = 1, .pl = 1, .pr = 1},
        {"3x3 stride 2 40->56, pads 1 2 1 0", .n = 2, .h = 17, .w = 16, .cin = 40, .cout = 56,
         .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pb = 2, .pl = 1},
        {"3x3 dilation 2, groups 2, 64->64", .n = 2, .h = 12, .w = 13, .cin = 64, .cout = 64,
         .g = 2, .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2},
        {"1x1 200->20", .n = 3, .h = 9, .w = 9, .cin = 200, .cout = 20, .kh = 1, .kw = 1},
        {"5x3 stride 1x2, 24->17, asymmetric pads", .n = 1, .h = 15, .w = 22, .cin = 24,
         .cout = 17, .kh = 5, .kw = 3, .sw = 2, .pt = 2, .pl = 1, .pr = 2},
        {"3x3 100->120 on 9x11, channels split", .n = 2, .h = 9, .w = 11, .cin = 100, .cout = 120,
         .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
        {"1x1 stride 1x2, groups 2, 64->16: pixels no tap reaches", .n = 2, .h = 6, .w = 5,
         .cin = 64, .cout = 16, .g = 2, .kh = 1, .kw = 1, .sw = 2},
        {"3x3 256->520 on 7x7: w (4.8 MB) past L2, its B packed as the forward goes", .n = 1,
         .h = 7, .w = 7, .cin = 256, .cout = 520, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1,
         .pr = 1},
        {"5x3 dilation 2x1, 32->72 on 9x6, pads 3 1 2 0: rows sorted by border class", .n = 3,
         .h = 9, .w = 6, .cin = 32, .cout = 72, .kh = 5, .kw = 3, .dh = 2, .pt = 3, .pb = 1,
         .pl = 2},
    };
    /* clang-format on */
    static const int masks[] = {0x1, 0x3, 0x7, 0}, tiles[] = {0, 7, 300, -1};
    exact_nhwc_shapes("packed_driver_edges", shapes, sizeof shapes / sizeof *shapes, masks, tiles,
                      1000);
}

/* NHWC groups of a few channels, as many in as out (2, 3, 4 and 8 a
 * group): the forward and the input gradient by pixels, the weight
 * gradient's shifted sums; strides, dilations, pads on any side. Every
 * operation, masks 1, 3 and 7, exact. */
Test(conv2d, grouped_few_channels, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    static const shape shapes[] = {
        {"3x3, 6 groups of 4", .n = 2, .h = 9, .w = 10, .cin = 24, .cout = 24, .g = 6, .kh = 3,
         .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
        {"5x3 stride 2 dilation 2, 5 groups of 3", .n = 2, .h = 13, .w = 11, .cin = 15,
         .cout = 15, .g = 5, .kh = 5, .kw = 3, .sh = 2, .sw = 2, .dh = 2, .dw = 2, .pt = 3,
         .pb = 1, .pl = 2},
        {"1x1, 4 groups of 8", .n = 3, .h = 5, .w = 6, .cin = 32, .cout = 32, .g = 4, .kh = 1,
         .kw = 1},
        {"3x3 stride 2, 11 groups of 2", .n = 1, .h = 10, .w = 9, .cin = 22, .cout = 22, .g = 11,
         .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pr = 2},
    };
    /* clang-format on */
    static const int masks[] = {0x1, 0x3, 0x7, 0}, tiles[] = {0, 5, -1};
    exact_nhwc_shapes("grouped_few_channels", shapes, sizeof shapes / sizeof *shapes, masks, tiles,
                      2000);
}

/* NHWC layers of few input channels (under 16) and 16-64 output channels,
 * whose weight gradient keeps the padded input rows a pass reads in a ring
 * (one copy of a row however many output rows read it), or, where a stride
 * or dilation sets the rows far apart, a slot an output row: the stem's
 * shape, strides and dilations a row apart and past the kernel, a stride of
 * 2^30 (one output row; its ring would have been 2^30 rows), passes across
 * images. Their forward reads whole kernel rows from padded copies through
 * the copies' own row pointers, or, where K's blocks cut a kernel row (5 x 5
 * x 8 = 200 against 128), through pointers made for each block. Every
 * operation, masks 1 and 3, exact. */
Test(conv2d, few_input_channels, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    static const shape shapes[] = {
        {"7x7 stride 2, 3->16, pads 3", .n = 2, .h = 23, .w = 20, .cin = 3, .cout = 16, .kh = 7,
         .kw = 7, .sh = 2, .sw = 2, .pt = 3, .pb = 3, .pl = 3, .pr = 3},
        {"3x3 stride 2^30 x 1, 4->24, pads 1", .n = 2, .h = 9, .w = 12, .cin = 4, .cout = 24,
         .kh = 3, .kw = 3, .sh = 1 << 30, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
        {"2x3 stride 5 x 1, 6->16, batch 3", .n = 3, .h = 21, .w = 14, .cin = 6, .cout = 16,
         .kh = 2, .kw = 3, .sh = 5, .pl = 1},
        {"3x2 dilation 4 x 1, 6->32, pads 4 0 1 1", .n = 2, .h = 14, .w = 10, .cin = 6,
         .cout = 32, .kh = 3, .kw = 2, .dh = 4, .pt = 4, .pl = 1, .pr = 1},
        {"2x3 dilation 2^29 x 1, 5->16, pad top 2^29", .n = 1, .h = 6, .w = 11, .cin = 5,
         .cout = 16, .kh = 2, .kw = 3, .dh = 1 << 29, .pt = 1 << 29},
        {"5x5 stride 2, 8->24, pads 2: kernel rows cut by K's blocks", .n = 2, .h = 13,
         .w = 15, .cin = 8, .cout = 24, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .pt = 2, .pb = 2,
         .pl = 2, .pr = 2},
    };
    /* clang-format on */
    static const int masks[] = {0x1, 0x3, 0}, tiles[] = {0, 9, -1};
    exact_nhwc_shapes("few_input_channels", shapes, sizeof shapes / sizeof *shapes, masks, tiles,
                      3000);
}

/* Shapes whose weight gradient cuts its rows into slices (2048 rows and
 * more), on masks with fewer cores than slices, as many, and more (teams
 * sharing each slice): cg_conv2d_backward_weights_bias sums db slice by
 * slice as the weight gradient reads dy. Both layouts, every operation,
 * exact; then the fused call's dw and db on random data against the two
 * calls', bit for bit. */
/* clang-format off */
static const shape SLICED_SHAPES[] = {
    {"3x3 16->24 on 32x32, batch 2", .n = 2, .h = 32, .w = 32, .cin = 16, .cout = 24, .kh = 3,
     .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depthwise 3x3, 40 channels on 32x33, batch 2", .n = 2, .h = 32, .w = 33, .cin = 40,
     .cout = 40, .g = 40, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"1x1 64->40 on 24x24, batch 4", .n = 4, .h = 24, .w = 24, .cin = 64, .cout = 40, .kh = 1,
     .kw = 1},
    {"3x3, 5 groups of 4 on 36x30, batch 2", .n = 2, .h = 36, .w = 30, .cin = 20, .cout = 20,
     .g = 5, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"7x7 stride 2, 3->16 on 96x90", .n = 1, .h = 96, .w = 90, .cin = 3, .cout = 16, .kh = 7,
     .kw = 7, .sh = 2, .sw = 2, .pt = 3, .pb = 3, .pl = 3, .pr = 3},
    /* two blocks of channels (cg_conv2d_backward's pieces take every block) */
    {"depthwise 3x3, 300 channels on 9x10, batch 2", .n = 2, .h = 9, .w = 10, .cin = 300,
     .cout = 300, .g = 300, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
};
/* On the packed path (more than 64 output channels): checked by the same-bits
 * test only, which has no reference to compute (the exact one took three
 * times as long under TSan with it). */
static const shape PACKED_SLICED_SHAPE = {
    "3x3 16->80 on 32x32, batch 2", .n = 2, .h = 32, .w = 32, .cin = 16, .cout = 80, .kh = 3,
    .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1};
/* clang-format on */
static const int SLICED_MASKS[] = {0x1, 0x3, 0x7, 0xF, 0xFF, 0};

Test(conv2d, weights_bias_by_slices, .timeout = TEST_TIMEOUT)
{
    tally t = {"weights_bias_by_slices", 0, 0};
    const int n_shapes = (int)(sizeof SLICED_SHAPES / sizeof SLICED_SHAPES[0]);
    for (int si = 0; si < n_shapes; ++si)
        for (int layout = 0; layout < 2; ++layout) {
            const shape *s = &SLICED_SHAPES[si];
            exact_problem e;
            exact_init(&e, s, (cg_layout)layout, 3000 + si);
            check_shape_basics(&t, s, &e.p.c);
            for (const int *m = SLICED_MASKS; *m; ++m)
                for (int op = OP_BACKWARD_WEIGHTS; op < OP_COUNT; ++op)
                    check_exact_call(&t, s, &e, (op_id)op, *m, 0);
            exact_free(&e);
        }
    assert_no_failure(&t);
}

/* The first of n floats whose bits differ, or -1. */
static long long first_other_bits(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (bits_of(a[i]) != bits_of(b[i]))
            return (long long)i;
    return -1;
}

Test(conv2d, weights_bias_same_bits_as_the_two_calls, .timeout = TEST_TIMEOUT)
{
    tally t = {"weights_bias_same_bits_as_the_two_calls", 0, 0};
    const int n_shapes = (int)(sizeof SLICED_SHAPES / sizeof SLICED_SHAPES[0]);
    for (int si = 0; si < n_shapes + 1 + N_SHAPES; ++si)
        for (int layout = 0; layout < 2; ++layout) {
            const shape *s = si < n_shapes    ? &SLICED_SHAPES[si]
                             : si == n_shapes ? &PACKED_SLICED_SHAPE
                                              : &SHAPES[si - n_shapes - 1];
            const cg_conv2d c = desc_of(s, (cg_layout)layout);
            problem p;
            problem_init(&p, &c, 0, case_seed("same bits fused", si, layout));
            float *dw = (float *)p.out[OP_BACKWARD_WEIGHTS].ptr;
            float *db = (float *)p.out[OP_BACKWARD_BIAS].ptr;
            for (const int *m = SLICED_MASKS; *m; ++m) {
                ++t.configs;
                const cg_status st[3] = {run_op(&p, OP_BACKWARD_WEIGHTS, *m, 0),
                                         run_op(&p, OP_BACKWARD_BIAS, *m, 0),
                                         run_op(&p, OP_WEIGHTS_BIAS_DW, *m, 0)};
                if (st[0] != CG_OK || st[1] != CG_OK || st[2] != CG_OK) {
                    report(&t, "[%s] %s, mask 0x%x: status %d %d %d", s->name,
                           layout_name((cg_layout)layout), (unsigned)*m, st[0], st[1], st[2]);
                    continue;
                }
                const long long w_at = first_other_bits(fused_dw(&p), dw, p.nw);
                const long long b_at = first_other_bits(fused_db(&p), db, p.nb);
                if (w_at >= 0 || b_at >= 0)
                    report(&t,
                           "[%s] %s, mask 0x%x: the fused call's %s differs from the two "
                           "calls' at element %lld",
                           s->name, layout_name((cg_layout)layout), (unsigned)*m,
                           w_at >= 0 ? "dw" : "db", w_at >= 0 ? w_at : b_at);
                /* cg_conv2d_backward against the separate calls, with db and
                 * without (its dw alone); on depthwise shapes (whose dx it
                 * computes by pieces) also with tiles and pieces of 7 output
                 * pixels forced on both */
                const float *dx = (const float *)p.out[OP_BACKWARD_DATA].ptr;
                const float *alone[3] = {dx, dw, db};
                const op_id whole[3] = {OP_BACKWARD_DX, OP_BACKWARD_DW, OP_BACKWARD_DB};
                const size_t n[3] = {p.nx, p.nw, p.nb};
                const int depthwise = depthwise_shape(s);
                cg_status sb = run_op(&p, OP_BACKWARD_DATA, *m, 0);
                for (int how = 0; how < (depthwise ? 3 : 2); ++how) {
                    if (how == 2) { /* the separate calls again, tiles forced */
                        if (sb == CG_OK)
                            sb = run_op(&p, OP_BACKWARD_DATA, *m, 7);
                        if (sb == CG_OK)
                            sb = run_op(&p, OP_BACKWARD_WEIGHTS, *m, 7);
                        if (sb == CG_OK)
                            sb = run_op(&p, OP_BACKWARD_BIAS, *m, 7);
                    }
                    if (sb == CG_OK && how != 1)
                        sb = run_op(&p, OP_BACKWARD_DX, *m, how == 2 ? 7 : 0);
                    else if (sb == CG_OK)
                        sb = cg_conv2d_backward(&p.c, fptr(&p.x), fptr(&p.dy), fptr(&p.w),
                                                backward_out(&p, OP_BACKWARD_DX),
                                                backward_out(&p, OP_BACKWARD_DW), NULL, *m);
                    for (int k = 0; k < (how != 1 ? 3 : 2); ++k) {
                        const long long at =
                            sb != CG_OK
                                ? 0
                                : first_other_bits(backward_out(&p, whole[k]), alone[k], n[k]);
                        if (at >= 0)
                            report(&t,
                                   "[%s] %s, mask 0x%x, %s: cg_conv2d_backward's %s differs "
                                   "from the separate calls' at element %lld (status %d)",
                                   s->name, layout_name((cg_layout)layout), (unsigned)*m,
                                   how == 0   ? "pieces of its choice"
                                   : how == 1 ? "db NULL"
                                              : "pieces of 7 pixels",
                                   OP_NAMES[whole[k]], at, sb);
                    }
                }
            }
            problem_free(&p);
        }
    assert_no_failure(&t);
}

/* Depthwise NHWC outputs written past the caches (non-temporal stores,
 * where the output is larger than the context's stream_bytes and its
 * pixels whole lines): y and dx at stride 1, dx at stride 2 (alone and
 * inside cg_conv2d_backward), exact, in line-aligned buffers. ctest runs
 * this test once more as test_conv2d_streamed, with a last-level cache of
 * 64 KiB asked (CONVGRAD_CACHES), so that these outputs stream; under the
 * CPU's own caches they are written as any. */
static const shape STREAMED_SHAPES[] = {
    {"depthwise 3x3, 64 channels on 30x28, batch 2", .n = 2, .h = 30, .w = 28, .cin = 64,
     .cout = 64, .g = 64, .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"depthwise 3x3 stride 2, 64 channels on 30x28, batch 2", .n = 2, .h = 30, .w = 28, .cin = 64,
     .cout = 64, .g = 64, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
};

static float *aligned_floats(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    cr_assert(p);
    return p;
}

Test(conv2d, depthwise_outputs_past_the_caches, .timeout = TEST_TIMEOUT)
{
    tally t = {"depthwise_outputs_past_the_caches", 0, 0};
    for (size_t si = 0; si < sizeof STREAMED_SHAPES / sizeof STREAMED_SHAPES[0]; ++si) {
        const shape *s = &STREAMED_SHAPES[si];
        const cg_conv2d c = desc_of(s, CG_LAYOUT_NHWC);
        const size_t nx = cref_x_elems(&c), ny = cref_y_elems(&c), nw = cref_w_elems(&c);
        const size_t nb = (size_t)c.out_c;
        cgt_rng r;
        cgt_rng_seed(&r, case_seed("streamed", (int)si, 0));
        float *x = aligned_floats(nx), *dy = aligned_floats(ny), *w = aligned_floats(nw);
        float *b = aligned_floats(nb), *y = aligned_floats(ny), *dx = aligned_floats(nx);
        float *dw = aligned_floats(nw), *db = aligned_floats(nb);
        float *want_y = aligned_floats(ny), *want_dx = aligned_floats(nx);
        float *want_dw = aligned_floats(nw), *want_db = aligned_floats(nb);
        fill_ints(&r, x, nx, -3, 3);
        fill_ints(&r, dy, ny, -3, 3);
        fill_ints(&r, w, nw, -3, 3);
        fill_ints(&r, b, nb, -4, 4);
        cref_forward_f32(&c, x, w, b, want_y);
        cref_backward_data_f32(&c, dy, w, want_dx);
        cref_backward_weights_f32(&c, x, dy, want_dw);
        cref_backward_bias_f32(&c, dy, want_db);
        typedef struct {
            const char *what;
            float *got;
            const float *want;
            size_t n;
        } output;
        const output Y = {"y", y, want_y, ny}, DX = {"dx", dx, want_dx, nx};
        const output DW = {"dw", dw, want_dw, nw}, DB = {"db", db, want_db, nb};
        static const char *const CALLS[3] = {"cg_conv2d_forward", "cg_conv2d_backward_data",
                                             "cg_conv2d_backward"};
        const output outs[3][3] = {{Y}, {DX}, {DX, DW, DB}};
        const int count[3] = {1, 1, 3};
        for (int mask = 1; mask <= 3; mask += 2)
            for (int call = 0; call < 3; ++call) {
                for (int k = 0; k < count[call]; ++k)
                    memset(outs[call][k].got, 0xFF, outs[call][k].n * sizeof(float));
                const cg_status st = call == 0 ? cg_conv2d_forward(&c, x, w, b, y, mask)
                                     : call == 1
                                         ? cg_conv2d_backward_data(&c, dy, w, dx, mask)
                                         : cg_conv2d_backward(&c, x, dy, w, dx, dw, db, mask);
                ++t.configs;
                for (int k = 0; k < count[call]; ++k) {
                    const output *o = &outs[call][k];
                    const long long at = st != CG_OK ? 0 : first_other_bits(o->got, o->want, o->n);
                    if (at >= 0)
                        report(&t,
                               "[%s] mask 0x%x, %s: %s differs from the reference at %lld "
                               "(status %d)",
                               s->name, (unsigned)mask, CALLS[call], o->what, at, st);
                }
            }
        float *all[] = {x, dy, w, b, y, dx, dw, db, want_y, want_dx, want_dw, want_db};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k)
            free(all[k]);
    }
    assert_no_failure(&t);
}

/* Random shapes: any groups (depthwise and depth multipliers included),
 * kernels, strides, dilations and pads, both layouts, random masks and tile
 * sizes; every operation exact as above. $CGT_SCALE (default 1) multiplies
 * the number of cases; each failure names its case number and seed. */
static int scaled(int n)
{
    const char *s = getenv("CGT_SCALE");
    const double k = s && *s ? atof(s) : 1.0;
    const int m = (int)(n * (k > 0 ? k : 1.0));
    return m < 1 ? 1 : m;
}

static shape random_shape(cgt_rng *r)
{
    static const int chans[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
    for (;;) {
        shape s;
        memset(&s, 0, sizeof s);
        s.name = "random";
        s.n = cgt_rng_int(r, 1, 3);
        s.h = cgt_rng_int(r, 1, 9);
        s.w = cgt_rng_int(r, 1, 9);
        switch (cgt_rng_int(r, 0, 3)) {
        case 0: /* groups 1 */
            s.g = 1;
            s.cin = cgt_rng_pick(r, chans, 10);
            s.cout = cgt_rng_pick(r, chans, 10);
            break;
        case 1: /* depthwise */
            s.g = s.cin = s.cout = cgt_rng_pick(r, chans, 10);
            break;
        case 2: /* depth multiplier */
            s.g = s.cin = cgt_rng_pick(r, chans, 10);
            s.cout = s.g * cgt_rng_int(r, 2, 3);
            break;
        default: /* a few channels per group */
            s.g = cgt_rng_int(r, 2, 4);
            s.cin = s.g * cgt_rng_int(r, 1, 5);
            s.cout = s.g * cgt_rng_int(r, 1, 5);
            break;
        }
        s.kh = cgt_rng_int(r, 1, 4);
        s.kw = cgt_rng_int(r, 1, 4);
        s.sh = cgt_rng_int(r, 1, 4);
        s.sw = cgt_rng_int(r, 1, 4);
        s.dh = cgt_rng_int(r, 1, 3);
        s.dw = cgt_rng_int(r, 1, 3);
        s.pt = cgt_rng_int(r, 0, 4);
        s.pb = cgt_rng_int(r, 0, 4);
        s.pl = cgt_rng_int(r, 0, 4);
        s.pr = cgt_rng_int(r, 0, 4);
        const cg_conv2d c = desc_of(&s, CG_LAYOUT_NHWC);
        if (cref_out_h(&c) >= 1 && cref_out_w(&c) >= 1)
            return s;
    }
}

static int random_mask(cgt_rng *r)
{
    static const int masks[] = {0x1, 0x3, 0x5, 0xF, 0x90, (int)0x80000001u, ALL_32_CORES};
    if (cgt_rng_chance(r, 25)) {
        const unsigned m = (unsigned)cgt_rng_next(r) & 0xFFu;
        return m ? (int)m : 0x2;
    }
    return cgt_rng_pick(r, masks, (int)(sizeof masks / sizeof masks[0]));
}

Test(conv2d, exact_random_shapes, .timeout = TEST_TIMEOUT)
{
    tally t = {"exact_random_shapes", 0, 0};
    static const int tiles[] = {0, 0, 1, 2, 3, 7};
    const int n = scaled(60);
    for (int i = 0; i < n; ++i) {
        const uint64_t seed = case_seed("exact_random_shapes", i, 0);
        cgt_rng r = cgt_rng_seeded(seed);
        shape s = random_shape(&r);
        char name[64];
        snprintf(name, sizeof name, "random case %d, seed 0x%llx", i, (unsigned long long)seed);
        s.name = name;
        exact_problem e;
        exact_init(&e, &s, (cg_layout)cgt_rng_int(&r, 0, 1), i);
        check_shape_basics(&t, &s, &e.p.c);
        for (int k = 0; k < 2; ++k) {
            const int mask = random_mask(&r), tile = cgt_rng_pick(&r, tiles, 6);
            for (int op = 0; op < OP_COUNT; ++op)
                check_exact_call(&t, &s, &e, (op_id)op, mask, tile);
        }
        exact_free(&e);
    }
    assert_no_failure(&t);
}

/* Two host threads at once, each on its own cores (cores 0-3: masks 0x3 and
 * 0x5; cores 4-7: masks 0x30 and 0xA0), on different shapes and layouts:
 * calls on disjoint masks share no hidden state. Under TSan this is also the
 * race check of the training step. */
typedef struct conc_arg {
    int t;
    int configs, failures;
    char first[2200];
} conc_arg;

static void *conc_thread(void *a)
{
    conc_arg *k = a;
    static const int masks[2][2] = {{0x3, 0x5}, {0x30, 0xA0}}; /* [thread][round] */
    for (int si = k->t; si < N_SHAPES; si += 3) {
        const shape *s = &SHAPES[si];
        exact_problem e;
        exact_init(&e, s, (cg_layout)((si + k->t) % 2), si);
        for (int round = 0; round < 2; ++round)
            for (int op = 0; op < OP_COUNT; ++op) {
                char msg[2048];
                ++k->configs;
                if (!exact_call_ok(s, &e, (op_id)op, masks[k->t][round], round ? 5 : 0, msg,
                                   sizeof msg) &&
                    k->failures++ == 0)
                    snprintf(k->first, sizeof k->first, "thread %d: %s", k->t, msg);
            }
        exact_free(&e);
    }
    return NULL;
}

Test(conv2d, concurrent_host_threads, .timeout = TEST_TIMEOUT)
{
    pthread_t th[2];
    conc_arg args[2];
    memset(args, 0, sizeof args);
    for (int t = 0; t < 2; ++t) {
        args[t].t = t;
        cr_assert_eq(pthread_create(&th[t], NULL, conc_thread, &args[t]), 0, "pthread_create");
    }
    for (int t = 0; t < 2; ++t)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 2; ++t)
        cr_expect_eq(args[t].failures, 0,
                     "concurrent_host_threads: %d of %d calls failed; first: %s", args[t].failures,
                     args[t].configs, args[t].first);
}

/* A thread that keeps a CPU busy until *stop: beside a 2-core launch on 2
 * CPUs one core then runs slower, and the other takes what is left of its
 * share. */
static void *spin_until(void *a)
{
    atomic_int *stop = a;
    volatile unsigned long spins = 0;
    while (!atomic_load_explicit(stop, memory_order_relaxed))
        spins++;
    return NULL;
}

/* Few pixels for many channels: the forward and the input gradient split
 * the micro-panels, each core taking first from its own range of them and
 * then from the back of the other's (tile_queue); the weight gradient's
 * micro-panels are taken so pass by pass (by columns, dw past the slices'
 * budget). With a busy thread beside the cores, one core runs slower in
 * many of the calls and the other takes from its range: every element is
 * still summed once, exact. */
Test(conv2d, panels_taken_from_a_slower_core, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    static const shape shapes[] = {
        {"3x3 100->120 on 9x11, channels split", .n = 2, .h = 9, .w = 11, .cin = 100, .cout = 120,
         .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
        {"3x3 96->400 on 7x7, channels split", .n = 2, .h = 7, .w = 7, .cin = 96, .cout = 400,
         .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    };
    /* clang-format on */
    static const op_id ops[] = {OP_FORWARD, OP_BACKWARD_DATA, OP_BACKWARD_WEIGHTS};
    tally t = {"panels_taken_from_a_slower_core", 0, 0};
    atomic_int stop = 0;
    pthread_t spinner;
    cr_assert_eq(pthread_create(&spinner, NULL, spin_until, &stop), 0, "pthread_create");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; ++si) {
        exact_problem e;
        exact_init(&e, &shapes[si], CG_LAYOUT_NHWC, 1100 + (int)si);
        check_shape_basics(&t, &shapes[si], &e.p.c);
        for (int rep = 0; rep < 25; ++rep)
            for (size_t o = 0; o < sizeof ops / sizeof *ops; ++o)
                check_exact_call(&t, &shapes[si], &e, ops[o], 0x3, 0);
        exact_free(&e);
    }
    atomic_store(&stop, 1);
    pthread_join(spinner, NULL);
    assert_no_failure(&t);
}

/* ---- tolerance ----------------------------------------------------------------- */
/* Random reals in [-1, 1] against the double reference. Each element is a
 * sum of at most n fp32 products (n = the operation's term count, plus the
 * bias); computed in fp32 in any order or tree, each product rounds once and
 * each addition once along any path, so |got - exact| <= gamma(n+1) * A,
 * gamma(k) = k*u / (1 - k*u), u = 2^-24, A = the sum of |terms| (Higham,
 * Accuracy and Stability of Numerical Algorithms, 3.1 and 4.2). The bound
 * below uses n + 2 to leave room for a final rounding the library may make
 * (e.g. a partial sum per core, then their sum). The double reference's own
 * error is ~1e-16 * A, far below. */

static double gamma_fp32(long long k)
{
    const double ku = (double)k * 0x1p-24;
    return ku / (1.0 - ku);
}

/* clang-format off */
static const shape TOL_SHAPES[] = {
    {"2x16x14x14 -> 32, 3x3 stride 2, groups 2", .n = 2, .h = 14, .w = 14, .cin = 16, .cout = 32,
     .g = 2, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"stem 1x3x31x29 -> 24, 7x7 stride 2", .n = 1, .h = 31, .w = 29, .cin = 3, .cout = 24,
     .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pt = 3, .pb = 3, .pl = 3, .pr = 3},
    {"depthwise 2x32x12x12, 3x3", .n = 2, .h = 12, .w = 12, .cin = 32, .cout = 32, .g = 32,
     .kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1},
    {"1x1 2x24x9x11 -> 40", .n = 2, .h = 9, .w = 11, .cin = 24, .cout = 40, .kh = 1, .kw = 1},
    {"3x12x13x10 -> 18, groups 3, 3x2 dilation 2, stride 1x2, asymmetric pads", .n = 3, .h = 13,
     .w = 10, .cin = 12, .cout = 18, .g = 3, .kh = 3, .kw = 2, .sw = 2, .dh = 2, .dw = 2, .pt = 2,
     .pb = 1, .pl = 0, .pr = 3},
};
/* clang-format on */

static double *to_f64(const float *v, size_t n)
{
    double *d = malloc((n + 1) * sizeof *d);
    ref_float_to_double(v, d, n);
    return d;
}

Test(conv2d, tolerance, .timeout = TEST_TIMEOUT)
{
    tally t = {"tolerance", 0, 0};
    const int masks[] = {0xF, 0x5};
    for (int si = 0; si < (int)(sizeof TOL_SHAPES / sizeof TOL_SHAPES[0]); ++si) {
        const shape *s = &TOL_SHAPES[si];
        for (int layout = 0; layout < 2; ++layout) {
            const cg_conv2d c = desc_of(s, (cg_layout)layout);
            problem p;
            problem_init(&p, &c, 0, case_seed("tolerance", si, layout));
            double *x = to_f64(fptr(&p.x), p.nx), *w = to_f64(fptr(&p.w), p.nw);
            double *b = to_f64(fptr(&p.b), p.nb), *dy = to_f64(fptr(&p.dy), p.ny);
            double *want[OP_COUNT], *mag[OP_COUNT];
            long long terms[OP_COUNT];
            for (int op = 0; op < OP_COUNT; ++op) {
                want[op] = malloc((out_elems(&p, (op_id)op) + 1) * sizeof(double));
                mag[op] = malloc((out_elems(&p, (op_id)op) + 1) * sizeof(double));
            }
            cref_forward_f64(&c, x, w, b, want[OP_FORWARD], mag[OP_FORWARD]);
            cref_forward_f64(&c, x, w, NULL, want[OP_FORWARD_NO_BIAS], mag[OP_FORWARD_NO_BIAS]);
            cref_backward_data_f64(&c, dy, w, want[OP_BACKWARD_DATA], mag[OP_BACKWARD_DATA]);
            cref_backward_weights_f64(&c, x, dy, want[OP_BACKWARD_WEIGHTS],
                                      mag[OP_BACKWARD_WEIGHTS]);
            cref_backward_bias_f64(&c, dy, want[OP_BACKWARD_BIAS], mag[OP_BACKWARD_BIAS]);
            terms[OP_FORWARD] = cref_terms_forward(&c) + 1;
            terms[OP_FORWARD_NO_BIAS] = cref_terms_forward(&c);
            terms[OP_BACKWARD_DATA] = cref_terms_backward_data(&c);
            terms[OP_BACKWARD_WEIGHTS] = cref_terms_backward_weights(&c);
            terms[OP_BACKWARD_BIAS] = cref_terms_backward_bias(&c);
            const op_id fused[5] = {OP_WEIGHTS_BIAS_DW, OP_WEIGHTS_BIAS_DB, OP_BACKWARD_DX,
                                    OP_BACKWARD_DW, OP_BACKWARD_DB};
            const op_id alone[5] = {OP_BACKWARD_WEIGHTS, OP_BACKWARD_BIAS, OP_BACKWARD_DATA,
                                    OP_BACKWARD_WEIGHTS, OP_BACKWARD_BIAS};
            for (int k = 0; k < 5; ++k) {
                const size_t bytes = out_elems(&p, fused[k]) * sizeof(double);
                memcpy(want[fused[k]], want[alone[k]], bytes);
                memcpy(mag[fused[k]], mag[alone[k]], bytes);
                terms[fused[k]] = terms[alone[k]];
            }

            for (int m = 0; m < 2; ++m)
                for (int op = 0; op < OP_COUNT; ++op) {
                    ++t.configs;
                    poison(&p, (op_id)op);
                    const cg_status st = run_op(&p, (op_id)op, masks[m], 0);
                    char d[400];
                    desc_str(&c, d, sizeof d);
                    if (st != CG_OK) {
                        report(&t, "[%s] %s on mask 0x%x: status %d (%s)\n  %s", s->name,
                               OP_NAMES[op], (unsigned)masks[m], st, cg_status_message(st), d);
                        continue;
                    }
                    const float *got = (const float *)p.out[op].ptr;
                    const double gam = gamma_fp32(terms[op] + 2);
                    size_t bad = 0, first = 0;
                    double worst = 0.0;
                    for (size_t i = 0; i < out_elems(&p, (op_id)op); ++i) {
                        const double err = fabs((double)got[i] - want[op][i]);
                        const double tol = gam * mag[op][i];
                        if (!(err <= tol) && bad++ == 0)
                            first = i;
                        if (tol > 0 && err / tol > worst)
                            worst = err / tol;
                    }
                    if (bad) {
                        char at[96];
                        coords_str(&c, (op_id)op, first, at, sizeof at);
                        report(&t,
                               "[%s] %s on mask 0x%x: %zu of %zu elements outside the bound; "
                               "first at %zu (%s): got %.9g want %.9g, error %.3g, bound %.3g\n"
                               "  %s",
                               s->name, OP_NAMES[op], (unsigned)masks[m], bad,
                               out_elems(&p, (op_id)op), first, at, (double)got[first],
                               want[op][first], fabs((double)got[first] - want[op][first]),
                               gam * mag[op][first], d);
                    }
                    if (cgt_buf_canary_damage(&p.out[op]) != -1)
                        report(&t, "[%s] %s on mask 0x%x: written outside the output\n  %s",
                               s->name, OP_NAMES[op], (unsigned)masks[m], d);
                }
            for (int op = 0; op < OP_COUNT; ++op) {
                free(want[op]);
                free(mag[op]);
            }
            free(x);
            free(w);
            free(b);
            free(dy);
            problem_free(&p);
        }
    }
    assert_no_failure(&t);
}

/* ---- gradients by central differences --------------------------------------------- */
/* L(x, w, b) = sum over j of y_j * g_j, y = cg_conv2d_forward(x, w, b), g
 * random. L is linear in each argument separately, so for an entry v of x,
 * w or b, (L(v + eps) - L(v - eps)) / ((v + eps) - (v - eps)) is dL/dv up
 * to rounding alone; eps = 1, and the denominator is taken from the fp32
 * values actually passed. The library's dx, dw, db (dy = g) must agree
 * within the sum of
 *   - the forward's rounding in both calls: each y_j is off by at most
 *     gamma(K+3) * A_j (K terms and the bias, as in the tolerance test; A_j
 *     the sum of |terms| of that call, from the double reference), so L by
 *     at most sum_j |g_j| * gamma(K+3) * A_j, for each of the two calls,
 *     divided by the denominator;
 *   - the gradient's own rounding: gamma(n+2) * its sum of |terms|;
 *   - L's double sums: 1e-12 * sum_j |y_j g_j| per call (far more than the
 *     ~2^-53 * #terms they can lose).
 * These are worst-case bounds; the real errors are orders of magnitude
 * smaller, while a wrong index, flip or layout gives errors of order 1. */

typedef struct grad_ctx {
    const cg_conv2d *c;
    size_t nx, nw, ny, nb;
    float *x, *w, *b, *g, *y;
    double *xd, *wd, *bd, *yd, *ymag;
    int mask;
    tally *t;
    const char *name;
} grad_ctx;

/* L from the library's forward on the current x, w, b, and its bound:
 * *bound = gamma * sum |g_j| A_j + 1e-12 * sum |y_j g_j|. */
static double loss(grad_ctx *k, double *bound)
{
    const cg_status st = cg_conv2d_forward(k->c, k->x, k->w, k->b, k->y, k->mask);
    cr_assert_eq(st, CG_OK, "[%s] forward: status %d (%s)", k->name, st, cg_status_message(st));
    cref_forward_f64(k->c, k->xd, k->wd, k->bd, k->yd, k->ymag);
    const double gam = gamma_fp32(cref_terms_forward(k->c) + 3);
    double l = 0.0, mag = 0.0, lmag = 0.0;
    for (size_t j = 0; j < k->ny; ++j) {
        const double t = (double)k->y[j] * (double)k->g[j];
        l += t;
        lmag += fabs(t);
        mag += fabs((double)k->g[j]) * k->ymag[j];
    }
    *bound = gam * mag + 1e-12 * lmag;
    return l;
}

/* Checks the library's gradient lib[i] of the entry v[i] (vd: its double
 * mirror) against central differences; gmag: the sum of |terms| of lib[i]. */
static void check_entry(grad_ctx *k, const char *what, float *v, double *vd, size_t i,
                        const float *lib, double gmag, long long gterms)
{
    const float orig = v[i];
    const float vp = (float)((double)orig + 1.0), vm = (float)((double)orig - 1.0);
    double bp, bm;
    v[i] = vp;
    vd[i] = vp;
    const double lp = loss(k, &bp);
    v[i] = vm;
    vd[i] = vm;
    const double lm = loss(k, &bm);
    v[i] = orig;
    vd[i] = orig;
    const double den = (double)vp - (double)vm;
    const double fd = (lp - lm) / den;
    const double tol = (bp + bm) / den + gamma_fp32(gterms + 2) * gmag;
    const double err = fabs((double)lib[i] - fd);
    ++k->t->configs;
    if (!(err <= tol)) {
        char d[400];
        desc_str(k->c, d, sizeof d);
        report(k->t,
               "[%s] d%s[%zu] on mask 0x%x: library %.9g, central difference %.9g, error %.3g, "
               "bound %.3g\n  %s",
               k->name, what, i, (unsigned)k->mask, (double)lib[i], fd, err, tol, d);
    }
}

/* clang-format off */
static const shape GRAD_SHAPES[] = {
    {"groups 2, 3x2, stride 2x1, dilation 1x2, asymmetric pads", .n = 2, .h = 7, .w = 6,
     .cin = 6, .cout = 4, .g = 2, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .dh = 1, .dw = 2, .pt = 1,
     .pb = 2, .pl = 0, .pr = 1},
    {"depth multiplier 2, dilation 2", .n = 1, .h = 8, .w = 7, .cin = 4, .cout = 8, .g = 4,
     .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pt = 2, .pb = 2, .pl = 2, .pr = 2},
    {"3x3 pad 1, 3->5", .n = 2, .h = 5, .w = 5, .cin = 3, .cout = 5, .kh = 3, .kw = 3, .pt = 1,
     .pb = 1, .pl = 1, .pr = 1},
};
/* clang-format on */

Test(conv2d, gradients_match_central_differences, .timeout = TEST_TIMEOUT)
{
    tally t = {"gradients_match_central_differences", 0, 0};
    enum { SAMPLES = 20 };
    for (int si = 0; si < (int)(sizeof GRAD_SHAPES / sizeof GRAD_SHAPES[0]); ++si)
        for (int layout = 0; layout < 2; ++layout) {
            const shape *s = &GRAD_SHAPES[si];
            const cg_conv2d c = desc_of(s, (cg_layout)layout);
            cgt_rng r = cgt_rng_seeded(case_seed("gradients", si, layout));
            grad_ctx k = {.c = &c, .mask = si % 2 ? 0x3 : 0x7, .t = &t, .name = s->name};
            k.nx = cref_x_elems(&c);
            k.nw = cref_w_elems(&c);
            k.ny = cref_y_elems(&c);
            k.nb = (size_t)c.out_c;
            k.x = malloc(k.nx * sizeof(float));
            k.w = malloc(k.nw * sizeof(float));
            k.b = malloc(k.nb * sizeof(float));
            k.g = malloc(k.ny * sizeof(float));
            k.y = malloc(k.ny * sizeof(float));
            cgt_fill_f32(&r, k.x, k.nx, 1.0);
            cgt_fill_f32(&r, k.w, k.nw, 1.0);
            cgt_fill_f32(&r, k.b, k.nb, 1.0);
            cgt_fill_f32(&r, k.g, k.ny, 1.0);
            k.xd = to_f64(k.x, k.nx);
            k.wd = to_f64(k.w, k.nw);
            k.bd = to_f64(k.b, k.nb);
            k.yd = malloc(k.ny * sizeof(double));
            k.ymag = malloc(k.ny * sizeof(double));

            /* the library's gradients with dy = g, and their |terms| sums */
            float *dx = malloc(k.nx * sizeof(float)), *dw = malloc(k.nw * sizeof(float));
            float *db = malloc(k.nb * sizeof(float));
            cr_assert_eq(cg_conv2d_backward_data(&c, k.g, k.w, dx, 0x5), CG_OK, "[%s]", s->name);
            cr_assert_eq(cg_conv2d_backward_weights(&c, k.x, k.g, dw, 0x5), CG_OK, "[%s]", s->name);
            cr_assert_eq(cg_conv2d_backward_bias(&c, k.g, db, 0x5), CG_OK, "[%s]", s->name);
            double *gd = to_f64(k.g, k.ny);
            double *dxd = malloc(k.nx * sizeof(double)), *dxm = malloc(k.nx * sizeof(double));
            double *dwd = malloc(k.nw * sizeof(double)), *dwm = malloc(k.nw * sizeof(double));
            double *dbd = malloc(k.nb * sizeof(double)), *dbm = malloc(k.nb * sizeof(double));
            cref_backward_data_f64(&c, gd, k.wd, dxd, dxm);
            cref_backward_weights_f64(&c, k.xd, gd, dwd, dwm);
            cref_backward_bias_f64(&c, gd, dbd, dbm);

            for (int i = 0; i < SAMPLES; ++i) {
                /* the first and last entries, then random ones */
                const size_t ix = i == 0   ? 0
                                  : i == 1 ? k.nx - 1
                                           : (size_t)cgt_rng_int(&r, 0, (int)k.nx - 1);
                const size_t iw = i == 0   ? 0
                                  : i == 1 ? k.nw - 1
                                           : (size_t)cgt_rng_int(&r, 0, (int)k.nw - 1);
                check_entry(&k, "x", k.x, k.xd, ix, dx, dxm[ix], cref_terms_backward_data(&c));
                check_entry(&k, "w", k.w, k.wd, iw, dw, dwm[iw], cref_terms_backward_weights(&c));
                if ((size_t)i < k.nb)
                    check_entry(&k, "b", k.b, k.bd, (size_t)i, db, dbm[i],
                                cref_terms_backward_bias(&c));
            }
            free(dx);
            free(dw);
            free(db);
            free(gd);
            free(dxd);
            free(dxm);
            free(dwd);
            free(dwm);
            free(dbd);
            free(dbm);
            free(k.x);
            free(k.w);
            free(k.b);
            free(k.g);
            free(k.y);
            free(k.xd);
            free(k.wd);
            free(k.bd);
            free(k.yd);
            free(k.ymag);
        }
    assert_no_failure(&t);
}

/* ---- errors ------------------------------------------------------------------------ */
/* The base problem: valid, groups and pads. OH = 5, OW = 6. */
/* clang-format off */
static const shape ERR_BASE = {"error base", .n = 2, .h = 5, .w = 6, .cin = 4, .cout = 6, .g = 2,
                               .kh = 3, .kw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 0};
/* clang-format on */

enum {
    NULL_DESC = 1,  /* conv NULL */
    NULL_X = 2,     /* x NULL (forward, backward_weights) */
    NULL_W = 4,     /* w NULL (forward, backward_data) */
    NULL_DY = 8,    /* dy NULL (backward_*) */
    NULL_OUT = 16,  /* the output NULL (every function) */
    MASK_ZERO = 32, /* core_mask 0 */
    DESC_BAD = 64,  /* the descriptor itself is invalid: cg_conv2d_check reports it and
                       cg_conv2d_output_h/_w are 0 */
};

typedef void (*mutator)(cg_conv2d *c);

typedef struct err_row {
    const char *name;
    mutator mutate;
    cg_status want;
    cg_status alt; /* also acceptable where two problems are both true; CG_OK = none */
    int flags;
    const char *detail; /* cg_last_error_detail() exactly; NULL: "<output> is NULL" */
} err_row;

#define SET(fname, body)                                                                           \
    static void fname(cg_conv2d *c)                                                                \
    {                                                                                              \
        body;                                                                                      \
    }

static void nothing(cg_conv2d *c)
{
    (void)c;
}
SET(batch_0, c->batch = 0)
SET(batch_neg, c->batch = -1)
SET(batch_min, c->batch = INT_MIN)
SET(in_h_0, c->in_h = 0)
SET(in_h_neg, c->in_h = -3)
SET(in_w_0, c->in_w = 0)
SET(in_w_min, c->in_w = INT_MIN)
SET(in_c_0, c->in_c = 0)
SET(in_c_neg, c->in_c = -4)
SET(out_c_0, c->out_c = 0)
SET(out_c_neg, c->out_c = -6)
SET(kh_0, c->kernel_h = 0)
SET(kh_neg, c->kernel_h = -3)
SET(kw_0, c->kernel_w = 0)
SET(kw_neg, c->kernel_w = -1)
SET(groups_0, c->groups = 0)
SET(groups_neg, c->groups = -2)
SET(groups_not_in, c->groups = 3)  /* divides out_c 6, not in_c 4 */
SET(groups_not_out, c->groups = 4) /* divides in_c 4, not out_c 6 */
SET(groups_neither, c->groups = 5)
SET(stride_h_0, c->stride_h = 0)
SET(stride_w_0, c->stride_w = 0)
SET(stride_w_neg, c->stride_w = -1)
SET(stride_h_min, c->stride_h = INT_MIN)
SET(dil_h_0, c->dilation_h = 0)
SET(dil_w_0, c->dilation_w = 0)
SET(dil_w_neg, c->dilation_w = -2)
SET(pad_top_neg, c->pad_top = -1)
SET(pad_bottom_neg, c->pad_bottom = -1)
SET(pad_left_neg, c->pad_left = -1)
SET(pad_right_min, c->pad_right = INT_MIN)
/* the (dilated) kernel larger than the padded input: OH or OW < 1 */
SET(oh_kernel_tall, c->kernel_h = 8)                /* 5 + 2 - 7 - 1 = -1: OH 0 */
SET(ow_dilation_wide, c->dilation_w = 7)            /* 6 + 1 - 7 - 1 = -1: OW 0 */
SET(oh_stride_2, c->kernel_h = 8; c->stride_h = 2)  /* floor(-1 / 2) + 1 = 0 (C's -1 / 2 + 1 = 1) */
SET(ow_stride_3, c->kernel_w = 20; c->stride_w = 3) /* floor(-14 / 3) + 1 = -4 */
SET(oh_no_pads, c->in_h = 1; c->pad_top = 0; c->pad_bottom = 0) /* 1 - 2 - 1 = -2 */
SET(layout_2, c->layout = (cg_layout)2)
SET(layout_7, c->layout = (cg_layout)7)
SET(layout_neg, c->layout = (cg_layout)-1)

/* The details name cg_conv2d's own fields and their values. */
#define LAYOUTS " is neither CG_LAYOUT_NHWC (0) nor CG_LAYOUT_NCHW (1)"
#define TALL                                                                                       \
    "the output height would be < 1: in_h=5 + pad_top=1 + pad_bottom=1 = 7 is under "              \
    "the dilated kernel height 8 = dilation_h=1*(kernel_h=8-1)+1"
/* clang-format off */
static const err_row ROWS[] = {
    {"conv NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_DESC, "conv is NULL"},
    {"x NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_X, "x is NULL"},
    {"w NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_W, "w is NULL"},
    {"dy NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_DY, "dy is NULL"},
    {"output NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_OUT, NULL},
    {"core_mask 0", nothing, CG_ERR_CORE_MASK, CG_OK, MASK_ZERO, "core_mask is 0"},
    {"batch 0", batch_0, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "batch=0 must be >= 1"},
    {"batch -1", batch_neg, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "batch=-1 must be >= 1"},
    {"batch INT_MIN", batch_min, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "batch=-2147483648 must be >= 1"},
    {"in_h 0", in_h_0, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "in_h=0 must be >= 1"},
    {"in_h -3", in_h_neg, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "in_h=-3 must be >= 1"},
    {"in_w 0", in_w_0, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "in_w=0 must be >= 1"},
    {"in_w INT_MIN", in_w_min, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "in_w=-2147483648 must be >= 1"},
    {"in_c 0", in_c_0, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, DESC_BAD, "in_c=0 must be >= 1"},
    {"in_c -4", in_c_neg, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, DESC_BAD, "in_c=-4 must be >= 1"},
    {"out_c 0", out_c_0, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, DESC_BAD, "out_c=0 must be >= 1"},
    {"out_c -6", out_c_neg, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, DESC_BAD, "out_c=-6 must be >= 1"},
    {"kernel_h 0", kh_0, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "kernel_h=0 must be >= 1"},
    {"kernel_h -3", kh_neg, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "kernel_h=-3 must be >= 1"},
    {"kernel_w 0", kw_0, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "kernel_w=0 must be >= 1"},
    {"kernel_w -1", kw_neg, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, "kernel_w=-1 must be >= 1"},
    {"groups 0", groups_0, CG_ERR_BAD_GROUP, CG_OK, DESC_BAD, "groups=0 must be >= 1"},
    {"groups -2", groups_neg, CG_ERR_BAD_GROUP, CG_OK, DESC_BAD, "groups=-2 must be >= 1"},
    {"groups 3 not dividing in_c 4", groups_not_in, CG_ERR_BAD_GROUP, CG_OK, DESC_BAD,
     "groups=3 does not divide in_c=4"},
    {"groups 4 not dividing out_c 6", groups_not_out, CG_ERR_BAD_GROUP, CG_OK, DESC_BAD,
     "groups=4 does not divide out_c=6"},
    {"groups 5 dividing neither", groups_neither, CG_ERR_BAD_GROUP, CG_OK, DESC_BAD,
     "groups=5 does not divide in_c=4"},
    {"stride_h 0", stride_h_0, CG_ERR_BAD_STRIDE, CG_OK, DESC_BAD, "stride_h=0 must be >= 1"},
    {"stride_w 0", stride_w_0, CG_ERR_BAD_STRIDE, CG_OK, DESC_BAD, "stride_w=0 must be >= 1"},
    {"stride_w -1", stride_w_neg, CG_ERR_BAD_STRIDE, CG_OK, DESC_BAD, "stride_w=-1 must be >= 1"},
    {"stride_h INT_MIN", stride_h_min, CG_ERR_BAD_STRIDE, CG_OK, DESC_BAD,
     "stride_h=-2147483648 must be >= 1"},
    {"dilation_h 0", dil_h_0, CG_ERR_BAD_DILATION, CG_OK, DESC_BAD, "dilation_h=0 must be >= 1"},
    {"dilation_w 0", dil_w_0, CG_ERR_BAD_DILATION, CG_OK, DESC_BAD, "dilation_w=0 must be >= 1"},
    {"dilation_w -2", dil_w_neg, CG_ERR_BAD_DILATION, CG_OK, DESC_BAD,
     "dilation_w=-2 must be >= 1"},
    {"pad_top -1", pad_top_neg, CG_ERR_BAD_PAD, CG_OK, DESC_BAD, "pad_top=-1 must be >= 0"},
    {"pad_bottom -1", pad_bottom_neg, CG_ERR_BAD_PAD, CG_OK, DESC_BAD, "pad_bottom=-1 must be >= 0"},
    {"pad_left -1", pad_left_neg, CG_ERR_BAD_PAD, CG_OK, DESC_BAD, "pad_left=-1 must be >= 0"},
    {"pad_right INT_MIN", pad_right_min, CG_ERR_BAD_PAD, CG_OK, DESC_BAD,
     "pad_right=-2147483648 must be >= 0"},
    {"kernel_h 8 taller than the padded input 7: OH 0", oh_kernel_tall, CG_ERR_BAD_SIZE, CG_OK,
     DESC_BAD, TALL},
    {"dilation_w 7: dilated kernel 8 wider than the padded input 7: OW 0", ow_dilation_wide,
     CG_ERR_BAD_SIZE, CG_OK, DESC_BAD,
     "the output width would be < 1: in_w=6 + pad_left=1 + pad_right=0 = 7 is under the dilated "
     "kernel width 8 = dilation_w=7*(kernel_w=2-1)+1"},
    {"kernel_h 8, stride_h 2: floor(-1/2) + 1 = 0 (truncating division would say 1)", oh_stride_2,
     CG_ERR_BAD_SIZE, CG_OK, DESC_BAD, TALL},
    {"kernel_w 20, stride_w 3: OW < 0", ow_stride_3, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD,
     "the output width would be < 1: in_w=6 + pad_left=1 + pad_right=0 = 7 is under the dilated "
     "kernel width 20 = dilation_w=1*(kernel_w=20-1)+1"},
    {"in_h 1, no vertical pads, kernel_h 3: OH < 0", oh_no_pads, CG_ERR_BAD_SIZE, CG_OK, DESC_BAD,
     "the output height would be < 1: in_h=1 + pad_top=0 + pad_bottom=0 = 1 is under the dilated "
     "kernel height 3 = dilation_h=1*(kernel_h=3-1)+1"},
    {"layout 2", layout_2, CG_ERR_BAD_LAYOUT, CG_OK, DESC_BAD, "layout=2" LAYOUTS},
    {"layout 7", layout_7, CG_ERR_BAD_LAYOUT, CG_OK, DESC_BAD, "layout=7" LAYOUTS},
    {"layout -1", layout_neg, CG_ERR_BAD_LAYOUT, CG_OK, DESC_BAD, "layout=-1" LAYOUTS},
};
/* clang-format on */
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

/* Does op take the argument a NULL_* flag names? */
static int op_takes(op_id op, int flag)
{
    switch (flag) {
    case NULL_X:
        return op != OP_BACKWARD_DATA && op != OP_BACKWARD_BIAS;
    case NULL_W:
        return op == OP_FORWARD || op == OP_FORWARD_NO_BIAS || op == OP_BACKWARD_DATA ||
               op == OP_BACKWARD_DX || op == OP_BACKWARD_DW || op == OP_BACKWARD_DB;
    case NULL_OUT: /* cg_conv2d_backward's db may be NULL */
        return op != OP_BACKWARD_DB;
    case NULL_DY:
        return op != OP_FORWARD && op != OP_FORWARD_NO_BIAS;
    default:
        return 1;
    }
}

/* Each operation's output argument, as its public function names it. */
static const char *const OUTPUT_NAMES[OP_COUNT] = {"y",  "y",  "dx", "dw", "db",
                                                   "dw", "db", "dx", "dw", "db"};

/* The row's detail (in `got`), exactly, and in cg_conv2d's words only. */
static void check_detail(tally *t, const err_row *row, op_id op, const char *where, const char *got)
{
    char null_output[32];
    snprintf(null_output, sizeof null_output, "%s is NULL", OUTPUT_NAMES[op]);
    const char *want = row->detail ? row->detail : null_output;
    if (strcmp(got, want) != 0)
        report(t, "[%s] %s: detail\n  '%s', want\n  '%s'", row->name, where, got, want);
    if (cgt_names_operator_field(got))
        report(t, "[%s] %s: detail '%s' names an operator field", row->name, where, got);
}

/* Calls op's public function with the row's NULLs and mask. */
static cg_status call_public(const problem *p, const cg_conv2d *conv, op_id op, int flags, int mask)
{
    const float *x = (flags & NULL_X) ? NULL : fptr(&p->x);
    const float *w = (flags & NULL_W) ? NULL : fptr(&p->w);
    const float *dy = (flags & NULL_DY) ? NULL : fptr(&p->dy);
    float *out = (flags & NULL_OUT) ? NULL : (float *)p->out[op].ptr;
    if (flags & NULL_DESC)
        conv = NULL;
    switch (op) {
    case OP_FORWARD:
        return cg_conv2d_forward(conv, x, w, fptr(&p->b), out, mask);
    case OP_FORWARD_NO_BIAS:
        return cg_conv2d_forward(conv, x, w, NULL, out, mask);
    case OP_BACKWARD_DATA:
        return cg_conv2d_backward_data(conv, dy, w, out, mask);
    case OP_BACKWARD_WEIGHTS:
        return cg_conv2d_backward_weights(conv, x, dy, out, mask);
    case OP_WEIGHTS_BIAS_DW: /* the checked output NULL or not, the other given */
        return cg_conv2d_backward_weights_bias(conv, x, dy, out, fused_db(p), mask);
    case OP_WEIGHTS_BIAS_DB:
        return cg_conv2d_backward_weights_bias(conv, x, dy, fused_dw(p), out, mask);
    case OP_BACKWARD_DX: /* the checked output NULL or not, the others given */
        return cg_conv2d_backward(conv, x, dy, w, out, backward_out(p, OP_BACKWARD_DW),
                                  backward_out(p, OP_BACKWARD_DB), mask);
    case OP_BACKWARD_DW:
        return cg_conv2d_backward(conv, x, dy, w, backward_out(p, OP_BACKWARD_DX), out,
                                  backward_out(p, OP_BACKWARD_DB), mask);
    case OP_BACKWARD_DB:
        return cg_conv2d_backward(conv, x, dy, w, backward_out(p, OP_BACKWARD_DX),
                                  backward_out(p, OP_BACKWARD_DW), out, mask);
    default:
        return cg_conv2d_backward_bias(conv, dy, out, mask);
    }
}

/* Fills every output with random bytes; returns copies to compare with. */
static unsigned char *canary_outputs(const problem *p, cgt_rng *r)
{
    size_t total = 0;
    for (int op = 0; op < OP_COUNT; ++op)
        total += p->out[op].n;
    unsigned char *copy = malloc(total + 1), *at = copy;
    for (int op = 0; op < OP_COUNT; ++op) {
        cgt_fill_bytes(r, p->out[op].ptr, p->out[op].n);
        memcpy(at, p->out[op].ptr, p->out[op].n);
        at += p->out[op].n;
    }
    return copy;
}

/* The first output byte (over all outputs, in order) that differs from the
 * copy, or -1; the canaries around them count too. */
static long long outputs_changed(const problem *p, const unsigned char *copy, int *which)
{
    const unsigned char *at = copy;
    for (int op = 0; op < OP_COUNT; ++op) {
        *which = op;
        for (size_t i = 0; i < p->out[op].n; ++i)
            if (p->out[op].ptr[i] != at[i])
                return (long long)i;
        const long long dmg = cgt_buf_canary_damage(&p->out[op]);
        if (dmg != -1)
            return dmg;
        at += p->out[op].n;
    }
    return -1;
}

/* One row in one layout: every function that takes the row's bad argument. */
static void run_row(tally *t, const err_row *row, problem *p, cg_layout layout, cgt_rng *r)
{
    cg_conv2d bad = desc_of(&ERR_BASE, layout);
    row->mutate(&bad);
    const cg_conv2d bad_copy = bad;
    const int mask = (row->flags & MASK_ZERO) ? 0 : 0x3;
    const int null_arg = row->flags & (NULL_X | NULL_W | NULL_DY | NULL_OUT);
    for (int op = 0; op < OP_COUNT; ++op) {
        if (null_arg && !op_takes((op_id)op, null_arg))
            continue;
        ++t->configs;
        unsigned char *copy = canary_outputs(p, r);
        const cg_status st = call_public(p, &bad, (op_id)op, row->flags, mask);
        const cg_status last = cg_last_status();
        if (!(st == row->want || (row->alt != CG_OK && st == row->alt)))
            report(t, "[%s] %s, %s: status %d (%s), want %d (%s)", row->name, OP_NAMES[op],
                   layout_name(layout), st, cg_status_message(st), row->want,
                   cg_status_message(row->want));
        if (last != st)
            report(t, "[%s] %s, %s: cg_last_status %d disagrees with the status %d", row->name,
                   OP_NAMES[op], layout_name(layout), last, st);
        char where[96];
        snprintf(where, sizeof where, "%s, %s", OP_NAMES[op], layout_name(layout));
        check_detail(t, row, (op_id)op, where, cg_last_error_detail());
        int which = 0;
        const long long changed = outputs_changed(p, copy, &which);
        if (changed != -1)
            report(t, "[%s] %s, %s: a failing call wrote byte %lld of the %s output", row->name,
                   OP_NAMES[op], layout_name(layout), changed, OP_NAMES[which]);
        if (memcmp(&bad, &bad_copy, sizeof bad) != 0)
            report(t, "[%s] %s, %s: the descriptor was modified", row->name, OP_NAMES[op],
                   layout_name(layout));
        free(copy);
    }
    if (row->flags & NULL_DESC) {
        const cg_status st = cg_conv2d_check(NULL);
        if (st != CG_ERR_NULL_POINTER)
            report(t, "cg_conv2d_check(NULL) = %d (%s), want %d", st, cg_status_message(st),
                   CG_ERR_NULL_POINTER);
        check_detail(t, row, OP_FORWARD, "cg_conv2d_check", cg_last_error_detail());
        if (cg_conv2d_output_h(NULL) != 0 || cg_conv2d_output_w(NULL) != 0)
            report(t, "cg_conv2d_output_h/_w(NULL) = %d/%d, want 0", cg_conv2d_output_h(NULL),
                   cg_conv2d_output_w(NULL));
    }
    if (row->flags & DESC_BAD) {
        const cg_status st = cg_conv2d_check(&bad);
        if (!(st == row->want || (row->alt != CG_OK && st == row->alt)))
            report(t, "[%s] %s: cg_conv2d_check = %d (%s), want %d (%s)", row->name,
                   layout_name(layout), st, cg_status_message(st), row->want,
                   cg_status_message(row->want));
        if (cg_last_status() != st)
            report(t, "[%s] %s: cg_conv2d_check returned %d, cg_last_status %d", row->name,
                   layout_name(layout), st, cg_last_status());
        check_detail(t, row, OP_FORWARD, "cg_conv2d_check", cg_last_error_detail());
        if (cg_conv2d_output_h(&bad) != 0 || cg_conv2d_output_w(&bad) != 0)
            report(t, "[%s] %s: cg_conv2d_output_h/_w = %d/%d of an invalid descriptor, want 0",
                   row->name, layout_name(layout), cg_conv2d_output_h(&bad),
                   cg_conv2d_output_w(&bad));
    }
}

/* Every row, both layouts, every function: the documented status (and
 * cg_last_status agrees), no output byte written (nor the canaries around
 * them), the inputs untouched (read-only pages: a write faults), the
 * descriptor unchanged. */
Test(conv2d, errors_every_row, .timeout = TEST_TIMEOUT)
{
    tally t = {"errors_every_row", 0, 0};
    for (int layout = 0; layout < 2; ++layout) {
        const cg_conv2d base = desc_of(&ERR_BASE, (cg_layout)layout);
        problem p;
        problem_init(&p, &base, 0, case_seed("errors", layout, 0));
        cgt_rng r = cgt_rng_seeded(case_seed("errors canaries", layout, 0));
        for (int i = 0; i < N_ROWS; ++i)
            run_row(&t, &ROWS[i], &p, (cg_layout)layout, &r);
        problem_free(&p);
    }
    assert_no_failure(&t);
}

/* Counts that do not fit: batch, in_h and in_w INT_MAX (x alone has about
 * 2^93 elements), and pads of INT_MAX (OH about 2^32, beyond an int; the
 * output size must be computed without int overflow). Nothing may be
 * touched: the buffers are those of the base problem. A test of its own, so
 * that a library running such a call anyway fails here alone. */
SET(counts_overflow, c->batch = INT_MAX; c->in_h = INT_MAX; c->in_w = INT_MAX)
SET(pads_int_max, c->pad_top = INT_MAX; c->pad_bottom = INT_MAX)
/* an image plane is a GEMM leading dimension: at most INT_MAX elements */
SET(plane_over_int_max, c->batch = 1; c->in_h = 46341; c->in_w = 46341)
/* OH and OW each past INT_MAX: their product overflows int64 if formed */
SET(output_plane_over_int64, c->pad_bottom = INT_MAX; c->pad_left = INT_MAX; c->pad_right = INT_MAX)
/* 32 float partials of dw (the most cores): 2^31 * 2^28 * 4 * 128 bytes */
SET(weights_overflow, c->out_c = INT_MAX; c->groups = 1; c->kernel_h = 1 << 14;
    c->kernel_w = 1 << 14)
/* a filter of 2^29 weights a channel: the operator's buffer bound 2*2^29*4 > INT_MAX */
SET(filter_too_large, c->in_c = 1 << 29; c->groups = 1; c->kernel_h = 1; c->kernel_w = 1)
/* y: 2^31 * (2^15+1)^2 * 2^10 floats, while x and each plane fit */
SET(output_overflow, c->batch = INT_MAX; c->in_h = 1; c->in_w = 1; c->in_c = 1; c->out_c = 1024;
    c->groups = 1; c->kernel_h = 1; c->kernel_w = 1; c->pad_top = c->pad_bottom = 1 << 14;
    c->pad_left = c->pad_right = 1 << 14)
Test(conv2d, errors_counts_overflow, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    const err_row rows[] = {
        {"batch, in_h, in_w INT_MAX", counts_overflow, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "the byte count of x and dx, batch=2147483647 * in_h=2147483647 * in_w=2147483647 * "
         "in_c=4 * 4, exceeds PTRDIFF_MAX"},
        {"pad_top and pad_bottom INT_MAX", pads_int_max, CG_ERR_OVERFLOW, CG_ERR_BAD_SIZE,
         DESC_BAD, "the output height 4294967297 = (in_h=5 + pad_top=2147483647 + "
         "pad_bottom=2147483647 - 3)/stride_h=1 + 1 exceeds INT_MAX"},
        {"in_h * in_w over INT_MAX", plane_over_int_max, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "the output plane OH=46341 * OW=46341 exceeds INT_MAX"},
        {"OH, OW over INT_MAX", output_plane_over_int64, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "the output height 2147483651 = (in_h=5 + pad_top=1 + pad_bottom=2147483647 - "
         "3)/stride_h=1 + 1 exceeds INT_MAX"},
        {"32 partials of dw overflow", weights_overflow, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "the byte count of 32 float partials of w and dw, out_c=2147483647 * kernel_h=16384 * "
         "kernel_w=16384 * (in_c=4 / groups=1) * 32 * 4, exceeds PTRDIFF_MAX"},
        {"a filter of 2^29 weights a channel", filter_too_large, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "a filter of kernel_h=1 * kernel_w=1 * in_c=536870912 / groups=1 = 536870912 weights "
         "per output channel exceeds the limit 268435455"},
        {"y's byte count overflows", output_overflow, CG_ERR_OVERFLOW, CG_OK, DESC_BAD,
         "the byte count of y and dy, batch=2147483647 * OH=32769 * OW=32769 * out_c=1024 * 4, "
         "exceeds PTRDIFF_MAX"},
    };
    /* clang-format on */
    tally t = {"errors_counts_overflow", 0, 0};
    for (int layout = 0; layout < 2; ++layout) {
        const cg_conv2d base = desc_of(&ERR_BASE, (cg_layout)layout);
        problem p;
        problem_init(&p, &base, 0, case_seed("errors overflow", layout, 0));
        cgt_rng r = cgt_rng_seeded(case_seed("errors overflow canaries", layout, 0));
        for (size_t i = 0; i < sizeof rows / sizeof *rows; ++i)
            run_row(&t, &rows[i], &p, (cg_layout)layout, &r);
        problem_free(&p);
    }
    assert_no_failure(&t);
}

/* A failing call sets cg_last_status and its detail; the next valid call
 * resets them to CG_OK and "" (and works). */
Test(conv2d, last_status_follows_each_call)
{
    const cg_conv2d base = desc_of(&ERR_BASE, CG_LAYOUT_NCHW);
    problem p;
    problem_init(&p, &base, 0, case_seed("last status", 0, 0));
    cg_conv2d bad = base;
    bad.stride_h = 0;
    for (int op = 0; op < OP_COUNT; ++op) {
        cr_expect_eq(call_public(&p, &bad, (op_id)op, 0, 0x3), CG_ERR_BAD_STRIDE, "%s",
                     OP_NAMES[op]);
        cr_expect_eq(cg_last_status(), CG_ERR_BAD_STRIDE, "%s: after a bad stride", OP_NAMES[op]);
        cr_expect(strcmp(cg_last_error_detail(), "stride_h=0 must be >= 1") == 0,
                  "%s: detail '%s' after a bad stride", OP_NAMES[op], cg_last_error_detail());
        cr_expect_eq(call_public(&p, &base, (op_id)op, 0, 0x3), CG_OK, "%s", OP_NAMES[op]);
        cr_expect_eq(cg_last_status(), CG_OK, "%s: after a valid call", OP_NAMES[op]);
        cr_expect(cg_last_error_detail()[0] == '\0', "%s: detail '%s' after a valid call",
                  OP_NAMES[op], cg_last_error_detail());
    }
    /* cg_conv2d_check succeeding clears the detail too */
    cr_expect_eq(cg_conv2d_check(&bad), CG_ERR_BAD_STRIDE);
    cr_expect_eq(cg_conv2d_check(&base), CG_OK);
    cr_expect(cg_last_error_detail()[0] == '\0', "detail '%s' after a valid cg_conv2d_check",
              cg_last_error_detail());
    problem_free(&p);
}

/* ---- calls from inside a launch ---------------------------------------------------- */
/* The functions launch the cores themselves: called from an emulated core
 * (inside core_mask_launch) they return CG_ERR_INSIDE_LAUNCH whatever the
 * mask (the launch's own, the core's own, a disjoint one, all 32, 0), with
 * a detail naming the function and the core, and write nothing. */
enum { N_INSIDE_MASKS = 5, OWN_CORE = 1 }; /* OWN_CORE: 1 << the calling core */
static const int INSIDE_MASKS[N_INSIDE_MASKS] = {0x3, OWN_CORE, 0xC, ALL_32_CORES, 0};
static const char *const FUNCTION_NAMES[OP_COUNT] = {"cg_conv2d_forward",
                                                     "cg_conv2d_forward",
                                                     "cg_conv2d_backward_data",
                                                     "cg_conv2d_backward_weights",
                                                     "cg_conv2d_backward_bias",
                                                     "cg_conv2d_backward_weights_bias",
                                                     "cg_conv2d_backward_weights_bias",
                                                     "cg_conv2d_backward",
                                                     "cg_conv2d_backward",
                                                     "cg_conv2d_backward"};

typedef struct inside_ctx {
    const problem *p;
    cg_status st[32][OP_COUNT][N_INSIDE_MASKS], last[32][OP_COUNT][N_INSIDE_MASKS];
    char detail[32][OP_COUNT][N_INSIDE_MASKS][256];
    atomic_int ran[32];
} inside_ctx;

static void inside_entry(void *arg)
{
    inside_ctx *k = arg;
    const int id = get_core_id();
    if (id < 0 || id > 31)
        return;
    for (int op = 0; op < OP_COUNT; ++op)
        for (int m = 0; m < N_INSIDE_MASKS; ++m) {
            const int mask = INSIDE_MASKS[m] == OWN_CORE ? (int)(1u << id) : INSIDE_MASKS[m];
            k->st[id][op][m] = call_public(k->p, &k->p->c, (op_id)op, 0, mask);
            k->last[id][op][m] = cg_last_status();
            snprintf(k->detail[id][op][m], sizeof k->detail[id][op][m], "%s",
                     cg_last_error_detail());
        }
    atomic_fetch_add(&k->ran[id], 1);
}

Test(conv2d, errors_called_inside_a_launch, .timeout = 60.0)
{
    tally t = {"errors_called_inside_a_launch", 0, 0};
    for (int layout = 0; layout < 2; ++layout) {
        const cg_conv2d base = desc_of(&ERR_BASE, (cg_layout)layout);
        problem p;
        problem_init(&p, &base, 0, case_seed("inside", layout, 0));
        cgt_rng r = cgt_rng_seeded(case_seed("inside canaries", layout, 0));
        unsigned char *copy = canary_outputs(&p, &r);
        inside_ctx *k = calloc(1, sizeof *k);
        k->p = &p;
        cr_assert_eq(core_mask_launch(0x3, inside_entry, k), 0, "core_mask_launch(0x3)");
        for (int id = 0; id < 2; ++id) {
            cr_expect_eq(atomic_load(&k->ran[id]), 1, "core %d ran %d times", id,
                         atomic_load(&k->ran[id]));
            for (int op = 0; op < OP_COUNT; ++op)
                for (int m = 0; m < N_INSIDE_MASKS; ++m) {
                    ++t.configs;
                    const int mask =
                        INSIDE_MASKS[m] == OWN_CORE ? (int)(1u << id) : INSIDE_MASKS[m];
                    if (k->st[id][op][m] != CG_ERR_INSIDE_LAUNCH ||
                        k->last[id][op][m] != CG_ERR_INSIDE_LAUNCH)
                        report(&t,
                               "%s, %s, on core %d of launch 0x3 with core_mask 0x%08x: status "
                               "%d (%s), cg_last_status %d, want %d (%s)",
                               OP_NAMES[op], layout_name((cg_layout)layout), id, (unsigned)mask,
                               k->st[id][op][m], cg_status_message(k->st[id][op][m]),
                               k->last[id][op][m], CG_ERR_INSIDE_LAUNCH,
                               cg_status_message(CG_ERR_INSIDE_LAUNCH));
                    char want[160];
                    snprintf(want, sizeof want,
                             "%s was called on emulated core %d: call cg_conv2d_* from an "
                             "ordinary thread",
                             FUNCTION_NAMES[op], id);
                    if (strcmp(k->detail[id][op][m], want) != 0)
                        report(&t,
                               "%s, %s, on core %d with core_mask 0x%08x: detail '%s', want '%s'",
                               OP_NAMES[op], layout_name((cg_layout)layout), id, (unsigned)mask,
                               k->detail[id][op][m], want);
                }
        }
        int which = 0;
        const long long changed = outputs_changed(&p, copy, &which);
        if (changed != -1)
            report(&t, "%s: a call inside a launch wrote byte %lld of the %s output",
                   layout_name((cg_layout)layout), changed, OP_NAMES[which]);
        free(k);
        free(copy);
        problem_free(&p);
    }
    assert_no_failure(&t);
}
