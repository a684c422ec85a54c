/* SPDX-License-Identifier: MIT */
/* C = A^T B + beta*C on AVX-512, the shape of a weight gradient: a small C
 * and a long sum over k. A row of C's block stays in registers for the whole
 * sum; A is read as broadcasts straight from its rows (lda apart, no
 * packing), B as vectors from its rows (ldb apart). Tails of n use masked
 * loads and stores, tails of m smaller instances of the kernel. */
#include "kernels/gemm_atb_blocks.h"
#include "kernels/list.h"

#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- AVX-512: up to 8 rows x 48 columns (24 accumulators) ------------- */

enum { MR512 = 8, NV512 = 3, NR512 = 16 * NV512 };

__attribute__((target("avx512f"))) static ALWAYS_INLINE void
block_avx512(const int mr, const int nv, int k, const float *a, int lda, const float *b, int ldb,
             float beta, float *c, int ldc, const __mmask16 *mask)
{
    __m512 acc[MR512][NV512];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int p = 0; p < k; p++) {
        const float *brow = b + (size_t)p * ldb, *arow = a + (size_t)p * lda;
        __m512 bv[NV512];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            bv[v] = _mm512_maskz_loadu_ps(mask[v], brow + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            __m512 av = _mm512_set1_ps(arow[r]);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) {
            float *cv = c + (size_t)r * ldc + 16 * v;
            __m512 sum = acc[r][v];
            if (beta != 0.0f)
                sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask[v], cv));
            _mm512_mask_storeu_ps(cv, mask[v], sum);
        }
}

typedef void (*block_fn)(int k, const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc, const __mmask16 *mask);

#define BLOCK512(MR, NV)                                                                           \
    __attribute__((target("avx512f"))) static void block512_##MR##x##NV(                           \
        int k, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,    \
        const __mmask16 *mask)                                                                     \
    {                                                                                              \
        block_avx512(MR, NV, k, a, lda, b, ldb, beta, c, ldc, mask);                               \
    }
#define BLOCK512_ROW(MR) BLOCK512(MR, 1) BLOCK512(MR, 2) BLOCK512(MR, 3)
BLOCK512_ROW(1)
BLOCK512_ROW(2)
BLOCK512_ROW(3)
BLOCK512_ROW(4)
BLOCK512_ROW(5)
BLOCK512_ROW(6)
BLOCK512_ROW(7)
BLOCK512_ROW(8)
#define ENTRY512(MR)                                                                               \
    {                                                                                              \
        block512_##MR##x1, block512_##MR##x2, block512_##MR##x3                                    \
    }
static const block_fn blocks512[MR512][NV512] = {ENTRY512(1), ENTRY512(2), ENTRY512(3),
                                                 ENTRY512(4), ENTRY512(5), ENTRY512(6),
                                                 ENTRY512(7), ENTRY512(8)};

/* Every row block of one column block of C (nr <= NR512 columns). */
__attribute__((target("avx512f"))) static void column_block_avx512(int m, int nr, int kc,
                                                                   const float *a, int lda,
                                                                   const float *b, int ldb,
                                                                   float beta, float *c, int ldc)
{
    __mmask16 mask[NV512];
    for (int v = 0; v < NV512; v++) {
        int lanes = nr - 16 * v;
        lanes = lanes < 0 ? 0 : lanes > 16 ? 16 : lanes;
        mask[v] = (__mmask16)((1u << lanes) - 1u);
    }
    int nv = (nr + 15) / 16;
    for (int i = 0; i < m; i += MR512) {
        int mr = m - i < MR512 ? m - i : MR512;
        blocks512[mr - 1][nv - 1](kc, a + i, lda, b, ldb, beta, c + (size_t)i * ldc, ldc, mask);
    }
}

void cg_f32_gemm_atb_avx512_8x48(int m, int n, int k, const float *a, int lda, const float *b,
                                 int ldb, float beta, float *c, int ldc)
{
    cg_gemm_atb_drive_column_blocks(column_block_avx512, NR512, m, n, k, a, lda, b, ldb, beta, c,
                                    ldc);
}
