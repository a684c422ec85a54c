/* SPDX-License-Identifier: MIT */
/* Column sums in double on AVX-512 (kernels/list.h, cg_sum_rows_fn): eight
 * columns a vector, four vectors at once (four chains of adds in flight),
 * each column's sum one chain in row order, so its bits are the
 * reference's. */
#include <immintrin.h>

#include "kernels/list.h"

#define AVX512 __attribute__((target("avx512f,avx512vl")))
enum { LANES = 8, VECTORS = 4 };

/* Columns [k, k + 8 * vectors) of the rows, vectors <= VECTORS, the last
 * vector's lanes in `last`. */
AVX512 static inline __attribute__((always_inline)) void
sum_block(double *sum, const float *src, int64_t ld, int64_t rows, const int vectors, __mmask8 last)
{
    __m512d s[VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        s[v] = _mm512_maskz_loadu_pd(v == vectors - 1 ? last : 0xFF, sum + LANES * v);
    for (int64_t r = 0; r < rows; r++, src += ld)
#pragma GCC unroll 4
        for (int v = 0; v < vectors; v++) {
            const __mmask8 m = v == vectors - 1 ? last : 0xFF;
            s[v] = _mm512_add_pd(s[v], _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, src + LANES * v)));
        }
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        _mm512_mask_storeu_pd(sum + LANES * v, v == vectors - 1 ? last : 0xFF, s[v]);
}

AVX512 void cg_f32_sum_rows_avx512(double *sum, const float *src, int64_t ld, int64_t rows,
                                   int64_t n)
{
    for (int64_t k = 0; k < n; k += LANES * VECTORS) {
        const int64_t cols = n - k < LANES * VECTORS ? n - k : LANES * VECTORS;
        const int vectors = (int)((cols + LANES - 1) / LANES);
        const __mmask8 last = (__mmask8)((1u << (cols - LANES * (vectors - 1))) - 1u);
        switch (vectors) { /* a register block of each width */
        case 4:
            sum_block(sum + k, src + k, ld, rows, 4, last);
            break;
        case 3:
            sum_block(sum + k, src + k, ld, rows, 3, last);
            break;
        case 2:
            sum_block(sum + k, src + k, ld, rows, 2, last);
            break;
        default:
            sum_block(sum + k, src + k, ld, rows, 1, last);
            break;
        }
    }
}
