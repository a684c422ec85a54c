/* SPDX-License-Identifier: MIT */
/* C = A^T B + beta*C in plain C: the oracle of the gemm_atb kernels and the
 * portable path. Row i of C gathers one rank-1 update per row p of A and B,
 * so the inner loop runs along rows of B and C (contiguous, which the
 * compiler vectorises) rather than down columns of A and B. */
#include "kernels/list.h"

void cg_f32_gemm_atb_ref(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                         float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < n; j++)
                ci[j] = 0.0f;
        for (int p = 0; p < k; p++) {
            const float aip = a[(size_t)p * lda + i], *bp = b + (size_t)p * ldb;
            for (int j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}
