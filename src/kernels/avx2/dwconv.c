/* SPDX-License-Identifier: MIT */
/* The training step's depthwise kernels on AVX2 + FMA (avx512/dwconv.c's
 * design, eight lanes): runs of a row, eight or twelve sums in
 * registers; single pixels, eight channels at a time, their sum in one
 * register over every tap. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dwconv_rows_body.h"
#include "kernels/grouped_rows_body.h"
#include "kernels/list.h"
#include "kernels/tile_prefetch.h"

enum { LANES = 8 };

/* x's lanes under `mask`, or all eight (`whole`: a plain load). */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) __m256
run_load(const int whole, __m256i mask, const float *x)
{
    return whole ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, mask);
}

/* `v` into the lanes of `out` under `mask`, or (`whole`) all eight by a
 * plain store: AMD's masked stores are slow (avx512/dwconv.c's run_store). */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
run_store(const int whole, __m256i mask, float *out, __m256 v)
{
    if (whole)
        _mm256_storeu_ps(out, v);
    else
        _mm256_maskstore_ps(out, mask, v);
}

/* One pixel's lanes [c0, c0 + 8) under `mask`: their sum in one register
 * over every tap; `stream`: whole lines, written past the caches. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
pixel_lanes(const int whole, const int stream, __m256i mask, float *restrict out,
            const float *restrict init, const float *const *x, const float *restrict w,
            int64_t taps, int64_t n, int64_t c0)
{
    __m256 acc = init ? run_load(whole, mask, init + c0) : _mm256_setzero_ps();
    for (int64_t t = 0; t < taps; t++)
        if (x[t])
            acc = _mm256_fmadd_ps(run_load(whole, mask, x[t] + c0),
                                  run_load(whole, mask, w + t * n + c0), acc);
    if (stream)
        _mm256_stream_ps(out + c0, acc);
    else
        run_store(whole, mask, out + c0, acc);
}

/* Eight channels at a time; streamed as the AVX-512 kernel's (there
 * mbv1_dw_28_s2's input gradient 1.09-1.11x as fast, its whole backward
 * 1.04-1.05x: the half-width FMAs take more of the time). */
__attribute__((target("avx2,fma"))) void
cg_f32_dwconv_pixel_avx2(float *restrict out, const float *restrict init, const float *const *x,
                         const float *restrict w, int64_t taps, int64_t n, int stream)
{
    const __m256i all = _mm256_set1_epi32(-1);
    int64_t c0 = 0;
    if (stream && ((uintptr_t)out | (uintptr_t)(n * sizeof(float))) % 64 == 0) {
        for (; c0 < n; c0 += LANES)
            pixel_lanes(1, 1, all, out, init, x, w, taps, n, c0);
        return;
    }
    for (; c0 + LANES <= n; c0 += LANES)
        pixel_lanes(1, 0, all, out, init, x, w, taps, n, c0);
    if (c0 < n) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        pixel_lanes(0, 0, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - c0)), lane), out, init, x,
                    w, taps, n, c0);
    }
}

/* ---- the training step's depthwise runs (avx512/dwconv.c's design) ---- */

/* The runs' blocks where the taps are not a pixel apart (a stride over 1,
 * dilation, the edges), as on AVX-512 (avx512/dwconv.c: RUN_SUMS): four
 * vectors of channels (128 contiguous bytes of a pixel's channels at a tap)
 * by two pixels, and the last one to four vectors by two to eight pixels.
 * Against one vector by eight pixels, in the training step's forward
 * (Xeon family 6 model 207, `CONVGRAD_ISA=avx2`, 1 and 2 cores, aligned
 * tensors): mbv1_dw_28_s2 1.35-1.37x, 64 channels at stride 2 1.20-1.23x,
 * 5x5 of 40 channels 1.09-1.11x; the stride-1 forwards and input gradients
 * (their edges, and the streamed slides' halves of a line now a pair of
 * calls) 1.06-1.16x. By three pixels no faster. */
enum { RUN_SUMS = 8, RUN_VECTORS = 4, SLIDE_PIXELS = 12 };

/* Where a run streams (its output past the caches) and its lines are
 * aligned (out and a pixel's n floats whole lines), every lane of a block is
 * written by non-temporal stores, a line's two halves back to back: the
 * vectors of lanes [c0, c0 + 8), c0 a multiple of 16, wait in `held` for
 * those of [c0 + 8, c0 + 16), so that each line leaves the write-combining
 * buffer whole. On an AMD EPYC of family 23, the forward and input gradient
 * of mbv1_dw_112 and mbv1_dw_56 1.25-1.37x, the output no longer read in
 * before it is written (the halves then went a block apart); on a Xeon of
 * family 6 model 207, the halves a block apart made them 7-8x slower, back
 * to back 1.13-1.24x on mbv1_dw_56 and 0.94-0.98x on mbv1_dw_112. Else
 * plain stores of the first `count` pixels' lanes under `mask`. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
put_block(const int stream, const int whole, __m256i mask, float *at_out, int64_t n, int64_t c0,
          int count, const __m256 *acc, float (*held)[LANES])
{
    if (stream && c0 % (2 * LANES) == 0) {
        for (int i = 0; i < count; i++)
            _mm256_store_ps(held[i], acc[i]);
        return;
    }
    if (stream) {
        for (int i = 0; i < count; i++) {
            _mm256_stream_ps(at_out + i * n - LANES, _mm256_load_ps(held[i]));
            _mm256_stream_ps(at_out + i * n, acc[i]);
        }
        return;
    }
    for (int i = 0; i < count; i++)
        run_store(whole, mask, at_out + i * n, acc[i]);
}

/* Pixels [p0, p0 + count) (count <= px) of a run, lanes [c0, c0 + 8 * nv),
 * the last vector under `mask` where not `whole`: nv * px sums in
 * registers, each weight vector loaded once for the block. A whole block
 * (`full`) walks its pixels from one pointer, a step a pixel; a short
 * block's missing pixels repeat its last (read, not stored), through an
 * offset each. Eight offsets and the tap's pointers are more than the
 * integer registers: spilled, the tap's pointer went through memory each
 * tap (2.6x slower on an AMD EPYC of family 23). Where the run streams
 * (`stream`: its lines whole, nv even), a line's two vectors go out back to
 * back. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
run_block(const int stream, const int nv, const int px, const int whole, const int full,
          __m256i mask, float *restrict out, const float *restrict init, const cg_dwconv_run *r,
          const float *restrict w, int64_t p0, int64_t count, int64_t c0, int64_t n)
{
    int64_t at[RUN_SUMS];
    for (int i = 0; i < px; i++)
        at[i] = (p0 + (i < count ? i : count - 1)) * r->pixel_step + c0;
    if (r->ask)
        cg_tile_prefetch_step(r->ask);
    __m256 acc[RUN_SUMS][RUN_VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        const __m256 start =
            init ? run_load(whole || v < nv - 1, mask, init + c0 + LANES * v) : _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int i = 0; i < px; i++)
            acc[i][v] = start;
    }
    const int64_t ps = r->pixel_step;
    for (int64_t kh = 0; kh < r->kernel_h; kh++) {
        const float *row = r->rows[kh], *wt = w + (kh * r->kernel_w + r->kw0) * n + c0;
        if (full && row)
            row += at[0];
        for (int64_t kw = r->kw0; row && kw < r->kw1; kw++, row += r->tap_step, wt += n) {
            __m256 wv[RUN_VECTORS];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                wv[v] = run_load(whole || v < nv - 1, mask, wt + LANES * v);
            const float *at_px = row;
#pragma GCC unroll 8
            for (int i = 0; i < px; i++, at_px += ps)
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    acc[i][v] = _mm256_fmadd_ps(run_load(whole || v < nv - 1, mask,
                                                         (full ? at_px : row + at[i]) + LANES * v),
                                                wv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < px; i++)
        if (i < count)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                float *o = out + (p0 + i) * n + c0 + LANES * v;
                if (stream)
                    _mm256_stream_ps(o, acc[i][v]);
                else
                    run_store(whole || v < nv - 1, mask, o, acc[i][v]);
            }
}

/* Pixels [from, pixels) of a run, lanes [c_from, c_to) in blocks of nv
 * vectors (the last partial under `mask` where not `whole`) by eight sums'
 * worth of pixels. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
run_blocks(const int stream, const int nv, const int whole, __m256i mask, float *restrict out,
           const float *restrict init, const cg_dwconv_run *r, const float *restrict w,
           int64_t from, int64_t pixels, int64_t c_from, int64_t c_to, int64_t n)
{
    const int px = (RUN_SUMS + nv - 1) / nv;
    int64_t p0 = from;
    for (; p0 + px <= pixels; p0 += px)
        for (int64_t c0 = c_from; c0 < c_to; c0 += nv * LANES)
            run_block(stream, nv, px, whole, 1, mask, out, init, r, w, p0, px, c0, n);
    for (int64_t c0 = c_from; p0 < pixels && c0 < c_to; c0 += nv * LANES)
        run_block(stream, nv, px, whole, 0, mask, out, init, r, w, p0, pixels - p0, c0, n);
}

/* Twelve pixels of a run whose three taps a kernel row are one pixel apart
 * (stride 1, no dilation: pixel i's tap k reads source pixel i + dir * k),
 * lanes [c0, c0 + 8) under `mask`: the fourteen source pixels of a kernel
 * row are loaded once each and the row's three weights kept in registers,
 * where run_block loads x once a tap and pixel; and twelve sums, not eight,
 * so that enough FMAs are independent to hide their latency. Twelve sums,
 * three weights and x fill the sixteen registers. Each sum takes its taps
 * in run_block's order, the same bits. dir = 1 walks the source forwards
 * (the forward's x), -1 backwards (the input gradient's dy). On an AMD EPYC
 * of family 23, the kernel alone on one output row of 56 pixels, its source
 * rows in the caches: 44 -> 71 GFLOP/s at 32 channels (in L1), 42 -> 51 at
 * 128 (in L2). */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
slide_block(const int stream, const int dir, const int whole, __m256i mask, float *restrict out,
            const float *restrict init, const cg_dwconv_run *r, const float *restrict w, int64_t p0,
            int64_t c0, int64_t n, float (*held)[LANES])
{
    const int64_t ps = r->pixel_step, step = dir * ps;
    if (r->ask && c0 % (2 * LANES) == 0)
        cg_tile_prefetch_step(r->ask);
    const __m256 start = init ? run_load(whole, mask, init + c0) : _mm256_setzero_ps();
    __m256 acc[SLIDE_PIXELS];
#pragma GCC unroll 12
    for (int i = 0; i < SLIDE_PIXELS; i++)
        acc[i] = start;
    for (int64_t kh = 0; kh < r->kernel_h; kh++) {
        if (!r->rows[kh])
            continue;
        const float *wt = w + (kh * r->kernel_w + r->kw0) * n + c0;
        const __m256 wk[3] = {run_load(whole, mask, wt), run_load(whole, mask, wt + n),
                              run_load(whole, mask, wt + 2 * n)};
        /* the source pixel the walk starts at: pixel 0's tap 0 forwards,
         * the last pixel's tap 0 backwards */
        const float *px = r->rows[kh] + (p0 + (dir > 0 ? 0 : SLIDE_PIXELS - 1)) * ps + c0;
#pragma GCC unroll 14
        for (int j = 0; j < SLIDE_PIXELS + 2; j++, px += step) {
            const __m256 xv = run_load(whole, mask, px);
            /* j-th source pixel of the walk: tap k of pixel j - k (forwards)
             * or of pixel SLIDE_PIXELS - 1 - j + k (backwards) */
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++) {
                const int i = dir > 0 ? j - k : SLIDE_PIXELS - 1 - j + k;
                if (i >= 0 && i < SLIDE_PIXELS)
                    acc[i] = _mm256_fmadd_ps(xv, wk[k], acc[i]);
            }
        }
    }
    put_block(stream, whole, mask, out + p0 * n + c0, n, c0, SLIDE_PIXELS, acc, held);
}

/* The run's whole blocks of SLIDE_PIXELS pixels in direction dir, every
 * channel: the pixels they cover. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) int64_t
slide_blocks(const int stream, const int dir, __m256i tail, float *restrict out,
             const float *restrict init, const cg_dwconv_run *r, const float *restrict w,
             int64_t pixels, int64_t n)
{
    _Alignas(32) float held[SLIDE_PIXELS][LANES];
    int64_t p0 = 0;
    for (; p0 + SLIDE_PIXELS <= pixels; p0 += SLIDE_PIXELS) {
        int64_t c0 = 0;
        if (stream) /* n a multiple of 16: a line's halves, one after the other */
            for (; c0 < n; c0 += 2 * LANES) {
                slide_block(1, dir, 1, tail, out, init, r, w, p0, c0, n, held);
                slide_block(1, dir, 1, tail, out, init, r, w, p0, c0 + LANES, n, held);
            }
        for (; c0 + LANES <= n; c0 += LANES)
            slide_block(0, dir, 1, tail, out, init, r, w, p0, c0, n, held);
        if (c0 < n)
            slide_block(0, dir, 0, tail, out, init, r, w, p0, c0, n, held);
    }
    return p0;
}

/* Sliding blocks of twelve pixels by eight channels where a kernel row's
 * three taps are a pixel apart, else run_blocks. */
__attribute__((target("avx2,fma"))) void
cg_f32_dwconv_run_avx2(float *restrict out, const float *restrict init, const cg_dwconv_run *run,
                       const float *restrict w, int64_t pixels, int64_t n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n % LANES)), lane);
    /* streamed: whole lines, every block's lanes whole (put_block, run_block) */
    const int stream =
        run->stream && ((uintptr_t)out | (uintptr_t)(n * sizeof(float))) % (4 * LANES * 2) == 0;
    int64_t done = 0; /* pixels the sliding blocks took */
    if (run->kw1 - run->kw0 == 3 && run->tap_step == run->pixel_step)
        done = stream ? slide_blocks(1, 1, tail, out, init, run, w, pixels, n)
                      : slide_blocks(0, 1, tail, out, init, run, w, pixels, n);
    else if (run->kw1 - run->kw0 == 3 && run->tap_step == -run->pixel_step)
        done = stream ? slide_blocks(1, -1, tail, out, init, run, w, pixels, n)
                      : slide_blocks(0, -1, tail, out, init, run, w, pixels, n);
    /* streamed: n a multiple of 16, so every block is of 4 or 2 whole vectors */
    const int64_t whole_end = n - n % (RUN_VECTORS * LANES),
                  rest = (n - whole_end + LANES - 1) / LANES;
    const int whole = n % LANES == 0;
    if (stream)
        run_blocks(1, RUN_VECTORS, 1, tail, out, init, run, w, done, pixels, 0, whole_end, n);
    else
        run_blocks(0, RUN_VECTORS, 1, tail, out, init, run, w, done, pixels, 0, whole_end, n);
    if (rest == 4)
        run_blocks(0, 4, whole, tail, out, init, run, w, done, pixels, whole_end, n, n);
    else if (rest == 3)
        run_blocks(0, 3, whole, tail, out, init, run, w, done, pixels, whole_end, n, n);
    else if (rest == 2 && stream)
        run_blocks(1, 2, 1, tail, out, init, run, w, done, pixels, whole_end, n, n);
    else if (rest == 2)
        run_blocks(0, 2, whole, tail, out, init, run, w, done, pixels, whole_end, n, n);
    else if (rest == 1)
        run_blocks(0, 1, whole, tail, out, init, run, w, done, pixels, whole_end, n, n);
    if (stream) /* the streamed stores before anything after the call */
        _mm_sfence();
}

/* Grouped pixels of G channels a group, G dividing 8
 * (avx512/dwconv.c: grouped_permuted), eight lanes; G = 8 four pixels at a
 * time (the sums, the partners' permutes and x's vector fill the sixteen
 * registers), the weights read by the FMAs. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
grouped_permuted(const int g, const int pixels_a_block, const int whole, __m256i mask,
                 float *restrict out, int64_t ld, const float *restrict init, const float *const *x,
                 const float *restrict w, int64_t taps, int64_t n, int64_t i0, int64_t pixels,
                 int64_t c0)
{
    enum { P = CG_GROUPED_PIXELS };
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i base = _mm256_and_si256(lane, _mm256_set1_epi32(~(g - 1)));
    __m256i partner[CG_GROUPED_MOST];
#pragma GCC unroll 8
    for (int j = 0; j < g; j++)
        partner[j] = _mm256_add_epi32(base, _mm256_set1_epi32(j));
    const __m256 start = init ? run_load(whole, mask, init + c0) : _mm256_setzero_ps();
    __m256 acc[P];
#pragma GCC unroll 8
    for (int i = 0; i < pixels_a_block; i++)
        acc[i] = start;
    for (int64_t t = 0; t < taps; t++)
#pragma GCC unroll 8
        for (int i = 0; i < pixels_a_block; i++) {
            const float *row = i0 + i < pixels ? x[(i0 + i) * taps + t] : NULL;
            if (!row)
                continue;
            const __m256 xv = run_load(whole, mask, row + c0);
#pragma GCC unroll 8
            for (int j = 0; j < g; j++)
                acc[i] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(xv, partner[j]),
                                         run_load(whole, mask, w + (t * g + j) * n + c0), acc[i]);
        }
#pragma GCC unroll 8
    for (int i = 0; i < pixels_a_block; i++)
        if (i0 + i < pixels) {
            run_store(whole, mask, out + (i0 + i) * ld + c0, acc[i]);
        }
}

/* The chunks of 8 channels for G (a constant once inlined). */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
grouped_chunks(const int g, float *restrict out, int64_t ld, const float *restrict init,
               const float *const *x, const float *restrict w, int64_t taps, int64_t n,
               int64_t pixels)
{
    const int block = g == 8 ? CG_GROUPED_PIXELS / 2 : CG_GROUPED_PIXELS;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n % LANES)), lane);
    for (int64_t i0 = 0; i0 < pixels; i0 += block) {
        int64_t c0 = 0;
        for (; c0 + LANES <= n; c0 += LANES)
            grouped_permuted(g, block, 1, tail, out, ld, init, x, w, taps, n, i0, pixels, c0);
        if (c0 < n)
            grouped_permuted(g, block, 0, tail, out, ld, init, x, w, taps, n, i0, pixels, c0);
    }
}

/* G = 2, 4 and 8; the others' groups straddle vectors, and G = 1 is the
 * depthwise kernels' (the training step calls this for G > 1 only): the
 * reference. */
__attribute__((target("avx2,fma"))) void
cg_f32_grouped_pixel_avx2(float *restrict out, int64_t ld, const float *restrict init,
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
 * (kernels/dwconv_rows_body.h), vectorised by the compiler for AVX2 + FMA. */
__attribute__((target("avx2,fma"))) void
cg_f32_dwconv_rows_avx2(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                        int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                        float *dst, double *db_sums)
{
    cg_dwconv_rows_body(plan, dy, x, c_first, c_last, first, last, acc, resume, dst, db_sums);
}

/* ---- grouped, a few channels a group (kernels/grouped_rows_body.h) ---- */

#define AVX2_F16C __attribute__((target("avx2,fma,f16c")))

/* Eight lanes of `tensor` from element i, fp32 or fp16. */
AVX2_F16C static inline __attribute__((always_inline)) __m256 load_whole(const void *tensor,
                                                                         int64_t i, const int half)
{
    if (half)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)tensor + i)));
    return _mm256_loadu_ps((const float *)tensor + i);
}

/* Eight lanes of `tensor` from element i, `mask`'s lanes (others zero);
 * fp16 through a copy where eight halves from i would pass the tensor's
 * `total` elements (AVX2 has no masked 16-bit load). */
AVX2_F16C static inline __attribute__((always_inline)) __m256
load8(const void *tensor, int64_t i, __m256i mask, int64_t total, const int half)
{
    if (!half)
        return _mm256_maskload_ps((const float *)tensor + i, mask);
    const uint16_t *h = (const uint16_t *)tensor + i;
    uint16_t few[LANES] = {0};
    if (i + LANES > total) {
        memcpy(few, h, (size_t)(total - i) * sizeof *h);
        h = few;
    }
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    return _mm256_and_ps(v, _mm256_castsi256_ps(mask));
}

/* load8, or (whole: a chunk whose shifted loads all stay inside the call's
 * channels) a plain load: the lanes that pair channels across groups then
 * hold products the sums drop. */
AVX2_F16C static inline __attribute__((always_inline)) __m256
load_chunk(const void *tensor, int64_t i, __m256i mask, int64_t total, const int half,
           const int whole)
{
    return whole ? load_whole(tensor, i, half) : load8(tensor, i, mask, total, half);
}

/* ---- the weight gradient's 3x3 (avx512/dwconv.c's block32), 8 channels a block ---- */

enum { TAPS3 = 9, PREFETCH_PIXELS = 8 };

/* The accumulators are named variables, not an array, so that they stay in
 * registers: nine of them, dy's vector and x's fill twelve of sixteen. */
#define ACC8_DECLARE(t)                                                                            \
    __m256 acc##t = resume ? _mm256_loadu_ps(saved + (t)*LANES) : _mm256_setzero_ps();
#define ACC8_TAP(t, kh, kw)                                                                        \
    if (row_ok[kh] && col_ok[kw])                                                                  \
        acc##t = _mm256_fmadd_ps(d, load_whole(x, corner + ((kh)*p->in_w + (kw)) * p->cin, half),  \
                                 acc##t);
#define ACC8_STORE(t) _mm256_storeu_ps(saved + (t)*LANES, acc##t)
/* A tap of an interior pixel: x from input row r's pointer, `off` bytes on. */
#define ACC8_INSIDE(t, r, off) acc##t = _mm256_fmadd_ps(d, load_bytes(r + (off), half), acc##t);

/* Eight lanes at byte address at, fp32 or fp16. */
AVX2_F16C static inline __attribute__((always_inline)) __m256 load_bytes(const char *at,
                                                                         const int half)
{
    if (half)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)at));
    return _mm256_loadu_ps((const float *)at);
}

/* How many pixels from (oh, ow) on, within this output row and `most`, have
 * all nine taps inside x: none unless (oh, ow)'s have. */
static inline int64_t inside_run(const cg_plan *p, int64_t oh, int64_t ow, int64_t most)
{
    const int64_t iy0 = oh * p->stride_h - p->pad_u, ix0 = ow * p->stride_w - p->pad_l;
    if (iy0 < 0 || iy0 + 2 >= p->in_h || ix0 < 0 || ix0 + 2 >= p->in_w)
        return 0;
    const int64_t ow_last = (p->in_w - 3 + p->pad_l) / p->stride_w; /* ix0 + 2 < in_w */
    const int64_t run = (ow_last < p->out_w - 1 ? ow_last : p->out_w - 1) - ow + 1;
    return run < most ? run : most;
}

/* The sums of rows [first, last) for the 8 channels from c_first, added to
 * those in saved[tap][channel] when resume, else from zero, and left there. */
AVX2_F16C static inline __attribute__((always_inline)) void
block8(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t first,
       int64_t last, float *saved, int resume, const int half, cg_tile_prefetch *next)
{
    ACC8_DECLARE(0)
    ACC8_DECLARE(1)
    ACC8_DECLARE(2)
    ACC8_DECLARE(3)
    ACC8_DECLARE(4)
    ACC8_DECLARE(5)
    ACC8_DECLARE(6)
    ACC8_DECLARE(7)
    ACC8_DECLARE(8)
    const int64_t per_image = p->out_h * p->out_w;
    const size_t elem = half ? 2 : 4;
    int64_t n = first / per_image, oh = first % per_image / p->out_w, ow = first % p->out_w;
    for (int64_t row = first; row < last;) {
        const int64_t iy0 = oh * p->stride_h - p->pad_u, ix0 = ow * p->stride_w - p->pad_l;
        const int64_t at_dy = row * p->cout + c_first;
        const int64_t run = inside_run(p, oh, ow, last - row);
        if (run > 0) { /* no checks: x walked from three row pointers, dy from one */
            const int64_t corner = ((n * p->in_h + iy0) * p->in_w + ix0) * p->cin + c_first;
            const int64_t tap_bytes = p->cin * (int64_t)elem, line = p->in_w * tap_bytes;
            const int64_t step = p->stride_w * tap_bytes, dy_step = p->cout * (int64_t)elem;
            const int64_t x_ahead = 2 * line + 2 * tap_bytes + PREFETCH_PIXELS * step;
            const char *r0 = (const char *)x + corner * (int64_t)elem, *r1 = r0 + line,
                       *r2 = r1 + line, *dp = (const char *)dy + at_dy * (int64_t)elem;
            for (int64_t i = 0; i < run; i++) {
                _mm_prefetch(dp + PREFETCH_PIXELS * dy_step, _MM_HINT_T0);
                _mm_prefetch(r0 + x_ahead, _MM_HINT_T0);
                if (next)
                    cg_tile_prefetch_step(next);
                const __m256 d = load_bytes(dp, half);
                ACC8_INSIDE(0, r0, 0)
                ACC8_INSIDE(1, r0, tap_bytes)
                ACC8_INSIDE(2, r0, 2 * tap_bytes)
                ACC8_INSIDE(3, r1, 0)
                ACC8_INSIDE(4, r1, tap_bytes)
                ACC8_INSIDE(5, r1, 2 * tap_bytes)
                ACC8_INSIDE(6, r2, 0)
                ACC8_INSIDE(7, r2, tap_bytes)
                ACC8_INSIDE(8, r2, 2 * tap_bytes)
                r0 += step;
                r1 += step;
                r2 += step;
                dp += dy_step;
            }
            row += run;
            ow += run; /* the run ends within the output row */
            if (ow == p->out_w) {
                ow = 0;
                if (++oh == p->out_h) {
                    oh = 0;
                    n++;
                }
            }
            continue;
        }
        /* strided rows defeat the hardware prefetcher: dy a few pixels ahead,
         * and x's bottom-right tap of that pixel */
        _mm_prefetch((const char *)dy + (at_dy + PREFETCH_PIXELS * p->cout) * elem, _MM_HINT_T0);
        const __m256 d = load_whole(dy, at_dy, half);
        int row_ok[3], col_ok[3];
        for (int k = 0; k < 3; k++) {
            row_ok[k] = (uint64_t)(iy0 + k) < (uint64_t)p->in_h;
            col_ok[k] = (uint64_t)(ix0 + k) < (uint64_t)p->in_w;
        }
        /* x element of tap (0, 0), possibly outside: only valid taps read */
        const int64_t corner = ((n * p->in_h + iy0) * p->in_w + ix0) * p->cin + c_first;
        const int64_t ahead = corner + (2 * p->in_w + 2 + PREFETCH_PIXELS * p->stride_w) * p->cin;
        if (ahead >= 0)
            _mm_prefetch((const char *)x + ahead * elem, _MM_HINT_T0);
        if (next)
            cg_tile_prefetch_step(next);
        ACC8_TAP(0, 0, 0)
        ACC8_TAP(1, 0, 1)
        ACC8_TAP(2, 0, 2)
        ACC8_TAP(3, 1, 0)
        ACC8_TAP(4, 1, 1)
        ACC8_TAP(5, 1, 2)
        ACC8_TAP(6, 2, 0)
        ACC8_TAP(7, 2, 1)
        ACC8_TAP(8, 2, 2)
        row++;
        if (++ow == p->out_w) {
            ow = 0;
            if (++oh == p->out_h) {
                oh = 0;
                n++;
            }
        }
    }
    ACC8_STORE(0);
    ACC8_STORE(1);
    ACC8_STORE(2);
    ACC8_STORE(3);
    ACC8_STORE(4);
    ACC8_STORE(5);
    ACC8_STORE(6);
    ACC8_STORE(7);
    ACC8_STORE(8);
}
#undef ACC8_DECLARE
#undef ACC8_TAP
#undef ACC8_STORE
#undef ACC8_INSIDE

/* Output pixels a tile that does not ask for the next: their x stays in L1
 * while every block of 8 channels passes over them (each reads a 32-byte
 * piece of its lines): the three input rows a tile's pixels reach within
 * TILE_BYTES, half of a 48 KiB L1 (128 pixels a tile, as the AVX-512
 * kernel's, made C = 128 1.2-1.7x slower than the generic loops: each block
 * fetched the tile's lines from L2 again). */
enum { TILE_BYTES = 24 << 10 };

static int64_t pixel_tile(const cg_plan *p)
{
    const int64_t pixel_bytes = 3 * p->cin * p->dtype_size * p->stride_w;
    const int64_t fit = TILE_BYTES / (pixel_bytes > 0 ? pixel_bytes : 1);
    return fit < 8 ? 8 : fit > 128 ? 128 : fit;
}

/* The sums of rows [first, last), tile by tile, a tile's x in L1 while
 * every block of 8 channels passes over it; or, when `asks`, tiles sized
 * for L2 (cg_prefetch_tile) whose next one comes in meanwhile (measured
 * 1.33x on mbv1_dw_28_s2, 1.20x on mbv1_dw_56, 1.13x on mbv1_dw_112 against
 * the L1 tiles without asking); then, with db_sums, the tile's dy added to
 * them from the cache (fp32). */
AVX2_F16C static inline __attribute__((always_inline)) void
tiles(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
      int64_t first, int64_t last, float *acc, int resume, double *db_sums, const int asks)
{
    const int half = p->dtype_size == 2;
    const int64_t tile = asks ? cg_prefetch_tile(p) : pixel_tile(p);
    const int64_t blocks = (c_last - c_first) / LANES;
    for (int64_t t0 = first; t0 < last; t0 += tile) {
        const int64_t t1 = last - t0 < tile ? last : t0 + tile;
        const int64_t t2 = last - t1 < tile ? last : t1 + tile;
        cg_tile_prefetch next;
        if (asks)
            cg_tile_prefetch_plan(&next, p, dy, x, t1, t2, (t1 - t0) * blocks);
        for (int64_t c = c_first; c < c_last; c += LANES) {
            float *saved = acc + (c - c_first) * TAPS3;
            if (half)
                block8(p, dy, x, c, t0, t1, saved, resume || t0 != first, 1, asks ? &next : NULL);
            else
                block8(p, dy, x, c, t0, t1, saved, resume || t0 != first, 0, asks ? &next : NULL);
        }
        if (db_sums)
            cg_f32_sum_rows_avx2(db_sums, (const float *)dy + t0 * p->cout + c_first, p->cout,
                                 t1 - t0, c_last - c_first);
    }
}

/* Each its own function, as on AVX-512. */
AVX2_F16C static __attribute__((noinline)) void
tiles_asking(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
             int64_t first, int64_t last, float *acc, int resume, double *db_sums)
{
    tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, 1);
}

AVX2_F16C static __attribute__((noinline)) void
tiles_plain(const cg_plan *p, const void *dy, const void *x, int64_t c_first, int64_t c_last,
            int64_t first, int64_t last, float *acc, int resume, double *db_sums)
{
    tiles(p, dy, x, c_first, c_last, first, last, acc, resume, db_sums, 0);
}

/* Whole blocks of 8 channels here; the last few channels, if any, on the
 * generic loops (a masked variant would double the code, whose compile
 * under the sanitizers dominates the build). */
AVX2_F16C void cg_f32_dwconv3x3_rows_avx2(const cg_plan *p, const void *dy, const void *x,
                                          int64_t c_first, int64_t c_last, int64_t first,
                                          int64_t last, float *acc, int resume, float *dst,
                                          double *db_sums)
{
    const int64_t c_whole = c_first + (c_last - c_first) / LANES * LANES;
    if (db_sums && !resume)
        memset(db_sums, 0, (size_t)(c_whole - c_first) * sizeof(double));
    if (c_whole == c_last && cg_tile_prefetch_pays(p, c_first, c_last, LANES))
        tiles_asking(p, dy, x, c_first, c_whole, first, last, acc, resume, db_sums);
    else
        tiles_plain(p, dy, x, c_first, c_whole, first, last, acc, resume, db_sums);
    for (int64_t c = c_first; dst && c < c_whole; c += LANES) { /* [tap][c] -> dw rows [c][tap] */
        const float *saved = acc + (c - c_first) * TAPS3;
        for (int64_t k = 0; k < LANES; k++)
            for (int t = 0; t < TAPS3; t++)
                dst[(c - c_first + k) * TAPS3 + t] = saved[t * LANES + k];
    }
    if (c_whole < c_last) /* their sums after the blocks', which may be resumed */
        cg_dwconv_rows_body(p, dy, x, c_whole, c_last, first, last,
                            acc + (c_whole - c_first) * TAPS3, resume,
                            dst ? dst + (c_whole - c_first) * TAPS3 : NULL,
                            db_sums ? db_sums + (c_whole - c_first) : NULL);
}

/* Bits 0-7 as a vector mask (lane l all ones where bit l is set). */
__attribute__((target("avx2"))) static inline __m256i lane_mask(unsigned bits)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), bit), bit);
}

/* A chunk's shift masks and load offsets (avx512/dwconv.c: grouped_masks). */
typedef struct grouped_masks {
    __m256i mask[CG_GROUPED_MOST];
    int64_t at[CG_GROUPED_MOST];
} grouped_masks;

/* One output pixel (avx512/dwconv.c: grouped_pixel), eight lanes. */
AVX2_F16C static inline __attribute__((always_inline)) void
grouped_pixel(const int g, const int half, const int whole, const int taps, const int checked,
              const grouped_masks *m, int64_t count, const void *dy, const void *x, int64_t y,
              int64_t at, int64_t tap_step, int64_t ix, int64_t dil, int64_t in_w, int64_t x_total,
              int64_t dy_total, __m256 *acc)
{
    __m256 yv[CG_GROUPED_MOST];
#pragma GCC unroll 8
    for (int d = 0; d < g; d++)
        yv[d] = load_chunk(dy, y + m->at[d], m->mask[d], dy_total, half, whole);
#pragma GCC unroll 12
    for (int t = 0; t < taps; t++) {
        if (t >= count || (checked && (ix + t * dil < 0 || ix + t * dil >= in_w)))
            continue;
        const int64_t xt = at + t * tap_step;
        const __m256 xv = load_chunk(x, xt, m->mask[0], x_total, half, whole);
        __m256 *a = acc + t * (2 * g - 1);
#pragma GCC unroll 8
        for (int d = 0; d < g; d++)
            a[g - 1 + d] = _mm256_fmadd_ps(xv, yv[d], a[g - 1 + d]);
#pragma GCC unroll 8
        for (int d = 1; d < g; d++)
            a[g - 1 - d] =
                _mm256_fmadd_ps(load_chunk(x, xt + m->at[d], m->mask[d], x_total, half, whole),
                                yv[0], a[g - 1 - d]);
    }
}

/* The rows of a chunk (avx512/dwconv.c: grouped_rows_of). */
AVX2_F16C static inline __attribute__((always_inline)) void
grouped_rows_of(const int g, const int half, const int whole, const int taps,
                const grouped_masks *m, const cg_plan *plan, const void *dy, const void *x,
                int64_t c0, int64_t kh, int64_t kw0, int64_t count, int64_t r0, int64_t r1,
                __m256 *acc)
{
    const int64_t x_total = plan->batch * plan->in_h * plan->in_w * plan->cin;
    const int64_t dy_total = plan->rows * plan->cout;
    const int64_t dil = plan->dil_w, in_w = plan->in_w;
    const int64_t tap_step = dil * plan->cin, pixel_step = plan->stride_w * plan->cin;
    cg_grouped_walk walk = cg_grouped_walk_start(plan, c0, kh, kw0, count, r0, r1);
    cg_grouped_run run;
    while (cg_grouped_next_run(&walk, &run)) {
        int64_t y = run.y, at = run.at;
        for (int64_t j = 0; j < run.length; j++, y += plan->cout, at += pixel_step) {
            if (j == run.inner_lo) /* the run's inside, unchecked */
                for (; j < run.inner_hi; j++, y += plan->cout, at += pixel_step)
                    grouped_pixel(g, half, whole, taps, 0, m, count, dy, x, y, at, tap_step, 0, dil,
                                  in_w, x_total, dy_total, acc);
            if (j == run.length)
                break;
            grouped_pixel(g, half, whole, taps, 1, m, count, dy, x, y, at, tap_step,
                          run.ix + j * plan->stride_w, dil, in_w, x_total, dy_total, acc);
        }
    }
}

/* The AVX-512 kernel's chunk (avx512/dwconv.c) on eight lanes, its sums in
 * at most twelve registers (2G - 1 where that is more). */
AVX2_F16C static inline __attribute__((always_inline)) void
grouped_chunk_g(const int g, const int half, const cg_plan *plan, const void *dy, const void *x,
                int64_t c_first, int64_t n, int64_t cb, int64_t kh, int64_t kw0, int64_t count,
                int64_t r0, int64_t r1, float *sums)
{
    enum { MOST = 12 };
    const int taps = MOST / (2 * g - 1) > 0 ? MOST / (2 * g - 1) : 1;
    grouped_masks m;
    const int valid = n - cb < LANES ? (int)(n - cb) : LANES;
    for (int d = 0; d < g; d++) {
        const unsigned bits = cg_grouped_pair_bits(cb, d, g, valid, LANES);
        m.mask[d] = lane_mask(bits);
        m.at[d] = bits ? d : 0;
    }
    __m256 acc[2 * MOST];
#pragma GCC unroll 24
    for (int a = 0; a < taps * (2 * g - 1); a++)
        acc[a] = _mm256_setzero_ps();
    if (cb + LANES + g - 1 <= n)
        grouped_rows_of(g, half, 1, taps, &m, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1,
                        acc);
    else
        grouped_rows_of(g, half, 0, taps, &m, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1,
                        acc);
#pragma GCC unroll 24
    for (int a = 0; a < taps * (2 * g - 1); a++)
        _mm256_storeu_ps(sums + a * LANES, acc[a]);
}

/* fp16 is a test a load (the same each time), not a copy of every chunk. */
#define GROUPED_CHUNK(G)                                                                           \
    AVX2_F16C static void grouped_chunk_##G(                                                       \
        const cg_plan *plan, const void *dy, const void *x, int64_t c_first, int64_t n,            \
        int64_t cb, int64_t kh, int64_t kw0, int64_t count, int64_t r0, int64_t r1, float *sums)   \
    {                                                                                              \
        grouped_chunk_g(G, plan->dtype_size == 2, plan, dy, x, c_first, n, cb, kh, kw0, count, r0, \
                        r1, sums);                                                                 \
    }
GROUPED_CHUNK(1)
GROUPED_CHUNK(2)
GROUPED_CHUNK(8)

/* ---- groups of 4: a group is a 128-bit lane, its shifts rotations ---- */

/* Taps a call of grouped_chunk_4: its sums, the rotations of dy and x fill
 * thirteen registers. */
enum { ROTATED_TAPS = 2 };

/* The chunk's lanes from element i: eight, or (four: a last chunk of one
 * group) four and zeros, so nothing past the chunk's channels is read. */
AVX2_F16C static inline __attribute__((always_inline)) __m256
load_groups(const void *tensor, int64_t i, const int four, const int half)
{
    if (!four)
        return load_whole(tensor, i, half);
    const __m128 v =
        half ? _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)((const uint16_t *)tensor + i)))
             : _mm_loadu_ps((const float *)tensor + i);
    return _mm256_insertf128_ps(_mm256_setzero_ps(), v, 0);
}

/* Rotation r of each group's four values: lane b + i takes b + (i + r) % 4. */
#define ROTATE4(v, r)                                                                              \
    ((r) == 0   ? (v)                                                                              \
     : (r) == 1 ? _mm256_permute_ps(v, 0x39)                                                       \
     : (r) == 2 ? _mm256_permute_ps(v, 0x4E)                                                       \
                : _mm256_permute_ps(v, 0x93))

/* The chunk's rows: for each pixel, dy's vector and its three rotations,
 * then for each tap x's vector times each (acc[t * 4 + r]). */
AVX2_F16C static inline __attribute__((always_inline)) void
rotated_rows(const int four, const int half, const cg_plan *plan, const void *dy, const void *x,
             int64_t c0, int64_t kh, int64_t kw0, int64_t count, int64_t r0, int64_t r1,
             __m256 *acc)
{
    const int64_t dil = plan->dil_w, in_w = plan->in_w;
    const int64_t tap_step = dil * plan->cin, pixel_step = plan->stride_w * plan->cin;
    cg_grouped_walk walk = cg_grouped_walk_start(plan, c0, kh, kw0, count, r0, r1);
    cg_grouped_run run;
    while (cg_grouped_next_run(&walk, &run)) {
        int64_t y = run.y, at = run.at;
        for (int64_t j = 0; j < run.length; j++, y += plan->cout, at += pixel_step) {
            const int inside = j >= run.inner_lo && j < run.inner_hi;
            const int64_t ix = run.ix + j * plan->stride_w;
            const __m256 y0 = load_groups(dy, y, four, half);
            const __m256 yr[4] = {y0, ROTATE4(y0, 1), ROTATE4(y0, 2), ROTATE4(y0, 3)};
#pragma GCC unroll 2
            for (int t = 0; t < ROTATED_TAPS; t++) {
                if (t >= count || (!inside && (ix + t * dil < 0 || ix + t * dil >= in_w)))
                    continue;
                const __m256 xv = load_groups(x, at + t * tap_step, four, half);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    acc[t * 4 + r] = _mm256_fmadd_ps(xv, yr[r], acc[t * 4 + r]);
            }
        }
    }
}

/* cg_grouped_chunk_fn for groups of 4 channels: where the generic chunk
 * makes the 2G - 1 = 7 shifts of dy against x (57% of their lanes pairing
 * channels of one group), each group's pairs are the four rotations of its
 * dy lane, every lane used: 4 FMAs a tap and pixel for the 7, and no
 * shifted load. Each sum is the same chain of FMAs in row order as the
 * generic chunk's, so the bits are the same. The sums are laid out as the
 * shifts' at the end. */
AVX2_F16C static void grouped_chunk_4(const cg_plan *plan, const void *dy, const void *x,
                                      int64_t c_first, int64_t n, int64_t cb, int64_t kh,
                                      int64_t kw0, int64_t count, int64_t r0, int64_t r1,
                                      float *sums)
{
    enum { G = 4, SHIFTS = 2 * G - 1 };
    const int half = plan->dtype_size == 2, four = cb + LANES > n;
    __m256 acc[ROTATED_TAPS * G];
#pragma GCC unroll 8
    for (int a = 0; a < ROTATED_TAPS * G; a++)
        acc[a] = _mm256_setzero_ps();
    if (four && half)
        rotated_rows(1, 1, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1, acc);
    else if (four)
        rotated_rows(1, 0, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1, acc);
    else if (half)
        rotated_rows(0, 1, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1, acc);
    else
        rotated_rows(0, 0, plan, dy, x, c_first + cb, kh, kw0, count, r0, r1, acc);
    for (int64_t t = 0; t < count; t++) {
        float *sum = sums + t * SHIFTS * LANES, rot[G][LANES];
        memset(sum, 0, SHIFTS * LANES * sizeof(float));
        for (int r = 0; r < G; r++)
            _mm256_storeu_ps(rot[r], acc[t * G + r]);
        /* lane b + i of rotation r pairs x's channel i with dy's co = (i + r) % 4:
         * shift d = co - i, at x's lane (d >= 0) or dy's (d < 0) */
        for (int r = 0; r < G; r++)
            for (int l = 0; l < LANES; l++) {
                const int b = l - l % G, i = l % G, co = (i + r) % G, d = co - i;
                sum[(d + G - 1) * LANES + (d >= 0 ? l : b + co)] = rot[r][l];
            }
    }
}

AVX2_F16C void cg_f32_grouped_rows_avx2(const cg_plan *plan, const void *dy, const void *x,
                                        int64_t c_first, int64_t c_last, int64_t first,
                                        int64_t last, float beta, float *dst)
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
    const int shifts = 2 * (int)plan->cin_g - 1;
    const int most = plan->cin_g == 4 ? ROTATED_TAPS * shifts : 12 / shifts > 0 ? 12 : shifts;
    cg_grouped_rows_body(chunks[plan->cin_g - 1], LANES, most, plan, dy, x, c_first, c_last, first,
                         last, beta, dst);
}
