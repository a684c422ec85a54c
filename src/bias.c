/* SPDX-License-Identifier: MIT */
#include "bias.h"

#include "kernels.h"

/* Blocks of channels are whole cache lines of db. */
enum { LINE_FLOATS = 16, LINE_DOUBLES = 8 };

/* A chunk of rows (16 KiB) stays in L1 while each block of channels is
 * summed over it in registers. */
enum { CHUNK_BYTES = 16 << 10 };

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t cg_bias_slices(const cg_plan *p, int members)
{
    return cg_slices_on(cg_sum_slices(p), members);
}

int64_t cg_bias_slice_doubles(const cg_plan *p)
{
    return (p->cout + LINE_DOUBLES - 1) / LINE_DOUBLES * LINE_DOUBLES;
}

/* sum[c - c0] += dy[row][c] over rows [first, last), channels [c0, c1). */
static void add_rows(const cg_plan *p, const float *dy, int64_t first, int64_t last, int64_t c0,
                     int64_t c1, double *sum)
{
    cg_sum_rows_fn *sum_rows = cg_kernels()->sum_rows;
    const int64_t chunk = CHUNK_BYTES / (p->cout * (int64_t)sizeof(float));
    const int64_t step = chunk > 0 ? chunk : 1;
    for (int64_t r0 = first; r0 < last; r0 += step)
        sum_rows(sum, dy + r0 * p->cout + c0, p->cout, min64(last, r0 + step) - r0, c1 - c0);
}

void cg_bias_slice(const cg_plan *p, const float *dy, int64_t first, int64_t last, double *sum)
{
    for (int64_t c = 0; c < p->cout; c++)
        sum[c] = 0.0;
    add_rows(p, dy, first, last, 0, p->cout, sum);
}

/* Core `rank`'s channels [*c0, *c1): whole blocks of LINE_FLOATS. */
static void channel_share(const cg_plan *p, int rank, int members, int64_t *c0, int64_t *c1)
{
    int64_t b0, b1;
    cg_split_range((p->cout + LINE_FLOATS - 1) / LINE_FLOATS, rank, members, &b0, &b1);
    *c0 = b0 * LINE_FLOATS;
    *c1 = min64(p->cout, b1 * LINE_FLOATS);
}

void cg_bias_channels(const cg_plan *p, const float *dy, int rank, int members, float *db)
{
    int64_t c0, c1;
    channel_share(p, rank, members, &c0, &c1);
    for (int64_t b = c0; b < c1; b += LINE_FLOATS) {
        const int64_t n = min64(LINE_FLOATS, c1 - b);
        double sum[LINE_FLOATS] = {0};
        add_rows(p, dy, 0, p->rows, b, b + n, sum);
        for (int64_t k = 0; k < n; k++)
            db[b + k] = (float)sum[k];
    }
}

void cg_bias_reduce(const cg_plan *p, const double *const *sums, int64_t slices, int rank,
                    int members, float *db)
{
    int64_t c0, c1;
    channel_share(p, rank, members, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        double total = 0.0;
        for (int64_t i = 0; i < slices; i++)
            total += sums[i][c];
        db[c] = (float)total;
    }
}
