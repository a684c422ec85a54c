/* SPDX-License-Identifier: MIT */
/* The matrix product the operator needs, and nothing of cores or shapes. */
#ifndef CG_GEMM_H
#define CG_GEMM_H

/* C[m][n] = A^T B + beta*C, row-major: A is [k][m] (lda), B is [k][n] (ldb),
 * C is [m][n] (ldc). beta is 0 (C is overwritten, never read) or 1.
 * Safe to call from many threads at once; runs on the calling thread only. */
void cg_gemm_atb(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);

/* C[m][n] = op(A) op(B) + beta*C, row-major, op(X) = X or X^T as trans_*
 * says; beta is 0 or 1. The forward and input-gradient shapes, which
 * OpenBLAS's packed kernels serve well. Runs on the calling thread only. */
void cg_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc);
#endif
