/* SPDX-License-Identifier: MIT */
/* cg_gemm and its packed driver, all four op(A)/op(B), against a plain double
 * reference on the edges of the register tile and of the cache blocks (m, n
 * and k below, equal to, above and multiples of mr, nr, kc, mc and nc, and
 * primes), leading dimensions wider than the matrices, beta 0 and 1. Data
 * are small dyadic values, whose fp32 sums are exact in any order: results
 * must equal the reference bit for bit. A and B end at a guard page (a read
 * past them faults); C's neighbours, in each row past n and around the
 * whole, must stay as they were. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm/gemm.h"
#include "kernels/context.h"
#include "support.h"

static const float CANARY = -12345.0f;

typedef struct product {
    int trans_a, trans_b, m, n, k;
    float beta;
} product;

/* Floats from a matrix's first element to its last (1 if it has none). */
static size_t span(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? (size_t)(rows - 1) * ld + cols : 1;
}

/* C's elements that differ from the reference, canaries included, or -1 if
 * anything outside the matrices was touched. bl NULL: cg_gemm itself. */
static long check_product(const cg_gemm_blocking *bl, float *pack, product q, cgt_rng *rng)
{
    const int rows_a = q.trans_a ? q.k : q.m, cols_a = q.trans_a ? q.m : q.k;
    const int rows_b = q.trans_b ? q.n : q.k, cols_b = q.trans_b ? q.k : q.n;
    const int lda = cols_a + 3, ldb = cols_b + 5, ldc = q.n + 7;
    cgt_buf ba, bb, bc;
    /* the last row ends at the guard page: no padding after it */
    cgt_buf_alloc(&ba, sizeof(float) * span(rows_a, cols_a, lda), 0, CGT_AT_END);
    cgt_buf_alloc(&bb, sizeof(float) * span(rows_b, cols_b, ldb), 0, CGT_AT_END);
    cgt_buf_alloc(&bc, sizeof(float) * (size_t)q.m * ldc, 64, CGT_AT_START);
    float *a = (float *)ba.ptr, *b = (float *)bb.ptr, *c = (float *)bc.ptr;
    cgt_fill_dyadic_f32(rng, a, ba.n / sizeof(float), 2);
    cgt_fill_dyadic_f32(rng, b, bb.n / sizeof(float), 2);
    cgt_fill_dyadic_f32(rng, c, (size_t)q.m * ldc, 2);
    for (int i = 0; i < q.m; i++)
        for (int j = q.n; j < ldc; j++)
            c[(size_t)i * ldc + j] = CANARY;
    float *want = malloc(sizeof(float) * (size_t)q.m * ldc);
    for (int i = 0; i < q.m; i++)
        for (int j = 0; j < ldc; j++) {
            double sum = 0.0;
            for (int p = 0; j < q.n && p < q.k; p++)
                sum += (double)(q.trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                       (q.trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            const float old = c[(size_t)i * ldc + j];
            want[(size_t)i * ldc + j] = j >= q.n ? old : (float)(sum + q.beta * old);
        }
    if (bl)
        cg_gemm_packed(bl, q.trans_a, q.trans_b, q.m, q.n, q.k, a, lda, b, ldb, q.beta, c, ldc,
                       pack);
    else
        cg_gemm(q.trans_a, q.trans_b, q.m, q.n, q.k, a, lda, b, ldb, q.beta, c, ldc);
    long bad = 0;
    for (size_t e = 0; e < (size_t)q.m * ldc; e++)
        bad += c[e] != want[e];
    if (cgt_buf_canary_damage(&bc) != -1)
        bad = -1;
    free(want);
    cgt_buf_free(&ba);
    cgt_buf_free(&bb);
    cgt_buf_free(&bc);
    return bad;
}

/* Every transpose and beta of m x n x k. */
static void check_shape(const char *what, const cg_gemm_blocking *bl, float *pack, int m, int n,
                        int k, cgt_rng *rng)
{
    for (int t = 0; t < 4; t++)
        for (int beta = 0; beta < 2; beta++) {
            product q = {t & 1, t >> 1, m, n, k, (float)beta};
            long bad = check_product(bl, pack, q, rng);
            cr_assert_eq(bad, 0, "%s: trans_a %d trans_b %d m %d n %d k %d beta %d: %ld wrong",
                         what, q.trans_a, q.trans_b, m, n, k, beta, bad);
        }
}

/* A tile and block edge list around unit u: below, at, above, a multiple. */
static int edges(int u, int *out)
{
    int n = 0;
    if (u > 1)
        out[n++] = u - 1;
    out[n++] = u;
    out[n++] = u + 1;
    out[n++] = 2 * u;
    return n;
}

/* Each kernel this CPU runs, on blocks small enough that small matrices
 * cross every block edge: kc 16, mc two tiles, nc two tiles. */
Test(packed_gemm, every_kernel_on_tile_and_block_edges)
{
    cg_gemm_blocking kernels[8];
    int nk = 0, count;
    const cg_kernel_entry *list = cg_kernel_list(&count);
    for (int e = 0; e < count && nk < 8; e++) {
        const cg_kernel_entry *x = &list[e];
        if (strcmp(x->slot, "gemm_panel") != 0 || !cg_cpu_has(x->features))
            continue; /* the packed kernels this CPU runs */
        kernels[nk++] = (cg_gemm_blocking){.kernel = (cg_gemm_panel_fn *)x->fn,
                                           .name = x->name,
                                           .mr = x->mr,
                                           .nr = x->nr,
                                           .kc = 16,
                                           .mc = 2 * x->mr,
                                           .nc = 2 * x->nr};
    }
    if (nk == 0)
        cr_log_info("packed gemm: this CPU runs none of the library's kernels");
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int q = 0; q < nk; q++) {
        const cg_gemm_blocking *bl = &kernels[q];
        float *pack = malloc(sizeof(float) * cg_gemm_pack_floats(bl));
        int ms[16], ns[16], ks[16], nm = 0, nn = 0, nkk = 0;
        nm += edges(bl->mr, ms + nm);
        nm += edges(bl->mc, ms + nm);
        ms[nm++] = 37;
        nn += edges(bl->nr, ns + nn);
        nn += edges(bl->nc, ns + nn);
        ns[nn++] = 3;
        ns[nn++] = 101;
        nkk += edges(bl->kc, ks + nkk);
        ks[nkk++] = 1;
        ks[nkk++] = 53;
        for (int i = 0; i < nm; i++)
            for (int j = 0; j < nn; j++)
                for (int p = 0; p < nkk; p++)
                    check_shape(bl->name, bl, pack, ms[i], ns[j], ks[p], &rng);
        free(pack);
    }
}

/* cg_gemm as the operator calls it, on this CPU's own blocks (whichever
 * path it took: the packed driver or OpenBLAS). */
Test(packed_gemm, cg_gemm_on_this_cpus_block_edges)
{
    const cg_gemm_blocking *bl = cg_gemm_blocking_here();
    cg_gemm_blocking nominal = {
        .name = "none", .mr = 8, .nr = 48, .kc = 128, .mc = 256, .nc = 480, .vec = 16};
    if (!bl)
        bl = &nominal;
    cr_log_info("cg_gemm: %s (kernel %s, mr %d nr %d kc %d mc %d nc %d)",
                cg_gemm_uses_packed() ? "packed" : "OpenBLAS", bl->name, bl->mr, bl->nr, bl->kc,
                bl->mc, bl->nc);
    const int shapes[][3] = {
        {1, 1, 1},
        {bl->mr + 1, bl->nr + 1, bl->kc + 1},
        {bl->mc + 1, 2 * bl->nr + 3, 131},
        {13, bl->nc + 1, 2 * bl->kc + 5},
        {bl->mc, bl->nc, bl->kc},
        {2 * bl->mc + 7, 53, 257},
        {5, 7, 0}, /* no sum: C = beta*C */
    };
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed() + 1);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        check_shape("cg_gemm", NULL, NULL, shapes[s][0], shapes[s][1], shapes[s][2], &rng);
}

Test(packed_gemm, beta_zero_never_reads_c)
{
    enum { M = 19, N = 50, K = 131 };
    static float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = 1.0f;
    for (int i = 0; i < K * N; i++)
        b[i] = 2.0f;
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < M * N; i++)
            c[i] = NAN;
        const int trans_a = t & 1, trans_b = t >> 1;
        cg_gemm(trans_a, trans_b, M, N, K, a, trans_a ? M : K, b, trans_b ? K : N, 0.0f, c, N);
        for (int i = 0; i < M * N; i++)
            cr_assert_eq(c[i], 2.0f * K, "trans_a %d trans_b %d: c[%d] = %g", trans_a, trans_b, i,
                         c[i]);
    }
}

/* B's micro-panels (cg_rows_panel) for n columns in `parts` shares, on each
 * kernel's tile widths: they cover [0, n) once, in order, each at most nr
 * columns and whole vectors but at n's end; each share's panels are
 * cg_rows_share's, and the shares' columns differ by at most one vector
 * (512 columns on 48-column panels in 2 shares: 256 + 256). */
Test(packed_gemm, micro_panels_share_the_columns_evenly)
{
    const int widths[][2] = {{16, 16}, {16, 8}, {48, 16}}; /* nr, vector */
    for (size_t t = 0; t < sizeof widths / sizeof *widths; t++) {
        const cg_gemm_blocking bl = {.mr = 8, .nr = widths[t][0], .vec = widths[t][1]};
        for (int64_t n = 1; n <= 600; n += n < 100 ? 1 : 37)
            for (int parts = 1; parts <= 4 && parts <= (n + bl.vec - 1) / bl.vec; parts++) {
                int64_t at = 0, most = 0, least = n;
                for (int part = 0; part < parts; part++) {
                    int64_t q0, q1, start = at;
                    cg_rows_share(&bl, n, parts, part, &q0, &q1);
                    cr_assert(q1 > q0, "n %ld parts %d: share %d has no panel", (long)n, parts,
                              part);
                    for (int64_t q = q0; q < q1; q++) {
                        int64_t first, width;
                        cg_rows_panel(&bl, n, parts, q, &first, &width);
                        cr_assert(first == at && width > 0 && width <= bl.nr &&
                                      (width % bl.vec == 0 || first + width == n),
                                  "nr %d: n %ld parts %d: panel %ld is [%ld, +%ld), at %ld", bl.nr,
                                  (long)n, parts, (long)q, (long)first, (long)width, (long)at);
                        at += width;
                    }
                    most = at - start > most ? at - start : most;
                    least = at - start < least ? at - start : least;
                    if (part == parts - 1)
                        cr_assert_eq(q1, cg_rows_panels(&bl, n, parts));
                }
                cr_assert(at == n && most - least <= bl.vec,
                          "nr %d: n %ld parts %d: %ld columns, shares %ld to %ld", bl.nr, (long)n,
                          parts, (long)at, (long)least, (long)most);
            }
    }
    const cg_gemm_blocking wide = {.mr = 8, .nr = 48, .vec = 16};
    int64_t q0, q1, first, width, last_first, last_width;
    cg_rows_share(&wide, 512, 2, 0, &q0, &q1);
    cg_rows_panel(&wide, 512, 2, q1 - 1, &last_first, &last_width);
    cg_rows_panel(&wide, 512, 2, q0, &first, &width);
    cr_assert_eq(last_first + last_width - first, 256);
}
