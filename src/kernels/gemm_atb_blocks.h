/* SPDX-License-Identifier: MIT */
/* The loop the x86 gemm_atb kernels share around their register blocks. */
#ifndef CG_KERNELS_GEMM_ATB_BLOCKS_H
#define CG_KERNELS_GEMM_ATB_BLOCKS_H
#include <stddef.h>

/* Rows of A and B per pass over C. */
enum { CG_GEMM_ATB_KC = 128 };

typedef void cg_gemm_atb_column_block_fn(int m, int nr, int kc, const float *a, int lda,
                                         const float *b, int ldb, float beta, float *c, int ldc);

/* C = A^T B + beta*C in passes of KC rows of A and B, each pass column block
 * by column block (nr_max wide): a block's slice of B stays in L1 across the
 * rows of C. */
static inline void cg_gemm_atb_drive_column_blocks(cg_gemm_atb_column_block_fn *column_block,
                                                   int nr_max, int m, int n, int k, const float *a,
                                                   int lda, const float *b, int ldb, float beta,
                                                   float *c, int ldc)
{
    for (int p = 0; p < k; p += CG_GEMM_ATB_KC) {
        int kc = k - p < CG_GEMM_ATB_KC ? k - p : CG_GEMM_ATB_KC;
        for (int j = 0; j < n; j += nr_max)
            column_block(m, n - j < nr_max ? n - j : nr_max, kc, a + (size_t)p * lda, lda,
                         b + (size_t)p * ldb + j, ldb, p > 0 ? 1.0f : beta, c + j, ldc);
    }
}
#endif
