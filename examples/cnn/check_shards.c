/* SPDX-License-Identifier: MIT */
/* check_shards: the promise cnn.h makes to data-parallel programs. A batch
 * split into sub-batches (one of them empty), each run with the global batch
 * size, gives gradients that sum to the whole batch's (up to rounding); the
 * hooks hear of the layers last first, and a conv_param_grads hook replaces
 * the library's weight and bias gradients; the same seed gives the same
 * checksum, an update changes it. Exit status 0 when all holds, 1 otherwise. */
#include "cnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 40, SHARDS = 3 };
static const int shard_sizes[SHARDS] = {15, 0, 25};

typedef struct record {
    int order[4 * CNN_LAYERS], heard; /* the layers grads_ready named, in turn */
    int conv_calls;                   /* conv_param_grads hook calls */
} record;

static void on_ready(void *ctx, int layer, cnn_grads g)
{
    record *r = ctx;
    (void)g;
    if (r->heard < 4 * CNN_LAYERS)
        r->order[r->heard] = layer;
    r->heard++;
}

/* The library's own calls, counted: what a summing hook would start from. */
static cg_status on_conv(void *ctx, int layer, const cg_conv2d *d, const float *x, const float *dy,
                         float *dw, float *db, int core_mask)
{
    record *r = ctx;
    (void)layer;
    r->conv_calls++;
    if (d->batch == 0)
        return CG_OK;
    return cg_conv2d_backward_weights_bias(d, x, dy, dw, db, core_mask);
}

static int fail(const char *what)
{
    fprintf(stderr, "check_shards: FAIL: %s\n", what);
    return 1;
}

/* Every layer's gradients, one after the other, into out. */
static size_t copy_grads(cnn_net *m, float *out)
{
    size_t k = 0;
    for (int l = 0; l < CNN_LAYERS; ++l) {
        cnn_grads g = cnn_layer_grads(m, l);
        memcpy(out + k, g.dw, g.dw_n * sizeof(float));
        k += g.dw_n;
        memcpy(out + k, g.db, g.db_n * sizeof(float));
        k += g.db_n;
    }
    return k;
}

int main(void)
{
    cnn_data data;
    if (cnn_data_generated(&data, BATCH, 1, 7))
        return 1;
    cnn_net *m = cnn_create(CG_LAYOUT_NHWC, data.classes, BATCH, 0x3);
    cnn_net *twin = cnn_create(CG_LAYOUT_NHWC, data.classes, BATCH, 0x1);
    if (!m || !twin)
        return 1;
    cnn_init_params(m, 5);
    cnn_init_params(twin, 5);
    int bad = cnn_checksum(m) != cnn_checksum(twin) ? fail("the same seed, other checksums") : 0;

    size_t total = 0;
    for (int l = 0; l < CNN_LAYERS; ++l)
        total += cnn_layer_grads(m, l).dw_n + cnn_layer_grads(m, l).db_n;
    float *whole = calloc(total, sizeof(float)), *sum = calloc(total, sizeof(float));
    float *part = calloc(total, sizeof(float));
    double loss = 0, shard_loss = 0;
    int correct = 0, shard_correct = 0;
    if (cnn_train_step(m, data.train.x, data.train.y, BATCH, BATCH, NULL, &loss, &correct))
        return 1;
    copy_grads(m, whole);

    record r = {{0}, 0, 0};
    cnn_hooks hooks = {.ctx = &r, .conv_param_grads = on_conv, .grads_ready = on_ready};
    for (int s = 0, start = 0; s < SHARDS; start += shard_sizes[s++]) {
        const float *x = data.train.x + (size_t)start * CNN_IMG * CNN_IMG;
        if (cnn_train_step(m, x, data.train.y + start, shard_sizes[s], BATCH, &hooks, &shard_loss,
                           &shard_correct))
            return 1;
        copy_grads(m, part);
        for (size_t i = 0; i < total; ++i)
            sum[i] += part[i];
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < total; ++i) {
        worst = fmax(worst, fabs((double)sum[i] - whole[i]));
        scale = fmax(scale, fabs((double)whole[i]));
    }
    printf("check_shards: %zu gradients, largest %.3g, the shards' sum off by at most %.3g\n",
           total, scale, worst);
    if (!(scale > 0) || worst > 1e-4 * scale)
        bad |= fail("the shards' gradients do not sum to the batch's");
    if (fabs(loss - shard_loss) > 1e-5 * fabs(loss) || correct != shard_correct)
        bad |= fail("the shards' losses or correct counts do not sum to the batch's");
    if (r.heard != SHARDS * CNN_LAYERS || r.conv_calls != SHARDS * 2)
        bad |= fail("the hooks were not called once per layer and shard");
    for (int k = 0; k < r.heard && k < 4 * CNN_LAYERS; ++k)
        if (r.order[k] != CNN_LAYERS - 1 - k % CNN_LAYERS)
            bad |= fail("grads_ready did not hear of the layers last first");

    cnn_sgd_step(m, 0.01f);
    if (cnn_checksum(m) == cnn_checksum(twin))
        bad |= fail("an update left the checksum as it was");
    free(whole);
    free(sum);
    free(part);
    cnn_destroy(m);
    cnn_destroy(twin);
    cnn_data_free(&data);
    if (!bad)
        printf("check_shards: PASS\n");
    return bad;
}
