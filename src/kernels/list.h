/* SPDX-License-Identifier: MIT */
/* The kernel layer's types and the declaration of every kernel of the list
 * (kernels.inc). A kernel computes; it knows nothing of cores or tiles of
 * the long sum, and the context (context.h) says which one runs. */
#ifndef CG_KERNELS_LIST_H
#define CG_KERNELS_LIST_H
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* The one guard of everything x86 (CMake option CONVGRAD_X86_KERNELS). */
#ifndef CG_X86_KERNELS
#define CG_X86_KERNELS 0
#endif

/* Kernel sets, narrowest first: CONVGRAD_ISA names one. */
typedef enum cg_isa { CG_ISA_REF, CG_ISA_AVX2, CG_ISA_AVX512 } cg_isa;

/* CPU features a kernel needs (kernels.inc, column `features`). */
enum {
    CG_CPU_AVX = 1u << 0,
    CG_CPU_AVX2 = 1u << 1,
    CG_CPU_FMA = 1u << 2,
    CG_CPU_F16C = 1u << 3,
    CG_CPU_AVX512F = 1u << 4,
    CG_CPU_AVX512BW = 1u << 5,
    CG_CPU_AVX512VL = 1u << 6,
    CG_CPU_AVX512_FBWVL = CG_CPU_AVX512F | CG_CPU_AVX512BW | CG_CPU_AVX512VL,
    CG_CPU_INTEL = 1u << 7, /* "GenuineIntel": not a feature, what a kernel tunes for */
};

/* The packed micro-kernel: C[i][j] = sum over p < k of a[p*mr + i] *
 * b[p*nr + j] + (beta ? C[i][j] : init ? init[j] : 0), for i < m <= mr, j <
 * n <= nr, where mr x nr is the kernel's line of the list. `a` is an A panel
 * (k steps of mr floats, rows m..mr-1 zero), `b` a B micro-panel (k steps
 * of nr floats, columns n..nr-1 zero), as the packers (src/kernels.c,
 * src/gemm/packed.c) lay them out; beta is 0 (C is written, never read) or
 * 1; init, where beta is 0, a row every row of C starts from (the forward's
 * bias; NULL: zeros); nothing of C past row m or column n is touched. Along the way the kernel
 * prefetches the cache lines [prefetch, prefetch_end) into L2, one every few steps (a hint for what
 * the caller reads next: NULL, NULL for none). */
typedef void cg_gemm_panel_fn(int m, int n, int k, const float *a, const float *b, float beta,
                              const float *init, float *c, int ldc, const char *prefetch,
                              const char *prefetch_end);

/* The indirect micro-kernel: gemm_panel's product with A's rows read in
 * place, through pointers, where gemm_panel reads a packed A panel. The sum
 * runs over `pieces` pieces of len[q] steps each: C[i][j] = sum over q <
 * pieces and p < len[q] of a[q*lda + i][p] * b[(s_q + p)*nr + j] + (beta ?
 * C[i][j] : init ? init[j] : 0), s_q = len[0] + ... + len[q-1], for i < m <=
 * mr and j < n <= nr (the list's tile, gemm_panel's of the same ISA). Row i of piece q is
 * len[q] contiguous floats at a[q*lda + i] (a pixel's channels at one tap:
 * the forward's x, the input gradient's dy; zeros for padding); `b` is a B
 * micro-panel, beta and init as gemm_panel's, the prefetch range the same
 * hint; nothing of C past row m or column n is touched. */
typedef void cg_gemm_indirect_fn(int m, int n, int pieces, const int *len, const float *const *a,
                                 int64_t lda, const float *b, float beta, const float *init,
                                 float *c, int ldc, const char *prefetch, const char *prefetch_end);

/* The in-place micro-kernel of the weight gradient: both operands read where
 * they lie, in runs (a stretch of an output row through one tap: its steps
 * are evenly spaced in dy and in x). C[i][j] = beta*C[i][j] + the sum over
 * runs q < runs and p < run[q].len of run[q].a[p*lda + i] *
 * run[q].b[p*ldb + j], for i < m <= mr and j < n <= nr (the list's tile);
 * nothing of A past row m, of B past column n, or of C past either is
 * touched. beta is 0 (C written, never read) or 1. The kernel prefetches
 * the cache lines [prefetch, prefetch_end) into L2, a few at a time among
 * its steps or all at once where its loop has no register to spare (a hint
 * for what the caller reads next: NULL, NULL for none). */
typedef struct cg_gemm_run {
    const float *a, *b;
    int64_t len;
} cg_gemm_run;
typedef void cg_gemm_runs_fn(int m, int n, int runs, const cg_gemm_run *run, int64_t lda,
                             int64_t ldb, float beta, float *c, int ldc, const char *prefetch,
                             const char *prefetch_end);

/* The packers' rows: step t of a panel reads a segment of a tensor (a
 * kernel row or a tap of an im2col row, or a row of dy) whose column `col`
 * is element at[t] + col, and is zero outside [lo[t], hi[t]) (padding). */
typedef struct cg_pack_rows {
    const int64_t *at, *lo, *hi;
} cg_pack_rows;

/* Where a packer puts column j of step t: dst[(j / piece) * panel + t * step
 * + j % piece]. One panel's steps: piece = step, panel = kb * step; several
 * groups' columns side by side in a step of the source, each into its own
 * panel: piece = the group's columns. */
typedef struct cg_panel_layout {
    int64_t step, piece, panel;
} cg_panel_layout;

/* Columns [a, a + n) of the kb steps' segments, laid out as `to` says;
 * nothing else written. A step at a time, across the pieces, so each
 * segment is read in order. src is fp32 (pack_rows) or IEEE binary16 raw
 * bits (pack_rows_f16, converted on the way); src NULL (fp32 only): zeros. */
typedef void cg_pack_rows_fn(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                             const float *src, const cg_pack_rows *rows, int64_t a);
typedef void cg_pack_rows_f16_fn(float *dst, const cg_panel_layout *to, int64_t kb, int64_t n,
                                 const void *src_halves, const cg_pack_rows *rows, int64_t a);

/* gemm_panel with its B micro-panel packed on the way: b = what pack_rows
 * (or, where halves, pack_rows_f16) makes of columns [col, col + n) of the
 * k steps' segments of src (fp32, or IEEE binary16 raw bits where halves;
 * a panel of nr-float steps, columns n..nr-1 zero), then C as
 * gemm_panel(m, n, k, a, b, ...) gives, to the bit. A specialisation of
 * gemm_panel, of its tile (NULL in the context where none runs): the
 * kernel's first register tile reads B where it lies and writes the panel
 * as it goes, so the packing's loads wait behind FMAs, not before them. */
typedef void cg_gemm_panel_packing_fn(int m, int n, int k, const float *a, float *b,
                                      const void *src, int halves, const cg_pack_rows *rows,
                                      int64_t col, float beta, const float *init, float *c, int ldc,
                                      const char *prefetch, const char *prefetch_end);

/* The transposing packer, for A panels whose rows are pixels (the forward's
 * x, the input gradient's dy): one panel of mr rows, dst[j*mr + r] = column
 * a + j of row r's segment (src[rows->at[r] + a + j], zero outside
 * [rows->lo[r], rows->hi[r])) for r < m <= mr and j < n, and zero in rows m
 * to mr - 1; nothing else written. The tables are indexed by row here. */
typedef void cg_pack_transposed_fn(float *dst, int64_t mr, int64_t m, int64_t n, const float *src,
                                   const cg_pack_rows *rows, int64_t a);

/* Depthwise weight gradient over rows [first, last) of the sum, output
 * channels [c_first, c_last): dst[c - c_first][tap] = sum of dy[row][c] *
 * x[in(row, tap)][c / m], m = plan->cout_g (the channel multiplier; 1: one
 * output channel an input channel; c_first and c_last multiples of m); fp32 or fp16 tensors as
 * plan->dtype_size says. `acc`
 * holds taps * (c_last - c_first) floats. With db_sums (fp32 only; NULL:
 * none), also the bias gradient's sums while dy is in cache:
 * db_sums[c - c_first] = the sum of dy[row][c] over the rows, from zero in
 * row order (one chain of double adds: cg_sum_rows_fn's bits). A sum may
 * go in several calls over consecutive rows, with the bits of one: dst NULL
 * leaves the sums in acc (and db_sums), and `resume` adds to them there.
 * dwconv_rows kernels serve every kernel size, dilation and multiplier,
 * dwconv3x3_rows kernels 3x3 of dilation 1 and multiplier 1 only. */
typedef void cg_dwconv_rows_fn(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                               int64_t c_last, int64_t first, int64_t last, float *acc, int resume,
                               float *dst, double *db_sums);
typedef cg_dwconv_rows_fn cg_dwconv3x3_rows_fn;

/* Grouped weight gradient, G = cin_g = cout_g channels a group (G <=
 * CG_GROUPED_MOST), over rows [first, last) and the whole groups of channels
 * [c_first, c_last): dst[(c - c_first) / G * G + co][tap * G + ci] (rows
 * row_len apart; c's group, co and ci < G) = (beta ? dst : 0) + the sum of
 * dy[row][group's co] * x[in(row, tap)][group's ci]; fp32 or fp16 tensors
 * as plan->dtype_size says. */
typedef void cg_grouped_rows_fn(const cg_plan *plan, const void *dy, const void *x, int64_t c_first,
                                int64_t c_last, int64_t first, int64_t last, float beta,
                                float *dst);

/* The weight gradient of small dw rows, as outer products: over rows
 * [first, last) and groups [g_first, g_last), dst[(g - g_first) * cout_g +
 * co][j] (rows row_len apart) = (beta ? dst : 0) + the sum of
 * dy[row][g*cout_g + co] * im2col(x)[row][j] for co < cout_g, j < row_len
 * (the im2col value of group g's channels, 0 outside the image); fp32 or fp16
 * tensors as plan->dtype_size says. Each element's sum is formed from zero
 * in row order, one FMA a row, whatever the blocking, so the bits depend on
 * [first, last) alone. Needs cout_g <= CG_OUTER_MOST_COUT and row_len <=
 * CG_OUTER_MOST_ROW. */
typedef void cg_outer_rows_fn(const cg_plan *plan, const void *dy, const void *x, int64_t g_first,
                              int64_t g_last, int64_t first, int64_t last, float beta, float *dst);

/* One pixel of a depthwise convolution: out[c] = (init ? init[c] : 0) +
 * the sum over taps t with x[t] != NULL of x[t][c] * w[t * n + c], c < n
 * (the input gradient of a stride over 1, whose taps differ a pixel).
 * Where `stream` is set, out goes to memory, not to be read soon: a kernel
 * may write it with non-temporal stores where out and n floats are whole
 * lines, which the caller orders (cg_stream_fence) once after its pixels:
 * a fence a pixel made a call 1.5x slower. */
typedef void cg_dwconv_pixel_fn(float *restrict out, const float *restrict init,
                                const float *const *x, const float *restrict w, int64_t taps,
                                int64_t n, int stream);

/* Orders the non-temporal stores before it (a dwconv_pixel's with
 * `stream`) before every store and load after it. */
static inline void cg_stream_fence(void)
{
#if CG_X86_KERNELS
    __builtin_ia32_sfence();
#endif
}

/* A run of output pixels of a depthwise convolution (NHWC, n channels)
 * through the same taps [kw0, kw1) of every kernel row: for i < pixels and
 * c < n, out[i*n + c] = (init ? init[c] : 0) + the sum over kh < kernel_h
 * with rows[kh] != NULL and kw in [kw0, kw1) of
 * rows[kh][i*pixel_step + (kw - kw0)*tap_step + c] * w[(kh*kernel_w + kw)*n + c].
 * rows[kh] is the source row at the run's first pixel and tap kw0 (NULL: the
 * kernel row is outside the source); the steps are in floats, tap_step of
 * either sign (the forward walks x forwards, the input gradient dy
 * backwards). `ask`, if not NULL, is stepped (kernels/tile_prefetch.h)
 * once a block of pixels and channels: data a later run reads. Where
 * `stream` is set, out goes to memory, not to be read soon (the call's
 * output is larger than the context's stream_bytes): a kernel may write it
 * with non-temporal stores, fenced before it returns. */
typedef struct cg_dwconv_run {
    const float *const *rows;
    int64_t kernel_h, kernel_w, kw0, kw1, pixel_step, tap_step;
    struct cg_tile_prefetch *ask;
    int stream;
} cg_dwconv_run;
typedef void cg_dwconv_run_fn(float *restrict out, const float *restrict init,
                              const cg_dwconv_run *run, const float *restrict w, int64_t pixels,
                              int64_t n);

/* Up to CG_GROUPED_PIXELS pixels of a grouped convolution of G channels a
 * group (as many in as out, G <= CG_GROUPED_MOST; n channels, a multiple of
 * G): for pixel i < pixels, out[i * ld + c] = (init ? init[c] : 0) + the
 * sum over taps t with x[i * taps + t] != NULL and j < G of
 * x[i * taps + t][c - c % G + j] * w[(t * G + j) * n + c], c < n: each
 * channel's sum over its group's channels (the forward: x's, lane c an
 * output channel; the input gradient: dy's, lane c an input channel).
 * Nothing else of the rows is read. */
typedef void cg_grouped_pixel_fn(float *restrict out, int64_t ld, const float *restrict init,
                                 const float *const *x, const float *restrict w, int64_t taps,
                                 int64_t g, int64_t n, int64_t pixels);
enum { CG_GROUPED_PIXELS = 8 };

/* A transpose: dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j <
 * cols (NCHW's tensors staged as NHWC and back); nothing else written. */
typedef void cg_transpose_fn(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                             int64_t rows, int64_t cols);

/* Column sums in double (the bias gradient): sum[k] += src[r*ld + k] for
 * r < rows in row order, k < n: each column's sum one chain of double adds,
 * so every kernel of the slot gives the same bits. */
typedef void cg_sum_rows_fn(double *sum, const float *src, int64_t ld, int64_t rows, int64_t n);

/* IEEE binary16 (raw bits, unaligned) <-> float, n values; float -> half
 * rounds to nearest even. */
typedef void cg_f16_to_f32_fn(float *dst, const void *src_halves, size_t n);
typedef void cg_f32_to_f16_fn(void *dst_halves, const float *src, size_t n);

#define CG_KERNEL(slot, name, isa, features, mr, nr) cg_##slot##_fn name;
#include "kernels/kernels.inc"

/* A line of the list, as data. `fn` is the kernel (cast it back to
 * cg_<slot>_fn before calling). */
typedef void cg_any_fn(void);
typedef struct cg_kernel_entry {
    const char *slot, *name;
    cg_isa isa;
    unsigned features;
    int mr, nr;
    cg_any_fn *fn;
} cg_kernel_entry;

/* The whole list, in its order; *count is set to its length. */
const cg_kernel_entry *cg_kernel_list(int *count);
#endif
