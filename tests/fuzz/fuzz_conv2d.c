/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the training step, cg_conv2d_* (include/convgrad.h,
 * "The whole training step").
 *
 * The input bytes decode (see decode() below, and make_corpus_conv2d.py,
 * which writes the same format) into every int field of cg_conv2d (layout
 * included), a core mask (host mode: the library launches the cores), one
 * of the four operations, NULL or real bias for the forward pass (for the
 * weight gradient: db too, through cg_conv2d_backward_weights_bias), NULL
 * pointers, misaligned (natural alignment only) buffers, and tile_rows: 0
 * calls the public function (the library chooses the tiles), > 0 goes
 * through cg_conv2d_run (src/conv2d.h) with that many rows a tile, to reach
 * tile edges. Each int field can be any value (negative, 0, INT_MIN,
 * INT_MAX, raw 32 bits), with a bias towards small valid values so that
 * most inputs reach the kernels.
 *
 * Tensors are real (exactly sized, so ASan sees one element past the end)
 * when they are small; otherwise a 64-byte dummy is passed. An independent
 * validator of the descriptor's rules says which error statuses the input
 * deserves. The checks, each an abort() on violation:
 *   - no crash, no out-of-bounds access, no UB (ASan + UBSan);
 *   - a valid input (all tensors real, bounded work) returns CG_OK and its
 *     output equals the double reference (tests/conv2d_reference.c) within
 *     1e-5 * sum|terms| (bias included) + 1e-6; every element is
 *     overwritten, whatever the buffer held before;
 *   - an invalid input returns one of the errors it deserves and leaves the
 *     output buffer (real or dummy) bit-for-bit untouched; the public
 *     function and cg_conv2d_run agree on it;
 *   - the inputs and the descriptor are never written;
 *   - a public function returns what cg_last_status() then reports, and
 *     cg_last_error_detail() is "" after CG_OK, else a sentence that names
 *     no field of the operator's (cg_conv2d_run and cg_conv2d_check too);
 *   - cg_conv2d_check agrees with the validator; cg_conv2d_output_h/_w
 *     follow the header's formula when it says CG_OK, else return 0.
 * A valid input whose tensors are too large to allocate, or whose reference
 * would be too slow, is checked through the helpers only (returns -1: not
 * kept).
 *
 * CG_FUZZ_VERBOSE=1 in the environment prints each decoded case. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h" /* cg_conv2d_run: forces the rows of a tile */
#include "conv2d_reference.h"
#include "convgrad.h"
#include "fuzz_common.h"
#include "support.h" /* cgt_names_operator_field (inline) */

enum {
    MAX_ELEMS = 4096,  /* a tensor is real only up to this many elements */
    DUMMY_BYTES = 64,  /* what stands in for a tensor too large to allocate */
    MAX_MACS = 1 << 21 /* a valid case's reference costs at most this */
};

/* ---- input decoding ------------------------------------------------------ */

typedef enum kind {
    K_LAYOUT,
    K_BATCH,
    K_SPATIAL, /* input height and width */
    K_CIN,
    K_COUT,
    K_KERNEL,
    K_GROUP,
    K_STEP, /* stride, dilation */
    K_PAD
} kind;

static int decode_field(reader *r, kind k, const cg_conv2d *c)
{
    uint8_t b = u8(r);
    if (b >= RAW_FROM)
        return as_int(u32(r));
    if (b >= SMALL_LIMIT)
        return (int)specials[b - SMALL_LIMIT];
    switch (k) {
    case K_LAYOUT:
        return b % 2;
    case K_BATCH:
        return 1 + b % 3;
    case K_SPATIAL:
        return 1 + b % 8;
    case K_CIN: /* now and then wide */
        return b % 16 < 12 ? 1 + b % 8 : 8 << (b % 4);
    case K_COUT:
        if (b % 4 == 0)
            return c->in_c;
        return b % 16 == 15 ? 32 : b % 16 == 7 ? 16 : 1 + b % 8;
    case K_KERNEL:
        return 1 + b % 4;
    case K_GROUP:
        switch (b % 4) {
        case 0:
            return 1;
        case 1:
            return c->in_c; /* depthwise when out_c == in_c */
        case 2: {
            int64_t g = gcd64(c->in_c, c->out_c);
            return g ? clamp_int(g) : 1;
        }
        default:
            return 1 + (b / 4) % 4;
        }
    case K_STEP:
        return b % 8 < 5 ? 1 : b % 8 - 3;
    case K_PAD:
        return b % 8 < 5 ? 0 : b % 8 - 4;
    }
    return 0;
}

enum { NULL_CONV, NULL_IN0, NULL_IN1, NULL_OUT, NULL_NONE };
static const char *const null_names[] = {"conv", "in0", "in1", "out", "none"};
static const char *const op_names[] = {"forward", "backward_data", "backward_weights",
                                       "backward_bias", "backward_weights_bias"};

static const uint32_t small_masks[] = {1, 1,   3, 3,          2,          5,          6,
                                       7, 0xF, 8, 0x80000000, 0x80000001, 0xC0000000, 0x10001};
static const uint32_t special_masks[] = {0,          0xFFFFFFFF, 0x7FFFFFFF, 0xFFFF,
                                         0xFFFF0000, 0x55555555, 0xAAAAAAAA, 0x80000000};

typedef struct fuzz_case {
    cg_conv2d conv;
    cg_conv2d_op op;
    int with_bias, misalign, null_which, core_mask;
    int64_t tile_rows; /* 0: the public function; > 0: cg_conv2d_run with it */
    uint64_t seed;
} fuzz_case;

/* The weight gradient with db: cg_conv2d_backward_weights_bias. */
static int fused(const fuzz_case *fc)
{
    return fc->op == CG_CONV2D_BACKWARD_WEIGHTS && fc->with_bias;
}

/* The operation the case runs: its op, or the fused one. */
static cg_conv2d_op run_op(const fuzz_case *fc)
{
    return fused(fc) ? CG_CONV2D_BACKWARD_WEIGHTS_BIAS : fc->op;
}

/* Format: flags byte, the 17 int fields of cg_conv2d in struct order (layout
 * first), core mask byte, tile byte, NULL selector byte (read only when flag
 * bit 4 is set), 4 seed bytes. Flags: bits 0-1 the operation (cg_conv2d_op),
 * bit 2 bias (forward) or db (backward weights: the fused call), bit 3
 * misaligned buffers, bit 4 a NULL pointer.
 * Tile byte: >= 240 the next 4 bytes as an unsigned tile_rows; else even: 0,
 * odd: 1 + (b / 2) % 8. */
static void decode(reader *r, fuzz_case *fc)
{
    memset(fc, 0, sizeof *fc);
    uint8_t f = u8(r);
    fc->op = (cg_conv2d_op)(f & 3);
    fc->with_bias = (f >> 2) & 1;
    fc->misalign = (f >> 3) & 1;
    const int has_null = (f >> 4) & 1;
    cg_conv2d *c = &fc->conv;
    c->layout = (cg_layout)decode_field(r, K_LAYOUT, c);
    c->batch = decode_field(r, K_BATCH, c);
    c->in_h = decode_field(r, K_SPATIAL, c);
    c->in_w = decode_field(r, K_SPATIAL, c);
    c->in_c = decode_field(r, K_CIN, c);
    c->out_c = decode_field(r, K_COUT, c);
    c->kernel_h = decode_field(r, K_KERNEL, c);
    c->kernel_w = decode_field(r, K_KERNEL, c);
    c->groups = decode_field(r, K_GROUP, c);
    c->stride_h = decode_field(r, K_STEP, c);
    c->stride_w = decode_field(r, K_STEP, c);
    c->dilation_h = decode_field(r, K_STEP, c);
    c->dilation_w = decode_field(r, K_STEP, c);
    c->pad_top = decode_field(r, K_PAD, c);
    c->pad_bottom = decode_field(r, K_PAD, c);
    c->pad_left = decode_field(r, K_PAD, c);
    c->pad_right = decode_field(r, K_PAD, c);

    uint8_t b = u8(r);
    uint32_t mask;
    if (b >= RAW_FROM)
        mask = u32(r);
    else if (b >= SMALL_LIMIT)
        mask = special_masks[(b - SMALL_LIMIT) % (sizeof special_masks / sizeof *special_masks)];
    else
        mask = small_masks[b % (sizeof small_masks / sizeof *small_masks)];
    fc->core_mask = as_int(mask);

    b = u8(r);
    if (b >= RAW_FROM)
        fc->tile_rows = (int64_t)u32(r);
    else
        fc->tile_rows = b % 2 ? 1 + (b / 2) % 8 : 0;

    fc->null_which = has_null ? u8(r) % 4 : NULL_NONE;
    fc->seed = u32(r) * 0x9E3779B97F4A7C15ull + 1;
}

/* ---- the descriptor's rules, independently -------------------------------- */

#define ERR_BIT(s) (1u << (unsigned)(-(s)))

typedef unsigned __int128 u128;

typedef struct expectation {
    unsigned desc_errs; /* the rules the descriptor breaks (bit -s); 0: valid */
    unsigned desc_may;  /* desc_errs, and OVERFLOW when huge */
    unsigned errs;      /* the call's: desc_errs, NULL pointers, core mask */
    unsigned may;
    int huge;       /* some byte count past 2^31: OVERFLOW acceptable, never run for real */
    int64_t oh, ow; /* the formula's output size; -1 where undefined */
    /* element counts, saturated; -1 where undefined */
    int64_t n_x, n_y, n_w, n_b;
    int64_t macs; /* the reference's inner iterations */
} expectation;

static int64_t sat(u128 v)
{
    return v > (u128)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t out_extent(int64_t in, int64_t pad_a, int64_t pad_b, int64_t k, int64_t dil,
                          int64_t stride)
{
    int64_t num = in + pad_a + pad_b - dil * (k - 1) - 1;
    return num < 0 ? 0 : num / stride + 1;
}

static void expect(const fuzz_case *fc, expectation *e)
{
    const cg_conv2d *c = &fc->conv;
    memset(e, 0, sizeof *e);
    e->oh = e->ow = e->n_x = e->n_y = e->n_w = e->n_b = -1;
    unsigned d = 0;
    if ((unsigned)c->layout != CG_LAYOUT_NHWC && (unsigned)c->layout != CG_LAYOUT_NCHW)
        d |= ERR_BIT(CG_ERR_BAD_LAYOUT);
    const int sizes_ok = c->batch >= 1 && c->in_h >= 1 && c->in_w >= 1 && c->in_c >= 1 &&
                         c->out_c >= 1 && c->kernel_h >= 1 && c->kernel_w >= 1;
    if (!sizes_ok)
        d |= ERR_BIT(CG_ERR_BAD_SIZE);
    const int group_ok =
        c->groups >= 1 && (int64_t)c->in_c % c->groups == 0 && (int64_t)c->out_c % c->groups == 0;
    if (!group_ok)
        d |= ERR_BIT(CG_ERR_BAD_GROUP);
    const int stride_ok = c->stride_h >= 1 && c->stride_w >= 1;
    if (!stride_ok)
        d |= ERR_BIT(CG_ERR_BAD_STRIDE);
    const int dil_ok = c->dilation_h >= 1 && c->dilation_w >= 1;
    if (!dil_ok)
        d |= ERR_BIT(CG_ERR_BAD_DILATION);
    const int pad_ok =
        c->pad_top >= 0 && c->pad_bottom >= 0 && c->pad_left >= 0 && c->pad_right >= 0;
    if (!pad_ok)
        d |= ERR_BIT(CG_ERR_BAD_PAD);

    /* Overflow: a tensor's byte count past PTRDIFF_MAX, the operator's
     * buffer bound 2*(Kh*Kw*Cin/G)*4 past INT_MAX, or an image plane (in_h*in_w,
     * OH*OW) past INT_MAX must be refused. A byte count past 2^31 (or 32
     * float partials of w's, which the operator's rules also bound) may be
     * refused as well: generous, the library may be stricter than size_t. */
    const u128 big = (u128)1 << 31, ptrdiff_max = (u128)PTRDIFF_MAX;
    if (sizes_ok) {
        const u128 x = (u128)c->batch * (u128)c->in_h * (u128)c->in_w * (u128)c->in_c;
        e->n_x = sat(x);
        e->n_b = c->out_c;
        if (x * 4 > ptrdiff_max || (u128)c->in_h * (u128)c->in_w > INT_MAX)
            d |= ERR_BIT(CG_ERR_OVERFLOW);
        e->huge |= x * 4 >= big;
        if (group_ok) {
            const u128 row = (u128)c->kernel_h * (u128)c->kernel_w * (u128)(c->in_c / c->groups);
            const u128 w = row * (u128)c->out_c;
            e->n_w = sat(w);
            if (w * 4 > ptrdiff_max || 2 * row * 4 > INT_MAX)
                d |= ERR_BIT(CG_ERR_OVERFLOW);
            e->huge |= w * 128 >= big || 2 * row * 4 > INT_MAX;
        }
        if (stride_ok && dil_ok && pad_ok) {
            e->oh = out_extent(c->in_h, c->pad_top, c->pad_bottom, c->kernel_h, c->dilation_h,
                               c->stride_h);
            e->ow = out_extent(c->in_w, c->pad_left, c->pad_right, c->kernel_w, c->dilation_w,
                               c->stride_w);
            if (e->oh < 1 || e->ow < 1) {
                d |= ERR_BIT(CG_ERR_BAD_SIZE);
            } else {
                const u128 plane = (u128)e->oh * (u128)e->ow;
                const u128 y = (u128)c->batch * plane * (u128)c->out_c;
                e->n_y = sat(y);
                if (plane > INT_MAX || y * 4 > ptrdiff_max)
                    d |= ERR_BIT(CG_ERR_OVERFLOW);
                e->huge |= y * 4 >= big;
                if (group_ok) {
                    const u128 per =
                        (u128)c->kernel_h * (u128)c->kernel_w * (u128)(c->in_c / c->groups);
                    e->macs = sat(y * (per > 0 ? per : 1));
                }
            }
        }
    }
    e->desc_errs = d;
    e->desc_may = d | (e->huge ? ERR_BIT(CG_ERR_OVERFLOW) : 0);
    unsigned call = d;
    /* in1 is not an operand of the bias gradient: NULL there is fine */
    if (fc->null_which != NULL_NONE &&
        !(fc->null_which == NULL_IN1 && fc->op == CG_CONV2D_BACKWARD_BIAS))
        call |= ERR_BIT(CG_ERR_NULL_POINTER);
    if (fc->core_mask == 0)
        call |= ERR_BIT(CG_ERR_CORE_MASK);
    e->errs = call;
    e->may = call | (e->huge ? ERR_BIT(CG_ERR_OVERFLOW) : 0);
}

/* ---- buffers -------------------------------------------------------------- */

/* Allocates `count` floats when 0 < count <= MAX_ELEMS (the allocation ends
 * exactly at the last element), else a dummy; random bytes, then (values)
 * floats in [-1, 1); keeps a copy. */
static void buf_make(buf *b, int64_t count, int misalign, int values, uint64_t *rng)
{
    memset(b, 0, sizeof *b);
    b->real = count > 0 && count <= MAX_ELEMS;
    b->count = b->real ? count : 0;
    size_t off = misalign ? 4 : 0; /* natural alignment only: 4 mod 16 */
    size_t bytes = b->real ? (size_t)count * 4 : DUMMY_BYTES;
    b->total = off + bytes;
    b->base = malloc(b->total);
    if (!b->base)
        abort();
    b->ptr = b->base + off;
    for (size_t i = 0; i < b->total; i++)
        b->base[i] = (unsigned char)next_rand(rng);
    if (b->real && values) {
        for (size_t i = 0; i < (size_t)count; i++) {
            /* a multiple of 2^-23 in [-1, 1): exact in fp32 */
            float v = (float)((int64_t)(next_rand(rng) >> 40) - (1 << 23)) * 0x1p-23f;
            memcpy(b->ptr + i * 4, &v, 4);
        }
    }
    b->copy = malloc(b->total);
    if (!b->copy)
        abort();
    memcpy(b->copy, b->base, b->total);
}

static double *to_double(const buf *b)
{
    double *d = malloc(((size_t)b->count + 1) * sizeof *d);
    if (!d)
        abort();
    for (int64_t i = 0; i < b->count; i++) {
        float v;
        memcpy(&v, b->ptr + 4 * i, 4);
        d[i] = v;
    }
    return d;
}

/* ---- reporting ------------------------------------------------------------ */

static const fuzz_case *current;

static void describe(FILE *f, const fuzz_case *fc)
{
    const cg_conv2d *c = &fc->conv;
    fprintf(f,
            "case: %s bias=%s misalign=%d null=%s core_mask=0x%08x tile_rows=%lld (%s)\n"
            "  layout=%d batch=%d in %dx%d in_c=%d out_c=%d  K %dx%d  groups=%d\n"
            "  stride %d,%d  dilation %d,%d  pad top=%d bottom=%d left=%d right=%d\n",
            op_names[run_op(fc)], fc->with_bias ? "yes" : "NULL", fc->misalign,
            null_names[fc->null_which], (unsigned)fc->core_mask, (long long)fc->tile_rows,
            fc->tile_rows ? "cg_conv2d_run" : "public function", (int)c->layout, c->batch, c->in_h,
            c->in_w, c->in_c, c->out_c, c->kernel_h, c->kernel_w, c->groups, c->stride_h,
            c->stride_w, c->dilation_h, c->dilation_w, c->pad_top, c->pad_bottom, c->pad_left,
            c->pad_right);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n==== convgrad fuzz_conv2d: CONTRACT VIOLATION: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (current)
        describe(stderr, current);
    abort();
}

/* ---- the calls ------------------------------------------------------------ */

typedef struct call {
    const cg_conv2d *conv;
    const float *in0, *in1, *bias;
    float *out, *db; /* db: the fused call's second output */
} call;

/* The detail the last call left: "" after CG_OK, else a sentence in
 * cg_conv2d's own words (no operator field). */
static void check_detail(const char *what, cg_status s)
{
    const char *d = cg_last_error_detail();
    if (s == CG_OK ? d[0] != '\0' : d[0] == '\0' || cgt_names_operator_field(d))
        fail("%s: status %d with detail '%s'", what, (int)s, d);
}

/* The public function of op; checks its return against cg_last_status(). */
static cg_status call_public(const fuzz_case *fc, const call *k, int expect_null)
{
    /* a status the call must replace (unless it deserves that one) */
    if (!expect_null)
        (void)cg_conv2d_backward_bias(NULL, NULL, NULL, 1);
    cg_status ret = CG_OK;
    switch (run_op(fc)) {
    case CG_CONV2D_FORWARD:
        ret = cg_conv2d_forward(k->conv, k->in0, k->in1, k->bias, k->out, fc->core_mask);
        break;
    case CG_CONV2D_BACKWARD_DATA:
        ret = cg_conv2d_backward_data(k->conv, k->in0, k->in1, k->out, fc->core_mask);
        break;
    case CG_CONV2D_BACKWARD_WEIGHTS:
        ret = cg_conv2d_backward_weights(k->conv, k->in0, k->in1, k->out, fc->core_mask);
        break;
    case CG_CONV2D_BACKWARD_BIAS:
        ret = cg_conv2d_backward_bias(k->conv, k->in0, k->out, fc->core_mask);
        break;
    case CG_CONV2D_BACKWARD_WEIGHTS_BIAS:
        ret =
            cg_conv2d_backward_weights_bias(k->conv, k->in0, k->in1, k->out, k->db, fc->core_mask);
        break;
    }
    cg_status last = cg_last_status();
    if (ret != last)
        fail("cg_conv2d_%s returned %d but cg_last_status() says %d", op_names[run_op(fc)],
             (int)ret, (int)last);
    check_detail(op_names[run_op(fc)], ret);
    return ret;
}

static cg_status call_run(const fuzz_case *fc, const call *k, int64_t tile_rows)
{
    cg_status s = cg_conv2d_run(run_op(fc), k->conv, k->in0, k->in1, k->bias, k->out, k->db,
                                fc->core_mask, tile_rows);
    check_detail("cg_conv2d_run", s);
    return s;
}

/* ---- checking a CG_OK result against the reference ----------------------- */

/* out's floats against ref, within 1e-5 * mag + 1e-6 each. */
static void check_floats(const char *what, const char *name, const buf *out, const double *ref,
                         const double *mag)
{
    for (size_t i = 0; i < (size_t)out->count; i++) {
        float g;
        memcpy(&g, out->ptr + 4 * i, 4);
        const double tol = 1e-5 * mag[i] + 1e-6;
        if (!(fabs((double)g - ref[i]) <= tol))
            fail("%s: %s[%zu] = %.9g, want %.9g (sum|terms| %.9g), err %.3g > tol %.3g", what, name,
                 i, (double)g, ref[i], mag[i], fabs((double)g - ref[i]), tol);
    }
}

static void check_result(const fuzz_case *fc, const buf *in0, const buf *in1, const buf *bias,
                         const buf *out, const buf *db)
{
    const cg_conv2d *c = &fc->conv;
    const size_t n = (size_t)out->count;
    double *a = to_double(in0), *b = in1->real ? to_double(in1) : NULL;
    double *bd = bias ? to_double(bias) : NULL;
    double *ref = malloc((n + 1) * sizeof *ref), *mag = malloc((n + 1) * sizeof *mag);
    if (!ref || !mag)
        abort();
    switch (fc->op) {
    case CG_CONV2D_FORWARD:
        cref_forward_f64(c, a, b, bd, ref, mag);
        break;
    case CG_CONV2D_BACKWARD_DATA:
        cref_backward_data_f64(c, a, b, ref, mag);
        break;
    case CG_CONV2D_BACKWARD_WEIGHTS:
        cref_backward_weights_f64(c, a, b, ref, mag);
        break;
    case CG_CONV2D_BACKWARD_BIAS:
    case CG_CONV2D_BACKWARD_WEIGHTS_BIAS: /* not an op of a case: run_op() */
        cref_backward_bias_f64(c, a, ref, mag);
        break;
    }
    check_floats(op_names[run_op(fc)], "out", out, ref, mag);
    if (fused(fc)) { /* db from dy, in1 */
        const size_t nb = (size_t)db->count;
        double *rb = malloc((nb + 1) * sizeof *rb), *mb = malloc((nb + 1) * sizeof *mb);
        if (!rb || !mb)
            abort();
        cref_backward_bias_f64(c, b, rb, mb);
        check_floats(op_names[run_op(fc)], "db", db, rb, mb);
        free(rb);
        free(mb);
    }
    free(a);
    free(b);
    free(bd);
    free(ref);
    free(mag);
}

/* ---- the helpers ---------------------------------------------------------- */

static void check_helpers(const fuzz_case *fc, const expectation *e)
{
    const cg_conv2d *c = &fc->conv;
    cg_status s = cg_conv2d_check(c);
    check_detail("cg_conv2d_check", s);
    if (s == CG_OK ? e->desc_errs != 0 : (s > 0 || s < -31 || !(e->desc_may & ERR_BIT(s))))
        fail("cg_conv2d_check = %d (%s); the descriptor deserves %s (error bits 0x%x)", (int)s,
             cg_status_message(s), e->desc_errs ? "errors" : "CG_OK", e->desc_may);
    int oh = cg_conv2d_output_h(c), ow = cg_conv2d_output_w(c);
    if (s == CG_OK && (oh != e->oh || ow != e->ow))
        fail("cg_conv2d_output_h/_w = %d, %d; the formula gives %lld, %lld", oh, ow,
             (long long)e->oh, (long long)e->ow);
    if (s != CG_OK && (oh != 0 || ow != 0))
        fail("cg_conv2d_output_h/_w = %d, %d for an invalid descriptor (check says %d)", oh, ow,
             (int)s);
    if (cg_conv2d_check(NULL) != CG_ERR_NULL_POINTER || cg_conv2d_output_h(NULL) != 0 ||
        cg_conv2d_output_w(NULL) != 0)
        fail("a helper accepted a NULL descriptor");
}

/* ---- the target ----------------------------------------------------------- */

static int verbose = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (verbose < 0)
        verbose = getenv("CG_FUZZ_VERBOSE") && atoi(getenv("CG_FUZZ_VERBOSE")) > 0;
    reader r = {data, size, 0};
    fuzz_case fc;
    decode(&r, &fc);
    current = &fc;
    expectation e;
    expect(&fc, &e);
    if (verbose) {
        describe(stdout, &fc);
        fflush(stdout);
    }
    const cg_conv2d conv_before = fc.conv;
    check_helpers(&fc, &e);

    /* the operands' element counts */
    int64_t n_in0, n_in1 = 1, n_out;
    switch (fc.op) {
    case CG_CONV2D_FORWARD:
        n_in0 = e.n_x, n_in1 = e.n_w, n_out = e.n_y;
        break;
    case CG_CONV2D_BACKWARD_DATA:
        n_in0 = e.n_y, n_in1 = e.n_w, n_out = e.n_x;
        break;
    case CG_CONV2D_BACKWARD_WEIGHTS:
        n_in0 = e.n_x, n_in1 = e.n_y, n_out = e.n_w;
        break;
    default:
        n_in0 = e.n_y, n_out = e.n_b;
        break;
    }
    const int64_t n_bias = fc.op == CG_CONV2D_FORWARD && fc.with_bias ? e.n_b : 1;

    /* A valid call runs only with every buffer real and bounded work. */
    if (!e.errs) {
        if (e.huge || n_in0 > MAX_ELEMS || n_in1 > MAX_ELEMS || n_out > MAX_ELEMS ||
            n_bias > MAX_ELEMS || e.macs > MAX_MACS) {
            if (verbose)
                printf("  skipped: valid, too large to run for real\n");
            current = NULL;
            return -1;
        }
    }

    uint64_t rng = fc.seed;
    buf in0, in1, bias, out, db;
    buf_make(&in0, n_in0, fc.misalign, 1, &rng);
    buf_make(&in1, n_in1, fc.misalign, 1, &rng);
    buf_make(&bias, n_bias, fc.misalign, 1, &rng);
    buf_make(&out, n_out, fc.misalign, 0, &rng); /* random bytes: must all be overwritten */
    buf_make(&db, fused(&fc) ? e.n_b : 1, fc.misalign, 0, &rng);
    if (!e.errs && !(in0.real && in1.real && bias.real && out.real && db.real))
        fail("harness: a valid case without real buffers");

    const int is_bias_op = fc.op == CG_CONV2D_BACKWARD_BIAS;
    call k = {.conv = fc.null_which == NULL_CONV ? NULL : &fc.conv,
              .in0 = fc.null_which == NULL_IN0 ? NULL : (const float *)(void *)in0.ptr,
              .in1 = fc.null_which == NULL_IN1 ? NULL : (const float *)(void *)in1.ptr,
              .bias = fc.op == CG_CONV2D_FORWARD && fc.with_bias ? (const float *)(void *)bias.ptr
                                                                 : NULL,
              .out = fc.null_which == NULL_OUT ? NULL : (float *)(void *)out.ptr,
              .db = fused(&fc) ? (float *)(void *)db.ptr : NULL};
    if (is_bias_op && fc.tile_rows == 0)
        k.in1 = NULL; /* the public function has no in1 */
    const int expect_null = (e.errs & ERR_BIT(CG_ERR_NULL_POINTER)) != 0;

    cg_status s =
        fc.tile_rows ? call_run(&fc, &k, fc.tile_rows) : call_public(&fc, &k, expect_null);
    const char *msg = cg_status_message(s);
    if (!msg || !msg[0])
        fail("cg_status_message(%d) is empty", (int)s);
    if (verbose)
        printf("  expected %s (error bits 0x%x, may 0x%x), got %d: %s\n",
               e.errs ? "an error" : "CG_OK", e.errs, e.may, (int)s, msg);

    if (memcmp(&fc.conv, &conv_before, sizeof conv_before) != 0)
        fail("the descriptor was written");
    if (!buf_same(&in0) || !buf_same(&in1) || !buf_same(&bias))
        fail("an input (in0 %d, in1 %d, bias %d: 0 = written) was written", buf_same(&in0),
             buf_same(&in1), buf_same(&bias));
    if (s == CG_OK) {
        if (e.errs)
            fail("CG_OK for an invalid input (it deserves error bits 0x%x; tensors real: in0 %d "
                 "in1 %d out %d)",
                 e.errs, in0.real, in1.real, out.real);
        if (out.ptr != out.base && memcmp(out.base, out.copy, (size_t)(out.ptr - out.base)) != 0)
            fail("bytes before the output were written");
        if (db.ptr != db.base && memcmp(db.base, db.copy, (size_t)(db.ptr - db.base)) != 0)
            fail("bytes before db were written");
        check_result(&fc, &in0, &in1, k.bias ? &bias : NULL, &out, &db);
    } else {
        if (s > 0 || s < -31 || !(e.may & ERR_BIT(s)))
            fail("status %d (%s) for an input that deserves %s (error bits 0x%x)", (int)s, msg,
                 e.errs ? "other errors" : "CG_OK", e.may);
        if (!buf_same(&out) || !buf_same(&db))
            fail("output (%s) written on error %d (first changed byte %lld)",
                 buf_same(&out) ? "db" : "out", (int)s,
                 buf_first_change(buf_same(&out) ? &db : &out));
        /* the other way in says the same, and writes nothing either */
        cg_status s2 = fc.tile_rows ? call_public(&fc, &k, expect_null)
                                    : call_run(&fc, &k, 1 + (int64_t)(fc.seed % 7));
        if (s2 != s)
            fail("%s returned %d, %s %d", fc.tile_rows ? "cg_conv2d_run" : "the public function",
                 (int)s, fc.tile_rows ? "the public function" : "cg_conv2d_run", (int)s2);
        if (!buf_same(&out) || !buf_same(&db) || !buf_same(&in0) || !buf_same(&in1) ||
            !buf_same(&bias))
            fail("a buffer written on error %d (second call)", (int)s);
    }
    buf_free(&db);
    buf_free(&in0);
    buf_free(&in1);
    buf_free(&bias);
    buf_free(&out);
    current = NULL;
    return 0;
}
