/* SPDX-License-Identifier: MIT */
/* Column sums in double on AVX2 (kernels/list.h, cg_sum_rows_fn): four
 * columns a vector, four vectors at once (four chains of adds in flight),
 * each column's sum one chain in row order, so its bits are the
 * reference's. */
#include <immintrin.h>

#include "kernels/list.h"

#define AVX2 __attribute__((target("avx2")))
enum { LANES = 4, VECTORS = 4 };

/* Columns [k, k + 4 * vectors) of the rows, vectors <= VECTORS; with
 * `masked` one vector, its lanes in `last` (and `last_d` for its doubles).
 * Whole vectors are plain loads: vmaskmovps in the loop made the bias
 * gradient 2x slower on an AMD EPYC of family 23. */
AVX2 static inline __attribute__((always_inline)) void
sum_block(double *sum, const float *src, int64_t ld, int64_t rows, const int vectors,
          const int masked, __m128i last, __m256i last_d)
{
    __m256d s[VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        s[v] = masked ? _mm256_maskload_pd(sum, last_d) : _mm256_loadu_pd(sum + LANES * v);
    for (int64_t r = 0; r < rows; r++, src += ld)
#pragma GCC unroll 4
        for (int v = 0; v < vectors; v++) {
            const __m128 x = masked ? _mm_maskload_ps(src, last) : _mm_loadu_ps(src + LANES * v);
            s[v] = _mm256_add_pd(s[v], _mm256_cvtps_pd(x));
        }
#pragma GCC unroll 4
    for (int v = 0; v < vectors; v++)
        if (masked)
            _mm256_maskstore_pd(sum, last_d, s[v]);
        else
            _mm256_storeu_pd(sum + LANES * v, s[v]);
}

AVX2 void cg_f32_sum_rows_avx2(double *sum, const float *src, int64_t ld, int64_t rows, int64_t n)
{
    const __m128i none = _mm_setzero_si128(); /* the masks of unmasked blocks */
    const __m256i none_d = _mm256_setzero_si256();
    for (int64_t k = 0; k < n; k += LANES * VECTORS) {
        const int64_t cols = n - k < LANES * VECTORS ? n - k : LANES * VECTORS;
        double *s = sum + k;
        const float *x = src + k;
        switch (cols / LANES) { /* a register block of each width, whole vectors */
        case 4:
            sum_block(s, x, ld, rows, 4, 0, none, none_d);
            break;
        case 3:
            sum_block(s, x, ld, rows, 3, 0, none, none_d);
            break;
        case 2:
            sum_block(s, x, ld, rows, 2, 0, none, none_d);
            break;
        case 1:
            sum_block(s, x, ld, rows, 1, 0, none, none_d);
            break;
        default:
            break;
        }
        const int64_t rest = cols % LANES, at = cols - rest;
        if (rest) { /* the last few columns, one masked vector */
            const __m128i last =
                _mm_cmpgt_epi32(_mm_set1_epi32((int)rest), _mm_setr_epi32(0, 1, 2, 3));
            sum_block(s + at, x + at, ld, rows, 1, 1, last, _mm256_cvtepi32_epi64(last));
        }
    }
}
