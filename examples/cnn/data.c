/* SPDX-License-Identifier: MIT */
/* The example CNN's data: the generated task, Fashion-MNIST and the
 * per-epoch shuffle.
 *
 * The generated task: 28x28 grayscale images of six shapes (a horizontal bar,
 * a vertical bar, the two diagonals, a square outline, a cross), each at a
 * random position, size, thickness and tilt (+-10 degrees), on a random
 * background level, with a random brightness, a few random specks and
 * additive Gaussian noise. The training and the held-out sets come from
 * different streams of one seed. */
#include "cnn.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

/* ---- Fashion-MNIST ------------------------------------------------------------- */

enum { FASHION_CLASSES = 10, IDX_IMAGES = 0x803, IDX_LABELS = 0x801 };

static const char *const fashion_names[FASHION_CLASSES] = {
    "T-shirt/top", "trouser", "pullover", "dress", "coat",
    "sandal",      "shirt",   "sneaker",  "bag",   "ankle boot"};

/* An idx file's big-endian 32-bit words. */
static int read_be32(gzFile f, int count, uint32_t *out)
{
    unsigned char b[16];
    if (gzread(f, b, (unsigned)(4 * count)) != 4 * count)
        return -1;
    for (int i = 0; i < count; ++i)
        out[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
                 (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    return 0;
}

/* The first n items of the gzip'd idx file dir/name: images (28x28 bytes,
 * scaled to [0, 1] into d->x) when `magic` is IDX_IMAGES, labels (below
 * FASHION_CLASSES, into d->y) when it is IDX_LABELS. *count gets how many the
 * file holds. */
static int read_idx(const char *dir, const char *name, uint32_t magic, int n, cnn_dataset *d,
                    uint32_t *count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr,
                "cnn: cannot open %s: %s (Fashion-MNIST: apt-get install dataset-fashion-mnist, "
                "or --data-dir DIR names where its four files are)\n",
                path, errno ? strerror(errno) : "not a file zlib can read");
        return -1;
    }
    const int images = magic == IDX_IMAGES;
    const size_t item = images ? PIXELS : 1;
    uint32_t head[4] = {0}; /* magic, count, and for images rows, columns */
    unsigned char *buf = NULL;
    char why[128] = "";
    if (read_be32(f, 2, head) || (images && read_be32(f, 2, head + 2)))
        snprintf(why, sizeof why, "too short for an idx header");
    else if (head[0] != magic)
        snprintf(why, sizeof why, "not an idx file of %s (magic 0x%08x, not 0x%08x)",
                 images ? "images" : "labels", (unsigned)head[0], (unsigned)magic);
    else if (images && (head[2] != IMG || head[3] != IMG))
        snprintf(why, sizeof why, "of %ux%u images, not 28x28", (unsigned)head[2],
                 (unsigned)head[3]);
    else if (head[1] < (uint32_t)n)
        snprintf(why, sizeof why, "holding %u items, fewer than the %d asked for",
                 (unsigned)head[1], n);
    else if (!(buf = malloc((size_t)(n ? n : 1) * item)))
        snprintf(why, sizeof why, "too large for the memory");
    else if (gzread(f, buf, (unsigned)((size_t)n * item)) != (int)((size_t)n * item))
        snprintf(why, sizeof why, "cut short");
    for (int i = 0; !why[0] && i < n; ++i)
        if (images) {
            for (size_t p = 0; p < item; ++p)
                d->x[(size_t)i * item + p] = (float)buf[(size_t)i * item + p] / 255.0f;
        } else if (buf[i] >= FASHION_CLASSES) {
            snprintf(why, sizeof why, "with label %d at item %d, outside 0-9", buf[i], i);
        } else {
            d->y[i] = buf[i];
        }
    *count = head[1];
    free(buf);
    gzclose(f);
    if (why[0]) {
        fprintf(stderr, "cnn: %s: a Fashion-MNIST file %s\n", path, why);
        return -1;
    }
    return 0;
}

/* The first n images of one half (train or t10k) of the set; the image and
 * label files must hold as many items. */
static int read_fashion(cnn_dataset *d, const char *dir, const char *half, int n)
{
    char images[64], labels[64];
    snprintf(images, sizeof images, "%s-images-idx3-ubyte.gz", half);
    snprintf(labels, sizeof labels, "%s-labels-idx1-ubyte.gz", half);
    uint32_t n_images, n_labels;
    if (alloc_dataset(d, n) || read_idx(dir, images, IDX_IMAGES, n, d, &n_images) ||
        read_idx(dir, labels, IDX_LABELS, n, d, &n_labels))
        return -1;
    if (n_images != n_labels) {
        fprintf(stderr, "cnn: %s/%s holds %u images but %s %u labels\n", dir, images,
                (unsigned)n_images, labels, (unsigned)n_labels);
        return -1;
    }
    return 0;
}

int cnn_data_fashion_mnist(cnn_data *d, const char *dir, int n_train, int n_test)
{
    memset(d, 0, sizeof *d);
    d->name = "Fashion-MNIST";
    d->classes = FASHION_CLASSES;
    d->class_names = fashion_names;
    if (read_fashion(&d->train, dir, "train", n_train) ||
        read_fashion(&d->test, dir, "t10k", n_test)) {
        cnn_data_free(d);
        return -1;
    }
    standardise(&d->train, &d->test);
    return 0;
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
