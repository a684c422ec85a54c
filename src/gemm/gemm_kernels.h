/* SPDX-License-Identifier: MIT */
/* The ISA-specific kernels behind cg_gemm_atb, and the plain reference each
 * is tested against. All compute C[m][n] = A^T B + beta*C as cg_gemm_atb. */
#ifndef CG_GEMM_KERNELS_H
#define CG_GEMM_KERNELS_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CG_GEMM_HAVE_X86 1
#else
#define CG_GEMM_HAVE_X86 0
#endif

typedef void cg_gemm_atb_fn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                            float beta, float *c, int ldc);

cg_gemm_atb_fn cg_gemm_atb_reference; /* plain loops */
cg_gemm_atb_fn cg_gemm_atb_openblas;  /* the portable path */
#if CG_GEMM_HAVE_X86
cg_gemm_atb_fn cg_gemm_atb_avx512;
cg_gemm_atb_fn cg_gemm_atb_avx2;
#endif

/* The kernel cg_gemm_atb runs on this CPU, and its name. */
cg_gemm_atb_fn *cg_gemm_atb_selected(const char **name);
#endif
