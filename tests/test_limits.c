/* SPDX-License-Identifier: MIT */
/* Limits: the largest shapes the API accepts and the smallest that overflow,
 * side by side at each boundary, with every expected number computed by hand
 * (in the comments) rather than by a formula shared with the library.
 *
 * What the library checks (src/plan.c, check_counts), for fp32 and fp16 alike:
 *   x  = N*H*W*Cin      elements: x*4 <= PTRDIFF_MAX, i.e. x  <= 2^61 - 1
 *   dy = N*OH*OW*Cout   elements: dy*4 <= PTRDIFF_MAX, i.e. dy <= 2^61 - 1
 *   dw = Cout*Kh*Kw*Ci' elements: 32 partials, 32*4*dw <= PTRDIFF_MAX,
 *                                 i.e. dw <= 2^56 - 1 (whatever the mask or entry)
 *   min buffer 2*Kh*Kw*Ci'*dtype <= INT_MAX. It is even, so INT_MAX itself is
 *   never reached: the largest bounds are INT_MAX-7 (fp32) and INT_MAX-3 (fp16).
 * (2^61 - 1 is prime, so the largest valid x or dy made of int fields is
 * 2*(2^30-1)*(2^30+1) = 2^61 - 2.)
 *
 * A valid shape too large to allocate is checked through the helpers and the
 * internal validation (cg_plan_make) only; an invalid one also through every
 * entry point with tiny dummy buffers, which validation rejects before any
 * memory is touched (the dummies are then checked untouched). Huge strides,
 * dilations and pads, whose coordinates pass INT_MAX, and outputs far larger
 * than the input run for real on small tensors against tests/reference.c, as
 * does one moderately large 1x1 problem. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "support.h"

#define TEST_TIMEOUT 300.0

enum { ALL_CORES = -1 };

/* 1x1 everything, batch 1, buffer_size_ 8 (the fp32 bound of this shape). */
static ConvParameter tiny(void)
{
    ConvParameter p;
    memset(&p, 0, sizeof p);
    p.input_batch_ = p.output_batch_ = 1;
    p.input_h_ = p.input_w_ = p.output_h_ = p.output_w_ = 1;
    p.input_channel_ = p.output_channel_ = 1;
    p.kernel_h_ = p.kernel_w_ = 1;
    p.group_ = 1;
    p.stride_h_ = p.stride_w_ = p.dilation_h_ = p.dilation_w_ = 1;
    p.buffer_size_ = 8;
    return p;
}

/* tiny() with a kh x kw kernel over ci input channels (group 1, so Ci' = ci)
 * and buffer_size_ bs: the shapes at the buffer_size_ lower bound. */
static ConvParameter tiny_kernel(int kh, int kw, int ci, int bs)
{
    ConvParameter p = tiny();
    p.kernel_h_ = kh;
    p.kernel_w_ = kw;
    p.input_channel_ = ci;
    p.buffer_size_ = bs;
    return p;
}

/* tiny() at batch 2 with an h x w plane in x (X_PLANE: input_h_, input_w_) or
 * in dy (DY_PLANE: output_h_, output_w_): 2*h*w elements in that tensor. */
enum plane { X_PLANE, DY_PLANE };
static ConvParameter batch2_plane(enum plane which, int h, int w)
{
    ConvParameter p = tiny();
    p.input_batch_ = p.output_batch_ = 2;
    if (which == X_PLANE) {
        p.input_h_ = h;
        p.input_w_ = w;
    } else {
        p.output_h_ = h;
        p.output_w_ = w;
    }
    return p;
}

static void describe(const ConvParameter *p, size_t es, char *buf, size_t len)
{
    char shape[512];
    cgt_param_str(p, shape, sizeof shape);
    snprintf(buf, len, "%s [%s]", shape, es == 2 ? "fp16" : "fp32");
}

/* Valid: validation passes; the helpers give the hand-computed numbers for a
 * 1-core, a 2-core and the 32-core mask. */
static void expect_valid(ConvParameter p, size_t es, int min_buffer, size_t ws1, size_t ws2,
                         size_t ws32)
{
    char what[640];
    describe(&p, es, what, sizeof what);
    cg_plan plan;
    p.workspace_ = NULL;
    cg_status st = cg_plan_make(&p, es, &plan);
    cr_expect_eq(st, CG_OK, "%s: validation says %d (%s)", what, (int)st, cg_status_message(st));
    int mb = cg_grad_filter_min_buffer_size(&p, es);
    cr_expect_eq(mb, min_buffer, "%s: cg_grad_filter_min_buffer_size %d, want %d", what, mb,
                 min_buffer);
    const int masks[] = {0x1, 0x3, ALL_CORES};
    const size_t want[] = {ws1, ws2, ws32};
    for (int i = 0; i < 3; i++) {
        size_t ws = cg_grad_filter_workspace_bytes(&p, masks[i], es);
        cr_expect_eq(ws, want[i], "%s: cg_grad_filter_workspace_bytes(mask %#x) %zu, want %zu",
                     what, (unsigned)masks[i], ws, want[i]);
    }
}

/* ---- invalid: every entry point, tiny dummies ----------------------------- */

enum { DUMMY = 64 };
typedef struct dummies {
    _Alignas(16) unsigned char dy[DUMMY], x[DUMMY], out[DUMMY], bias[DUMMY], ws[4 * DUMMY];
} dummies;

static void dummies_fill(dummies *d)
{
    unsigned char *b = (unsigned char *)d;
    for (size_t i = 0; i < sizeof *d; i++)
        b[i] = (unsigned char)(i * 37u + 11u);
}

static int dummies_intact(const dummies *d)
{
    const unsigned char *b = (const unsigned char *)d;
    for (size_t i = 0; i < sizeof *d; i++)
        if (b[i] != (unsigned char)(i * 37u + 11u))
            return 0;
    return 1;
}

/* One entry on the dummies: variant 0..7 = {fp, hp} x {_s, _p} x {cg_*, void}. */
static cg_status call_entry(int v, dummies *d, ConvParameter *p, int mask)
{
    const int hp = v & 1, is_s = (v >> 1) & 1, twin = (v >> 2) & 1;
    float *dyf = (float *)(void *)d->dy, *xf = (float *)(void *)d->x;
    float *of = (float *)(void *)d->out, *bf = (float *)(void *)d->bias;
    float16 *dyh = (float16 *)(void *)d->dy, *xh = (float16 *)(void *)d->x;
    float16 *oh = (float16 *)(void *)d->out, *bh = (float16 *)(void *)d->bias;
    if (twin) {
        if (hp)
            return is_s ? cg_hp_conv_grad_filter_s(dyh, xh, oh, bh, p, mask)
                        : cg_hp_conv_grad_filter_p(dyh, xh, oh, bh, p);
        return is_s ? cg_fp_conv_grad_filter_s(dyf, xf, of, bf, p, mask)
                    : cg_fp_conv_grad_filter_p(dyf, xf, of, bf, p);
    }
    if (hp) {
        if (is_s)
            hp_conv_grad_filter_s(dyh, xh, oh, bh, p, mask);
        else
            hp_conv_grad_filter_p(dyh, xh, oh, bh, p);
    } else {
        if (is_s)
            fp_conv_grad_filter_s(dyf, xf, of, bf, p, mask);
        else
            fp_conv_grad_filter_p(dyf, xf, of, bf, p);
    }
    return cg_last_status();
}

typedef struct spmd_ctx {
    dummies *d;
    ConvParameter *p;
    int variant;
    cg_status st[32];
} spmd_ctx;

static void spmd_entry(void *arg)
{
    spmd_ctx *k = arg;
    int id = get_core_id();
    cg_status st = call_entry(k->variant, k->d, k->p, 0x3);
    if (id >= 0 && id < 32)
        k->st[id] = st;
}

/* Invalid for dtype es with status `want`: validation, the helpers (0; the
 * lower bound, which ignores buffer_size_, is `min_buffer`: 0 unless only
 * buffer_size_ is wrong), and the entry points of that dtype, host and SPMD,
 * which return `want` and touch nothing. */
static void expect_invalid(ConvParameter p, size_t es, cg_status want, int min_buffer)
{
    char what[640];
    describe(&p, es, what, sizeof what);
    cg_plan plan;
    cg_status st = cg_plan_make(&p, es, &plan);
    cr_expect_eq(st, want, "%s: validation says %d (%s), want %d (%s)", what, (int)st,
                 cg_status_message(st), (int)want, cg_status_message(want));
    int mb = cg_grad_filter_min_buffer_size(&p, es);
    cr_expect_eq(mb, min_buffer, "%s: cg_grad_filter_min_buffer_size %d, want %d", what, mb,
                 min_buffer);
    const int masks[] = {0x1, 0x3, ALL_CORES};
    for (int i = 0; i < 3; i++) {
        size_t ws = cg_grad_filter_workspace_bytes(&p, masks[i], es);
        cr_expect_eq(ws, 0, "%s: cg_grad_filter_workspace_bytes(mask %#x) %zu, want 0", what,
                     (unsigned)masks[i], ws);
    }
    dummies d;
    for (int v = 0; v < 8; v++) {
        if ((size_t)((v & 1) ? 2 : 4) != es)
            continue;
        dummies_fill(&d);
        ConvParameter q = p;
        q.workspace_ = d.ws;
        const ConvParameter q0 = q;
        st = call_entry(v, &d, &q, 0x3);
        cr_expect_eq(st, want, "%s: entry variant %d (host) says %d, want %d", what, v, (int)st,
                     (int)want);
        cr_expect_eq(cg_last_status(), st, "%s: cg_last_status", what);
        cr_expect(dummies_intact(&d), "%s: entry variant %d wrote a buffer", what, v);
        cr_expect(memcmp(&q, &q0, sizeof q) == 0, "%s: the ConvParameter was written", what);
        if (!((v >> 1) & 1))
            continue; /* SPMD: _s only */
        spmd_ctx k = {.d = &d, .p = &q, .variant = v};
        dummies_fill(&d);
        int rc = core_mask_launch(0x3, spmd_entry, &k);
        cr_expect_eq(rc, 0, "%s: launch %d", what, rc);
        for (int id = 0; id < 2; id++)
            cr_expect_eq(k.st[id], want, "%s: entry variant %d (SPMD core %d) says %d", what, v, id,
                         (int)k.st[id]);
        cr_expect(dummies_intact(&d), "%s: entry variant %d (SPMD) wrote a buffer", what, v);
    }
}

/* ---- the lower bound of buffer_size_ ----------------------------------------- */

Test(limits, min_buffer_bound_fp32)
{
    /* Kh*Kw*Ci' = 435*4859*127 = 2^28 - 1 = 268435455: bound 8*(2^28-1) =
     * 2147483640 = INT_MAX - 7, the largest an fp32 bound can be */
    ConvParameter p = tiny_kernel(435, 4859, 127, 2147483640);
    /* workspace: max(2147483640*4 = 8589934560, k*4*268435455 = k*1073741820) */
    expect_valid(p, 4, 2147483640, 8589934560u, 8589934560u, 34359738240u);
    /* one byte less: too small (the bound itself is still reported) */
    p.buffer_size_ = 2147483639;
    expect_invalid(p, 4, CG_ERR_BUFFER_TOO_SMALL, 2147483640);
    /* Kh*Kw*Ci' = 2^14*2^7*2^7 = 2^28: bound 2^31 = INT_MAX + 1 */
    p = tiny_kernel(1 << 14, 1 << 7, 1 << 7, INT_MAX);
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
    /* ... which is fine in fp16: bound 4*2^28 = 2^30 = 1073741824; workspace
     * max(2^30*4 = 2^32, k*4*2^28 = k*2^30) */
    p.buffer_size_ = 1 << 30;
    expect_valid(p, 2, 1 << 30, 4294967296u, 4294967296u, 34359738368u);
}

Test(limits, min_buffer_bound_fp16)
{
    /* Kh*Kw*Ci' = 233*1103*2089 = 2^29 - 1 = 536870911: bound 4*(2^29-1) =
     * 2147483644 = INT_MAX - 3, the largest an fp16 bound can be */
    ConvParameter p = tiny_kernel(233, 1103, 2089, 2147483644);
    /* workspace: max(2147483644*4 = 8589934576, k*4*536870911 = k*2147483644) */
    expect_valid(p, 2, 2147483644, 8589934576u, 8589934576u, 68719476608u);
    /* in fp32 the same shape's bound is 8589934576 > INT_MAX */
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
    p.buffer_size_ = 2147483643;
    expect_invalid(p, 2, CG_ERR_BUFFER_TOO_SMALL, 2147483644);
    /* Kh*Kw*Ci' = 2^10*2^10*2^9 = 2^29: bound 2^31 = INT_MAX + 1 */
    p = tiny_kernel(1 << 10, 1 << 10, 1 << 9, INT_MAX);
    expect_invalid(p, 2, CG_ERR_OVERFLOW, 0);
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
}

Test(limits, min_buffer_bound_with_groups)
{
    /* G = 4, Cin = 4*(2^29-1) = 2147483644, Cout = 4: Ci' = 2^29 - 1, bound
     * 2147483644 (fp16); dw = 4*(2^29-1) = 2147483644 elements; workspace
     * max(8589934576, k*4*2147483644 = k*8589934576) */
    ConvParameter p = tiny();
    p.group_ = 4;
    p.input_channel_ = 2147483644;
    p.output_channel_ = 4;
    p.buffer_size_ = 2147483644;
    expect_valid(p, 2, 2147483644, 8589934576u, 17179869152u, 274877906432u);
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
}

Test(limits, buffer_size_int_max)
{
    /* buffer_size_ INT_MAX: workspace INT_MAX*4 = 8589934588 bytes on any mask
     * (dw is one element: at most 32*4 = 128 bytes of partials) */
    ConvParameter p = tiny();
    p.buffer_size_ = INT_MAX;
    expect_valid(p, 4, 8, 8589934588u, 8589934588u, 8589934588u);
    expect_valid(p, 2, 4, 8589934588u, 8589934588u, 8589934588u);
}

/* The element-count boundary of x or dy (`which`) at batch 2, 1x1 elsewhere:
 * 2*(2^30-1)*(2^30+1) = 2^61 - 2 elements (2^63 - 8 bytes at 4 a piece) is
 * valid, with dw 1 element, bound 2*es and workspace max(8*4 = 32, k*4);
 * 2*2^30*2^30 = 2^61 elements (2^63 bytes: fits size_t, > PTRDIFF_MAX) is not. */
static void expect_2pow61_boundary(enum plane which, size_t es)
{
    expect_valid(batch2_plane(which, 1073741823, 1073741825), es, (int)(2 * es), 32, 32, 128);
    expect_invalid(batch2_plane(which, 1 << 30, 1 << 30), es, CG_ERR_OVERFLOW, 0);
}

/* ---- x -------------------------------------------------------------------- */

Test(limits, x_byte_count)
{
    for (size_t es = 2; es <= 4; es += 2) {
        expect_2pow61_boundary(X_PLANE, es);
        /* 4*2^30*2^30 = 2^62 elements: 2^64 bytes overflow size_t */
        ConvParameter p = batch2_plane(X_PLANE, 1 << 30, 1 << 30);
        p.input_batch_ = p.output_batch_ = 4;
        expect_invalid(p, es, CG_ERR_OVERFLOW, 0);
        /* 65535*65537*641*6700417 = 2^64 - 1 = SIZE_MAX elements (the count
         * fits; its bytes do not). Ci' = 6700417: bound 2*6700417*es */
        p = tiny();
        p.input_batch_ = p.output_batch_ = 65535;
        p.input_h_ = 65537;
        p.input_w_ = 641;
        p.input_channel_ = 6700417;
        p.buffer_size_ = 53603336; /* 8*6700417 */
        expect_invalid(p, es, CG_ERR_OVERFLOW, 0);
        /* 2^16 four times = 2^64 elements: the count itself overflows */
        p.input_batch_ = p.output_batch_ = p.input_h_ = p.input_w_ = p.input_channel_ = 65536;
        expect_invalid(p, es, CG_ERR_OVERFLOW, 0);
    }
}

/* ---- dy: output_h_/output_w_ huge against the tensors ------------------------ */

Test(limits, dy_byte_count)
{
    for (size_t es = 2; es <= 4; es += 2) {
        /* input 1x1, output 2 x (2^30-1) x (2^30+1) x 1, then 2 x 2^30 x 2^30 */
        expect_2pow61_boundary(DY_PLANE, es);

        /* output INT_MAX x 2^30, batch 1: (2^31-1)*2^30 = 2^61 - 2^30 elements,
         * with stride, dilation and pads INT_MAX (coordinates up to ~2^62) */
        ConvParameter p = tiny();
        p.output_h_ = INT_MAX;
        p.output_w_ = 1 << 30;
        p.stride_h_ = p.stride_w_ = INT_MAX;
        p.dilation_h_ = p.dilation_w_ = INT_MAX;
        p.pad_u_ = p.pad_l_ = p.pad_d_ = p.pad_r_ = INT_MAX;
        p.kernel_h_ = p.kernel_w_ = 2; /* bound 2*4*es; dw 4 elements: max(32, k*16) */
        p.buffer_size_ = 32;
        expect_valid(p, es, (int)(8 * es), 128, 128, 512);
        /* INT_MAX x (2^30+1) = 2^61 + 2^30 - 1 elements */
        p.output_w_ = (1 << 30) + 1;
        expect_invalid(p, es, CG_ERR_OVERFLOW, 0);

        /* Cout in the product: 2^30 x 2 x (2^30-1) = 2^61 - 2^31 elements; dw
         * 2^30 - 1 elements: workspace max(32, k*4*(2^30-1) = k*4294967292) */
        p = tiny();
        p.output_h_ = 1 << 30;
        p.output_w_ = 2;
        p.output_channel_ = (1 << 30) - 1;
        expect_valid(p, es, (int)(2 * es), 4294967292u, 8589934584u, 137438953344u);
        p.output_channel_ = 1 << 30; /* 2^61 */
        expect_invalid(p, es, CG_ERR_OVERFLOW, 0);
    }
}

/* ---- dw: 32 float partials must be addressable -------------------------------- */

Test(limits, dw_partials_count)
{
    /* Cout = 2^28+1, Ci' = 2^28-1: dw = 2^56 - 1 elements, the most there can
     * be (32*4*dw = 2^63 - 128 <= PTRDIFF_MAX). Bound 8*(2^28-1) = 2147483640
     * (fp32) / 1073741820 (fp16); workspace max(2147483640*4, k*4*(2^56-1)):
     * 288230376151711740, 576460752303423480, 9223372036854775680 = 2^63 - 128 */
    ConvParameter p = tiny();
    p.output_channel_ = 268435457;
    p.input_channel_ = 268435455;
    p.buffer_size_ = 2147483640;
    expect_valid(p, 4, 2147483640, 288230376151711740u, 576460752303423480u, 9223372036854775680u);
    expect_valid(p, 2, 1073741820, 288230376151711740u, 576460752303423480u, 9223372036854775680u);
    /* Ci' = 2^28: dw = 2^56 + 2^28 (fp16 bound 2^30 is fine; fp32's overflows) */
    p.input_channel_ = 268435456;
    p.buffer_size_ = 1 << 30;
    expect_invalid(p, 2, CG_ERR_OVERFLOW, 0);
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
    /* Cout = 2^29, Kh*Ci' = 2^13*2^14: dw = 2^56 exactly (bound 2^30 (fp32)).
     * The check is the same for `_p` and for masks of fewer cores, although
     * they need no 32 partials: a limit of the library (2^58 bytes), not of
     * a machine */
    p = tiny();
    p.output_channel_ = 1 << 29;
    p.kernel_h_ = 1 << 13;
    p.input_channel_ = 1 << 14;
    p.buffer_size_ = 1 << 30;
    expect_invalid(p, 4, CG_ERR_OVERFLOW, 0);
    expect_invalid(p, 2, CG_ERR_OVERFLOW, 0);
    /* one output channel less: 2^56 - 2^27 elements */
    p.output_channel_ = (1 << 29) - 1;
    expect_valid(p, 4, 1 << 30, 288230375614840832u, 576460751229681664u, 9223372019674906624u);
}

/* ---- real runs: coordinates past INT_MAX, outputs far larger than inputs ------- */

typedef struct run_shape {
    const char *name;
    cgt_shape s;
} run_shape;

/* One shape a row (clang-format would put one field a line). */
/* clang-format off */
#define M INT_MAX
static const run_shape HUGE_COORDS[] = {
    /* oh = 1 reads iy = INT_MAX + kh: outside; only oh = ow = 0 contributes */
    {"stride INT_MAX",
     {.n = 2, .h = 3, .w = 4, .cin = 3, .cout = 4, .kh = 2, .kw = 3,
      .sh = M, .sw = M, .oh = 2, .ow = 2}},
    /* oh = 0 reads iy = kh - INT_MAX (padding), oh = 1 reads iy = kh */
    {"stride and pad INT_MAX",
     {.n = 2, .h = 3, .w = 4, .cin = 3, .cout = 4, .kh = 2, .kw = 3,
      .sh = M, .sw = M, .pu = M, .pl = M, .oh = 2, .ow = 2}},
    /* kh = 1 reads iy = oh + 1, kh = 0 reads iy = oh - INT_MAX + 1 (padding) */
    {"dilation INT_MAX, pad INT_MAX-1",
     {.n = 1, .h = 4, .w = 4, .cin = 2, .cout = 3, .kh = 2, .kw = 2,
      .dh = M, .dw = M, .pu = M - 1, .pl = M - 1, .oh = 3, .ow = 3}},
    /* iy = (oh + kh - 1) * INT_MAX, up to 3*INT_MAX: only oh + kh == 1 is inside */
    {"stride, dilation and pad INT_MAX",
     {.n = 2, .h = 2, .w = 3, .cin = 4, .cout = 2, .g = 2, .kh = 3, .kw = 3,
      .sh = M, .sw = M, .dh = M, .dw = M, .pu = M, .pl = M, .pd = M, .pr = M,
      .oh = 3, .ow = 3}},
    /* depthwise (dilation 1): oh = 1 reads iy = kh + 1 */
    {"depthwise, stride INT_MAX, pad INT_MAX-1",
     {.n = 2, .h = 4, .w = 4, .cin = 5, .cout = 5, .g = 5, .kh = 3, .kw = 3,
      .sh = M, .sw = M, .pu = M - 1, .pl = M - 1, .oh = 2, .ow = 2}},
    /* asymmetric: huge vertically only, with groups */
    {"stride_h INT_MAX, dilation_w INT_MAX",
     {.n = 1, .h = 3, .w = 5, .cin = 6, .cout = 4, .g = 2, .kh = 2, .kw = 2,
      .sh = M, .dw = M, .pl = M - 2, .oh = 2, .ow = 4}},
};
#undef M

static const run_shape BIG_OUTPUT[] = {
    /* 1x1 path: most of the output reads nothing (fp32 reads x in place) */
    {"1x1, input 2x2, output 64x64",
     {.n = 2, .h = 2, .w = 2, .cin = 3, .cout = 5, .kh = 1, .kw = 1, .oh = 64, .ow = 64}},
    {"1x1, input 1x3, output 1x65536",
     {.n = 1, .h = 1, .w = 3, .cin = 2, .cout = 3, .kh = 1, .kw = 1, .oh = 1, .ow = 65536}},
    {"1x1, input 9x9, output 2x2",
     {.n = 1, .h = 9, .w = 9, .cin = 3, .cout = 2, .kh = 1, .kw = 1, .oh = 2, .ow = 2}},
    /* general path */
    {"3x3 pad 1, input 1x1, output 300x300",
     {.n = 1, .h = 1, .w = 1, .cin = 2, .cout = 3, .kh = 3, .kw = 3,
      .pu = 1, .pd = 1, .pl = 1, .pr = 1, .oh = 300, .ow = 300}},
    /* depthwise path */
    {"depthwise 3x3, input 2x2, output 200x100",
     {.n = 1, .h = 2, .w = 2, .cin = 4, .cout = 4, .g = 4, .kh = 3, .kw = 3,
      .pu = 1, .pl = 1, .oh = 200, .ow = 100}},
};
/* clang-format on */

static void run_all(const run_shape *rows, int n, uint64_t salt)
{
    const cgt_mode modes[] = {CGT_S_HOST, CGT_P_HOST, CGT_S_SPMD};
    for (int i = 0; i < n; i++)
        for (int m = 0; m < 3; m++)
            for (int dt = 0; dt < 2; dt++) {
                cgt_case c;
                memset(&c, 0, sizeof c);
                c.p = cgt_param(&rows[i].s);
                c.dtype = dt ? CGT_FP16 : CGT_FP32;
                c.mode = modes[m];
                c.api = (i + m) % 2 ? CGT_API_VOID : CGT_API_STATUS;
                c.core_mask = m == 2 ? 0x5 : 0x3;
                c.with_bias = 1;
                c.prefill = 1;
                c.calls = 1;
                c.seed = cgt_mix64(cgt_base_seed() ^ salt ^ (uint64_t)(i * 16 + m * 2 + dt));
                cgt_result r = cgt_run_case(&c);
                char desc[1024];
                cgt_case_str(&c, desc, sizeof desc);
                cr_expect(r.ok, "%s: %s%s", rows[i].name, desc, r.msg);
            }
}

Test(limits, coordinates_past_int_max, .timeout = TEST_TIMEOUT)
{
    run_all(HUGE_COORDS, (int)(sizeof HUGE_COORDS / sizeof HUGE_COORDS[0]), 0x11);
}

Test(limits, output_far_larger_than_input, .timeout = TEST_TIMEOUT)
{
    run_all(BIG_OUTPUT, (int)(sizeof BIG_OUTPUT / sizeof BIG_OUTPUT[0]), 0x22);
}

/* ---- a moderately large problem, run for real --------------------------------- */

/* 1x1, batch 1, 2048 x 2049 = 2^22 + 2^11 rows (not a multiple of the cores
 * or of any tile), then the general path at 2^22 rows (stride 2). A quarter
 * of that under TSan, where the harness's own work on 2^22 rows takes ~20 s
 * a run. */
#if defined(__SANITIZE_THREAD__)
enum { SIDE = 1024 };
#else
enum { SIDE = 2048 };
#endif
Test(limits, moderately_large_1x1, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    const cgt_shape big_1x1 = {.n = 1, .h = SIDE, .w = SIDE + 1, .cin = 3, .cout = 2,
                               .kh = 1, .kw = 1, .oh = SIDE, .ow = SIDE + 1};
    const cgt_shape big_general = {.n = 1, .h = 2 * SIDE, .w = 2 * SIDE, .cin = 1, .cout = 2,
                                   .kh = 1, .kw = 1, .sh = 2, .sw = 2, .oh = SIDE, .ow = SIDE};
    /* clang-format on */
    const struct {
        const cgt_shape *s;
        cgt_dtype dt;
        cgt_mode mode;
    } runs[] = {
        {&big_1x1, CGT_FP32, CGT_S_HOST},
        {&big_1x1, CGT_FP32, CGT_P_HOST},
        {&big_1x1, CGT_FP16, CGT_S_HOST},
        {&big_general, CGT_FP32, CGT_S_HOST},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cgt_case c;
        memset(&c, 0, sizeof c);
        c.p = cgt_param(runs[i].s);
        c.dtype = runs[i].dt;
        c.mode = runs[i].mode;
        c.core_mask = 0x3;
        c.with_bias = 1;
        c.calls = 1;
        c.seed = cgt_mix64(cgt_base_seed() ^ 0x33 ^ i);
        cgt_result r = cgt_run_case(&c);
        char desc[1024];
        cgt_case_str(&c, desc, sizeof desc);
        cr_expect(r.ok, "%s%s", desc, r.msg);
    }
}
