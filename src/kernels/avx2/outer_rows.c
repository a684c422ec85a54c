/* SPDX-License-Identifier: MIT */
/* The outer-product weight gradient of small dw rows on AVX2 + FMA
 * (kernels/outer_rows_body.h): a tile is up to 4 vectors of 8 channels by
 * up to 14 columns, its sums in registers. */
#include <immintrin.h>

#include "kernels/list.h"
#include "kernels/outer_rows_body.h"

#define CG_OUTER_TARGET __attribute__((target("avx2,fma,f16c")))

typedef __m256 cg_vec;
typedef __m256i cg_tail;
enum { CG_LANES = 8, REGS = 16 };

static inline CG_OUTER_TARGET cg_tail tail_of(int64_t n)
{
    const int k = n >= CG_LANES ? CG_LANES : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_load_tail(p, t) _mm256_maskload_ps(p, t)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm256_broadcast_ss(p)
#define CG_OUTER_UP_TO_1 CG_UP_TO_14
#define CG_OUTER_UP_TO_2 CG_UP_TO_6
#define CG_OUTER_UP_TO_3 CG_UP_TO_4
#define CG_OUTER_UP_TO_4 CG_UP_TO_2
#include "kernels/outer_rows_tile.h"

/* A run of a column: 8 floats a masked move. */
static inline CG_OUTER_TARGET void copy_floats(float *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i += CG_LANES)
        _mm256_maskstore_ps(dst + i, tail_of(n - i), _mm256_maskload_ps(src + i, tail_of(n - i)));
}

CG_OUTER_TARGET void cg_f32_outer_rows_avx2(const cg_plan *plan, const void *dy, const void *x,
                                            int64_t g_first, int64_t g_last, int64_t first,
                                            int64_t last, float beta, float *dst)
{
    cg_outer_rows_body(outer_tile, copy_floats, CG_LANES, REGS, 4, plan, dy, x, g_first, g_last,
                       first, last, beta, dst);
}
