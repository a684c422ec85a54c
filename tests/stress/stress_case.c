/* SPDX-License-Identifier: MIT */
/* convgrad-stress: drawing one random case from (seed, index, cores).
 *
 * Shapes are kept small (a MAC budget drawn per case, log-uniform) because
 * every case is checked against the double-precision reference, which costs
 * O(MACs): small cases mean thousands of configurations a second, and the
 * bugs this tool hunts (races, partitioning, tails, guard pages) do not need
 * big tensors to show. */
#include "stress.h"

#include <stdio.h>
#include <string.h>

/* Channel counts around the vector widths 4, 8, 16, and primes. */
static const int CHANS[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 24, 31, 32, 33, 48, 64, 67};
static const int NCHANS = (int)(sizeof CHANS / sizeof CHANS[0]);
static const int SMALL[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
static const int NSMALL = (int)(sizeof SMALL / sizeof SMALL[0]);

typedef enum {
    F_GENERAL,     /* group 1, any kernel, stride, dilation, pads */
    F_DEPTHWISE,   /* Cout == G == Cin, dilation 1 */
    F_1X1,         /* the 1x1 path's exact conditions */
    F_GROUPED,     /* 1 < G < Cin */
    F_DEPTH_MULT,  /* G == Cin, Cout = m * Cin */
    F_DILATED,     /* dilation > 1, sometimes depthwise-shaped (goes general) */
    F_STRIDE_GT_K, /* stride larger than the kernel: skipped input pixels */
    F_NEAR_1X1,    /* 1x1 kernel with one deviation: the general path */
    F_COUNT
} family;

/* Relative frequencies of the families. */
static const int FAMILY_WEIGHT[F_COUNT] = {20, 18, 15, 12, 10, 10, 8, 7};

static int pick_weighted(cgt_rng *r, const int *w, int n)
{
    int total = 0;
    for (int i = 0; i < n; ++i)
        total += w[i];
    int x = cgt_rng_int(r, 0, total - 1);
    for (int i = 0; i < n; ++i) {
        if (x < w[i])
            return i;
        x -= w[i];
    }
    return n - 1;
}

static void spatial(cgt_rng *r, cgt_shape *s, int maxhw)
{
    s->n = cgt_rng_chance(r, 30) ? 1 : cgt_rng_int(r, 1, 8);
    s->h = cgt_rng_int(r, 1, maxhw);
    s->w = cgt_rng_int(r, 1, maxhw);
    if (s->h == s->w && cgt_rng_chance(r, 60))
        s->w += cgt_rng_int(r, 1, 3); /* H != W most of the time */
}

static void grouped_channels(cgt_rng *r, cgt_shape *s)
{
    static const int gs[] = {2, 3, 4, 5, 8};
    s->g = cgt_rng_pick(r, gs, 5);
    s->cin = s->g * cgt_rng_pick(r, SMALL, NSMALL);
    s->cout = s->g * cgt_rng_pick(r, SMALL, NSMALL);
}

/* One deviation from the 1x1 path's conditions (or only in the unused pads,
 * which still leaves the 1x1 path: pad_d_/pad_r_ count in its predicate). */
static void near_1x1(cgt_rng *r, cgt_shape *s)
{
    switch (cgt_rng_int(r, 0, 4)) {
    case 0:
        s->sh = cgt_rng_int(r, 2, 3);
        break;
    case 1:
        s->sw = cgt_rng_int(r, 2, 3);
        break;
    case 2:
        s->pu = 1;
        s->pl = cgt_rng_int(r, 0, 2);
        break;
    case 3:
        s->pd = 1;
        s->pr = cgt_rng_int(r, 0, 2);
        break;
    default:
        grouped_channels(r, s);
        break;
    }
    if (cgt_rng_chance(r, 20))
        s->dh = 2; /* no effect with K = 1, but not the 1x1 path */
}

static void draw_family(cgt_rng *r, family f, cgt_shape *s)
{
    switch (f) {
    case F_DEPTHWISE:
        s->cin = s->cout = s->g = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 10);
        cgt_draw_kernel_geom(r, s, 5, 3, 1, 3);
        break;
    case F_1X1:
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 9);
        s->kh = s->kw = 1;
        break;
    case F_GROUPED:
        grouped_channels(r, s);
        spatial(r, s, 8);
        cgt_draw_kernel_geom(r, s, 4, 3, 3, 2);
        break;
    case F_DEPTH_MULT:
        s->g = s->cin = cgt_rng_pick(r, SMALL, NSMALL);
        s->cout = s->cin * cgt_rng_int(r, 2, 4);
        spatial(r, s, 8);
        cgt_draw_kernel_geom(r, s, 4, 2, 2, 2);
        break;
    case F_DILATED:
        if (cgt_rng_chance(r, 40))
            s->cin = s->cout = s->g = cgt_rng_pick(r, CHANS, NCHANS);
        else
            s->cin = cgt_rng_pick(r, SMALL, NSMALL), s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 10);
        cgt_draw_kernel_geom(r, s, 3, 2, 4, 3);
        if (s->dh == 1 && s->dw == 1)
            s->dw = 2;
        break;
    case F_STRIDE_GT_K:
        if (cgt_rng_chance(r, 30))
            s->cin = s->cout = s->g = cgt_rng_pick(r, CHANS, NCHANS);
        else if (cgt_rng_chance(r, 30))
            grouped_channels(r, s);
        else
            s->cin = cgt_rng_pick(r, SMALL, NSMALL), s->cout = cgt_rng_pick(r, SMALL, NSMALL);
        spatial(r, s, 12);
        cgt_draw_kernel_geom(r, s, 3, 1, 1, 2);
        s->sh = cgt_rng_int(r, s->kh + 1, 5);
        s->sw = cgt_rng_int(r, s->kw + 1, 5);
        break;
    case F_NEAR_1X1:
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 8);
        s->kh = s->kw = 1;
        near_1x1(r, s);
        break;
    default: /* F_GENERAL */
        s->cin = cgt_rng_pick(r, CHANS, NCHANS);
        s->cout = cgt_rng_pick(r, CHANS, NCHANS);
        spatial(r, s, 9);
        cgt_draw_kernel_geom(r, s, 5, 3, cgt_rng_chance(r, 70) ? 1 : 3, 3);
        break;
    }
}

/* output_h_/output_w_: the forward formula (0 in the compact shape), or
 * sometimes any value >= 1, including sizes whose last rows read nothing
 * but padding. */
static void pick_output(cgt_rng *r, cgt_shape *s)
{
    const ConvParameter fwd = cgt_param(s);
    if (cgt_rng_chance(r, 12))
        s->oh = cgt_rng_int(r, 1, fwd.output_h_ + 3);
    if (cgt_rng_chance(r, 12))
        s->ow = cgt_rng_int(r, 1, fwd.output_w_ + 3);
}

static double shape_macs(const cgt_shape *s)
{
    const ConvParameter p = cgt_param(s);
    return ref_macs(&p);
}

/* Halves one output extent: the input with it while the output follows
 * the forward formula (so it keeps following it), else the given size. */
static void halve_extent(int *in, int *out, int cur_out)
{
    if (*out <= 0 && *in > 1)
        *in = (*in + 1) / 2;
    else
        *out = (cur_out + 1) / 2;
}

/* Halves the batch, then the larger output extent, until the MACs fit the
 * budget; channels and kernel stay, so the family's path is kept. */
static void shrink_to(cgt_shape *s, double budget)
{
    while (shape_macs(s) > budget) {
        const ConvParameter p = cgt_param(s);
        if (s->n > 1)
            s->n /= 2;
        else if (p.output_h_ > 1 && p.output_h_ >= p.output_w_)
            halve_extent(&s->h, &s->oh, p.output_h_);
        else if (p.output_w_ > 1)
            halve_extent(&s->w, &s->ow, p.output_w_);
        else
            break; /* 1x1 output: channels x kernel alone, at most ~10^5 */
    }
}

static ConvParameter draw_shape(cgt_rng *r)
{
    cgt_shape s;
    memset(&s, 0, sizeof s);
    draw_family(r, (family)pick_weighted(r, FAMILY_WEIGHT, F_COUNT), &s);
    pick_output(r, &s);
    /* log-uniform from 300 to ~3e5 MACs: mostly small cases (fast, many of
     * them), now and then a larger one. A table, not exp(): a case must not
     * depend on the libm it was built against. */
    static const double budgets[] = {300,   424,   600,   849,    1200,   1697,   2400,
                                     3394,  4800,  6788,  9600,   13576,  19200,  27153,
                                     38400, 54306, 76800, 108612, 153600, 217223, 307200};
    const double budget = budgets[cgt_rng_int(r, 0, (int)(sizeof budgets / sizeof *budgets) - 1)];
    shrink_to(&s, budget);
    return cgt_param(&s);
}

/* ---- core masks ------------------------------------------------------------ */

static uint32_t low_bits(int cores)
{
    return cores >= 32 ? 0xffffffffu : (1u << cores) - 1u;
}

static uint32_t random_bits(cgt_rng *r, int cores, int k)
{
    uint32_t m = 0;
    for (int i = 0; i < k; ++i)
        m |= 1u << cgt_rng_int(r, 0, cores - 1);
    return m;
}

static uint32_t draw_mask_bits(cgt_rng *r, int cores)
{
    const uint32_t all = low_bits(cores);
    switch (cgt_rng_int(r, 0, 9)) {
    case 0:
    case 1:
        return 1u << cgt_rng_int(r, 0, cores - 1); /* one core */
    case 2:
        return all; /* every core: -1 with 32 */
    case 3:
        return 1u << (cores - 1); /* the top core alone: INT_MIN with 32 */
    case 4:
        return all & ~random_bits(r, cores, cgt_rng_int(r, 1, 3)); /* holes */
    case 5:
        return random_bits(r, cores, cgt_rng_int(r, 2, 5)); /* sparse */
    case 6: {
        const int a = cgt_rng_int(r, 0, cores - 1), b = cgt_rng_int(r, a, cores - 1);
        return low_bits(b + 1) & ~low_bits(a); /* a contiguous run */
    }
    case 7:
        return (1u | 1u << (cores - 1)) & all; /* first and last */
    case 8:
        return (cgt_rng_chance(r, 50) ? 0x55555555u : 0xAAAAAAAAu) & all; /* every other */
    default:
        return (uint32_t)cgt_rng_next(r) & all; /* dense random */
    }
}

static int draw_mask(cgt_rng *r, int cores)
{
    uint32_t m = draw_mask_bits(r, cores);
    if (m == 0)
        m = 1; /* "every other" or random bits with cores == 1 */
    int v;
    memcpy(&v, &m, sizeof v); /* bit 31 set means a negative mask */
    return v;
}

/* ---- the rest of the case --------------------------------------------------- */

/* buffer_size_ from its lower bound upward. `_p` SPMD gives every core its
 * own workspace, so big masks keep it small (the cost is per core). */
static int draw_buffer_size(cgt_rng *r, const ConvParameter *p, const cgt_case *c)
{
    const long long mn = cgt_min_buffer(p, c->dtype == CGT_FP32 ? 4 : 2);
    const int many = c->mode == CGT_P_SPMD && cgt_popcount(c->core_mask) > 8;
    long long bs;
    switch (cgt_rng_int(r, 0, 9)) {
    case 0:
    case 1:
    case 2:
        bs = mn; /* the minimum: the tightest tiles */
        break;
    case 3:
        bs = mn + cgt_rng_int(r, 1, 7); /* odd sizes just above */
        break;
    case 4:
    case 5:
        bs = mn * cgt_rng_int(r, 2, 8) + cgt_rng_int(r, 0, 3);
        break;
    case 6:
        bs = many ? mn : 0x10000; /* the card's value */
        break;
    default:
        bs = cgt_rng_int(r, (int)mn, many ? 0x2000 : 0x8000);
        break;
    }
    return (int)(bs < mn ? mn : bs);
}

/* Terms of one dw element's sum: at most N*OH*OW. */
static double terms(const ConvParameter *p)
{
    return (double)p->input_batch_ * p->output_h_ * p->output_w_;
}

/* Exact checks only where the harness can promise exactness (support.h):
 * dyadic data keep every fp32 partial sum exact below 2^14, fp16-tiny data
 * below 1. Elsewhere the tolerance-based check applies. */
static void draw_data(cgt_rng *r, cgt_case *c)
{
    const int calls = c->calls;
    const int k = cgt_rng_int(r, 0, 99);
    if (c->dtype == CGT_FP16 && k < 6) {
        c->fp16_tiny = 1;
        const double q = 2047.0 / 16777216.0; /* largest tiny magnitude */
        c->exact = q + calls * (terms(&c->p) * 64.0 * q + q) < 1.0;
    } else if (k < 16) {
        c->dyadic = 1;
        c->exact = 1.0 + calls * (terms(&c->p) + 1.0) < 16000.0;
    } else if (c->dtype == CGT_FP32 && k < 22) {
        static const double scale[] = {1e-3, 10.0, 100.0};
        c->range = scale[cgt_rng_int(r, 0, 2)];
    }
    c->zero_dy = cgt_rng_chance(r, 3);
}

/* Where the buffers sit against their guard pages. */
static void draw_placement(cgt_rng *r, cgt_case *c)
{
    const size_t es = c->dtype == CGT_FP32 ? 4 : 2;
    c->ws_slack = cgt_rng_chance(r, 50) ? 0 : 4 * (size_t)cgt_rng_int(r, 1, 16);
    c->out_slack = cgt_rng_chance(r, 50) ? 0 : es * (size_t)cgt_rng_int(r, 1, 8);
    c->ws_at_start = cgt_rng_chance(r, 20);
    c->in_at_start = cgt_rng_chance(r, 20);
    c->readonly_inputs = cgt_rng_chance(r, 25);
}

static cgt_mode draw_mode(cgt_rng *r)
{
    static const int w[4] = {30, 30, 25, 15}; /* _s host, _s SPMD, _p host, _p SPMD */
    return (cgt_mode)pick_weighted(r, w, 4);
}

cgt_case stress_case(uint64_t seed, uint64_t index, int cores)
{
    if (cores < 1 || cores > STRESS_MAX_CORES)
        cores = STRESS_MAX_CORES;
    cgt_rng r;
    /* the index goes through the mixer first, so neighbouring indices (and
     * neighbouring seeds) give unrelated streams */
    cgt_rng_seed(&r, cgt_mix64(seed ^ cgt_mix64(index + 0x5354524553530001ULL)));
    cgt_case c;
    memset(&c, 0, sizeof c);
    c.p = draw_shape(&r);
    c.dtype = (cgt_dtype)cgt_rng_int(&r, 0, 1);
    c.mode = draw_mode(&r);
    c.api = (cgt_api)cgt_rng_int(&r, 0, 1);
    c.core_mask = draw_mask(&r, cores);
    c.with_bias = cgt_rng_chance(&r, 50);
    c.prefill = cgt_rng_chance(&r, 70);
    c.calls = cgt_rng_chance(&r, 80) ? 1 : cgt_rng_int(&r, 2, 3);
    c.p.buffer_size_ = draw_buffer_size(&r, &c.p, &c);
    draw_data(&r, &c);
    draw_placement(&r, &c);
    c.seed = cgt_rng_next(&r);
    return c;
}

uint32_t stress_case_cores(const cgt_case *c)
{
    if (c->mode == CGT_P_HOST)
        return 0;
    uint32_t m;
    memcpy(&m, &c->core_mask, sizeof m);
    return m;
}

void stress_reproducer(char *buf, size_t len, uint64_t seed, const uint64_t *idx, int n, int cores)
{
    size_t used =
        (size_t)snprintf(buf, len, "convgrad-stress --replay 0x%016llx:", (unsigned long long)seed);
    for (int i = 0; i < n && used < len; ++i)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? "," : "",
                                 (unsigned long long)idx[i]);
    if (cores != STRESS_MAX_CORES && used < len)
        snprintf(buf + used, len - used, " --cores %d", cores);
}
