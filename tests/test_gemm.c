/* SPDX-License-Identifier: MIT */
/* Every GEMM kernel this CPU can run against the plain reference, on the
 * edge cases of its tiles: m, n and k below, equal to, above and multiples of
 * the tile sizes, leading dimensions wider than the matrices, beta 0 and 1,
 * and C's neighbours (past n in each row) left untouched. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm/gemm_kernels.h"
#include "support.h"

typedef struct kernel {
    const char *name;
    cg_gemm_atb_fn *fn;
    int runs_here;
} kernel;

static int kernels(kernel *out)
{
    int n = 0;
    out[n++] = (kernel){"openblas", cg_gemm_atb_openblas, 1};
#if CG_GEMM_HAVE_X86
    out[n++] = (kernel){"avx512", cg_gemm_atb_avx512, __builtin_cpu_supports("avx512f")};
    out[n++] = (kernel){"avx2", cg_gemm_atb_avx2,
                        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")};
#endif
    return n;
}

static const float CANARY = -12345.0f;

/* Returns the number of wrong elements of C (canaries included). */
static int check_one(cg_gemm_atb_fn *fn, int m, int n, int k, float beta, cgt_rng *rng)
{
    int lda = m + 3, ldb = n + 5, ldc = n + 7;
    float *a = malloc(sizeof(float) * (size_t)k * lda), *b = malloc(sizeof(float) * (size_t)k * ldb);
    float *c = malloc(sizeof(float) * (size_t)m * ldc), *want = malloc(sizeof(float) * (size_t)m * ldc);
    cgt_fill_f32(rng, a, (size_t)k * lda, 1.0);
    cgt_fill_f32(rng, b, (size_t)k * ldb, 1.0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++)
            c[i * ldc + j] = j < n ? (float)cgt_rng_sym(rng) : CANARY;
    memcpy(want, c, sizeof(float) * (size_t)m * ldc);
    cg_gemm_atb_reference(m, n, k, a, lda, b, ldb, beta, want, ldc);
    fn(m, n, k, a, lda, b, ldb, beta, c, ldc);
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            float got = c[i * ldc + j], w = want[i * ldc + j];
            double tol = j < n ? 1e-5 * (k + 2) : 0.0; /* |a|, |b| <= 1 */
            bad += !(fabs((double)got - w) <= tol);
        }
    free(a);
    free(b);
    free(c);
    free(want);
    return bad;
}

Test(gemm, every_kernel_matches_the_reference_on_tile_edges)
{
    const int ms[] = {1, 2, 5, 6, 7, 8, 9, 13, 16, 17, 31};
    const int ns[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 96, 97};
    const int ks[] = {1, 2, 127, 128, 129, 300};
    kernel ks_[4];
    int nk = kernels(ks_);
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int q = 0; q < nk; q++) {
        if (!ks_[q].runs_here) {
            cr_log_info("gemm kernel %s: this CPU cannot run it", ks_[q].name);
            continue;
        }
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
                for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                    for (int beta = 0; beta < 2; beta++) {
                        int bad = check_one(ks_[q].fn, ms[mi], ns[ni], ks[ki], (float)beta, &rng);
                        cr_assert_eq(bad, 0, "%s m %d n %d k %d beta %d: %d wrong elements",
                                     ks_[q].name, ms[mi], ns[ni], ks[ki], beta, bad);
                    }
    }
}

Test(gemm, beta_zero_never_reads_c)
{
    kernel ks_[4];
    int nk = kernels(ks_);
    for (int q = 0; q < nk; q++) {
        if (!ks_[q].runs_here)
            continue;
        enum { M = 9, N = 50, K = 3 };
        float a[K * M], b[K * N], c[M * N];
        for (int i = 0; i < K * M; i++)
            a[i] = 1.0f;
        for (int i = 0; i < K * N; i++)
            b[i] = 2.0f;
        for (int i = 0; i < M * N; i++)
            c[i] = NAN;
        ks_[q].fn(M, N, K, a, M, b, N, 0.0f, c, N);
        for (int i = 0; i < M * N; i++)
            cr_assert_eq(c[i], 6.0f, "%s: c[%d] = %g", ks_[q].name, i, c[i]);
    }
}
