/* SPDX-License-Identifier: MIT */
/* The per-core computations of the three paths. Each writes float sums over
 * a range of rows of the long sum [first, last) into a destination block;
 * where that block lives (a core's partial, or a `_p` accumulator) is the
 * driver's business. Tensors are fp32 or fp16 as plan->dtype_size says. */
#ifndef CG_KERNELS_H
#define CG_KERNELS_H
#include <string.h>

#include "kernels/context.h"
#include "kernels/geometry.h"
#include "plan.h"

/* The part of dw a general-path call computes: groups [group_first,
 * group_last) and, in each, output channels [co_first, co_last) and columns
 * [col_first, col_last) of their rows (0 <= col < row_len). */
typedef struct cg_dw_block {
    int64_t group_first, group_last, co_first, co_last, col_first, col_last;
} cg_dw_block;

/* Rows of the sum a pass of cg_general_rows takes on this CPU (its kc), for
 * blk over `rows` rows. */
int64_t cg_general_rows_per_pass(const cg_dw_block *blk, int64_t rows);

/* Scratch cg_general_rows needs with passes of `kc` rows, in floats. */
int64_t cg_general_scratch_floats(const cg_plan *plan, int64_t kc, const cg_dw_block *blk);

/* Where the cores share a block's columns pass by pass (the weight
 * gradient cut by columns, host mode): take() gives this core the next run
 * of micro-panels [*first, *last) of pass `pass` (nr columns each, from
 * col_first), 0 when none is left; pass_end() follows each pass (a
 * barrier: a column's next pass may run on another core). */
typedef struct cg_column_turns {
    int (*take)(void *ctx, int64_t pass, int64_t *first, int64_t *last);
    void (*pass_end)(void *ctx);
    void *ctx;
    int sharers; /* the cores that share them */
} cg_column_turns;

/* Whether cg_general_rows takes blk's columns from turns (else it computes
 * them all): one group, on the packed path (no kernel of its own for the
 * shape). */
int cg_general_rows_take_turns(const cg_plan *plan, const cg_dw_block *blk, int64_t kc);

/* For each group g of blk, in turn: dst[co - co_first][k] (ld row_len) =
 * (beta ? dst : 0) + sum over rows of dy[row][g*cout_g + co] *
 * im2col(x)[row][k], co in [co_first, co_last), k in [col_first, col_last)
 * (no other column of dst is touched); the groups' blocks follow each other
 * in dst. Passes of kc rows (cg_general_rows_per_pass(), or fewer where the
 * scratch must be small); `scratch` holds cg_general_scratch_floats(kc,
 * blk) floats. With turns (where cg_general_rows_take_turns() holds; NULL:
 * none), this core computes the columns turns gives it, pass by pass. With
 * db_sums (fp32, blk the whole of dw, no turns; NULL: none), also the bias
 * gradient's sums: db_sums[c] = the sum of dy[row][c] over the rows, from
 * zero in row order (cg_sum_rows_fn's bits), each pass's rows as it reads
 * them where the path goes by passes of dy, else after. */
void cg_general_rows(const cg_plan *plan, const void *dy, const void *x, const cg_dw_block *blk,
                     int64_t first, int64_t last, int64_t kc, float *scratch, float beta,
                     float *dst, const cg_column_turns *turns, double *db_sums);

/* Depthwise: dst[c - c_first][tap] = sum over rows of dy[row][c] *
 * x[in(row, tap)][c] for c in [c_first, c_last). `acc` holds taps * (c_last -
 * c_first) floats; db_sums (NULL: none), resume and dst NULL as
 * cg_dwconv_rows_fn's. Runs the context's kernel: its 3x3 one where it has
 * one. */
void cg_depthwise_rows(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                       int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                       float *dst, double *db_sums);

/* dst[0, n) = src[0, n), and dst[0, n) = 0: packing runs are often a few
 * floats, where a call to memcpy or memset costs more than the stores. (GCC
 * builds the library with -fno-tree-loop-distribute-patterns, which keeps
 * these loops from becoming `rep movs` / `rep stos`: those take longer to
 * start than a few stores.) */
static inline void cg_copy_floats(float *restrict dst, const float *restrict src, int64_t n)
{
    if (n > 16) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static inline void cg_zero_floats(float *dst, int64_t n)
{
    if (n > 16) {
        memset(dst, 0, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = 0.0f;
}

/* Pixels of an input row padded for kernel rows read in place: every pixel
 * an output row's taps reach, from ix = -pad_l. */
static inline int64_t cg_padded_row_pixels(const cg_plan *p)
{
    return (p->out_w - 1) * p->stride_w + (p->kernel_w - 1) * p->dil_w + 1;
}

/* Whether such a row stays near x: at most twice x's row and the kernel's
 * reach. An output row is taken as given, so past the forward formula's it
 * can reach far beyond the image, and so can a padding far wider than the
 * kernel (the fuzzers found rows of gigabytes, then a pad_l of 1.9e9 on a
 * row of 4 pixels); those shapes take paths that copy no rows. */
static inline int cg_padded_row_near_x(const cg_plan *p)
{
    return cg_padded_row_pixels(p) <= 2 * (p->in_w + p->kernel_w * p->dil_w);
}

/* Floats of such a row with all of x's channels. */
static inline int64_t cg_padded_row_floats(const cg_plan *p)
{
    return cg_padded_row_pixels(p) * p->cin;
}

/* dst = input row iy of image n of x from ix = -pad_l (cg_padded_row_floats),
 * as floats (fp16 converted), zeros outside the image. */
static inline void cg_pad_row(const cg_plan *p, const void *x, int64_t n, int64_t iy, float *dst)
{
    const int64_t pixels = cg_padded_row_pixels(p);
    const int64_t lo = pixels < p->pad_l ? pixels : p->pad_l;
    int64_t hi = p->in_w + p->pad_l < pixels ? p->in_w + p->pad_l : pixels;
    hi = hi > lo ? hi : lo;
    cg_zero_floats(dst, lo * p->cin);
    cg_load_floats(dst + lo * p->cin, x, ((n * p->in_h + iy) * p->in_w + lo - p->pad_l) * p->cin,
                   (hi - lo) * p->cin, p->dtype_size);
    cg_zero_floats(dst + hi * p->cin, (pixels - hi) * p->cin);
}

/* Most channels the depthwise kernel takes per block. */
enum { CG_DEPTHWISE_MAX_BLOCK = 256 };
#endif
