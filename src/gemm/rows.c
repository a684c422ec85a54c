/* SPDX-License-Identifier: MIT */
/* The packed driver of the forward and the input gradient: A's rows are
 * pixels of a tensor, read in place by the indirect kernel through a
 * pointer a row and piece (a tap's channels: im2col without a copy), or,
 * where a piece is a few channels, packed into mr-row panels by the
 * transposing packer straight from the tensor through row tables; B is
 * packed once per call by the caller (or here, a micro-panel at a time, where
 * it is larger than L2), and the kernel runs once per mr x nr tile of C
 * (BLIS's loop order: a B micro-panel stays in L1 while A's rows of the
 * block stream past it from L2). */
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

/* Vectors of share `part` of `vecs` in `parts`. */
static int64_t share_vecs(int64_t vecs, int parts, int64_t part)
{
    return vecs * (part + 1) / parts - vecs * part / parts;
}

/* Micro-panels of a share of v vectors. */
static int64_t share_panels(const cg_gemm_blocking *bl, int64_t v)
{
    const int64_t per = bl->nr / bl->vec; /* vectors a whole micro-panel */
    return (v + per - 1) / per;
}

void cg_rows_share(const cg_gemm_blocking *bl, int64_t n, int parts, int part, int64_t *q_first,
                   int64_t *q_last)
{
    const int64_t vecs = (n + bl->vec - 1) / bl->vec;
    *q_first = 0;
    for (int64_t i = 0; i < part; i++)
        *q_first += share_panels(bl, share_vecs(vecs, parts, i));
    *q_last = *q_first + share_panels(bl, share_vecs(vecs, parts, part));
}

int64_t cg_rows_panels(const cg_gemm_blocking *bl, int64_t n, int parts)
{
    int64_t first, last;
    cg_rows_share(bl, n, parts, parts - 1, &first, &last);
    return last;
}

size_t cg_rows_b_floats(const cg_gemm_blocking *bl, int64_t k, int64_t n, int parts)
{
    return (size_t)(k * cg_rows_panels(bl, n, parts) * bl->nr);
}

void cg_rows_panel(const cg_gemm_blocking *bl, int64_t n, int parts, int64_t q, int64_t *first,
                   int64_t *width)
{
    const int64_t vecs = (n + bl->vec - 1) / bl->vec;
    int64_t v_start = 0, v = 0, panels = 0;
    for (int64_t i = 0; i < parts; i++, q -= panels, v_start += v) {
        v = share_vecs(vecs, parts, i);
        panels = share_panels(bl, v);
        if (q < panels || i == parts - 1)
            break;
    }
    const int64_t each = v / panels, more = v % panels; /* the first `more` take one more */
    const int64_t v0 = v_start + q * each + min64(q, more), v1 = v0 + each + (q < more);
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
 * r0 + r starts at ptr[q * mb + r] (zero_row where it is padding), and in
 * *padded whether any is and A skips padding. Returns the number of pieces. */
static int indirect_rows(const cg_rows_matrix *a, int64_t r0, int64_t mb, int64_t pc, int64_t kb,
                         int *len, const float **ptr, int *padded)
{
    const int64_t seg = a->seg_len;
    int q = 0, outside = 0;
    for (int64_t c0 = pc; c0 < pc + kb; q++) {
        const int64_t s = c0 / seg, in_seg = c0 - s * seg, col = a->col0 + in_seg;
        const int64_t c1 = min64(pc + kb, s * seg + (in_seg / a->piece + 1) * a->piece);
        len[q] = (int)(c1 - c0);
        for (int64_t r = 0; r < mb; r++) {
            const int64_t e = s * a->apart + r0 + r;
            if (a->rows) { /* every segment inside */
                ptr[q * mb + r] = a->rows[e] + col;
                continue;
            }
            const int inside = a->lo[e] <= col && col + len[q] <= a->hi[e];
            ptr[q * mb + r] = inside ? a->src + a->at[e] + col : zero_row;
            outside |= !inside;
        }
        c0 = c1;
    }
    *padded = outside && a->skips_padding;
    return q;
}

/* Asks into L2 for rows [r0, r1) of what the packing reads for micro-panel
 * (pc, kb) of columns [first, ...): row r is column first + r's kb steps.
 * Always inlined: GCC finds a function that only prefetches free of
 * effects, and drops its calls. */
static inline __attribute__((always_inline)) void
ask_b_rows(const cg_rows_b *b, int64_t pc, int64_t kb, int64_t first, int64_t r0, int64_t r1)
{
    const int64_t bytes = kb * (int64_t)sizeof(float);
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)(b->src + (first + r) * b->ld + pc);
        for (int64_t at = -(int64_t)((uintptr_t)row % 64); at < bytes; at += 64)
            __builtin_prefetch(row + at, 0, 2); /* prefetcht1 */
    }
}

int64_t cg_rows_tile_most(const cg_gemm_blocking *bl, int b_packed)
{
    /* where A is read in place, its block's pointers fit A's packing space
     * twice over */
    const int twice = 2 * MOST_PIECES * sizeof(float *) <= (size_t)bl->kc * sizeof(float);
    return !b_packed && bl->indirect && twice ? 2 * bl->mc : bl->mc;
}

int cg_rows_reads_a_in_place(const cg_gemm_blocking *bl, int64_t piece)
{
    /* the pointers, MOST_PIECES a row, take the space of A's packed block */
    return bl->indirect && piece >= CG_INDIRECT_MIN_PIECE &&
           MOST_PIECES * sizeof(float *) <= (size_t)bl->kc * sizeof(float);
}

int64_t cg_rows_kc(const cg_gemm_blocking *bl, int64_t k, int64_t piece)
{
    /* C's tile then stays in registers over the whole sum instead of being
     * loaded and stored every kc, and A's rows stream whole: r50_1x1_14's
     * forward 1.08-1.12x (1 and 2 cores; AVX2 1.03-1.04x); with the 3x3
     * layers' nine pieces a row 0.90-1.04x, so only there. And where K is
     * at most half as long again as kc and A is read in place (its packing
     * space holds kc steps): the stem's 147 (7 kernel rows of 21 floats)
     * against 128, whose last kernel row was cut in two and its tile stored
     * and loaded once more for 19 steps: its forward 1.04-1.05x (1 core),
     * 1.04-1.06x (2) */
    const int whole = k > bl->kc && cg_rows_reads_a_in_place(bl, piece) &&
                      (piece >= k || 2 * k <= 3 * bl->kc) &&
                      k * bl->nr * (int64_t)sizeof(float) <= cg_kernels()->l2_bytes / 4;
    return whole ? k : bl->kc;
}

/* One kernel call: C's rows [ic + ir, ic + ir + rows) x micro-panel
 * columns [first, first + cols) (+)= A's (A's packed panel at `a_panel`, or
 * the block's row pointers) times the micro-panel at `panel`. */
typedef struct rows_call {
    const cg_gemm_blocking *bl;
    int indirect, pieces, padded;
    int *len;
    const float *const *ptr; /* piece q's rows at ptr + q * ld */
    int64_t mb, ld;
} rows_call;

/* The indirect kernel's pieces for rows [r0, r0 + rc->mb) and columns [pc,
 * pc + kb) into rc: A's own row pointers where the block is whole segments
 * (cg_rows_matrix.rows: piece q's rows apart from the next piece's by
 * `apart`), else pointers made into `pack` (indirect_rows). */
static void indirect_pieces(const cg_rows_matrix *a, int64_t r0, int64_t pc, int64_t kb,
                            rows_call *rc, float *pack)
{
    const int64_t seg = a->seg_len;
    if (a->rows && pc % seg == 0 && kb % seg == 0) {
        rc->pieces = (int)(kb / seg);
        for (int q = 0; q < rc->pieces; q++)
            rc->len[q] = (int)seg;
        rc->ptr = a->rows + pc / seg * a->apart + r0;
        rc->ld = a->apart;
        rc->padded = 0;
        return;
    }
    rc->ptr = (const float *const *)(void *)pack;
    rc->ld = rc->mb;
    rc->pieces =
        indirect_rows(a, r0, rc->mb, pc, kb, rc->len, (const float **)(void *)pack, &rc->padded);
}

/* Whether piece q is padding in every one of the `rows` rows from ir. */
static int all_padding(const rows_call *rc, int q, int64_t ir, int rows)
{
    const float *const *p = rc->ptr + q * rc->ld + ir;
    for (int r = 0; r < rows; r++)
        if (p[r] != zero_row)
            return 0;
    return 1;
}

/* The indirect kernel on rows [ir, ir + rows) where some piece is padding
 * and A skips it (cg_rows_matrix.skips_padding): a call for each register
 * tile's rows (bl->indirect_rows), over its pieces from the first to the
 * last not wholly padding in them; the pieces before and after (rows by a
 * border, each through a tap outside the image) cost nothing. The pieces
 * between still add their zeros: each row's sum is the same, term by term,
 * as over all the pieces, so the bits do not depend on which rows share a
 * tile. Where A's rows are not sorted so, a tile's rows seldom share a
 * padding piece (r50_3x3_28: 2.8% of the pieces skipped), and the calls a
 * tile instead of a block cost as much: 0.99x. */
static void indirect_skipping(const rows_call *rc, int64_t ir, int rows, int64_t cols,
                              const float *panel, float beta, const float *start, float *c,
                              int64_t ldc, const char *from, const char *to)
{
    const cg_gemm_blocking *bl = rc->bl;
    for (int r0 = 0; r0 < rows; r0 += bl->indirect_rows) {
        const int tr = rows - r0 < bl->indirect_rows ? rows - r0 : bl->indirect_rows;
        int q0 = 0, q1 = rc->pieces;
        const float *b = panel;
        for (; q0 < q1 && all_padding(rc, q0, ir + r0, tr); q0++)
            b += (int64_t)rc->len[q0] * bl->nr;
        while (q1 > q0 && all_padding(rc, q1 - 1, ir + r0, tr))
            q1--;
        /* the lines to ask for, a share each call */
        const char *f = from ? from + (to - from) * r0 / rows : NULL;
        const char *t = from ? from + (to - from) * (r0 + tr) / rows : NULL;
        if (q0 < q1 || beta == 0.0f) /* no piece and beta 0: C is init (or zeros) */
            bl->indirect(tr, (int)cols, q1 - q0, rc->len + q0, rc->ptr + q0 * rc->ld + ir + r0,
                         rc->ld, b, beta, start, c + (ir + r0) * ldc, (int)ldc, f, t);
    }
}

static void run_kernel(const rows_call *rc, int64_t ir, int64_t kb, int64_t first, int64_t cols,
                       const float *a_panel, const float *panel, float beta, const float *init,
                       float *c, int64_t ldc, const char *from, const char *to)
{
    const cg_gemm_blocking *bl = rc->bl;
    const int rows = (int)min64(bl->mr, rc->mb - ir);
    const float *start = init ? init + first : NULL;
    if (rc->indirect && rc->padded)
        indirect_skipping(rc, ir, rows, cols, panel, beta, start, c + first, ldc, from, to);
    else if (rc->indirect)
        bl->indirect(rows, (int)cols, rc->pieces, rc->len, rc->ptr + ir, rc->ld, panel, beta, start,
                     c + ir * ldc + first, (int)ldc, from, to);
    else
        bl->kernel(rows, (int)cols, (int)kb, a_panel + ir * kb, panel, beta, start,
                   c + ir * ldc + first, (int)ldc, from, to);
}

/* The product with B packed as it goes: for each block of A's rows and
 * micro-panel of B, its kc blocks in turn, each packed into `panel` (L1)
 * just before its kernels run down the block's rows, which ask for the next
 * one's source lines into L2, a share each; C's mb x nr columns stay in L2
 * across the sum. A's pointers (or packed panels) are made again for each
 * micro-panel: a few hundred pointers a block against mb x nr x kb FMAs. */
static void product_b_as_it_goes(const cg_gemm_blocking *bl, int64_t m, int64_t n, int64_t k,
                                 const cg_rows_matrix *a, const cg_rows_b *b, int64_t q_first,
                                 int64_t q_last, float beta, const float *init, float *c,
                                 int64_t ldc, float *pack, int indirect)
{
    int len[MOST_PIECES];
    rows_call rc = {bl, indirect, 0, 0, len, NULL, 0, 0};
    const int64_t mc = indirect ? cg_rows_tile_most(bl, 0) : bl->mc;
    for (int64_t ic = 0; ic < m; ic += mc) {
        rc.mb = min64(mc, m - ic);
        const int64_t calls = (rc.mb + bl->mr - 1) / bl->mr;
        for (int64_t q = q_first; q < q_last; q++) {
            int64_t first, cols;
            cg_rows_panel(bl, n, b->parts, q, &first, &cols);
            for (int64_t pc = 0; pc < k; pc += bl->kc) {
                const int64_t kb = min64(bl->kc, k - pc);
                if (indirect)
                    indirect_pieces(a, ic, pc, kb, &rc, pack);
                else
                    pack_a(bl, a, ic, rc.mb, pc, kb, pack);
                cg_pack_panels(b->src + first * b->ld + pc, (size_t)b->ld, 1, (int)cols, (int)kb,
                               bl->nr, b->panel);
                /* the micro-panel after this one: its next kc block, or the
                 * next micro-panel's first (of the next block of rows) */
                const int more_k = pc + kb < k, more_q = q + 1 < q_last;
                const int64_t next_pc = more_k ? pc + kb : 0, next_kb = min64(bl->kc, k - next_pc);
                int64_t next_first = first, next_cols = cols;
                if (!more_k)
                    cg_rows_panel(bl, n, b->parts, more_q ? q + 1 : q_first, &next_first,
                                  &next_cols);
                const int64_t rows = more_k || more_q || ic + mc < m ? next_cols : 0;
                for (int64_t i = 0; i < calls; i++) {
                    ask_b_rows(b, next_pc, next_kb, next_first, i * rows / calls,
                               (i + 1) * rows / calls);
                    run_kernel(&rc, i * bl->mr, kb, first, cols, pack, b->panel,
                               pc > 0 ? 1.0f : beta, init, c + ic * ldc, ldc, NULL, NULL);
                }
            }
        }
    }
}

void cg_gemm_rows(const cg_gemm_blocking *blocking, int64_t m, int64_t n, int64_t k,
                  const cg_rows_matrix *a, const cg_rows_b *b, int64_t q_first, int64_t q_last,
                  float beta, const float *init, float *c, int64_t ldc, float *pack)
{
    cg_gemm_blocking blocks = *blocking; /* K's blocks: B's */
    blocks.kc = (int)b->kc;
    const cg_gemm_blocking *bl = &blocks;
    const int64_t np = cg_rows_panels(bl, n, b->parts) * bl->nr, j_first = q_first * bl->nr,
                  j_last = q_last * bl->nr;
    const int indirect = cg_rows_reads_a_in_place(blocking, a->piece);
    if (!b->packed) {
        product_b_as_it_goes(bl, m, n, k, a, b, q_first, q_last, beta, init, c, ldc, pack,
                             indirect);
        return;
    }
    int len[MOST_PIECES];
    rows_call rc = {bl, indirect, 0, 0, len, NULL, 0, 0};
    /* B in L2 already: the calls ask for the caller's next rows instead
     * (at most MOST_AHEAD_BYTES), a share each (a call's rows are read from
     * memory once, by the first micro-panel's calls, and would wait on it
     * there) */
    const int ahead = a->next && 2 * k * np * (int64_t)sizeof(float) <= cg_kernels()->l2_bytes;
    const int64_t calls =
        max64(1, (k + bl->kc - 1) / bl->kc * (q_last - q_first) * ((m + bl->mr - 1) / bl->mr));
    const int64_t ahead_bytes = ahead ? min64(a->next_bytes, MOST_AHEAD_BYTES) : 0;
    const int64_t ahead_share = round_up((ahead_bytes + calls - 1) / calls, 64);
    const char *ahead_at = ahead ? a->next : NULL,
               *ahead_end = ahead ? a->next + ahead_bytes : NULL;
    for (int64_t ic = 0; ic < m; ic += bl->mc) {
        rc.mb = min64(bl->mc, m - ic);
        for (int64_t pc = 0; pc < k; pc += bl->kc) {
            const int64_t kb = min64(bl->kc, k - pc);
            const float *bp = b->packed + pc * np;
            if (indirect)
                indirect_pieces(a, ic, pc, kb, &rc, pack);
            else
                pack_a(bl, a, ic, rc.mb, pc, kb, pack);
            for (int64_t jr = j_first; jr < j_last; jr += bl->nr) {
                int64_t first, cols;
                cg_rows_panel(bl, n, b->parts, jr / bl->nr, &first, &cols);
                /* B is larger than L2 on the widest layers: the kernels on
                 * this micro-panel fetch the next one into L2, a share each */
                const char *next =
                    ahead ? NULL
                          : (const char *)(jr + bl->nr < j_last ? bp + (jr + bl->nr) * kb
                                           : pc + kb < k
                                               ? bp + kb * np + j_first * min64(bl->kc, k - pc - kb)
                                               : NULL);
                const int64_t share =
                    next ? (bl->nr * kb * (int64_t)sizeof(float) * bl->mr + rc.mb - 1) / rc.mb : 0;
                for (int64_t ir = 0; ir < rc.mb; ir += bl->mr) {
                    const char *from = next ? next + ir / bl->mr * share : NULL;
                    const char *to = from ? from + share : NULL;
                    if (ahead_at < ahead_end) {
                        from = ahead_at;
                        to = ahead_at += min64(ahead_end - ahead_at, ahead_share);
                    }
                    run_kernel(&rc, ir, kb, first, cols, pack, bp + jr * kb, pc > 0 ? 1.0f : beta,
                               init, c + ic * ldc, ldc, from, to);
                }
            }
        }
    }
}
