/* SPDX-License-Identifier: MIT */
/* The packed micro-kernel on AVX2 + FMA: a 12-row A panel times a B
 * micro-panel of up to 16 columns (kernels/list.h, cg_gemm_panel_fn), as
 * 6 x 16 or 12 x 8 register tiles of 12 accumulators; the AVX-512 kernel's
 * design (avx512/gemm_panel.c) at half the width and half the registers. */
#include "kernels/list.h"
#include "kernels/pack_rows_body.h"

#include <immintrin.h>
#include <string.h>

enum { PANEL = 12, NR = 16 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

__attribute__((target("avx2,fma"))) static ALWAYS_INLINE void
tile(const int rows, const int nv, int m, int n, int k, const float *a, const float *b, float beta,
     float *c, int ldc, const char **prefetch, const char *prefetch_end)
{
    const char *pf = *prefetch;
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            _mm_prefetch((const char *)(c + (size_t)r * ldc + 8 * v), _MM_HINT_T0);
    __m256 acc[12][2];
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm256_setzero_ps();
    for (int p = 0; p < k; p++, a += PANEL, b += NR) {
        if ((p & 1) == 0 && pf < prefetch_end) { /* a line every other step */
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
        }
        __m256 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 12
        for (int r = 0; r < rows; r++) {
            const __m256 av = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    *prefetch = pf;
    const int tail = n - 8 * (nv - 1); /* columns of the last vector, 1..8 */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), lane);
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        if (r >= m)
            break;
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            float *cv = c + (size_t)r * ldc + 8 * v;
            __m256 sum = acc[r][v];
            if (v < nv - 1 || tail == 8) {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_loadu_ps(cv));
                _mm256_storeu_ps(cv, sum);
            } else {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_maskload_ps(cv, last));
                _mm256_maskstore_ps(cv, last, sum);
            }
        }
    }
}

__attribute__((target("avx2,fma"))) static void tile_6x16(int m, int n, int k, const float *a,
                                                          const float *b, float beta, float *c,
                                                          int ldc, const char **prefetch,
                                                          const char *prefetch_end)
{
    tile(6, 2, m, n, k, a, b, beta, c, ldc, prefetch, prefetch_end);
}

__attribute__((target("avx2,fma"))) static void tile_12x8(int m, int n, int k, const float *a,
                                                          const float *b, float beta, float *c,
                                                          int ldc, const char **prefetch,
                                                          const char *prefetch_end)
{
    tile(12, 1, m, n, k, a, b, beta, c, ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_panel_avx2_12x16(int m, int n, int k, const float *a, const float *b, float beta,
                                  float *c, int ldc, const char *prefetch, const char *prefetch_end)
{
    const int rows = n > 8 ? 6 : 12;
    void (*const run)(int, int, int, const float *, const float *, float, float *, int,
                      const char **, const char *) = n > 8 ? tile_6x16 : tile_12x8;
    for (int r = 0; r < m; r += rows)
        run(m - r < rows ? m - r : rows, n, k, a + r, b, beta, c + (size_t)r * ldc, ldc, &prefetch,
            prefetch_end);
}

/* Packing rows: per step, zeros, the part of the segment inside [lo, hi),
 * zeros; whole vectors, then one masked (masked-off lanes of a maskload do
 * not fault, so a segment may end at the end of a page); fp16 converted on
 * the way (F16C), its last few values through a copy. */
#define AVX2_F16C __attribute__((target("avx2,f16c")))

AVX2_F16C static ALWAYS_INLINE __m256 load8(const void *src, int64_t i, int64_t lanes, __m256i mask,
                                            const int halves)
{
    if (!halves)
        return lanes == 8 ? _mm256_loadu_ps((const float *)src + i)
                          : _mm256_maskload_ps((const float *)src + i, mask);
    uint16_t few[8] = {0};
    const uint16_t *h = (const uint16_t *)src + i;
    if (lanes < 8) {
        memcpy(few, h, (size_t)lanes * sizeof *h);
        h = few;
    }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* d[j] = src ? src[i + j] : 0 for j in [j0, j1). */
AVX2_F16C static ALWAYS_INLINE void copy8(float *d, int64_t j0, int64_t j1, const void *src,
                                          int64_t i, const int halves)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), all = _mm256_set1_epi32(-1);
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8)
        _mm256_storeu_ps(d + j, src ? load8(src, i + j, 8, all, halves) : _mm256_setzero_ps());
    if (j < j1) {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(j1 - j)), lane);
        _mm256_maskstore_ps(d + j, mask,
                            src ? load8(src, i + j, j1 - j, mask, halves) : _mm256_setzero_ps());
    }
}

AVX2_F16C static ALWAYS_INLINE void pack_rows(float *dst, const cg_panel_layout *to, int64_t kb,
                                              int64_t n, const void *src, const cg_pack_rows *rows,
                                              int64_t a, const int halves)
{
    cg_pack_rows_body(copy8, dst, to, kb, n, src, rows, a, halves);
}

AVX2_F16C void cg_f32_pack_rows_avx2(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                     const float *src, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src, rows, a, 0);
}

AVX2_F16C void cg_f16_pack_rows_f16c(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                     const void *src_halves, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src_halves, rows, a, 1);
}
