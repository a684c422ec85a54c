/* out_dw is accumulated into, and bias[c] is added exactly once per call to
 * every element of row c: on every path, dtype, entry point and mode, on 1,
 * 2, 4, 8 and 32 cores. Dyadic data makes most of these checks exact, so a
 * bias added twice (or per core, or per chunk) cannot hide in a tolerance. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TEST_TIMEOUT 300.0

static const cgt_shape SHAPES[] = {
    /* depthwise, 5 channels (a tail for 4/8/16-wide kernels) */
    {.n = 2,
     .h = 5,
     .w = 6,
     .cin = 5,
     .cout = 5,
     .g = 5,
     .kh = 3,
     .kw = 3,
     .pu = 1,
     .pd = 1,
     .pl = 1,
     .pr = 1},
    /* depthwise, 17 channels, batch 1 */
    {.n = 1, .h = 4, .w = 7, .cin = 17, .cout = 17, .g = 17, .kh = 2, .kw = 3, .pl = 1},
    /* 1x1 */
    {.n = 3, .h = 4, .w = 3, .cin = 9, .cout = 7, .kh = 1, .kw = 1},
    /* general, group 1 */
    {.n = 2, .h = 5, .w = 4, .cin = 3, .cout = 13, .kh = 3, .kw = 2, .pu = 1, .pr = 1},
    /* general, groups + dilation */
    {.n = 2,
     .h = 6,
     .w = 6,
     .cin = 4,
     .cout = 6,
     .g = 2,
     .kh = 2,
     .kw = 2,
     .dh = 2,
     .dw = 2,
     .pu = 1},
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* 1, 2, 4, 8 and 32 cores, with and without holes. */
static const int MASKS[] = {0x1, 0x3, 0xf, 0xff, -1, INT_MIN, 0x5, 0x01010101, (int)0x80808080u};
static const int CORES[] = {1, 2, 4, 8, 32, 1, 2, 4, 4};
#define N_MASKS ((int)(sizeof MASKS / sizeof MASKS[0]))

static void report(const char *test, const cgt_case *c, const cgt_result *r, int *failures)
{
    if (r->ok)
        return;
    if (++*failures <= 6) {
        char desc[1024];
        cgt_case_str(c, desc, sizeof desc);
        cr_expect(r->ok, "%s: %s%s", test, desc, r->msg);
    }
}

static cgt_case base_case(const cgt_shape *s, int dt, cgt_mode mode, int mask, uint64_t seed)
{
    cgt_case c;
    memset(&c, 0, sizeof c);
    c.p = cgt_param(s);
    c.dtype = (cgt_dtype)dt;
    c.mode = mode;
    c.api = (cgt_api)(seed & 1);
    c.core_mask = mask;
    c.seed = seed;
    c.prefill = 1;
    c.with_bias = 1;
    return c;
}

/* dy == 0, so dw == 0 and out_dw must become out0 + calls*bias[row] EXACTLY
 * (dyadic values: every sum is representable in fp16 and fp32). A bias
 * added per core, per chunk or per partial, or to the wrong row, shows. */
Test(bias, exactly_once_per_call_zero_dy, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_SHAPES; ++si)
        for (int dt = 0; dt < 2; ++dt)
            for (int mode = 0; mode < 4; ++mode)
                for (int mi = 0; mi < N_MASKS; ++mi) {
                    if (mode == CGT_P_HOST && mi > 0)
                        continue;
                    if (mode == CGT_P_SPMD && CORES[mi] > 8 && mi != 4)
                        continue;
                    for (int calls = 1; calls <= 2; ++calls) {
                        cgt_case c = base_case(&SHAPES[si], dt, (cgt_mode)mode, MASKS[mi],
                                               cgt_mix64(cgt_base_seed() + (uint64_t)n));
                        c.zero_dy = 1;
                        c.dyadic = 1;
                        c.exact = 1;
                        c.range = 4;
                        c.calls = calls;
                        c.p.buffer_size_ =
                            (n % 2) ? (int)cgt_min_buffer(&c.p, dt ? 2 : 4) : 0x10000;
                        cgt_result r = cgt_run_case(&c);
                        report("exactly_once_per_call_zero_dy", &c, &r, &failures);
                        ++n;
                    }
                }
    cr_assert(failures == 0, "exactly_once_per_call_zero_dy: %d of %d cases failed", failures, n);
}

/* fp32 with dyadic data (multiples of 1/32, |v| <= 2): every product is a
 * multiple of 2^-10 and every partial sum stays far below 2^14, so the fp32
 * result is EXACT whatever the summation order or split: out0 + calls*(dw +
 * bias) bit for bit. */
Test(bias, fp32_exact_with_gradient, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_SHAPES; ++si)
        for (int mode = 0; mode < 4; ++mode)
            for (int mi = 0; mi < N_MASKS; ++mi) {
                if (mode == CGT_P_HOST && mi > 0)
                    continue;
                if (mode == CGT_P_SPMD && CORES[mi] > 8)
                    continue;
                cgt_case c = base_case(&SHAPES[si], 0, (cgt_mode)mode, MASKS[mi],
                                       cgt_mix64(cgt_base_seed() + 5000 + (uint64_t)n));
                c.dyadic = 1;
                c.exact = 1;
                c.range = 2;
                c.calls = 1 + n % 2;
                c.p.buffer_size_ = (n % 3 == 0) ? (int)cgt_min_buffer(&c.p, 4) : 0x8000;
                cgt_result r = cgt_run_case(&c);
                report("fp32_exact_with_gradient", &c, &r, &failures);
                ++n;
            }
    cr_assert(failures == 0, "fp32_exact_with_gradient: %d of %d cases failed", failures, n);
}

/* fp16 with a gradient: within tolerance, bias once per call. */
Test(bias, fp16_with_gradient, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_SHAPES; ++si)
        for (int mode = 0; mode < 4; ++mode)
            for (int mi = 0; mi < N_MASKS; ++mi) {
                if (mode == CGT_P_HOST && mi > 0)
                    continue;
                if (mode == CGT_P_SPMD && CORES[mi] > 8)
                    continue;
                cgt_case c = base_case(&SHAPES[si], 1, (cgt_mode)mode, MASKS[mi],
                                       cgt_mix64(cgt_base_seed() + 9000 + (uint64_t)n));
                c.range = 1;
                c.calls = 1 + n % 2;
                /* a duplicated bias (|b| up to 1) far exceeds the ~1e-3 tolerance */
                cgt_result r = cgt_run_case(&c);
                report("fp16_with_gradient", &c, &r, &failures);
                ++n;
            }
    cr_assert(failures == 0, "fp16_with_gradient: %d of %d cases failed", failures, n);
}

/* No bias: with dy == 0 out_dw stays exactly as it was. */
Test(bias, null_bias_adds_nothing, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_SHAPES; ++si)
        for (int dt = 0; dt < 2; ++dt)
            for (int mode = 0; mode < 4; ++mode) {
                cgt_case c = base_case(&SHAPES[si], dt, (cgt_mode)mode, MASKS[n % N_MASKS],
                                       cgt_mix64(cgt_base_seed() + 13000 + (uint64_t)n));
                if (c.mode == CGT_P_SPMD && cgt_popcount(c.core_mask) > 8)
                    c.core_mask = 0xf0;
                c.with_bias = 0;
                c.zero_dy = 1;
                c.exact = 1;
                c.calls = 2;
                cgt_result r = cgt_run_case(&c);
                report("null_bias_adds_nothing", &c, &r, &failures);
                ++n;
            }
    cr_assert(failures == 0, "null_bias_adds_nothing: %d of %d cases failed", failures, n);
}

/* ---- accumulation -------------------------------------------------------- */

typedef struct twice_ctx {
    const float *dy, *x;
    float *out;
    ConvParameter *p;
    int mask;
    cg_status st[32];
} twice_ctx;

static void twice_entry(void *arg)
{
    twice_ctx *k = arg;
    const int id = get_core_id();
    cg_status s = cg_fp_conv_grad_filter_s(k->dy, k->x, k->out, NULL, k->p, k->mask);
    if (s == CG_OK)
        s = cg_fp_conv_grad_filter_s(k->dy, k->x, k->out, NULL, k->p, k->mask);
    if (id >= 0 && id < 32)
        k->st[id] = s;
}

/* Reference-free: from zero, one call gives r1, a second gives r2 == 2*r1
 * exactly (dyadic fp32 data: all sums exact). Every path and mode. */
Test(accumulate, second_call_doubles_gradient, .timeout = TEST_TIMEOUT)
{
    for (int si = 0; si < N_SHAPES; ++si) {
        for (int mode = 0; mode < 4; ++mode) {
            ConvParameter p = cgt_param(&SHAPES[si]);
            const size_t ndy = ref_dy_elems(&p), nx = ref_x_elems(&p), ndw = ref_dw_elems(&p);
            /* 0: _s host on 2 cores; 1: _s SPMD; 2: _p; 3: _s host on 32 cores */
            const int mask = mode == CGT_S_SPMD ? 0x0f0f : mode == 3 ? -1 : 0x3;
            cgt_rng r;
            cgt_rng_seed(&r, cgt_base_seed() + 77 * (uint64_t)si + (uint64_t)mode);
            float *dy = malloc(ndy * 4), *x = malloc(nx * 4), *out = calloc(ndw, 4),
                  *r1 = malloc(ndw * 4);
            cgt_fill_dyadic_f32(&r, dy, ndy, 2);
            cgt_fill_dyadic_f32(&r, x, nx, 2);
            const size_t wsb =
                mode == CGT_P_HOST ? (size_t)p.buffer_size_ * 4 : cgt_ws_bytes_s(&p, mask);
            /* (mode 3 is _s host on mask -1) */
            void *ws = malloc(wsb);
            p.workspace_ = ws;
            char desc[400];
            cgt_param_str(&p, desc, sizeof desc);
            cg_status st = CG_OK;
            if (mode == CGT_S_SPMD) {
                twice_ctx k = {.dy = dy, .x = x, .out = out, .p = &p, .mask = mask};
                for (int i = 0; i < 32; ++i)
                    k.st[i] = (cg_status)1;
                /* two calls back to back in one launch, then compare with a
                 * fresh single call below */
                cr_assert_eq(core_mask_launch(mask, twice_entry, &k), 0, "launch");
                for (int i = 0; i < 32; ++i)
                    if ((mask >> i) & 1)
                        cr_assert_eq(k.st[i], CG_OK, "core %d: status %d; %s", i, k.st[i], desc);
                memcpy(r1, out, ndw * 4); /* r1 := 2*dw here */
                memset(out, 0, ndw * 4);
                st = cg_fp_conv_grad_filter_s(dy, x, out, NULL, &p, mask);
                cr_assert_eq(st, CG_OK, "single host call: %d; %s", st, desc);
                for (size_t i = 0; i < ndw; ++i)
                    cr_assert_eq(r1[i], 2.0f * out[i],
                                 "two back-to-back SPMD calls gave %g at [%zu], one call %g; %s",
                                 r1[i], i, out[i], desc);
            } else {
                for (int call = 0; call < 2; ++call) {
                    if (mode == CGT_P_HOST)
                        st = cg_fp_conv_grad_filter_p(dy, x, out, NULL, &p);
                    else
                        st = cg_fp_conv_grad_filter_s(dy, x, out, NULL, &p, mask);
                    cr_assert_eq(st, CG_OK, "call %d: status %d; %s", call, st, desc);
                    if (call == 0)
                        memcpy(r1, out, ndw * 4);
                }
                int nonzero = 0;
                for (size_t i = 0; i < ndw; ++i) {
                    nonzero |= r1[i] != 0.0f;
                    cr_assert_eq(out[i], 2.0f * r1[i],
                                 "[%zu]: after two calls %g, after one %g; %s", i, out[i], r1[i],
                                 desc);
                }
                cr_assert(nonzero, "the gradient is all zero: test data broken; %s", desc);
            }
            free(dy);
            free(x);
            free(out);
            free(r1);
            free(ws);
        }
    }
}

/* Pre-filled out_dw (random values) on every path, dtype and mode: the
 * result is out0 + dw (+ bias), never dw alone. */
Test(accumulate, prefilled_out_dw, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_SHAPES; ++si)
        for (int dt = 0; dt < 2; ++dt)
            for (int mode = 0; mode < 4; ++mode)
                for (int mi = 0; mi < 5; ++mi) {
                    if (mode == CGT_P_HOST && mi > 0)
                        continue;
                    cgt_case c = base_case(&SHAPES[si], dt, (cgt_mode)mode, MASKS[mi],
                                           cgt_mix64(cgt_base_seed() + 20000 + (uint64_t)n));
                    c.with_bias = n % 2;
                    c.range = 2;
                    c.calls = 1 + (n % 3 == 0);
                    cgt_result r = cgt_run_case(&c);
                    report("prefilled_out_dw", &c, &r, &failures);
                    ++n;
                }
    cr_assert(failures == 0, "prefilled_out_dw: %d of %d cases failed", failures, n);
}

/* SPMD: the collective call returns on EVERY core only once out_dw is
 * complete. Each core, right after each of several back-to-back calls,
 * reads all of out_dw and compares it with out0 + k*dw (exact: dyadic fp32
 * data), before a user barrier. A core that returns after finishing only its
 * own slice of the reduction sees other slices still missing. */
typedef struct complete_ctx {
    const float *dy, *x;
    float *out;
    ConvParameter *p;
    const float *expect; /* [calls][ndw] */
    size_t ndw;
    int mask, calls;
    int bad[32]; /* elements seen wrong, per core */
    int first_call[32];
    cg_status st[32];
} complete_ctx;

static void complete_entry(void *arg)
{
    complete_ctx *k = arg;
    const int id = get_core_id();
    const int n = GetCoreNum(k->mask);
    if (id < 0 || id > 31)
        return;
    k->first_call[id] = -1;
    for (int call = 0; call < k->calls; ++call) {
        cg_status s = cg_fp_conv_grad_filter_s(k->dy, k->x, k->out, NULL, k->p, k->mask);
        if (s != CG_OK)
            k->st[id] = s;
        const float *e = k->expect + (size_t)call * k->ndw;
        int bad = 0;
        for (size_t i = 0; i < k->ndw; ++i)
            bad += k->out[i] != e[i];
        if (bad && k->first_call[id] < 0)
            k->first_call[id] = call;
        k->bad[id] += bad;
        sys_bar(1, n); /* nobody starts the next call while others still read */
    }
}

Test(accumulate, spmd_out_dw_complete_on_every_core, .timeout = TEST_TIMEOUT)
{
    static const cgt_shape shapes[] = {
        {.n = 2,
         .h = 6,
         .w = 6,
         .cin = 16,
         .cout = 16,
         .kh = 3,
         .kw = 3,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1},
        {.n = 2,
         .h = 6,
         .w = 5,
         .cin = 64,
         .cout = 64,
         .g = 64,
         .kh = 3,
         .kw = 3,
         .pu = 1,
         .pl = 1},
        {.n = 2, .h = 5, .w = 5, .cin = 64, .cout = 48, .kh = 1, .kw = 1},
    };
    static const int masks[] = {0xff, -1, 0x0f0f0f0f};
    const int calls = 6;
    for (int si = 0; si < 3; ++si) {
        for (int mi = 0; mi < 3; ++mi) {
            ConvParameter p = cgt_param(&shapes[si]);
            const size_t ndy = ref_dy_elems(&p), nx = ref_x_elems(&p), ndw = ref_dw_elems(&p);
            cgt_rng r;
            cgt_rng_seed(&r, cgt_base_seed() + 31 * (uint64_t)si + (uint64_t)mi);
            float *dy = malloc(ndy * 4), *x = malloc(nx * 4), *out = malloc(ndw * 4);
            cgt_fill_dyadic_f32(&r, dy, ndy, 1);
            cgt_fill_dyadic_f32(&r, x, nx, 1);
            cgt_fill_dyadic_f32(&r, out, ndw, 1);
            double *dyd = malloc(ndy * 8), *xd = malloc(nx * 8), *dw = malloc(ndw * 8);
            ref_float_to_double(dy, dyd, ndy);
            ref_float_to_double(x, xd, nx);
            ref_grad_filter(&p, dyd, xd, dw, NULL);
            float *expect = malloc((size_t)calls * ndw * 4);
            for (int c = 0; c < calls; ++c)
                for (size_t i = 0; i < ndw; ++i)
                    expect[(size_t)c * ndw + i] = (float)((double)out[i] + (c + 1) * dw[i]);
            const size_t wsb = cgt_ws_bytes_s(&p, masks[mi]);
            void *ws = malloc(wsb);
            p.workspace_ = ws;
            complete_ctx k;
            memset(&k, 0, sizeof k);
            k.dy = dy;
            k.x = x;
            k.out = out;
            k.p = &p;
            k.expect = expect;
            k.ndw = ndw;
            k.mask = masks[mi];
            k.calls = calls;
            char desc[400];
            cgt_param_str(&p, desc, sizeof desc);
            cr_assert_eq(core_mask_launch(masks[mi], complete_entry, &k), 0, "launch");
            for (int id = 0; id < 32; ++id) {
                if (!(((unsigned)masks[mi] >> id) & 1u))
                    continue;
                cr_expect_eq(k.st[id], CG_OK, "core %d: status %d; %s", id, k.st[id], desc);
                cr_expect_eq(
                    k.bad[id], 0,
                    "mask 0x%08x: core %d saw %d wrong out_dw elements right after its "
                    "_s call returned (first at call %d): out_dw not complete on return; %s",
                    (unsigned)masks[mi], id, k.bad[id], k.first_call[id], desc);
            }
            free(dy);
            free(x);
            free(out);
            free(dyd);
            free(xd);
            free(dw);
            free(expect);
            free(ws);
        }
    }
}
