/* SPDX-License-Identifier: MIT */
/* Differential tests: hundreds of seeded random configurations, every path,
 * both dtypes, every entry point and mode, random core masks, against the
 * double-precision reference (reference.c). Every failure prints the case's
 * seed and full description; CGT_SEED=<n> changes the base seed, and
 * CGT_REPLAY=<family>:<case seed> reruns one case (see Test(differential, replay)). */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TEST_TIMEOUT 300.0
#define MAX_FAILURES_SHOWN 6

/* Channel counts below/equal/above/multiples of the vector widths 4, 8, 16
 * and primes. */
static const int CHANS[] = {1,  2,  3,  4,  5,  7,  8,  9,  12, 13, 15,
                            16, 17, 24, 31, 32, 33, 48, 61, 64, 67};
static const int NCHANS = (int)(sizeof CHANS / sizeof CHANS[0]);
static const int SMALL_CHANS[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
static const int NSMALL = (int)(sizeof SMALL_CHANS / sizeof SMALL_CHANS[0]);

/* Shape families a case can be drawn from. */
typedef enum {
    F_DEPTHWISE,   /* Cout == G == Cin, dilation 1 */
    F_1X1,         /* Kh == Kw == 1, no pads, stride 1, dilation 1, group 1 */
    F_GENERAL,     /* group 1, any kernel/stride/dilation/pads */
    F_GROUPED,     /* 1 < G, Ci' and Co' small */
    F_DEPTH_MULT,  /* G == Cin, Cout = m * Cin (32 groups or more: the depthwise kernels) */
    F_DW_DILATED,  /* depthwise but dilation > 1: the contract's general path */
    F_NEAR_1X1,    /* 1x1 kernel with one deviation (stride, pad, group): general */
    F_STRIDE_GT_K, /* stride larger than the kernel */
    F_ODD_OUTPUT,  /* any path, output_h_/output_w_ not the forward formula */
    F_HUGE_GEOM,   /* strides/dilations/pads near INT_MAX: int64 coordinates */
    F_COUNT
} family;

static const char *FAMILY_NAMES[F_COUNT] = {"depthwise",  "1x1",        "general",  "grouped",
                                            "depth_mult", "dw_dilated", "near_1x1", "stride_gt_k",
                                            "odd_output", "huge_geom"};

/* Output size: usually the forward formula, sometimes another value >= 1. */
static void pick_output(cgt_rng *r, cgt_shape *s, int odd_percent)
{
    const ConvParameter fwd = cgt_param(s);
    s->oh = fwd.output_h_;
    s->ow = fwd.output_w_;
    if (cgt_rng_chance(r, odd_percent))
        s->oh = cgt_rng_int(r, 1, fwd.output_h_ + 3);
    if (cgt_rng_chance(r, odd_percent))
        s->ow = cgt_rng_int(r, 1, fwd.output_w_ + 3);
}

static void spatial(cgt_rng *r, cgt_shape *s, int maxhw)
{
    s->n = cgt_rng_chance(r, 30) ? 1 : cgt_rng_int(r, 1, 4);
    s->h = cgt_rng_int(r, 1, maxhw);
    s->w = cgt_rng_int(r, 1, maxhw);
    if (cgt_rng_chance(r, 50) && s->h == s->w)
        s->w = s->h + cgt_rng_int(r, 1, 3); /* H != W most of the time */
}

static void draw_shape(cgt_rng *r, family f, cgt_shape *s)
{
    memset(s, 0, sizeof *s);
    switch (f) {
    case F_DEPTHWISE: {
        const int c = cgt_rng_pick(r, CHANS, NCHANS);
        s->cin = s->cout = s->g = c;
        spatial(r, s, 10);
        cgt_draw_kernel_geom(r, s, 5, 3, 1, 3);
        pick_output(r, s, 15);
        break;
    }
    case F_1X1:
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        s->g = 1;
        spatial(r, s, 9);
        s->kh = s->kw = 1;
        pick_output(r, s, 15);
        break;
    case F_GENERAL:
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        s->g = 1;
        spatial(r, s, 9);
        cgt_draw_kernel_geom(r, s, 5, 3, 3, 3);
        pick_output(r, s, 15);
        break;
    case F_GROUPED: {
        static const int gs[] = {2, 3, 4, 5, 8};
        s->g = cgt_rng_pick(r, gs, 5);
        s->cin = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        s->cout = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        spatial(r, s, 8);
        cgt_draw_kernel_geom(r, s, 4, 3, 3, 2); /* dilation with groups */
        pick_output(r, s, 15);
        break;
    }
    case F_DEPTH_MULT: {
        const int many = cgt_rng_int(r, 0, 2) == 0; /* enough groups for the depthwise kernels */
        const int c = many ? cgt_rng_int(r, 32, 40) : cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        s->g = s->cin = c;
        s->cout = c * (many && cgt_rng_int(r, 0, 3) == 0 ? 8 : cgt_rng_int(r, 2, 4));
        spatial(r, s, 8);
        cgt_draw_kernel_geom(r, s, 4, 2, 2, 2);
        pick_output(r, s, 15);
        break;
    }
    case F_DW_DILATED: {
        const int c = cgt_rng_pick(r, CHANS, NCHANS);
        s->cin = s->cout = s->g = c;
        spatial(r, s, 9);
        cgt_draw_kernel_geom(r, s, 3, 2, 3, 2);
        if (s->dh == 1 && s->dw == 1)
            s->dw = 2;
        pick_output(r, s, 15);
        break;
    }
    case F_NEAR_1X1:
        s->g = 1;
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 8);
        s->kh = s->kw = 1;
        switch (cgt_rng_int(r, 0, 4)) {
        case 0:
            s->sh = 2;
            break;
        case 1:
            s->sw = 3;
            break;
        case 2:
            s->pu = 1;
            s->pl = cgt_rng_int(r, 0, 1);
            break;
        case 3:
            s->pd = 1;
            s->pr = 2;
            break; /* only the unused pads differ */
        default: {
            static const int gs[] = {2, 4};
            s->g = cgt_rng_pick(r, gs, 2);
            s->cin = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
            s->cout = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        }
        }
        if (cgt_rng_chance(r, 20))
            s->dh = 2; /* harmless for K=1, but not the 1x1 path */
        pick_output(r, s, 15);
        break;
    case F_STRIDE_GT_K:
        s->g = cgt_rng_chance(r, 30) ? 2 : 1;
        s->cin = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        s->cout = s->g * cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        if (cgt_rng_chance(r, 30))
            s->cout = s->cin = s->g = cgt_rng_pick(r, CHANS, NCHANS); /* depthwise */
        spatial(r, s, 12);
        cgt_draw_kernel_geom(r, s, 2, 1, 1, 2);
        s->sh = cgt_rng_int(r, s->kh + 1, 5);
        s->sw = cgt_rng_int(r, s->kw + 1, 5);
        pick_output(r, s, 15);
        break;
    case F_ODD_OUTPUT: {
        family sub = (family)cgt_rng_int(r, 0, F_STRIDE_GT_K);
        draw_shape(r, sub, s);
        pick_output(r, s, 100);
        if (cgt_rng_chance(r, 50))
            s->oh = s->oh + cgt_rng_int(r, 1, 3); /* taps wholly out of range */
        break;
    }
    case F_HUGE_GEOM: {
        const int dwise = cgt_rng_chance(r, 40);
        s->g = 1;
        s->cin = cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        s->cout = cgt_rng_pick(r, SMALL_CHANS, NSMALL);
        if (dwise)
            s->cin = s->cout = s->g = cgt_rng_pick(r, CHANS, NCHANS);
        s->n = cgt_rng_int(r, 1, 2);
        s->h = cgt_rng_int(r, 1, 5);
        s->w = cgt_rng_int(r, 1, 5);
        s->kh = cgt_rng_int(r, 1, 3);
        s->kw = cgt_rng_int(r, 1, 3);
        static const int big[] = {1,       2,           1 << 20,     1 << 29,
                                  1 << 30, INT_MAX / 2, INT_MAX - 1, INT_MAX};
        s->sh = cgt_rng_pick(r, big, 8);
        s->sw = cgt_rng_pick(r, big, 8);
        if (!dwise) {
            s->dh = cgt_rng_pick(r, big, 8);
            s->dw = cgt_rng_pick(r, big, 8);
        }
        static const int bigpad[] = {0, 1, 3, 1 << 30, INT_MAX - 1, INT_MAX};
        s->pu = cgt_rng_pick(r, bigpad, 6);
        s->pl = cgt_rng_pick(r, bigpad, 6);
        s->pd = cgt_rng_pick(r, bigpad, 6);
        s->pr = cgt_rng_pick(r, bigpad, 6);
        /* the forward formula means nothing here: outputs given */
        s->oh = cgt_rng_int(r, 1, 4);
        s->ow = cgt_rng_int(r, 1, 4);
        break;
    }
    default:
        break;
    }
}

/* Shrinks a shape until the formula's MAC count fits the budget. */
static ConvParameter shape_within(cgt_rng *r, family f, double budget)
{
    cgt_shape s;
    ConvParameter p;
    for (int tries = 0;; ++tries) {
        draw_shape(r, f, &s);
        p = cgt_param(&s);
        if (ref_macs(&p) <= budget && ref_dy_elems(&p) * 4 <= (8u << 20) &&
            ref_x_elems(&p) * 4 <= (8u << 20))
            return p;
        if (tries > 200) {
            /* give up drawing: shrink the spatial dims */
            while (ref_macs(&p) > budget &&
                   (p.output_h_ > 1 || p.output_w_ > 1 || p.input_batch_ > 1)) {
                if (p.input_batch_ > 1)
                    p.input_batch_ = p.output_batch_ = p.input_batch_ / 2;
                else if (p.output_h_ > 1)
                    p.output_h_ /= 2;
                else
                    p.output_w_ /= 2;
            }
            return p;
        }
    }
}

static int random_mask(cgt_rng *r)
{
    switch (cgt_rng_int(r, 0, 9)) {
    case 0:
        return 1 << cgt_rng_int(r, 0, 30); /* one core */
    case 1:
        return -1; /* all 32 cores */
    case 2:
        return INT_MIN; /* bit 31 alone */
    case 3:
        return 0xF; /* the card's mask */
    case 4:
        return (int)((1u << cgt_rng_int(r, 1, 8)) - 1u); /* contiguous low cores */
    case 5:
        return (int)(0x80000001u); /* first and last */
    case 6: {                      /* sparse, with holes */
        unsigned m = 0;
        const int k = cgt_rng_int(r, 2, 5);
        for (int i = 0; i < k; ++i)
            m |= 1u << cgt_rng_int(r, 0, 31);
        return (int)m;
    }
    case 7:
        return (int)0x55555555u; /* every other core */
    default: {                   /* dense random */
        unsigned m = (unsigned)cgt_rng_next(r);
        return m ? (int)m : 1;
    }
    }
}

static int random_buffer_size(cgt_rng *r, const ConvParameter *p, cgt_dtype dt, cgt_mode mode)
{
    const long long mn = cgt_min_buffer(p, dt == CGT_FP32 ? 4 : 2);
    long long bs;
    switch (cgt_rng_int(r, 0, 6)) {
    case 0:
    case 1:
        bs = mn;
        break; /* the minimum */
    case 2:
        bs = mn + cgt_rng_int(r, 1, 7);
        break; /* odd sizes just above */
    case 3:
        bs = mn * cgt_rng_int(r, 2, 8) + cgt_rng_int(r, 0, 3);
        break;
    case 4:
        bs = 0x10000;
        break; /* the card's value */
    case 5:
        bs = 2048;
        break;
    default:
        bs = cgt_rng_int(r, (int)mn, mode == CGT_P_SPMD ? 0x10000 : 0x40000);
        break;
    }
    if (bs < mn)
        bs = mn;
    return (int)bs;
}

/* Completes a case around a shape with random dtype, mode, mask, bias,
 * prefill, buffer size and placement. dtype/mode < 0 mean random. */
static cgt_case random_case(cgt_rng *r, ConvParameter p, int dtype, int mode, uint64_t seed)
{
    cgt_case c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.seed = seed;
    c.dtype = dtype >= 0 ? (cgt_dtype)dtype : (cgt_dtype)cgt_rng_int(r, 0, 1);
    c.mode = mode >= 0 ? (cgt_mode)mode : (cgt_mode)cgt_rng_int(r, 0, 3);
    c.api = (cgt_api)cgt_rng_int(r, 0, 1);
    c.core_mask = random_mask(r);
    if (c.mode == CGT_P_SPMD && cgt_popcount(c.core_mask) > 8 && cgt_rng_chance(r, 70))
        c.core_mask &= 0x0f0f; /* keep most per-core copies cheap */
    if (c.core_mask == 0)
        c.core_mask = 0x100;
    c.with_bias = cgt_rng_chance(r, 50);
    c.prefill = cgt_rng_chance(r, 70);
    c.calls = cgt_rng_chance(r, 15) ? 2 : 1;
    c.p.buffer_size_ = random_buffer_size(r, &p, c.dtype, c.mode);
    c.ws_slack = cgt_rng_chance(r, 50) ? 0 : 4 * (size_t)cgt_rng_int(r, 1, 16);
    c.out_slack =
        cgt_rng_chance(r, 50) ? 0 : (size_t)cgt_rng_int(r, 1, 8) * (c.dtype == CGT_FP32 ? 4 : 2);
    c.ws_at_start = cgt_rng_chance(r, 20);
    c.in_at_start = cgt_rng_chance(r, 20);
    c.readonly_inputs = cgt_rng_chance(r, 30);
    return c;
}

/* _p SPMD gives every core its own copy of everything: keep it to the 8 low
 * cores; a mask left empty becomes if_empty. */
static void limit_p_spmd_mask(cgt_case *c, int if_empty)
{
    if (c->mode == CGT_P_SPMD)
        c->core_mask &= 0xff;
    if (c->core_mask == 0)
        c->core_mask = if_empty;
}

/* Coverage statistics, printed per test when CGT_STATS is set. */
static struct {
    int cases, path[3], dtype[2], mode[4], bias, calls2, min_buffer, masks32, masks1;
    double macs, max_macs;
} stats;

static void stats_add(const cgt_case *c)
{
    stats.cases++;
    stats.path[cgt_path_of(&c->p)]++;
    stats.dtype[c->dtype]++;
    stats.mode[c->mode]++;
    stats.bias += c->with_bias;
    stats.calls2 += c->calls > 1;
    stats.min_buffer += c->p.buffer_size_ == cgt_min_buffer(&c->p, c->dtype == CGT_FP32 ? 4 : 2);
    stats.masks32 += c->core_mask == -1;
    stats.masks1 += cgt_popcount(c->core_mask) == 1;
    const double m = ref_macs(&c->p);
    stats.macs += m;
    if (m > stats.max_macs)
        stats.max_macs = m;
}

static void stats_print(const char *test)
{
    if (!getenv("CGT_STATS"))
        return;
    fprintf(stderr,
            "%s: %d cases; paths dw/1x1/gen %d/%d/%d; fp32/fp16 %d/%d; s-host/s-spmd/p-host/p-spmd "
            "%d/%d/%d/%d; bias %d; 2 calls %d; min buffer %d; mask -1 %d; 1-core masks %d; "
            "MACs mean %.0f max %.0f\n",
            test, stats.cases, stats.path[0], stats.path[1], stats.path[2], stats.dtype[0],
            stats.dtype[1], stats.mode[0], stats.mode[1], stats.mode[2], stats.mode[3], stats.bias,
            stats.calls2, stats.min_buffer, stats.masks32, stats.masks1,
            stats.cases ? stats.macs / stats.cases : 0.0, stats.max_macs);
}

/* A test's name and how many of its cases ran and failed. */
typedef struct tally {
    const char *test;
    int cases, failures;
} tally;

/* Runs one case, counted in t; returns 1 if it passed. Reports failures
 * through cr_expect with everything needed to reproduce: the case
 * description and, for cases built by case_from_seed, the CGT_REPLAY
 * environment. */
static int check_case(tally *t, const char *replay, const cgt_case *c)
{
    stats_add(c);
    ++t->cases;
    cgt_result res = cgt_run_case(c);
    if (!res.ok) {
        ++t->failures;
        if (t->failures <= MAX_FAILURES_SHOWN) {
            char desc[1024];
            cgt_case_str(c, desc, sizeof desc);
            cr_expect(res.ok, "%s: case failed%s%s\n  %s%s", t->test, replay ? " -- replay: " : "",
                      replay ? replay : "", desc, res.msg);
        } else {
            cr_expect(res.ok, "%s: one more failing case, seed 0x%llx", t->test,
                      (unsigned long long)c->seed);
        }
    }
    return res.ok;
}

/* The end of a test: its coverage statistics (CGT_STATS), and no case may
 * have failed. */
static void assert_no_case_failed(const tally *t)
{
    stats_print(t->test);
    cr_assert(t->failures == 0, "%s: %d of %d cases failed (base seed 0x%llx)", t->test,
              t->failures, t->cases, (unsigned long long)cgt_base_seed());
}

static void replay_str(char *buf, size_t len, family f, uint64_t seed, double budget, int dtype,
                       int mode)
{
    snprintf(buf, len,
             "CGT_REPLAY=%s:0x%llx CGT_REPLAY_BUDGET=%g CGT_REPLAY_DTYPE=%d CGT_REPLAY_MODE=%d",
             FAMILY_NAMES[f], (unsigned long long)seed, budget, dtype, mode);
}

/* A family's case from its seed alone (so CGT_REPLAY can rebuild it). */
static cgt_case case_from_seed(family f, uint64_t seed, double budget, int dtype, int mode)
{
    cgt_rng r = cgt_rng_seeded(seed);
    ConvParameter p = shape_within(&r, f, budget);
    return random_case(&r, p, dtype, mode, seed);
}

/* Checks the case of family f that seed makes, naming the CGT_REPLAY line
 * that rebuilds it. */
static void check_seeded_case(tally *t, family f, uint64_t seed, double budget, int dtype, int mode)
{
    cgt_case c = case_from_seed(f, seed, budget, dtype, mode);
    char rp[256];
    replay_str(rp, sizeof rp, f, seed, budget, dtype, mode);
    check_case(t, rp, &c);
}

/* $CGT_SCALE (default 1) multiplies the number of random cases. */
static int scaled(int n)
{
    const char *s = getenv("CGT_SCALE");
    const double k = s && *s ? atof(s) : 1.0;
    const int m = (int)(n * (k > 0 ? k : 1.0));
    return m < 1 ? 1 : m;
}

static uint64_t case_seed(const char *test, int i)
{
    return cgt_mix64(cgt_base_seed() ^ cgt_fnv1a(test, strlen(test)) ^
                     (uint64_t)i * 0x9e3779b97f4a7c15ULL);
}

/* Case k of a test around a given shape: the rest of it drawn from the
 * case's seed. */
static cgt_case case_around(const tally *t, int k, ConvParameter p, int dtype, int mode)
{
    const uint64_t seed = case_seed(t->test, k);
    cgt_rng r = cgt_rng_seeded(seed);
    return random_case(&r, p, dtype, mode, seed);
}

/* Runs n cases of family f; dtype and mode cycle so every combination is hit. */
static void run_family(const char *test, family f, int n, double budget)
{
    tally t = {test, 0, 0};
    n = scaled(n);
    for (int i = 0; i < n; ++i) {
        /* small budgets mostly, a few bigger cases */
        const double b = (i % 10 == 9) ? budget * 8 : budget;
        check_seeded_case(&t, f, case_seed(test, i), b, i % 2, (i / 2) % 4);
    }
    assert_no_case_failed(&t);
}

Test(differential, depthwise, .timeout = TEST_TIMEOUT)
{
    run_family("depthwise", F_DEPTHWISE, 80, 6000);
}

Test(differential, one_by_one, .timeout = TEST_TIMEOUT)
{
    run_family("one_by_one", F_1X1, 80, 6000);
}

Test(differential, general, .timeout = TEST_TIMEOUT)
{
    run_family("general", F_GENERAL, 96, 8000);
}

Test(differential, grouped_with_dilation, .timeout = TEST_TIMEOUT)
{
    run_family("grouped_with_dilation", F_GROUPED, 64, 6000);
}

Test(differential, depth_multiplier, .timeout = TEST_TIMEOUT)
{
    run_family("depth_multiplier", F_DEPTH_MULT, 40, 6000);
}

Test(differential, depthwise_dilated_goes_general, .timeout = TEST_TIMEOUT)
{
    run_family("depthwise_dilated_goes_general", F_DW_DILATED, 40, 6000);
}

Test(differential, near_1x1_goes_general, .timeout = TEST_TIMEOUT)
{
    run_family("near_1x1_goes_general", F_NEAR_1X1, 40, 6000);
}

Test(differential, stride_greater_than_kernel, .timeout = TEST_TIMEOUT)
{
    run_family("stride_greater_than_kernel", F_STRIDE_GT_K, 40, 6000);
}

Test(differential, output_size_not_forward_formula, .timeout = TEST_TIMEOUT)
{
    run_family("output_size_not_forward_formula", F_ODD_OUTPUT, 64, 6000);
}

Test(differential, huge_strides_dilations_pads, .timeout = TEST_TIMEOUT)
{
    run_family("huge_strides_dilations_pads", F_HUGE_GEOM, 40, 6000);
}

/* Dyadic data (multiples of 1/32, |v| <= 2): every product and every fp32
 * partial sum is exact whatever the order or split, so fp32 results must be
 * bit-exact, and fp16 results must be the exact sum rounded ONCE to half
 * (nearest even). Catches fp16 accumulation (nnacl's fp16 GEMM lost digits
 * that way), double rounding, truncation, and any element off by a term. */
static void run_family_exact(const char *test, int dtype, int n)
{
    tally t = {test, 0, 0};
    n = scaled(n);
    for (int i = 0; i < n; ++i) {
        cgt_case c = case_from_seed((family)(i % F_COUNT), case_seed(test, i), 5000, dtype, i % 4);
        c.dyadic = 1;
        c.exact = 1;
        c.range = 2;
        check_case(&t, NULL, &c);
    }
    assert_no_case_failed(&t);
}

Test(differential, fp32_bit_exact_on_dyadic_data, .timeout = TEST_TIMEOUT)
{
    run_family_exact("fp32_bit_exact_on_dyadic_data", CGT_FP32, 80);
}

Test(differential, fp16_rounded_once_from_fp32_sums, .timeout = TEST_TIMEOUT)
{
    run_family_exact("fp16_rounded_once_from_fp32_sums", CGT_FP16, 80);
}

/* Crafted geometry where oh*stride + kh*dilation - pad exceeds 32 bits and,
 * wrapped to 32 bits, would land INSIDE the input: only int64 coordinates
 * give the formula's result (a wrapped tap adds terms that must be 0). */
Test(differential, int64_coordinates_crafted, .timeout = TEST_TIMEOUT)
{
    tally t = {"int64_coordinates_crafted", 0, 0};
    /* One shape a line (clang-format would put one field a line). */
    /* clang-format off */
    static const cgt_shape shapes[] = {
        /* kh=2: 2*(2^31-1) wraps to -2; + oh (2, 3) lands on rows 0, 1 */
        {.n = 2, .h = 5, .w = 4, .cin = 3, .cout = 4, .kh = 3, .kw = 2,
         .dh = INT_MAX, .oh = 4, .ow = 3},
        /* oh=4: 4*2^30 wraps to 0 */
        {.n = 1, .h = 5, .w = 5, .cin = 4, .cout = 5, .kh = 1, .kw = 2,
         .sh = 1 << 30, .oh = 6, .ow = 4},
        /* the same on the w axis */
        {.n = 2, .h = 4, .w = 5, .cin = 3, .cout = 2, .kh = 2, .kw = 3,
         .dw = INT_MAX, .oh = 3, .ow = 4},
        /* ow=4: 4*(2^30+1) wraps to 4 */
        {.n = 1, .h = 3, .w = 6, .cin = 5, .cout = 3, .kh = 2, .kw = 1,
         .sw = (1 << 30) + 1, .oh = 2, .ow = 6},
        /* depthwise (dilation 1): huge strides on both axes */
        {.n = 2, .h = 6, .w = 6, .cin = 5, .cout = 5, .g = 5, .kh = 2, .kw = 2,
         .sh = 1 << 30, .sw = (1 << 30) + 1, .oh = 6, .ow = 6},
        /* depthwise with a huge pad: only oh == 1 reaches the input */
        {.n = 1, .h = 4, .w = 4, .cin = 7, .cout = 7, .g = 7, .kh = 3, .kw = 2,
         .sh = INT_MAX, .pu = INT_MAX, .oh = 3, .ow = 3},
        /* groups + dilation 2^31-1 */
        {.n = 2, .h = 5, .w = 4, .cin = 4, .cout = 6, .g = 2, .kh = 3, .kw = 2,
         .dh = INT_MAX, .oh = 4, .ow = 3},
        /* stride 2, dilation 2^31-1: 2*oh - 2 */
        {.n = 1, .h = 6, .w = 3, .cin = 2, .cout = 3, .kh = 3, .kw = 1,
         .sh = 2, .dh = INT_MAX, .oh = 4, .ow = 3},
        /* huge pads that the formula ignores (pad_d_, pad_r_), 1x1-like kernel */
        {.n = 2, .h = 3, .w = 4, .cin = 6, .cout = 5, .kh = 1, .kw = 1,
         .pd = INT_MAX, .pr = INT_MAX, .oh = 3, .ow = 4},
    };
    /* clang-format on */
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int si = 0; si < ns; ++si)
        for (int dt = 0; dt < 2; ++dt)
            for (int mode = 0; mode < 4; ++mode) {
                cgt_case c = case_around(&t, t.cases, cgt_param(&shapes[si]), dt, mode);
                limit_p_spmd_mask(&c, 0x6);
                check_case(&t, NULL, &c);
            }
    assert_no_case_failed(&t);
}

/* Problems smaller than the core count: a single row of the long sum, a
 * single dw element, on 32 cores, bit 31 alone, and masks with holes; most
 * cores get no rows and empty reduction slices. */
Test(differential, tiny_problems_many_cores, .timeout = TEST_TIMEOUT)
{
    tally t = {"tiny_problems_many_cores", 0, 0};
    /* 1 dw element; 1x1 with 3; depthwise with 4; a 3x3 kernel on a 1x1
     * input; one row of the sum with 2304 elements; depthwise 1x1, 2 rows */
    /* clang-format off */
    static const cgt_shape shapes[] = {
        {.n = 1, .h = 1, .w = 1, .cin = 1, .cout = 1, .kh = 1, .kw = 1},
        {.n = 1, .h = 1, .w = 1, .cin = 1, .cout = 3, .kh = 1, .kw = 1},
        {.n = 1, .h = 1, .w = 2, .cin = 2, .cout = 2, .g = 2, .kh = 2, .kw = 1, .pu = 1},
        {.n = 1, .h = 1, .w = 1, .cin = 1, .cout = 1, .kh = 3, .kw = 3,
         .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 1, .h = 3, .w = 3, .cin = 16, .cout = 16, .kh = 3, .kw = 3, .oh = 1, .ow = 1},
        {.n = 2, .h = 1, .w = 1, .cin = 5, .cout = 5, .g = 5, .kh = 1, .kw = 1},
    };
    /* clang-format on */
    static const int masks[] = {-1, INT_MIN, (int)0x80000001u, 0x3, (int)0x40000400u};
    int n = 0;
    for (int si = 0; si < 6; ++si)
        for (int mi = 0; mi < 5; ++mi)
            for (int mode = 0; mode < 4; ++mode) {
                if (mode == CGT_P_HOST && mi > 0)
                    continue;
                const int k = n++;
                cgt_case c = case_around(&t, k, cgt_param(&shapes[si]), n % 2, mode);
                c.core_mask = masks[mi];
                check_case(&t, NULL, &c);
            }
    assert_no_case_failed(&t);
}

/* fp16 storage at its small end: x, bias and out0 are subnormal halves, the
 * smallest normals and +-0, dy small integers; every sum is exact in fp32
 * and the results are tiny (many subnormal), so the half<->float
 * conversions of inputs AND of the output must be exact (no flush to zero,
 * one round-to-nearest-even). */
Test(differential, fp16_subnormals_exact, .timeout = TEST_TIMEOUT)
{
    tally t = {"fp16_subnormals_exact", 0, 0};
    for (int i = 0; i < 60; ++i) {
        const uint64_t seed = case_seed(t.test, i);
        cgt_rng r = cgt_rng_seeded(seed);
        ConvParameter p;
        do /* at most ~100 terms per element: sums stay below 1 */
            p = shape_within(&r, (family)(i % F_COUNT), 3000);
        while ((double)p.input_batch_ * p.output_h_ * p.output_w_ > 100);
        cgt_case c = random_case(&r, p, CGT_FP16, i % 4, seed);
        c.fp16_tiny = 1;
        c.exact = 1;
        check_case(&t, NULL, &c);
    }
    assert_no_case_failed(&t);
}

/* Every channel count of the list on each path, input and output side. */
Test(differential, channel_sweep, .timeout = TEST_TIMEOUT)
{
    tally t = {"channel_sweep", 0, 0};
    int n = 0;
    for (int ci = 0; ci < NCHANS; ++ci) {
        const int ch = CHANS[ci];
        for (int path = 0; path < 3; ++path) {
            const uint64_t seed = case_seed(t.test, n++);
            cgt_rng r = cgt_rng_seeded(seed);
            cgt_shape s;
            memset(&s, 0, sizeof s);
            s.n = cgt_rng_int(&r, 1, 2);
            s.h = cgt_rng_int(&r, 2, 5);
            s.w = cgt_rng_int(&r, 2, 6);
            if (path == 0) { /* depthwise: Cout == G == Cin == ch */
                s.cin = s.cout = s.g = ch;
                s.kh = 3;
                s.kw = 2;
                s.pu = s.pl = 1;
            } else if (path == 1) { /* 1x1: ch in, a random count out (and the reverse) */
                s.kh = s.kw = 1;
                s.cin = (n % 2) ? ch : cgt_rng_pick(&r, CHANS, NCHANS);
                s.cout = (n % 2) ? cgt_rng_pick(&r, CHANS, NCHANS) : ch;
            } else { /* general 3x3 pad 1, ch on one side */
                s.kh = s.kw = 3;
                s.pu = s.pd = s.pl = s.pr = 1;
                s.cin = (n % 2) ? ch : cgt_rng_pick(&r, SMALL_CHANS, NSMALL);
                s.cout = (n % 2) ? cgt_rng_pick(&r, SMALL_CHANS, NSMALL) : ch;
            }
            ConvParameter p = cgt_param(&s);
            cgt_case c = random_case(&r, p, n % 2, -1, seed);
            check_case(&t, NULL, &c);
            /* and the same Cout/Cin swapped, with the other dtype */
            if (path != 0) {
                const int cin = p.input_channel_;
                p.input_channel_ = p.output_channel_;
                p.output_channel_ = cin;
                cgt_case c2 = random_case(&r, p, (n + 1) % 2, -1, seed ^ 1);
                check_case(&t, NULL, &c2);
            }
        }
    }
    assert_no_case_failed(&t);
}

/* Each special mask with each multi-core mode, both dtypes. */
Test(differential, mask_sweep, .timeout = TEST_TIMEOUT)
{
    tally t = {"mask_sweep", 0, 0};
    static const unsigned masks[] = {0x1u,        0x2u,        0x80000000u, 0xffffffffu,
                                     0xfu,        0x3u,        0x5u,        0x80000001u,
                                     0x10001u,    0x55555555u, 0xaaaaaaaau, 0xf0f0f0f0u,
                                     0x7fffffffu, 0xfffffffeu, 0x00ff0000u};
    const int nm = (int)(sizeof masks / sizeof masks[0]);
    static const cgt_mode modes[] = {CGT_S_HOST, CGT_S_SPMD, CGT_P_SPMD};
    int n = 0;
    for (int mi = 0; mi < nm; ++mi) {
        for (int mo = 0; mo < 3; ++mo) {
            const uint64_t seed = case_seed(t.test, n++);
            const family f = (family)(n % 3 == 0 ? F_DEPTHWISE : n % 3 == 1 ? F_1X1 : F_GENERAL);
            cgt_case c = case_from_seed(f, seed, 4000, n % 2, modes[mo]);
            c.core_mask = (int)masks[mi];
            check_case(&t, NULL, &c);
        }
    }
    assert_no_case_failed(&t);
}

/* Batch 1 and batch < cores on many cores: the long sum must still be split
 * (or not) correctly over N*OH*OW. */
Test(differential, small_batch_many_cores, .timeout = TEST_TIMEOUT)
{
    tally t = {"small_batch_many_cores", 0, 0};
    for (int i = 0; i < 48; ++i) {
        const uint64_t seed = case_seed(t.test, i);
        cgt_rng r = cgt_rng_seeded(seed);
        const family f = (family)(i % 4 == 3 ? F_GROUPED : i % 4);
        ConvParameter p = shape_within(&r, f, 6000);
        p.input_batch_ = p.output_batch_ = cgt_rng_int(&r, 1, 3);
        cgt_case c = random_case(&r, p, i % 2, (i / 2) % 2 ? CGT_S_SPMD : CGT_S_HOST, seed);
        static const unsigned many[] = {0xffffffffu, 0xffu, 0xf0f0u, 0x8000ffffu};
        c.core_mask = (int)many[(i / 4) % 4];
        check_case(&t, NULL, &c);
    }
    assert_no_case_failed(&t);
}

/* buffer_size_ from the minimum (one pixel per chunk) to large, on fixed
 * mid-size shapes of every path. */
Test(differential, buffer_sizes, .timeout = TEST_TIMEOUT)
{
    tally t = {"buffer_sizes", 0, 0};
    /* clang-format off */
    static const cgt_shape shapes[] = {
        {.n = 2, .h = 7, .w = 6, .cin = 13, .cout = 13, .g = 13, .kh = 3, .kw = 3,
         .pu = 1, .pl = 1, .pd = 1, .pr = 1},
        {.n = 3, .h = 5, .w = 9, .cin = 17, .cout = 9, .kh = 1, .kw = 1},
        {.n = 2, .h = 6, .w = 5, .cin = 12, .cout = 8, .g = 4, .kh = 3, .kw = 2,
         .dh = 2, .pu = 2, .pl = 1, .sh = 1, .sw = 2},
        {.n = 1, .h = 9, .w = 8, .cin = 5, .cout = 7, .kh = 2, .kw = 4, .sh = 2, .pu = 1, .pr = 2},
    };
    /* clang-format on */
    int n = 0;
    for (int si = 0; si < 4; ++si) {
        for (int dt = 0; dt < 2; ++dt) {
            const ConvParameter p0 = cgt_param(&shapes[si]);
            const long long mn = cgt_min_buffer(&p0, dt == 0 ? 4 : 2);
            const long long sizes[] = {mn,     mn + 1, mn + 2,  2 * mn - 1,
                                       3 * mn, 1000,   0x10000, 1 << 20};
            for (int bi = 0; bi < 8; ++bi) {
                if (sizes[bi] < mn)
                    continue;
                const int k = n++;
                cgt_case c = case_around(&t, k, p0, dt, n % 4);
                limit_p_spmd_mask(&c, 3);
                c.p.buffer_size_ = (int)sizes[bi];
                check_case(&t, NULL, &c);
            }
        }
    }
    assert_no_case_failed(&t);
}

/* A few bigger problems (long sums, many channels), every path, and shapes
 * that reach the blocking inside the kernels: more depthwise channels than
 * one block (> 256), a depthwise kernel so big that a block holds fewer
 * channels than Cout, and a general row so long (5x5x256) that one core's
 * rows take several im2col tiles and the reduction several chunks per row
 * (with a bias crossing chunk boundaries). */
Test(differential, bigger_shapes, .timeout = TEST_TIMEOUT)
{
    tally t = {"bigger_shapes", 0, 0};
    static const struct {
        cgt_shape s;
        int mask;
        /* clang-format off */
    } shapes[] = {
        {{.n = 2, .h = 12, .w = 10, .cin = 64, .cout = 64, .g = 64, .kh = 3, .kw = 3,
          .pu = 1, .pd = 1, .pl = 1, .pr = 1}, -1},
        {{.n = 4, .h = 9, .w = 11, .cin = 67, .cout = 61, .kh = 1, .kw = 1}, 0xf},
        {{.n = 2, .h = 10, .w = 9, .cin = 33, .cout = 31, .kh = 3, .kw = 3,
          .pu = 1, .pd = 1, .pl = 1, .pr = 1}, 0x00f000f0},
        {{.n = 3, .h = 11, .w = 13, .cin = 32, .cout = 48, .g = 4, .kh = 3, .kw = 5,
          .dh = 2, .sw = 2, .pu = 2, .pl = 2}, -1},
        {{.n = 1, .h = 31, .w = 17, .cin = 16, .cout = 24, .kh = 5, .kw = 3,
          .sh = 2, .pu = 2, .pd = 1, .pl = 1}, 0xf},
        {{.n = 5, .h = 8, .w = 8, .cin = 24, .cout = 24, .g = 24, .kh = 5, .kw = 5,
          .pu = 2, .pd = 2, .pl = 2, .pr = 2}, 0x00f000f0},
        /* depthwise, 300 channels: more than one 256-channel block */
        {{.n = 1, .h = 6, .w = 5, .cin = 300, .cout = 300, .g = 300, .kh = 3, .kw = 3,
          .pu = 1, .pl = 1}, 0x3},
        {{.n = 2, .h = 4, .w = 4, .cin = 257, .cout = 257, .g = 257, .kh = 2, .kw = 2}, 0x1},
        /* depthwise 23x23 kernel: 65536/529 = 123 channels a block < 130 */
        {{.n = 1, .h = 4, .w = 5, .cin = 130, .cout = 130, .g = 130, .kh = 23, .kw = 23,
          .pu = 11, .pd = 11, .pl = 11, .pr = 11}, 0x1},
        /* general row of 6400: ~81 rows a tile, 100 rows on one core */
        {{.n = 1, .h = 10, .w = 10, .cin = 256, .cout = 3, .kh = 5, .kw = 5,
          .pu = 2, .pd = 2, .pl = 2, .pr = 2}, 0x1},
        {{.n = 1, .h = 10, .w = 10, .cin = 256, .cout = 3, .kh = 5, .kw = 5,
          .pu = 2, .pd = 2, .pl = 2, .pr = 2}, 0x8001},
    };
    /* clang-format on */
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    int n = 0;
    for (int si = 0; si < ns; ++si) {
        for (int dt = 0; dt < 2; ++dt) {
            cgt_case c = case_around(&t, n++, cgt_param(&shapes[si].s), dt,
                                     (si + dt) % 2 ? CGT_S_SPMD : CGT_S_HOST);
            c.core_mask = shapes[si].mask;
            c.calls = 1;
            c.with_bias = 1;
            check_case(&t, NULL, &c);
            /* and _p with a small budget: many blocks and tiles */
            cgt_case cp = c;
            cp.mode = CGT_P_HOST;
            cp.p.buffer_size_ = (int)cgt_min_buffer(&cp.p, dt ? 2 : 4) * (1 + si % 3);
            check_case(&t, NULL, &cp);
        }
    }
    assert_no_case_failed(&t);
}

/* Every family mixed, fully random configuration (dtype, mode, api). */
Test(differential, mixed_random, .timeout = TEST_TIMEOUT)
{
    tally t = {"mixed_random", 0, 0};
    const int n = scaled(200);
    for (int i = 0; i < n; ++i)
        check_seeded_case(&t, (family)(i % F_COUNT), case_seed(t.test, i), 5000, -1, -1);
    assert_no_case_failed(&t);
}

/* Several host threads at once, each on its own disjoint set of cores (a
 * training loop per thread): _s host, _s SPMD (launches on disjoint masks
 * run at the same time) and _p. No hidden global state may mix them up. */
typedef struct conc_arg {
    int t;
    int cases, failures;
    char first[4096];
} conc_arg;

static void *conc_thread(void *a)
{
    conc_arg *k = a;
    static const cgt_mode modes[] = {CGT_S_HOST, CGT_S_SPMD, CGT_P_HOST, CGT_P_SPMD};
    for (int i = 0; i < 24; ++i) {
        const uint64_t seed = case_seed("concurrent_host_threads", 100 * k->t + i);
        cgt_case c = case_from_seed((family)((i + k->t) % F_COUNT), seed, 4000, (i + k->t) % 2,
                                    (int)modes[i % 4]);
        const unsigned lane = 0xffu << (8 * k->t);
        c.core_mask = (int)((unsigned)c.core_mask & lane);
        if (c.core_mask == 0)
            c.core_mask = (int)(lane & (lane >> 3)); /* a few cores of the lane */
        cgt_result r = cgt_run_case(&c);
        k->cases++;
        if (!r.ok && k->failures++ == 0) {
            char desc[1024];
            cgt_case_str(&c, desc, sizeof desc);
            snprintf(k->first, sizeof k->first, "thread %d: %s%s", k->t, desc, r.msg);
        }
    }
    return NULL;
}

Test(differential, concurrent_host_threads, .timeout = TEST_TIMEOUT)
{
    pthread_t th[4];
    conc_arg args[4];
    memset(args, 0, sizeof args);
    for (int t = 0; t < 4; ++t) {
        args[t].t = t;
        cr_assert_eq(pthread_create(&th[t], NULL, conc_thread, &args[t]), 0, "pthread_create");
    }
    for (int t = 0; t < 4; ++t)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 4; ++t) {
        cr_expect_eq(args[t].cases, 24, "thread %d ran %d cases", t, args[t].cases);
        cr_expect_eq(args[t].failures, 0, "concurrent_host_threads: %d failures; first: %s",
                     args[t].failures, args[t].first);
    }
}

/* ---- several jobs inside ONE launch ---------------------------------------
 * The launch's cores split into jobs: a job is a _s call by every core of its
 * mask (a subset of the launch), or a _p call by one core. Each job has its
 * own buffers and is checked against the reference. */
typedef struct group_job {
    int mask; /* _s: the cores calling it; _p: one core */
    int is_p;
    cgt_dtype dt;
    ConvParameter p;
    void *dy, *x, *bias, *out, *ws;
    cgt_expected ex;
    cg_status st[32];
    int ran[32];
} group_job;

typedef struct group_ctx {
    group_job *jobs;
    int njobs;
} group_ctx;

static void group_entry(void *arg)
{
    group_ctx *g = arg;
    const int id = get_core_id();
    if (id < 0 || id > 31)
        return;
    for (int j = 0; j < g->njobs; ++j) {
        group_job *b = &g->jobs[j];
        if (!(((unsigned)b->mask >> id) & 1u))
            continue;
        cg_status st;
        if (b->dt == CGT_FP32)
            st = b->is_p ? cg_fp_conv_grad_filter_p(b->dy, b->x, b->out, b->bias, &b->p)
                         : cg_fp_conv_grad_filter_s(b->dy, b->x, b->out, b->bias, &b->p, b->mask);
        else
            st = b->is_p ? cg_hp_conv_grad_filter_p(b->dy, b->x, b->out, b->bias, &b->p)
                         : cg_hp_conv_grad_filter_s(b->dy, b->x, b->out, b->bias, &b->p, b->mask);
        b->st[id] = st;
        b->ran[id]++;
    }
}

static void job_init(group_job *b, cgt_rng *r, family f, int mask, int is_p, cgt_dtype dt)
{
    memset(b, 0, sizeof *b);
    b->mask = mask;
    b->is_p = is_p;
    b->dt = dt;
    b->p = shape_within(r, f, 4000);
    const size_t es = dt == CGT_FP32 ? 4 : 2;
    b->p.buffer_size_ = random_buffer_size(r, &b->p, dt, CGT_S_HOST);
    const size_t ndy = ref_dy_elems(&b->p), nx = ref_x_elems(&b->p), ndw = ref_dw_elems(&b->p);
    const size_t nb = (size_t)b->p.output_channel_;
    b->dy = malloc(ndy * es);
    b->x = malloc(nx * es);
    b->out = malloc(ndw * es);
    b->bias = cgt_rng_chance(r, 50) ? malloc(nb * es) : NULL;
    cgt_fill(r, dt, b->dy, ndy, 1.0);
    cgt_fill(r, dt, b->x, nx, 1.0);
    cgt_fill(r, dt, b->out, ndw, 1.0);
    if (b->bias)
        cgt_fill(r, dt, b->bias, nb, 1.0);
    const size_t wsb = is_p ? (size_t)b->p.buffer_size_ * 4 : cgt_ws_bytes_s(&b->p, mask);
    b->ws = malloc(wsb);
    memset(b->ws, 0xff, wsb);
    b->p.workspace_ = b->ws;
    cgt_expected_compute(&b->ex, &b->p, dt, b->dy, b->x, b->bias, b->out, 1, 0);
}

/* Checks and frees a job; returns 1 if it passed. */
static int job_check(group_job *b, const char *test, uint64_t seed, int launch)
{
    cgt_result res = cgt_result_passing();
    for (int id = 0; id < 32; ++id) {
        if (!(((unsigned)b->mask >> id) & 1u))
            continue;
        if (b->ran[id] != 1 || b->st[id] != CG_OK) {
            res.ok = 0;
            cgt_result_addf(&res, "\n  core %d: ran %d, status %d (%s)", id, b->ran[id], b->st[id],
                            cg_status_message(b->st[id]));
        }
    }
    cgt_expected_compare(&b->ex, &b->p, b->dt, b->out, &res, "");
    if (!res.ok) {
        char ps[400];
        cgt_param_str(&b->p, ps, sizeof ps);
        cr_expect(res.ok, "%s (seed 0x%llx): launch 0x%08x, %s%s job on mask 0x%08x failed; %s%s",
                  test, (unsigned long long)seed, (unsigned)launch, b->dt == CGT_FP16 ? "hp" : "fp",
                  b->is_p ? "_p" : "_s", (unsigned)b->mask, ps, res.msg);
    }
    cgt_expected_free(&b->ex);
    free(b->dy);
    free(b->x);
    free(b->out);
    free(b->bias);
    free(b->ws);
    return res.ok;
}

/* Runs the jobs in one launch and checks (and frees) each; returns how many
 * failed. */
static int launch_and_check_jobs(group_job *jobs, int njobs, unsigned launch, const char *test,
                                 uint64_t seed)
{
    group_ctx g = {jobs, njobs};
    cr_assert_eq(core_mask_launch((int)launch, group_entry, &g), 0, "launch 0x%x", launch);
    int failed = 0;
    for (int j = 0; j < njobs; ++j)
        failed += !job_check(&jobs[j], test, seed, (int)launch);
    return failed;
}

/* The _s mask is a strict subset of the launch: only its cores call _s; the
 * other cores of the launch meanwhile run _p on problems of their own. */
Test(differential, spmd_mask_subset_of_launch, .timeout = TEST_TIMEOUT)
{
    const char *test = "spmd_mask_subset_of_launch";
    static const unsigned launches[] = {0xffu, 0xf0f0u, 0xffffffffu, 0x8000000fu, 0x3u};
    int failures = 0;
    for (int i = 0; i < 30; ++i) {
        const uint64_t seed = case_seed(test, i);
        cgt_rng r = cgt_rng_seeded(seed);
        const unsigned launch = launches[i % 5];
        unsigned sub = launch & (unsigned)cgt_rng_next(&r);
        if (sub == 0 || sub == launch)
            sub = launch & (launch - 1u); /* drop the lowest core */
        if (sub == 0)
            sub = launch & ~(launch - 1u);
        group_job jobs[33];
        int nj = 0;
        job_init(&jobs[nj++], &r, (family)(i % 3), (int)sub, 0, (cgt_dtype)(i % 2));
        for (int id = 0; id < 32; ++id) /* idle cores of the launch: _p, every other one */
            if (((launch & ~sub) >> id) & 1u && cgt_rng_chance(&r, 50))
                job_init(&jobs[nj++], &r, (family)cgt_rng_int(&r, 0, 2), (int)(1u << id), 1,
                         (cgt_dtype)cgt_rng_int(&r, 0, 1));
        failures += launch_and_check_jobs(jobs, nj, launch, test, seed);
    }
    cr_assert(failures == 0, "%s: %d jobs failed", test, failures);
}

/* Two (or more) disjoint _s groups inside one launch at the same time, each
 * with its own mask and problem: e.g. cores 0-1 on one layer, 2-3 on another.
 * Every core of each mask calls _s with that mask, as the contract asks. */
Test(differential, spmd_disjoint_groups_in_one_launch, .timeout = 30.0) /* a deadlock fails fast */
{
    const char *test = "spmd_disjoint_groups_in_one_launch";
    static const unsigned splits[][3] = {
        {0x3u, 0xcu, 0},
        {0x1u, 0x2u, 0},
        {0x0fu, 0xf0u, 0},
        {0x5u, 0xau, 0},
        {0x000000ffu, 0x0000ff00u, 0xffff0000u},
        {0x80000000u, 0x7fffffffu, 0},
    };
    int failures = 0;
    for (int i = 0; i < 24; ++i) {
        const uint64_t seed = case_seed(test, i);
        cgt_rng r = cgt_rng_seeded(seed);
        const unsigned *sp = splits[i % 6];
        group_job jobs[3];
        int nj = 0;
        unsigned launch = 0;
        for (int k = 0; k < 3 && sp[k]; ++k) {
            job_init(&jobs[nj++], &r, (family)cgt_rng_int(&r, 0, 2), (int)sp[k], 0,
                     (cgt_dtype)cgt_rng_int(&r, 0, 1));
            launch |= sp[k];
        }
        failures += launch_and_check_jobs(jobs, nj, launch, test, seed);
    }
    cr_assert(failures == 0, "%s: %d jobs failed", test, failures);
}

/* CGT_REPLAY=<family>:<seed> reruns one case from any run_family-style test
 * or mixed_random (dtype and mode drawn from the seed unless
 * CGT_REPLAY_DTYPE / CGT_REPLAY_MODE are given). Skipped otherwise. */
Test(differential, replay, .timeout = TEST_TIMEOUT)
{
    const char *spec = getenv("CGT_REPLAY");
    if (!spec || !*spec)
        cr_skip_test("set CGT_REPLAY=<family>:<seed> to replay one case");
    char name[64];
    const char *colon = strchr(spec, ':');
    cr_assert(colon && (size_t)(colon - spec) < sizeof name, "bad CGT_REPLAY '%s'", spec);
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = 0;
    family f = F_COUNT;
    for (int i = 0; i < F_COUNT; ++i)
        if (strcmp(name, FAMILY_NAMES[i]) == 0)
            f = (family)i;
    cr_assert(f != F_COUNT, "unknown family '%s'", name);
    const uint64_t seed = strtoull(colon + 1, NULL, 0);
    const char *dt = getenv("CGT_REPLAY_DTYPE"), *md = getenv("CGT_REPLAY_MODE");
    const char *bud = getenv("CGT_REPLAY_BUDGET");
    cgt_case c =
        case_from_seed(f, seed, bud ? atof(bud) : 6000, dt ? atoi(dt) : -1, md ? atoi(md) : -1);
    char desc[1024];
    cgt_case_str(&c, desc, sizeof desc);
    cgt_result res = cgt_run_case(&c);
    cr_assert(res.ok, "replay %s\n  %s%s", spec, desc, res.msg);
}

/* The weight gradient's packed driver on its edges: sums of several passes
 * with a short last one (a pass is 128 rows or more), output channels around
 * the A panel's width (8, 12, 24) and around the register tiles' rows,
 * im2col rows whose segments (kernel rows, or taps with dilation or groups)
 * straddle the B micro-panels, padding cutting segments on both sides,
 * rows long enough for `_s` on two cores to split dw's columns, groups of
 * a few channels packed together (whole groups a core); fp32 and
 * fp16, `_s` on one and two cores and `_p`, with a bias (sums staged) and
 * without (fp32 sums added straight into out_dw). The shapes of 16 or more
 * input channels a group and at most 64 output channels (and the stem's),
 * and 1x1 kernels of stride 1 and at most four vectors of input channels
 * with more output channels (24 -> 72, 48 -> 100), take the in-place drivers
 * instead (runs_rows, few_rows), fp16's through
 * converted copies of dy's rows and padded ones of x's: strided, dilated,
 * grouped, padded on one side, a pass ending inside an output row. */
Test(differential, packed_driver_edges, .timeout = TEST_TIMEOUT)
{
    /* clang-format off */
    static const cgt_shape shapes[] = {
        {.n = 2, .h = 14, .w = 15, .cin = 17, .cout = 25, .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 2, .pr = 1},
        {.n = 3, .h = 9, .w = 13, .cin = 64, .cout = 23, .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 12, .w = 11, .cin = 33, .cout = 49, .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pu = 2, .pd = 2, .pl = 2, .pr = 2},
        {.n = 2, .h = 16, .w = 9, .cin = 40, .cout = 26, .g = 2, .kh = 3, .kw = 2, .pu = 1, .pl = 1},
        {.n = 1, .h = 31, .w = 29, .cin = 3, .cout = 13, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pu = 3, .pd = 3, .pl = 3, .pr = 3},
        {.n = 4, .h = 10, .w = 10, .cin = 100, .cout = 8, .kh = 1, .kw = 1},
        {.n = 2, .h = 11, .w = 12, .cin = 1, .cout = 1, .kh = 5, .kw = 3, .sh = 2, .sw = 1, .pu = 2, .pd = 2, .pl = 1, .pr = 1},
        {.n = 3, .h = 9, .w = 10, .cin = 32, .cout = 32, .g = 8, .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 13, .w = 7, .cin = 36, .cout = 60, .g = 12, .kh = 2, .kw = 3, .dh = 2, .pu = 1, .pl = 2},
        {.n = 2, .h = 23, .w = 21, .cin = 3, .cout = 24, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pu = 3, .pd = 2, .pl = 3, .pr = 1},
        {.n = 2, .h = 17, .w = 19, .cin = 48, .cout = 40, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pu = 1, .pl = 1},
        {.n = 3, .h = 11, .w = 10, .cin = 64, .cout = 64, .g = 2, .kh = 3, .kw = 3, .dw = 2, .pu = 1, .pd = 1, .pl = 2, .pr = 2},
        {.n = 1, .h = 9, .w = 150, .cin = 16, .cout = 64, .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 13, .w = 11, .cin = 24, .cout = 72, .kh = 1, .kw = 1},
        {.n = 3, .h = 10, .w = 12, .cin = 48, .cout = 100, .kh = 1, .kw = 1},
    };
    /* clang-format on */
    static const struct {
        cgt_mode mode;
        int mask;
    } runs[] = {{CGT_S_HOST, 0x1}, {CGT_S_HOST, 0x3}, {CGT_P_HOST, 0x1}};
    int failures = 0;
    char first[4096] = "";
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int dt = 0; dt < 2; dt++)
            for (size_t r = 0; r < sizeof runs / sizeof *runs; r++)
                for (int bias = 0; bias < 2; bias++) {
                    cgt_case c;
                    memset(&c, 0, sizeof c);
                    c.p = cgt_param(&shapes[i]);
                    c.p.buffer_size_ = (int)cgt_min_buffer(&c.p, dt ? 2 : 4);
                    c.dtype = dt ? CGT_FP16 : CGT_FP32;
                    c.mode = runs[r].mode;
                    c.core_mask = runs[r].mask;
                    c.with_bias = bias;
                    c.prefill = 1;
                    c.seed =
                        case_seed("packed_driver_edges", (int)(i * 12 + dt * 6 + r * 2 + bias));
                    cgt_result res = cgt_run_case(&c);
                    if (!res.ok && failures++ == 0) {
                        char desc[1024];
                        cgt_case_str(&c, desc, sizeof desc);
                        snprintf(first, sizeof first, "%s%s", desc, res.msg);
                    }
                }
    cr_assert_eq(failures, 0, "packed_driver_edges: %d failures; first: %s", failures, first);
}
