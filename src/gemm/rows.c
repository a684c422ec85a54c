/* SPDX-License-Identifier: MIT */
/* The packed driver of the forward and the input gradient: A's rows are
 * pixels of a tensor, packed into mr-row panels by the transposing packer
 * straight from the tensor through row tables (im2col fused into the pack),
 * B is packed once per call by the caller, and the gemm_panel kernel runs
 * once per mr x nr tile of C (BLIS's loop order: a B micro-panel stays in
 * L1 while A's panels of the block stream past it from L2). */
#include "gemm/gemm.h"

#include "kernels/context.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t round_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

size_t cg_rows_b_floats(const cg_gemm_blocking *bl, int64_t k, int64_t n)
{
    return (size_t)(k * round_up(n, bl->nr));
}

size_t cg_rows_a_floats(const cg_gemm_blocking *bl)
{
    return (size_t)bl->mc * (size_t)bl->kc;
}

/* Rows [r0, r0 + mb) x columns [pc, pc + kb) of A into panels of mr rows
 * (kb steps of mr floats each), a piece of a segment at a time, so that a
 * call's rows are wholly inside or outside and go by whole register blocks;
 * a segment at a time where pieces are narrower than those blocks (a few
 * channels a tap: the rows cut by an edge then go a float at a time, the
 * others a block at a time where a piece a call would go a float at a time). */
static void pack_a(const cg_gemm_blocking *bl, const cg_rows_matrix *a, int64_t r0, int64_t mb,
                   int64_t pc, int64_t kb, float *dst)
{
    const cg_kernel_context *kx = cg_kernels();
    cg_pack_transposed_fn *pack = kx->pack_transposed;
    const int64_t len = a->seg_len;
    const int64_t cut = a->piece >= kx->entry.pack_transposed->nr ? a->piece : len;
    for (int64_t ir = 0; ir < mb; ir += bl->mr)
        for (int64_t c0 = pc; c0 < pc + kb;) {
            const int64_t s = c0 / len, in_seg = c0 - s * len;
            const int64_t c1 = min64(pc + kb, s * len + (in_seg / cut + 1) * cut);
            const int64_t at = s * a->apart + r0 + ir;
            const cg_pack_rows rows = {a->at + at, a->lo + at, a->hi + at};
            pack(dst + ir * kb + (c0 - pc) * bl->mr, bl->mr, min64(bl->mr, mb - ir), c1 - c0,
                 a->src, &rows, a->col0 + in_seg);
            c0 = c1;
        }
}

void cg_gemm_rows(const cg_gemm_blocking *bl, int64_t m, int64_t n, int64_t k,
                  const cg_rows_matrix *a, const float *b_packed, float beta, float *c,
                  int64_t ldc, float *pack)
{
    const int64_t np = round_up(n, bl->nr);
    for (int64_t ic = 0; ic < m; ic += bl->mc) {
        const int64_t mb = min64(bl->mc, m - ic);
        for (int64_t pc = 0; pc < k; pc += bl->kc) {
            const int64_t kb = min64(bl->kc, k - pc);
            const float *b = b_packed + pc * np;
            pack_a(bl, a, ic, mb, pc, kb, pack);
            for (int64_t jr = 0; jr < n; jr += bl->nr) {
                /* B is larger than L2 on the widest layers: the kernels on
                 * this micro-panel fetch the next one into L2, a share each */
                const char *next = (const char *)(jr + bl->nr < n ? b + (jr + bl->nr) * kb
                                                  : pc + kb < k   ? b + kb * np
                                                                  : NULL);
                const int64_t share = next ? (bl->nr * kb * (int64_t)sizeof(float) * bl->mr +
                                              mb - 1) / mb
                                           : 0;
                for (int64_t ir = 0; ir < mb; ir += bl->mr) {
                    const char *from = next ? next + ir / bl->mr * share : NULL;
                    bl->kernel((int)min64(bl->mr, mb - ir), (int)min64(bl->nr, n - jr), (int)kb,
                               pack + ir * kb, b + jr * kb, pc > 0 ? 1.0f : beta,
                               c + (ic + ir) * ldc + jr, (int)ldc, from, from ? from + share : NULL);
                }
            }
        }
    }
}
