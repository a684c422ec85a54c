/* SPDX-License-Identifier: MIT */
/* The example CNN, shared by the programs that train it: the data sets and
 * their per-epoch shuffle, the network, the forward and backward pass of a
 * sub-batch, the SGD update, the learning-rate schedule, the evaluation and a
 * checksum of the parameters.
 *
 * Everything is deterministic from a seed, so that processes training one
 * network data-parallel hold the same data, shuffle it the same way and start
 * from the same weights; each takes its own slice of every global batch,
 * runs cnn_train_step on it with the global batch size, sums the layers'
 * gradients with the others (through cnn_hooks, layer by layer as the
 * backward pass completes them), and applies the same cnn_sgd_step.
 *
 * The functions print what went wrong to stderr and return -1 (NULL for
 * cnn_create), or a cg_status other than CG_OK for a failed convgrad call. */
#ifndef CNN_H
#define CNN_H

#include <convgrad.h>

#include <stddef.h>
#include <stdint.h>

#define CNN_PI 3.14159265358979323846
#define CNN_MOMENTUM 0.9f
#define CNN_WEIGHT_DECAY 5e-4f

enum {
    CNN_IMG = 28,        /* image side */
    CNN_MAX_CLASSES = 10 /* the most classes a data set has */
};

/* ---- the data (data.c) ------------------------------------------------------- */

/* A random stream (xoshiro256** state). */
typedef struct cnn_rng {
    uint64_t s[4];
} cnn_rng;

typedef struct cnn_dataset {
    int n;
    float *x;         /* [n][CNN_IMG][CNN_IMG], standardised */
    unsigned char *y; /* [n] class */
} cnn_dataset;

/* A task: its training and held-out sets and their classes. */
typedef struct cnn_data {
    const char *name; /* for the printout and the plot */
    int classes;
    const char *const *class_names;
    cnn_dataset train, test;
} cnn_data;

/* The generated task: n_train and n_test 28x28 images of six shapes, from
 * two streams of the seed, standardised with the training set's mean and
 * deviation. */
int cnn_data_generated(cnn_data *d, int n_train, int n_test, uint64_t seed);
/* Fashion-MNIST: the first n_train of the 60,000 training and the first
 * n_test of the 10,000 test images of the four gzip'd idx files in dir
 * (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 * t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), standardised with
 * the training images' mean and deviation. */
#define CNN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
int cnn_data_fashion_mnist(cnn_data *d, const char *dir, int n_train, int n_test);
void cnn_data_free(cnn_data *d);

/* The order of the training set, reshuffled every epoch from the seed. */
typedef struct cnn_shuffle {
    cnn_rng rng;
    int n;
    int *order;
} cnn_shuffle;

int cnn_shuffle_init(cnn_shuffle *s, int n, uint64_t seed);
/* Reshuffles and returns the next epoch's order of the n images. */
const int *cnn_shuffle_next(cnn_shuffle *s);
void cnn_shuffle_free(cnn_shuffle *s);

/* Copies images idx[0..n-1] of d to x (n images) and their labels to y. */
void cnn_gather(const cnn_dataset *d, const int *idx, int n, float *x, unsigned char *y);

/* ---- the network (cnn.c) ----------------------------------------------------- */

/* The layers with parameters, in forward order. */
enum { CNN_CONV1, CNN_CONV2, CNN_FC1, CNN_FC2, CNN_LAYERS };

typedef struct cnn_net cnn_net;

/* A layer's parameter gradients: dw_n weights, db_n biases. */
typedef struct cnn_grads {
    float *dw, *db;
    size_t dw_n, db_n;
} cnn_grads;

/* What the caller adds to the backward pass; any member may be NULL. */
typedef struct cnn_hooks {
    void *ctx;
    /* Replaces cg_conv2d_backward_weights_bias of conv layer `layer`:
     * writes the gradients of the sub-batch x, dy (descriptor d) to dw and
     * db (d->batch may be 0: dw and db are then zero already, and there is
     * nothing to compute). The shared code computes the layer's data
     * gradient after it returns. */
    cg_status (*conv_param_grads)(void *ctx, int layer, const cg_conv2d *d, const float *x,
                                  const float *dy, float *dw, float *db, int core_mask);
    /* Called as soon as layer `layer`'s gradients are complete, the last
     * layer first, before the layer below is computed. */
    void (*grads_ready)(void *ctx, int layer, cnn_grads g);
} cnn_hooks;

/* A network for `classes` classes whose passes hold up to `cap` images, its
 * convolutions on the cores of core_mask, its tensors in `layout`. */
cnn_net *cnn_create(cg_layout layout, int classes, int cap, int core_mask);
void cnn_destroy(cnn_net *m);

/* He initialisation from the seed (the same weights in both layouts); the
 * momentum is cleared. */
void cnn_init_params(cnn_net *m, uint64_t seed);

/* Forward and backward pass of n images x with labels y (0 <= n <= cap),
 * the loss gradient scaled by 1/global_batch, so that the sum of the
 * sub-batches' gradients is the gradient of the global batch's mean loss.
 * Adds the sub-batch's summed loss to *loss_sum and its correct predictions
 * to *correct. */
cg_status cnn_train_step(cnn_net *m, const float *x, const unsigned char *y, int n,
                         int global_batch, const cnn_hooks *hooks, double *loss_sum, int *correct);

/* Layer `layer`'s gradient buffers (filled by cnn_train_step). */
cnn_grads cnn_layer_grads(cnn_net *m, int layer);

/* SGD with momentum CNN_MOMENTUM and weight decay CNN_WEIGHT_DECAY (weights
 * only) from the gradients: v = mu v + g + wd w; w -= lr v. */
void cnn_sgd_step(cnn_net *m, float lr);

/* The learning rate of step `step` (0-based) of `total`: a linear warm-up
 * over the first 5% of the steps (at least 50, or half of a shorter run),
 * then a cosine decay from lr0 to 0. */
float cnn_learning_rate(double lr0, long step, long total);

/* Mean loss and accuracy (%) on a whole set, forward only. */
cg_status cnn_evaluate(cnn_net *m, const cnn_dataset *d, double *loss, double *acc);

/* A hash of every parameter's bits: equal on processes holding equal weights. */
uint64_t cnn_checksum(const cnn_net *m);

/* Seconds spent in cg_conv2d_* calls since cnn_create. */
double cnn_conv_seconds(const cnn_net *m);

#endif
