/* SPDX-License-Identifier: MIT */
#include "fp16.h"

#include <string.h>

#include "kernels/context.h"

float cg_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) { /* inf / nan: keep the payload and quiet it, as F16C does */
        bits = sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0);
    } else if (exp != 0) { /* normal */
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) { /* signed zero */
        bits = sign;
    } else { /* subnormal half: exact as a normal float */
        int shift = 0;
        while (!(man & 0x400u)) {
            man <<= 1;
            shift++;
        }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t cg_float_to_half(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u) { /* inf / nan (nan stays nan: force a mantissa bit) */
        uint16_t man = (uint16_t)(abs > 0x7f800000u ? (0x200u | ((abs >> 13) & 0x3ffu)) : 0);
        return sign | 0x7c00u | man;
    }
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return sign | 0x7c00u;
    if (abs < 0x38800000u) {   /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) /* under half the smallest subnormal: +-0 */
            return sign;
        uint32_t exp = abs >> 23;
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14..24: places the value in units of 2^-24 */
        uint32_t q = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t v = abs - 0x38000000u;
    uint32_t q = v >> 13;
    uint32_t rem = v & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry into the exponent is the correct rounding */
    return sign | (uint16_t)q;
}

/* The bulk conversions run the context's kernels (kernels/context.h). */
void cg_halves_to_floats(float *dst, const void *src_halves, size_t n)
{
    cg_kernels()->f16_to_f32(dst, src_halves, n);
}

void cg_floats_to_halves(void *dst_halves, const float *src, size_t n)
{
    cg_kernels()->f32_to_f16(dst_halves, src, n);
}
