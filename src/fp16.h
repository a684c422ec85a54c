/* SPDX-License-Identifier: MIT */
/* IEEE binary16 <-> float conversion. Half values travel as raw bits
 * (uint16_t) inside the library, whatever the public float16 type is. */
#ifndef CG_FP16_H
#define CG_FP16_H
#include <stddef.h>
#include <stdint.h>

float cg_half_to_float(uint16_t h);
uint16_t cg_float_to_half(float f); /* round to nearest even */

/* Bulk conversions; use F16C when the CPU has it. src/dst may be unaligned. */
void cg_halves_to_floats(float *dst, const void *src_halves, size_t n);
void cg_floats_to_halves(void *dst_halves, const float *src, size_t n);

/* Portable versions of the two above, kept as the reference for tests. */
void cg_halves_to_floats_scalar(float *dst, const void *src_halves, size_t n);
void cg_floats_to_halves_scalar(void *dst_halves, const float *src, size_t n);
#endif
