/* SPDX-License-Identifier: MIT */
/* The depthwise 3x3 kernels sum a tile of output pixels once for each block
 * of channels, and a block reads a few cache lines of every pixel: strided
 * reads that the hardware prefetchers do not follow, so each block's pass
 * waited on memory (mbv1_dw_28_s2 reached a third of the bandwidth). While a
 * kernel sums one tile it asks, a few lines at each step, for the next one's
 * data in memory order: the whole input rows its taps reach (asking again
 * for those the tile before also reached was measured faster than leaving
 * them out) and its dy rows. The training step's runs of a row
 * (depthwise_runs) ask for the next output row's source rows the same
 * way. */
#ifndef CG_KERNELS_TILE_PREFETCH_H
#define CG_KERNELS_TILE_PREFETCH_H
#include <stdint.h>

#include "plan.h"

enum {
    CG_CACHE_LINE = 64,
    /* bytes of x and dy that a tile's pixels bring in: next to the tile
     * being summed, well inside L2 */
    CG_TILE_FRESH_BYTES = 128 << 10,
    CG_TILE_LEAST = 16,
    CG_TILE_MOST = 128
};

typedef struct cg_tile_prefetch {
    const char *at, *end;       /* the lines still to ask for: x's, then */
    const char *dy_at, *dy_end; /* dy's */
    int64_t step_bytes;         /* asked for at each step */
} cg_tile_prefetch;

/* Output pixels a tile, from the bytes each brings in (its input pixels and
 * its dy pixel). */
static inline int64_t cg_prefetch_tile(const cg_plan *p)
{
    /* in double: strides past INT_MAX / cin are valid shapes */
    const double fresh = ((double)p->stride_h * p->stride_w * p->cin + p->cout) * p->dtype_size;
    const double tile = CG_TILE_FRESH_BYTES / fresh;
    return tile < CG_TILE_LEAST  ? CG_TILE_LEAST
           : tile > CG_TILE_MOST ? CG_TILE_MOST
                                 : (int64_t)tile;
}

/* Whether a kernel should ask: only where its blocks of channels pass over
 * a tile more than once, and each pixel's every channel is theirs (the whole
 * rows asked for hold nothing else). */
static inline int cg_tile_prefetch_pays(const cg_plan *p, int64_t c_first, int64_t c_last,
                                        int64_t block_channels)
{
    return c_last - c_first == p->cin && p->cin > block_channels;
}

/* Input row (n * in_h + iy) of sum row `row`'s taps kh = 0 (top: `bottom`
 * 0) or kh = kernel_h - 1 (bottom: 1), inside the image. */
static inline int64_t cg_tap_row(const cg_plan *p, int64_t row, int bottom)
{
    const int64_t per_image = p->out_h * p->out_w;
    int64_t iy = row % per_image / p->out_w * p->stride_h - p->pad_u;
    iy += bottom ? (p->kernel_h - 1) * p->dil_h : 0;
    iy = iy < 0 ? 0 : iy >= p->in_h ? p->in_h - 1 : iy;
    return row / per_image * p->in_h + iy;
}

/* Whole lines a step, for `bytes` over `steps` steps. */
static inline int64_t cg_step_bytes(int64_t bytes, int64_t steps)
{
    const int64_t lines = bytes > 0 ? bytes / CG_CACHE_LINE : 0;
    return (steps > 0 ? (lines + steps - 1) / steps : lines) * CG_CACHE_LINE;
}

/* The tile of rows [first, last) of the sum (none if empty), asked for over
 * `steps` steps. */
static inline void cg_tile_prefetch_plan(cg_tile_prefetch *t, const cg_plan *p, const void *dy,
                                         const void *x, int64_t first, int64_t last, int64_t steps)
{
    const int64_t elem = p->dtype_size, row_bytes = p->in_w * p->cin * elem;
    *t = (cg_tile_prefetch){x, x, dy, dy, 0};
    if (first >= last)
        return;
    t->at += cg_tap_row(p, first, 0) * row_bytes;
    t->end += (cg_tap_row(p, last - 1, 1) + 1) * row_bytes;
    t->dy_at += first * p->cout * elem;
    t->dy_end += last * p->cout * elem;
    t->step_bytes = cg_step_bytes(t->end - t->at + t->dy_end - t->dy_at, steps);
}

/* The bytes [from, to) (none if empty), asked for over `steps` steps. */
static inline void cg_range_prefetch_plan(cg_tile_prefetch *t, const void *from, const void *to,
                                          int64_t steps)
{
    *t = (cg_tile_prefetch){from, to, to, to, 0};
    t->step_bytes = cg_step_bytes(t->end - t->at, steps);
}

/* One step: the next few lines, into L2. */
static inline void cg_tile_prefetch_step(cg_tile_prefetch *t)
{
    const char *stop = t->end - t->at > t->step_bytes ? t->at + t->step_bytes : t->end;
    for (; t->at < stop; t->at += CG_CACHE_LINE)
        __builtin_prefetch(t->at, 0, 2);           /* prefetcht1 */
    if (t->at >= t->end && t->dy_at < t->dy_end) { /* x's done: dy's from the next step */
        t->at = t->dy_at;
        t->end = t->dy_end;
        t->dy_at = t->dy_end;
    }
}
#endif
