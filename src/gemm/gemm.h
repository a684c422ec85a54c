/* SPDX-License-Identifier: MIT */
/* The matrix product the operator needs, and nothing of cores or shapes. */
#ifndef CG_GEMM_H
#define CG_GEMM_H

#include <stddef.h>

#include "kernels/list.h"

/* C[m][n] = op(A) op(B) + beta*C, row-major, op(X) = X or X^T as trans_*
 * says; beta is 0 or 1. The forward and input-gradient shapes, which
 * OpenBLAS's packed kernels serve well. Runs on the calling thread only. */
void cg_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
             int ldb, float beta, float *c, int ldc);

/* ---- the packed driver behind cg_gemm (src/gemm/packed.c) ------------- */

/* A gemm_panel kernel (kernels/list.h), its A panel and B micro-panel (mr,
 * nr) and the cache blocks the packed drivers run it with: kc so that a
 * kc x nr micro-panel of B stays in L1 across a block of A, mc x kc of A in
 * L2, kc x nc of B beside it. mc is a multiple of mr, nc of nr. */
typedef struct cg_gemm_blocking {
    cg_gemm_panel_fn *kernel;
    const char *name; /* the kernel's */
    int mr, nr, kc, mc, nc;
    int vec;                       /* the columns of a vector of its register tiles (nr: none) */
    cg_gemm_indirect_fn *indirect; /* the indirect kernel of the same tile, or NULL */
    int indirect_rows;             /* the rows of its register tile (of nr columns) */
} cg_gemm_blocking;

/* This CPU's blocking (the context's gemm_panel kernel, blocks from its L1
 * and L2), and whether cg_gemm runs on it rather than on OpenBLAS (where
 * OpenBLAS's kernels are no wider than the library's: see packed.c); chosen
 * once per process. Never NULL. */
const cg_gemm_blocking *cg_gemm_blocking_here(void);
int cg_gemm_uses_packed(void);

/* Widest panel of any gemm_panel kernel (mr and nr), and the largest kc. */
enum { CG_PANEL_MOST = 64, CG_KC_MOST = 256 };

/* Rows [0, rows) x steps [0, kb) of the matrix whose element (r, p) is
 * x[r*stride_r + p*stride_p], as panels of w rows (w <= CG_PANEL_MOST): panel
 * q holds element (q*w + r, p) at dst[q*w*kb + p*w + r], zeros in a last
 * panel's missing rows. */
void cg_pack_panels(const float *x, size_t stride_r, size_t stride_p, int rows, int kb, int w,
                    float *dst);

/* Floats of packing space cg_gemm_packed needs with blocking bl. */
size_t cg_gemm_pack_floats(const cg_gemm_blocking *bl);

/* cg_gemm on bl's kernel: op(A) and op(B) packed block by block into `pack`
 * (cg_gemm_pack_floats(bl) floats) as the kernel reads them, mr x kc and
 * kc x nr micro-panels, each contiguous. */
void cg_gemm_packed(const cg_gemm_blocking *bl, int trans_a, int trans_b, int m, int n, int k,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                    float *pack);

/* cg_gemm_packed on this CPU's blocking and the calling thread's packing
 * space (allocated on its first call), if cg_gemm_uses_packed(); returns
 * whether it ran: 0 leaves C to the caller's other path. */
int cg_gemm_try_packed(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);

/* ---- the packed driver with A read from the tensors (src/gemm/rows.c) -- */

/* A matrix whose rows are pixels and whose columns run along segments of a
 * tensor: element (r, k) is column col0 + k % seg_len of row r's segment
 * k / seg_len, read through that segment's tables (cg_pack_rows indexed by
 * row: entries [s * apart + r]), zero outside [lo, hi). The forward's
 * im2col(x), the input gradient's gathered dy: packed from the tensors, never
 * copied out whole. A segment's [lo, hi) starts and ends on multiples of
 * `piece` (a tap's channels): the packing is cut there, so each call's rows
 * are wholly inside or wholly outside. */
typedef struct cg_rows_matrix {
    const float *src;
    const int64_t *at, *lo, *hi;
    int64_t apart, seg_len, piece, col0;
    /* what the caller reads next (the next tile's rows of the tensor):
     * asked for into L2 over the product where B fits in L2 (else the
     * kernels ask for B's next micro-panel); NULL: nothing */
    const char *next;
    int64_t next_bytes;
    /* rows alike in padding put together (the conv2d paths' sorted tiles):
     * the indirect kernel then skips, in each register tile of rows, the
     * pieces that are padding in all of them */
    int skips_padding;
    /* or, in place of the tables (at, lo, hi NULL), where every segment is
     * wholly inside and a piece (seg_len == piece) and A's rows are read in
     * place: row r's segment s starts at rows[s * apart + r]; a block of K
     * of whole segments goes to the indirect kernel as it lies, with no
     * pointer made (the forward's padded copies of the stem's input rows) */
    const float *const *rows;
} cg_rows_matrix;

/* B (k x n) of cg_gemm_rows: packed whole before the call (`packed`, as
 * cg_rows_b_floats says), or, where it is larger than L2 and its packed
 * copy would go to memory and back, packed a micro-panel at a time as the
 * product reaches it (`packed` NULL), into `panel` (kc x nr floats, 64-byte
 * aligned), while the kernels on the one before ask for its lines: element
 * (p, j) is src[j * ld + p] (the forward's w, a row a column). Its columns
 * are cut into `parts` shares first (cg_rows_panel). */
typedef struct cg_rows_b {
    const float *packed;
    const float *src;
    int64_t ld;
    float *panel;
    int parts;
    int64_t kc; /* K's blocks, of the packing and the product (cg_rows_kc) */
} cg_rows_b;

/* Whether cg_gemm_rows reads A, rows of pieces of `piece` floats, in place
 * (the indirect kernel through a pointer a row), not packed. */
int cg_rows_reads_a_in_place(const cg_gemm_blocking *bl, int64_t piece);

/* The rows of K a block of cg_gemm_rows for A whose rows are pieces of
 * `piece` floats: the blocking's kc, or all of K where K is longer, B's
 * micro-panel of all of K fits in a quarter of L2, and a row is one piece
 * (a 1x1 convolution's pixels, read in place) or K is at most 1.5 kc and
 * A's rows are read in place (the stem's 147 against 128). */
int64_t cg_rows_kc(const cg_gemm_blocking *bl, int64_t k, int64_t piece);

/* Floats B (k x n, columns in `parts` shares) takes packed for
 * cg_gemm_rows: for each kc block of k (kb steps, at pc * panels * nr), its
 * micro-panels one after another, kb steps of nr floats each
 * (cg_pack_panels' layout), panel q holding the columns cg_rows_panel
 * gives, zeros past them. */
size_t cg_rows_b_floats(const cg_gemm_blocking *bl, int64_t k, int64_t n, int parts);

/* B's n columns as micro-panels: cut into `parts` shares of whole vectors
 * of the kernel's tiles, as equal as they can be (one a core where the
 * cores split the columns: 512 as 256 + 256, where 11 micro-panels dealt 6
 * + 5 gave one core 288 columns and the other 224), then each share into
 * micro-panels of at most nr columns, as even as they can be, so that a
 * narrow panel (a one-vector tile, load-bound) is left only where a share
 * is that narrow: 64 columns as 32 + 32, not 48 + 16. Micro-panel q's
 * columns: [*first, *first + *width). `parts` is at most n's vectors. */
void cg_rows_panel(const cg_gemm_blocking *bl, int64_t n, int parts, int64_t q, int64_t *first,
                   int64_t *width);

/* B's micro-panels for n columns in `parts` shares, and share `part`'s:
 * [*q_first, *q_last). */
int64_t cg_rows_panels(const cg_gemm_blocking *bl, int64_t n, int parts);
void cg_rows_share(const cg_gemm_blocking *bl, int64_t n, int parts, int part, int64_t *q_first,
                   int64_t *q_last);

/* Rows of A cg_gemm_rows takes a block (its tiles: at most so many rows
 * each, to pack B only once): mc, or twice that where B is packed as it goes
 * (b_packed 0) and the blocking's indirect kernel reads A in place. */
int64_t cg_rows_tile_most(const cg_gemm_blocking *bl, int b_packed);

/* Floats of A's packing space cg_gemm_rows needs (mc x kc). */
size_t cg_rows_a_floats(const cg_gemm_blocking *bl);

/* C[r][j] = sum over p < k of A(r, p) B(p, j) + (beta ? C[r][j] : init ?
 * init[j] : 0) for r < m and the columns j < n of B's micro-panels [q_first,
 * q_last) (all: 0, cg_rows_panels(n, b->parts); no other column of C is touched) (C
 * row-major, ldc apart; beta 0: C not read;
 * init: the bias every row starts from, or NULL), A through its tables (rows
 * [0, m)), B as cg_rows_b says; `pack` holds
 * cg_rows_a_floats(bl) floats. A's rows go to the indirect kernel in place
 * where a piece is CG_INDIRECT_MIN_PIECE floats or more, else they are
 * packed. Runs on the calling thread. */
enum { CG_INDIRECT_MIN_PIECE = 16 };
void cg_gemm_rows(const cg_gemm_blocking *bl, int64_t m, int64_t n, int64_t k,
                  const cg_rows_matrix *a, const cg_rows_b *b, int64_t q_first, int64_t q_last,
                  float beta, const float *init, float *c, int64_t ldc, float *pack);
#endif
