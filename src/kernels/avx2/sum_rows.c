/* SPDX-License-Identifier: MIT */
/* Column sums in double on AVX2 (kernels/list.h, cg_sum_rows_fn): four
 * columns a vector, four vectors at once (four chains of adds in flight),
 * each column's sum one chain in row order, so its bits are the
 * reference's. */
#include <immintrin.h>

#include "kernels/list.h"

#define AVX2 __attribute__((target("avx2")))
enum { LANES = 4, VECTORS = 4 };

/* Columns [k, k + 4 * vectors) of the rows, vectors <= VECTORS, the last
 * vector's lanes in `last` (and `last_d` for its doubles). */
AVX2 static inline __attribute__((always_inline)) void sum_block(double *sum, const float *src,
                                                                 int64_t ld, int64_t rows,
                                                                 const int vectors, __m128i last,
                                                                 __m256i last_d)
{
    const __m128i all = _mm_set1_epi32(-1);
    const __m256i all_d = _mm256_set1_epi64x(-1);
    __m256d s[VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        s[v] = _mm256_maskload_pd(sum + LANES * v, v == vectors - 1 ? last_d : all_d);
    for (int64_t r = 0; r < rows; r++, src += ld)
#pragma GCC unroll 4
        for (int v = 0; v < vectors; v++) {
            const __m128i m = v == vectors - 1 ? last : all;
            s[v] = _mm256_add_pd(s[v], _mm256_cvtps_pd(_mm_maskload_ps(src + LANES * v, m)));
        }
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        _mm256_maskstore_pd(sum + LANES * v, v == vectors - 1 ? last_d : all_d, s[v]);
}

AVX2 void cg_f32_sum_rows_avx2(double *sum, const float *src, int64_t ld, int64_t rows, int64_t n)
{
    for (int64_t k = 0; k < n; k += LANES * VECTORS) {
        const int64_t cols = n - k < LANES * VECTORS ? n - k : LANES * VECTORS;
        const int vectors = (int)((cols + LANES - 1) / LANES);
        const __m128i last = _mm_cmpgt_epi32(_mm_set1_epi32((int)(cols - LANES * (vectors - 1))),
                                             _mm_setr_epi32(0, 1, 2, 3));
        const __m256i last_d = _mm256_cvtepi32_epi64(last);
        switch (vectors) { /* a register block of each width */
        case 4:
            sum_block(sum + k, src + k, ld, rows, 4, last, last_d);
            break;
        case 3:
            sum_block(sum + k, src + k, ld, rows, 3, last, last_d);
            break;
        case 2:
            sum_block(sum + k, src + k, ld, rows, 2, last, last_d);
            break;
        default:
            sum_block(sum + k, src + k, ld, rows, 1, last, last_d);
            break;
        }
    }
}
