/* SPDX-License-Identifier: MIT */
/* fp16 <-> fp32 in plain C, a value at a time (src/fp16.c): the oracle and
 * the portable path. */
#include <string.h>

#include "fp16.h"
#include "kernels/list.h"

void cg_f16_to_f32_ref(float *dst, const void *src_halves, size_t n)
{
    const unsigned char *src = src_halves;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = cg_half_to_float(h);
    }
}

void cg_f32_to_f16_ref(void *dst_halves, const float *src, size_t n)
{
    unsigned char *dst = dst_halves;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = cg_float_to_half(src[i]);
        memcpy(dst + 2 * i, &h, sizeof h);
    }
}
