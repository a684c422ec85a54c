/* SPDX-License-Identifier: MIT */
/* The packed driver's x86 packing (src/gemm/packed_x86.c). */
#ifndef CG_GEMM_PACKED_X86_H
#define CG_GEMM_PACKED_X86_H
#include <stddef.h>

#include "kernels/list.h"

#if CG_X86_KERNELS
/* dst[p*w + r] = x[r*stride_r + p] for r < h (h <= w) and p < kb: one
 * micro-panel of a matrix whose panel rows are x's rows. Needs AVX2. */
void cg_pack_transposed_avx2(const float *x, size_t stride_r, int h, int kb, int w, float *dst);
#endif
#endif
