/* SPDX-License-Identifier: MIT */
/* C = op(A) op(B) + beta*C in the manner of BLIS: for each kc x nc block of
 * op(B) and mc x kc block of op(A), both packed into the order the
 * gemm_panel kernel reads them (contiguous kc x nr and mr x kc micro-panels),
 * the kernel runs once per mr x nr tile of C. Read in place instead, rows
 * lda apart would touch a new cache line, and often a new page, every step
 * of the sum. */
#include "gemm/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "kernels/context.h"
#include "thread_scratch.h"

/* Chosen once per process (choose, below). */
static cg_gemm_blocking g_here;
static int g_use_packed;
static pthread_once_t g_choose_once = PTHREAD_ONCE_INIT;
static void choose(void);

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* ---- packing ---------------------------------------------------------- */

/* A last panel's missing rows are zeros: the kernel multiplies them, and
 * stores nothing of them. */
void cg_pack_panels(const float *x, size_t stride_r, size_t stride_p, int rows, int kb, int w,
                    float *dst)
{
    const cg_kernel_context *kx = cg_kernels();
    for (int q = 0; q < rows; q += w, dst += (size_t)w * kb) {
        const int h = min_int(w, rows - q);
        const float *src = x + (size_t)q * stride_r;
        if (stride_p == 1) { /* a panel row is one run of x: the transposing packer */
            int64_t at[CG_PANEL_MOST], lo[CG_PANEL_MOST], hi[CG_PANEL_MOST];
            for (int r = 0; r < h; r++) {
                at[r] = (int64_t)r * (int64_t)stride_r;
                lo[r] = 0;
                hi[r] = kb;
            }
            kx->pack_transposed(dst, w, h, kb, src, &(cg_pack_rows){at, lo, hi}, 0);
            continue;
        }
        for (int p = 0; h < w && p < kb; p++)
            memset(dst + (size_t)p * w + h, 0, (size_t)(w - h) * sizeof(float));
        if (stride_r == 1) { /* a panel's step p is one run of x */
            for (int p = 0; p < kb; p++)
                for (int r = 0; r < h; r++)
                    dst[(size_t)p * w + r] = src[(size_t)p * stride_p + r];
            continue;
        }
        for (int r = 0; r < h; r++) /* read each row once, along its steps */
            for (int p = 0; p < kb; p++)
                dst[(size_t)p * w + r] = src[(size_t)r * stride_r + (size_t)p * stride_p];
    }
}

/* ---- the blocked driver ------------------------------------------------ */

size_t cg_gemm_pack_floats(const cg_gemm_blocking *bl)
{
    return ((size_t)bl->mc + (size_t)bl->nc) * (size_t)bl->kc;
}

static void scale_by_beta(int m, int n, float beta, float *c, int ldc)
{
    for (int i = 0; beta == 0.0f && i < m; i++)
        for (int j = 0; j < n; j++)
            c[(size_t)i * ldc + j] = 0.0f;
}

void cg_gemm_packed(const cg_gemm_blocking *bl, int trans_a, int trans_b, int m, int n, int k,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                    float *pack)
{
    if (k <= 0) {
        scale_by_beta(m, n, beta, c, ldc);
        return;
    }
    /* op(A)[i][p] and op(B)[p][j] as element (row, step) of a panel source */
    const size_t a_r = trans_a ? 1 : (size_t)lda, a_p = trans_a ? (size_t)lda : 1;
    const size_t b_r = trans_b ? (size_t)ldb : 1, b_p = trans_b ? 1 : (size_t)ldb;
    float *pa = pack, *pb = pack + (size_t)bl->mc * bl->kc;
    for (int jc = 0; jc < n; jc += bl->nc) {
        const int nb = min_int(bl->nc, n - jc);
        for (int pc = 0; pc < k; pc += bl->kc) {
            const int kb = min_int(bl->kc, k - pc);
            const float step = pc > 0 ? 1.0f : beta;
            cg_pack_panels(b + jc * b_r + pc * b_p, b_r, b_p, nb, kb, bl->nr, pb);
            for (int ic = 0; ic < m; ic += bl->mc) {
                const int mb = min_int(bl->mc, m - ic);
                cg_pack_panels(a + ic * a_r + pc * a_p, a_r, a_p, mb, kb, bl->mr, pa);
                /* a B micro-panel stays in L1 while A's stream past it */
                for (int jr = 0; jr < nb; jr += bl->nr)
                    for (int ir = 0; ir < mb; ir += bl->mr)
                        bl->kernel(min_int(bl->mr, mb - ir), min_int(bl->nr, nb - jr), kb,
                                   pa + (size_t)ir * kb, pb + (size_t)jr * kb, step, NULL,
                                   c + (size_t)(ic + ir) * ldc + jc + jr, ldc, NULL, NULL);
            }
        }
    }
}

/* ---- this CPU's blocking and the choice against OpenBLAS --------------- */

enum { MC_MOST = 256, NC_MOST = 512 };

static int round_down(int x, int unit)
{
    return x / unit > 0 ? x / unit * unit : unit;
}

/* The columns of a vector of the kernel's register tiles (the reference
 * kernel's tile has none: its nr). */
static int tile_vector(const cg_kernel_entry *e)
{
    return e->isa == CG_ISA_AVX512 ? 16 : e->isa == CG_ISA_AVX2 ? 8 : e->nr;
}

/* The rows of the register tile the indirect kernel of entry e's ISA runs
 * on whole micro-panels (src/kernels/<isa>/gemm_panel.c). */
static int indirect_tile_rows(const cg_kernel_entry *e)
{
    return e->isa == CG_ISA_AVX512 ? 8 : e->isa == CG_ISA_AVX2 ? 6 : e->mr;
}

/* kc: a B micro-panel in half of L1 (A's micro-panel and C's tile beside it);
 * mc: A's block in a quarter of L2; nc: B's block no more than twice A's, so
 * the pair stays a few hundred KB. */
static cg_gemm_blocking blocking_for(const cg_kernel_context *kx)
{
    const cg_kernel_entry *e = kx->entry.gemm_panel;
    const int kc =
        round_down(min_int(CG_KC_MOST, (int)(kx->l1_bytes / 2 / (e->nr * (long)sizeof(float)))), 8);
    const int mc =
        round_down(min_int(MC_MOST, (int)(kx->l2_bytes / 4 / (kc * (long)sizeof(float)))), e->mr);
    const cg_kernel_entry *ind = kx->entry.gemm_indirect;
    cg_gemm_indirect_fn *indirect = ind->mr == e->mr && ind->nr == e->nr ? kx->gemm_indirect : NULL;
    return (cg_gemm_blocking){.kernel = kx->gemm_panel,
                              .name = e->name,
                              .mr = e->mr,
                              .nr = e->nr,
                              .kc = kc,
                              .mc = mc,
                              .nc = round_down(NC_MOST, e->nr),
                              .vec = tile_vector(e),
                              .indirect = indirect,
                              .indirect_rows = indirect_tile_rows(ind)};
}

/* The kernel set of the sgemm kernels OpenBLAS chose for this CPU, by
 * their core's name; CG_ISA_REF for anything older than AVX2 + FMA. */
static cg_isa openblas_isa(void)
{
    static const struct {
        const char *core;
        cg_isa isa;
    } known[] = {{"SkylakeX", CG_ISA_AVX512},
                 {"CooperLake", CG_ISA_AVX512},
                 {"SapphireRapids", CG_ISA_AVX512},
                 {"Haswell", CG_ISA_AVX2},
                 {"Zen", CG_ISA_AVX2},
                 {"Excavator", CG_ISA_AVX2}};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof known / sizeof *known; i++)
        if (strcasecmp(core, known[i].core) == 0)
            return known[i].isa;
    return CG_ISA_REF;
}

/* cg_gemm runs on the packed driver wherever the library's kernels are at
 * least as wide as OpenBLAS's, and on OpenBLAS where OpenBLAS's are wider
 * (CONVGRAD_ISA capped below them) or the library has none (the reference
 * set). Where both are AVX2 (Debian's OpenBLAS 0.3.21 runs its Zen kernels
 * on an AMD EPYC of family 23 model 49, whose widest are AVX2), the packed
 * path of the training step's forward and input gradient (A read from the
 * tensors, no im2col tile) took 0.89-1.00x of the time of im2col tiles on
 * OpenBLAS on the dense layers, 0.19x on the stem's input gradient (whose
 * product a stride phase is 3 columns wide on OpenBLAS, 147 on the packed
 * driver's columns), and 1.09-1.12x on r50_1x1_56's forward (1 core, medians of
 * 5 calls, twice each; docs/design.md). An OpenBLAS that does not know the
 * CPU runs old kernels (Debian's runs "Prescott" SSE3 on Xeon family 6
 * model 207): the packed driver was 3.4-3.6x faster there. A choice by name,
 * not by timing: the same machine always takes the same path, so results
 * do not change from run to run. */
static void choose(void)
{
    const cg_kernel_context *kx = cg_kernels();
    const cg_isa isa = kx->entry.gemm_panel->isa; /* REF: the plain C kernel */
    g_here = blocking_for(kx);
    g_use_packed = isa > CG_ISA_REF && openblas_isa() <= isa;
}

const cg_gemm_blocking *cg_gemm_blocking_here(void)
{
    pthread_once(&g_choose_once, choose);
    return &g_here;
}

int cg_gemm_uses_packed(void)
{
    pthread_once(&g_choose_once, choose);
    return g_use_packed;
}

int cg_gemm_try_packed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc)
{
    float *pack;
    if (!cg_gemm_uses_packed() || (pack = cg_thread_floats(cg_gemm_pack_floats(&g_here))) == NULL)
        return 0;
    cg_gemm_packed(&g_here, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, pack);
    return 1;
}
