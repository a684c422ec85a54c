/* SPDX-License-Identifier: MIT */
/* Depthwise on AVX-512. The weight gradient's 3x3: the nine per-tap sums of
 * 32 channels stay in registers across a tile of output pixels, so each
 * pixel costs two loads of dy, up to eighteen of x and eighteen FMAs; between
 * tiles they rest in the caller's accumulator block. fp16 tensors are
 * converted as they are loaded. The training step's pixels: one register of
 * sums per sixteen channels over every tap. */
#include <immintrin.h>

#include "kernels/dwconv_rows_body.h"
#include "kernels/list.h"

enum { TAPS = 9, VECS = 2, LANES = 16, PREFETCH_PIXELS = 8 };

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512
load_lanes(const void *tensor, int64_t index, __mmask16 mask, const int half)
{
    if (half)
        return _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(mask, (const unsigned char *)tensor + 2 * index));
    return _mm512_maskz_loadu_ps(mask, (const float *)tensor + index);
}

/* The accumulators are named variables, not an array, so that they stay in
 * registers whatever the compiler makes of the loops. */
#define ACC_DECLARE(t)                                                                             \
    __m512 acc##t##_0 = _mm512_setzero_ps(), acc##t##_1 = _mm512_setzero_ps();                     \
    if (resume) {                                                                                  \
        acc##t##_0 = _mm512_maskz_loadu_ps(mask0, saved + (t)*channels);                           \
        acc##t##_1 = _mm512_maskz_loadu_ps(mask1, saved + (t)*channels + LANES);                   \
    }
#define ACC_TAP(t, kh, kw)                                                                         \
    if (row_ok[kh] && col_ok[kw]) {                                                                \
        const int64_t at = corner + ((kh)*p->in_w + (kw)) * p->cin;                                \
        acc##t##_0 = _mm512_fmadd_ps(d0, load_lanes(x, at, mask0, half), acc##t##_0);              \
        acc##t##_1 = _mm512_fmadd_ps(d1, load_lanes(x, at + LANES, mask1, half), acc##t##_1);      \
    }
#define ACC_STORE(t)                                                                               \
    _mm512_mask_storeu_ps(saved + (t)*channels, mask0, acc##t##_0);                                \
    _mm512_mask_storeu_ps(saved + (t)*channels + LANES, mask1, acc##t##_1)

static __mmask16 lanes_mask(int64_t lanes)
{
    lanes = lanes < 0 ? 0 : lanes > LANES ? LANES : lanes;
    return (__mmask16)((1u << lanes) - 1u);
}

/* The sums of rows [first, last) for 32 channels from c_first (fewer at the
 * end), added to those in saved[tap][channel] when resume, else from zero,
 * and left there. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
block32(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t channels,
        int64_t first, int64_t last, float *saved, int resume, const int half)
{
    const __mmask16 mask0 = lanes_mask(channels), mask1 = lanes_mask(channels - LANES);
    ACC_DECLARE(0);
    ACC_DECLARE(1);
    ACC_DECLARE(2);
    ACC_DECLARE(3);
    ACC_DECLARE(4);
    ACC_DECLARE(5);
    ACC_DECLARE(6);
    ACC_DECLARE(7);
    ACC_DECLARE(8);
    const int64_t per_image = p->out_h * p->out_w;
    int64_t n = first / per_image, oh = first % per_image / p->out_w, ow = first % p->out_w;
    for (int64_t row = first; row < last; row++) {
        const int64_t iy0 = oh * p->stride_h - p->pad_u, ix0 = ow * p->stride_w - p->pad_l;
        const int64_t at_dy = row * p->cout + c_first;
        /* strided rows defeat the hardware prefetcher: ask for dy a few
         * pixels ahead, and for x the bottom-right tap of that pixel */
        const size_t elem = half ? 2 : 4;
        _mm_prefetch((const char *)dy + (at_dy + PREFETCH_PIXELS * p->cout) * elem, _MM_HINT_T0);
        _mm_prefetch((const char *)dy + (at_dy + PREFETCH_PIXELS * p->cout + LANES) * elem,
                     _MM_HINT_T0);
        const __m512 d0 = load_lanes(dy, at_dy, mask0, half);
        const __m512 d1 = load_lanes(dy, at_dy + LANES, mask1, half);
        int row_ok[3], col_ok[3];
        for (int k = 0; k < 3; k++) {
            row_ok[k] = (uint64_t)(iy0 + k) < (uint64_t)p->in_h;
            col_ok[k] = (uint64_t)(ix0 + k) < (uint64_t)p->in_w;
        }
        /* x element of tap (0, 0), possibly outside: only valid taps read */
        const int64_t corner = ((n * p->in_h + iy0) * p->in_w + ix0) * p->cin + c_first;
        const int64_t ahead = corner + (2 * p->in_w + 2 + PREFETCH_PIXELS * p->stride_w) * p->cin;
        if (ahead >= 0) {
            _mm_prefetch((const char *)x + ahead * elem, _MM_HINT_T0);
            _mm_prefetch((const char *)x + (ahead + LANES) * elem, _MM_HINT_T0);
        }
        ACC_TAP(0, 0, 0)
        ACC_TAP(1, 0, 1)
        ACC_TAP(2, 0, 2)
        ACC_TAP(3, 1, 0)
        ACC_TAP(4, 1, 1)
        ACC_TAP(5, 1, 2)
        ACC_TAP(6, 2, 0)
        ACC_TAP(7, 2, 1)
        ACC_TAP(8, 2, 2)
        if (++ow == p->out_w) {
            ow = 0;
            if (++oh == p->out_h) {
                oh = 0;
                n++;
            }
        }
    }
    ACC_STORE(0);
    ACC_STORE(1);
    ACC_STORE(2);
    ACC_STORE(3);
    ACC_STORE(4);
    ACC_STORE(5);
    ACC_STORE(6);
    ACC_STORE(7);
    ACC_STORE(8);
}

/* Output pixels at a time: their dy and x stay in cache while every block of
 * 32 channels passes over them. */
enum { PIXEL_TILE = 128 };

__attribute__((target("avx512f,avx512bw,avx512vl"))) void
cg_f32_dwconv3x3_rows_avx512(const cg_plan *p, const void *dy, const void *x, int64_t c_first,
                             int64_t c_last, int64_t first, int64_t last, float *acc, float *dst)
{
    const int half = p->dtype_size == 2;
    for (int64_t t0 = first; t0 < last; t0 += PIXEL_TILE) {
        int64_t t1 = last - t0 < PIXEL_TILE ? last : t0 + PIXEL_TILE;
        for (int64_t c = c_first; c < c_last; c += VECS * LANES) {
            int64_t channels = c_last - c < VECS * LANES ? c_last - c : VECS * LANES;
            float *saved = acc + (c - c_first) * TAPS;
            if (half)
                block32(p, dy, x, c, channels, t0, t1, saved, t0 != first, 1);
            else
                block32(p, dy, x, c, channels, t0, t1, saved, t0 != first, 0);
        }
    }
    for (int64_t c = c_first; c < c_last; c += VECS * LANES) { /* [tap][c] -> dw rows [c][tap] */
        int64_t channels = c_last - c < VECS * LANES ? c_last - c : VECS * LANES;
        const float *saved = acc + (c - c_first) * TAPS;
        for (int64_t k = 0; k < channels; k++)
            for (int t = 0; t < TAPS; t++)
                dst[(c - c_first + k) * TAPS + t] = saved[t * channels + k];
    }
}

/* Sixteen channels at a time, their sum in one register over every tap. */
__attribute__((target("avx512f"))) void
cg_f32_dwconv_pixel_avx512(float *restrict out, const float *restrict init, const float *const *x,
                           const float *restrict w, int64_t taps, int64_t n)
{
    for (int64_t c0 = 0; c0 < n; c0 += LANES) {
        const __mmask16 m = n - c0 >= LANES ? 0xffff : (__mmask16)((1u << (n - c0)) - 1u);
        __m512 acc = init ? _mm512_maskz_loadu_ps(m, init + c0) : _mm512_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            if (x[t])
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x[t] + c0),
                                      _mm512_maskz_loadu_ps(m, w + t * n + c0), acc);
        _mm512_mask_storeu_ps(out + c0, m, acc);
    }
}

/* The weight gradient for any kernel size: the reference's loops
 * (kernels/dwconv_rows_body.h), vectorised by the compiler for AVX-512. */
__attribute__((target("avx512f"))) void
cg_f32_dwconv_rows_avx512(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                          int64_t c_last, int64_t first, int64_t last, float *acc, float *dst)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, dst);
}
