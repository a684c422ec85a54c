/* SPDX-License-Identifier: MIT */
/* The packed driver of the forward and the input gradient: A's rows are
 * pixels of a tensor, read in place by the indirect kernel through a
 * pointer a row and piece (a tap's channels: im2col without a copy), or,
 * where a piece is a few channels, packed into mr-row panels by the
 * transposing packer straight from the tensor through row tables; B is
 * packed once per call by the caller, and the kernel runs once per mr x nr
 * tile of C (BLIS's loop order: a B micro-panel stays in L1 while A's rows
 * of the block stream past it from L2). */
#include "gemm/gemm.h"

#include "kernels/context.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t round_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

size_t cg_rows_b_floats(const cg_gemm_blocking *bl, int64_t k, int64_t n)
{
    return (size_t)(k * round_up(n, bl->nr));
}

void cg_rows_panel(const cg_gemm_blocking *bl, int64_t n, int64_t q, int64_t *first, int64_t *width)
{
    const int64_t panels = (n + bl->nr - 1) / bl->nr, vecs = (n + bl->vec - 1) / bl->vec;
    const int64_t each = vecs / panels, more = vecs % panels; /* the first `more` take one more */
    const int64_t v0 = q * each + min64(q, more), v1 = v0 + each + (q < more);
    *first = v0 * bl->vec;
    *width = min64(n, v1 * bl->vec) - *first;
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

/* Of cg_rows_matrix.next, the bytes a product asks for at most. */
enum { MOST_AHEAD_BYTES = 1 << 20 };

/* Where a piece of A is padding: read as a row of zeros. */
static const float zero_row[CG_KC_MOST] __attribute__((aligned(64)));

/* Pieces of A's columns [pc, pc + kb) a call of the indirect kernel takes
 * at most: cut where a piece or a segment ends (segments are whole pieces). */
enum { MOST_PIECES = CG_KC_MOST / CG_INDIRECT_MIN_PIECE + 1 };

/* Columns [pc, pc + kb) of A as pieces, each wholly inside or outside every
 * row (a tap's channels): their lengths in len, and where piece q of row
 * r0 + r starts at ptr[q * mb + r] (zero_row where it is padding). Returns
 * the number of pieces. */
static int indirect_rows(const cg_rows_matrix *a, int64_t r0, int64_t mb, int64_t pc, int64_t kb,
                         int *len, const float **ptr)
{
    const int64_t seg = a->seg_len;
    int q = 0;
    for (int64_t c0 = pc; c0 < pc + kb; q++) {
        const int64_t s = c0 / seg, in_seg = c0 - s * seg, col = a->col0 + in_seg;
        const int64_t c1 = min64(pc + kb, s * seg + (in_seg / a->piece + 1) * a->piece);
        len[q] = (int)(c1 - c0);
        for (int64_t r = 0; r < mb; r++) {
            const int64_t e = s * a->apart + r0 + r;
            const int inside = a->lo[e] <= col && col + len[q] <= a->hi[e];
            ptr[q * mb + r] = inside ? a->src + a->at[e] + col : zero_row;
        }
        c0 = c1;
    }
    return q;
}

int64_t cg_rows_panels(const cg_gemm_blocking *bl, int64_t n)
{
    return (n + bl->nr - 1) / bl->nr;
}

void cg_gemm_rows(const cg_gemm_blocking *bl, int64_t m, int64_t n, int64_t k,
                  const cg_rows_matrix *a, const float *b_packed, int64_t q_first, int64_t q_last,
                  float beta, const float *init, float *c, int64_t ldc, float *pack)
{
    const int64_t np = round_up(n, bl->nr), j_first = q_first * bl->nr, j_last = q_last * bl->nr;
    /* the pointers, MOST_PIECES a row, take the space of A's packed block */
    const int indirect = bl->indirect && a->piece >= CG_INDIRECT_MIN_PIECE &&
                         MOST_PIECES * sizeof(float *) <= (size_t)bl->kc * sizeof(float);
    const float **ptr = (const float **)(void *)pack;
    int len[MOST_PIECES], pieces = 0;
    /* B in L2 already: the calls ask for the caller's next rows instead
     * (at most MOST_AHEAD_BYTES), a share each (a call's rows are read from
     * memory once, by the first micro-panel's calls, and would wait on it
     * there) */
    const int ahead = a->next && 2 * k * np * (int64_t)sizeof(float) <= cg_kernels()->l2_bytes;
    const int64_t calls =
        max64(1, (k + bl->kc - 1) / bl->kc * (q_last - q_first) * ((m + bl->mr - 1) / bl->mr));
    const int64_t ahead_bytes = ahead ? min64(a->next_bytes, MOST_AHEAD_BYTES) : 0;
    const int64_t ahead_share = round_up((ahead_bytes + calls - 1) / calls, 64);
    const char *ahead_at = ahead ? a->next : NULL, *ahead_end = ahead ? a->next + ahead_bytes : NULL;
    for (int64_t ic = 0; ic < m; ic += bl->mc) {
        const int64_t mb = min64(bl->mc, m - ic);
        for (int64_t pc = 0; pc < k; pc += bl->kc) {
            const int64_t kb = min64(bl->kc, k - pc);
            const float *b = b_packed + pc * np;
            if (indirect)
                pieces = indirect_rows(a, ic, mb, pc, kb, len, ptr);
            else
                pack_a(bl, a, ic, mb, pc, kb, pack);
            for (int64_t jr = j_first; jr < j_last; jr += bl->nr) {
                int64_t first, cols;
                cg_rows_panel(bl, n, jr / bl->nr, &first, &cols);
                /* B is larger than L2 on the widest layers: the kernels on
                 * this micro-panel fetch the next one into L2, a share each */
                const char *next =
                    ahead ? NULL
                    : (const char *)(jr + bl->nr < j_last ? b + (jr + bl->nr) * kb
                                   : pc + kb < k
                                       ? b + kb * np + j_first * min64(bl->kc, k - pc - kb)
                                       : NULL);
                const int64_t share =
                    next ? (bl->nr * kb * (int64_t)sizeof(float) * bl->mr + mb - 1) / mb : 0;
                for (int64_t ir = 0; ir < mb; ir += bl->mr) {
                    const char *from = next ? next + ir / bl->mr * share : NULL;
                    const char *to = from ? from + share : NULL;
                    if (ahead_at < ahead_end) {
                        from = ahead_at;
                        to = ahead_at += min64(ahead_end - ahead_at, ahead_share);
                    }
                    const int rows = (int)min64(bl->mr, mb - ir);
                    float *cr = c + (ic + ir) * ldc + first;
                    const float step_beta = pc > 0 ? 1.0f : beta;
                    const float *start = init ? init + first : NULL;
                    if (indirect)
                        bl->indirect(rows, (int)cols, pieces, len, ptr + ir, mb, b + jr * kb,
                                     step_beta, start, cr, (int)ldc, from, to);
                    else
                        bl->kernel(rows, (int)cols, (int)kb, pack + ir * kb, b + jr * kb, step_beta,
                                   start, cr, (int)ldc, from, to);
                }
            }
        }
    }
}
