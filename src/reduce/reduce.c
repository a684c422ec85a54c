/* SPDX-License-Identifier: MIT */
#include "reduce/reduce.h"

void cg_reduce_partials(float *sum, const float *const *parts, int nparts, size_t begin,
                        size_t end)
{
    size_t len = end - begin;
    const float *first = parts[0] + begin;
    for (size_t i = 0; i < len; i++)
        sum[i] = first[i];
    for (int p = 1; p < nparts; p++) {
        const float *part = parts[p] + begin;
        for (size_t i = 0; i < len; i++)
            sum[i] += part[i];
    }
}

void cg_reduce_slice(size_t n, size_t unit, int rank, int members, size_t *begin, size_t *end)
{
    size_t units = (n + unit - 1) / unit;
    size_t base = units / (size_t)members, extra = units % (size_t)members;
    size_t r = (size_t)rank;
    size_t first = r * base + (r < extra ? r : extra);
    size_t count = base + (r < extra ? 1 : 0);
    size_t b = first * unit, e = (first + count) * unit;
    *begin = b < n ? b : n;
    *end = e < n ? e : n;
}
