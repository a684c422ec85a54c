/* SPDX-License-Identifier: MIT */
#include "gemm/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stddef.h>

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* Each emulated core is one OS thread doing math; OpenBLAS's own pool would
 * oversubscribe the CPUs, so its calls run on the caller's thread only. */
static void run_blas_single_threaded(void)
{
    openblas_set_num_threads(1);
}

static void blas_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc)
{
    pthread_once(&blas_once, run_blas_single_threaded);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void cg_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
             int ldb, float beta, float *c, int ldc)
{
    if (!cg_gemm_try_packed(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc))
        blas_sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}
