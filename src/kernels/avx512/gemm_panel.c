/* SPDX-License-Identifier: MIT */
/* The packed micro-kernel on AVX-512: a 24-row A panel times a B micro-panel
 * of up to 48 columns (kernels/list.h, cg_gemm_panel_fn), and the same
 * product with A's rows read in place (cg_gemm_indirect_fn) or both operands
 * (cg_gemm_runs_fn). The register tile follows the width: 8 x 48, 12 x 32 or
 * 24 x 16 for the packed kernel (24 accumulators each, so a narrow tail of
 * columns still keeps both FMA ports busy), 8 rows for the in-place ones (a
 * pointer a row in a register), but for the runs' whole tiles (12 x 32,
 * 24 x 16, and 7 rows of 64, 48 or 32 columns: their rows lie side by side;
 * the runs kernel alone takes up to 64 columns, its B read in place).
 * Both panels are read in order (the packer laid them out so), C only at
 * the ends: its lines are prefetched when a tile starts and needed when it
 * ends. */
#include "kernels/list.h"
#include "kernels/pack_rows_body.h"

#include <immintrin.h>

enum { PANEL = 24, NR = 48, ROWS = 8 /* the in-place kernels' tile */ };

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* acc[r][v] += a[r] * bv[v], r < rows: A's values side by side. */
AVX512 static ALWAYS_INLINE void broadcast_step(const int rows, const int nv, const float *a,
                                                const __m512 bv[4], __m512 acc[24][4])
{
#pragma GCC unroll 24
    for (int r = 0; r < rows; r++) {
        const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
}

/* A step of B: nv vectors, the last a masked load only where it is not
 * whole (`whole`, always for the packed micro-panels: none a step). */
AVX512 static ALWAYS_INLINE void load_b(const int nv, const int whole, __mmask16 last,
                                        const float *b, __m512 bv[4])
{
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
        bv[v] = whole || v < nv - 1 ? _mm512_loadu_ps(b + 16 * v)
                                    : _mm512_maskz_loadu_ps(last, b + 16 * v);
}

/* Sixteen values of src from element i (those of mask, zeros elsewhere;
 * masked-off lanes do not fault), as floats. */
AVX512 static ALWAYS_INLINE __m512 load16(const void *src, int64_t i, __mmask16 mask,
                                          const int halves)
{
    if (halves)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const uint16_t *)src + i));
    return _mm512_maskz_loadu_ps(mask, (const float *)src + i);
}

/* Step t of B from its segment (masked loads: padding and the columns past
 * n read as zeros, nothing outside [lo, hi) touched), stored into the
 * micro-panel's step at b as well (zeros past the nv vectors). */
AVX512 static ALWAYS_INLINE void packing_load_b(const int nv, const int halves,
                                                const cg_b_source from, int64_t t, float *b,
                                                __m512 bv[4])
{
    int64_t j0, j1;
    const uintptr_t at = cg_b_source_step(from, halves, t, &j0, &j1);
    const uint64_t inside = ((1ull << j1) - 1) & ~((1ull << j0) - 1); /* n <= 48 */
    const uintptr_t size = halves ? sizeof(uint16_t) : sizeof(float);
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        bv[v] = load16((const void *)(at + 16 * size * (uintptr_t)v), 0,
                       (__mmask16)(inside >> 16 * v), halves);
        _mm512_storeu_ps(b + 16 * v, bv[v]);
    }
#pragma GCC unroll 4
    for (int v = nv; v < NR / 16; v++)
        _mm512_storeu_ps(b + 16 * v, _mm512_setzero_ps());
}

/* acc[r][v] += a[r] * b[16v..16v+15], step t of the sum: B from the packed
 * micro-panel, or, where the tile packs, from its segments into the panel. */
AVX512 static ALWAYS_INLINE void fma_step(const int rows, const int nv, const int packs,
                                          const int halves, const float *a, float *b,
                                          const cg_b_source from, int64_t t, __m512 acc[24][4])
{
    __m512 bv[4];
    if (packs)
        packing_load_b(nv, halves, from, t, b, bv);
    else
        load_b(nv, 1, 0, b, bv);
    broadcast_step(rows, nv, a, bv, acc);
}

/* acc[r][v] += rows[r][at] * bv[v], r < ROWS: one step of the in-place
 * kernels, each row's value broadcast from where it lies. */
AVX512 static ALWAYS_INLINE void rows_step(const int nv, const float *const *rows, int64_t at,
                                           const __m512 bv[4], __m512 acc[24][4])
{
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; r++) {
        const __m512 av = _mm512_set1_ps(rows[r][at]);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
}

/* One step of the in-place kernels: B's vectors at b, A's from the rows. */
AVX512 static ALWAYS_INLINE void indirect_step(const int nv, const float *const *row, int64_t at,
                                               const float *b, __m512 acc[24][4])
{
    __m512 bv[4];
    load_b(nv, 1, 0, b, bv);
    rows_step(nv, row, at, bv, acc);
}

AVX512 static ALWAYS_INLINE void zero_tile(const int rows, const int nv, __m512 acc[24][4])
{
#pragma GCC unroll 24
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_setzero_ps();
}

/* C's lines of a tile, fetched while its sums run. */
AVX512 static ALWAYS_INLINE void prefetch_tile(const int nv, int m, const float *c, int ldc)
{
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            _mm_prefetch((const char *)(c + (size_t)r * ldc + 16 * v), _MM_HINT_T0);
}

/* The mask of the last of nv vectors of n columns. */
static inline __mmask16 last_vector(const int nv, int n)
{
    const int tail = n - 16 * (nv - 1); /* 1..16 */
    return (__mmask16)(tail >= 16 ? 0xFFFFu : (1u << tail) - 1u);
}

/* C[r][16v..] = acc[r][v] (+ C where beta, + init where init instead),
 * rows r < m, columns < n. */
AVX512 static ALWAYS_INLINE void store_tile(const int rows, const int nv, int m, int n, float beta,
                                            const float *init, float *c, int ldc, __m512 acc[24][4])
{
    const __mmask16 last = last_vector(nv, n);
    const int add_init = beta == 0.0f && init;
#pragma GCC unroll 24
    for (int r = 0; r < rows; r++) {
        if (r >= m)
            break;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *cv = c + (size_t)r * ldc + 16 * v;
            const __mmask16 mask = v == nv - 1 ? last : 0xFFFF;
            __m512 sum = acc[r][v];
            if (beta != 0.0f)
                sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, cv));
            else if (add_init)
                sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, init + 16 * v));
            _mm512_mask_storeu_ps(cv, mask, sum);
        }
    }
}

/* ---- gemm_panel --------------------------------------------------------- */

/* One register tile over the whole sum; where it packs (gemm_panel_packing's
 * first tile), B's micro-panel from `packing` as it goes, from halves'
 * dtype. */
AVX512 static ALWAYS_INLINE void tile(const int rows, const int nv, const int packs,
                                      const int halves, int m, int n, int k, const float *a,
                                      float *b, const cg_b_source *packing, float beta,
                                      const float *init, float *c, int ldc, const char **prefetch,
                                      const char *prefetch_end)
{
    const cg_b_source from = packs ? *packing : (cg_b_source){0}; /* held in registers */
    const char *pf = *prefetch;
    prefetch_tile(nv, m, c, ldc);
    __m512 acc[24][4];
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
    AVX512 static void name(int m, int n, int k, const float *a, float *b,                         \
                            const cg_b_source *from, float beta, const float *init, float *c,      \
                            int ldc, const char **prefetch, const char *prefetch_end)              \
    {                                                                                              \
        tile(rows, nv, packs, halves, m, n, k, a, b, from, beta, init, c, ldc, prefetch,           \
             prefetch_end);                                                                        \
    }
PANEL_TILE(tile_8x48, 8, 3, 0, 0)
PANEL_TILE(tile_12x32, 12, 2, 0, 0)
PANEL_TILE(tile_24x16, 24, 1, 0, 0)
PANEL_TILE(packing_8x48, 8, 3, 1, 0)
PANEL_TILE(packing_12x32, 12, 2, 1, 0)
PANEL_TILE(packing_24x16, 24, 1, 1, 0)
PANEL_TILE(packing_f16_8x48, 8, 3, 1, 1)
PANEL_TILE(packing_f16_12x32, 12, 2, 1, 1)
PANEL_TILE(packing_f16_24x16, 24, 1, 1, 1)
#undef PANEL_TILE

/* The panel's tiles down its m rows (by n's vectors), the first packing B
 * where `from` is set. */
static void panel(int m, int n, int k, const float *a, float *b, const cg_b_source *from,
                  float beta, const float *init, float *c, int ldc, const char *prefetch,
                  const char *prefetch_end)
{
    static cg_panel_tile_fn *const tiles[3][4] = {
        {NULL, tile_24x16, tile_12x32, tile_8x48},
        {NULL, packing_24x16, packing_12x32, packing_8x48},
        {NULL, packing_f16_24x16, packing_f16_12x32, packing_f16_8x48}};
    const int nv = (n + 15) / 16, source = from ? 1 + (from->halves != 0) : 0;
    cg_panel_tiles(tiles[source][nv], tiles[0][nv], PANEL / nv, m, n, k, a, b, from, beta, init, c,
                   ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_panel_avx512_24x48(int m, int n, int k, const float *a, const float *b, float beta,
                                    const float *init, float *c, int ldc, const char *prefetch,
                                    const char *prefetch_end)
{
    /* b is only read where from is NULL */
    panel(m, n, k, a, (float *)(uintptr_t)b, NULL, beta, init, c, ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_panel_packing_avx512_24x48(int m, int n, int k, const float *a, float *b,
                                            const void *src, int halves, const cg_pack_rows *rows,
                                            int64_t col, float beta, const float *init, float *c,
                                            int ldc, const char *prefetch, const char *prefetch_end)
{
    const cg_b_source from = cg_b_source_of(src, halves, rows, col, n);
    panel(m, n, k, a, b, &from, beta, init, c, ldc, prefetch, prefetch_end);
}

/* ---- gemm_indirect ------------------------------------------------------ */

/* Tiles of 8 rows (48, 32 or 16 columns: 24, 16 or 8 accumulators), each
 * row's pointer in a register for a piece and broadcast from in place; rows
 * past m repeat row m - 1 and are not stored. */
AVX512 static ALWAYS_INLINE void indirect_tile(const int nv, int m, int n, int pieces,
                                               const int *len, const float *const *a, int64_t lda,
                                               const float *b, float beta, const float *init,
                                               float *c, int ldc, const char **prefetch,
                                               const char *prefetch_end)
{
    const char *pf = *prefetch;
    prefetch_tile(nv, m, c, ldc);
    __m512 acc[24][4];
    zero_tile(ROWS, nv, acc);
    for (int q = 0; q < pieces; q++, a += lda) {
        const float *row[ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; r++)
            row[r] = a[r < m ? r : m - 1];
        const int k = len[q];
        int p = 0;
        for (; p + 2 <= k; p += 2, b += 2 * NR) { /* two steps, a prefetched line */
            if (pf < prefetch_end) {
                _mm_prefetch(pf, _MM_HINT_T1);
                pf += 64;
            }
            indirect_step(nv, row, p, b, acc);
            indirect_step(nv, row, p + 1, b + NR, acc);
        }
        if (p < k) {
            indirect_step(nv, row, p, b, acc);
            b += NR;
        }
    }
    *prefetch = pf;
    store_tile(ROWS, nv, m, n, beta, init, c, ldc, acc);
}

typedef void indirect_tile_fn(int, int, int, const int *, const float *const *, int64_t,
                              const float *, float, const float *, float *, int, const char **,
                              const char *);
#define INDIRECT_TILE(name, nv)                                                                    \
    AVX512 static void name(int m, int n, int pieces, const int *len, const float *const *a,       \
                            int64_t lda, const float *b, float beta, const float *init, float *c,  \
                            int ldc, const char **prefetch, const char *prefetch_end)              \
    {                                                                                              \
        indirect_tile(nv, m, n, pieces, len, a, lda, b, beta, init, c, ldc, prefetch,              \
                      prefetch_end);                                                               \
    }
INDIRECT_TILE(indirect_8x48, 3)
INDIRECT_TILE(indirect_8x32, 2)
INDIRECT_TILE(indirect_8x16, 1)
#undef INDIRECT_TILE

void cg_f32_gemm_indirect_avx512_24x48(int m, int n, int pieces, const int *len,
                                       const float *const *a, int64_t lda, const float *b,
                                       float beta, const float *init, float *c, int ldc,
                                       const char *prefetch, const char *prefetch_end)
{
    const int nv = (n + 15) / 16;
    indirect_tile_fn *const run = nv == 3 ? indirect_8x48 : nv == 2 ? indirect_8x32 : indirect_8x16;
    for (int r = 0; r < m; r += ROWS)
        run(m - r < ROWS ? m - r : ROWS, n, pieces, len, a + r, lda, b, beta, init,
            c + (size_t)r * ldc, ldc, &prefetch, prefetch_end);
}

/* ---- gemm_runs ---------------------------------------------------------- */

/* The tall tiles ask for PREFETCH_LINES lines of the prefetch range (where
 * left) before each PREFETCH_STEPS steps of a run: a few lines at once do
 * not stall on the fill buffers as a call's whole share asked for before it
 * did (r50_1x1_56: 230 lines a call, the stem 107; their weight gradients
 * 1.19-1.34x and 1.06-1.14x), and the loop of steps stays as it was (a test
 * a step, or two steps a loop, cost the stem and the 3x3 layers 2-26%: the
 * tiles of 24 and 28 accumulators have no registers to spare). The 8-row
 * tiles, whose row pointers take the registers, ask for it all at once. */
enum { PREFETCH_STEPS = 16, PREFETCH_LINES = PREFETCH_STEPS / 2 };

static ALWAYS_INLINE void prefetch_some(const char **pf, const char *end)
{
    for (int i = 0; i < PREFETCH_LINES && *pf < end; i++, *pf += 64)
        _mm_prefetch(*pf, _MM_HINT_T1);
}

static inline int64_t min_steps(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Tiles of 8 rows (48, 32 or 16 columns), B's last vector a masked load
 * only where it is not whole (`whole`: none a step), A's rows broadcast
 * through a pointer each (rows past m repeat row m - 1, never stored): one
 * index steps every row. */
AVX512 static ALWAYS_INLINE void runs_tile(const int nv, const int whole, int row0, int m, int n,
                                           int runs, const cg_gemm_run *run, int64_t lda,
                                           int64_t ldb, int col0, float beta, float *c, int ldc,
                                           const char **prefetch, const char *prefetch_end)
{
    prefetch_tile(nv, m, c, ldc);
    __m512 acc[24][4];
    zero_tile(ROWS, nv, acc);
    const __mmask16 last = last_vector(nv, n);
    const char *pf = *prefetch;
    for (; pf < prefetch_end; pf += 64) /* all at once: no register to spare */
        _mm_prefetch(pf, _MM_HINT_T1);
    for (int q = 0; q < runs; q++) {
        const float *row[ROWS], *b = run[q].b + col0;
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; r++)
            row[r] = run[q].a + row0 + (r < m ? r : m - 1);
        for (int64_t p = 0, at = 0; p < run[q].len; p++, at += lda, b += ldb) {
            __m512 bv[4];
            load_b(nv, whole, last, b, bv);
            rows_step(nv, row, at, bv, acc);
        }
    }
    *prefetch = pf;
    store_tile(ROWS, nv, m, n, beta, NULL, c, ldc, acc);
}

/* A whole tile of `rows` rows (12 for 32 columns, 24 for 16: 24
 * accumulators, where 8 rows keep 16 or 8), A's rows broadcast from one
 * pointer: they are consecutive floats of a run (dy's channels). Each
 * element's sum takes the same FMAs in the same order as in runs_tile. */
AVX512 static ALWAYS_INLINE void runs_tall_tile(const int rows, const int nv, const int whole,
                                                int row0, int n, int runs, const cg_gemm_run *run,
                                                int64_t lda, int64_t ldb, int col0, float beta,
                                                float *c, int ldc, const char **prefetch,
                                                const char *prefetch_end)
{
    prefetch_tile(nv, rows, c, ldc);
    __m512 acc[24][4];
    zero_tile(rows, nv, acc);
    const __mmask16 last = last_vector(nv, n);
    const char *pf = *prefetch;
    for (int q = 0; q < runs; q++) {
        const float *a = run[q].a + row0, *b = run[q].b + col0;
        for (int64_t p = 0; p < run[q].len;) {
            prefetch_some(&pf, prefetch_end);
            for (const int64_t stop = min_steps(run[q].len, p + PREFETCH_STEPS); p < stop;
                 p++, a += lda, b += ldb) {
                __m512 bv[4];
                load_b(nv, whole, last, b, bv);
                broadcast_step(rows, nv, a, bv, acc);
            }
        }
    }
    *prefetch = pf;
    store_tile(rows, nv, rows, n, beta, NULL, c, ldc, acc);
}

typedef void runs_tile_fn(int, int, int, int, const cg_gemm_run *, int64_t, int64_t, int, float,
                          float *, int, const char **, const char *);
#define RUNS_TILE(name, nv, whole)                                                                 \
    AVX512 static void name(int row0, int m, int n, int runs, const cg_gemm_run *run, int64_t lda, \
                            int64_t ldb, int col0, float beta, float *c, int ldc,                  \
                            const char **prefetch, const char *prefetch_end)                       \
    {                                                                                              \
        runs_tile(nv, whole, row0, m, n, runs, run, lda, ldb, col0, beta, c, ldc, prefetch,        \
                  prefetch_end);                                                                   \
    }
RUNS_TILE(runs_8x48, 3, 1)
RUNS_TILE(runs_8x32, 2, 1)
RUNS_TILE(runs_8x16, 1, 1)
RUNS_TILE(runs_8x48_masked, 3, 0)
RUNS_TILE(runs_8x32_masked, 2, 0)
RUNS_TILE(runs_8x16_masked, 1, 0)
#undef RUNS_TILE
#define RUNS_TALL_TILE(name, rows, nv, whole)                                                      \
    AVX512 static void name(int row0, int m, int n, int runs, const cg_gemm_run *run, int64_t lda, \
                            int64_t ldb, int col0, float beta, float *c, int ldc,                  \
                            const char **prefetch, const char *prefetch_end)                       \
    {                                                                                              \
        (void)m;                                                                                   \
        runs_tall_tile(rows, nv, whole, row0, n, runs, run, lda, ldb, col0, beta, c, ldc,          \
                       prefetch, prefetch_end);                                                    \
    }
RUNS_TALL_TILE(runs_12x32, 12, 2, 1)
RUNS_TALL_TILE(runs_24x16, 24, 1, 1)
RUNS_TALL_TILE(runs_12x32_masked, 12, 2, 0)
RUNS_TALL_TILE(runs_24x16_masked, 24, 1, 0)
RUNS_TALL_TILE(runs_7x48, 7, 3, 1)
RUNS_TALL_TILE(runs_7x32, 7, 2, 1)
RUNS_TALL_TILE(runs_7x48_masked, 7, 3, 0)
RUNS_TALL_TILE(runs_7x32_masked, 7, 2, 0)
RUNS_TALL_TILE(runs_7x64, 7, 4, 1)
RUNS_TALL_TILE(runs_7x64_masked, 7, 4, 0)
#undef RUNS_TALL_TILE

/* Columns [col0, col0 + n) of B and C (n <= 48). */
static void runs_columns(int m, int n, int runs, const cg_gemm_run *run, int64_t lda, int64_t ldb,
                         int col0, float beta, float *c, int ldc, const char **prefetch,
                         const char *prefetch_end)
{
    /* by vectors, and whether the last one is whole */
    static runs_tile_fn *const tiles[2][3] = {
        {runs_8x16_masked, runs_8x32_masked, runs_8x48_masked}, {runs_8x16, runs_8x32, runs_8x48}};
    static runs_tile_fn *const tall[2][2] = {{runs_24x16_masked, runs_12x32_masked},
                                             {runs_24x16, runs_12x32}};
    /* 7 rows (a first layer's kernel rows of 21 floats: 7 x 3 channels), 48
     * or 32 columns: 21 or 14 accumulators */
    static runs_tile_fn *const sevens[2][2] = {{runs_7x32_masked, runs_7x48_masked},
                                               {runs_7x32, runs_7x48}};
    const int nv = (n + 15) / 16, height = nv == 3 ? ROWS : PANEL / nv;
    runs_tile_fn *run_tile = tiles[n % 16 == 0][nv - 1];
    int rows = ROWS;
    if (nv < 3 && m % height == 0) { /* whole tall tiles */
        run_tile = tall[n % 16 == 0][nv - 1];
        rows = height;
    } else if (nv > 1 && m % 7 == 0 && m % ROWS != 0) { /* whole tiles of 7 rows */
        run_tile = sevens[n % 16 == 0][nv - 2];
        rows = 7;
    }
    for (int r = 0; r < m; r += rows)
        run_tile(r, m - r < rows ? m - r : rows, n, runs, run, lda, ldb, col0, beta,
                 c + (size_t)r * ldc + col0, ldc, prefetch, prefetch_end);
}

void cg_f32_gemm_runs_avx512_24x64(int m, int n, int runs, const cg_gemm_run *run, int64_t lda,
                                   int64_t ldb, float beta, float *c, int ldc, const char *prefetch,
                                   const char *prefetch_end)
{
    if (n <= 48) {
        runs_columns(m, n, runs, run, lda, ldb, 0, beta, c, ldc, &prefetch, prefetch_end);
    } else if (m % 7 == 0) { /* the stem's kernel rows: 28 accumulators, A read once */
        runs_tile_fn *const seven = n % 16 == 0 ? runs_7x64 : runs_7x64_masked;
        for (int r = 0; r < m; r += 7)
            seven(r, 7, n, runs, run, lda, ldb, 0, beta, c + (size_t)r * ldc, ldc, &prefetch,
                  prefetch_end);
    } else { /* two halves of 32 columns or fewer */
        runs_columns(m, 32, runs, run, lda, ldb, 0, beta, c, ldc, &prefetch, prefetch_end);
        runs_columns(m, n - 32, runs, run, lda, ldb, 32, beta, c, ldc, &prefetch, prefetch_end);
    }
}

/* Packing rows: per step, zeros, the part of the segment inside [lo, hi),
 * zeros; whole vectors, then one masked (masked-off lanes of a load do not
 * fault, so a segment may end at the end of a page); fp16 converted on the
 * way. */

/* d[j] = src ? src[i + j] : 0 for j in [j0, j1). */
AVX512 static ALWAYS_INLINE void copy16(float *d, int64_t j0, int64_t j1, const void *src,
                                        int64_t i, const int halves)
{
    int64_t j = j0;
    for (; j + 16 <= j1; j += 16)
        _mm512_storeu_ps(d + j, src ? load16(src, i + j, 0xFFFF, halves) : _mm512_setzero_ps());
    if (j < j1) {
        const __mmask16 mask = (__mmask16)((1u << (j1 - j)) - 1u);
        _mm512_mask_storeu_ps(d + j, mask,
                              src ? load16(src, i + j, mask, halves) : _mm512_setzero_ps());
    }
}

AVX512 static ALWAYS_INLINE void pack_rows(float *dst, const cg_panel_layout *to, int64_t kb,
                                           int64_t n, const void *src, const cg_pack_rows *rows,
                                           int64_t a, const int halves)
{
    cg_pack_rows_body(copy16, dst, to, kb, n, src, rows, a, halves);
}

AVX512 void cg_f32_pack_rows_avx512(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                    const float *src, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src, rows, a, 0);
}

AVX512 void cg_f16_pack_rows_avx512(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                    const void *src_halves, const cg_pack_rows *rows, int64_t a)
{
    pack_rows(dst, to, kb, n, src_halves, rows, a, 1);
}
