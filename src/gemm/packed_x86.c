/* SPDX-License-Identifier: MIT */
/* Packing a micro-panel whose rows are strided in the source (A not
 * transposed, B transposed): 8 x 8 blocks transposed in registers, where a
 * scalar loop moves one float per store. */
#include "gemm/packed_x86.h"

#if CG_X86_KERNELS
#include <immintrin.h>

/* Rows r0..r0+7, steps p0..p0+7 of x into dst's steps p0..p0+7 at r0. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
transpose_8x8(const float *x, size_t stride_r, int w, float *dst)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(x + (size_t)i * stride_r);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) {
            r[i + j] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(1, 0, 1, 0));
            r[i + j + 2] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(3, 2, 3, 2));
        }
    /* r[0..3] hold steps 0, 2, 1, 3 of rows 0-3 (low lanes: steps 0-3, high: 4-7) */
    static const int order[4] = {0, 2, 1, 3};
    for (int j = 0; j < 4; j++) {
        const __m256 lo = r[order[j]], hi = r[4 + order[j]];
        _mm256_storeu_ps(dst + (size_t)j * w, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(dst + (size_t)(j + 4) * w, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

__attribute__((target("avx2"))) void cg_pack_transposed_avx2(const float *x, size_t stride_r, int h,
                                                             int kb, int w, float *dst)
{
    int r0 = 0;
    for (; r0 + 8 <= h; r0 += 8) {
        int p = 0;
        for (; p + 8 <= kb; p += 8)
            transpose_8x8(x + (size_t)r0 * stride_r + p, stride_r, w, dst + (size_t)p * w + r0);
        for (; p < kb; p++)
            for (int r = r0; r < r0 + 8; r++)
                dst[(size_t)p * w + r] = x[(size_t)r * stride_r + p];
    }
    for (int r = r0; r < h; r++)
        for (int p = 0; p < kb; p++)
            dst[(size_t)p * w + r] = x[(size_t)r * stride_r + p];
}
#endif
