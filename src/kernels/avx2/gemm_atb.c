/* SPDX-License-Identifier: MIT */
/* C = A^T B + beta*C on AVX2 + FMA: the AVX-512 kernel's design
 * (avx512/gemm_atb.c) on a 6 x 16 block, 12 accumulators. */
#include "kernels/gemm_atb_blocks.h"
#include "kernels/list.h"

#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- AVX2 + FMA: up to 6 rows x 16 columns (12 accumulators) ---------- */

enum { MR256 = 6, NV256 = 2, NR256 = 8 * NV256 };

__attribute__((target("avx2,fma"))) static ALWAYS_INLINE void
block_avx2(const int mr, const int nv, const int masked, int k, const float *a, int lda,
           const float *b, int ldb, float beta, float *c, int ldc, const __m256i *mask)
{
    __m256 acc[MR256][NV256];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm256_setzero_ps();
    for (int p = 0; p < k; p++) {
        const float *brow = b + (size_t)p * ldb, *arow = a + (size_t)p * lda;
        __m256 bv[NV256];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bv[v] = masked ? _mm256_maskload_ps(brow + 8 * v, mask[v])
                           : _mm256_loadu_ps(brow + 8 * v); /* maskload is slow on some CPUs */
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m256 av = _mm256_broadcast_ss(arow + r);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            float *cv = c + (size_t)r * ldc + 8 * v;
            __m256 sum = acc[r][v];
            if (masked) {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_maskload_ps(cv, mask[v]));
                _mm256_maskstore_ps(cv, mask[v], sum);
            } else {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_loadu_ps(cv));
                _mm256_storeu_ps(cv, sum);
            }
        }
}

typedef void (*block256_fn)(int k, const float *a, int lda, const float *b, int ldb, float beta,
                            float *c, int ldc, const __m256i *mask);

#define BLOCK256(MR, NV, MASKED, NAME)                                                             \
    __attribute__((target("avx2,fma"))) static void NAME(int k, const float *a, int lda,           \
                                                         const float *b, int ldb, float beta,      \
                                                         float *c, int ldc, const __m256i *mask)   \
    {                                                                                              \
        block_avx2(MR, NV, MASKED, k, a, lda, b, ldb, beta, c, ldc, mask);                         \
    }
#define BLOCK256_ROW(MR)                                                                           \
    BLOCK256(MR, 1, 1, block256_##MR##x1)                                                          \
    BLOCK256(MR, 2, 1, block256_##MR##x2) BLOCK256(MR, 2, 0, block256_##MR##x2_full)
BLOCK256_ROW(1)
BLOCK256_ROW(2)
BLOCK256_ROW(3)
BLOCK256_ROW(4)
BLOCK256_ROW(5)
BLOCK256_ROW(6)
/* [rows - 1][vectors - 1], and a last column for two full vectors */
#define ENTRY256(MR)                                                                               \
    {                                                                                              \
        block256_##MR##x1, block256_##MR##x2, block256_##MR##x2_full                               \
    }
static const block256_fn blocks256[MR256][NV256 + 1] = {ENTRY256(1), ENTRY256(2), ENTRY256(3),
                                                        ENTRY256(4), ENTRY256(5), ENTRY256(6)};

/* Every row block of one column block of C (nr <= NR256 columns). */
__attribute__((target("avx2,fma"))) static void column_block_avx2(int m, int nr, int kc,
                                                                  const float *a, int lda,
                                                                  const float *b, int ldb,
                                                                  float beta, float *c, int ldc)
{
    __m256i mask[NV256];
    for (int v = 0; v < NV256; v++) {
        int lanes = nr - 8 * v;
        lanes = lanes < 0 ? 0 : lanes > 8 ? 8 : lanes;
        mask[v] =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    int kind = nr == NR256 ? NV256 : (nr + 7) / 8 - 1;
    for (int i = 0; i < m; i += MR256) {
        int mr = m - i < MR256 ? m - i : MR256;
        blocks256[mr - 1][kind](kc, a + i, lda, b, ldb, beta, c + (size_t)i * ldc, ldc, mask);
    }
}

void cg_f32_gemm_atb_avx2_6x16(int m, int n, int k, const float *a, int lda, const float *b,
                               int ldb, float beta, float *c, int ldc)
{
    cg_gemm_atb_drive_column_blocks(column_block_avx2, NR256, m, n, k, a, lda, b, ldb, beta, c,
                                    ldc);
}
