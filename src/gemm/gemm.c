/* SPDX-License-Identifier: MIT */
#include "gemm/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stddef.h>

#include "gemm/gemm_kernels.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* Each emulated core is one OS thread doing math; OpenBLAS's own pool would
 * oversubscribe the CPUs, so its calls run on the caller's thread only. */
static void run_blas_single_threaded(void) { openblas_set_num_threads(1); }

void cg_gemm_atb_openblas(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc)
{
    pthread_once(&blas_once, run_blas_single_threaded);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c,
                ldc);
}

void cg_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc)
{
    if (cg_gemm_try_packed(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc))
        return;
    pthread_once(&blas_once, run_blas_single_threaded);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void cg_gemm_atb_reference(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++)
                sum += a[(size_t)p * lda + i] * b[(size_t)p * ldb + j];
            float *cij = c + (size_t)i * ldc + j;
            *cij = beta != 0.0f ? *cij + sum : sum;
        }
}

cg_gemm_atb_fn *cg_gemm_atb_selected(const char **name)
{
    const char *unused;
    if (!name)
        name = &unused;
#if CG_GEMM_HAVE_X86
    if (__builtin_cpu_supports("avx512f")) {
        *name = "avx512";
        return cg_gemm_atb_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *name = "avx2";
        return cg_gemm_atb_avx2;
    }
#endif
    *name = "openblas";
    return cg_gemm_atb_openblas;
}

void cg_gemm_atb(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc)
{
    cg_gemm_atb_selected(NULL)(m, n, k, a, lda, b, ldb, beta, c, ldc);
}
