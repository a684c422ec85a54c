/* SPDX-License-Identifier: MIT */
/* The example CNN:
 *   conv 3x3, 1 -> 16, pad 1  + ReLU + 2x2 max pool   28x28 -> 14x14
 *   conv 3x3, 16 -> 32, pad 1 + ReLU + 2x2 max pool   14x14 -> 7x7
 *   linear 1568 -> 128 + ReLU
 *   linear 128 -> classes, softmax cross-entropy
 * Every convolution (forward, input, weight and bias gradient) runs on
 * convgrad's cg_conv2d_*; the linear layers on OpenBLAS's cblas_sgemm, on the
 * calling thread; ReLU, pooling, the loss and the update are plain C. The
 * tensors are NHWC with OHWI weights, or NCHW with OIHW weights; the linear
 * layers' weights are [out][in], their input the second pool's output as it
 * lies in memory. */
#define _POSIX_C_SOURCE 200809L
#include "cnn.h"
#include "rng.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    IMG = CNN_IMG,
    C1 = 16,             /* conv1 output channels */
    C2 = 32,             /* conv2 output channels */
    H1 = IMG,            /* conv1 output side (pad 1) */
    P1 = IMG / 2,        /* after the first pool */
    H2 = P1,             /* conv2 output side */
    P2 = P1 / 2,         /* after the second pool */
    FEAT = P2 * P2 * C2, /* the first linear layer's inputs */
    HID = 128,           /* its outputs */
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
    float *h;       /* first linear layer's output, ReLU in place: [cap][HID] */
    float *logits;  /* [cap][classes] */
    /* gradients of the activations */
    float *dlogits, *dh, *dp2, *da2, *dp1, *da1;
    double conv_seconds; /* time spent in cg_conv2d_* calls */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *const layer_names[CNN_LAYERS] = {"conv1", "conv2", "fc1", "fc2"};

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

/* He initialisation (normal, std sqrt(2/fan_in)) for the layers followed by
 * a ReLU; the last one gets a tenth of std sqrt(1/fan_in), so that the first
 * predictions are close to uniform; biases 0. The values are drawn in the
 * NHWC order (OHWI weights, the first linear layer's inputs in (h, w, c)
 * order) and moved to NCHW positions under NCHW, so both layouts start from
 * the same network. */
void cnn_init_params(cnn_net *m, uint64_t seed)
{
    cnn_rng r;
    rng_seed(&r, seed, STREAM_INIT);
    memset(m->param, 0, m->nparam * sizeof(float));
    memset(m->velocity, 0, m->nparam * sizeof(float));
    const double s1 = sqrt(2.0 / 9), s2 = sqrt(2.0 / (9 * C1)), s3 = sqrt(2.0 / FEAT),
                 s4 = 0.1 * sqrt(1.0 / HID);
    int nchw = m->layout == CG_LAYOUT_NCHW;
    float *w1 = weights(m, CNN_CONV1), *w2 = weights(m, CNN_CONV2), *w3 = weights(m, CNN_FC1),
          *w4 = weights(m, CNN_FC2);
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
    for (int k = 0; k < HID; ++k)
        for (int h = 0; h < P2; ++h)
            for (int w = 0; w < P2; ++w)
                for (int c = 0; c < C2; ++c) {
                    size_t pos = at(m->layout, 0, c, h, w, C2, P2);
                    w3[k * FEAT + pos] = (float)(s3 * rng_normal(&r));
                }
    for (int k = 0; k < m->classes * HID; ++k)
        w4[k] = (float)(s4 * rng_normal(&r));
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
    free(m->h);
    free(m->logits);
    free(m->dlogits);
    free(m->dh);
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
    const size_t w_n[CNN_LAYERS] = {C1 * 9, C2 * 9 * C1, (size_t)HID * FEAT, (size_t)classes * HID};
    const size_t b_n[CNN_LAYERS] = {C1, C2, HID, (size_t)classes};
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
    m->h = calloc(c * HID, sizeof(float));
    m->logits = calloc(c * classes, sizeof(float));
    m->dlogits = calloc(c * classes, sizeof(float));
    m->dh = calloc(c * HID, sizeof(float));
    m->dp2 = calloc(c * FEAT, sizeof(float));
    m->da2 = calloc(c * C2 * H2 * H2, sizeof(float));
    m->dp1 = calloc(c * C1 * P1 * P1, sizeof(float));
    m->da1 = calloc(c * C1 * H1 * H1, sizeof(float));
    if (!m->param || !m->grad || !m->velocity || !m->decays || !m->a1 || !m->p1 || !m->i1 ||
        !m->a2 || !m->p2 || !m->i2 || !m->h || !m->logits || !m->dlogits || !m->dh || !m->dp2 ||
        !m->da2 || !m->dp1 || !m->da1) {
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
    /* OpenBLAS's own threads would compete with the library's cores: the
     * linear layers run on the calling thread */
    openblas_set_num_threads(1);
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
                    /* selects, not branches: the maxima's places are random */
                    size_t best = first;
                    float v = in[first];
                    for (int k = 1; k < 4; ++k) {
                        float u = in[first + win[k]];
                        int above = u > v;
                        v = above ? u : v;
                        best = above ? first + win[k] : best;
                    }
                    out[po] = v;
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

/* y [batch][out] = x [batch][in] w^T + b, w [out][in]. */
static void linear_forward(const float *x, const float *w, const float *b, float *y, int batch,
                           int in, int out)
{
    for (int n = 0; n < batch; ++n)
        memcpy(y + (size_t)n * out, b, (size_t)out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f,
                y, out);
}

/* The gradients of y = x w^T + b from dy [batch][out]: dw = dy^T x, db the
 * sum of dy's rows, dx = dy w. */
static void linear_backward(const float *x, const float *w, const float *dy, cnn_grads g, float *dx,
                            int batch, int in, int out)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f,
                g.dw, in);
    for (int k = 0; k < out; ++k)
        g.db[k] = 0;
    for (int n = 0; n < batch; ++n)
        for (int k = 0; k < out; ++k)
            g.db[k] += dy[(size_t)n * out + k];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
                0.0f, dx, in);
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
    linear_forward(m->p2, weights(m, CNN_FC1), biases(m, CNN_FC1), m->h, batch, FEAT, HID);
    relu(m->h, (size_t)batch * HID);
    linear_forward(m->h, weights(m, CNN_FC2), biases(m, CNN_FC2), m->logits, batch, HID,
                   m->classes);
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

/* Tells the hook that layer `layer`'s gradients are complete. */
static void grads_ready(cnn_net *m, int layer, const cnn_hooks *h)
{
    if (h && h->grads_ready)
        h->grads_ready(h->ctx, layer, cnn_layer_grads(m, layer));
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
        CONV_CALL(m, layer, cg_conv2d_backward_weights_bias, d, x, dy, g.dw, g.db, m->core_mask);
    }
    grads_ready(m, layer, h);
    return CG_OK;
}

/* Backward pass from m->dlogits: every gradient into m->grad. */
static cg_status backward(cnn_net *m, int batch, const cnn_hooks *h)
{
    cg_conv2d d1 = conv1_desc(m, batch), d2 = conv2_desc(m, batch);
    /* the linear layers (with batch 0, m->grad is zero already) */
    if (batch > 0) {
        linear_backward(m->h, weights(m, CNN_FC2), m->dlogits, cnn_layer_grads(m, CNN_FC2), m->dh,
                        batch, HID, m->classes);
        for (size_t i = 0; i < (size_t)batch * HID; ++i)
            m->dh[i] = m->h[i] > 0 ? m->dh[i] : 0;
    }
    grads_ready(m, CNN_FC2, h);
    if (batch > 0)
        linear_backward(m->p2, weights(m, CNN_FC1), m->dh, cnn_layer_grads(m, CNN_FC1), m->dp2,
                        batch, FEAT, HID);
    grads_ready(m, CNN_FC1, h);
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
 * 1568 large non-negative features). */
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
