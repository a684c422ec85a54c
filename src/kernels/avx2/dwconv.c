/* SPDX-License-Identifier: MIT */
/* The training step's depthwise pixel on AVX2 + FMA: eight channels at a
 * time, their sum in one register over every tap. */
#include <immintrin.h>

#include "kernels/dwconv_rows_body.h"
#include "kernels/list.h"

enum { LANES = 8 };

__attribute__((target("avx2,fma"))) void
cg_f32_dwconv_pixel_avx2(float *restrict out, const float *restrict init, const float *const *x,
                         const float *restrict w, int64_t taps, int64_t n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t c0 = 0; c0 < n; c0 += LANES) {
        const int lanes = n - c0 >= LANES ? LANES : (int)(n - c0);
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), lane);
        __m256 acc = init ? _mm256_maskload_ps(init + c0, m) : _mm256_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            if (x[t])
                acc = _mm256_fmadd_ps(_mm256_maskload_ps(x[t] + c0, m),
                                      _mm256_maskload_ps(w + t * n + c0, m), acc);
        _mm256_maskstore_ps(out + c0, m, acc);
    }
}

/* The weight gradient for any kernel size: the reference's loops
 * (kernels/dwconv_rows_body.h), vectorised by the compiler for AVX2 + FMA. */
__attribute__((target("avx2,fma"))) void
cg_f32_dwconv_rows_avx2(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                        int64_t c_last, int64_t first, int64_t last, float *acc, float *dst)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, dst);
}
