/* SPDX-License-Identifier: MIT */
/* fp16 <-> fp32 with F16C (every AVX2 CPU has it), eight values at a time;
 * the tails go to the reference. */
#include <immintrin.h>

#include "kernels/list.h"

__attribute__((target("avx,f16c"))) void cg_f16_to_f32_f16c(float *dst, const void *src_halves,
                                                            size_t n)
{
    const unsigned char *s = src_halves;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
    cg_f16_to_f32_ref(dst + i, s + 2 * i, n - i);
}

__attribute__((target("avx,f16c"))) void cg_f32_to_f16_f16c(void *dst_halves, const float *src,
                                                            size_t n)
{
    unsigned char *d = dst_halves;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    cg_f32_to_f16_ref(d + 2 * i, src + i, n - i);
}
