/* SPDX-License-Identifier: MIT */
/* The same bits on every core_mask: the operator's dw (`_p`, `_s` in host
 * and SPMD mode, fp32 and fp16) and the four cg_conv2d_* results (both
 * layouts) on seeded random shapes of every path, each compared bit for bit
 * with the one-core result. The suite runs again under CONVGRAD_ISA=avx2 and
 * ref, so every kernel set is held to it. CGT_REPRO_SHAPES=<n> changes the
 * number of shapes a family (CGT_SEED the base seed). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TEST_TIMEOUT 600.0
/* One line a mismatch, on stderr (the counts are the assertions). */
#define report(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))

/* The masks every result is compared across: 1, 2, 3 cores, cores not
 * starting at 0, the first and last core, 16 and 32 emulated cores. */
static const int MASKS[] = {0x1, 0x3, 0x7, 0xF0, (int)0x80000001u, 0xFFFF, (int)0xFFFFFFFFu};
enum { NMASKS = sizeof MASKS / sizeof MASKS[0] };
/* SPMD runs on all but the 32-core mask: a launch of 32 cores a call is
 * slow under the sanitizers, and host mode covers it. */
static const int SPMD_MASKS[] = {0x3, 0x7, 0xF0, (int)0x80000001u, 0xFFFF};
enum { NSPMD = sizeof SPMD_MASKS / sizeof SPMD_MASKS[0] };

static int shapes_per_family(int fallback)
{
    const char *v = getenv("CGT_REPRO_SHAPES");
    return v && atoi(v) > 0 ? atoi(v) : fallback;
}

/* ---- shapes ------------------------------------------------------------- */

typedef enum {
    F_GENERAL,   /* 3x3-ish, group 1 */
    F_WIDE,      /* rows of dw long enough that cores share its columns */
    F_1X1,       /* 1x1, group 1 */
    F_STEM,      /* one to four input channels, large kernels, stride 2 */
    F_DEPTHWISE, /* depthwise; now and then a multiplier (32 groups or more) or dilation 2 */
    F_GROUPED,   /* a few channels a group */
    F_DILATED,   /* any group, dilation > 1 */
    F_LONG,      /* many rows of the sum: the longest sums, cut the most */
    F_COUNT
} family;

static const char *const FAMILY_NAMES[F_COUNT] = {"general",   "wide",    "1x1",     "stem",
                                                  "depthwise", "grouped", "dilated", "long"};

static int pick(cgt_rng *r, const int *v, int n)
{
    return cgt_rng_pick(r, v, n);
}

static void draw_shape(cgt_rng *r, family f, cgt_shape *s)
{
    static const int chans[] = {1, 3, 4, 7, 8, 15, 16, 17, 24, 32, 33, 40};
    static const int few[] = {1, 2, 3, 4, 5, 8};
    memset(s, 0, sizeof *s);
    s->n = cgt_rng_int(r, 1, 3);
    s->h = cgt_rng_int(r, 3, 12);
    s->w = cgt_rng_int(r, 3, 12);
    s->g = 1;
    switch (f) {
    case F_GENERAL:
        s->cin = pick(r, chans, 12);
        s->cout = pick(r, chans, 12);
        cgt_draw_kernel_geom(r, s, 3, 2, 1, 1);
        break;
    case F_WIDE:
        s->cin = cgt_rng_int(r, 28, 72);
        s->cout = cgt_rng_int(r, 5, 40);
        s->kh = s->kw = 3;
        s->pu = s->pd = s->pl = s->pr = 1;
        s->sh = s->sw = cgt_rng_int(r, 1, 2);
        break;
    case F_1X1:
        s->cin = cgt_rng_int(r, 1, 80);
        s->cout = cgt_rng_int(r, 1, 80);
        s->kh = s->kw = 1;
        break;
    case F_STEM:
        s->cin = cgt_rng_int(r, 1, 4);
        s->cout = pick(r, chans, 12);
        s->kh = s->kw = cgt_rng_int(r, 3, 7);
        s->pu = s->pd = s->pl = s->pr = s->kh / 2;
        s->sh = s->sw = 2;
        s->h = cgt_rng_int(r, 8, 24);
        s->w = cgt_rng_int(r, 8, 24);
        break;
    case F_DEPTHWISE: {
        static const int mults[] = {2, 3, 4, 8};
        s->cin = s->cout = s->g = pick(r, chans, 12);
        if (cgt_rng_chance(r, 20)) { /* the depthwise kernels take it with 32 groups or more */
            s->cin = s->g = cgt_rng_int(r, 32, 40);
            s->cout = s->cin * pick(r, mults, 4);
        }
        cgt_draw_kernel_geom(r, s, 5, 2, 1, 2);
        if (cgt_rng_chance(r, 20))
            s->dh = 2;
        break;
    }
    case F_GROUPED: {
        static const int gs[] = {2, 3, 4, 8, 16};
        s->g = pick(r, gs, 5);
        s->cin = s->g * pick(r, few, 6);
        s->cout = s->g * pick(r, few, 6);
        if (cgt_rng_chance(r, 40))
            s->cout = s->cin;
        cgt_draw_kernel_geom(r, s, 3, 2, 1, 1);
        break;
    }
    case F_DILATED:
        s->g = cgt_rng_chance(r, 30) ? 2 : 1;
        s->cin = s->g * pick(r, few, 6);
        s->cout = s->g * pick(r, few, 6);
        cgt_draw_kernel_geom(r, s, 3, 2, 3, 2);
        if (s->dh == 1 && s->dw == 1)
            s->dh = 2;
        break;
    case F_LONG:
        s->n = cgt_rng_int(r, 2, 8);
        s->h = cgt_rng_int(r, 24, 40);
        s->w = cgt_rng_int(r, 24, 40);
        s->cin = pick(r, few, 6);
        s->cout = pick(r, few, 6);
        if (cgt_rng_chance(r, 40))
            s->cin = s->cout = s->g = pick(r, chans, 12);
        s->kh = s->kw = 3;
        s->pu = s->pd = s->pl = s->pr = 1;
        break;
    default:
        break;
    }
    s->bs = 2 * s->kh * s->kw * (s->cin / s->g) * 4 + cgt_rng_int(r, 0, 4096);
}

/* ---- the operator ------------------------------------------------------- */

typedef struct op_run {
    const ConvParameter *p;
    size_t dt; /* 4: fp32, 2: fp16 */
    const void *dy, *x, *bias;
    void *out;
    void *ws;
} op_run;

static void call_s(const op_run *o, int mask)
{
    ConvParameter q = *o->p;
    q.workspace_ = o->ws;
    if (o->dt == 4)
        fp_conv_grad_filter_s((float *)o->dy, (float *)o->x, o->out, (float *)o->bias, &q, mask);
    else
        hp_conv_grad_filter_s((float16 *)o->dy, (float16 *)o->x, o->out, (float16 *)o->bias, &q,
                              mask);
}

typedef struct spmd_arg {
    const op_run *o;
    int mask;
    int failed; /* a core saw a status other than CG_OK */
} spmd_arg;

static void spmd_entry(void *arg)
{
    spmd_arg *a = arg;
    call_s(a->o, a->mask);
    if (cg_last_status() != CG_OK)
        __atomic_store_n(&a->failed, 1, __ATOMIC_RELAXED);
}

/* out = out0, then the call (`how`: 0 `_p`, 1 `_s` host, 2 `_s` SPMD). */
static int run_operator(const op_run *o, const void *out0, size_t out_bytes, int how, int mask)
{
    memcpy(o->out, out0, out_bytes);
    ConvParameter q = *o->p;
    q.workspace_ = o->ws;
    if (how == 0) {
        if (o->dt == 4)
            fp_conv_grad_filter_p((float *)o->dy, (float *)o->x, o->out, (float *)o->bias, &q);
        else
            hp_conv_grad_filter_p((float16 *)o->dy, (float16 *)o->x, o->out, (float16 *)o->bias,
                                  &q);
        return cg_last_status() == CG_OK;
    }
    if (how == 1) {
        call_s(o, mask);
        return cg_last_status() == CG_OK;
    }
    spmd_arg a = {o, mask, 0};
    return core_mask_launch(mask, spmd_entry, &a) == 0 && !a.failed;
}

static const char *how_name(int how)
{
    return how == 0 ? "_p" : how == 1 ? "_s host" : "_s SPMD";
}

/* Every way and mask gives the bits of `_s` on core 0 alone; returns the
 * number of mismatches (each reported). */
static int operator_case(const cgt_shape *s, size_t dt, uint64_t seed, const char *family_name)
{
    ConvParameter p = cgt_param(s);
    p.buffer_size_ = s->bs;
    cgt_rng r = cgt_rng_seeded(seed);
    const size_t dy_n = (size_t)p.output_batch_ * p.output_h_ * p.output_w_ * p.output_channel_;
    const size_t x_n = (size_t)p.input_batch_ * p.input_h_ * p.input_w_ * p.input_channel_;
    const size_t dw_n =
        (size_t)p.output_channel_ * p.kernel_h_ * p.kernel_w_ * (p.input_channel_ / p.group_);
    const cgt_dtype dtype = dt == 4 ? CGT_FP32 : CGT_FP16;
    void *dy = malloc(dy_n * dt), *x = malloc(x_n * dt), *bias = malloc(p.output_channel_ * dt);
    void *out0 = malloc(dw_n * dt), *want = malloc(dw_n * dt), *got = malloc(dw_n * dt);
    cgt_fill(&r, dtype, dy, dy_n, 1.0);
    cgt_fill(&r, dtype, x, x_n, 1.0);
    cgt_fill(&r, dtype, bias, (size_t)p.output_channel_, 1.0);
    cgt_fill(&r, dtype, out0, dw_n, 1.0);
    const int with_bias = cgt_rng_chance(&r, 50);
    size_t ws_bytes = cg_grad_filter_workspace_bytes(&p, (int)0xFFFFFFFFu, dt);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    op_run o = {&p, dt, dy, x, with_bias ? bias : NULL, want, ws};
    int bad = 0;
    char desc[256];
    cgt_param_str(&p, desc, sizeof desc);
    if (!run_operator(&o, out0, dw_n * dt, 1, 0x1)) {
        report("%s %s: _s on 0x1 failed: %s", family_name, desc, cg_last_error_detail());
        bad++;
    }
    o.out = got;
    for (int how = 0; how < 3 && !bad; how++) {
        const int n = how == 0 ? 1 : how == 1 ? NMASKS : NSPMD;
        for (int i = 0; i < n; i++) {
            const int mask = how == 2 ? SPMD_MASKS[i] : MASKS[i];
            if (!run_operator(&o, out0, dw_n * dt, how, mask)) {
                report("%s %s: %s on 0x%08x failed", family_name, desc, how_name(how),
                       (unsigned)mask);
                bad++;
                continue;
            }
            if (memcmp(got, want, dw_n * dt) != 0) {
                size_t e = 0;
                while (memcmp((char *)got + e * dt, (char *)want + e * dt, dt) == 0)
                    e++;
                report("%s %s fp%d bias=%d seed=0x%llx: %s on 0x%08x differs from 0x1 "
                       "first at dw[%zu]",
                       family_name, desc, dt == 4 ? 32 : 16, with_bias, (unsigned long long)seed,
                       how_name(how), (unsigned)mask, e);
                bad++;
            }
        }
    }
    free(dy);
    free(x);
    free(bias);
    free(out0);
    free(want);
    free(got);
    free(ws);
    return bad;
}

Test(reproducible, operator_every_mask, .timeout = TEST_TIMEOUT)
{
    const int per_family = shapes_per_family(25);
    int bad = 0, cases = 0;
    for (int f = 0; f < F_COUNT; f++)
        for (int i = 0; i < per_family; i++) {
            const uint64_t seed = cgt_mix64(cgt_base_seed() ^ (uint64_t)(f * 1000 + i));
            cgt_rng r = cgt_rng_seeded(seed);
            cgt_shape s;
            draw_shape(&r, (family)f, &s);
            for (size_t dt = 2; dt <= 4; dt += 2, cases++)
                bad += operator_case(&s, dt, seed, FAMILY_NAMES[f]) != 0;
        }
    cr_expect_eq(bad, 0, "%d of %d (shape, dtype) cases differ between masks", bad, cases);
}

/* ---- cg_conv2d_* -------------------------------------------------------- */

static cg_conv2d conv_of(const cgt_shape *s, cg_layout layout)
{
    cg_conv2d c = {layout,
                   s->n,
                   s->h,
                   s->w,
                   s->cin,
                   s->cout,
                   s->kh,
                   s->kw,
                   s->g,
                   s->sh ? s->sh : 1,
                   s->sw ? s->sw : 1,
                   s->dh ? s->dh : 1,
                   s->dw ? s->dw : 1,
                   s->pu,
                   s->pd,
                   s->pl,
                   s->pr};
    return c;
}

/* Runs op on mask into out (n floats); returns 0 on an error status. */
static int run_conv(int op, const cg_conv2d *c, const float *x, const float *w, const float *b,
                    const float *dy, float *out, size_t n, int mask)
{
    memset(out, 0xA5, n * sizeof(float)); /* every float must be written */
    cg_status s = CG_OK;
    switch (op) {
    case 0:
        s = cg_conv2d_forward(c, x, w, b, out, mask);
        break;
    case 1:
        s = cg_conv2d_backward_data(c, dy, w, out, mask);
        break;
    case 2:
        s = cg_conv2d_backward_weights(c, x, dy, out, mask);
        break;
    default:
        s = cg_conv2d_backward_bias(c, dy, out, mask);
        break;
    }
    return s == CG_OK;
}

static const char *const OP_NAMES[] = {"forward", "backward_data", "backward_weights",
                                       "backward_bias"};

static int conv_case(const cgt_shape *s, cg_layout layout, uint64_t seed, const char *family_name)
{
    const cg_conv2d c = conv_of(s, layout);
    if (cg_conv2d_check(&c) != CG_OK)
        return 0;
    const int oh = cg_conv2d_output_h(&c), ow = cg_conv2d_output_w(&c);
    const size_t x_n = (size_t)c.batch * c.in_h * c.in_w * c.in_c;
    const size_t w_n = (size_t)c.out_c * c.kernel_h * c.kernel_w * (c.in_c / c.groups);
    const size_t y_n = (size_t)c.batch * oh * ow * c.out_c;
    cgt_rng r = cgt_rng_seeded(seed);
    float *x = malloc(x_n * 4), *w = malloc(w_n * 4), *b = malloc((size_t)c.out_c * 4);
    float *dy = malloc(y_n * 4);
    cgt_fill_f32(&r, x, x_n, 1.0);
    cgt_fill_f32(&r, w, w_n, 1.0);
    cgt_fill_f32(&r, b, (size_t)c.out_c, 1.0);
    cgt_fill_f32(&r, dy, y_n, 1.0);
    const size_t sizes[4] = {y_n, x_n, w_n, (size_t)c.out_c};
    int bad = 0;
    for (int op = 0; op < 4; op++) {
        float *want = malloc(sizes[op] * 4), *got = malloc(sizes[op] * 4);
        if (!run_conv(op, &c, x, w, b, dy, want, sizes[op], 0x1)) {
            report("%s %s on 0x1 failed: %s", family_name, OP_NAMES[op], cg_last_error_detail());
            bad++;
        }
        for (int i = 1; i < NMASKS && !bad; i++) {
            if (!run_conv(op, &c, x, w, b, dy, got, sizes[op], MASKS[i])) {
                report("%s %s on 0x%08x failed", family_name, OP_NAMES[op], (unsigned)MASKS[i]);
                bad++;
            } else if (memcmp(got, want, sizes[op] * 4) != 0) {
                size_t e = 0;
                while (memcmp(got + e, want + e, 4) == 0)
                    e++;
                report("%s %s %s n%d %dx%d c%d->%d k%dx%d g%d s%dx%d d%dx%d "
                       "seed=0x%llx: 0x%08x differs from 0x1 first at [%zu]",
                       family_name, layout == CG_LAYOUT_NCHW ? "NCHW" : "NHWC", OP_NAMES[op],
                       c.batch, c.in_h, c.in_w, c.in_c, c.out_c, c.kernel_h, c.kernel_w, c.groups,
                       c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, (unsigned long long)seed,
                       (unsigned)MASKS[i], e);
                bad++;
            }
        }
        free(want);
        free(got);
    }
    free(x);
    free(w);
    free(b);
    free(dy);
    return bad;
}

Test(reproducible, conv2d_every_mask, .timeout = TEST_TIMEOUT)
{
    const int per_family = shapes_per_family(16);
    int bad = 0, cases = 0;
    for (int f = 0; f < F_COUNT; f++)
        for (int i = 0; i < per_family; i++) {
            const uint64_t seed = cgt_mix64(cgt_base_seed() ^ (uint64_t)(f * 1000 + 500 + i));
            cgt_rng r = cgt_rng_seeded(seed);
            cgt_shape s;
            draw_shape(&r, (family)f, &s);
            for (int layout = 0; layout < 2; layout++, cases++)
                bad += conv_case(&s, layout ? CG_LAYOUT_NCHW : CG_LAYOUT_NHWC, seed,
                                 FAMILY_NAMES[f]) != 0;
        }
    cr_expect_eq(bad, 0, "%d of %d (shape, layout) cases differ between masks", bad, cases);
}

/* ---- cg_set_reproducible(0): one piece of each sum a core ---------------- */

/* fp_conv_grad_filter_s of a zeroed dw on mask, host mode. */
static void grad_on(const ConvParameter *p, float *dy, float *x, float *dw, size_t dw_n, void *ws,
                    int mask)
{
    ConvParameter q = *p;
    q.workspace_ = ws;
    memset(dw, 0, dw_n * sizeof(float));
    fp_conv_grad_filter_s(dy, x, dw, NULL, &q, mask);
    cr_assert_eq(cg_last_status(), CG_OK, "%s", cg_last_error_detail());
}

/* On sums that are exact (dyadic data) the any-order cut must give the
 * reproducible bits on every mask: every term is added once, whatever the
 * pieces. On random data it must change them somewhere (the mode takes
 * effect, so the benchmark's any-order rows measure another cut), and
 * turning the guarantee back on restores it. */
Test(reproducible, any_order_mode, .timeout = TEST_TIMEOUT)
{
    static const int masks[] = {0x1, 0x3, 0x7, 0xFFFF};
    int changed = 0;
    for (int i = 0; i < 8; i++) {
        const uint64_t seed = cgt_mix64(cgt_base_seed() ^ (uint64_t)(9000 + i));
        cgt_rng r = cgt_rng_seeded(seed);
        cgt_shape s;
        draw_shape(&r, F_LONG, &s);
        ConvParameter p = cgt_param(&s);
        p.buffer_size_ = s.bs;
        char desc[256];
        cgt_param_str(&p, desc, sizeof desc);
        const size_t dy_n = (size_t)p.output_batch_ * p.output_h_ * p.output_w_ * p.output_channel_;
        const size_t x_n = (size_t)p.input_batch_ * p.input_h_ * p.input_w_ * p.input_channel_;
        const size_t dw_n =
            (size_t)p.output_channel_ * p.kernel_h_ * p.kernel_w_ * (p.input_channel_ / p.group_);
        float *dy = malloc(dy_n * 4), *x = malloc(x_n * 4);
        float *want = malloc(dw_n * 4), *got = malloc(dw_n * 4);
        void *ws = malloc(cg_grad_filter_workspace_bytes(&p, (int)0xFFFFFFFFu, 4));
        for (int exact = 1; exact >= 0; exact--) {
            if (exact) {
                cgt_fill_dyadic_f32(&r, dy, dy_n, 1);
                cgt_fill_dyadic_f32(&r, x, x_n, 1);
            } else {
                cgt_fill_f32(&r, dy, dy_n, 1.0);
                cgt_fill_f32(&r, x, x_n, 1.0);
            }
            grad_on(&p, dy, x, want, dw_n, ws, 0x1);
            cr_assert_eq(cg_set_reproducible(0), 1, "the guarantee is on by default");
            for (int m = 0; m < 4; m++) {
                grad_on(&p, dy, x, got, dw_n, ws, masks[m]);
                const int same = memcmp(got, want, dw_n * 4) == 0;
                if (exact)
                    cr_expect(same, "%s: exact sums differ any-order on 0x%x", desc, masks[m]);
                changed += !same;
            }
            cr_assert_eq(cg_set_reproducible(1), 0);
            grad_on(&p, dy, x, got, dw_n, ws, 0x3);
            cr_expect(memcmp(got, want, dw_n * 4) == 0, "%s: 0x3 differs once back on", desc);
        }
        free(dy);
        free(x);
        free(want);
        free(got);
        free(ws);
    }
    cr_expect(changed > 0, "cg_set_reproducible(0) changed no sum of 8 long shapes");
}
