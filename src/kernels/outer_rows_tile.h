/* SPDX-License-Identifier: MIT */
/* The outer_rows tiles, written once for the vector kernels: included (no
 * guard) by avx2/outer_rows.c and avx512/outer_rows.c after they define
 *
 *   CG_OUTER_TARGET        the target attribute
 *   cg_vec, CG_LANES        the vector type and its floats
 *   cg_tail                 a mask of the first n lanes, tail_of(n)
 *   vec_load(p), vec_load_tail(p, tail), vec_store(p, v),
 *   vec_fma(a, b, c) (a * b + c, one rounding), vec_broadcast(p)
 *                           (functions or macros)
 *   CG_OUTER_UP_TO_1 .. _4  CG_UP_TO_<n>: the columns a tile of 1 .. 4
 *                           vectors takes, (registers - cv - 1) / cv
 *
 * and define outer_tile, a cg_outer_tile_fn: a tile of cv vectors of
 * channels by jn columns, cv and jn compile-time in each case, its sums in
 * registers over all the rows. */

static inline CG_OUTER_TARGET __attribute__((always_inline)) void
tile_of(const int cv, const int jn, const int masked, int64_t valid, const float *cols,
        const float *d, int64_t ld_d, int64_t rows, float *sums, int64_t ld_sums)
{
    const cg_tail tail = tail_of(valid - (cv - 1) * CG_LANES);
    cg_vec acc[4][32];
#pragma GCC unroll 32
    for (int j = 0; j < jn; j++)
#pragma GCC unroll 4
        for (int v = 0; v < cv; v++)
            acc[v][j] = vec_load(sums + j * ld_sums + v * CG_LANES);
    for (int64_t r = 0; r < rows; r++) {
        cg_vec dv[4];
        const float *dr = d + r * ld_d, *c = cols + r;
#pragma GCC unroll 4
        for (int v = 0; v < cv; v++) {
            dv[v] = masked && v == cv - 1 ? vec_load_tail(dr + v * CG_LANES, tail)
                                          : vec_load(dr + v * CG_LANES);
            /* in a register: folded into each FMA, it would be loaded a column */
            __asm__("" : "+v"(dv[v]));
        }
#pragma GCC unroll 32
        for (int j = 0; j < jn; j++) {
            const cg_vec b = vec_broadcast(c + j * CG_OUTER_CHUNK_ROWS);
#pragma GCC unroll 4
            for (int v = 0; v < cv; v++)
                acc[v][j] = vec_fma(dv[v], b, acc[v][j]);
        }
    }
#pragma GCC unroll 32
    for (int j = 0; j < jn; j++)
#pragma GCC unroll 4
        for (int v = 0; v < cv; v++)
            vec_store(sums + j * ld_sums + v * CG_LANES, acc[v][j]);
}

/* tile_<cv>: a case a column count; dy's last vector a masked load only
 * where it is partial (AVX2's vmaskmovps is slow on some CPUs). */
#define CG_OUTER_CASE(cv, jn)                                                                      \
    case jn:                                                                                       \
        if (valid % CG_LANES)                                                                      \
            tile_of(cv, jn, 1, valid, cols, d, ld_d, rows, sums, ld_sums);                         \
        else                                                                                       \
            tile_of(cv, jn, 0, valid, cols, d, ld_d, rows, sums, ld_sums);                         \
        return;
#define CG_OUTER_TILES(cv, up_to)                                                                  \
    static CG_OUTER_TARGET void tile_##cv(int64_t jn, int64_t valid, const float *cols,            \
                                          const float *d, int64_t ld_d, int64_t rows, float *sums, \
                                          int64_t ld_sums)                                         \
    {                                                                                              \
        switch (jn) {                                                                              \
            up_to(CG_OUTER_CASE, cv)                                                               \
        }                                                                                          \
    }
CG_OUTER_TILES(1, CG_OUTER_UP_TO_1)
CG_OUTER_TILES(2, CG_OUTER_UP_TO_2)
CG_OUTER_TILES(3, CG_OUTER_UP_TO_3)
CG_OUTER_TILES(4, CG_OUTER_UP_TO_4)
#undef CG_OUTER_TILES
#undef CG_OUTER_CASE

static CG_OUTER_TARGET void outer_tile(int64_t jn, int64_t valid, const float *cols, const float *d,
                                       int64_t ld_d, int64_t rows, float *sums, int64_t ld_sums)
{
    static cg_outer_tile_fn *const tiles[4] = {tile_1, tile_2, tile_3, tile_4};
    tiles[(valid + CG_LANES - 1) / CG_LANES - 1](jn, valid, cols, d, ld_d, rows, sums, ld_sums);
}
