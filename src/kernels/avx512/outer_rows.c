/* SPDX-License-Identifier: MIT */
/* The outer-product weight gradient of small dw rows on AVX-512
 * (kernels/outer_rows_body.h): a tile is up to 4 vectors of 16 channels by
 * up to 30 columns, its sums in registers; a row costs a load of dy a
 * vector and a broadcast FMA a column and vector. */
#include <immintrin.h>

#include "kernels/list.h"
#include "kernels/outer_rows_body.h"

#define CG_OUTER_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

typedef __m512 cg_vec;
typedef __mmask16 cg_tail;
enum { CG_LANES = 16, REGS = 32 };

static inline CG_OUTER_TARGET cg_tail tail_of(int64_t n)
{
    return n >= CG_LANES ? (cg_tail)0xffff : (cg_tail)((1u << n) - 1u);
}
#define vec_load(p) _mm512_loadu_ps(p)
#define vec_load_tail(p, t) _mm512_maskz_loadu_ps(t, p)
#define vec_store(p, v) _mm512_storeu_ps(p, v)
#define vec_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vec_broadcast(p) _mm512_set1_ps(*(p))
#define CG_OUTER_UP_TO_1 CG_UP_TO_30
#define CG_OUTER_UP_TO_2 CG_UP_TO_14
#define CG_OUTER_UP_TO_3 CG_UP_TO_9
#define CG_OUTER_UP_TO_4 CG_UP_TO_6
#include "kernels/outer_rows_tile.h"

/* A run of a column: 16 floats a masked move. */
static inline CG_OUTER_TARGET void copy_floats(float *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i += CG_LANES)
        _mm512_mask_storeu_ps(dst + i, tail_of(n - i),
                              _mm512_maskz_loadu_ps(tail_of(n - i), src + i));
}

CG_OUTER_TARGET void cg_f32_outer_rows_avx512(const cg_plan *plan, const void *dy, const void *x,
                                              int64_t g_first, int64_t g_last, int64_t first,
                                              int64_t last, float beta, float *dst)
{
    cg_outer_rows_body(outer_tile, copy_floats, CG_LANES, REGS, 4, plan, dy, x, g_first, g_last,
                       first, last, beta, dst);
}
