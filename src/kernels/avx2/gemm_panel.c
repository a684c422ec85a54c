/* SPDX-License-Identifier: MIT */
/* The packed micro-kernel on AVX2 + FMA: a 12-row A panel times a B
 * micro-panel of up to 16 columns (kernels/list.h, cg_gemm_panel_fn), as
 * 6 x 16 or 12 x 8 register tiles of 12 accumulators, and the same product
 * with A's rows read in place (cg_gemm_indirect_fn) or both operands
 * (cg_gemm_runs_fn), as 6 x 16 or 8 x 8 tiles (a pointer a row in a
 * register); the AVX-512 kernels' design (avx512/gemm_panel.c) at half the
 * width and half the registers. */
#include "kernels/list.h"
#include "kernels/pack_rows_body.h"

#include <immintrin.h>
#include <string.h>

enum { PANEL = 12, NR = 16, MOST_ROWS = 8 /* the in-place kernels' tiles */ };

#define ALWAYS_INLINE inline __attribute__((always_inline))
/* F16C too: gemm_panel_packing converts fp16 inside the tiles */
#define AVX2_FMA_F16C __attribute__((target("avx2,fma,f16c")))
#define AVX2_F16C __attribute__((target("avx2,f16c")))

/* Eight values of src from element i, as floats. */
AVX2_F16C static ALWAYS_INLINE __m256 load8(const void *src, int64_t i, const int halves)
{
    if (!halves)
        return _mm256_loadu_ps((const float *)src + i);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
}

/* Step t of B from its segment (masked loads: padding and the columns past
 * n read as zeros, nothing outside [lo, hi) touched), stored into the
 * micro-panel's step at b as well (zeros past the nv vectors). */
AVX2_FMA_F16C static ALWAYS_INLINE void packing_load_b(const int nv, const int halves,
                                                       const cg_b_source from, int64_t t, float *b,
                                                       __m256 bv[2])
{
    int64_t j0, j1;
    const uintptr_t at = cg_b_source_step(from, halves, t, &j0, &j1);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) { /* lanes j0 <= 8v + lane < j1 */
        if (!halves) {
            const __m256i inside =
                _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)j0 - 8 * v), lane),
                                    _mm256_cmpgt_epi32(_mm256_set1_epi32((int)j1 - 8 * v), lane));
            bv[v] = _mm256_maskload_ps((const float *)(at + 32 * (uintptr_t)v), inside);
        } else if (j0 <= 8 * v && 8 * v + 8 <= j1) {
            bv[v] = load8((const void *)(at + 16 * (uintptr_t)v), 0, 1);
        } else { /* no masked load of halves: the lanes inside one at a time */
            float lanes[8] = {0};
            const uint16_t *h = (const uint16_t *)(at + 16 * (uintptr_t)v);
            for (int64_t j = j0 > 8 * v ? j0 - 8 * v : 0; j < 8 && 8 * v + j < j1; j++)
                lanes[j] = _cvtsh_ss(h[j]);
            bv[v] = _mm256_loadu_ps(lanes);
        }
        _mm256_storeu_ps(b + 8 * v, bv[v]);
    }
#pragma GCC unroll 2
    for (int v = nv; v < NR / 8; v++)
        _mm256_storeu_ps(b + 8 * v, _mm256_setzero_ps());
}

/* acc[r][v] += a[r] * b[8v..8v+7], step t of the sum: B from the packed
 * micro-panel, or, where the tile packs, from its segments into the panel. */
AVX2_FMA_F16C static ALWAYS_INLINE void fma_step(const int rows, const int nv, const int packs,
                                                 const int halves, const float *a, float *b,
                                                 const cg_b_source from, int64_t t,
                                                 __m256 acc[12][2])
{
    __m256 bv[2];
    if (packs)
        packing_load_b(nv, halves, from, t, b, bv);
    else
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        const __m256 av = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
}

/* acc[r][v] += rows[r][at] * bv[v], r < rows_n: one step of the in-place
 * kernels, each row's value broadcast from where it lies. */
AVX2_FMA_F16C static ALWAYS_INLINE void rows_step(const int rows_n, const int nv,
                                                  const float *const *rows, int64_t at,
                                                  const __m256 bv[2], __m256 acc[12][2])
{
#pragma GCC unroll 8
    for (int r = 0; r < rows_n; r++) {
        const __m256 av = _mm256_broadcast_ss(rows[r] + at);
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
}

AVX2_FMA_F16C static ALWAYS_INLINE void zero_tile(const int rows, const int nv, __m256 acc[12][2])
{
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm256_setzero_ps();
}

/* C's lines of a tile, fetched while its sums run. */
AVX2_FMA_F16C static ALWAYS_INLINE void prefetch_tile(const int nv, int m, const float *c, int ldc)
{
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            _mm_prefetch((const char *)(c + (size_t)r * ldc + 8 * v), _MM_HINT_T0);
}

/* The lanes of the last of nv vectors of n columns. */
AVX2_FMA_F16C static ALWAYS_INLINE __m256i last_vector(const int nv, int n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * (nv - 1)), lane);
}

/* C[r][8v..] = acc[r][v] (+ C where beta, + init where init instead), rows
 * r < m, columns < n. */
AVX2_FMA_F16C static ALWAYS_INLINE void store_tile(const int rows, const int nv, int m, int n,
                                                   float beta, const float *init, float *c, int ldc,
                                                   __m256 acc[12][2])
{
    const int whole = n - 8 * (nv - 1) == 8, add_init = beta == 0.0f && init;
    const __m256i last = last_vector(nv, n);
#pragma GCC unroll 12
    for (int r = 0; r < rows; r++) {
        if (r >= m)
            break;
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            float *cv = c + (size_t)r * ldc + 8 * v;
            __m256 sum = acc[r][v];
            if (v < nv - 1 || whole) {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_loadu_ps(cv));
                else if (add_init)
                    sum = _mm256_add_ps(sum, _mm256_loadu_ps(init + 8 * v));
                _mm256_storeu_ps(cv, sum);
            } else {
                if (beta != 0.0f)
                    sum = _mm256_add_ps(sum, _mm256_maskload_ps(cv, last));
                else if (add_init)
                    sum = _mm256_add_ps(sum, _mm256_maskload_ps(init + 8 * v, last));
                _mm256_maskstore_ps(cv, last, sum);
            }
        }
    }
}

/* ---- gemm_panel --------------------------------------------------------- */

/* One register tile over the whole sum; where it packs (gemm_panel_packing's
 * first tile), B's micro-panel from `packing` as it goes, from halves'
 * dtype. */
AVX2_FMA_F16C static ALWAYS_INLINE void tile(const int rows, const int nv, const int packs,
                                             const int halves, int m, int n, int k, const float *a,
                                             float *b, const cg_b_source *packing, float beta,
                                             const float *init, float *c, int ldc,
                                             const char **prefetch, const char *prefetch_end)
{
    const cg_b_source from = packs ? *packing : (cg_b_source){0}; /* held in registers */
    const char *pf = *prefetch;
    prefetch_tile(nv, m, c, ldc);
    __m256 acc[12][2];
    zero_tile(rows, nv, acc);
    /* two steps an iteration, a prefetched line each: no test a step */
    int p = 0;
    for (; p + 2 <= k; p += 2, a += 2 * PANEL, b += 2 * NR) {
        if (pf < prefetch_end) {
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
        }
        fma_step(rows, nv, packs, halves, a, b, from, p, acc);
        fma_step(rows, nv, packs, halves, a + PANEL, b + NR, from, p + 1, acc);
    }
    if (p < k)
        fma_step(rows, nv, packs, halves, a, b, from, p, acc);
    *prefetch = pf;
    store_tile(rows, nv, m, n, beta, init, c, ldc, acc);
}

/* A tile of `rows` x nv vectors whose B comes from the packed micro-panel
 * (packs 0) or from `from` (packs 1: packing it, from binary16 where
 * halves) */
#define PANEL_TILE(name, rows, nv, packs, halves)                                                  \
    AVX2_FMA_F16C static void name(                                                                \
        int m, int n, int k, const float *a, float *b, const cg_b_source *from, float beta,        \
        const float *init, float *c, int ldc, const char **prefetch, const char *prefetch_end)     \
    {                                                                                              \
        tile(rows, nv, packs, halves, m, n, k, a, b, from, beta, init, c, ldc, prefetch,           \
             prefetch_end);                                                                        \
    }
PANEL_TILE(tile_6x16, 6, 2, 0, 0)
PANEL_TILE(tile_12x8, 12, 1, 0, 0)
PANEL_TILE(packing_6x16, 6, 2, 1, 0)
PANEL_TILE(packing_12x8, 12, 1, 1, 0)
PANEL_TILE(packing_f16_6x16, 6, 2, 1, 1)
PANEL_TILE(packing_f16_12x8, 12, 1, 1, 1)
#undef PANEL_TILE

/* The panel's tiles down its m rows (by n's vectors), the first packing B
 * where `from` is set. */
static void panel(int m, int n, int k, const float *a, float *b, const cg_b_source *from,
                  float beta, const float *init, float *c, int ldc, const char *prefetch,
                  const char *prefetch_end)
{
    static cg_panel_tile_fn *const tiles[3][3] = {{NULL, tile_12x8, tile_6x16},
                                                  {NULL, packing_12x8, packing_6x16},
                                                  {NULL, packing_f16_12x8, packing_f16_6x16}};
    const int nv = (n + 7) / 8, source = from ? 1 + (from->halves != 0) : 0;
    cg_panel_tiles(tiles[source][nv], tiles[0][nv], PANEL / nv, m, n, k, a, b, from, beta, init, c,
                   ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_panel_avx2_12x16(int m, int n, int k, const float *a, const float *b, float beta,
                                  const float *init, float *c, int ldc, const char *prefetch,
                                  const char *prefetch_end)
{
    /* b is only read where from is NULL */
    panel(m, n, k, a, (float *)(uintptr_t)b, NULL, beta, init, c, ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_panel_packing_avx2_12x16(int m, int n, int k, const float *a, float *b,
                                          const void *src, int halves, const cg_pack_rows *rows,
                                          int64_t col, float beta, const float *init, float *c,
                                          int ldc, const char *prefetch, const char *prefetch_end)
{
    const cg_b_source from = cg_b_source_of(src, halves, rows, col, n);
    panel(m, n, k, a, b, &from, beta, init, c, ldc, prefetch, prefetch_end);
}

/* ---- gemm_indirect ------------------------------------------------------ */

/* One step of the indirect tiles: B's vectors at b, A's from the rows. */
AVX2_FMA_F16C static ALWAYS_INLINE void indirect_step(const int rows, const int nv,
                                                      const float *const *row, int64_t at,
                                                      const float *b, __m256 acc[12][2])
{
    __m256 bv[2];
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++)
        bv[v] = _mm256_loadu_ps(b + 8 * v);
    rows_step(rows, nv, row, at, bv, acc);
}

/* Tiles of 6 x 16 or 8 x 8 (12 or 8 accumulators), each row's pointer in a
 * register for a piece and broadcast from in place; rows past m repeat row
 * m - 1 and are not stored. */
AVX2_FMA_F16C static ALWAYS_INLINE void
indirect_tile(const int rows, const int nv, int m, int n, int pieces, const int *len,
              const float *const *a, int64_t lda, const float *b, float beta, const float *init,
              float *c, int ldc, const char **prefetch, const char *prefetch_end)
{
    const char *pf = *prefetch;
    prefetch_tile(nv, m, c, ldc);
    __m256 acc[12][2];
    zero_tile(rows, nv, acc);
    for (int q = 0; q < pieces; q++, a += lda) {
        const float *row[MOST_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++)
            row[r] = a[r < m ? r : m - 1];
        const int k = len[q];
        int p = 0;
        for (; p + 2 <= k; p += 2, b += 2 * NR) { /* two steps, a prefetched line */
            if (pf < prefetch_end) {
                _mm_prefetch(pf, _MM_HINT_T1);
                pf += 64;
            }
            indirect_step(rows, nv, row, p, b, acc);
            indirect_step(rows, nv, row, p + 1, b + NR, acc);
        }
        if (p < k) {
            indirect_step(rows, nv, row, p, b, acc);
            b += NR;
        }
    }
    *prefetch = pf;
    store_tile(rows, nv, m, n, beta, init, c, ldc, acc);
}

typedef void indirect_tile_fn(int, int, int, const int *, const float *const *, int64_t,
                              const float *, float, const float *, float *, int, const char **,
                              const char *);
#define INDIRECT_TILE(name, rows, nv)                                                              \
    AVX2_FMA_F16C static void name(int m, int n, int pieces, const int *len,                       \
                                   const float *const *a, int64_t lda, const float *b, float beta, \
                                   const float *init, float *c, int ldc, const char **prefetch,    \
                                   const char *prefetch_end)                                       \
    {                                                                                              \
        indirect_tile(rows, nv, m, n, pieces, len, a, lda, b, beta, init, c, ldc, prefetch,        \
                      prefetch_end);                                                               \
    }
INDIRECT_TILE(indirect_6x16, 6, 2)
INDIRECT_TILE(indirect_8x8, 8, 1)
#undef INDIRECT_TILE

void cg_f32_gemm_indirect_avx2_12x16(int m, int n, int pieces, const int *len,
                                     const float *const *a, int64_t lda, const float *b, float beta,
                                     const float *init, float *c, int ldc, const char *prefetch,
                                     const char *prefetch_end)
{
    const int rows = n > 8 ? 6 : 8;
    indirect_tile_fn *const run = n > 8 ? indirect_6x16 : indirect_8x8;
    for (int r = 0; r < m; r += rows)
        run(m - r < rows ? m - r : rows, n, pieces, len, a + r, lda, b, beta, init,
            c + (size_t)r * ldc, ldc, &prefetch, prefetch_end);
}

/* ---- gemm_runs ---------------------------------------------------------- */

/* One run's steps into the tile: B's last vector a masked load where it is
 * partial (`masked`), else a plain one (vmaskmovps is slow on some CPUs:
 * always masked, the runs took 1.2x the time on an AMD EPYC of family 23). */
AVX2_FMA_F16C static ALWAYS_INLINE void run_steps(const int rows, const int nv, const int masked,
                                                  const float *const *row, const float *b,
                                                  int64_t len, int64_t lda, int64_t ldb,
                                                  __m256i last, __m256 acc[12][2])
{
    for (int64_t p = 0, at = 0; p < len; p++, at += lda, b += ldb) {
        __m256 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bv[v] = masked && v == nv - 1 ? _mm256_maskload_ps(b + 8 * v, last)
                                          : _mm256_loadu_ps(b + 8 * v);
        rows_step(rows, nv, row, at, bv, acc);
    }
}

/* Tiles of 6 x 16 or 8 x 8, A's rows broadcast through a pointer each
 * (rows past m repeat row m - 1, never stored): one index steps every row;
 * B's last vector masked where n is short of the tile (a run may end at
 * the end of x). */
AVX2_FMA_F16C static ALWAYS_INLINE void runs_tile(const int rows, const int nv, int row0, int m,
                                                  int n, int runs, const cg_gemm_run *run,
                                                  int64_t lda, int64_t ldb, float beta, float *c,
                                                  int ldc, const char **prefetch,
                                                  const char *prefetch_end)
{
    prefetch_tile(nv, m, c, ldc);
    __m256 acc[12][2];
    zero_tile(rows, nv, acc);
    const __m256i last = last_vector(nv, n);
    const int whole = n == 8 * nv;
    /* the range all at once: the steps' loop has no register to spare for
     * asking as it goes (0.86-0.93x on the 3x3 layers and the stem) */
    for (; *prefetch < prefetch_end; *prefetch += 64)
        _mm_prefetch(*prefetch, _MM_HINT_T1);
    for (int q = 0; q < runs; q++) {
        const float *row[MOST_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++)
            row[r] = run[q].a + row0 + (r < m ? r : m - 1);
        if (whole)
            run_steps(rows, nv, 0, row, run[q].b, run[q].len, lda, ldb, last, acc);
        else
            run_steps(rows, nv, 1, row, run[q].b, run[q].len, lda, ldb, last, acc);
    }
    store_tile(rows, nv, m, n, beta, NULL, c, ldc, acc);
}

typedef void runs_tile_fn(int, int, int, int, const cg_gemm_run *, int64_t, int64_t, float, float *,
                          int, const char **, const char *);
#define RUNS_TILE(name, rows, nv)                                                                  \
    AVX2_FMA_F16C static void name(int row0, int m, int n, int runs, const cg_gemm_run *run,       \
                                   int64_t lda, int64_t ldb, float beta, float *c, int ldc,        \
                                   const char **prefetch, const char *prefetch_end)                \
    {                                                                                              \
        runs_tile(rows, nv, row0, m, n, runs, run, lda, ldb, beta, c, ldc, prefetch,               \
                  prefetch_end);                                                                   \
    }
RUNS_TILE(runs_6x16, 6, 2)
RUNS_TILE(runs_8x8, 8, 1)
#undef RUNS_TILE

void cg_f32_gemm_runs_avx2_12x16(int m, int n, int runs, const cg_gemm_run *run, int64_t lda,
                                 int64_t ldb, float beta, float *c, int ldc, const char *prefetch,
                                 const char *prefetch_end)
{
    const int rows = n > 8 ? 6 : 8;
    runs_tile_fn *const run_tile = n > 8 ? runs_6x16 : runs_8x8;
    for (int r = 0; r < m; r += rows)
        run_tile(r, m - r < rows ? m - r : rows, n, runs, run, lda, ldb, beta, c + (size_t)r * ldc,
                 ldc, &prefetch, prefetch_end);
}

/* Packing rows: per step, zeros, the part of the segment inside [lo, hi),
 * zeros; whole vectors, then the last few floats without a masked move
 * (vmaskmovps, a store above all, is slow on some CPUs: on an AMD EPYC of
 * family 23 it was half of r50_1x1_56's packing, whose A panels' steps are
 * 12 floats); fp16 converted on the way (F16C), its last few values through
 * a copy. */
/* d[j] = src ? src[i + j] : 0 for j < n < 8, reading nothing past them:
 * four at once, then one at a time. */
AVX2_F16C static ALWAYS_INLINE void copy_few(float *d, int64_t n, const void *src, int64_t i,
                                             const int halves)
{
    const float *s = src && !halves ? (const float *)src + i : NULL;
    const uint16_t *h = src && halves ? (const uint16_t *)src + i : NULL;
    int64_t j = 0;
    if (n >= 4) {
        _mm_storeu_ps(d, s   ? _mm_loadu_ps(s)
                         : h ? _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)h))
                             : _mm_setzero_ps());
        j = 4;
    }
    for (; j < n; j++)
        d[j] = s ? s[j] : h ? _cvtsh_ss(h[j]) : 0.0f;
}

/* d[j] = src ? src[i + j] : 0 for j in [j0, j1). */
AVX2_F16C static ALWAYS_INLINE void copy8(float *d, int64_t j0, int64_t j1, const void *src,
                                          int64_t i, const int halves)
{
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8)
        _mm256_storeu_ps(d + j, src ? load8(src, i + j, halves) : _mm256_setzero_ps());
    if (j < j1)
        copy_few(d + j, j1 - j, src, i + j, halves);
}

AVX2_F16C static ALWAYS_INLINE void pack_rows(float *dst, const cg_panel_layout *to, int64_t kb,
                                              int64_t n, const void *src, const cg_pack_rows *rows,
                                              int64_t a, const int halves)
{
    cg_pack_rows_body(copy8, dst, to, kb, n, src, rows, a, halves);
}

AVX2_F16C void cg_f32_pack_rows_avx2(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                     const float *src, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src, rows, a, 0);
}

AVX2_F16C void cg_f16_pack_rows_f16c(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                     const void *src_halves, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src_halves, rows, a, 1);
}

/* ---- pack_transposed ------------------------------------------------- */

/* Rows go 8 or 4 at a time, 8 x 8 (4 x 8) blocks transposed in registers,
 * where a float at a time would take one store per element: rows whose
 * columns [a, a + n) are all inside the segment, and rows all outside it
 * (padding: zeros, nothing read). A block with a row cut inside the window,
 * and the last few rows, go a float at a time. */
#define AVX2 __attribute__((target("avx2")))

/* Steps j..j+7 of rows p[0..7] (NULL: zeros, where `padding`) into
 * dst[s*mr + i] (dst at step j, row 0). */
AVX2 static ALWAYS_INLINE void transpose8(const float *const *p, int64_t j, int64_t mr, float *dst,
                                          const int padding)
{
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = !padding || p[i] ? _mm256_loadu_ps(p[i] + j) : _mm256_setzero_ps();
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int k = 0; k < 2; k++) {
            r[i + k] = _mm256_shuffle_ps(t[i + k], t[i + k + 2], _MM_SHUFFLE(1, 0, 1, 0));
            r[i + k + 2] = _mm256_shuffle_ps(t[i + k], t[i + k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        }
    /* r[0..3] hold steps 0, 2, 1, 3 of rows 0-3 (low lanes: steps 0-3, high: 4-7) */
    static const int order[4] = {0, 2, 1, 3};
    for (int s = 0; s < 4; s++) {
        const __m256 lo = r[order[s]], hi = r[4 + order[s]];
        _mm256_storeu_ps(dst + s * mr, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(dst + (s + 4) * mr, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* The same for rows p[0..3]: steps s and s + 4 come out of one vector. */
AVX2 static ALWAYS_INLINE void transpose4(const float *const *p, int64_t j, int64_t mr, float *dst)
{
    __m256 r[4], t[4];
    for (int i = 0; i < 4; i++)
        r[i] = p[i] ? _mm256_loadu_ps(p[i] + j) : _mm256_setzero_ps();
    for (int i = 0; i < 4; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    r[0] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(1, 0, 1, 0));
    r[1] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(3, 2, 3, 2));
    r[2] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(1, 0, 1, 0));
    r[3] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(3, 2, 3, 2));
    for (int s = 0; s < 4; s++) {
        _mm_storeu_ps(dst + s * mr, _mm256_castps256_ps128(r[s]));
        _mm_storeu_ps(dst + (s + 4) * mr, _mm256_extractf128_ps(r[s], 1));
    }
}

/* The transpose (kernels/list.h, cg_transpose_fn): 8 x 8 blocks in
 * registers, the edges a float at a time, TRANSPOSE_COLS columns at a time
 * down all the rows: those columns of every row (src) and dst's rows of
 * them stay in L1 until written whole, where all of a long row's columns
 * before the next rows left each dst line half written, to be read back
 * for its other half (NCHW's staging of 128 channels: the transposes took
 * 78% of a depthwise forward's time). mbv1_dw_56 in NCHW, 1 core: forward
 * 1.08-1.15x, whole backward about 1.45x (Xeon family 6 model 207; 16 and
 * 64 columns a pass measured slower than 32). */
enum { TRANSPOSE_COLS = 32 };

AVX2 void cg_f32_transpose_avx2(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                                int64_t rows, int64_t cols)
{
    for (int64_t j0 = 0; j0 < cols; j0 += TRANSPOSE_COLS) {
        const int64_t j1 = j0 + TRANSPOSE_COLS < cols ? j0 + TRANSPOSE_COLS : cols;
        int64_t i = 0;
        for (; i + 8 <= rows; i += 8) {
            const float *p[8];
            for (int k = 0; k < 8; k++)
                p[k] = src + (i + k) * ld_src;
            int64_t j = j0;
            for (; j + 8 <= j1; j += 8)
                transpose8(p, j, ld_dst, dst + j * ld_dst + i, 0);
            for (; j < j1; j++)
                for (int k = 0; k < 8; k++)
                    dst[j * ld_dst + i + k] = p[k][j];
        }
        for (; i < rows; i++)
            for (int64_t j = j0; j < j1; j++)
                dst[j * ld_dst + i] = src[i * ld_src + j];
    }
}

/* Whether rows [r, r + count) have columns [a, a + n) all inside or all
 * outside their segments. */
static int whole_rows(const cg_pack_rows *rows, int64_t r, int64_t count, int64_t a, int64_t n)
{
    for (int64_t i = r; i < r + count; i++) {
        const int64_t lo = rows->lo[i], hi = rows->hi[i];
        if (!(lo <= a && a + n <= hi) && !(hi <= a || a + n <= lo || hi <= lo))
            return 0;
    }
    return 1;
}

AVX2 void cg_f32_pack_transposed_avx2(float *dst, int64_t mr, int64_t m, int64_t n,
                                      const float *src, const cg_pack_rows *rows, int64_t a)
{
    int64_t r = 0;
    while (r < m) {
        const int64_t block = m - r >= 8 && whole_rows(rows, r, 8, a, n)   ? 8
                              : m - r >= 4 && whole_rows(rows, r, 4, a, n) ? 4
                                                                           : 1;
        if (block == 1) { /* a float at a time, zeros outside [lo, hi) */
            const int64_t lo = rows->lo[r], hi = rows->hi[r];
            for (int64_t j = 0; j < n; j++)
                dst[j * mr + r] = a + j >= lo && a + j < hi ? src[rows->at[r] + a + j] : 0.0f;
            r++;
            continue;
        }
        const float *p[8];
        int padding = 0;
        for (int64_t i = 0; i < block; i++) {
            const int in = rows->lo[r + i] <= a && a + n <= rows->hi[r + i];
            p[i] = in ? src + rows->at[r + i] + a : NULL;
            padding |= !in;
        }
        int64_t j = 0;
        if (block == 8 && !padding) /* the common case, without a test a row */
            for (; j + 8 <= n; j += 8)
                transpose8(p, j, mr, dst + j * mr + r, 0);
        for (; j + 8 <= n; j += 8)
            if (block == 8)
                transpose8(p, j, mr, dst + j * mr + r, 1);
            else
                transpose4(p, j, mr, dst + j * mr + r);
        for (; j < n; j++)
            for (int64_t i = 0; i < block; i++)
                dst[j * mr + r + i] = p[i] ? p[i][j] : 0.0f;
        r += block;
    }
    for (; r < mr; r++)
        for (int64_t j = 0; j < n; j++)
            dst[j * mr + r] = 0.0f;
}
