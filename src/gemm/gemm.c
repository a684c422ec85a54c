/* SPDX-License-Identifier: MIT */
#include "gemm/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <stddef.h>

#include "kernels/context.h"

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

/* The list's portable gemm_atb (src/kernels/kernels.inc): OpenBLAS is
 * 1.7-2.4x faster than the plain loops of cg_f32_gemm_atb_ref on weight
 * gradient shapes (this CPU, Xeon family 6 model 207, one thread: 28.5 vs
 * 14.5 GFLOP/s at m 64 n 576 k 512, 15.0 vs 8.9 at m 256 n 2304 k 196), so
 * a build without x86 kernels, and CONVGRAD_ISA=ref, multiply with it. */
void cg_f32_gemm_atb_openblas(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                              float beta, float *c, int ldc)
{
    blas_sgemm(1, 0, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void cg_gemm_atb(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc)
{
    cg_kernels()->gemm_atb(m, n, k, a, lda, b, ldb, beta, c, ldc);
}
