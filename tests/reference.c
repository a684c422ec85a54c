/* SPDX-License-Identifier: MIT */
/* The double-precision reference; see reference.h. */
#include "reference.h"

#include <math.h>
#include <string.h>

size_t ref_dy_elems(const ConvParameter *p)
{
    return (size_t)p->output_batch_ * (size_t)p->output_h_ * (size_t)p->output_w_ *
           (size_t)p->output_channel_;
}

size_t ref_x_elems(const ConvParameter *p)
{
    return (size_t)p->input_batch_ * (size_t)p->input_h_ * (size_t)p->input_w_ *
           (size_t)p->input_channel_;
}

size_t ref_dw_row(const ConvParameter *p)
{
    return (size_t)p->kernel_h_ * (size_t)p->kernel_w_ * (size_t)(p->input_channel_ / p->group_);
}

size_t ref_dw_elems(const ConvParameter *p)
{
    return (size_t)p->output_channel_ * ref_dw_row(p);
}

double ref_macs(const ConvParameter *p)
{
    return (double)p->output_batch_ * p->output_h_ * p->output_w_ * p->kernel_h_ * p->kernel_w_ *
           p->output_channel_ * (double)(p->input_channel_ / p->group_);
}

void ref_grad_filter(const ConvParameter *p, const double *dy, const double *x, double *dw,
                     double *abs_sum)
{
    const int64_t N = p->input_batch_, H = p->input_h_, W = p->input_w_;
    const int64_t OH = p->output_h_, OW = p->output_w_;
    const int64_t Cin = p->input_channel_, Cout = p->output_channel_;
    const int64_t Kh = p->kernel_h_, Kw = p->kernel_w_, G = p->group_;
    const int64_t Cip = Cin / G, Cop = Cout / G;
    const int64_t sh = p->stride_h_, sw = p->stride_w_;
    const int64_t dh = p->dilation_h_, dwl = p->dilation_w_;
    const int64_t pu = p->pad_u_, pl = p->pad_l_;
    const size_t elems = ref_dw_elems(p);

    for (size_t i = 0; i < elems; ++i) {
        dw[i] = 0.0;
        if (abs_sum)
            abs_sum[i] = 0.0;
    }
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t oh = 0; oh < OH; ++oh) {
            for (int64_t ow = 0; ow < OW; ++ow) {
                const double *dyrow = dy + ((n * OH + oh) * OW + ow) * Cout;
                for (int64_t kh = 0; kh < Kh; ++kh) {
                    const int64_t iy = oh * sh + kh * dh - pu;
                    if (iy < 0 || iy >= H)
                        continue;
                    for (int64_t kw = 0; kw < Kw; ++kw) {
                        const int64_t ix = ow * sw + kw * dwl - pl;
                        if (ix < 0 || ix >= W)
                            continue;
                        const double *xrow = x + ((n * H + iy) * W + ix) * Cin;
                        for (int64_t g = 0; g < G; ++g) {
                            for (int64_t co = 0; co < Cop; ++co) {
                                const int64_t c = g * Cop + co;
                                const double d = dyrow[c];
                                const int64_t base = ((c * Kh + kh) * Kw + kw) * Cip;
                                for (int64_t ci = 0; ci < Cip; ++ci) {
                                    const double t = d * xrow[g * Cip + ci];
                                    dw[base + ci] += t;
                                    if (abs_sum)
                                        abs_sum[base + ci] += fabs(t);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

void ref_float_to_double(const float *src, double *dst, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        dst[i] = (double)src[i];
}

uint16_t ref_half_load(const void *buf, size_t i)
{
    uint16_t h;
    memcpy(&h, (const unsigned char *)buf + 2 * i, 2);
    return h;
}

void ref_half_store(void *buf, size_t i, uint16_t h)
{
    memcpy((unsigned char *)buf + 2 * i, &h, 2);
}

void ref_half_bits_to_double(const void *src, double *dst, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        dst[i] = ref_half_to_double(ref_half_load(src, i));
}

double ref_half_to_double(uint16_t h)
{
    const int sign = (h >> 15) & 1;
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp((double)m, -24); /* zero or subnormal: m * 2^-24 */
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m | 0x400), e - 25); /* 1.m * 2^(e-15) */
    return sign ? -v : v;
}

float ref_half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t e = (h >> 10) & 0x1f;
    const uint32_t m = h & 0x3ffu;
    uint32_t u;
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* exact: m < 2^10 */
        memcpy(&u, &v, 4);
        u |= sign;
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u);
    } else {
        u = sign | ((e - 15 + 127) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ref_float_to_half(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t exp = (u >> 23) & 0xffu;
    const uint32_t man = u & 0x7fffffu;

    if (exp == 0xff) /* inf or nan (nan kept quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));

    const int e = (int)exp - 127 + 15; /* half biased exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e >= 1) {
        /* normal: keep 10 mantissa bits, round the 13 dropped ones */
        uint32_t h = ((uint32_t)e << 10) | (man >> 13);
        const uint32_t rem = man & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h += 1; /* a carry into the exponent is right, up to inf */
        return (uint16_t)(sign | h);
    }
    /* subnormal or zero: value = M * 2^(exp-150), in units of 2^-24 it is
     * M >> (14 - e) with M the 24-bit significand */
    if (exp == 0)
        return sign; /* float zero or float subnormal: far below 2^-25 */
    const int shift = 14 - e;
    if (shift > 24)
        return sign; /* below 2^-25: rounds to zero */
    const uint32_t M = man | 0x800000u;
    uint32_t h = M >> shift;
    const uint32_t rem = M & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u)))
        h += 1; /* may become 0x400, the smallest normal: right encoding */
    return (uint16_t)(sign | h);
}
