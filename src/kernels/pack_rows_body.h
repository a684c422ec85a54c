/* SPDX-License-Identifier: MIT */
/* What the x86 panel kernels (avx2/gemm_panel.c, avx512/gemm_panel.c)
 * share, written once: the pack_rows loop (kernels/list.h), which each
 * inlines into a function of its target with its own vector copy, so the
 * copy is inlined too; and gemm_panel's and gemm_panel_packing's walk down a
 * panel's register tiles. */
#ifndef CG_KERNELS_PACK_ROWS_BODY_H
#define CG_KERNELS_PACK_ROWS_BODY_H
#include "kernels/list.h"

/* d[j] = src ? src[i + j] : 0 for j in [j0, j1), fp16 converted where halves. */
typedef void cg_copy_run_fn(float *d, int64_t j0, int64_t j1, const void *src, int64_t i,
                            int halves);

static inline __attribute__((always_inline)) void
cg_pack_rows_body(cg_copy_run_fn *copy, float *dst, const cg_panel_layout *to, int64_t kb,
                  int64_t n, const void *src, const cg_pack_rows *rows, int64_t a, int halves)
{
    const int64_t piece = to->piece;
    for (int64_t t = 0; t < kb; t++) {
        float *d = dst + t * to->step;
        if (src && rows->lo[t] <= a && a + n <= rows->hi[t]) { /* all inside: copies only */
            const int64_t at = rows->at[t] + a;
            for (int64_t q = 0; q < n; q += piece, d += to->panel)
                copy(d, 0, n - q < piece ? n - q : piece, src, at + q, halves);
            continue;
        }
        for (int64_t q = 0; q < n; q += piece, d += to->panel) { /* columns [q, q + w) */
            const int64_t w = n - q < piece ? n - q : piece;
            if (!src) {
                copy(d, 0, w, NULL, 0, halves);
                continue;
            }
            int64_t j0 = rows->lo[t] - a - q, j1 = rows->hi[t] - a - q;
            j0 = j0 < 0 ? 0 : j0 > w ? w : j0;
            j1 = j1 < j0 ? j0 : j1 > w ? w : j1;
            copy(d, 0, j0, NULL, 0, halves);
            copy(d, j0, j1, src, rows->at[t] + a + q, halves);
            copy(d, j1, w, NULL, 0, halves);
        }
    }
}

/* Where gemm_panel_packing's first tile finds B (kernels/list.h): step t
 * is columns [col, col + n) of its segment, src[at[t] + col + j] (floats,
 * or binary16 where halves), zero outside [lo[t], hi[t]). The tables'
 * addresses are its own fields, so that a tile holding a copy by value
 * keeps them all in registers: the vector stores into the panel may alias
 * any memory, and fields read through a pointer were loaded again at every
 * step (and halves tested three times a step). */
typedef struct cg_b_source {
    const void *src;
    const int64_t *at, *lo, *hi;
    int64_t col;
    int n, halves;
} cg_b_source;

/* Step t's columns inside its segment, [*j0, *j1) within [0, n), and the
 * address of its column 0, formed as an integer: a padded row's may lie
 * before src. `halves`: from.halves, a constant of the tile's. */
static inline __attribute__((always_inline)) uintptr_t
cg_b_source_step(const cg_b_source from, const int halves, int64_t t, int64_t *j0, int64_t *j1)
{
    const int64_t col = from.col, n = from.n;
    int64_t lo = from.lo[t] - col, hi = from.hi[t] - col;
    lo = lo < 0 ? 0 : lo > n ? n : lo;
    *j0 = lo;
    *j1 = hi < lo ? lo : hi > n ? n : hi;
    const uintptr_t size = halves ? sizeof(uint16_t) : sizeof(float);
    return (uintptr_t)from.src + (uintptr_t)(from.at[t] + col) * size;
}

static inline cg_b_source cg_b_source_of(const void *src, int halves, const cg_pack_rows *rows,
                                         int64_t col, int n)
{
    return (cg_b_source){src, rows->at, rows->lo, rows->hi, col, n, halves};
}

/* A register tile of an ISA over the whole sum: its B from the packed
 * micro-panel, or, where it packs (`from`), from the segments into it. */
typedef void cg_panel_tile_fn(int m, int n, int k, const float *a, float *b,
                              const cg_b_source *from, float beta, const float *init, float *c,
                              int ldc, const char **prefetch, const char *prefetch_end);

/* The panel's m rows, `rows` a tile: the first by `first`, which packs B
 * where `from` is set, the rest by `plain`, which read it. A packing tile
 * is made for each of from->halves' values. */
static inline void cg_panel_tiles(cg_panel_tile_fn *first, cg_panel_tile_fn *plain, int rows, int m,
                                  int n, int k, const float *a, float *b, const cg_b_source *from,
                                  float beta, const float *init, float *c, int ldc,
                                  const char *prefetch, const char *prefetch_end)
{
    for (int r = 0; r < m; r += rows)
        (r == 0 ? first : plain)(m - r < rows ? m - r : rows, n, k, a + r, b, from, beta, init,
                                 c + (size_t)r * ldc, ldc, &prefetch, prefetch_end);
}
#endif
