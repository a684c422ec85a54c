/* SPDX-License-Identifier: MIT */
/* The example CNN:
 *   conv 3x3, 1 -> 8, pad 1  + ReLU + 2x2 max pool   28x28 -> 14x14
 *   conv 3x3, 8 -> 16, pad 1 + ReLU + 2x2 max pool   14x14 -> 7x7
 *   linear 784 -> classes, softmax cross-entropy
 * Every convolution (forward, input, weight and bias gradient) runs on
 * convgrad's cg_conv2d_*; ReLU, pooling, the linear layer, the loss and the
 * update are plain C. The tensors are NHWC with OHWI weights, or NCHW with
 * OIHW weights. */
#define _POSIX_C_SOURCE 200809L
#include "cnn.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    IMG = CNN_IMG,
    C1 = 8,              /* conv1 output channels */
    C2 = 16,             /* conv2 output channels */
    H1 = IMG,            /* conv1 output side (pad 1) */
    P1 = IMG / 2,        /* after the first pool */
    H2 = P1,             /* conv2 output side */
    P2 = P1 / 2,         /* after the second pool */
    FEAT = P2 * P2 * C2, /* a multiple of 8 */
    EVAL_CHUNK = 256     /* the most images one evaluation pass takes */
};

struct cnn_net {
    cg_layout layout;
    int core_mask;
    int classes;
    int cap; /* the most images one pass holds */
    /* the parameters, one array: each layer's weights then biases */
    size_t nparam, w_off[CNN_LAYERS], w_n[CNN_LAYERS], b_off[CNN_LAYERS], b_n[CNN_LAYERS];
    float *param, *grad, *velocity;
    unsigned char *decays; /* weight decay applies here (weights, not biases) */
    /* activations, for `cap` images; the input is the caller's */
    const float *x; /* [cap][1][IMG][IMG] (the same in both layouts: one channel) */
    float *a1;      /* conv1 output, ReLU applied in place: [cap] x C1 x H1 x H1 */
    float *p1;      /* first pool: [cap] x C1 x P1 x P1 */
    int *i1;        /* where each p1 element came from in a1 */
    float *a2;      /* conv2 output, ReLU in place: [cap] x C2 x H2 x H2 */
    float *p2;      /* second pool: [cap][FEAT] */
    int *i2;        /* where each p2 element came from in a2 */
    float *logits;  /* [cap][classes] */
    /* gradients of the activations */
    float *dlogits, *dp2, *da2, *dp1, *da1;
    double conv_seconds; /* time spent in cg_conv2d_* calls */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *const layer_names[CNN_LAYERS] = {"conv1", "conv2", "fc"};

/* A failed convgrad call: the library's sentence, on stderr. */
static cg_status report(cg_status s, const char *call, int layer)
{
    if (s != CG_OK)
        fprintf(stderr, "cnn: %s (%s) failed: %s (status %d)\n", call, layer_names[layer],
                cg_status_message(s), (int)s);
    return s;
}

/* One timed cg_conv2d_* call of layer `layer`; returns from the caller when
 * it fails. */
#define CONV_CALL(m, layer, fn, ...)                                                               \
    do {                                                                                           \
        double t_ = now_s();                                                                       \
        cg_status s_ = fn(__VA_ARGS__);                                                            \
        (m)->conv_seconds += now_s() - t_;                                                         \
        if (report(s_, #fn, layer) != CG_OK)                                                       \
            return s_;                                                                             \
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

static cg_conv2d conv1_desc(const cnn_net *m, int batch)
{
    return conv_desc(m->layout, batch, IMG, 1, C1);
}
static cg_conv2d conv2_desc(const cnn_net *m, int batch)
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

static float *weights(cnn_net *m, int layer)
{
    return m->param + m->w_off[layer];
}
static float *biases(cnn_net *m, int layer)
{
    return m->param + m->b_off[layer];
}

cnn_grads cnn_layer_grads(cnn_net *m, int layer)
{
    cnn_grads g = {m->grad + m->w_off[layer], m->grad + m->b_off[layer], m->w_n[layer],
                   m->b_n[layer]};
    return g;
}

/* He initialisation (normal, std sqrt(2/fan_in)) for the convolutions; the
 * linear layer (no ReLU after it) gets a tenth of std sqrt(1/fan_in), so that
 * the first predictions are close to uniform; biases 0. The values are drawn
 * in the NHWC order (OHWI weights, the linear layer's features in (h, w, c)
 * order) and moved to NCHW positions under NCHW, so both layouts start from
 * the same network. */
void cnn_init_params(cnn_net *m, uint64_t seed)
{
    cnn_rng r;
    rng_seed(&r, seed, STREAM_INIT);
    memset(m->param, 0, m->nparam * sizeof(float));
    memset(m->velocity, 0, m->nparam * sizeof(float));
    const double s1 = sqrt(2.0 / 9), s2 = sqrt(2.0 / (9 * C1)), sf = 0.1 * sqrt(1.0 / FEAT);
    int nchw = m->layout == CG_LAYOUT_NCHW;
    float *w1 = weights(m, CNN_CONV1), *w2 = weights(m, CNN_CONV2), *wf = weights(m, CNN_FC);
    for (int o = 0; o < C1; ++o)
        for (int k = 0; k < 9; ++k) /* one input channel: OHWI = OIHW */
            w1[o * 9 + k] = (float)(s1 * rng_normal(&r));
    for (int o = 0; o < C2; ++o)
        for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
                for (int i = 0; i < C1; ++i) {
                    int pos =
                        nchw ? ((o * C1 + i) * 3 + kh) * 3 + kw : ((o * 3 + kh) * 3 + kw) * C1 + i;
                    w2[pos] = (float)(s2 * rng_normal(&r));
                }
    for (int k = 0; k < m->classes; ++k)
        for (int h = 0; h < P2; ++h)
            for (int w = 0; w < P2; ++w)
                for (int c = 0; c < C2; ++c) {
                    size_t pos = at(m->layout, 0, c, h, w, C2, P2);
                    wf[k * FEAT + pos] = (float)(sf * rng_normal(&r));
                }
}

void cnn_destroy(cnn_net *m)
{
    if (!m)
        return;
    free(m->param);
    free(m->grad);
    free(m->velocity);
    free(m->decays);
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
    free(m);
}

cnn_net *cnn_create(cg_layout layout, int classes, int cap, int core_mask)
{
    if (classes < 2 || classes > CNN_MAX_CLASSES || cap < 1) {
        fprintf(stderr, "cnn: %d classes, %d images a pass: out of range\n", classes, cap);
        return NULL;
    }
    cnn_net *m = calloc(1, sizeof *m);
    if (!m) {
        fprintf(stderr, "cnn: out of memory\n");
        return NULL;
    }
    m->layout = layout;
    m->core_mask = core_mask;
    m->classes = classes;
    m->cap = cap > EVAL_CHUNK ? cap : EVAL_CHUNK;
    const size_t w_n[CNN_LAYERS] = {C1 * 9, C2 * 9 * C1, (size_t)classes * FEAT};
    const size_t b_n[CNN_LAYERS] = {C1, C2, (size_t)classes};
    for (int l = 0; l < CNN_LAYERS; ++l) {
        m->w_off[l] = m->nparam;
        m->w_n[l] = w_n[l];
        m->b_off[l] = m->w_off[l] + w_n[l];
        m->b_n[l] = b_n[l];
        m->nparam = m->b_off[l] + b_n[l];
    }
    size_t c = (size_t)m->cap;
    m->param = calloc(m->nparam, sizeof(float));
    m->grad = calloc(m->nparam, sizeof(float));
    m->velocity = calloc(m->nparam, sizeof(float));
    m->decays = calloc(m->nparam, 1);
    m->a1 = calloc(c * C1 * H1 * H1, sizeof(float));
    m->p1 = calloc(c * C1 * P1 * P1, sizeof(float));
    m->i1 = calloc(c * C1 * P1 * P1, sizeof(int));
    m->a2 = calloc(c * C2 * H2 * H2, sizeof(float));
    m->p2 = calloc(c * FEAT, sizeof(float));
    m->i2 = calloc(c * FEAT, sizeof(int));
    m->logits = calloc(c * classes, sizeof(float));
    m->dlogits = calloc(c * classes, sizeof(float));
    m->dp2 = calloc(c * FEAT, sizeof(float));
    m->da2 = calloc(c * C2 * H2 * H2, sizeof(float));
    m->dp1 = calloc(c * C1 * P1 * P1, sizeof(float));
    m->da1 = calloc(c * C1 * H1 * H1, sizeof(float));
    if (!m->param || !m->grad || !m->velocity || !m->decays || !m->a1 || !m->p1 || !m->i1 ||
        !m->a2 || !m->p2 || !m->i2 || !m->logits || !m->dlogits || !m->dp2 || !m->da2 || !m->dp1 ||
        !m->da1) {
        fprintf(stderr, "cnn: out of memory for a network of %d images a pass\n", m->cap);
        cnn_destroy(m);
        return NULL;
    }
    for (int l = 0; l < CNN_LAYERS; ++l)
        memset(m->decays + m->w_off[l], 1, m->w_n[l]);
    /* the descriptors are valid for every batch up to cap */
    cg_conv2d d1 = conv1_desc(m, m->cap), d2 = conv2_desc(m, m->cap);
    if (report(cg_conv2d_check(&d1), "cg_conv2d_check", CNN_CONV1) != CG_OK ||
        report(cg_conv2d_check(&d2), "cg_conv2d_check", CNN_CONV2) != CG_OK) {
        cnn_destroy(m);
        return NULL;
    }
    return m;
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

/* Forward pass of x (batch images, 1 <= batch <= cap) up to m->logits. */
static cg_status forward(cnn_net *m, const float *x, int batch)
{
    cg_conv2d d1 = conv1_desc(m, batch), d2 = conv2_desc(m, batch);
    m->x = x;
    CONV_CALL(m, CNN_CONV1, cg_conv2d_forward, &d1, x, weights(m, CNN_CONV1), biases(m, CNN_CONV1),
              m->a1, m->core_mask);
    relu(m->a1, (size_t)batch * C1 * H1 * H1);
    maxpool(m->layout, m->a1, m->p1, m->i1, batch, C1, H1);
    CONV_CALL(m, CNN_CONV2, cg_conv2d_forward, &d2, m->p1, weights(m, CNN_CONV2),
              biases(m, CNN_CONV2), m->a2, m->core_mask);
    relu(m->a2, (size_t)batch * C2 * H2 * H2);
    maxpool(m->layout, m->a2, m->p2, m->i2, batch, C2, H2);
    const float *wf = weights(m, CNN_FC), *bf = biases(m, CNN_FC);
    for (int n = 0; n < batch; ++n) {
        const float *f = m->p2 + (size_t)n * FEAT;
        for (int k = 0; k < m->classes; ++k) {
            const float *wk = wf + (size_t)k * FEAT;
            /* eight partial sums, so that the compiler can vectorise */
            float part[8] = {0};
            for (int j = 0; j < FEAT; j += 8)
                for (int q = 0; q < 8; ++q)
                    part[q] += wk[j + q] * f[j + q];
            float s = bf[k];
            for (int q = 0; q < 8; ++q)
                s += part[q];
            m->logits[n * m->classes + k] = s;
        }
    }
    return CG_OK;
}

/* Softmax cross-entropy of m->logits against labels: returns the summed loss,
 * adds the number of correct predictions to *correct, and when dlogits is
 * not NULL writes there the gradient of the summed loss divided by `scale`. */
static double softmax_xent(const cnn_net *m, const unsigned char *labels, int batch, int *correct,
                           float *dlogits, int scale)
{
    const int nc = m->classes;
    double total = 0;
    for (int n = 0; n < batch; ++n) {
        const float *z = m->logits + n * nc;
        int best = 0;
        float zmax = z[0];
        for (int k = 1; k < nc; ++k)
            if (z[k] > zmax) {
                zmax = z[k];
                best = k;
            }
        double e[CNN_MAX_CLASSES], sum = 0;
        for (int k = 0; k < nc; ++k)
            sum += e[k] = exp((double)z[k] - zmax);
        total += log(sum) - ((double)z[labels[n]] - zmax);
        *correct += best == labels[n];
        if (dlogits)
            for (int k = 0; k < nc; ++k)
                dlogits[n * nc + k] = (float)((e[k] / sum - (k == labels[n] ? 1.0 : 0.0)) / scale);
    }
    return total;
}

/* Conv layer `layer`'s weight and bias gradients: the hook's, or the
 * library's; then the hook hears that they are complete. */
static cg_status conv_param_grads(cnn_net *m, int layer, const cg_conv2d *d, const float *x,
                                  const float *dy, const cnn_hooks *h)
{
    cnn_grads g = cnn_layer_grads(m, layer);
    if (h && h->conv_param_grads) {
        double t = now_s();
        cg_status s = h->conv_param_grads(h->ctx, layer, d, x, dy, g.dw, g.db, m->core_mask);
        m->conv_seconds += now_s() - t;
        if (report(s, "the conv_param_grads hook", layer) != CG_OK)
            return s;
    } else if (d->batch > 0) {
        CONV_CALL(m, layer, cg_conv2d_backward_weights, d, x, dy, g.dw, m->core_mask);
        CONV_CALL(m, layer, cg_conv2d_backward_bias, d, dy, g.db, m->core_mask);
    }
    if (h && h->grads_ready)
        h->grads_ready(h->ctx, layer, g);
    return CG_OK;
}

/* Backward pass from m->dlogits: every gradient into m->grad. */
static cg_status backward(cnn_net *m, int batch, const cnn_hooks *h)
{
    cg_conv2d d1 = conv1_desc(m, batch), d2 = conv2_desc(m, batch);
    const int nc = m->classes;
    const float *wf = weights(m, CNN_FC);
    cnn_grads gf = cnn_layer_grads(m, CNN_FC);
    /* linear layer */
    memset(gf.dw, 0, gf.dw_n * sizeof(float));
    memset(gf.db, 0, gf.db_n * sizeof(float));
    for (int n = 0; n < batch; ++n) {
        const float *f = m->p2 + (size_t)n * FEAT;
        const float *g = m->dlogits + n * nc;
        float *df = m->dp2 + (size_t)n * FEAT;
        for (int j = 0; j < FEAT; ++j)
            df[j] = 0;
        for (int k = 0; k < nc; ++k) {
            const float gk = g[k];
            float *gw = gf.dw + (size_t)k * FEAT;
            const float *wk = wf + (size_t)k * FEAT;
            for (int j = 0; j < FEAT; ++j) {
                gw[j] += gk * f[j];
                df[j] += gk * wk[j];
            }
            gf.db[k] += gk;
        }
    }
    if (h && h->grads_ready)
        h->grads_ready(h->ctx, CNN_FC, gf);
    /* second pool and ReLU, then conv2: weights, bias, and its input's gradient */
    maxpool_relu_backward(m->dp2, m->i2, (size_t)batch * FEAT, m->a2, m->da2,
                          (size_t)batch * C2 * H2 * H2);
    cg_status s = conv_param_grads(m, CNN_CONV2, &d2, m->p1, m->da2, h);
    if (s != CG_OK)
        return s;
    if (batch > 0)
        CONV_CALL(m, CNN_CONV2, cg_conv2d_backward_data, &d2, m->da2, weights(m, CNN_CONV2), m->dp1,
                  m->core_mask);
    /* first pool and ReLU, then conv1's weights and bias (the image needs no gradient) */
    maxpool_relu_backward(m->dp1, m->i1, (size_t)batch * C1 * P1 * P1, m->a1, m->da1,
                          (size_t)batch * C1 * H1 * H1);
    return conv_param_grads(m, CNN_CONV1, &d1, m->x, m->da1, h);
}

cg_status cnn_train_step(cnn_net *m, const float *x, const unsigned char *y, int n,
                         int global_batch, const cnn_hooks *hooks, double *loss_sum, int *correct)
{
    if (n < 0 || n > m->cap || global_batch < 1) {
        fprintf(stderr, "cnn: a sub-batch of %d images (at most %d) of a batch of %d\n", n, m->cap,
                global_batch);
        return CG_ERR_BAD_SIZE;
    }
    if (n == 0) {
        /* nothing of this process in the batch: zero gradients, but the
         * hooks run as on every other process */
        memset(m->grad, 0, m->nparam * sizeof(float));
        m->x = x;
        return backward(m, 0, hooks);
    }
    cg_status s = forward(m, x, n);
    if (s != CG_OK)
        return s;
    *loss_sum += softmax_xent(m, y, n, correct, m->dlogits, global_batch);
    return backward(m, n, hooks);
}

void cnn_sgd_step(cnn_net *m, float lr)
{
    for (size_t i = 0; i < m->nparam; ++i) {
        float g = m->grad[i] + (m->decays[i] ? CNN_WEIGHT_DECAY * m->param[i] : 0.0f);
        m->velocity[i] = CNN_MOMENTUM * m->velocity[i] + g;
        m->param[i] -= lr * m->velocity[i];
    }
}

/* Without the warm-up, the first steps at the full rate throw some seeds'
 * networks into a state they take epochs to leave (the linear layer sees
 * 784 large non-negative features). */
float cnn_learning_rate(double lr0, long step, long total)
{
    double warm = fmax(0.05 * (double)total, fmin(50.0, 0.5 * (double)total));
    double lr = lr0 * 0.5 * (1 + cos(CNN_PI * (double)step / (double)total));
    if ((double)step < warm)
        lr *= (double)(step + 1) / warm;
    return (float)lr;
}

cg_status cnn_evaluate(cnn_net *m, const cnn_dataset *d, double *loss, double *acc)
{
    double total = 0;
    int correct = 0;
    for (int start = 0; start < d->n; start += m->cap) {
        int b = d->n - start < m->cap ? d->n - start : m->cap;
        cg_status s = forward(m, d->x + (size_t)start * IMG * IMG, b);
        if (s != CG_OK)
            return s;
        total += softmax_xent(m, d->y + start, b, &correct, NULL, 1);
    }
    *loss = d->n ? total / d->n : 0;
    *acc = d->n ? 100.0 * correct / d->n : 0;
    return CG_OK;
}

/* FNV-1a over the parameters' bytes. */
uint64_t cnn_checksum(const cnn_net *m)
{
    const unsigned char *p = (const unsigned char *)m->param;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < m->nparam * sizeof(float); ++i)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

double cnn_conv_seconds(const cnn_net *m)
{
    return m->conv_seconds;
}
