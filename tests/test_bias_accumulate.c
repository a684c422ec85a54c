/* SPDX-License-Identifier: MIT */
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

/* One shape a line (clang-format would put one field a line). */
/* clang-format off */
static const cgt_shape SHAPES[] = {
    /* depthwise, 5 channels (a tail for 4/8/16-wide kernels) */
    {.n = 2, .h = 5, .w = 6, .cin = 5, .cout = 5, .g = 5, .kh = 3, .kw = 3,
     .pu = 1, .pd = 1, .pl = 1, .pr = 1},
    /* depthwise, 17 channels, batch 1 */
    {.n = 1, .h = 4, .w = 7, .cin = 17, .cout = 17, .g = 17, .kh = 2, .kw = 3, .pl = 1},
    /* 1x1 */
    {.n = 3, .h = 4, .w = 3, .cin = 9, .cout = 7, .kh = 1, .kw = 1},
    /* general, group 1 */
    {.n = 2, .h = 5, .w = 4, .cin = 3, .cout = 13, .kh = 3, .kw = 2, .pu = 1, .pr = 1},
    /* general, groups + dilation */
    {.n = 2, .h = 6, .w = 6, .cin = 4, .cout = 6, .g = 2, .kh = 2, .kw = 2,
     .dh = 2, .dw = 2, .pu = 1},
};
/* clang-format on */
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* 1, 2, 4, 8 and 32 cores, with and without holes. */
static const int MASKS[] = {0x1, 0x3, 0xf, 0xff, -1, INT_MIN, 0x5, 0x01010101, (int)0x80808080u};
static const int CORES[] = {1, 2, 4, 8, 32, 1, 2, 4, 4};
#define N_MASKS ((int)(sizeof MASKS / sizeof MASKS[0]))

/* Whether MASKS[mi] is run in mode: _p host ignores the mask (the first
 * stands for all), _p SPMD (a copy of everything per core) only on masks of
 * at most p_spmd_max_cores cores. */
static int mask_in_sweep(int mode, int mi, int p_spmd_max_cores)
{
    if (mode == CGT_P_HOST && mi > 0)
        return 0;
    return !(mode == CGT_P_SPMD && CORES[mi] > p_spmd_max_cores);
}

/* Case n's seed in a test; each test adds its own offset. */
static uint64_t case_seed(uint64_t offset, int n)
{
    return cgt_mix64(cgt_base_seed() + offset + (uint64_t)n);
}

/* The cases a test ran and how many failed. */
typedef struct tally {
    const char *test;
    int cases, failures;
} tally;

/* Runs c and counts it; a failure is counted too and, for the first 6,
 * reported in full. */
static void run_counted(tally *t, const cgt_case *c)
{
    const cgt_result r = cgt_run_case(c);
    ++t->cases;
    if (!r.ok && ++t->failures <= 6) {
        char desc[1024];
        cgt_case_str(c, desc, sizeof desc);
        cr_expect(r.ok, "%s: %s%s", t->test, desc, r.msg);
    }
}

static void assert_no_case_failed(const tally *t)
{
    cr_assert(t->failures == 0, "%s: %d of %d cases failed", t->test, t->failures, t->cases);
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

/* The dtypes a sweep runs. */
enum { SWEEP_FP32 = 1, SWEEP_FP16 = 2, SWEEP_BOTH = 3 };

/* Completes case n of a sweep (rep: which of its repeats). */
typedef void (*complete_case)(cgt_case *c, int n, int rep);

/* Every shape x dtype (of `dtypes`) x mode x the first n_masks masks (those
 * mask_in_sweep lets through), `repeats` times each: a base_case seeded
 * from seed_offset, completed by `complete`, run. No case may fail. */
static void run_sweep(const char *test, int dtypes, int n_masks, int p_spmd_max_cores, int repeats,
                      uint64_t seed_offset, complete_case complete)
{
    tally t = {test, 0, 0};
    for (int si = 0; si < N_SHAPES; ++si)
        for (int dt = 0; dt < 2; ++dt) {
            if (!(dtypes & (1 << dt)))
                continue;
            for (int mode = 0; mode < 4; ++mode)
                for (int mi = 0; mi < n_masks; ++mi) {
                    if (!mask_in_sweep(mode, mi, p_spmd_max_cores))
                        continue;
                    for (int rep = 0; rep < repeats; ++rep) {
                        const int n = t.cases;
                        cgt_case c = base_case(&SHAPES[si], dt, (cgt_mode)mode, MASKS[mi],
                                               case_seed(seed_offset, n));
                        complete(&c, n, rep);
                        run_counted(&t, &c);
                    }
                }
        }
    assert_no_case_failed(&t);
}

/* dy == 0, so dw == 0 and out_dw must become out0 + calls*bias[row] EXACTLY
 * (dyadic values: every sum is representable in fp16 and fp32). A bias
 * added per core, per chunk or per partial, or to the wrong row, shows. */
static void zero_dy_dyadic_exact(cgt_case *c, int n, int rep)
{
    c->zero_dy = 1;
    c->dyadic = 1;
    c->exact = 1;
    c->range = 4;
    c->calls = 1 + rep;
    c->p.buffer_size_ =
        (n % 2) ? (int)cgt_min_buffer(&c->p, c->dtype == CGT_FP16 ? 2 : 4) : 0x10000;
}

Test(bias, exactly_once_per_call_zero_dy, .timeout = TEST_TIMEOUT)
{
    /* both dtypes; every mask, _p SPMD on 32 cores too; 1 call, then 2 */
    run_sweep("exactly_once_per_call_zero_dy", SWEEP_BOTH, N_MASKS, 32, 2, 0, zero_dy_dyadic_exact);
}

/* fp32 with dyadic data (multiples of 1/32, |v| <= 2): every product is a
 * multiple of 2^-10 and every partial sum stays far below 2^14, so the fp32
 * result is EXACT whatever the summation order or split: out0 + calls*(dw +
 * bias) bit for bit. */
static void dyadic_exact(cgt_case *c, int n, int rep)
{
    (void)rep;
    c->dyadic = 1;
    c->exact = 1;
    c->range = 2;
    c->calls = 1 + n % 2;
    c->p.buffer_size_ = (n % 3 == 0) ? (int)cgt_min_buffer(&c->p, 4) : 0x8000;
}

Test(bias, fp32_exact_with_gradient, .timeout = TEST_TIMEOUT)
{
    /* every mask, _p SPMD on at most 8 cores */
    run_sweep("fp32_exact_with_gradient", SWEEP_FP32, N_MASKS, 8, 1, 5000, dyadic_exact);
}

/* fp16 with a gradient: within tolerance, bias once per call (a duplicated
 * bias, |b| up to 1, far exceeds the ~1e-3 tolerance). */
static void one_or_two_calls(cgt_case *c, int n, int rep)
{
    (void)rep;
    c->range = 1;
    c->calls = 1 + n % 2;
}

Test(bias, fp16_with_gradient, .timeout = TEST_TIMEOUT)
{
    /* every mask, _p SPMD on at most 8 cores */
    run_sweep("fp16_with_gradient", SWEEP_FP16, N_MASKS, 8, 1, 9000, one_or_two_calls);
}

/* No bias: with dy == 0 out_dw stays exactly as it was. */
Test(bias, null_bias_adds_nothing, .timeout = TEST_TIMEOUT)
{
    tally t = {"null_bias_adds_nothing", 0, 0};
    for (int si = 0; si < N_SHAPES; ++si)
        for (int dt = 0; dt < 2; ++dt)
            for (int mode = 0; mode < 4; ++mode) {
                const int n = t.cases;
                cgt_case c = base_case(&SHAPES[si], dt, (cgt_mode)mode, MASKS[n % N_MASKS],
                                       case_seed(13000, n));
                if (c.mode == CGT_P_SPMD && cgt_popcount(c.core_mask) > 8)
                    c.core_mask = 0xf0;
                c.with_bias = 0;
                c.zero_dy = 1;
                c.exact = 1;
                c.calls = 2;
                run_counted(&t, &c);
            }
    assert_no_case_failed(&t);
}

/* ---- accumulation -------------------------------------------------------- */

/* fp32 dy and x of a shape, dyadic (every sum exact), from a seeded
 * generator that the test may draw more from; desc names the shape. */
typedef struct dyadic_inputs {
    ConvParameter p;
    size_t ndy, nx, ndw;
    float *dy, *x;
    cgt_rng rng;
    char desc[400];
} dyadic_inputs;

static void dyadic_inputs_init(dyadic_inputs *d, const cgt_shape *s, uint64_t seed, int range)
{
    d->p = cgt_param(s);
    d->ndy = ref_dy_elems(&d->p);
    d->nx = ref_x_elems(&d->p);
    d->ndw = ref_dw_elems(&d->p);
    d->rng = cgt_rng_seeded(seed);
    d->dy = malloc(d->ndy * 4);
    d->x = malloc(d->nx * 4);
    cgt_fill_dyadic_f32(&d->rng, d->dy, d->ndy, range);
    cgt_fill_dyadic_f32(&d->rng, d->x, d->nx, range);
    cgt_param_str(&d->p, d->desc, sizeof d->desc);
}

static void dyadic_inputs_free(dyadic_inputs *d)
{
    free(d->dy);
    free(d->x);
}

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
            /* 0: _s host on 2 cores; 1: _s SPMD; 2: _p; 3: _s host on 32 cores */
            const int mask = mode == CGT_S_SPMD ? 0x0f0f : mode == 3 ? -1 : 0x3;
            dyadic_inputs d;
            dyadic_inputs_init(&d, &SHAPES[si],
                               cgt_base_seed() + 77 * (uint64_t)si + (uint64_t)mode, 2);
            ConvParameter *p = &d.p;
            const float *dy = d.dy, *x = d.x;
            const size_t ndw = d.ndw;
            const char *desc = d.desc;
            float *out = calloc(ndw, 4), *r1 = malloc(ndw * 4);
            const size_t wsb =
                mode == CGT_P_HOST ? (size_t)p->buffer_size_ * 4 : cgt_ws_bytes_s(p, mask);
            /* (mode 3 is _s host on mask -1) */
            void *ws = malloc(wsb);
            p->workspace_ = ws;
            cg_status st = CG_OK;
            if (mode == CGT_S_SPMD) {
                twice_ctx k = {.dy = dy, .x = x, .out = out, .p = p, .mask = mask};
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
                st = cg_fp_conv_grad_filter_s(dy, x, out, NULL, p, mask);
                cr_assert_eq(st, CG_OK, "single host call: %d; %s", st, desc);
                for (size_t i = 0; i < ndw; ++i)
                    cr_assert_eq(r1[i], 2.0f * out[i],
                                 "two back-to-back SPMD calls gave %g at [%zu], one call %g; %s",
                                 r1[i], i, out[i], desc);
            } else {
                for (int call = 0; call < 2; ++call) {
                    if (mode == CGT_P_HOST)
                        st = cg_fp_conv_grad_filter_p(dy, x, out, NULL, p);
                    else
                        st = cg_fp_conv_grad_filter_s(dy, x, out, NULL, p, mask);
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
            dyadic_inputs_free(&d);
            free(out);
            free(r1);
            free(ws);
        }
    }
}

/* Pre-filled out_dw (random values) on every path, dtype and mode: the
 * result is out0 + dw (+ bias), never dw alone. */
static void bias_on_every_other_case(cgt_case *c, int n, int rep)
{
    (void)rep;
    c->with_bias = n % 2;
    c->range = 2;
    c->calls = 1 + (n % 3 == 0);
}

Test(accumulate, prefilled_out_dw, .timeout = TEST_TIMEOUT)
{
    /* both dtypes; the masks of 1, 2, 4, 8 and 32 cores, _p SPMD on all */
    run_sweep("prefilled_out_dw", SWEEP_BOTH, 5, 32, 1, 20000, bias_on_every_other_case);
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
    /* One shape a line (clang-format would put one field a line). */
    /* clang-format off */
    static const cgt_shape shapes[] = {
        {.n = 2, .h = 6, .w = 6, .cin = 16, .cout = 16, .kh = 3, .kw = 3,
         .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 6, .w = 5, .cin = 64, .cout = 64, .g = 64, .kh = 3, .kw = 3,
         .pu = 1, .pl = 1},
        {.n = 2, .h = 5, .w = 5, .cin = 64, .cout = 48, .kh = 1, .kw = 1},
    };
    /* clang-format on */
    static const int masks[] = {0xff, -1, 0x0f0f0f0f};
    const int calls = 6;
    for (int si = 0; si < 3; ++si) {
        for (int mi = 0; mi < 3; ++mi) {
            dyadic_inputs d;
            dyadic_inputs_init(&d, &shapes[si], cgt_base_seed() + 31 * (uint64_t)si + (uint64_t)mi,
                               1);
            ConvParameter *p = &d.p;
            const size_t ndy = d.ndy, nx = d.nx, ndw = d.ndw;
            float *out = malloc(ndw * 4);
            cgt_fill_dyadic_f32(&d.rng, out, ndw, 1);
            double *dyd = malloc(ndy * 8), *xd = malloc(nx * 8), *dw = malloc(ndw * 8);
            ref_float_to_double(d.dy, dyd, ndy);
            ref_float_to_double(d.x, xd, nx);
            ref_grad_filter(p, dyd, xd, dw, NULL);
            float *expect = malloc((size_t)calls * ndw * 4);
            for (int c = 0; c < calls; ++c)
                for (size_t i = 0; i < ndw; ++i)
                    expect[(size_t)c * ndw + i] = (float)((double)out[i] + (c + 1) * dw[i]);
            const size_t wsb = cgt_ws_bytes_s(p, masks[mi]);
            void *ws = malloc(wsb);
            p->workspace_ = ws;
            complete_ctx k;
            memset(&k, 0, sizeof k);
            k.dy = d.dy;
            k.x = d.x;
            k.out = out;
            k.p = p;
            k.expect = expect;
            k.ndw = ndw;
            k.mask = masks[mi];
            k.calls = calls;
            const char *desc = d.desc;
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
            dyadic_inputs_free(&d);
            free(out);
            free(dyd);
            free(xd);
            free(dw);
            free(expect);
            free(ws);
        }
    }
}
