/* SPDX-License-Identifier: MIT */
/* Random numbers for the example CNN: xoshiro256** seeded by splitmix64, one
 * independent stream per (seed, stream), so that every process that knows the
 * seed draws the same data, weights and shuffles. */
#ifndef CNN_RNG_H
#define CNN_RNG_H

#include "cnn.h"

#include <stdint.h>

/* The streams of one seed: each use of randomness has its own. */
enum { STREAM_TRAIN_DATA = 1, STREAM_TEST_DATA = 2, STREAM_INIT = 3, STREAM_SHUFFLE = 4 };

void rng_seed(cnn_rng *r, uint64_t seed, uint64_t stream);
/* [0, 1) */
double rng_uniform(cnn_rng *r);
double rng_range(cnn_rng *r, double lo, double hi);
/* 0 .. n-1 */
uint32_t rng_below(cnn_rng *r, uint32_t n);
/* Two independent standard normal numbers (Box-Muller). */
void rng_normal2(cnn_rng *r, double *a, double *b);
double rng_normal(cnn_rng *r);

#endif
