/* SPDX-License-Identifier: MIT */
/* The one double-precision reference of the contract's formula (CONTRACT.md
 * section 1), used by every test and by the benchmarks. Plain loops, no
 * tricks: it must be obviously right rather than fast.
 *
 * Also an independent, exact binary16 <-> binary32 conversion, so the tests
 * never trust the library's own fp16 code. */
#ifndef CGT_REFERENCE_H
#define CGT_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "convgrad.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element counts from the shape fields of p, in size_t (callers keep shapes
 * small enough that they do not overflow). */
size_t ref_dy_elems(const ConvParameter *p); /* N*OH*OW*Cout */
size_t ref_x_elems(const ConvParameter *p);  /* N*H*W*Cin */
size_t ref_dw_elems(const ConvParameter *p); /* Cout*Kh*Kw*(Cin/G) */
size_t ref_dw_row(const ConvParameter *p);   /* Kh*Kw*(Cin/G): one row of dw */
/* Multiply-accumulates the formula performs (terms in range or not). */
double ref_macs(const ConvParameter *p);

/* dw[Cout][Kh][Kw][Cin/G] = the formula's sum (NOT accumulated: dw is
 * overwritten; no bias). abs_sum (may be NULL) receives, per element, the
 * sum of |dy*x| over the terms, for error bounds. dy is [N][OH][OW][Cout],
 * x is [N][H][W][Cin], both NHWC doubles. Coordinates are computed in int64,
 * so huge strides, dilations and pads are fine. Uses only the shape fields
 * of p (input_batch_ is the batch; the caller keeps both batches equal). */
void ref_grad_filter(const ConvParameter *p, const double *dy, const double *x, double *dw,
                     double *abs_sum);

/* ---- conversions --------------------------------------------------------- */
void ref_float_to_double(const float *src, double *dst, size_t n);
/* src holds binary16 bit patterns (2 bytes each, any 2-byte alignment). */
void ref_half_bits_to_double(const void *src, double *dst, size_t n);

/* Exact binary16 -> binary32 (subnormals, inf, nan kept). */
float ref_half_to_float(uint16_t h);
double ref_half_to_double(uint16_t h);
/* binary32 -> binary16, round to nearest even; overflow to inf, subnormals,
 * nan kept nan (quiet). */
uint16_t ref_float_to_half(float f);

/* Loads / stores one binary16 element of a raw buffer (memcpy, so the
 * public float16 type may be _Float16 or uint16_t). */
uint16_t ref_half_load(const void *buf, size_t i);
void ref_half_store(void *buf, size_t i, uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
