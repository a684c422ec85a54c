/* SPDX-License-Identifier: MIT */
/* train_cnn: trains a small convolutional network on synthetic images, with
 * every convolution (forward, input gradient, weight gradient, bias gradient)
 * computed by convgrad's cg_conv2d_* on the emulated cores of a core mask.
 *
 * The task: 28x28 grayscale images of six shapes (a horizontal bar, a vertical
 * bar, the two diagonals, a square outline, a cross), each at a random
 * position, size, thickness and tilt (+-10 degrees), on a random background
 * level, with a random brightness, a few random specks and additive Gaussian
 * noise. The training and the held-out sets are generated from different
 * streams of one seed (--seed), so a run is deterministic.
 *
 * The network:
 *   conv 3x3, 1 -> 8, pad 1  + ReLU + 2x2 max pool   28x28 -> 14x14
 *   conv 3x3, 8 -> 16, pad 1 + ReLU + 2x2 max pool   14x14 -> 7x7
 *   linear 784 -> 6, softmax cross-entropy
 * He initialisation, mini-batch SGD with momentum 0.9 and weight decay 5e-4
 * (weights only), the learning rate warmed up linearly over the first 5% of
 * the steps (at least 50, or half of a shorter run), then on a cosine
 * schedule from --lr down to 0, the training set shuffled every epoch. ReLU,
 * pooling, the linear layer, the loss and the update are plain C here; the
 * convolutions are the library's.
 * The tensors are NHWC with OHWI weights (the library's native layout), or
 * NCHW with OIHW weights under --layout nchw; both start from the same
 * weights, so the two runs follow the same curve up to rounding.
 *
 * The target: the default run (8000 training and 2000 held-out images,
 * 6 epochs, batch 64) reaches >= 95% held-out accuracy (98-99% over
 * seeds) in under 10 s on 2 cores (docs/training.md has the figures and the
 * CPU they were measured on). The exit status is 1 when the target is missed (--help
 * lists them all).
 * --quick (1000 training and 300 held-out images, 2 epochs, batch 16, lr
 * 0.005; under a second here, a few seconds under TSan) is a smoke test
 * whose target is that the loss falls: the last epoch's mean training loss
 * must be below the first mini-batch's.
 *
 * Outputs in --out DIR (default ./train_cnn-out): metadata.csv (the build, the
 * CPU, the command line), train_cnn.csv (one row per epoch: losses,
 * accuracies, seconds, seconds in cg_conv2d_* calls, the last learning rate)
 * and, when gnuplot is on PATH, train_cnn.png (loss and accuracy against the
 * epoch) with its script train_cnn.gp. The timings are the machine's: the
 * header names the CPU and the commit. */
#define _POSIX_C_SOURCE 200809L
#include <convgrad.h>

#include "tool_info.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "train_cnn"

/* ---- what a run is --------------------------------------------------------- */

enum {
    IMG = 28,            /* image side */
    NCLASSES = 6,        /* shapes */
    C1 = 8,              /* conv1 output channels */
    C2 = 16,             /* conv2 output channels */
    H1 = IMG,            /* conv1 output side (pad 1) */
    P1 = IMG / 2,        /* after the first pool */
    H2 = P1,             /* conv2 output side */
    P2 = P1 / 2,         /* after the second pool */
    FEAT = P2 * P2 * C2, /* a multiple of 8 */
    EVAL_CHUNK = 256     /* images per forward pass on the held-out set */
};

/* Defaults, and the --quick ones. */
enum {
    DEF_TRAIN = 8000,
    DEF_TEST = 2000,
    DEF_EPOCHS = 6,
    DEF_BATCH = 64,
    QUICK_TRAIN = 1000,
    QUICK_TEST = 300,
    QUICK_EPOCHS = 2,
    QUICK_BATCH = 16
};
#define DEF_LR 0.01
#define QUICK_LR 0.005
#define DEF_SEED 1u
#define DEF_TARGET 95.0
#define DEF_OUT TOOL_DEFAULT_OUT(PROGRAM)
#define MOMENTUM 0.9f
#define WEIGHT_DECAY 5e-4f

/* Exit statuses (tool_info.h): a missed target and an error at run time are
 * both failures; the message says which. */
enum {
    EXIT_TARGET_MISSED = TOOL_EXIT_FAILURE,
    EXIT_ERROR = TOOL_EXIT_FAILURE,
    EXIT_BAD_OPTION = TOOL_EXIT_USAGE
};

static const char *const class_names[NCLASSES] = {"horizontal bar", "vertical bar",   "diagonal \\",
                                                  "diagonal /",     "square outline", "cross"};

static const double PI = 3.14159265358979323846;

/* ---- utilities ---------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, PROGRAM ": out of memory (%zu x %zu bytes)\n", n, size);
        exit(EXIT_ERROR);
    }
    return p;
}

/* Every convgrad call goes through here: on an error, the library's sentence
 * and the exit status EXIT_ERROR. */
static void check(cg_status s, const char *call, const char *layer)
{
    if (s != CG_OK) {
        fprintf(stderr, PROGRAM ": %s (%s) failed: %s (status %d)\n", call, layer,
                cg_status_message(s), (int)s);
        exit(EXIT_ERROR);
    }
}

/* ---- random numbers: xoshiro256** seeded by splitmix64 ------------------------ */

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One independent stream per (seed, stream): the training data, the held-out
 * data, the initial weights and the shuffles each have their own. */
enum { STREAM_TRAIN_DATA = 1, STREAM_TEST_DATA = 2, STREAM_INIT = 3, STREAM_SHUFFLE = 4 };

static void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; ++i)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* [0, 1) */
static double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static double rng_range(rng *r, double lo, double hi)
{
    return lo + (hi - lo) * rng_uniform(r);
}

/* 0 .. n-1 */
static uint32_t rng_below(rng *r, uint32_t n)
{
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Two independent standard normal numbers (Box-Muller). */
static void rng_normal2(rng *r, double *a, double *b)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(1.0 - u1));
    *a = rad * cos(2.0 * PI * u2);
    *b = rad * sin(2.0 * PI * u2);
}

static double rng_normal(rng *r)
{
    double a, b;
    rng_normal2(r, &a, &b);
    return a;
}

/* ---- the data ----------------------------------------------------------------- */

typedef struct dataset {
    int n;
    float *x;         /* [n][IMG][IMG] */
    unsigned char *y; /* [n] class */
} dataset;

typedef struct segment {
    double x0, y0, x1, y1;
} segment;

static double seg_distance2(const segment *s, double px, double py)
{
    double dx = s->x1 - s->x0, dy = s->y1 - s->y0;
    double len2 = dx * dx + dy * dy;
    double t = len2 > 0 ? ((px - s->x0) * dx + (py - s->y0) * dy) / len2 : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double ex = s->x0 + t * dx - px, ey = s->y0 + t * dy - py;
    return ex * ex + ey * ey;
}

/* A segment of length len through (0, 0) at angle a, its middle moved by
 * `shift` along it. */
static segment seg_at(double a, double len, double shift)
{
    double c = cos(a), s = sin(a);
    segment g = {(shift - len / 2) * c, (shift - len / 2) * s, (shift + len / 2) * c,
                 (shift + len / 2) * s};
    return g;
}

/* Draws one image of class `cls` into img[IMG*IMG]. The shape is built around
 * (0, 0), then moved to a random place where it fits inside the image. */
static void draw_shape(rng *r, int cls, float *img)
{
    const double deg = PI / 180;
    segment seg[4];
    int nseg = 0;
    double tilt = rng_range(r, -10, 10) * deg;
    double thick;
    switch (cls) {
    case 0: /* horizontal bar */
    case 1: /* vertical bar */
    case 2: /* diagonal \ (y grows downwards) */
    case 3: /* diagonal / */
    {
        static const double base[4] = {0, 90, 45, 135};
        thick = rng_range(r, 1.5, 3.5);
        seg[nseg++] = seg_at(base[cls] * deg + tilt, rng_range(r, 10, 21), 0);
        break;
    }
    case 4: /* square outline */
    {
        thick = rng_range(r, 1.2, 2.6);
        double half = rng_range(r, 4, 9.5), c = cos(tilt), s = sin(tilt);
        double cx[4], cy[4];
        static const double sx[4] = {-1, 1, 1, -1}, sy[4] = {-1, -1, 1, 1};
        for (int k = 0; k < 4; ++k) {
            cx[k] = half * (sx[k] * c - sy[k] * s);
            cy[k] = half * (sx[k] * s + sy[k] * c);
        }
        for (int k = 0; k < 4; ++k) {
            segment g = {cx[k], cy[k], cx[(k + 1) % 4], cy[(k + 1) % 4]};
            seg[nseg++] = g;
        }
        break;
    }
    default: /* cross: two arms crossing near their middles */
    {
        thick = rng_range(r, 1.5, 3.2);
        double l1 = rng_range(r, 10, 20), l2 = rng_range(r, 10, 20);
        seg[nseg++] = seg_at(tilt, l1, rng_range(r, -0.15, 0.15) * l1);
        seg[nseg++] = seg_at(90 * deg + tilt, l2, rng_range(r, -0.15, 0.15) * l2);
        break;
    }
    }
    /* the bounding box, and a random offset that keeps it inside [0.5, IMG-1.5] */
    double minx = 1e9, maxx = -1e9, miny = 1e9, maxy = -1e9;
    for (int k = 0; k < nseg; ++k) {
        minx = fmin(minx, fmin(seg[k].x0, seg[k].x1));
        maxx = fmax(maxx, fmax(seg[k].x0, seg[k].x1));
        miny = fmin(miny, fmin(seg[k].y0, seg[k].y1));
        maxy = fmax(maxy, fmax(seg[k].y0, seg[k].y1));
    }
    double lo = 0.5 + thick / 2, hi = IMG - 1.5 - thick / 2;
    double ox_lo = lo - minx, ox_hi = hi - maxx, oy_lo = lo - miny, oy_hi = hi - maxy;
    double ox = ox_lo < ox_hi ? rng_range(r, ox_lo, ox_hi) : (ox_lo + ox_hi) / 2;
    double oy = oy_lo < oy_hi ? rng_range(r, oy_lo, oy_hi) : (oy_lo + oy_hi) / 2;
    for (int k = 0; k < nseg; ++k) {
        seg[k].x0 += ox;
        seg[k].x1 += ox;
        seg[k].y0 += oy;
        seg[k].y1 += oy;
    }

    /* 0-2 specks: small discs anywhere */
    int nspeck = (int)rng_below(r, 3);
    double spx[2], spy[2], spr[2];
    for (int k = 0; k < nspeck; ++k) {
        spx[k] = rng_range(r, 1, IMG - 2);
        spy[k] = rng_range(r, 1, IMG - 2);
        spr[k] = rng_range(r, 0.6, 1.4);
    }

    double background = rng_range(r, 0.0, 0.3);
    double bright = rng_range(r, 0.4, 1.0);
    double sigma = rng_range(r, 0.08, 0.25);
    /* pixels farther than `reach` from every segment are not covered */
    double reach = thick / 2 + 0.5;
    minx += ox - reach;
    maxx += ox + reach;
    miny += oy - reach;
    maxy += oy + reach;
    for (int py = 0; py < IMG; ++py)
        for (int px = 0; px < IMG; px += 2) {
            double noise[2];
            rng_normal2(r, &noise[0], &noise[1]);
            for (int q = 0; q < 2; ++q) {
                double x = px + q, cover = 0;
                if (x >= minx && x <= maxx && py >= miny && py <= maxy) {
                    double d2 = 1e18;
                    for (int k = 0; k < nseg; ++k)
                        d2 = fmin(d2, seg_distance2(&seg[k], x, py));
                    /* anti-aliased coverage of a stroke `thick` wide */
                    if (d2 < reach * reach)
                        cover = fmin(1.0, reach - sqrt(d2));
                }
                for (int k = 0; k < nspeck; ++k) {
                    double e2 = (x - spx[k]) * (x - spx[k]) + (py - spy[k]) * (py - spy[k]);
                    double rr = spr[k] + 0.5;
                    if (e2 < rr * rr)
                        cover = fmax(cover, fmin(1.0, rr - sqrt(e2)));
                }
                img[py * IMG + px + q] = (float)(background + bright * cover + sigma * noise[q]);
            }
        }
}

/* n images, classes in turn (balanced); stream selects the training or the
 * held-out stream of the seed. */
static dataset make_dataset(int n, uint64_t seed, uint64_t stream)
{
    dataset d;
    d.n = n;
    d.x = xcalloc((size_t)n * IMG * IMG, sizeof(float));
    d.y = xcalloc((size_t)n, 1);
    rng r;
    rng_seed(&r, seed, stream);
    for (int i = 0; i < n; ++i) {
        d.y[i] = (unsigned char)(i % NCLASSES);
        draw_shape(&r, d.y[i], d.x + (size_t)i * IMG * IMG);
    }
    return d;
}

/* Standardises both sets with the training set's mean and deviation. */
static void normalise(dataset *train, dataset *test)
{
    double sum = 0, sum2 = 0;
    size_t n = (size_t)train->n * IMG * IMG;
    for (size_t i = 0; i < n; ++i) {
        sum += train->x[i];
        sum2 += (double)train->x[i] * train->x[i];
    }
    double mean = sum / (double)n;
    double var = sum2 / (double)n - mean * mean;
    double inv = var > 1e-12 ? 1.0 / sqrt(var) : 1.0;
    dataset *sets[2] = {train, test};
    for (int s = 0; s < 2; ++s) {
        size_t m = (size_t)sets[s]->n * IMG * IMG;
        for (size_t i = 0; i < m; ++i)
            sets[s]->x[i] = (float)((sets[s]->x[i] - mean) * inv);
    }
}

static void free_dataset(dataset *d)
{
    free(d->x);
    free(d->y);
}

/* ---- the network -------------------------------------------------------------- */

/* The parameters, one array: conv1 w and b, conv2 w and b, linear w and b. */
enum {
    W1_N = C1 * 3 * 3 * 1,
    B1_N = C1,
    W2_N = C2 * 3 * 3 * C1,
    B2_N = C2,
    WF_N = NCLASSES * FEAT,
    BF_N = NCLASSES,
    OFF_W1 = 0,
    OFF_B1 = OFF_W1 + W1_N,
    OFF_W2 = OFF_B1 + B1_N,
    OFF_B2 = OFF_W2 + W2_N,
    OFF_WF = OFF_B2 + B2_N,
    OFF_BF = OFF_WF + WF_N,
    NPARAM = OFF_BF + BF_N
};

typedef struct net {
    cg_layout layout;
    int core_mask;
    int cap; /* the most images one pass holds */
    float param[NPARAM], grad[NPARAM], velocity[NPARAM];
    unsigned char decays[NPARAM]; /* weight decay applies here (weights, not biases) */
    /* activations, for `cap` images */
    float *x;      /* [cap][1][IMG][IMG] (the same in both layouts: one channel) */
    float *a1;     /* conv1 output, ReLU applied in place: [cap] x C1 x H1 x H1 */
    float *p1;     /* first pool: [cap] x C1 x P1 x P1 */
    int *i1;       /* where each p1 element came from in a1 */
    float *a2;     /* conv2 output, ReLU in place: [cap] x C2 x H2 x H2 */
    float *p2;     /* second pool: [cap][FEAT] */
    int *i2;       /* where each p2 element came from in a2 */
    float *logits; /* [cap][NCLASSES] */
    /* gradients of the activations */
    float *dlogits, *dp2, *da2, *dp1, *da1;
    double conv_seconds; /* time spent in cg_conv2d_* calls */
} net;

/* One timed cg_conv2d_* call of layer `layer`, its status checked. */
#define CONV_CALL(m, layer, fn, ...)                                                               \
    do {                                                                                           \
        double t_ = now_s();                                                                       \
        cg_status s_ = fn(__VA_ARGS__);                                                            \
        (m)->conv_seconds += now_s() - t_;                                                         \
        check(s_, #fn, layer);                                                                     \
    } while (0)

static cg_conv2d conv_desc(cg_layout layout, int batch, int side, int in_c, int out_c)
{
    cg_conv2d c = {.layout = layout,
                   .batch = batch,
                   .in_h = side,
                   .in_w = side,
                   .in_c = in_c,
                   .out_c = out_c,
                   .kernel_h = 3,
                   .kernel_w = 3,
                   .groups = 1,
                   .stride_h = 1,
                   .stride_w = 1,
                   .dilation_h = 1,
                   .dilation_w = 1,
                   .pad_top = 1,
                   .pad_bottom = 1,
                   .pad_left = 1,
                   .pad_right = 1};
    return c;
}

static cg_conv2d conv1_desc(const net *m, int batch)
{
    return conv_desc(m->layout, batch, IMG, 1, C1);
}
static cg_conv2d conv2_desc(const net *m, int batch)
{
    return conv_desc(m->layout, batch, P1, C1, C2);
}

/* Offset of element (n, c, h, w) of a [batch] x c_n x side x side tensor. */
static size_t at(cg_layout layout, int n, int c, int h, int w, int c_n, int side)
{
    if (layout == CG_LAYOUT_NHWC)
        return (((size_t)n * side + h) * side + w) * c_n + c;
    return (((size_t)n * c_n + c) * side + h) * side + w;
}

/* He initialisation (normal, std sqrt(2/fan_in)) for the convolutions; the
 * linear layer (no ReLU after it) gets a tenth of std sqrt(1/fan_in), so that
 * the first predictions are close to uniform (loss near ln 6); biases 0. The
 * values are drawn in the NHWC order (OHWI weights, the linear layer's
 * features in (h, w, c) order) and moved to NCHW positions under NCHW, so
 * both layouts start from the same network. */
static void init_params(net *m, uint64_t seed)
{
    rng r;
    rng_seed(&r, seed, STREAM_INIT);
    memset(m->param, 0, sizeof m->param);
    memset(m->velocity, 0, sizeof m->velocity);
    memset(m->decays, 0, sizeof m->decays);
    const double s1 = sqrt(2.0 / 9), s2 = sqrt(2.0 / (9 * C1)), sf = 0.1 * sqrt(1.0 / FEAT);
    int nchw = m->layout == CG_LAYOUT_NCHW;
    for (int o = 0; o < C1; ++o)
        for (int k = 0; k < 9; ++k) /* one input channel: OHWI = OIHW */
            m->param[OFF_W1 + o * 9 + k] = (float)(s1 * rng_normal(&r));
    for (int o = 0; o < C2; ++o)
        for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
                for (int i = 0; i < C1; ++i) {
                    int pos =
                        nchw ? ((o * C1 + i) * 3 + kh) * 3 + kw : ((o * 3 + kh) * 3 + kw) * C1 + i;
                    m->param[OFF_W2 + pos] = (float)(s2 * rng_normal(&r));
                }
    for (int k = 0; k < NCLASSES; ++k)
        for (int h = 0; h < P2; ++h)
            for (int w = 0; w < P2; ++w)
                for (int c = 0; c < C2; ++c) {
                    size_t pos = at(m->layout, 0, c, h, w, C2, P2);
                    m->param[OFF_WF + k * FEAT + pos] = (float)(sf * rng_normal(&r));
                }
    for (int i = 0; i < NPARAM; ++i)
        m->decays[i] = (i >= OFF_W1 && i < OFF_B1) || (i >= OFF_W2 && i < OFF_B2) ||
                       (i >= OFF_WF && i < OFF_BF);
}

static void net_alloc(net *m, int cap)
{
    size_t c = (size_t)cap;
    m->cap = cap;
    m->x = xcalloc(c * IMG * IMG, sizeof(float));
    m->a1 = xcalloc(c * C1 * H1 * H1, sizeof(float));
    m->p1 = xcalloc(c * C1 * P1 * P1, sizeof(float));
    m->i1 = xcalloc(c * C1 * P1 * P1, sizeof(int));
    m->a2 = xcalloc(c * C2 * H2 * H2, sizeof(float));
    m->p2 = xcalloc(c * FEAT, sizeof(float));
    m->i2 = xcalloc(c * FEAT, sizeof(int));
    m->logits = xcalloc(c * NCLASSES, sizeof(float));
    m->dlogits = xcalloc(c * NCLASSES, sizeof(float));
    m->dp2 = xcalloc(c * FEAT, sizeof(float));
    m->da2 = xcalloc(c * C2 * H2 * H2, sizeof(float));
    m->dp1 = xcalloc(c * C1 * P1 * P1, sizeof(float));
    m->da1 = xcalloc(c * C1 * H1 * H1, sizeof(float));
}

static void net_free(net *m)
{
    free(m->x);
    free(m->a1);
    free(m->p1);
    free(m->i1);
    free(m->a2);
    free(m->p2);
    free(m->i2);
    free(m->logits);
    free(m->dlogits);
    free(m->dp2);
    free(m->da2);
    free(m->dp1);
    free(m->da1);
}

static void relu(float *a, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        a[i] = a[i] > 0 ? a[i] : 0;
}

/* 2x2 max pool, stride 2: out [batch] x c_n x side/2 x side/2 from in
 * [batch] x c_n x side x side; idx keeps the offset in `in` of each maximum. */
static void maxpool(cg_layout layout, const float *in, float *out, int *idx, int batch, int c_n,
                    int side)
{
    const int half = side / 2;
    /* the window's four offsets from its top-left element, and the step
     * between channels in `in` and in `out` */
    const size_t row = layout == CG_LAYOUT_NHWC ? (size_t)side * c_n : (size_t)side;
    const size_t col = layout == CG_LAYOUT_NHWC ? (size_t)c_n : 1;
    const size_t win[4] = {0, col, row, row + col};
    for (int n = 0; n < batch; ++n)
        for (int h = 0; h < half; ++h)
            for (int w = 0; w < half; ++w) {
                size_t first = at(layout, n, 0, 2 * h, 2 * w, c_n, side);
                size_t po = at(layout, n, 0, h, w, c_n, half);
                size_t in_step = layout == CG_LAYOUT_NHWC ? 1 : (size_t)side * side;
                size_t out_step = layout == CG_LAYOUT_NHWC ? 1 : (size_t)half * half;
                for (int c = 0; c < c_n; ++c, first += in_step, po += out_step) {
                    size_t best = first;
                    for (int k = 1; k < 4; ++k)
                        if (in[first + win[k]] > in[best])
                            best = first + win[k];
                    out[po] = in[best];
                    idx[po] = (int)best;
                }
            }
}

/* The pool's backward pass followed by the ReLU's: din is zero except at the
 * maxima, where it takes dout, and only where the activation was positive. */
static void maxpool_relu_backward(const float *dout, const int *idx, size_t nout, const float *act,
                                  float *din, size_t nin)
{
    memset(din, 0, nin * sizeof(float));
    for (size_t i = 0; i < nout; ++i)
        if (act[idx[i]] > 0)
            din[idx[i]] = dout[i];
}

/* Forward pass of m->x (batch images) up to m->logits. */
static void forward(net *m, int batch)
{
    cg_conv2d d1 = conv1_desc(m, batch), d2 = conv2_desc(m, batch);
    CONV_CALL(m, "conv1", cg_conv2d_forward, &d1, m->x, m->param + OFF_W1, m->param + OFF_B1, m->a1,
              m->core_mask);
    relu(m->a1, (size_t)batch * C1 * H1 * H1);
    maxpool(m->layout, m->a1, m->p1, m->i1, batch, C1, H1);
    CONV_CALL(m, "conv2", cg_conv2d_forward, &d2, m->p1, m->param + OFF_W2, m->param + OFF_B2,
              m->a2, m->core_mask);
    relu(m->a2, (size_t)batch * C2 * H2 * H2);
    maxpool(m->layout, m->a2, m->p2, m->i2, batch, C2, H2);
    const float *wf = m->param + OFF_WF, *bf = m->param + OFF_BF;
    for (int n = 0; n < batch; ++n) {
        const float *f = m->p2 + (size_t)n * FEAT;
        for (int k = 0; k < NCLASSES; ++k) {
            const float *wk = wf + (size_t)k * FEAT;
            /* eight partial sums, so that the compiler can vectorise */
            float part[8] = {0};
            for (int j = 0; j < FEAT; j += 8)
                for (int q = 0; q < 8; ++q)
                    part[q] += wk[j + q] * f[j + q];
            float s = bf[k];
            for (int q = 0; q < 8; ++q)
                s += part[q];
            m->logits[n * NCLASSES + k] = s;
        }
    }
}

/* Softmax cross-entropy of m->logits against labels: returns the summed loss,
 * adds the number of correct predictions to *correct, and when dlogits is
 * not NULL writes the gradient of the batch's mean loss there. */
static double softmax_xent(const net *m, const unsigned char *labels, int batch, int *correct,
                           float *dlogits)
{
    double total = 0;
    for (int n = 0; n < batch; ++n) {
        const float *z = m->logits + n * NCLASSES;
        int best = 0;
        float zmax = z[0];
        for (int k = 1; k < NCLASSES; ++k)
            if (z[k] > zmax) {
                zmax = z[k];
                best = k;
            }
        double e[NCLASSES], sum = 0;
        for (int k = 0; k < NCLASSES; ++k)
            sum += e[k] = exp((double)z[k] - zmax);
        total += log(sum) - ((double)z[labels[n]] - zmax);
        *correct += best == labels[n];
        if (dlogits)
            for (int k = 0; k < NCLASSES; ++k)
                dlogits[n * NCLASSES + k] =
                    (float)((e[k] / sum - (k == labels[n] ? 1.0 : 0.0)) / batch);
    }
    return total;
}

/* Backward pass from m->dlogits: every gradient into m->grad. */
static void backward(net *m, int batch)
{
    cg_conv2d d1 = conv1_desc(m, batch), d2 = conv2_desc(m, batch);
    float *wf = m->param + OFF_WF;
    float *gwf = m->grad + OFF_WF, *gbf = m->grad + OFF_BF;
    /* linear layer */
    memset(gwf, 0, (size_t)WF_N * sizeof(float));
    memset(gbf, 0, (size_t)BF_N * sizeof(float));
    for (int n = 0; n < batch; ++n) {
        const float *f = m->p2 + (size_t)n * FEAT;
        const float *g = m->dlogits + n * NCLASSES;
        float *df = m->dp2 + (size_t)n * FEAT;
        for (int j = 0; j < FEAT; ++j)
            df[j] = 0;
        for (int k = 0; k < NCLASSES; ++k) {
            const float gk = g[k];
            float *gw = gwf + (size_t)k * FEAT;
            const float *wk = wf + (size_t)k * FEAT;
            for (int j = 0; j < FEAT; ++j) {
                gw[j] += gk * f[j];
                df[j] += gk * wk[j];
            }
            gbf[k] += gk;
        }
    }
    /* second pool and ReLU, then conv2: weights, bias, and its input's gradient */
    maxpool_relu_backward(m->dp2, m->i2, (size_t)batch * FEAT, m->a2, m->da2,
                          (size_t)batch * C2 * H2 * H2);
    CONV_CALL(m, "conv2", cg_conv2d_backward_weights, &d2, m->p1, m->da2, m->grad + OFF_W2,
              m->core_mask);
    CONV_CALL(m, "conv2", cg_conv2d_backward_bias, &d2, m->da2, m->grad + OFF_B2, m->core_mask);
    CONV_CALL(m, "conv2", cg_conv2d_backward_data, &d2, m->da2, m->param + OFF_W2, m->dp1,
              m->core_mask);
    /* first pool and ReLU, then conv1's weights and bias (the image needs no gradient) */
    maxpool_relu_backward(m->dp1, m->i1, (size_t)batch * C1 * P1 * P1, m->a1, m->da1,
                          (size_t)batch * C1 * H1 * H1);
    CONV_CALL(m, "conv1", cg_conv2d_backward_weights, &d1, m->x, m->da1, m->grad + OFF_W1,
              m->core_mask);
    CONV_CALL(m, "conv1", cg_conv2d_backward_bias, &d1, m->da1, m->grad + OFF_B1, m->core_mask);
}

/* SGD with momentum: v = mu v + g + wd w; w -= lr v. */
static void sgd_step(net *m, float lr)
{
    for (int i = 0; i < NPARAM; ++i) {
        float g = m->grad[i] + (m->decays[i] ? WEIGHT_DECAY * m->param[i] : 0.0f);
        m->velocity[i] = MOMENTUM * m->velocity[i] + g;
        m->param[i] -= lr * m->velocity[i];
    }
}

/* The learning rate of step `step` (0-based) of `total`: a linear warm-up
 * over the first 5% of the steps (at least 50 steps, or half of a shorter
 * run), then a cosine decay from lr0 to 0. Without the warm-up, the first
 * steps at the full rate throw some seeds' networks into a state they take
 * epochs to leave (the linear layer sees 784 large non-negative features). */
static float learning_rate(double lr0, long step, long total)
{
    double warm = fmax(0.05 * (double)total, fmin(50.0, 0.5 * (double)total));
    double lr = lr0 * 0.5 * (1 + cos(PI * (double)step / (double)total));
    if ((double)step < warm)
        lr *= (double)(step + 1) / warm;
    return (float)lr;
}

/* Mean loss and accuracy (%) of the network on a whole set, forward only. */
static void evaluate(net *m, const dataset *d, double *loss, double *acc)
{
    double total = 0;
    int correct = 0;
    for (int start = 0; start < d->n; start += m->cap) {
        int b = d->n - start < m->cap ? d->n - start : m->cap;
        memcpy(m->x, d->x + (size_t)start * IMG * IMG, (size_t)b * IMG * IMG * sizeof(float));
        forward(m, b);
        total += softmax_xent(m, d->y + start, b, &correct, NULL);
    }
    *loss = total / d->n;
    *acc = 100.0 * correct / d->n;
}

/* ---- options ------------------------------------------------------------------ */

typedef struct options {
    int core_mask;
    int cores_given, mask_given;
    int epochs, batch, train, test; /* -1: the default (or --quick's) */
    double lr, target;              /* lr -1: likewise */
    uint64_t seed;
    const char *out_dir;
    cg_layout layout;
    int quick;
    int no_plot;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROGRAM " [options]\n"
            "\n"
            "Trains a small CNN (conv 3x3 1->8, ReLU, max pool, conv 3x3 8->16, ReLU, max pool,\n"
            "linear 784->6, softmax cross-entropy) on synthetic 28x28 images of six shapes\n"
            "(horizontal bar, vertical bar, the two diagonals, square outline, cross) at random\n"
            "positions, sizes, thicknesses and tilts, with noise. Every convolution (forward,\n"
            "input gradient, weight gradient, bias gradient) runs on convgrad's cg_conv2d_*\n"
            "on the cores of the mask; the rest is plain C.\n"
            "\n"
            "Target: held-out accuracy >= %.0f%%, which the default run reaches in under\n"
            "10 s on 2 cores (98-99%% over seeds; docs/training.md); under --quick, that\n"
            "the training loss falls.\n"
            "\n"
            "  --cores N        run the convolutions on cores 0..N-1 (1-32; default: one\n"
            "                   per online CPU)\n"
            "  --mask HEX       the core mask itself, e.g. 0x5 (instead of --cores)\n"
            "  --epochs N       passes over the training set (default %d)\n"
            "  --batch N        mini-batch size (default %d)\n"
            "  --lr X           peak learning rate (default %g): linear warm-up over the\n"
            "                   first 5%% of the steps (at least 50, or half of a shorter\n"
            "                   run), then cosine decay to 0; momentum %.1f, weight decay %g\n"
            "  --train N        training images (default %d)\n"
            "  --test N         held-out images (default %d)\n"
            "  --seed N         seed of the data, the initial weights and the shuffles\n"
            "                   (default %u)\n"
            "  --layout L       nhwc (default, the library's native layout) or nchw\n"
            "  --target P       held-out accuracy in %% to reach (default %.0f; 0: none)\n"
            "  --out DIR        where train_cnn.csv, train_cnn.png and metadata.csv (the\n"
            "                   build and the CPU) go (default %s, under the current\n"
            "                   directory)\n"
            "  --no-plot        do not run gnuplot\n"
            "  --quick          smoke test: %d training and %d held-out images, %d epochs,\n"
            "                   batch %d, lr %g (explicit options still apply); the target\n"
            "                   is that the last epoch's mean training loss is below the\n"
            "                   first mini-batch's loss\n"
            "  --version        print \"" PROGRAM " VERSION\" (the library's) and exit\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 when the target is reached; 1 on a failure at run time (the\n"
            "target missed or the training diverged, a convgrad call failed, an output\n"
            "could not be written, e.g. an --out that cannot be made, or memory ran out);\n"
            "2 on bad usage (an unknown option or a bad value).\n",
            DEF_TARGET, DEF_EPOCHS, DEF_BATCH, DEF_LR, (double)MOMENTUM, (double)WEIGHT_DECAY,
            DEF_TRAIN, DEF_TEST, (unsigned)DEF_SEED, DEF_TARGET, DEF_OUT, QUICK_TRAIN, QUICK_TEST,
            QUICK_EPOCHS, QUICK_BATCH, QUICK_LR);
}

static int bad_option(const char *fmt, const char *a, const char *v)
{
    fprintf(stderr, PROGRAM ": ");
    fprintf(stderr, fmt, a, v);
    fprintf(stderr, "\n(" PROGRAM " --help lists the options)\n");
    return -1;
}

/* A whole decimal integer in [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = o->batch = o->train = o->test = -1;
    o->lr = -1;
    o->target = DEF_TARGET;
    o->seed = DEF_SEED;
    o->out_dir = DEF_OUT;
    o->layout = CG_LAYOUT_NHWC;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = NULL;
        char name[64];
        /* --name=value is accepted as well as --name value */
        const char *eq = strchr(a, '=');
        if (eq && a[0] == '-' && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            v = eq + 1;
            a = name;
        }
        int takes_value = !strcmp(a, "--cores") || !strcmp(a, "--mask") || !strcmp(a, "--epochs") ||
                          !strcmp(a, "--batch") || !strcmp(a, "--lr") || !strcmp(a, "--train") ||
                          !strcmp(a, "--test") || !strcmp(a, "--seed") || !strcmp(a, "--out") ||
                          !strcmp(a, "--layout") || !strcmp(a, "--target");
        if (takes_value && !v) {
            if (i + 1 >= argc)
                return bad_option("%s needs a value%s", a, "");
            v = argv[++i];
        } else if (!takes_value && v) {
            return bad_option("%s takes no value (got '%s')", a, v);
        }
        long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--version")) {
            printf(PROGRAM " %s\n", cg_version());
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--no-plot")) {
            o->no_plot = 1;
        } else if (!strcmp(a, "--cores")) {
            if (parse_long(v, 1, 32, &n))
                return bad_option("%s wants a core count from 1 to 32, not '%s'", a, v);
            o->core_mask = n == 32 ? (int)0xFFFFFFFFu : (int)((1u << n) - 1);
            o->cores_given = 1;
        } else if (!strcmp(a, "--mask")) {
            const char *h = v;
            if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
                h += 2;
            char *end;
            errno = 0;
            unsigned long long m = strtoull(h, &end, 16);
            if (!*h || *end || errno || h[0] == '-' || h[0] == '+' || m == 0 || m > 0xFFFFFFFFull)
                return bad_option("%s wants a non-zero hexadecimal mask of cores 0-31, e.g. "
                                  "0x3, not '%s'",
                                  a, v);
            o->core_mask = (int)(uint32_t)m;
            o->mask_given = 1;
        } else if (!strcmp(a, "--epochs")) {
            if (parse_long(v, 1, 1000, &n))
                return bad_option("%s wants a count from 1 to 1000, not '%s'", a, v);
            o->epochs = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (parse_long(v, 1, 4096, &n))
                return bad_option("%s wants a size from 1 to 4096, not '%s'", a, v);
            o->batch = (int)n;
        } else if (!strcmp(a, "--train")) {
            if (parse_long(v, 1, 1000000, &n))
                return bad_option("%s wants an image count from 1 to 1000000, not '%s'", a, v);
            o->train = (int)n;
        } else if (!strcmp(a, "--test")) {
            if (parse_long(v, 1, 1000000, &n))
                return bad_option("%s wants an image count from 1 to 1000000, not '%s'", a, v);
            o->test = (int)n;
        } else if (!strcmp(a, "--lr") || !strcmp(a, "--target")) {
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            int is_lr = !strcmp(a, "--lr");
            if (!*v || *end || errno || !isfinite(d) ||
                (is_lr ? d <= 0 || d > 10 : d < 0 || d > 100))
                return bad_option(is_lr ? "%s wants a positive rate up to 10, e.g. 0.01, not '%s'"
                                        : "%s wants a percentage from 0 to 100, not '%s'",
                                  a, v);
            if (is_lr)
                o->lr = d;
            else
                o->target = d;
        } else if (!strcmp(a, "--seed")) {
            /* decimal, or hexadecimal after 0x */
            int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
            const char *digits = hex ? v + 2 : v;
            char *end;
            errno = 0;
            unsigned long long s = strtoull(digits, &end, hex ? 16 : 10);
            if (!isxdigit((unsigned char)digits[0]) || *end || errno)
                return bad_option("%s wants a non-negative integer, not '%s'", a, v);
            o->seed = (uint64_t)s;
        } else if (!strcmp(a, "--out")) {
            if (!*v)
                return bad_option("%s wants a directory%s", a, "");
            o->out_dir = v;
        } else if (!strcmp(a, "--layout")) {
            if (!strcmp(v, "nhwc") || !strcmp(v, "NHWC"))
                o->layout = CG_LAYOUT_NHWC;
            else if (!strcmp(v, "nchw") || !strcmp(v, "NCHW"))
                o->layout = CG_LAYOUT_NCHW;
            else
                return bad_option("%s is nhwc or nchw, not '%s'", a, v);
        } else {
            return bad_option("unknown option '%s'%s", a, "");
        }
    }
    if (o->cores_given && o->mask_given)
        return bad_option("%s and %s exclude each other", "--cores", "--mask");
    if (!o->cores_given && !o->mask_given) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus < 1)
            cpus = 1;
        if (cpus > 32)
            cpus = 32;
        o->core_mask = cpus == 32 ? (int)0xFFFFFFFFu : (int)((1u << cpus) - 1);
    }
    if (o->lr < 0)
        o->lr = o->quick ? QUICK_LR : DEF_LR;
    if (o->epochs < 0)
        o->epochs = o->quick ? QUICK_EPOCHS : DEF_EPOCHS;
    if (o->batch < 0)
        o->batch = o->quick ? QUICK_BATCH : DEF_BATCH;
    if (o->train < 0)
        o->train = o->quick ? QUICK_TRAIN : DEF_TRAIN;
    if (o->test < 0)
        o->test = o->quick ? QUICK_TEST : DEF_TEST;
    return 0;
}

/* ---- progress and outputs ------------------------------------------------------ */

/* Within an epoch: on a terminal one line redrawn with \r (at most ten times
 * a second), otherwise a plain line at each quarter of the epoch. */
typedef struct progress {
    int tty;
    double last;
    int next_quarter;
    int width; /* of the line on the terminal */
} progress;

static void progress_update(progress *p, int epoch, int epochs, int b, int nb, double loss)
{
    if (p->tty) {
        double t = now_s();
        if (b < nb && t - p->last < 0.1)
            return;
        p->last = t;
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int fill = (int)((long)WIDTH * b / nb);
        for (int k = 0; k < WIDTH; ++k)
            bar[k] = k < fill ? '#' : '.';
        bar[WIDTH] = 0;
        p->width =
            printf("\r  epoch %d/%d [%s] batch %d/%d  loss %.4f ", epoch, epochs, bar, b, nb, loss);
        fflush(stdout);
    } else if (nb >= 8 && p->next_quarter < 4 && b >= p->next_quarter * nb / 4) {
        printf("  epoch %d/%d: batch %d/%d, running loss %.4f\n", epoch, epochs, b, nb, loss);
        fflush(stdout);
        p->next_quarter++;
    }
}

static void progress_clear(const progress *p)
{
    if (p->tty) {
        printf("\r%*s\r", p->width, "");
        fflush(stdout);
    }
}

typedef struct epoch_row {
    double train_loss, train_acc, test_loss, test_acc, seconds, conv_seconds, lr;
} epoch_row;

static int write_csv(const char *path, const epoch_row *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "epoch,train_loss,train_acc_pct,test_loss,test_acc_pct,seconds,conv_seconds,lr_end\n");
    for (int e = 0; e < n; ++e)
        fprintf(f, "%d,%.6f,%.3f,%.6f,%.3f,%.3f,%.3f,%.6g\n", e + 1, rows[e].train_loss,
                rows[e].train_acc, rows[e].test_loss, rows[e].test_acc, rows[e].seconds,
                rows[e].conv_seconds, rows[e].lr);
    return fclose(f) == 0 ? 0 : -1;
}

/* dir quoted for sh: '...' with each ' written as '\''. */
static int shell_quote(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    if (cap < 3)
        return -1;
    out[k++] = '\'';
    for (; *s; ++s) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t len = piece ? 4 : 1;
        if (k + len + 2 > cap)
            return -1;
        if (piece) {
            memcpy(out + k, piece, len);
        } else {
            out[k] = *s;
        }
        k += len;
    }
    out[k++] = '\'';
    out[k] = 0;
    return 0;
}

/* train_cnn.png from train_cnn.csv with gnuplot: loss and accuracy against
 * the epoch. Returns 1 when the PNG was written, else 0 with the reason. */
static int write_plot(const char *dir, int no_plot, int epochs, double target, const char *title,
                      char *why, size_t whylen)
{
    if (no_plot) {
        snprintf(why, whylen, "--no-plot");
        return 0;
    }
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(why, whylen, "gnuplot not found (apt-get install gnuplot-nox)");
        return 0;
    }
    const char *term = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0
                           ? "pngcairo font ',10'"
                           : "png";
    char path[4200];
    snprintf(path, sizeof path, "%s/train_cnn.gp", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    fprintf(f, "# written by " PROGRAM "; run from this directory: gnuplot train_cnn.gp\n");
    fprintf(f, "set terminal %s size 1200,480\nset termoption noenhanced\n", term);
    fprintf(f, "set output 'train_cnn.png'\nset datafile separator ','\n");
    fprintf(f, "set multiplot layout 1,2 title '%s'\n", title);
    fprintf(f, "set xlabel 'epoch'\nset grid\nset key top right\n");
    if (epochs == 1)
        fprintf(f, "set xrange [0.5:1.5]\n");
    if (epochs <= 20)
        fprintf(f, "set xtics 1\n");
    fprintf(f, "set title 'loss (softmax cross-entropy)'\nset ylabel 'loss'\nset yrange [0:*]\n");
    fprintf(f, "plot 'train_cnn.csv' skip 1 using 1:2 with linespoints lw 2 title 'training', "
               "'' skip 1 using 1:4 with linespoints lw 2 title 'held-out'\n");
    fprintf(f, "set title 'accuracy'\nset ylabel 'accuracy (%%)'\nset yrange [*:100]\n"
               "set key bottom right\n");
    fprintf(f, "plot 'train_cnn.csv' skip 1 using 1:3 with linespoints lw 2 title 'training', "
               "'' skip 1 using 1:5 with linespoints lw 2 title 'held-out'");
    if (target > 0)
        fprintf(f, ", %.3f with lines dt 2 lc rgb 'black' title 'target %.0f%%'", target, target);
    fprintf(f, "\nunset multiplot\n");
    if (fclose(f) != 0) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    char quoted[8400], cmd[8600];
    if (shell_quote(dir, quoted, sizeof quoted)) {
        snprintf(why, whylen, "the directory name is too long for the shell command");
        return 0;
    }
    snprintf(cmd, sizeof cmd, "cd %s && gnuplot train_cnn.gp > train_cnn_gnuplot.log 2>&1", quoted);
    if (system(cmd) != 0) {
        snprintf(why, whylen, "gnuplot failed (see %.200s/train_cnn_gnuplot.log)", dir);
        return 0;
    }
    return 1;
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o))
        return EXIT_BAD_OPTION;
    const double t_start = now_s();
    /* every file goes to out (absolute): a bad --out fails here, before the training */
    char out[4096];
    if (tool_open_out(PROGRAM, o.out_dir, argc, argv, out, sizeof out) != 0)
        return EXIT_ERROR;

    net *m = xcalloc(1, sizeof *m);
    m->layout = o.layout;
    m->core_mask = o.core_mask;
    int cap = o.batch > EVAL_CHUNK ? o.batch : EVAL_CHUNK;
    net_alloc(m, cap);
    /* the descriptors are valid for every batch this run uses */
    cg_conv2d d1 = conv1_desc(m, cap), d2 = conv2_desc(m, cap);
    check(cg_conv2d_check(&d1), "cg_conv2d_check", "conv1");
    check(cg_conv2d_check(&d2), "cg_conv2d_check", "conv2");
    if (cg_conv2d_output_h(&d1) != H1 || cg_conv2d_output_w(&d2) != H2) {
        fprintf(stderr, PROGRAM ": unexpected output sizes %dx%d and %dx%d\n",
                cg_conv2d_output_h(&d1), cg_conv2d_output_w(&d1), cg_conv2d_output_h(&d2),
                cg_conv2d_output_w(&d2));
        return EXIT_ERROR;
    }

    int ncores = GetCoreNum(o.core_mask);
    const char *layout_name = o.layout == CG_LAYOUT_NHWC ? "NHWC/OHWI" : "NCHW/OIHW";
    printf(PROGRAM ": %s\nCPU: %s\n", tool_build_text(), tool_cpu_text());
    printf(PROGRAM ": %d classes (", NCLASSES);
    for (int k = 0; k < NCLASSES; ++k)
        printf("%s%s", k ? ", " : "", class_names[k]);
    printf("), 28x28 images\n");
    printf("  %d training / %d held-out images, seed %llu; %s, %d core%s (mask 0x%x)\n", o.train,
           o.test, (unsigned long long)o.seed, layout_name, ncores, ncores == 1 ? "" : "s",
           (unsigned)o.core_mask);
    printf("  %d epoch%s, batch %d, lr %g (warm-up, cosine to 0), momentum %.1f, weight decay "
           "%g%s\n",
           o.epochs, o.epochs == 1 ? "" : "s", o.batch, o.lr, (double)MOMENTUM,
           (double)WEIGHT_DECAY, o.quick ? "; --quick" : "");
    if (o.quick)
        printf("  target: the last epoch's mean training loss below the first batch's\n");
    else if (o.target > 0)
        printf("  target: held-out accuracy >= %.2f%%\n", o.target);
    fflush(stdout);

    double t0 = now_s();
    dataset train = make_dataset(o.train, o.seed, STREAM_TRAIN_DATA);
    dataset test = make_dataset(o.test, o.seed, STREAM_TEST_DATA);
    normalise(&train, &test);
    double t_data = now_s() - t0;
    printf("  data generated in %.2f s\n", t_data);
    fflush(stdout);

    init_params(m, o.seed);
    rng shuffle;
    rng_seed(&shuffle, o.seed, STREAM_SHUFFLE);
    int *perm = xcalloc((size_t)o.train, sizeof(int));
    for (int i = 0; i < o.train; ++i)
        perm[i] = i;
    unsigned char *labels = xcalloc((size_t)o.batch, 1);
    epoch_row *rows = xcalloc((size_t)o.epochs, sizeof(epoch_row));

    const int nb = (o.train + o.batch - 1) / o.batch;
    const long total_steps = (long)nb * o.epochs;
    long step = 0;
    double first_batch_loss = -1;
    progress prog = {.tty = isatty(STDOUT_FILENO)};
    const double t_train = now_s();
    for (int e = 0; e < o.epochs; ++e) {
        const double te = now_s(), conv_before = m->conv_seconds;
        for (int i = o.train - 1; i > 0; --i) {
            int j = (int)rng_below(&shuffle, (uint32_t)i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        double loss_sum = 0;
        int correct = 0, seen = 0;
        float lr = 0;
        prog.last = 0;
        prog.next_quarter = 1;
        for (int b = 0; b < nb; ++b) {
            int start = b * o.batch;
            int bs = o.train - start < o.batch ? o.train - start : o.batch;
            for (int k = 0; k < bs; ++k) {
                int idx = perm[start + k];
                memcpy(m->x + (size_t)k * IMG * IMG, train.x + (size_t)idx * IMG * IMG,
                       IMG * IMG * sizeof(float));
                labels[k] = train.y[idx];
            }
            forward(m, bs);
            double loss = softmax_xent(m, labels, bs, &correct, m->dlogits);
            if (!isfinite(loss)) {
                progress_clear(&prog);
                fprintf(stderr,
                        PROGRAM ": the loss is not finite at epoch %d, batch %d: the training "
                                "diverged (try a lower --lr)\n",
                        e + 1, b + 1);
                return EXIT_TARGET_MISSED;
            }
            if (first_batch_loss < 0)
                first_batch_loss = loss / bs;
            loss_sum += loss;
            seen += bs;
            backward(m, bs);
            lr = learning_rate(o.lr, step, total_steps);
            sgd_step(m, lr);
            step++;
            progress_update(&prog, e + 1, o.epochs, b + 1, nb, loss_sum / seen);
        }
        progress_clear(&prog);
        epoch_row *row = &rows[e];
        row->train_loss = loss_sum / seen;
        row->train_acc = 100.0 * correct / seen;
        row->lr = lr;
        evaluate(m, &test, &row->test_loss, &row->test_acc);
        row->seconds = now_s() - te;
        row->conv_seconds = m->conv_seconds - conv_before;
        printf("epoch %*d/%d  train loss %.4f  acc %6.2f%%  |  held-out loss %.4f  acc %6.2f%%  "
               "|  %.2f s\n",
               o.epochs >= 10 ? 2 : 1, e + 1, o.epochs, row->train_loss, row->train_acc,
               row->test_loss, row->test_acc, row->seconds);
        fflush(stdout);
    }
    const double train_s = now_s() - t_train;

    char path[4200];
    snprintf(path, sizeof path, "%s/train_cnn.csv", out);
    if (write_csv(path, rows, o.epochs) != 0) {
        fprintf(stderr, PROGRAM ": cannot write %s: %s\n", path, strerror(errno));
        return EXIT_ERROR;
    }
    char why[512], title[256];
    snprintf(title, sizeof title, "train_cnn: %d training images, seed %llu, %s, %d core%s",
             o.train, (unsigned long long)o.seed, layout_name, ncores, ncores == 1 ? "" : "s");
    const int plotted =
        write_plot(out, o.no_plot, o.epochs, o.quick ? 0 : o.target, title, why, sizeof why);

    const epoch_row *last = &rows[o.epochs - 1];
    const double total_s = now_s() - t_start;
    printf("held-out accuracy %.2f%% (%d images), loss %.4f\n", last->test_acc, o.test,
           last->test_loss);
    printf("total time %.2f s: data %.2f s, training and evaluation %.2f s, of which %.2f s in "
           "cg_conv2d_* on %d core%s\n",
           total_s, t_data, train_s, m->conv_seconds, ncores, ncores == 1 ? "" : "s");
    int status = 0;
    if (o.quick) {
        int fell = last->train_loss < first_batch_loss;
        printf("%s: the last epoch's mean training loss %.4f is %s the first batch's %.4f\n",
               fell ? "PASS" : "FAIL", last->train_loss, fell ? "below" : "NOT below",
               first_batch_loss);
        status = fell ? 0 : EXIT_TARGET_MISSED;
    } else if (o.target > 0) {
        int met = last->test_acc >= o.target;
        printf("%s: held-out accuracy %.2f%% %s the target of %.2f%%\n", met ? "PASS" : "FAIL",
               last->test_acc, met ? "reaches" : "is BELOW", o.target);
        status = met ? 0 : EXIT_TARGET_MISSED;
    }

    if (!plotted)
        printf("plot skipped: %s (the curve is in the CSV)\n", why);
    printf("wrote %s: train_cnn.csv (the curve), %smetadata.csv (the build and the CPU)\n", out,
           plotted ? "train_cnn.png (its plot), " : "");

    free(rows);
    free(labels);
    free(perm);
    free_dataset(&train);
    free_dataset(&test);
    net_free(m);
    free(m);
    return status;
}
