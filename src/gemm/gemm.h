/* SPDX-License-Identifier: MIT */
/* The matrix product the operator needs, and nothing of cores or shapes. */
#ifndef CG_GEMM_H
#define CG_GEMM_H

#include <stddef.h>

#include "kernels/list.h"

/* C[m][n] = op(A) op(B) + beta*C, row-major, op(X) = X or X^T as trans_*
 * says; beta is 0 or 1. The forward and input-gradient shapes, which
 * OpenBLAS's packed kernels serve well. Runs on the calling thread only. */
void cg_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
             int ldb, float beta, float *c, int ldc);

/* ---- the packed driver behind cg_gemm (src/gemm/packed.c) ------------- */

/* A gemm_panel kernel (kernels/list.h), its A panel and B micro-panel (mr,
 * nr) and the cache blocks the packed drivers run it with: kc so that a
 * kc x nr micro-panel of B stays in L1 across a block of A, mc x kc of A in
 * L2, kc x nc of B beside it. mc is a multiple of mr, nc of nr. */
typedef struct cg_gemm_blocking {
    cg_gemm_panel_fn *kernel;
    const char *name; /* the kernel's */
    int mr, nr, kc, mc, nc;
} cg_gemm_blocking;

/* This CPU's blocking (the context's gemm_panel kernel, blocks from its L1
 * and L2), and whether cg_gemm runs on it rather than on OpenBLAS (where
 * OpenBLAS's kernels are narrower than the library's: see packed.c); chosen
 * once per process. Never NULL. */
const cg_gemm_blocking *cg_gemm_blocking_here(void);
int cg_gemm_uses_packed(void);

/* Floats of packing space cg_gemm_packed needs with blocking bl. */
size_t cg_gemm_pack_floats(const cg_gemm_blocking *bl);

/* cg_gemm on bl's kernel: op(A) and op(B) packed block by block into `pack`
 * (cg_gemm_pack_floats(bl) floats) as the kernel reads them, mr x kc and
 * kc x nr micro-panels, each contiguous. */
void cg_gemm_packed(const cg_gemm_blocking *bl, int trans_a, int trans_b, int m, int n, int k,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                    float *pack);

/* cg_gemm_packed on this CPU's blocking and the calling thread's packing
 * space (allocated on its first call), if cg_gemm_uses_packed(); returns
 * whether it ran: 0 leaves C to the caller's other path. */
int cg_gemm_try_packed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);
#endif
