/* SPDX-License-Identifier: MIT */
#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(cnn_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; ++i)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(cnn_rng *r)
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

double rng_uniform(cnn_rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

double rng_range(cnn_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * rng_uniform(r);
}

uint32_t rng_below(cnn_rng *r, uint32_t n)
{
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

void rng_normal2(cnn_rng *r, double *a, double *b)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(1.0 - u1));
    *a = rad * cos(2.0 * CNN_PI * u2);
    *b = rad * sin(2.0 * CNN_PI * u2);
}

double rng_normal(cnn_rng *r)
{
    double a, b;
    rng_normal2(r, &a, &b);
    return a;
}
