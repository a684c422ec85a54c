/* SPDX-License-Identifier: MIT */
/* The example CNN's data: the generated task and the per-epoch shuffle.
 *
 * The generated task: 28x28 grayscale images of six shapes (a horizontal bar,
 * a vertical bar, the two diagonals, a square outline, a cross), each at a
 * random position, size, thickness and tilt (+-10 degrees), on a random
 * background level, with a random brightness, a few random specks and
 * additive Gaussian noise. The training and the held-out sets come from
 * different streams of one seed. */
#include "cnn.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IMG = CNN_IMG, PIXELS = CNN_IMG * CNN_IMG, GENERATED_CLASSES = 6 };

static const char *const generated_names[GENERATED_CLASSES] = {
    "horizontal bar", "vertical bar", "diagonal \\", "diagonal /", "square outline", "cross"};

static const double PI = CNN_PI;

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
static void draw_shape(cnn_rng *r, int cls, float *img)
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

static int alloc_dataset(cnn_dataset *d, int n)
{
    d->n = n;
    d->x = calloc((size_t)(n ? n : 1) * PIXELS, sizeof(float));
    d->y = calloc((size_t)(n ? n : 1), 1);
    if (!d->x || !d->y) {
        fprintf(stderr, "cnn: out of memory for %d images\n", n);
        return -1;
    }
    return 0;
}

/* n images, classes in turn (balanced), from stream `stream` of the seed. */
static int generate(cnn_dataset *d, int n, uint64_t seed, uint64_t stream)
{
    if (alloc_dataset(d, n))
        return -1;
    cnn_rng r;
    rng_seed(&r, seed, stream);
    for (int i = 0; i < n; ++i) {
        d->y[i] = (unsigned char)(i % GENERATED_CLASSES);
        draw_shape(&r, d->y[i], d->x + (size_t)i * PIXELS);
    }
    return 0;
}

/* Standardises both sets with the training set's mean and deviation. */
static void standardise(cnn_dataset *train, cnn_dataset *test)
{
    double sum = 0, sum2 = 0;
    size_t n = (size_t)train->n * PIXELS;
    for (size_t i = 0; i < n; ++i) {
        sum += train->x[i];
        sum2 += (double)train->x[i] * train->x[i];
    }
    double mean = sum / (double)n;
    double var = sum2 / (double)n - mean * mean;
    double inv = var > 1e-12 ? 1.0 / sqrt(var) : 1.0;
    cnn_dataset *sets[2] = {train, test};
    for (int s = 0; s < 2; ++s) {
        size_t m = (size_t)sets[s]->n * PIXELS;
        for (size_t i = 0; i < m; ++i)
            sets[s]->x[i] = (float)((sets[s]->x[i] - mean) * inv);
    }
}

int cnn_data_generated(cnn_data *d, int n_train, int n_test, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->name = "generated shapes";
    d->classes = GENERATED_CLASSES;
    d->class_names = generated_names;
    if (generate(&d->train, n_train, seed, STREAM_TRAIN_DATA) ||
        generate(&d->test, n_test, seed, STREAM_TEST_DATA)) {
        cnn_data_free(d);
        return -1;
    }
    standardise(&d->train, &d->test);
    return 0;
}

void cnn_data_free(cnn_data *d)
{
    free(d->train.x);
    free(d->train.y);
    free(d->test.x);
    free(d->test.y);
    memset(d, 0, sizeof *d);
}

/* ---- the shuffle -------------------------------------------------------------- */

int cnn_shuffle_init(cnn_shuffle *s, int n, uint64_t seed)
{
    rng_seed(&s->rng, seed, STREAM_SHUFFLE);
    s->n = n;
    s->order = calloc((size_t)(n ? n : 1), sizeof(int));
    if (!s->order) {
        fprintf(stderr, "cnn: out of memory for the order of %d images\n", n);
        return -1;
    }
    for (int i = 0; i < n; ++i)
        s->order[i] = i;
    return 0;
}

/* Fisher-Yates on the previous epoch's order. */
const int *cnn_shuffle_next(cnn_shuffle *s)
{
    int *p = s->order;
    for (int i = s->n - 1; i > 0; --i) {
        int j = (int)rng_below(&s->rng, (uint32_t)i + 1);
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

void cnn_shuffle_free(cnn_shuffle *s)
{
    free(s->order);
    s->order = NULL;
}

void cnn_gather(const cnn_dataset *d, const int *idx, int n, float *x, unsigned char *y)
{
    for (int k = 0; k < n; ++k) {
        memcpy(x + (size_t)k * PIXELS, d->x + (size_t)idx[k] * PIXELS, PIXELS * sizeof(float));
        y[k] = d->y[idx[k]];
    }
}
