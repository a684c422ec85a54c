#include "gemm/gemm.h"

#include <cblas.h>
#include <pthread.h>

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* Each emulated core is one OS thread doing math; OpenBLAS's own pool would
 * oversubscribe the CPUs, so its calls run on the caller's thread only. */
static void run_blas_single_threaded(void)
{
    openblas_set_num_threads(1);
}

void cg_gemm_atb(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc)
{
    pthread_once(&blas_once, run_blas_single_threaded);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c,
                ldc);
}
