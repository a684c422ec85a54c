/* SPDX-License-Identifier: MIT */
/* IEEE binary16 <-> float conversion. Half values travel as raw bits
 * (uint16_t) inside the library, whatever the public float16 type is. */
#ifndef CG_FP16_H
#define CG_FP16_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/list.h"

float cg_half_to_float(uint16_t h);
uint16_t cg_float_to_half(float f); /* round to nearest even */

/* Bulk conversions with the context's kernels (F16C where the CPU has it
 * and CONVGRAD_ISA allows). src/dst may be unaligned. */
void cg_halves_to_floats(float *dst, const void *src_halves, size_t n);
void cg_floats_to_halves(void *dst_halves, const float *src, size_t n);
#endif
