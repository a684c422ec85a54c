/* SPDX-License-Identifier: MIT */
/* Register-blocked kernels for C = A^T B (+ C), the shape of a weight
 * gradient: a small C and a long sum over k. A row of C's block stays in
 * registers for the whole sum; A is read as broadcasts straight from its rows
 * (lda apart, no packing), B as vectors from its rows (ldb apart). Tails of n
 * use masked loads and stores, tails of m smaller instances of the kernel. */
#include "gemm/gemm_kernels.h"

#if CG_GEMM_HAVE_X86
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Rows of A and B per pass over C. */
enum { KC = 128 };

typedef void column_block_fn(int m, int nr, int kc, const float *a, int lda, const float *b,
                             int ldb, float beta, float *c, int ldc);

/* C = A^T B + beta*C in passes of KC rows of A and B, each pass column block
 * by column block (nr_max wide): a block's slice of B stays in L1 across the
 * rows of C. */
static void drive_column_blocks(column_block_fn *column_block, int nr_max, int m, int n, int k,
                                const float *a, int lda, const float *b, int ldb, float beta,
                                float *c, int ldc)
{
    for (int p = 0; p < k; p += KC) {
        int kc = k - p < KC ? k - p : KC;
        for (int j = 0; j < n; j += nr_max)
            column_block(m, n - j < nr_max ? n - j : nr_max, kc, a + (size_t)p * lda, lda,
                         b + (size_t)p * ldb + j, ldb, p > 0 ? 1.0f : beta, c + j, ldc);
    }
}

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

void cg_gemm_atb_avx512(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        float beta, float *c, int ldc)
{
    drive_column_blocks(column_block_avx512, NR512, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

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

void cg_gemm_atb_avx2(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                      float beta, float *c, int ldc)
{
    drive_column_blocks(column_block_avx2, NR256, m, n, k, a, lda, b, ldb, beta, c, ldc);
}
#endif
