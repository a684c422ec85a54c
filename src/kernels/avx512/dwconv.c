/* SPDX-License-Identifier: MIT */
/* Depthwise on AVX-512. The weight gradient's 3x3: the nine per-tap sums of
 * 32 channels stay in registers across a tile of output pixels, so each
 * pixel costs two loads of dy, up to eighteen of x and eighteen FMAs (at
 * stride 1, four interior pixels of a row go at once: nine loads of x a
 * pixel; fp16 mbv1_dw_112 1.58-1.70x, mbv1_dw_56 1.15-1.22x, fp32 1.0-1.2x,
 * stride 2, which keeps one pixel at a time, 0.97-0.99x); between
 * tiles they rest in the caller's accumulator block, and the next tile's x
 * and dy are asked for meanwhile (kernels/tile_prefetch.h; not on Intel
 * CPUs). fp16 tensors are converted as they are loaded. The training step's
 * runs of a row: eight or sixteen sums in registers over up to four vectors
 * of channels, each weight loaded once for the block's pixels; its
 * single pixels (an input gradient of a stride over 1): one register of sums
 * per sixteen channels over every tap. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/context.h"
#include "kernels/dwconv_rows_body.h"
#include "kernels/grouped_rows_body.h"
#include "kernels/list.h"
#include "kernels/tile_prefetch.h"

enum { TAPS = 9, VECS = 2, LANES = 16, PREFETCH_PIXELS = 8, QUAD = 4 };

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512
load_lanes(const void *tensor, int64_t index, __mmask16 mask, const int half)
{
    if (half)
        return _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(mask, (const unsigned char *)tensor + 2 * index));
    return _mm512_maskz_loadu_ps(mask, (const float *)tensor + index);
}

/* load_lanes of fp16 where every lane is wanted (`whole`): the conversion
 * reads memory itself, where a masked load and a conversion were two
 * instructions, twenty a pixel in the 3x3 weight gradient. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512
load_half_lanes(const void *tensor, int64_t index, __mmask16 mask, const int whole)
{
    if (whole)
        return _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)((const unsigned char *)tensor + 2 * index)));
    return load_lanes(tensor, index, mask, 1);
}

/* fp32 (half 0), or fp16 of all 32 channels (whole) or not */
#define LOAD_LANES(tensor, index, mask)                                                            \
    (half ? load_half_lanes(tensor, index, mask, whole) : load_lanes(tensor, index, mask, 0))

/* The accumulators are named variables, not an array, so that they stay in
 * registers whatever the compiler makes of the loops. */
#define ACC_DECLARE(t)                                                                             \
    __m512 acc##t##_0 = _mm512_setzero_ps(), acc##t##_1 = _mm512_setzero_ps();                     \
    if (resume) {                                                                                  \
        acc##t##_0 = _mm512_maskz_loadu_ps(mask0, saved + (t)*channels);                           \
        acc##t##_1 = _mm512_maskz_loadu_ps(mask1, saved + (t)*channels + LANES);                   \
    }
#define ACC_TAP(t, kh, kw)                                                                         \
    if (row_ok[kh] && col_ok[kw]) {                                                                \
        const int64_t at = corner + ((kh)*p->in_w + (kw)) * p->cin;                                \
        acc##t##_0 = _mm512_fmadd_ps(d0, LOAD_LANES(x, at, mask0), acc##t##_0);                    \
        acc##t##_1 = _mm512_fmadd_ps(d1, LOAD_LANES(x, at + LANES, mask1), acc##t##_1);            \
    }
/* QUAD pixels of an output row at once (stride 1, every tap's column
 * inside): kernel row kh's QUAD + 2 source pixels loaded once each, where
 * one at a time loads each three times; each sum still takes its pixels in
 * order (the same bits). */
#define QUAD_ROW(kh, t0, t1, t2)                                                                   \
    if (row_ok[kh]) {                                                                              \
        const int64_t base = corner + (kh)*p->in_w * p->cin;                                       \
        _Pragma("GCC unroll 6") for (int j = 0; j < QUAD + 2; j++)                                 \
        {                                                                                          \
            const __m512 x0 = LOAD_LANES(x, base + j * p->cin, mask0);                             \
            const __m512 x1 = LOAD_LANES(x, base + j * p->cin + LANES, mask1);                     \
            if (j < QUAD) {                                                                        \
                acc##t0##_0 = _mm512_fmadd_ps(dq0[j], x0, acc##t0##_0);                            \
                acc##t0##_1 = _mm512_fmadd_ps(dq1[j], x1, acc##t0##_1);                            \
            }                                                                                      \
            if (j >= 1 && j <= QUAD) {                                                             \
                acc##t1##_0 = _mm512_fmadd_ps(dq0[j - 1], x0, acc##t1##_0);                        \
                acc##t1##_1 = _mm512_fmadd_ps(dq1[j - 1], x1, acc##t1##_1);                        \
            }                                                                                      \
            if (j >= 2) {                                                                          \
                acc##t2##_0 = _mm512_fmadd_ps(dq0[j - 2], x0, acc##t2##_0);                        \
                acc##t2##_1 = _mm512_fmadd_ps(dq1[j - 2], x1, acc##t2##_1);                        \
            }                                                                                      \
        }                                                                                          \
    }
#define ACC_STORE(t)                                                                               \
    _mm512_mask_storeu_ps(saved + (t)*channels, mask0, acc##t##_0);                                \
    _mm512_mask_storeu_ps(saved + (t)*channels + LANES, mask1, acc##t##_1)

static __mmask16 lanes_mask(int64_t lanes)
{
    lanes = lanes < 0 ? 0 : lanes > LANES ? LANES : lanes;
    return (__mmask16)((1u << lanes) - 1u);
}

/* The sums of rows [first, last) for 32 channels from c_first (fewer at the
 * end), added to those in saved[tap][channel] when resume, else from zero,
 * and left there; a step of `next`, if any, at each row. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline
    __attribute__((always_inline)) void
    block32(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t channels,
            int64_t first, int64_t last, float *saved, int resume, const int half, const int whole,
            const int stride1, cg_tile_prefetch *next)
{
    const __mmask16 mask0 = lanes_mask(channels), mask1 = lanes_mask(channels - LANES);
    ACC_DECLARE(0);
    ACC_DECLARE(1);
    ACC_DECLARE(2);
    ACC_DECLARE(3);
    ACC_DECLARE(4);
    ACC_DECLARE(5);
    ACC_DECLARE(6);
    ACC_DECLARE(7);
    ACC_DECLARE(8);
    const int64_t per_image = p->out_h * p->out_w;
    const size_t elem = half ? 2 : 4;
    int64_t n = first / per_image, oh = first % per_image / p->out_w, ow = first % p->out_w;
    for (int64_t row = first; row < last;) {
        const int64_t iy0 = oh * p->stride_h - p->pad_u, ix0 = ow * p->stride_w - p->pad_l;
        const int64_t at_dy = row * p->cout + c_first;
        /* one pixel's dy (unused where QUAD pixels go at once) */
        const __m512 d0 = LOAD_LANES(dy, at_dy, mask0);
        const __m512 d1 = LOAD_LANES(dy, at_dy + LANES, mask1);
        int row_ok[3], col_ok[3];
        for (int k = 0; k < 3; k++) {
            row_ok[k] = (uint64_t)(iy0 + k) < (uint64_t)p->in_h;
            col_ok[k] = (uint64_t)(ix0 + k) < (uint64_t)p->in_w;
        }
        /* x element of tap (0, 0), possibly outside: only valid taps read */
        const int64_t corner = ((n * p->in_h + iy0) * p->in_w + ix0) * p->cin + c_first;
        const int quad = stride1 && row + QUAD <= last && ow + QUAD <= p->out_w && ix0 >= 0 &&
                         ix0 + QUAD + 1 < p->in_w;
        for (int i = 0; i < (quad ? QUAD : 1); i++) {
            /* strided rows defeat the hardware prefetcher: ask for dy a
             * few pixels ahead, and for x the bottom-right tap of that
             * pixel */
            const int64_t dy_ahead = at_dy + (PREFETCH_PIXELS + i) * p->cout;
            _mm_prefetch((const char *)dy + dy_ahead * elem, _MM_HINT_T0);
            _mm_prefetch((const char *)dy + (dy_ahead + LANES) * elem, _MM_HINT_T0);
            const int64_t ahead =
                corner + (2 * p->in_w + 2 + (PREFETCH_PIXELS + i) * p->stride_w) * p->cin;
            if (ahead >= 0) {
                _mm_prefetch((const char *)x + ahead * elem, _MM_HINT_T0);
                _mm_prefetch((const char *)x + (ahead + LANES) * elem, _MM_HINT_T0);
            }
            if (next)
                cg_tile_prefetch_step(next);
        }
        if (quad) {
            __m512 dq0[QUAD], dq1[QUAD];
#pragma GCC unroll 4
            for (int i = 0; i < QUAD; i++) {
                dq0[i] = LOAD_LANES(dy, at_dy + i * p->cout, mask0);
                dq1[i] = LOAD_LANES(dy, at_dy + i * p->cout + LANES, mask1);
            }
            QUAD_ROW(0, 0, 1, 2)
            QUAD_ROW(1, 3, 4, 5)
            QUAD_ROW(2, 6, 7, 8)
            row += QUAD;
            if ((ow += QUAD) == p->out_w) {
                ow = 0;
                if (++oh == p->out_h) {
                    oh = 0;
                    n++;
                }
            }
            continue;
        }
        ACC_TAP(0, 0, 0)
        ACC_TAP(1, 0, 1)
        ACC_TAP(2, 0, 2)
        ACC_TAP(3, 1, 0)
        ACC_TAP(4, 1, 1)
        ACC_TAP(5, 1, 2)
        ACC_TAP(6, 2, 0)
        ACC_TAP(7, 2, 1)
        ACC_TAP(8, 2, 2)
        row++;
        if (++ow == p->out_w) {
            ow = 0;
            if (++oh == p->out_h) {
                oh = 0;
                n++;
            }
        }
    }
    ACC_STORE(0);
    ACC_STORE(1);
    ACC_STORE(2);
    ACC_STORE(3);
    ACC_STORE(4);
    ACC_STORE(5);
    ACC_STORE(6);
    ACC_STORE(7);
    ACC_STORE(8);
}

/* Channels of the call's first block: up to x's next 64-byte boundary, so
 * that every later block's vectors each lie in one cache line (tensors 16
 * bytes past a line, as large malloc blocks and NumPy arrays are, made every
 * load span two; realigned, mbv1_dw_56 1.20x, mbv1_dw_28_s2 1.12x); 0 where
 * x's pixels do not all lie alike on the lines, or where the extra block
 * costs more than it saves: two blocks of 32 or fewer (mbv1_dw_112's 32
 * channels were 0.62x as fast in two blocks), fp16 (half its loads span
 * two lines, and mbv1_dw_56 was 0.85x as fast). */
static int64_t head_block(const cg_plan *p, const void *x, int64_t c_first, int64_t c_last)
{
    const int64_t elem = p->dtype_size;
    const uintptr_t at = (uintptr_t)x + (uintptr_t)(c_first * elem);
    if (elem != (int64_t)sizeof(float) || (p->cin * elem) % CG_CACHE_LINE != 0 ||
        at % (uintptr_t)elem != 0 || c_last - c_first <= 2 * VECS * LANES)
        return 0;
    const int64_t head = (int64_t)((CG_CACHE_LINE - at % CG_CACHE_LINE) % CG_CACHE_LINE) / elem;
    return head < c_last - c_first ? head : c_last - c_first;
}

/* The end of the block of channels that starts at c. */
static int64_t block_end(int64_t c, int64_t c_first, int64_t c_last, int64_t head)
{
    const int64_t end = c == c_first && head > 0 ? c + head : c + VECS * LANES;
    return end < c_last ? end : c_last;
}

/* The sums of rows [first, last), tile by tile: output pixels a tile whose
 * dy and x stay in cache while every block of 32 channels passes over them,
 * and, when `asks`, the next tile's come in meanwhile; then, with db_sums,
 * the tile's dy added to them from the cache (fp32). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline
    __attribute__((always_inline)) void
    tiles(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
          int64_t first, int64_t last, float *acc, int resume, double *db_sums, int64_t head,
          const int asks, const int stride1)
{
    const int half = p->dtype_size == 2;
    const int64_t tile = cg_prefetch_tile(p);
    int64_t blocks = 0;
    for (int64_t c = c_first; c < c_last; c = block_end(c, c_first, c_last, head))
        blocks++;
    for (int64_t t0 = first; t0 < last; t0 += tile) {
        const int64_t t1 = last - t0 < tile ? last : t0 + tile;
        const int64_t t2 = last - t1 < tile ? last : t1 + tile;
        cg_tile_prefetch next;
        if (asks)
            cg_tile_prefetch_plan(&next, p, dy, x, t1, t2, (t1 - t0) * blocks);
        for (int64_t c = c_first; c < c_last; c = block_end(c, c_first, c_last, head)) {
            const int64_t channels = block_end(c, c_first, c_last, head) - c;
            float *saved = acc + (c - c_first) * TAPS;
            cg_tile_prefetch *ask = asks ? &next : NULL;
            const int resumes = resume || t0 != first;
            if (half && channels == VECS * LANES)
                block32(p, dy, x, c, channels, t0, t1, saved, resumes, 1, 1, stride1, ask);
            else if (half)
                block32(p, dy, x, c, channels, t0, t1, saved, resumes, 1, 0, stride1, ask);
            else
                block32(p, dy, x, c, channels, t0, t1, saved, resumes, 0, 0, stride1, ask);
        }
        if (db_sums)
            cg_f32_sum_rows_avx512(db_sums, (const float *)dy + t0 * p->cout + c_first, p->cout,
                                   t1 - t0, c_last - c_first);
    }
}

/* Each its own function: with both copies of the loops in one, the plain
 * one was measured 3-4% slower (mbv1_dw_112). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static __attribute__((noinline)) void
tiles_asking(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
             int64_t first, int64_t last, float *acc, int resume, double *db_sums, int64_t head)
{
    if (p->stride_w == 1)
        tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head, 1, 1);
    else
        tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head, 1, 0);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static __attribute__((noinline)) void
tiles_plain(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
            int64_t first, int64_t last, float *acc, int resume, double *db_sums, int64_t head)
{
    if (p->stride_w == 1)
        tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head, 0, 1);
    else
        tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head, 0, 0);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void
cg_f32_dwconv3x3_rows_avx512(const cg_plan *p, const void *dy, const void *x, int64_t c_first,
                             int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                             float *dst, double *db_sums)
{
    const int64_t head = head_block(p, x, c_first, c_last);
    if (db_sums && !resume)
        memset(db_sums, 0, (size_t)(c_last - c_first) * sizeof(double));
    /* Asking for the next tile: on an AMD EPYC of family 26, mbv1_dw_28_s2
     * 2.0-2.4x (docs/design.md); on an Intel Xeon of family 6 model 207,
     * whose prefetchers follow these blocks' 128-byte pieces of each pixel
     * alone, not asking was the faster (in-process A/B, 64-byte aligned
     * tensors, 1 and 2 cores: mbv1_dw_28_s2 1.16-1.22x, mbv1_dw_56 1.09-1.30x,
     * fp16 0.99-1.30x). The AVX2 kernel's 32-byte pieces still gain from
     * asking there (mbv1_dw_28_s2 1.16x, 1 core). */
    if (cg_tile_prefetch_pays(p, c_first, c_last, VECS * LANES) && !cg_cpu_has(CG_CPU_INTEL))
        tiles_asking(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head);
    else
        tiles_plain(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, head);
    for (int64_t c = c_first; dst && c < c_last; c = block_end(c, c_first, c_last, head)) {
        const int64_t channels = block_end(c, c_first, c_last, head) - c; /* [tap][c] -> [c][tap] */
        const float *saved = acc + (c - c_first) * TAPS;
        for (int64_t k = 0; k < channels; k++)
            for (int t = 0; t < TAPS; t++)
                dst[(c - c_first + k) * TAPS + t] = saved[t * channels + k];
    }
}

/* x's lanes under `mask`, or all sixteen (`whole`: a plain load, where a
 * zero-masked one would also take an FMA port's slot). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512
run_load(const int whole, __mmask16 mask, const float *x)
{
    return whole ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(mask, x);
}

/* One pixel's lanes [c0, c0 + 16) under `mask`: their sum in one register
 * over every tap. Plain loads where the lanes are whole: with zero-masked
 * ones throughout, the depthwise input gradient of mbv1_dw_28_s2 (256
 * channels) ran 1.9-2.1x slower on Zen 5 (masked stores of all lanes
 * measured no slower). `stream`: whole lines, written past the caches. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
pixel_lanes(const int whole, const int stream, __mmask16 mask, float *restrict out,
            const float *restrict init, const float *const *x, const float *restrict w,
            int64_t taps, int64_t n, int64_t c0)
{
    __m512 acc = init ? run_load(whole, mask, init + c0) : _mm512_setzero_ps();
    for (int64_t t = 0; t < taps; t++)
        if (x[t])
            acc = _mm512_fmadd_ps(run_load(whole, mask, x[t] + c0),
                                  run_load(whole, mask, w + t * n + c0), acc);
    if (stream)
        _mm512_stream_ps(out + c0, acc);
    else
        _mm512_mask_storeu_ps(out + c0, mask, acc);
}

/* Sixteen channels at a time; streamed where asked and the pixel is whole
 * lines: dx of mbv1_dw_28_s2 (51 MB) is then not read in before it is
 * written, its input gradient 1.22-1.38x as fast, its whole backward
 * (cg_conv2d_backward) 1.14-1.25x (Xeon family 6 model 207, 1 and 2 cores,
 * in-process A/B, medians of 15 alternated pairs). */
__attribute__((target("avx512f"))) void
cg_f32_dwconv_pixel_avx512(float *restrict out, const float *restrict init, const float *const *x,
                           const float *restrict w, int64_t taps, int64_t n, int stream)
{
    int64_t c0 = 0;
    if (stream && ((uintptr_t)out | (uintptr_t)(n * sizeof(float))) % 64 == 0) {
        for (; c0 < n; c0 += LANES)
            pixel_lanes(1, 1, 0xFFFF, out, init, x, w, taps, n, c0);
        return;
    }
    for (; c0 + LANES <= n; c0 += LANES)
        pixel_lanes(1, 0, 0xFFFF, out, init, x, w, taps, n, c0);
    if (c0 < n)
        pixel_lanes(0, 0, (__mmask16)((1u << (n - c0)) - 1u), out, init, x, w, taps, n, c0);
}

/* ---- the training step's depthwise runs ------------------------------ */

/* The runs' blocks where the taps are not a pixel apart (a stride over 1,
 * dilation, the edges): four vectors of channels by two pixels, eight sums,
 * and the last one to four vectors by two to eight pixels. Four vectors a
 * pixel, where one vector by eight pixels read a line of each of a tap's
 * pixels: 256 contiguous bytes of a pixel's channels at a tap are what the
 * prefetchers follow on a stride-2 forward's source rows. Against one
 * vector by eight pixels, in the training step's forward (Xeon family 6
 * model 207, 1 and 2 cores, 64-byte aligned tensors): mbv1_dw_28_s2
 * 1.32-1.35x, 64 channels at stride 2 1.09-1.11x, 512 channels 1.22-1.28x,
 * 5x5 of 40 channels 1.24-1.27x; with tensors 16 bytes off a line four
 * vectors by four pixels were 1.16-1.22x slower than by two, by one or three
 * 1.02-1.18x slower, eight vectors by two 1.3x slower. Each block steps
 * `ask` once: a step per block of eight pixels by sixteen channels is
 * planned (depthwise_runs), so four vectors by two pixels ask for most of
 * the next row's lines. */
enum { RUN_SUMS = 8, RUN_VECTORS = 4, SLIDE_SUMS = 16 };

/* Where a run streams (its output past the caches): a whole vector on a
 * line of its own, written with a non-temporal store, so that the line is
 * not read in before it is written; the call fences them before it
 * returns. mbv1_dw_56's forward and input gradient 1.5x (1 core) and
 * 1.7x (2 cores), mbv1_dw_112's 1.3x and 1.5x (Xeon family 6 model 207). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
run_store(const int stream, __mmask16 mask, float *out, __m512 v)
{
    if (stream)
        _mm512_stream_ps(out, v);
    else
        _mm512_mask_storeu_ps(out, mask, v);
}

/* Whether a run's stores stream: run->stream, and out and a pixel's n
 * floats whole lines (so every block's lanes are whole and aligned). */
static int streams(const cg_dwconv_run *r, const float *out, int64_t n)
{
    return r->stream && ((uintptr_t)out | (uintptr_t)(n * sizeof(float))) % 64 == 0;
}

/* n channels in blocks of nv vectors: whole blocks up to whole_end, then
 * `rest` vectors (0 to nv), the last under `tail` where not `whole`. */
typedef struct channel_blocks {
    int64_t whole_end, rest;
    __mmask16 tail;
    int whole;
} channel_blocks;

static inline channel_blocks channel_blocks_of(int64_t n, int64_t nv)
{
    const int64_t whole_end = n - n % (nv * LANES);
    return (channel_blocks){whole_end, (n - whole_end + LANES - 1) / LANES,
                            (__mmask16)((1u << (n % LANES)) - 1u), n % LANES == 0};
}

/* Pixels [p0, p0 + count) (count <= px) of a run, lanes [c0, c0 + 16 * nv),
 * the last vector under `mask` where not `whole`: nv * px sums in
 * registers, each weight vector loaded once for the block; a short block's
 * missing pixels repeat its last (read, not stored). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
run_block(const int stream, const int nv, const int px, const int whole, __mmask16 mask,
          float *restrict out, const float *restrict init, const cg_dwconv_run *r,
          const float *restrict w, int64_t p0, int64_t count, int64_t c0, int64_t n)
{
    int64_t at[RUN_SUMS];
    for (int i = 0; i < px; i++)
        at[i] = (p0 + (i < count ? i : count - 1)) * r->pixel_step + c0;
    if (r->ask)
        cg_tile_prefetch_step(r->ask);
    __m512 acc[RUN_SUMS][RUN_VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        const __m512 start =
            init ? run_load(whole || v < nv - 1, mask, init + c0 + LANES * v) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int i = 0; i < px; i++)
            acc[i][v] = start;
    }
    for (int64_t kh = 0; kh < r->kernel_h; kh++) {
        const float *row = r->rows[kh], *wt = w + (kh * r->kernel_w + r->kw0) * n + c0;
        for (int64_t kw = r->kw0; row && kw < r->kw1; kw++, row += r->tap_step, wt += n) {
            __m512 wv[RUN_VECTORS];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                wv[v] = run_load(whole || v < nv - 1, mask, wt + LANES * v);
#pragma GCC unroll 8
            for (int i = 0; i < px; i++)
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    acc[i][v] = _mm512_fmadd_ps(
                        run_load(whole || v < nv - 1, mask, row + at[i] + LANES * v), wv[v],
                        acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < px; i++)
        if (i < count)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                run_store(stream && whole, whole || v < nv - 1 ? 0xFFFF : mask,
                          out + (p0 + i) * n + c0 + LANES * v, acc[i][v]);
}

/* Pixels [from, pixels) of a run, lanes [c_from, c_to) in blocks of nv
 * vectors (the last partial under `mask` where not `whole`) by eight sums'
 * worth of pixels. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
run_blocks(const int stream, const int nv, const int whole, __mmask16 mask, float *restrict out,
           const float *restrict init, const cg_dwconv_run *r, const float *restrict w,
           int64_t from, int64_t pixels, int64_t c_from, int64_t c_to, int64_t n)
{
    const int px = (RUN_SUMS + nv - 1) / nv;
    for (int64_t p0 = from; p0 < pixels; p0 += px)
        for (int64_t c0 = c_from; c0 < c_to; c0 += nv * LANES)
            run_block(stream, nv, px, whole, mask, out, init, r, w, p0,
                      pixels - p0 < px ? pixels - p0 : px, c0, n);
}

/* px pixels of a run whose three taps a kernel row are one pixel apart
 * (stride 1, no dilation: pixel i's tap k reads source pixel i + dir * k),
 * lanes [c0, c0 + 16 * nv), the last vector under `mask` where not `whole`,
 * as avx2/dwconv.c's slide_block: the source pixels of a kernel row loaded
 * once each, its three weights in registers, where run_block loads a source
 * vector a tap and pixel; each sum taking its taps in run_block's order: the
 * same bits. dir 1 walks the source forwards (the forward's x), -1
 * backwards (the input gradient's dy). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
slide_block(const int stream, const int dir, const int nv, const int px, const int whole,
            __mmask16 mask, float *restrict out, const float *restrict init, const cg_dwconv_run *r,
            const float *restrict w, int64_t p0, int64_t c0, int64_t n)
{
    const int64_t step = dir * r->pixel_step;
    if (r->ask)
        cg_tile_prefetch_step(r->ask);
    __m512 acc[SLIDE_SUMS][RUN_VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        const __m512 start =
            init ? run_load(whole || v < nv - 1, mask, init + c0 + LANES * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < px; i++)
            acc[i][v] = start;
    }
    for (int64_t kh = 0; kh < r->kernel_h; kh++) {
        if (!r->rows[kh])
            continue;
        const float *wt = w + (kh * r->kernel_w + r->kw0) * n + c0;
        __m512 wk[3][RUN_VECTORS];
#pragma GCC unroll 3
        for (int k = 0; k < 3; k++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                wk[k][v] = run_load(whole || v < nv - 1, mask, wt + k * n + LANES * v);
        /* where the walk starts: pixel 0's tap 0 forwards, the last pixel's backwards */
        const float *at = r->rows[kh] + (p0 + (dir > 0 ? 0 : px - 1)) * r->pixel_step + c0;
#pragma GCC unroll 18
        for (int j = 0; j < px + 2; j++, at += step)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                const __m512 xv = run_load(whole || v < nv - 1, mask, at + LANES * v);
                /* the walk's j-th source pixel: tap k of pixel j - k (forwards)
                 * or of pixel px - 1 - j + k (backwards) */
#pragma GCC unroll 3
                for (int k = 0; k < 3; k++) {
                    const int i = dir > 0 ? j - k : px - 1 - j + k;
                    if (i >= 0 && i < px)
                        acc[i][v] = _mm512_fmadd_ps(xv, wk[k][v], acc[i][v]);
                }
            }
    }
#pragma GCC unroll 16
    for (int i = 0; i < px; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            run_store(stream && whole, whole || v < nv - 1 ? 0xFFFF : mask,
                      out + (p0 + i) * n + c0 + LANES * v, acc[i][v]);
}

/* The run's whole blocks of px pixels in direction dir, every channel: nv
 * vectors of channels a block (the last block the rest, 1 to nv vectors):
 * the pixels they cover. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) int64_t
slide_blocks(const int stream, const int dir, const int nv, float *restrict out,
             const float *restrict init, const cg_dwconv_run *r, const float *restrict w,
             int64_t pixels, int64_t n)
{
    const int px = SLIDE_SUMS / nv;
    const channel_blocks cb = channel_blocks_of(n, nv);
    const int64_t c = cb.whole_end;
    int64_t p0 = 0;
    for (; p0 + px <= pixels; p0 += px) {
        for (int64_t c0 = 0; c0 < c; c0 += nv * LANES)
            slide_block(stream, dir, nv, px, 1, 0xFFFF, out, init, r, w, p0, c0, n);
        if (cb.rest == 4 && nv >= 4)
            slide_block(stream, dir, 4, px, cb.whole, cb.tail, out, init, r, w, p0, c, n);
        else if (cb.rest == 3 && nv >= 3)
            slide_block(stream, dir, 3, px, cb.whole, cb.tail, out, init, r, w, p0, c, n);
        else if (cb.rest == 2 && nv >= 2)
            slide_block(stream, dir, 2, px, cb.whole, cb.tail, out, init, r, w, p0, c, n);
        else if (cb.rest == 1)
            slide_block(stream, dir, 1, px, cb.whole, cb.tail, out, init, r, w, p0, c, n);
    }
    return p0;
}

/* Sliding blocks of up to four vectors of channels (a pixel's 64 to 256
 * contiguous bytes at a tap, as run_blocks) by sixteen sums' worth of
 * pixels: 16 pixels of one vector, 8 of two, 5 of three, 4 of four. Against
 * sixteen pixels of one vector, the training step's forward and input
 * gradient (Xeon family 6 model 207, 1 and 2 cores): with tensors 16 bytes
 * off a cache line (malloc's, NumPy's), whose every vector spans two lines,
 * mbv1_dw_56 (four vectors) 1.15-1.21x, mbv1_dw_112 (two) 1.14-1.18x; with
 * aligned ones 0.97-1.00x. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) int64_t
slide_any(const int stream, const int dir, float *restrict out, const float *restrict init,
          const cg_dwconv_run *r, const float *restrict w, int64_t pixels, int64_t n)
{
    const int64_t vectors = (n + LANES - 1) / LANES;
    if (vectors >= 4)
        return slide_blocks(stream, dir, 4, out, init, r, w, pixels, n);
    if (vectors == 3)
        return slide_blocks(stream, dir, 3, out, init, r, w, pixels, n);
    if (vectors == 2)
        return slide_blocks(stream, dir, 2, out, init, r, w, pixels, n);
    return slide_blocks(stream, dir, 1, out, init, r, w, pixels, n);
}

/* Sliding blocks where a kernel row's three taps are a pixel apart
 * (slide_any), else run_blocks; each block's output lines written whole,
 * one after another. */
__attribute__((target("avx512f"))) void
cg_f32_dwconv_run_avx512(float *restrict out, const float *restrict init, const cg_dwconv_run *run,
                         const float *restrict w, int64_t pixels, int64_t n)
{
    const int stream = streams(run, out, n);
    int64_t done = 0; /* pixels the sliding blocks took */
    if (run->kw1 - run->kw0 == 3 && run->tap_step == run->pixel_step)
        done = slide_any(stream, 1, out, init, run, w, pixels, n);
    else if (run->kw1 - run->kw0 == 3 && run->tap_step == -run->pixel_step)
        done = slide_any(stream, -1, out, init, run, w, pixels, n);
    const channel_blocks cb = channel_blocks_of(n, RUN_VECTORS);
    const int64_t c = cb.whole_end;
    run_blocks(stream, RUN_VECTORS, 1, 0xFFFF, out, init, run, w, done, pixels, 0, c, n);
    if (cb.rest == 4)
        run_blocks(stream, 4, cb.whole, cb.tail, out, init, run, w, done, pixels, c, n, n);
    else if (cb.rest == 3)
        run_blocks(stream, 3, cb.whole, cb.tail, out, init, run, w, done, pixels, c, n, n);
    else if (cb.rest == 2)
        run_blocks(stream, 2, cb.whole, cb.tail, out, init, run, w, done, pixels, c, n, n);
    else if (cb.rest == 1)
        run_blocks(stream, 1, cb.whole, cb.tail, out, init, run, w, done, pixels, c, n, n);
    if (stream) /* the streamed stores before anything after the call */
        _mm_sfence();
}

/* Grouped pixels of G channels a group, G dividing 16: per 16 channels
 * (whole groups), the sums of eight pixels in registers; for each tap, a
 * pixel's vector of x loaded once and its G partners made in registers
 * (lane l takes lane l - l % G + j, a permute), each times its weights,
 * loaded once for the eight pixels. Plain loads where the lanes are whole. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
grouped_permuted(const int g, const int whole, __mmask16 mask, float *restrict out, int64_t ld,
                 const float *restrict init, const float *const *x, const float *restrict w,
                 int64_t taps, int64_t n, int64_t pixels, int64_t c0)
{
    enum { P = CG_GROUPED_PIXELS };
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i base = _mm512_and_si512(lane, _mm512_set1_epi32(~(g - 1)));
    __m512i partner[CG_GROUPED_MOST];
#pragma GCC unroll 8
    for (int j = 0; j < g; j++)
        partner[j] = _mm512_add_epi32(base, _mm512_set1_epi32(j));
    const __m512 start = init ? run_load(whole, mask, init + c0) : _mm512_setzero_ps();
    __m512 acc[P];
#pragma GCC unroll 8
    for (int i = 0; i < P; i++)
        acc[i] = start;
    for (int64_t t = 0; t < taps; t++) {
        __m512 wv[CG_GROUPED_MOST];
#pragma GCC unroll 8
        for (int j = 0; j < g; j++)
            wv[j] = run_load(whole, mask, w + (t * g + j) * n + c0);
#pragma GCC unroll 8
        for (int i = 0; i < P; i++) {
            const float *row = i < pixels ? x[i * taps + t] : NULL;
            if (!row)
                continue;
            const __m512 xv = run_load(whole, mask, row + c0);
#pragma GCC unroll 8
            for (int j = 0; j < g; j++)
                acc[i] = _mm512_fmadd_ps(_mm512_permutexvar_ps(partner[j], xv), wv[j], acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < P; i++)
        if (i < pixels)
            _mm512_mask_storeu_ps(out + i * ld + c0, mask, acc[i]);
}

/* The chunks of 16 channels for G (a constant once inlined). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
grouped_chunks(const int g, float *restrict out, int64_t ld, const float *restrict init,
               const float *const *x, const float *restrict w, int64_t taps, int64_t n,
               int64_t pixels)
{
    int64_t c0 = 0;
    for (; c0 + LANES <= n; c0 += LANES)
        grouped_permuted(g, 1, 0xFFFF, out, ld, init, x, w, taps, n, pixels, c0);
    if (c0 < n)
        grouped_permuted(g, 0, (__mmask16)((1u << (n - c0)) - 1u), out, ld, init, x, w, taps, n,
                         pixels, c0);
}

/* G = 2, 4 and 8; the others' groups straddle vectors, and G = 1 is the
 * depthwise kernels' (the training step calls this for G > 1 only): the
 * reference. */
__attribute__((target("avx512f"))) void
cg_f32_grouped_pixel_avx512(float *restrict out, int64_t ld, const float *restrict init,
                            const float *const *x, const float *restrict w, int64_t taps, int64_t g,
                            int64_t n, int64_t pixels)
{
    switch (g) {
    case 2:
        grouped_chunks(2, out, ld, init, x, w, taps, n, pixels);
        break;
    case 4:
        grouped_chunks(4, out, ld, init, x, w, taps, n, pixels);
        break;
    case 8:
        grouped_chunks(8, out, ld, init, x, w, taps, n, pixels);
        break;
    default:
        cg_f32_grouped_pixel_ref(out, ld, init, x, w, taps, g, n, pixels);
    }
}

/* The weight gradient for any kernel size: the reference's loops
 * (kernels/dwconv_rows_body.h), vectorised by the compiler for AVX-512. */
__attribute__((target("avx512f"))) void
cg_f32_dwconv_rows_avx512(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                          int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                          float *dst, double *db_sums)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, resume, dst, db_sums);
}

/* ---- grouped, a few channels a group (kernels/grouped_rows_body.h) ---- */

#define AVX512_FBWVL_INLINE                                                                        \
    __attribute__((target("avx512f,avx512bw,avx512vl"))) static inline                             \
        __attribute__((always_inline))

/* load_lanes, or (whole: every lane of the chunk is a channel of the call)
 * a plain load. */
AVX512_FBWVL_INLINE __m512 load_chunk(const void *tensor, int64_t index, __mmask16 mask,
                                      const int half, const int whole)
{
    if (!whole)
        return load_lanes(tensor, index, mask, half);
    if (half)
        return _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)((const unsigned char *)tensor + 2 * index)));
    return _mm512_loadu_ps((const float *)tensor + index);
}

/* Rotation r of the channels within each group of G lanes: lane c takes
 * lane c - c % G + (c % G + r) % G. */
AVX512_FBWVL_INLINE __m512i group_rotation(const int g, int r)
{
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i in_group = _mm512_and_si512(lane, _mm512_set1_epi32(g - 1));
    const __m512i turned = _mm512_and_si512(_mm512_add_epi32(in_group, _mm512_set1_epi32(r)),
                                            _mm512_set1_epi32(g - 1));
    return _mm512_add_epi32(_mm512_sub_epi32(lane, in_group), turned);
}

/* One output pixel: dy's 16 channels loaded once and turned G - 1 ways
 * within their groups (permutes), so that rotation r pairs x's channel ci
 * of each group with dy's (ci + r) % G in the same lane; then a tap is one
 * load of x and G FMAs, every lane of them a product the sums keep, where
 * the body's 2G - 1 shifts take 2G - 1 FMAs, (G - 1) / (2G - 1) of their
 * lanes pairing channels of two groups (as avx2/dwconv.c's grouped_chunk_4
 * does for G = 4): the filter gradient 1.8-1.85x on rnx_g32_56 (G = 4),
 * fp16 1.93-1.95x; G = 8 2.6x, G = 2 1.6-1.8x (Xeon family 6 model 207,
 * 1 and 2 cores). Sums acc[t * G + r], moved to the body's shifts at the
 * end of the chunk (grouped_chunk_g); taps outside the image skipped where
 * `checked` (ix: tap 0's column). */
AVX512_FBWVL_INLINE void grouped_pixel(const int g, const int half, const int whole, const int taps,
                                       const int checked, __mmask16 mask, const __m512i *rotation,
                                       int64_t count, const void *dy, const void *x, int64_t y,
                                       int64_t at, int64_t tap_step, int64_t ix, int64_t dil,
                                       int64_t in_w, __m512 *acc)
{
    __m512 yr[CG_GROUPED_MOST];
    yr[0] = load_chunk(dy, y, mask, half, whole);
#pragma GCC unroll 8
    for (int r = 1; r < g; r++)
        yr[r] = _mm512_permutexvar_ps(rotation[r], yr[0]);
#pragma GCC unroll 16
    for (int t = 0; t < taps; t++) {
        if (t >= count || (checked && (ix + t * dil < 0 || ix + t * dil >= in_w)))
            continue;
        const __m512 xv = load_chunk(x, at + t * tap_step, mask, half, whole);
#pragma GCC unroll 8
        for (int r = 0; r < g; r++)
            acc[t * g + r] = _mm512_fmadd_ps(xv, yr[r], acc[t * g + r]);
    }
}

/* The rows [r0, r1) of a chunk from channel c0 (see grouped_chunk_g), an
 * output row's run at a time: its pixels whose taps are all inside the
 * image go without checks, their addresses stepped along the run. */
AVX512_FBWVL_INLINE void grouped_rows_of(const int g, const int half, const int whole,
                                         const int taps, __mmask16 mask, const __m512i *rotation,
                                         const cg_plan *plan, const void *dy, const void *x,
                                         int64_t c0, int64_t kh, int64_t kw0, int64_t count,
                                         int64_t r0, int64_t r1, __m512 *acc)
{
    const int64_t dil = plan->dil_w, in_w = plan->in_w;
    const int64_t tap_step = dil * plan->cin, pixel_step = plan->stride_w * plan->cin;
    cg_grouped_walk walk = cg_grouped_walk_start(plan, c0, kh, kw0, count, r0, r1);
    cg_grouped_run run;
    while (cg_grouped_next_run(&walk, &run)) {
        int64_t y = run.y, at = run.at;
        for (int64_t j = 0; j < run.length; j++, y += plan->cout, at += pixel_step) {
            if (j == run.inner_lo) /* the run's inside, unchecked */
                for (; j < run.inner_hi; j++, y += plan->cout, at += pixel_step)
                    grouped_pixel(g, half, whole, taps, 0, mask, rotation, count, dy, x, y, at,
                                  tap_step, 0, dil, in_w, acc);
            if (j == run.length)
                break;
            grouped_pixel(g, half, whole, taps, 1, mask, rotation, count, dy, x, y, at, tap_step,
                          run.ix + j * plan->stride_w, dil, in_w, acc);
        }
    }
}

/* Sums a call for G: G a tap (taps a call: this / (2G - 1), the body's
 * count), G more for dy's turns and one for x within the 32 registers. */
static inline int grouped_sums_most(int g)
{
    return g == 8 ? 30 : 24;
}

/* The chunk for G channels a group and one storage (constants once inlined,
 * so the sums are registers): taps [kw0, kw0 + count) of kernel row kh,
 * count <= grouped_sums_most(G) / (2G - 1), over rows [r0, r1); plain
 * loads where every lane is a channel of the call. Rotation r's sums hold
 * the body's shift d = r in the lanes of x's channels ci < G - r (as the
 * body has them), and shift r - G in the others, whose lanes move down
 * G - r to where the body has those (dy's channel). */
AVX512_FBWVL_INLINE void grouped_chunk_g(const int g, const int half, const cg_plan *plan,
                                         const void *dy, const void *x, int64_t c_first, int64_t n,
                                         int64_t cb, int64_t kh, int64_t kw0, int64_t count,
                                         int64_t r0, int64_t r1, float *sums)
{
    const int taps = grouped_sums_most(g) / (2 * g - 1), shifts = 2 * g - 1;
    const int valid = n - cb < LANES ? (int)(n - cb) : LANES;
    const __mmask16 mask = (__mmask16)((1u << valid) - 1u);
    __m512i rotation[CG_GROUPED_MOST];
#pragma GCC unroll 8
    for (int r = 0; r < g; r++)
        rotation[r] = group_rotation(g, r);
    __m512 acc[24]; /* taps * G: 24, 16, 12 or 16 */
#pragma GCC unroll 24
    for (int a = 0; a < taps * g; a++)
        acc[a] = _mm512_setzero_ps();
    if (cb + LANES <= n)
        grouped_rows_of(g, half, 1, taps, mask, rotation, plan, dy, x, c_first + cb, kh, kw0, count,
                        r0, r1, acc);
    else
        grouped_rows_of(g, half, 0, taps, mask, rotation, plan, dy, x, c_first + cb, kh, kw0, count,
                        r0, r1, acc);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 16
    for (int t = 0; t < taps; t++)
#pragma GCC unroll 8
        for (int r = 0; r < g; r++) {
            const __m512 a = acc[t * g + r];
            float *at = sums + (size_t)(t * shifts + g - 1) * LANES;
            _mm512_storeu_ps(at + r * LANES, a);
            if (r > 0) /* shift r - G: lane c + G - r's sum into lane c */
                _mm512_storeu_ps(
                    at + (r - g) * LANES,
                    _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(g - r)), a));
        }
}

/* fp16 is a test a load (the same each time), not a copy of every chunk. */
#define GROUPED_CHUNK(G)                                                                           \
    __attribute__((target("avx512f,avx512bw,avx512vl"))) static void grouped_chunk_##G(            \
        const cg_plan *plan, const void *dy, const void *x, int64_t c_first, int64_t n,            \
        int64_t cb, int64_t kh, int64_t kw0, int64_t count, int64_t r0, int64_t r1, float *sums)   \
    {                                                                                              \
        grouped_chunk_g(G, plan->dtype_size == 2, plan, dy, x, c_first, n, cb, kh, kw0, count, r0, \
                        r1, sums);                                                                 \
    }
GROUPED_CHUNK(1)
GROUPED_CHUNK(2)
GROUPED_CHUNK(4)
GROUPED_CHUNK(8)

__attribute__((target("avx512f,avx512bw,avx512vl"))) void
cg_f32_grouped_rows_avx512(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                           int64_t c_last, int64_t first, int64_t last, float beta, float *dst)
{
    /* specialised for 1, 2, 4 and 8 channels a group (each a few thousand
     * instructions once unrolled, ten times that under the sanitizers); the
     * rarer sizes take the reference */
    static cg_grouped_chunk_fn *const chunks[CG_GROUPED_MOST] = {
        grouped_chunk_1, grouped_chunk_2, NULL, grouped_chunk_4, NULL, NULL, NULL, grouped_chunk_8};
    if (!chunks[plan->cin_g - 1]) {
        cg_f32_grouped_rows_ref(plan, dy, x, c_first, c_last, first, last, beta, dst);
        return;
    }
    cg_grouped_rows_body(chunks[plan->cin_g - 1], LANES, grouped_sums_most((int)plan->cin_g), plan,
                         dy, x, c_first, c_last, first, last, beta, dst);
}
