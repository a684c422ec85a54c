/* SPDX-License-Identifier: MIT */
/* Every kernel of the list (src/kernels/kernels.inc) that this CPU can run,
 * whatever CONVGRAD_ISA says, against a double-precision or exact oracle of
 * its slot, on the edges of its tile: sizes below, equal to, above and
 * multiples of each tile dimension and of the vector widths, primes, beta 0
 * (C never read) and 1, leading dimensions wider than the matrices, and the
 * neighbours of what it writes left untouched. One test per line of the
 * list, generated from it; a slot's check is written once. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels/context.h"
#include "kernels/tile_prefetch.h"
#include "reference.h"
#include "support.h"

static const float CANARY = -12345.0f;

/* sizes[0, n) gets base, then t - 1, t, t + 1, 2t, 2t + 1 for the tile side
 * t, without repeats or values below 1; returns the count. */
static int edge_sizes(int *sizes, const int *base, int n_base, int t)
{
    int n = 0;
    const int around[] = {t - 1, t, t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < n_base + 5; i++) {
        int v = i < n_base ? base[i] : around[i - n_base], seen = v < 1;
        for (int j = 0; j < n && !seen; j++)
            seen = sizes[j] == v;
        if (!seen)
            sizes[n++] = v;
    }
    return n;
}

/* ---- gemm_panel ------------------------------------------------------ */

/* Wrong elements of C (rows m + 1, ldc apart) against want (m x n, sums of
 * k products of values in [-1, 1]): within the tolerance inside, canaries
 * untouched past column n and in row m. */
static int c_wrong(const float *c, int ldc, int m, int n, const double *want, int k)
{
    int bad = 0;
    for (int i = 0; i <= m; i++)
        for (int j = 0; j < ldc; j++) {
            const float got = c[i * ldc + j];
            if (i == m || j >= n)
                bad += memcmp(&got, &CANARY, sizeof got) != 0;
            else
                bad += !(fabs(got - want[i * n + j]) <= 1e-6 * (k + 2));
        }
    return bad;
}

/* How C starts: its own values (beta 1), zeros or a row of init (beta 0:
 * C is NaN, never read). */
enum { FROM_ZERO, FROM_C, FROM_INIT, STARTS };

/* A row of n values every row of C starts from under FROM_INIT (NaN past
 * n: a read past it shows), else NULL. */
static float *init_row(int start, int n, cgt_rng *rng)
{
    if (start != FROM_INIT)
        return NULL;
    float *init = malloc(sizeof(float) * (size_t)(n + 1));
    for (int j = 0; j <= n; j++)
        init[j] = j < n ? (float)cgt_rng_sym(rng) : NAN;
    return init;
}

/* Wrong elements of C after one call on packed panels: a is k steps of mr
 * floats (rows past m zero), b k steps of nr floats (columns past n zero),
 * C rows m + 1 with canaries past n and in row m. */
static int gemm_panel_wrong(cg_gemm_panel_fn *fn, int mr, int nr, int m, int n, int k, int start,
                            cgt_rng *rng)
{
    const int beta = start == FROM_C;
    float *init = init_row(start, n, rng);
    const int ldc = n + 7;
    float *a = malloc(sizeof(float) * (size_t)k * mr), *b = malloc(sizeof(float) * (size_t)k * nr);
    float *c = malloc(sizeof(float) * (size_t)(m + 1) * ldc);
    double *old = malloc(sizeof(double) * (size_t)m * n);
    for (int p = 0; p < k; p++) {
        for (int i = 0; i < mr; i++)
            a[p * mr + i] = i < m ? (float)cgt_rng_sym(rng) : 0.0f;
        for (int j = 0; j < nr; j++)
            b[p * nr + j] = j < n ? (float)cgt_rng_sym(rng) : 0.0f;
    }
    for (int i = 0; i <= m; i++)
        for (int j = 0; j < ldc; j++) {
            int inside = i < m && j < n;
            /* beta 0: C is never read, so NaN must not come through */
            c[i * ldc + j] = !inside ? CANARY : beta ? (float)cgt_rng_sym(rng) : NAN;
            if (inside)
                old[i * n + j] = beta ? c[i * ldc + j] : init ? init[j] : 0.0;
        }
    fn(m, n, k, a, b, (float)beta, init, c, ldc, (const char *)c, (const char *)(c + ldc));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                old[i * n + j] += (double)a[p * mr + i] * b[p * nr + j];
    const int bad = c_wrong(c, ldc, m, n, old, k); /* |a|, |b|, |c| <= 1 */
    free(a);
    free(b);
    free(c);
    free(old);
    free(init);
    return bad;
}

/* Every m <= mr and n <= nr the packed driver can ask for (its tails
 * included: the register tile changes with n), on sums short and long, C
 * starting from zeros, itself or a row of init. */
static void check_gemm_panel(cg_gemm_panel_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa;
    const int ks[] = {1, 2, 3, 17, 128, 257};
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int m = 1; m <= mr; m++)
        for (int n = 1; n <= nr; n++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int start = 0; start < STARTS; start++) {
                    if (ks[ki] > 17 && m % 5 != 0 && m != mr && n % 7 != 0 && n != nr)
                        continue; /* long sums on a sample of the tile's shapes */
                    int bad = gemm_panel_wrong(fn, mr, nr, m, n, ks[ki], start, &rng);
                    cr_assert_eq(bad, 0, "%s m %d n %d k %d start %d: %d wrong elements", name, m,
                                 n, ks[ki], start, bad);
                }
}

/* ---- gemm_panel_packing ---------------------------------------------- */

/* The gemm_panel kernel of an ISA (the one its specialisations keep to). */
static cg_gemm_panel_fn *gemm_panel_of(cg_isa isa)
{
    int count;
    const cg_kernel_entry *list = cg_kernel_list(&count);
    for (int i = 0; i < count; i++)
        if (strcmp(list[i].slot, "gemm_panel") == 0 && list[i].isa == isa)
            return (cg_gemm_panel_fn *)list[i].fn;
    return NULL;
}

/* Wrong values after one call packing B from k segments, each step's [lo,
 * hi) between NaNs in src (a read outside shows), by turns: whole, cut on
 * the left, on the right, on both sides, wholly padding, padding past
 * column n, exactly columns [col, col + n); step 1 cut on the left with its
 * row starting before src (at + lo = 0); fp32, or fp16 where halves. The
 * panel must be pack_rows' (zeros past n, to nr), C the ISA's gemm_panel's
 * bits on that panel and within the tolerance of a double sum; C's canaries
 * as gemm_panel_wrong's. */
static int gemm_panel_packing_wrong(cg_gemm_panel_packing_fn *fn, cg_gemm_panel_fn *plain, int mr,
                                    int nr, int m, int n, int k, int start, int halves,
                                    cgt_rng *rng)
{
    const int beta = start == FROM_C, col = 5, seg = col + n + 4, ldc = n + 7;
    const size_t src_n = (size_t)(k + 1) * seg; /* segment t at (t + 1) * seg */
    float *init = init_row(start, n, rng);
    float *src = malloc(sizeof(float) * src_n), *a = malloc(sizeof(float) * k * mr);
    uint16_t *src_halves = malloc(sizeof(uint16_t) * src_n);
    float *b = malloc(sizeof(float) * (size_t)k * nr), *want_b = malloc(sizeof(float) * k * nr);
    float *c = malloc(sizeof(float) * (size_t)(m + 1) * ldc);
    float *c_plain = malloc(sizeof(float) * (size_t)(m + 1) * ldc);
    int64_t *at = malloc(sizeof(int64_t) * 3 * (size_t)k), *lo = at + k, *hi = lo + k;
    double *want = malloc(sizeof(double) * (size_t)m * n);
    for (size_t e = 0; e < src_n; e++)
        src[e] = NAN;
    for (int t = 0; t < k; t++) {
        const int64_t los[7] = {0, col + n / 2, 0, col + 1, 0, col + n + 2, col};
        const int64_t his[7] = {seg, seg, col + n - n / 3, col + n - 1, 0, seg, col + n};
        const int kind = t == 1 ? 1 : t % 7;
        lo[t] = los[kind];
        hi[t] = his[kind];
        at[t] = t == 1 ? -lo[t] : kind == 4 ? 0 : (int64_t)(t + 1) * seg;
        for (int64_t j = lo[t]; j < hi[t]; j++)
            src[at[t] + j] = (float)cgt_rng_sym(rng);
        for (int i = 0; i < mr; i++)
            a[t * mr + i] = i < m ? (float)cgt_rng_sym(rng) : 0.0f;
    }
    if (halves) { /* src as the halves hold it */
        cg_f32_to_f16_ref(src_halves, src, src_n);
        cg_f16_to_f32_ref(src, src_halves, src_n);
    }
    for (int t = 0; t < k; t++) {
        for (int j = 0; j < nr; j++) {
            const int inside = j < n && col + j >= lo[t] && col + j < hi[t];
            want_b[t * nr + j] = inside ? src[at[t] + col + j] : 0.0f;
            b[t * nr + j] = NAN;
        }
    }
    for (int i = 0; i <= m; i++)
        for (int j = 0; j < ldc; j++) {
            const int inside = i < m && j < n;
            c[i * ldc + j] = !inside ? CANARY : beta ? (float)cgt_rng_sym(rng) : NAN;
            c_plain[i * ldc + j] = c[i * ldc + j];
            if (inside)
                want[i * n + j] = beta ? c[i * ldc + j] : init ? init[j] : 0.0;
        }
    const cg_pack_rows rows = {at, lo, hi};
    fn(m, n, k, a, b, halves ? (const void *)src_halves : src, halves, &rows, col, (float)beta,
       init, c, ldc, (const char *)c, (const char *)(c + ldc));
    plain(m, n, k, a, want_b, (float)beta, init, c_plain, ldc, NULL, NULL);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int t = 0; t < k; t++)
                want[i * n + j] += (double)a[t * mr + i] * want_b[t * nr + j];
    int bad = c_wrong(c, ldc, m, n, want, k);
    bad += memcmp(c, c_plain, sizeof(float) * (size_t)(m + 1) * ldc) != 0;
    bad += memcmp(b, want_b, sizeof(float) * (size_t)k * nr) != 0;
    free(src), free(src_halves), free(a), free(b), free(want_b), free(c), free(c_plain), free(at),
        free(want);
    free(init);
    return bad;
}

/* Every m <= mr and n <= nr, as check_gemm_panel's. */
static void check_gemm_panel_packing(cg_gemm_panel_packing_fn *fn, const char *name, cg_isa isa,
                                     int mr, int nr)
{
    const int ks[] = {1, 2, 3, 17, 128, 257};
    cg_gemm_panel_fn *plain = gemm_panel_of(isa);
    cr_assert(plain, "%s: no gemm_panel of its ISA", name);
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int m = 1; m <= mr; m++)
        for (int n = 1; n <= nr; n++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int start = 0; start < 2 * STARTS; start++) {
                    if (ks[ki] > 17 && m % 5 != 0 && m != mr && n % 7 != 0 && n != nr)
                        continue; /* long sums on a sample of the tile's shapes */
                    const int halves = start >= STARTS; /* fp16 on each start */
                    int bad = gemm_panel_packing_wrong(fn, plain, mr, nr, m, n, ks[ki],
                                                       start % STARTS, halves, &rng);
                    cr_assert_eq(bad, 0, "%s m %d n %d k %d start %d fp16 %d: %d wrong", name, m, n,
                                 ks[ki], start % STARTS, halves, bad);
                }
}

/* ---- gemm_indirect --------------------------------------------------- */

/* Wrong elements of C after one call with A's rows in place: piece q of
 * row i is len[q] floats of its own, between NaNs (a read past either end
 * shows), or the shared zero row where (i + q) % 5 == 4 (padding), the
 * pointers lda > mr apart; b and C as gemm_panel_wrong's. */
static int gemm_indirect_wrong(cg_gemm_indirect_fn *fn, int mr, int nr, int m, int n,
                               const int *len, int pieces, int start, cgt_rng *rng)
{
    const int beta = start == FROM_C;
    float *init = init_row(start, n, rng);
    const int ldc = n + 7, lda = mr + 3;
    int k = 0, most = 1;
    for (int q = 0; q < pieces; q++) {
        k += len[q];
        most = len[q] > most ? len[q] : most;
    }
    float *rows = malloc(sizeof(float) * (size_t)pieces * mr * (most + 2));
    float *zero = calloc((size_t)most, sizeof(float));
    const float **a = malloc(sizeof(float *) * (size_t)pieces * lda);
    float *b = malloc(sizeof(float) * (size_t)k * nr), *c = malloc(sizeof(float) * (m + 1) * ldc);
    double *want = calloc((size_t)m * n, sizeof(double));
    for (int q = 0; q < pieces; q++)
        for (int i = 0; i < lda; i++) {
            float *row = rows + ((size_t)q * mr + (i < mr ? i : 0)) * (most + 2);
            row[0] = row[len[q] + 1] = NAN;
            for (int p = 0; p < len[q]; p++)
                row[1 + p] = (float)cgt_rng_sym(rng);
            /* rows past m are the kernel's to leave alone: a NULL there shows */
            a[q * lda + i] = i >= m ? NULL : (i + q) % 5 == 4 ? zero : row + 1;
        }
    for (int p = 0; p < k; p++)
        for (int j = 0; j < nr; j++)
            b[p * nr + j] = j < n ? (float)cgt_rng_sym(rng) : 0.0f;
    for (int i = 0; i <= m; i++)
        for (int j = 0; j < ldc; j++) {
            const int inside = i < m && j < n;
            c[i * ldc + j] = !inside ? CANARY : beta ? (float)cgt_rng_sym(rng) : NAN;
            if (inside)
                want[i * n + j] = beta ? c[i * ldc + j] : init ? init[j] : 0.0;
        }
    for (int i = 0; i < m; i++)
        for (int q = 0, s = 0; q < pieces; s += len[q], q++)
            for (int p = 0; p < len[q]; p++)
                for (int j = 0; j < n; j++)
                    want[i * n + j] += (double)a[q * lda + i][p] * b[(s + p) * nr + j];
    fn(m, n, pieces, len, a, lda, b, (float)beta, init, c, ldc, (const char *)c,
       (const char *)(c + ldc));
    const int bad = c_wrong(c, ldc, m, n, want, k);
    free(rows);
    free(zero);
    free(a);
    free(b);
    free(c);
    free(want);
    free(init);
    return bad;
}

/* Every m <= mr and n <= nr, on pieces of one step to a long block, equal
 * and unequal, C starting from zeros, itself or a row of init. */
static void check_gemm_indirect(cg_gemm_indirect_fn *fn, const char *name, cg_isa isa, int mr,
                                int nr)
{
    (void)isa;
    static const int lens[][4] = {{1}, {2, 3}, {16, 16}, {17, 1, 5}, {64, 64}, {128}, {3, 250}};
    static const int counts[] = {1, 2, 2, 3, 2, 1, 2};
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int m = 1; m <= mr; m++)
        for (int n = 1; n <= nr; n++)
            for (size_t l = 0; l < sizeof counts / sizeof *counts; l++)
                for (int start = 0; start < STARTS; start++) {
                    if (lens[l][0] + lens[l][1] > 17 && m % 5 != 0 && m != mr && n % 7 != 0 &&
                        n != nr)
                        continue; /* long sums on a sample of the tile's shapes */
                    int bad =
                        gemm_indirect_wrong(fn, mr, nr, m, n, lens[l], counts[l], start, &rng);
                    cr_assert_eq(bad, 0, "%s m %d n %d pieces %zu start %d: %d wrong elements",
                                 name, m, n, l, start, bad);
                }
}

/* ---- gemm_runs -------------------------------------------------------- */

/* Wrong elements of C after one call reading both operands in place: run q
 * of len[q] steps, A's steps lda floats apart (m of them read), B's ldb
 * apart (n read), each between NaNs past what may be read (a read past row
 * m or column n shows); C as gemm_panel_wrong's. */
static int gemm_runs_wrong(cg_gemm_runs_fn *fn, int m, int n, const int *len, int runs, int beta,
                           cgt_rng *rng)
{
    const int ldc = n + 7, lda = m + 3, ldb = n + 5;
    cg_gemm_run run[8];
    float *mem[8][2];
    int k = 0;
    for (int q = 0; q < runs; q++) {
        const int steps = len[q] > 0 ? len[q] : 1;
        for (int side = 0; side < 2; side++) {
            const int ld = side ? ldb : lda, used = side ? n : m;
            float *v = malloc(sizeof(float) * (size_t)(steps * ld + 2));
            for (int i = 0; i < steps * ld + 2; i++)
                v[i] =
                    (i - 1) % ld < used && i > 0 && i <= steps * ld ? (float)cgt_rng_sym(rng) : NAN;
            mem[q][side] = v;
        }
        run[q] = (cg_gemm_run){mem[q][0] + 1, mem[q][1] + 1, len[q]};
        k += len[q];
    }
    float *c = malloc(sizeof(float) * (size_t)(m + 1) * ldc);
    double *want = calloc((size_t)m * n, sizeof(double));
    for (int i = 0; i <= m; i++)
        for (int j = 0; j < ldc; j++) {
            const int inside = i < m && j < n;
            c[i * ldc + j] = !inside ? CANARY : beta ? (float)cgt_rng_sym(rng) : NAN;
            if (inside && beta)
                want[i * n + j] = c[i * ldc + j];
        }
    for (int q = 0; q < runs; q++)
        for (int p = 0; p < len[q]; p++)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++)
                    want[i * n + j] += (double)run[q].a[p * lda + i] * run[q].b[p * ldb + j];
    fn(m, n, runs, run, lda, ldb, (float)beta, c, ldc, (const char *)c, (const char *)(c + ldc));
    const int bad = c_wrong(c, ldc, m, n, want, k);
    for (int q = 0; q < runs; q++)
        free(mem[q][0]), free(mem[q][1]);
    free(c);
    free(want);
    return bad;
}

/* Every m <= mr and n <= nr, on runs of no step to a long one, one run and
 * several, beta 0 (no run: zeros) and 1. */
static void check_gemm_runs(cg_gemm_runs_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa;
    static const int lens[][4] = {{0}, {1}, {2, 3}, {16, 0, 16}, {17, 1, 5, 9}, {56, 56}, {200}};
    static const int counts[] = {1, 1, 2, 3, 4, 2, 1};
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int m = 1; m <= mr; m++)
        for (int n = 1; n <= nr; n++)
            for (size_t l = 0; l < sizeof counts / sizeof *counts; l++)
                for (int beta = 0; beta < 2; beta++) {
                    if (lens[l][0] + lens[l][1] > 17 && m % 5 != 0 && m != mr && n % 7 != 0 &&
                        n != nr)
                        continue; /* long sums on a sample of the tile's shapes */
                    int bad = gemm_runs_wrong(fn, m, n, lens[l], counts[l], beta, &rng);
                    cr_assert_eq(bad, 0, "%s m %d n %d runs %zu beta %d: %d wrong elements", name,
                                 m, n, l, beta, bad);
                }
}

/* The indirect and packing kernels of each ISA have the tile of its
 * gemm_panel: the drivers share one blocking and one packed B. */
Test(kernel_list, gemm_indirect_tiles_match_gemm_panel)
{
    int count;
    const cg_kernel_entry *list = cg_kernel_list(&count);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < count; j++)
            if ((strcmp(list[i].slot, "gemm_indirect") == 0 ||
                 strcmp(list[i].slot, "gemm_panel_packing") == 0) &&
                strcmp(list[j].slot, "gemm_panel") == 0 && list[i].isa == list[j].isa)
                cr_assert(list[i].mr == list[j].mr && list[i].nr == list[j].nr,
                          "%s is %dx%d, %s %dx%d", list[i].name, list[i].mr, list[i].nr,
                          list[j].name, list[j].mr, list[j].nr);
}

/* ---- pack_rows, pack_rows_f16 --------------------------------------- */

/* Steps of every kind a packer asks for: segments wholly inside, cut on
 * either side, wholly padding; windows [a, a + n) over the segment from
 * every offset and of every width up to three panels; two layouts: whole
 * steps of a width a few vectors past nr, and pieces of 3 columns into steps
 * of that width (groups side by side); a zeros-only call (fp32). Each of the
 * n columns must be the segment's (or zero outside [lo, hi)) at its place;
 * the rest, canaries, untouched. Exactly one of f32 and f16 is the kernel. */
static void check_rows(cg_pack_rows_fn *f32, cg_pack_rows_f16_fn *f16, const char *name, int nr)
{
    enum { KB = 7, SEG = 70, SRC = KB * SEG + 64, MOST = 24 * KB * 40 + 16 };
    const int64_t width = 2 * nr + 5, pieces[] = {width, 3};
    static float src[SRC], dst[MOST];
    static uint16_t halves[SRC];
    for (int i = 0; i < SRC; i++) {
        src[i] = (float)(i % 1000 + 1); /* integers up to 1000: exact in fp16 */
        halves[i] = ref_float_to_half(src[i]);
    }
    /* step t: segment at t*SEG + 3, inside [lo, hi) */
    const int64_t lo_of[KB] = {0, 5, 0, 17, 0, 30, 0}, hi_of[KB] = {SEG, SEG, 40, 50, 0, 31, SEG};
    int64_t at[KB], lo[KB], hi[KB];
    for (int t = 0; t < KB; t++) {
        at[t] = t * SEG + 3;
        lo[t] = lo_of[t];
        hi[t] = hi_of[t];
    }
    const cg_pack_rows rows = {at, lo, hi};
    for (int pi = 0; pi < 2; pi++) {
        const cg_panel_layout to = {width, pieces[pi], KB * width};
        for (int zeros = 0; zeros < (f32 ? 2 : 1); zeros++)
            for (int64_t a = 0; a + 1 < SEG; a += zeros ? 23 : 1)
                for (int64_t n = 0; n <= 3 * width && a + n <= SEG; n++) {
                    const int64_t panels = (n + to.piece - 1) / to.piece;
                    const int64_t floats = panels * to.panel + 16;
                    cr_assert(floats <= MOST);
                    for (int64_t e = 0; e < floats; e++)
                        dst[e] = CANARY;
                    if (f32)
                        f32(dst, &to, KB, n, zeros ? NULL : src, zeros ? NULL : &rows, a);
                    else
                        f16(dst, &to, KB, n, halves, &rows, a);
                    for (int64_t e = 0; e < floats; e++) {
                        const int64_t panel = e / to.panel, t = e % to.panel / to.step;
                        const int64_t c = e % to.step, j = panel * to.piece + c, col = a + j;
                        float want = CANARY;
                        if (panel < panels && c < to.piece && j < n)
                            want = !zeros && col >= lo[t] && col < hi[t] ? src[at[t] + col] : 0.0f;
                        cr_assert(memcmp(&dst[e], &want, sizeof want) == 0,
                                  "%s: piece %lld a %lld n %lld%s: step %lld column %lld is %g, "
                                  "want %g",
                                  name, (long long)to.piece, (long long)a, (long long)n,
                                  zeros ? " (zeros)" : "", (long long)t, (long long)j, dst[e],
                                  want);
                    }
                }
    }
}

static void check_pack_rows(cg_pack_rows_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr;
    check_rows(fn, NULL, name, nr);
}

static void check_pack_rows_f16(cg_pack_rows_f16_fn *fn, const char *name, cg_isa isa, int mr,
                                int nr)
{
    (void)isa, (void)mr;
    check_rows(NULL, fn, name, nr);
}

/* ---- pack_transposed ------------------------------------------------ */

/* Panels of every height the drivers use (the gemm_panel kernels' mr) and
 * odd ones, every row count up to it, rows wholly inside, cut on either
 * side or wholly padding (a pattern that breaks up the register blocks at
 * every offset), windows [a, a + n) from several offsets and every width up
 * to three blocks and a few: each element of the n steps must be its row's
 * column (zero outside [lo, hi), and in rows m..mr-1); past them, canaries. */
static void check_pack_transposed(cg_pack_transposed_fn *fn, const char *name, cg_isa isa, int mr,
                                  int nr)
{
    (void)isa, (void)mr, (void)nr;
    enum { ROWS = 72, SEG = 80, SRC = ROWS * SEG + 64, WIDEST = 3 * 8 + 4 };
    enum { MOST = ROWS * WIDEST + 16 };
    static float src[SRC], dst[MOST];
    for (int i = 0; i < SRC; i++)
        src[i] = (float)(i + 1);
    /* and B's micro-panels (48), and more rows than a window of the x86 kernels (64) */
    const int heights[] = {8, 12, 24, 5, 13, 48, 70};
    for (int pattern = 0; pattern < 3; pattern++) {
        int64_t at[ROWS], lo[ROWS], hi[ROWS];
        for (int r = 0; r < ROWS; r++) {
            at[r] = (r * 7 % ROWS) * SEG + 3; /* rows out of order in src */
            const int cut = pattern == 0 ? 0 : pattern == 1 ? r % 5 == 3 : r % 3 != 0;
            lo[r] = cut && r % 2 ? 6 : 0;
            hi[r] = !cut ? SEG : r % 4 == 0 ? 0 : SEG - 9;
        }
        const cg_pack_rows rows = {at, lo, hi};
        for (size_t k = 0; k < sizeof heights / sizeof *heights; k++) {
            const int64_t h = heights[k];
            for (int64_t m = 0; m <= h; m++)
                for (int64_t a = 0; a < 12; a += 5)
                    for (int64_t n = 0; n <= WIDEST && a + n <= SEG; n++) {
                        const int64_t floats = n * h + 16;
                        cr_assert(floats <= MOST);
                        for (int64_t e = 0; e < floats; e++)
                            dst[e] = CANARY;
                        fn(dst, h, m, n, src, &rows, a);
                        for (int64_t e = 0; e < floats; e++) {
                            const int64_t j = e / h, r = e % h, col = a + j;
                            float want = CANARY;
                            if (j < n)
                                want =
                                    r < m && col >= lo[r] && col < hi[r] ? src[at[r] + col] : 0.0f;
                            cr_assert(memcmp(&dst[e], &want, sizeof want) == 0,
                                      "%s: mr %lld m %lld a %lld n %lld pattern %d: row %lld "
                                      "step %lld is %g, want %g",
                                      name, (long long)h, (long long)m, (long long)a, (long long)n,
                                      pattern, (long long)r, (long long)j, dst[e], want);
                        }
                    }
        }
    }
}

/* ---- dwconv_rows, dwconv3x3_rows ----------------------------------------------------- */

static double element(const void *t, int64_t i, size_t dtype_size)
{
    return dtype_size == 4 ? ((const float *)t)[i]
                           : ref_half_to_double(ref_half_load(t, (size_t)i));
}

/* The sums the kernel must write, in double, and the sums of their terms'
 * magnitudes (for the tolerance). */
static void dwconv_rows_oracle(const cg_plan *p, const void *dy, const void *x, int64_t c_first,
                               int64_t c_last, int64_t first, int64_t last, double *want,
                               double *abs_sum)
{
    const int64_t channels = c_last - c_first, plane = p->out_h * p->out_w;
    memset(want, 0, sizeof(double) * (size_t)(channels * p->taps));
    memset(abs_sum, 0, sizeof(double) * (size_t)(channels * p->taps));
    for (int64_t row = first; row < last; row++) {
        const int64_t n = row / plane, oh = row % plane / p->out_w, ow = row % p->out_w;
        for (int64_t kh = 0; kh < p->kernel_h; kh++)
            for (int64_t kw = 0; kw < p->kernel_w; kw++) {
                const int64_t iy = oh * p->stride_h + kh * p->dil_h - p->pad_u;
                const int64_t ix = ow * p->stride_w + kw * p->dil_w - p->pad_l;
                if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w)
                    continue;
                for (int64_t c = c_first; c < c_last; c++) {
                    double term =
                        element(dy, row * p->cout + c, p->dtype_size) *
                        element(x, ((n * p->in_h + iy) * p->in_w + ix) * p->cin + c / p->cout_g,
                                p->dtype_size);
                    int64_t at = (c - c_first) * p->taps + kh * p->kernel_w + kw;
                    want[at] += term;
                    abs_sum[at] += fabs(term);
                }
            }
    }
}

/* x starts x_offset bytes past a cache line (kernels may realign their
 * blocks of channels to it). */
static void check_dwconv_shape(cg_dwconv_rows_fn *fn, const char *name, const cgt_shape *s,
                               size_t dtype_size, int sub_range, size_t x_offset, cgt_rng *rng)
{
    ConvParameter p = cgt_param(s);
    cg_plan plan;
    cr_assert_eq(cg_plan_make(&p, dtype_size, &plan), CG_OK);
    size_t dy_n = ref_dy_elems(&p), x_n = ref_x_elems(&p);
    unsigned char *x_block = aligned_alloc(64, (x_n * dtype_size + x_offset + 63) / 64 * 64);
    void *dy = malloc(dy_n * dtype_size), *x = x_block + x_offset;
    if (dtype_size == 4) {
        cgt_fill_f32(rng, dy, dy_n, 1.0);
        cgt_fill_f32(rng, x, x_n, 1.0);
    } else {
        cgt_fill_f16(rng, dy, dy_n, 1.0);
        cgt_fill_f16(rng, x, x_n, 1.0);
    }
    /* a core's share that starts and ends mid-image; channels from 0, or a
     * block from inside */
    const int64_t first = plan.rows / 3, last = plan.rows - plan.rows / 5;
    const int64_t c_first = sub_range ? plan.cout / 3 / plan.cout_g * plan.cout_g : 0,
                  c_last = plan.cout; /* whole groups */
    const int64_t out_n = (c_last - c_first) * plan.taps;
    float *acc = malloc(sizeof(float) * (size_t)out_n),
          *got = malloc(sizeof(float) * (size_t)(out_n + 1));
    double *want = malloc(sizeof(double) * (size_t)out_n),
           *abs_sum = malloc(sizeof(double) * (size_t)out_n);
    got[out_n] = CANARY;
    /* fp32: the bias gradient's sums too, which must have the bits of one
     * chain of double adds a channel in row order */
    const int64_t channels = c_last - c_first;
    double *db_sums = dtype_size == 4 ? malloc(sizeof(double) * (size_t)(channels + 1)) : NULL;
    if (db_sums)
        db_sums[channels] = (double)CANARY;
    fn(&plan, dy, x, c_first, c_last, first, last, acc, 0, got, db_sums);
    dwconv_rows_oracle(&plan, dy, x, c_first, c_last, first, last, want, abs_sum);
    /* the same sum in three calls, the sums resting in acc between them
     * (cut mid-row and at a prime): the bits of one call */
    float *again = malloc(sizeof(float) * (size_t)out_n);
    double *db_again = db_sums ? malloc(sizeof(double) * (size_t)channels) : NULL;
    const int64_t cut1 = first + (last - first) / 3, cut2 = cut1 + 7 < last ? cut1 + 7 : last;
    fn(&plan, dy, x, c_first, c_last, first, cut1, acc, 0, NULL, db_again);
    fn(&plan, dy, x, c_first, c_last, cut1, cut2, acc, 1, NULL, db_again);
    fn(&plan, dy, x, c_first, c_last, cut2, last, acc, 1, again, db_again);
    cr_assert(memcmp(again, got, sizeof(float) * (size_t)out_n) == 0,
              "%s: C %d fp%zu: the sum in three calls differs from one call's", name, s->cin,
              dtype_size * 8);
    cr_assert(!db_sums || memcmp(db_again, db_sums, sizeof(double) * (size_t)channels) == 0,
              "%s: C %d: the db sums in three calls differ from one call's", name, s->cin);
    free(again);
    free(db_again);
    for (int64_t c = 0; db_sums && c <= channels; c++) {
        double chain = c < channels ? 0.0 : (double)CANARY; /* past the channels: untouched */
        for (int64_t row = first; c < channels && row < last; row++)
            chain += ((const float *)dy)[row * plan.cout + c_first + c];
        cr_assert(memcmp(&db_sums[c], &chain, sizeof chain) == 0,
                  "%s: C %d fp32 channels [%lld, %lld): db sum %lld %.17g, want %.17g", name,
                  s->cin, (long long)c_first, (long long)c_last, (long long)c, db_sums[c], chain);
    }
    for (int64_t i = 0; i < out_n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-6 * (double)(last - first + 2) * abs_sum[i] + 1e-30,
                  "%s: C %d stride %d,%d %dx%d pad %d/%d fp%zu channels [%lld, %lld): dw[%lld] "
                  "%g, want %g",
                  name, s->cin, s->sh, s->sw, s->h, s->w, s->pu, s->pd, dtype_size * 8,
                  (long long)c_first, (long long)c_last, (long long)i, got[i], want[i]);
    cr_assert(memcmp(&got[out_n], &CANARY, sizeof CANARY) == 0, "%s: wrote past dw", name);
    free(dy);
    free(x_block);
    free(acc);
    free(got);
    free(want);
    free(abs_sum);
    free(db_sums);
}

/* 3x3 shapes (and, for kernels of every size, others) around the channel
 * tile, strides, borders, fp16. */
static void check_dwconv(cg_dwconv_rows_fn *fn, const char *name, int nr, int any_size)
{
    const int base[] = {1, 3, 15, 16, 17, 31, 32, 33, 47, 64, 67, 100};
    int channels[20];
    int n_c = edge_sizes(channels, base, 12, nr);
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int i = 0; i < n_c; i++)
        for (int stride = 1; stride <= 3; stride++)
            for (int pad = 0; pad <= 2; pad++)
                for (size_t dtype = 2; dtype <= 4; dtype += 2) {
                    int c = channels[i];
                    cgt_shape s = {.n = 2,
                                   .h = 9 + stride,
                                   .w = 6 + pad,
                                   .cin = c,
                                   .cout = c,
                                   .kh = 3,
                                   .kw = 3,
                                   .g = c,
                                   .sh = stride,
                                   .sw = 3 - stride + 1,
                                   .pu = pad,
                                   .pd = 2 - pad,
                                   .pl = 1,
                                   .pr = pad};
                    check_dwconv_shape(fn, name, &s, dtype, (stride + pad) % 2, 0, &rng);
                }
    /* more output pixels than a kernel's tile, so sums rest and resume (the
     * 3x3 kernels then ask for the next tile's lines: stride 2, every
     * channel); for kernels of every size, also a 5x2 kernel, dilated and
     * strided, and channel multipliers 2 (dilated), 3 and 8 (strided) */
    const cgt_shape more[] = {
        {.n = 3,
         .h = 23,
         .w = 19,
         .cin = 40,
         .cout = 40,
         .kh = 3,
         .kw = 3,
         .g = 40,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1},
        {.n = 4,
         .h = 25,
         .w = 21,
         .cin = 80,
         .cout = 80,
         .kh = 3,
         .kw = 3,
         .g = 80,
         .sh = 2,
         .sw = 2,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1},
        {.n = 2,
         .h = 11,
         .w = 9,
         .cin = 19,
         .cout = 19,
         .kh = 5,
         .kw = 2,
         .g = 19,
         .dh = 2,
         .sw = 2,
         .pu = 2,
         .pd = 1,
         .pl = 1},
        {.n = 2,
         .h = 10,
         .w = 9,
         .cin = 13,
         .cout = 26,
         .kh = 3,
         .kw = 3,
         .g = 13,
         .dh = 2,
         .dw = 2,
         .pu = 2,
         .pd = 2,
         .pl = 2,
         .pr = 2},
        {.n = 2,
         .h = 9,
         .w = 8,
         .cin = 24,
         .cout = 72,
         .kh = 3,
         .kw = 2,
         .g = 24,
         .pu = 1,
         .pl = 1},
        {.n = 3,
         .h = 8,
         .w = 7,
         .cin = 5,
         .cout = 40,
         .kh = 3,
         .kw = 3,
         .g = 5,
         .sh = 2,
         .sw = 2,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1},
    };
    /* x 16 bytes past a line, as large malloc blocks and NumPy arrays are
     * (80 channels: every pixel alike on the lines) */
    check_dwconv_shape(fn, name, &more[1], 4, 0, 16, &rng);
    const int shapes = any_size ? (int)(sizeof more / sizeof *more) : 2;
    for (int i = 0; i < shapes; i++) {
        check_dwconv_shape(fn, name, &more[i], 4, i == 2, 0, &rng);
        check_dwconv_shape(fn, name, &more[i], 2, i == 0, 0, &rng);
    }
}

/* The two slots share the check; 3x3 kernels see 3x3 shapes only. */
#define check_dwconv_rows(fn, name, isa, mr, nr) check_dwconv(fn, name, nr, 1)
#define check_dwconv3x3_rows(fn, name, isa, mr, nr) check_dwconv(fn, name, nr, 0)

/* ---- grouped_rows ---------------------------------------------------- */

/* Groups of 1, 2, 3, 4 and 8 channels (of 4: an even and an odd number of
 * groups); kernels 3x3, 5x3 and 2x2, strided, dilated, padded on any side;
 * every group, or all but the first and last
 * (c_first past 0); a core's share of rows that starts and ends mid-image;
 * beta 0 (dst never read: NaN there must not come through) and 1; fp32 and
 * fp16. Small integers, so every order of the sum is exact: each element
 * must equal the oracle's sum of its own group's products, and the float
 * after the block stay untouched. */
static void check_grouped_rows(cg_grouped_rows_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr, (void)nr;
    /* clang-format off */
    static const struct { int g, groups; cgt_shape s; } cases[] = {
        {4, 6, {.n = 2, .h = 9, .w = 8, .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1}},
        /* an odd number of groups of 4: a last chunk of one group (AVX2) */
        {4, 5, {.n = 2, .h = 7, .w = 10, .kh = 3, .kw = 3, .dw = 2, .pu = 1, .pl = 2, .pr = 1}},
        {2, 11, {.n = 1, .h = 12, .w = 11, .kh = 5, .kw = 3, .sh = 2, .sw = 2, .dh = 2, .dw = 2,
                 .pu = 3, .pd = 1, .pl = 2}},
        {8, 3, {.n = 2, .h = 7, .w = 9, .kh = 3, .kw = 3, .pd = 2, .pr = 1}},
        {3, 5, {.n = 3, .h = 6, .w = 5, .kh = 2, .kw = 2, .sw = 2, .pl = 1}},
        {1, 9, {.n = 2, .h = 8, .w = 8, .kh = 3, .kw = 3, .dh = 2, .dw = 2, .pu = 2, .pd = 2,
                .pl = 2, .pr = 2}},
    };
    /* clang-format on */
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int dtype = 4; dtype >= 2; dtype -= 2)
            for (int part = 0; part < 2; part++)
                for (int beta = 0; beta < 2; beta++) {
                    cgt_shape sh = cases[i].s;
                    const int64_t g = cases[i].g;
                    sh.cin = sh.cout = (int)(g * cases[i].groups);
                    sh.g = cases[i].groups;
                    ConvParameter prm = cgt_param(&sh);
                    cg_plan p;
                    cr_assert_eq(cg_plan_make(&prm, (size_t)dtype, &p), CG_OK);
                    const size_t dy_n = ref_dy_elems(&prm), x_n = ref_x_elems(&prm);
                    float *dyf = malloc(dy_n * 4), *xf = malloc(x_n * 4);
                    uint16_t *dyh = malloc(dy_n * 2), *xh = malloc(x_n * 2);
                    for (size_t e = 0; e < dy_n; e++) {
                        dyf[e] = (float)cgt_rng_int(&rng, -3, 3);
                        dyh[e] = ref_float_to_half(dyf[e]);
                    }
                    for (size_t e = 0; e < x_n; e++) {
                        xf[e] = (float)cgt_rng_int(&rng, -3, 3);
                        xh[e] = ref_float_to_half(xf[e]);
                    }
                    const int64_t c_first = part ? g : 0, c_last = p.cin - (part ? g : 0);
                    const int64_t first = part ? p.rows / 3 : 0,
                                  last = part ? p.rows - p.rows / 4 : p.rows;
                    const int64_t out_n = (c_last - c_first) * p.row_len;
                    float *got = malloc(sizeof(float) * (size_t)(out_n + 1));
                    double *want = malloc(sizeof(double) * (size_t)out_n);
                    for (int64_t e = 0; e < out_n; e++) {
                        got[e] = beta ? (float)cgt_rng_int(&rng, -5, 5) : NAN;
                        want[e] = beta ? got[e] : 0.0;
                    }
                    got[out_n] = CANARY;
                    const int64_t plane = p.out_h * p.out_w;
                    for (int64_t row = first; row < last; row++)
                        for (int64_t kh = 0; kh < p.kernel_h; kh++)
                            for (int64_t kw = 0; kw < p.kernel_w; kw++) {
                                const int64_t b = row / plane, oh = row % plane / p.out_w,
                                              ow = row % p.out_w;
                                const int64_t iy = oh * p.stride_h + kh * p.dil_h - p.pad_u;
                                const int64_t ix = ow * p.stride_w + kw * p.dil_w - p.pad_l;
                                if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w)
                                    continue;
                                for (int64_t c = c_first; c < c_last; c += g)
                                    for (int64_t co = 0; co < g; co++)
                                        for (int64_t ci = 0; ci < g; ci++)
                                            want[(c - c_first + co) * p.row_len +
                                                 (kh * p.kernel_w + kw) * g + ci] +=
                                                (double)dyf[row * p.cout + c + co] *
                                                xf[((b * p.in_h + iy) * p.in_w + ix) * p.cin + c +
                                                   ci];
                            }
                    fn(&p, dtype == 4 ? (const void *)dyf : dyh, dtype == 4 ? (const void *)xf : xh,
                       c_first, c_last, first, last, beta ? 1.0f : 0.0f, got);
                    for (int64_t e = 0; e < out_n; e++)
                        cr_assert(got[e] == want[e],
                                  "%s: case %zu, fp%d, part %d, beta %d: element %lld is %g, "
                                  "want %g",
                                  name, i, dtype * 8, part, beta, (long long)e, got[e], want[e]);
                    cr_assert(memcmp(&got[out_n], &CANARY, sizeof CANARY) == 0,
                              "%s: case %zu wrote past the block", name, i);
                    free(dyf), free(xf), free(dyh), free(xh), free(got), free(want);
                }
}

/* ---- outer_rows ------------------------------------------------------ */

/* One case of check_outer_rows: dw of groups [g0, g1) over rows [first,
 * last) into got (beta 0: NaN there; 1: small integers), from dy and x
 * (fp32 values, their halves for fp16) of small integers (exact in every
 * order: got must equal the oracle) or, `exact` 0, random floats (got must
 * be the reference kernel's bits: one FMA a row, in row order). */
static void outer_case(cg_outer_rows_fn *fn, const char *name, const cgt_shape *sh, int dtype,
                       int part, int beta, int exact, cgt_rng *rng)
{
    ConvParameter prm = cgt_param(sh);
    cg_plan p;
    cr_assert_eq(cg_plan_make(&prm, (size_t)dtype, &p), CG_OK);
    const size_t dy_n = ref_dy_elems(&prm), x_n = ref_x_elems(&prm);
    float *dyf = malloc(dy_n * 4), *xf = malloc(x_n * 4);
    uint16_t *dyh = malloc(dy_n * 2), *xh = malloc(x_n * 2);
    for (size_t e = 0; e < dy_n + x_n; e++) {
        float *f = e < dy_n ? dyf + e : xf + (e - dy_n);
        *f = exact ? (float)cgt_rng_int(rng, -3, 3) : (float)cgt_rng_int(rng, -1000, 1000) / 97.0f;
        *f = ref_half_to_float(ref_float_to_half(*f)); /* the same values in both dtypes */
        (e < dy_n ? dyh + e : xh + (e - dy_n))[0] = ref_float_to_half(*f);
    }
    const int64_t g0 = part && p.groups > 1 ? 1 : 0, g1 = p.groups;
    const int64_t first = part ? p.rows / 3 : 0, last = part ? p.rows - p.rows / 4 : p.rows;
    const int64_t m = p.cout_g, out_n = (g1 - g0) * m * p.row_len;
    float *got = malloc(sizeof(float) * (size_t)(out_n + 1)),
          *ref = malloc(sizeof(float) * (size_t)out_n);
    double *want = malloc(sizeof(double) * (size_t)out_n);
    for (int64_t e = 0; e < out_n; e++) {
        got[e] = beta ? (float)cgt_rng_int(rng, -5, 5) : NAN;
        want[e] = beta ? got[e] : 0.0;
        ref[e] = got[e];
    }
    got[out_n] = CANARY;
    const int64_t plane = p.out_h * p.out_w;
    for (int64_t row = first; row < last; row++)
        for (int64_t j = 0; j < p.row_len; j++) {
            const int64_t kh = j / p.cin_g / p.kernel_w, kw = j / p.cin_g % p.kernel_w,
                          ci = j % p.cin_g;
            const int64_t b = row / plane, oh = row % plane / p.out_w, ow = row % p.out_w;
            const int64_t iy = oh * p.stride_h + kh * p.dil_h - p.pad_u;
            const int64_t ix = ow * p.stride_w + kw * p.dil_w - p.pad_l;
            if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w)
                continue;
            for (int64_t g = g0; g < g1; g++)
                for (int64_t co = 0; co < m; co++)
                    want[((g - g0) * m + co) * p.row_len + j] +=
                        (double)dyf[row * p.cout + g * m + co] *
                        xf[((b * p.in_h + iy) * p.in_w + ix) * p.cin + g * p.cin_g + ci];
        }
    const void *dy = dtype == 4 ? (const void *)dyf : dyh, *x = dtype == 4 ? (const void *)xf : xh;
    fn(&p, dy, x, g0, g1, first, last, beta ? 1.0f : 0.0f, got);
    cg_f32_outer_rows_ref(&p, dy, x, g0, g1, first, last, beta ? 1.0f : 0.0f, ref);
    for (int64_t e = 0; e < out_n; e++) {
        cr_assert(memcmp(&got[e], &ref[e], sizeof(float)) == 0,
                  "%s: cin %d cout %d k%dx%d, fp%d, part %d, beta %d: element %lld is %a, the "
                  "reference's %a",
                  name, sh->cin, sh->cout, sh->kh, sh->kw, dtype * 8, part, beta, (long long)e,
                  got[e], ref[e]);
        cr_assert(!exact || got[e] == want[e], "%s: cin %d cout %d: element %lld is %g, want %g",
                  name, sh->cin, sh->cout, (long long)e, got[e], want[e]);
        cr_assert(exact || fabs(got[e] - want[e]) <= 1e-4 * (1.0 + fabs(want[e])),
                  "%s: cin %d cout %d: element %lld is %g, want %g", name, sh->cin, sh->cout,
                  (long long)e, got[e], want[e]);
    }
    cr_assert(memcmp(&got[out_n], &CANARY, sizeof CANARY) == 0, "%s wrote past the block", name);
    free(dyf), free(xf), free(dyh), free(xh), free(got), free(ref), free(want);
}

/* Rows of 1 to 63 floats (1x1 to 7x7 kernels, 1 to 7 channels a group),
 * 1 to 64 channels out a group (under, at and past the vector widths; 64 x
 * 63 the most sums), one group or several (a sub-range of them), strides,
 * dilations, pads on every side (rows at the image borders), a share of the
 * rows starting and ending mid-image and longer than a chunk; beta 0 and 1,
 * fp32 and fp16. */
static void check_outer_rows(cg_outer_rows_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr, (void)nr;
    /* clang-format off */
    static const cgt_shape cases[] = {
        {.n = 2, .h = 9, .w = 8, .cin = 1, .cout = 16, .kh = 3, .kw = 3, .g = 1, .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 9, .w = 10, .cin = 3, .cout = 17, .kh = 3, .kw = 3, .g = 1, .sh = 2, .sw = 2, .pu = 1, .pl = 1, .pr = 2},
        {.n = 1, .h = 12, .w = 11, .cin = 1, .cout = 40, .kh = 7, .kw = 7, .g = 1, .pu = 3, .pd = 3, .pl = 3, .pr = 3},
        {.n = 2, .h = 10, .w = 9, .cin = 2, .cout = 5, .kh = 5, .kw = 5, .g = 1, .sw = 3, .dh = 2, .dw = 2, .pu = 4, .pd = 2, .pl = 4},
        {.n = 2, .h = 8, .w = 8, .cin = 7, .cout = 64, .kh = 3, .kw = 3, .g = 1, .pu = 1, .pd = 1, .pl = 1, .pr = 1},
        {.n = 2, .h = 7, .w = 9, .cin = 6, .cout = 66, .kh = 3, .kw = 3, .g = 3, .dw = 2, .pl = 2, .pr = 2},
        {.n = 3, .h = 5, .w = 6, .cin = 1, .cout = 1, .kh = 1, .kw = 1, .g = 1},
        {.n = 2, .h = 6, .w = 7, .cin = 4, .cout = 24, .kh = 2, .kw = 4, .g = 2, .sh = 2, .pd = 1, .pr = 3},
    };
    /* clang-format on */
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int dtype = 4; dtype >= 2; dtype -= 2)
            for (int part = 0; part < 2; part++)
                for (int beta = 0; beta < 2; beta++)
                    for (int exact = 0; exact < 2; exact++)
                        outer_case(fn, name, &cases[i], dtype, part, beta, exact, &rng);
}

/* ---- dwconv_pixel ------------------------------------------------------- */

/* Every channel count up to 4 tiles and a prime past them, taps missing
 * (padding), with and without a starting value, streamed or not (out
 * line-aligned: whole lines where n is a multiple of 16); small integers,
 * so every order of the sum is exact. */
static void check_dwconv_pixel(cg_dwconv_pixel_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr;
    enum { TAPS = 9, MOST = 4 * 48 + 7 };
    static float x[TAPS][MOST], w[TAPS * MOST], init[MOST], want[MOST + 1];
    static float got[MOST + 1] __attribute__((aligned(64)));
    cgt_rng r;
    cgt_rng_seed(&r, cgt_base_seed());
    for (int n = 1; n <= 4 * nr + 7 && n <= MOST; n++)
        for (int how = 0; how < 4; how++) {
            const int with_init = how & 1, stream = how >> 1;
            const float *rows[TAPS];
            for (int t = 0; t < TAPS; t++) {
                for (int c = 0; c < n; c++) {
                    x[t][c] = (float)cgt_rng_int(&r, -3, 3);
                    w[t * n + c] = (float)cgt_rng_int(&r, -3, 3);
                }
                rows[t] = cgt_rng_int(&r, 0, 3) ? x[t] : NULL;
            }
            for (int c = 0; c < n; c++) {
                init[c] = (float)cgt_rng_int(&r, -4, 4);
                want[c] = with_init ? init[c] : 0.0f;
                for (int t = 0; t < TAPS; t++)
                    want[c] += rows[t] ? x[t][c] * w[t * n + c] : 0.0f;
            }
            got[n] = want[n] = CANARY; /* nothing past n is written */
            fn(got, with_init ? init : NULL, rows, w, TAPS, n, stream);
            cg_stream_fence();
            cr_assert(memcmp(got, want, (size_t)(n + 1) * sizeof(float)) == 0,
                      "%s: %d channels, init %d, stream %d", name, n, with_init, stream);
        }
}

/* ---- dwconv_run --------------------------------------------------------- */

/* One run: kh_n kernel rows of kw taps, taps [kw0, kw1), `pixels` pixels, n
 * channels, walked forwards or backwards, pixels n or more floats apart,
 * kernel rows missing (outside) at random, with or without a starting
 * value. Each kernel row's source is a block of exactly the floats the run
 * reaches (a read past them is a sanitizer error); small integers, so every
 * order of the sum is exact. Whether the kernel's output differs from the
 * formula's, or it wrote past the run's pixels. */
static int dwconv_run_wrong(cg_dwconv_run_fn *fn, int n, int kh_n, int kw, int kw0, int kw1,
                            int pixels, int back, int with_init, cgt_rng *r)
{
    enum { KH = 3, MOST_N = 128, MOST = 33 * MOST_N + 1 };
    /* got line-aligned, so that a kernel may stream whole blocks into it */
    static float got[MOST] __attribute__((aligned(64))), want[MOST], init[MOST_N],
        w[KH * 5 * MOST_N];
    const int64_t spread = n % 3, pixel_step = n + spread, taps = kw1 - kw0;
    const int64_t tap_step = (back ? -1 : 1) * (n + 2 * spread);
    /* the floats a kernel row's run reaches, from its pointer */
    const int64_t lo = back && taps ? (taps - 1) * tap_step : 0;
    const int64_t hi = (pixels - 1) * pixel_step + n + (!back && taps ? (taps - 1) * tap_step : 0);
    cr_assert(kh_n <= KH && pixels * n < MOST && n <= MOST_N && kw <= 5);
    float *block[KH] = {NULL, NULL, NULL};
    const float *rows[KH] = {NULL, NULL, NULL};
    for (int kh = 0; kh < kh_n; kh++) {
        if (!cgt_rng_int(r, 0, 3))
            continue; /* outside */
        block[kh] = malloc(sizeof(float) * (size_t)(hi - lo));
        for (int64_t e = 0; e < hi - lo; e++)
            block[kh][e] = (float)cgt_rng_int(r, -3, 3);
        rows[kh] = block[kh] - lo;
    }
    for (int e = 0; e < kh_n * kw * n; e++)
        w[e] = (float)cgt_rng_int(r, -3, 3);
    for (int c = 0; c < n; c++)
        init[c] = (float)cgt_rng_int(r, -4, 4);
    for (int i = 0; i < pixels; i++)
        for (int c = 0; c < n; c++) {
            float sum = with_init ? init[c] : 0.0f;
            for (int kh = 0; kh < kh_n; kh++)
                for (int k = kw0; rows[kh] && k < kw1; k++) {
                    const float *x = rows[kh] + i * pixel_step + (k - kw0) * tap_step;
                    sum += x[c] * w[(kh * kw + k) * n + c];
                }
            want[i * n + c] = sum;
        }
    got[pixels * n] = want[pixels * n] = CANARY;
    /* half the runs ask for data ahead (here w's, which the kernel also
     * reads), and half may stream their output: results unchanged */
    cg_tile_prefetch ask;
    cg_range_prefetch_plan(&ask, w, w + kh_n * kw * n, pixels);
    const cg_dwconv_run run = {.rows = rows,
                               .kernel_h = kh_n,
                               .kernel_w = kw,
                               .kw0 = kw0,
                               .kw1 = kw1,
                               .pixel_step = pixel_step,
                               .tap_step = tap_step,
                               .ask = back ? &ask : NULL,
                               .stream = (pixels + kw0 + with_init) % 2};
    fn(got, with_init ? init : NULL, &run, w, pixels, n);
    for (int kh = 0; kh < kh_n; kh++)
        free(block[kh]);
    return memcmp(got, want, sizeof(float) * (size_t)(pixels * n + 1)) != 0;
}

/* Runs of 1 to 2 blocks of pixels and one more, channel counts up to 5
 * vectors and a few past (blocks of 4 vectors and a tail of 1 to 4),
 * and whole lines of them (16 to 64, and 128: where a run may stream, every
 * line is written whole), kernels of 1 and 3 rows and 1, 3 and 5 taps a row
 * with every tap range [kw0, kw1) (empty ones too). */
static void check_dwconv_run(cg_dwconv_run_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr;
    /* blocks of 2 to 8 pixels (fewer the more vectors a block takes), and of 4
     * to 16 pixels (AVX-512) or 12 (AVX2) where three taps are a pixel apart */
    const int widths[] = {1, 3, 5}, pixel_counts[] = {1, 7, 8, 9, 12, 16, 17, 25, 33};
    int channels[64], counts = 0;
    for (int n = 1; n <= 5 * nr + 5; n += n < nr + 2 ? 1 : 5)
        channels[counts++] = n;
    for (int n = 16; n <= 64; n += 16)
        channels[counts++] = n;
    channels[counts++] = 128;
    cgt_rng r;
    cgt_rng_seed(&r, cgt_base_seed());
    for (int ci = 0; ci < counts; ci++)
        for (int kh_n = 1; kh_n <= 3; kh_n += 2)
            for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
                for (int kw0 = 0; kw0 <= widths[wi]; kw0++)
                    for (int kw1 = kw0; kw1 <= widths[wi]; kw1++)
                        for (size_t pi = 0; pi < sizeof pixel_counts / sizeof *pixel_counts; pi++) {
                            const int n = channels[ci], pixels = pixel_counts[pi];
                            const int back = (n + kw0 + kw1 + (int)pi) % 2,
                                      with_init = (pixels + kw1) % 2;
                            cr_assert(!dwconv_run_wrong(fn, n, kh_n, widths[wi], kw0, kw1, pixels,
                                                        back, with_init, &r),
                                      "%s: %d channels, %d x %d kernel, taps [%d, %d), %d pixels, "
                                      "%s, init %d",
                                      name, n, kh_n, widths[wi], kw0, kw1, pixels,
                                      back ? "backwards" : "forwards", with_init);
                        }
}

/* ---- grouped_pixel -------------------------------------------------- */

/* Groups of 1, 2, 3, 4 and 8 channels, channel counts up to 3 tiles and
 * past them, 1 to CG_GROUPED_PIXELS pixels, taps missing (padding), with
 * and without a starting value; each row sits between infinities, so a read
 * of anything but the row's own channels shows as a non-finite sum, and a
 * partner from the wrong place as a wrong one. Small integers: every order
 * is exact. Nothing but the pixels' n channels is written. */
static void check_grouped_pixel(cg_grouped_pixel_fn *fn, const char *name, cg_isa isa, int mr,
                                int nr)
{
    (void)isa, (void)mr;
    enum { TAPS = 5, MOST = 3 * 16 + 8, PAD = 8 };
    enum { P = CG_GROUPED_PIXELS, LD = MOST + 3 };
    static float xbuf[P * TAPS][PAD + MOST + PAD], w[TAPS * CG_GROUPED_MOST * MOST], init[MOST],
        got[P * LD], want[P * LD];
    const int groups[] = {1, 2, 3, 4, 8};
    cgt_rng r;
    cgt_rng_seed(&r, cgt_base_seed());
    for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++) {
        const int g = groups[gi];
        for (int n = g; n <= 3 * nr + 8 && n <= MOST; n += g)
            for (int pixels = 1; pixels <= P; pixels += n % 3 == 0 ? 1 : 3)
                for (int with_init = 0; with_init < 2; with_init++) {
                    const float *rows[P * TAPS];
                    for (int q = 0; q < P * TAPS; q++) {
                        for (int c = 0; c < PAD + MOST + PAD; c++)
                            xbuf[q][c] = INFINITY;
                        for (int c = 0; c < n; c++)
                            xbuf[q][PAD + c] = (float)cgt_rng_int(&r, -3, 3);
                        rows[q] = cgt_rng_int(&r, 0, 3) ? xbuf[q] + PAD : NULL;
                    }
                    for (int e = 0; e < TAPS * g * n; e++)
                        w[e] = (float)cgt_rng_int(&r, -3, 3);
                    for (int c = 0; c < n; c++)
                        init[c] = (float)cgt_rng_int(&r, -4, 4);
                    for (int e = 0; e < P * LD; e++)
                        got[e] = want[e] = CANARY;
                    for (int i = 0; i < pixels; i++)
                        for (int c = 0; c < n; c++) {
                            float v = with_init ? init[c] : 0.0f;
                            for (int t = 0; t < TAPS; t++)
                                for (int j = 0; rows[i * TAPS + t] && j < g; j++)
                                    v += rows[i * TAPS + t][c - c % g + j] * w[(t * g + j) * n + c];
                            want[i * LD + c] = v;
                        }
                    fn(got, LD, with_init ? init : NULL, rows, w, TAPS, g, n, pixels);
                    cr_assert(memcmp(got, want, sizeof got) == 0,
                              "%s: G %d, %d channels, %d pixels, init %d", name, g, n, pixels,
                              with_init);
                }
    }
}

/* ---- f16_to_f32, f32_to_f16 --------------------------------------------- */

/* Every half, then every length up to 3 tiles from an odd offset (the
 * halves unaligned), the float after the last one untouched. */
static void check_f16_to_f32(cg_f16_to_f32_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr;
    static uint16_t halves[65536 + 1];
    static float got[65536 + 1];
    for (int i = 0; i < 65536; i++)
        halves[i] = (uint16_t)i;
    fn(got, halves, 65536);
    for (int i = 0; i < 65536; i++) {
        float want = ref_half_to_float((uint16_t)i);
        cr_assert(isnan(want) ? isnan(got[i]) : memcmp(&got[i], &want, 4) == 0,
                  "%s: half %#06x gives %a, want %a", name, i, got[i], want);
    }
    const unsigned char *odd = (const unsigned char *)halves + 1;
    for (int n = 0; n <= 3 * nr + 1; n++) {
        got[n] = CANARY;
        fn(got, odd, (size_t)n);
        for (int i = 0; i < n; i++) {
            float want = ref_half_to_float(ref_half_load(odd, (size_t)i));
            cr_assert(isnan(want) ? isnan(got[i]) : memcmp(&got[i], &want, 4) == 0,
                      "%s: n %d, value %d", name, n, i);
        }
        cr_assert(memcmp(&got[n], &CANARY, 4) == 0, "%s: n %d wrote past the end", name, n);
    }
}

/* The i-th float of a deterministic spread: exponents around half's range
 * (where rounding happens), one in 16 anywhere (inf, nan, huge, tiny), one
 * in 8 exactly halfway between two halves, both signs. */
static float spread_float(uint32_t i)
{
    const uint32_t mix = i * 2654435761u;
    const uint32_t exponent = i % 16 == 0 ? mix >> 24 : 98 + (mix >> 8) % 47;
    uint32_t mantissa = (mix ^ (mix >> 13)) & 0x7fffffu;
    if (i % 8 == 1)
        mantissa = (mantissa & 0x7fe000u) | 0x1000u;
    const uint32_t bits = (i & 1u) << 31 | exponent << 23 | mantissa;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* 2^20 floats of the spread, then every length up to 3 tiles into an odd
 * address, the half after them untouched. */
static void check_f32_to_f16(cg_f32_to_f16_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr;
    enum { N = 1 << 16, ROUNDS = 16 };
    static float f[N];
    static unsigned char got[2 * N + 3];
    for (int round = 0; round < ROUNDS + 3 * nr + 2; round++) {
        const int n = round < ROUNDS ? N : round - ROUNDS;
        for (int i = 0; i < n; i++)
            f[i] = spread_float((uint32_t)(round * N + i));
        ref_half_store(got + 1, (size_t)n, 0xdead);
        fn(got + 1, f, (size_t)n);
        for (int i = 0; i < n; i++) {
            uint16_t h = ref_half_load(got + 1, (size_t)i), want = ref_float_to_half(f[i]);
            cr_assert(isnan(f[i]) ? (h & 0x7fff) > 0x7c00 : h == want,
                      "%s: float %a gives %#06x, want %#06x", name, f[i], h, want);
        }
        cr_assert_eq(ref_half_load(got + 1, (size_t)n), 0xdead, "%s: n %d wrote past the end", name,
                     n);
    }
}

/* ---- transpose ------------------------------------------------------------ */

/* Every element where it belongs, on every shape around the 8 x 8 blocks,
 * strides wider than the matrices, and nothing else of dst written. */
static void check_transpose(cg_transpose_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr, (void)nr;
    /* columns past a kernel's blocks of them too (the AVX2 one's 32) */
    static const int wide[] = {31, 32, 33, 47, 64, 71};
    const int n_cols = 20 + (int)(sizeof wide / sizeof wide[0]);
    for (int rows = 0; rows <= 19; rows++)
        for (int c = 0; c < n_cols; c++) {
            const int cols = c < 20 ? c : wide[c - 20];
            const int ld_src = cols + 2, ld_dst = rows + 3;
            float *src = malloc(sizeof(float) * (size_t)(rows * ld_src + 1));
            float *dst = malloc(sizeof(float) * (size_t)(cols * ld_dst + 1));
            for (int i = 0; i < rows * ld_src + 1; i++)
                src[i] = (float)i;
            for (int i = 0; i < cols * ld_dst + 1; i++)
                dst[i] = CANARY;
            fn(dst, ld_dst, src, ld_src, rows, cols);
            for (int j = 0; j < cols; j++)
                for (int i = 0; i < ld_dst && j * ld_dst + i < cols * ld_dst + 1; i++) {
                    const float want = i < rows ? src[i * ld_src + j] : CANARY;
                    cr_assert(dst[j * ld_dst + i] == want, "%s %dx%d: dst[%d][%d] is %g, want %g",
                              name, rows, cols, j, i, dst[j * ld_dst + i], want);
                }
            free(src);
            free(dst);
        }
}

/* ---- sum_rows --------------------------------------------------------------- */

/* Exactly the reference's bits (each column one chain of double adds in row
 * order): rows of 0 to 9, columns of 1 to 40 (below, at and past every
 * vector and block width), a stride wider than the columns; the sums start
 * from values of their own, and nothing past column n is written. */
static void check_sum_rows(cg_sum_rows_fn *fn, const char *name, cg_isa isa, int mr, int nr)
{
    (void)isa, (void)mr, (void)nr;
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int n = 1; n <= 40; n++)
        for (int rows = 0; rows <= 9; rows++) {
            const int ld = n + 3;
            float *src = malloc(sizeof(float) * (size_t)(rows * ld + 1));
            double got[41], want[41];
            for (int i = 0; i < rows * ld + 1; i++)
                src[i] = (i % ld) < n ? (float)(cgt_rng_sym(&rng) * 1e3) : NAN;
            for (int k = 0; k <= n; k++)
                got[k] = want[k] = k < n ? cgt_rng_sym(&rng) : -1.5;
            fn(got, src, ld, rows, n);
            cg_f32_sum_rows_ref(want, src, ld, rows, n);
            cr_assert(memcmp(got, want, sizeof(double) * (size_t)(n + 1)) == 0,
                      "%s n %d rows %d: not the reference's bits", name, n, rows);
            free(src);
        }
}

/* ---- one test per line of the list -------------------------------------- */

#define CG_KERNEL(slot, name, isa, features, mr, nr)                                               \
    Test(kernel_list, name)                                                                        \
    {                                                                                              \
        if (!cg_cpu_has(features))                                                                 \
            cr_skip_test("%s: this CPU lacks its features", #name);                                \
        check_##slot(name, #name, CG_ISA_##isa, mr, nr);                                           \
    }
#include "kernels/kernels.inc"
