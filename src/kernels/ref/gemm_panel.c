/* SPDX-License-Identifier: MIT */
/* The packed micro-kernel in plain C, the indirect one (A's rows through
 * pointers) and the in-place one (runs): the oracles of the gemm_panel,
 * gemm_indirect and gemm_runs kernels and the portable path. The inner loop
 * runs along a step of B and a row of C (contiguous: the compiler vectorises
 * it). */
#include "kernels/list.h"

enum { MR = 8, NR = 16 }; /* the list's tile for this kernel */

/* C's row as its sum starts: itself (beta 1), init or zeros. */
static void start_row(float *ci, int n, float beta, const float *init)
{
    for (int j = 0; beta == 0.0f && j < n; j++)
        ci[j] = init ? init[j] : 0.0f;
}

void cg_f32_gemm_panel_ref_8x16(int m, int n, int k, const float *a, const float *b, float beta,
                                const float *init, float *c, int ldc, const char *prefetch,
                                const char *prefetch_end)
{
    (void)prefetch, (void)prefetch_end; /* a hint this kernel does without */
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        start_row(ci, n, beta, init);
        for (int p = 0; p < k; p++) {
            const float aip = a[(size_t)p * MR + i], *bp = b + (size_t)p * NR;
            for (int j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

void cg_f32_gemm_indirect_ref_8x16(int m, int n, int pieces, const int *len, const float *const *a,
                                   int64_t lda, const float *b, float beta, const float *init,
                                   float *c, int ldc, const char *prefetch,
                                   const char *prefetch_end)
{
    (void)prefetch, (void)prefetch_end;
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        start_row(ci, n, beta, init);
        const float *bp = b;
        for (int q = 0; q < pieces; q++) {
            const float *ai = a[q * lda + i];
            for (int p = 0; p < len[q]; p++, bp += NR)
                for (int j = 0; j < n; j++)
                    ci[j] += ai[p] * bp[j];
        }
    }
}

void cg_f32_gemm_runs_ref_8x16(int m, int n, int runs, const cg_gemm_run *run, int64_t lda,
                               int64_t ldb, float beta, float *c, int ldc, const char *prefetch,
                               const char *prefetch_end)
{
    (void)prefetch, (void)prefetch_end;
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        start_row(ci, n, beta, NULL);
        for (int q = 0; q < runs; q++)
            for (int64_t p = 0; p < run[q].len; p++) {
                const float aip = run[q].a[p * lda + i], *bp = run[q].b + p * ldb;
                for (int j = 0; j < n; j++)
                    ci[j] += aip * bp[j];
            }
    }
}

static float column(const void *src, int halves, const cg_pack_rows *rows, int64_t t, int64_t col)
{
    if (!src || col < rows->lo[t] || col >= rows->hi[t])
        return 0.0f;
    if (!halves)
        return ((const float *)src)[rows->at[t] + col];
    float f;
    cg_f16_to_f32_ref(&f, (const unsigned char *)src + 2 * (rows->at[t] + col), 1);
    return f;
}

static void pack_rows(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n, const void *src,
                      int halves, const cg_pack_rows *rows, int64_t a)
{
    for (int64_t t = 0; t < kb; t++)
        for (int64_t j = 0; j < n; j++)
            dst[j / to->piece * to->panel + t * to->step + j % to->piece] =
                column(src, halves, rows, t, a + j);
}

void cg_f32_pack_rows_ref(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                          const float *src, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src, 0, rows, a);
}

void cg_f16_pack_rows_ref(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                          const void *src_halves, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src_halves, 1, rows, a);
}

void cg_f32_pack_transposed_ref(float *dst, int64_t mr, int64_t m, int64_t n, const float *src,
                                const cg_pack_rows *rows, int64_t a)
{
    for (int64_t r = 0; r < mr; r++)
        for (int64_t j = 0; j < n; j++)
            dst[j * mr + r] = r < m ? column(src, 0, rows, r, a + j) : 0.0f;
}

void cg_f32_transpose_ref(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                          int64_t rows, int64_t cols)
{
    enum { BLOCK = 16 }; /* both sides' lines stay in L1 */
    for (int64_t i0 = 0; i0 < rows; i0 += BLOCK)
        for (int64_t j0 = 0; j0 < cols; j0 += BLOCK)
            for (int64_t i = i0; i < rows && i < i0 + BLOCK; i++)
                for (int64_t j = j0; j < cols && j < j0 + BLOCK; j++)
                    dst[j * ld_dst + i] = src[i * ld_src + j];
}
