/* SPDX-License-Identifier: MIT */
/* What both fuzz targets share: the input decoding (a byte reader that
 * reads zeros past the end, the special int values a field can take), small
 * helpers, and the buffers whose every byte is compared after a call.
 * Header-only: each target is one translation unit. */
#ifndef CG_FUZZ_COMMON_H
#define CG_FUZZ_COMMON_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const uint8_t *d;
    size_t n, i;
} reader;

static inline uint8_t u8(reader *r)
{
    return r->i < r->n ? r->d[r->i++] : 0; /* past the end: zeros, the "typical" choice */
}

static inline uint32_t u32(reader *r)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)u8(r) << (8 * k);
    return v;
}

static inline int32_t as_int(uint32_t u)
{
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Byte b of a field: b < 200 a small value chosen by the field's kind, 200..239
 * one of these 40, >= 240 the next 4 bytes as a raw int32 (little-endian). */
#define SMALL_LIMIT 200
#define RAW_FROM 240
static const int64_t specials[40] = {
    0,       -1,          1,       2,          3,       4,           7,           8,
    15,      16,          17,      31,         32,      33,          63,          64,
    255,     256,         1023,    1024,       4096,    65535,       65536,       46340,
    46341,   1 << 20,     1 << 24, 1 << 30,    INT_MAX, INT_MAX - 1, INT_MAX / 2, INT_MAX / 4 + 1,
    INT_MIN, INT_MIN + 1, -2,      -(1 << 30), -65536,  0x40000001,  0x55555555,  1 << 28};

static inline int64_t gcd64(int64_t a, int64_t b)
{
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static inline int clamp_int(int64_t v)
{
    return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
}

/* splitmix64: the fill and choice stream of a case */
static inline uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A tensor or workspace handed to the library: real (sized exactly, ending
 * at its last element) or a dummy, with a copy of every byte from before
 * the call. */
typedef struct buf {
    unsigned char *base; /* the allocation */
    unsigned char *ptr;  /* what the library gets: base + misalignment */
    size_t bytes;        /* from ptr to the end of the allocation */
    unsigned char *copy; /* the whole allocation, as it was before the call */
    size_t total;
    int64_t count; /* elements, when real */
    int real;      /* sized for the tensor; else a dummy */
} buf;

static inline int buf_same(const buf *b)
{
    return memcmp(b->base, b->copy, b->total) == 0;
}

/* First byte (from ptr) that changed; -1 if none. */
static inline long long buf_first_change(const buf *b)
{
    for (size_t i = 0; i < b->total; i++)
        if (b->base[i] != b->copy[i])
            return (long long)i - (long long)(b->ptr - b->base);
    return -1;
}

static inline void buf_free(buf *b)
{
    free(b->base);
    free(b->copy);
}
#endif
