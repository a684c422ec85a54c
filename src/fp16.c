/* SPDX-License-Identifier: MIT */
#include "fp16.h"

#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#include <cpuid.h>
#endif
#define CG_HAVE_X86 1
#endif

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

void cg_halves_to_floats_scalar(float *dst, const void *src_halves, size_t n)
{
    const unsigned char *src = src_halves;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = cg_half_to_float(h);
    }
}

void cg_floats_to_halves_scalar(void *dst_halves, const float *src, size_t n)
{
    unsigned char *dst = dst_halves;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = cg_float_to_half(src[i]);
        memcpy(dst + 2 * i, &h, sizeof h);
    }
}

#ifdef CG_HAVE_X86
__attribute__((target("avx,f16c"))) static void halves_to_floats_f16c(float *dst, const void *src,
                                                                      size_t n)
{
    const unsigned char *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
    cg_halves_to_floats_scalar(dst + i, s + 2 * i, n - i);
}

__attribute__((target("avx,f16c"))) static void floats_to_halves_f16c(void *dst, const float *src,
                                                                      size_t n)
{
    unsigned char *d = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    cg_floats_to_halves_scalar(d + 2 * i, src + i, n - i);
}

static int cpu_has_f16c(void)
{
#if defined(__clang__)
    /* clang (14 at least) has no "f16c" for __builtin_cpu_supports: ask cpuid
     * (leaf 1, ECX bit 29) once; every thread computes the same answer. */
    static int known; /* 0: not asked yet, 1: no, 2: yes */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!k) {
        unsigned a, b, c, d;
        int yes = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        k = yes ? 2 : 1;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k == 2;
#else
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#endif
}
#endif

void cg_halves_to_floats(float *dst, const void *src_halves, size_t n)
{
#ifdef CG_HAVE_X86
    if (cpu_has_f16c()) {
        halves_to_floats_f16c(dst, src_halves, n);
        return;
    }
#endif
    cg_halves_to_floats_scalar(dst, src_halves, n);
}

void cg_floats_to_halves(void *dst_halves, const float *src, size_t n)
{
#ifdef CG_HAVE_X86
    if (cpu_has_f16c()) {
        floats_to_halves_f16c(dst_halves, src, n);
        return;
    }
#endif
    cg_floats_to_halves_scalar(dst_halves, src, n);
}
