/* SPDX-License-Identifier: MIT */
/* convgrad-bench: shared declarations of the benchmark's parts.
 *
 *   main.c      options, the layer set, the interleaved rounds, the checks, the reports
 *   limits.c    the machine's limits (FMA loop, STREAM memory bandwidth, OpenBLAS sgemm)
 *               and the launch/barrier costs
 *   shapes.c    --shapes: layers in oneDNN benchdnn's convolution descriptor syntax
 *   baseline.c  the plain im2col + OpenBLAS sgemm peer
 *   onednn.c    the oneDNN peers: backward-weights, and the training step's forward,
 *               backward-data and backward-weights primitives (stubs when oneDNN is not
 *               built in)
 *   tool_info.c the build, CPU and output-directory helpers it shares with train_cnn
 *
 * Benchmark-only code: it links the library as an outside program does (the
 * public header only) and never reaches into src/. */
#ifndef CG_BENCH_H
#define CG_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "bench_common.h"
#include "convgrad.h"
#include "tool_info.h"

/* ---- shapes.c ------------------------------------------------------------ */
/* Reads the layers of a --shapes file (one benchdnn descriptor a line, e.g.
 * mb8ic64ih56oc64oh56kh3ph1n"res2a"; # comments, blank lines). 0 and a
 * malloc'd array (names malloc'd too), or -1 and a message naming the file and
 * the line in err. */
int bench_read_shapes(const char *path, bench_layer **layers, int *n, char *err, size_t errlen);

double bench_now(void); /* monotonic seconds */

/* ---- limits.c ---------------------------------------------------------- */
typedef struct fma_result {
    const char *isa; /* "avx512f", "avx2+fma" or "scalar" */
    double gflops;
} fma_result;
/* The FMA loop of `bits` (512, 256; 0: the widest the CPU has) on `threads`
 * threads at once (total GFLOP/s); a width the CPU lacks gives its widest. */
fma_result bench_fma_limit(int threads, int bits, int quick);
/* One FMA loop of bench_fma_limit's width and a few milliseconds on `threads`
 * threads at once (one: the calling thread), GFLOP/s: what the cores give at
 * this moment, timed in each round beside the calls it is a limit for. */
double bench_fma_now(int threads, int bits);
/* The AVX2+FMA loop only (0 if the CPU lacks it), for context next to OpenBLAS's kernels. */
double bench_fma_avx2(int threads, int quick);
/* STREAM's copy (a = b) and triad (a = b + s*c) on `threads` threads at once, each
 * on its part of three float arrays of array_bytes (4x the last-level cache; 64 MiB
 * under --quick); best of reps runs, GB/s counted as STREAM does (copy 2 x 4 bytes
 * an element, triad 3 x 4). 0 GB/s when the arrays could not be allocated. */
typedef struct stream_result {
    double copy_gbs, triad_gbs;
    size_t array_bytes, llc_bytes; /* llc_bytes 0: unknown */
    int reps;
} stream_result;
stream_result bench_stream(int threads, int quick);
/* OpenBLAS sgemm on an n x n x n product with `threads` OpenBLAS threads; restores 1. */
double bench_sgemm_limit(int n, int threads, int reps);
/* Medians in microseconds: core_mask_launch of an empty entry, one sys_bar round, and
 * the library's whole fixed cost a call (fp_conv_grad_filter_s of one pixel, one
 * channel: checks, plan, its own launch, barriers and sums). */
typedef struct overhead_result {
    int mask, cores;
    double launch_us, bar_us, call_us;
    int launches, rounds;
    int ok; /* every launch returned 0 */
} overhead_result;
overhead_result bench_overhead(int mask, int quick);

/* ---- baseline.c -------------------------------------------------------- */
size_t baseline_col_bytes(const bench_shape *s);
/* dw[Cout][Kh][Kw][Cin/G] = im2col(x) then one cblas_sgemm per group (one for group 1).
 * col holds baseline_col_bytes(s). OpenBLAS runs on whatever bench_blas_threads set:
 * the caller sets the thread count before the timed call and 1 again after it
 * (convgrad wants 1, process-wide). */
void baseline_run(const bench_shape *s, const float *x, const float *dy, float *dw, float *col);
void bench_blas_threads(int threads); /* openblas_set_num_threads */

/* ---- onednn.c ---------------------------------------------------------- */
typedef struct onednn_conv onednn_conv;
int onednn_available(void);
/* One line: version, threading runtime, ISA; or why it is not available. */
const char *onednn_describe(void);
/* The primitive for shape s on `threads` threads (created once, outside any timing).
 * NULL and a reason in err when it cannot be made. x and dy are used in place. */
onednn_conv *onednn_create(const bench_shape *s, int threads, const float *x, const float *dy,
                           char *err, size_t errlen);
const char *onednn_impl(const onednn_conv *c);    /* e.g. "jit:avx512_core" */
const char *onednn_wformat(const onednn_conv *c); /* "OHWI (plain)" or "blocked" */
/* Runs the primitive once and waits for it: this is what is timed. 0 on success. */
int onednn_execute(onednn_conv *c);
/* Copies the last result to dw in OHWI ([G][O/G][Kh][Kw][I/G]) through a
 * oneDNN reorder when oneDNN chose another layout; returns its seconds, or < 0. */
double onednn_to_ohwi(onednn_conv *c, float *dw);
void onednn_set_threads(int threads); /* the thread count the next execution uses */
void onednn_destroy(onednn_conv *c);
/* What oneDNN would do for fp16 on this shape (a note; fp16 is not measured). */
const char *onednn_fp16_note(const bench_shape *s);

/* The training step's peer: forward_training with bias, backward data and
 * backward weights with diff_bias, NHWC activations in the caller's buffers
 * (x, dy read; y, dx, db written), weights in oneDNN's own layouts (format
 * any; the caller's OHWI w is reordered into them here, once, untimed).
 * Made on `threads` threads, outside any timing. NULL and a reason in err
 * when it cannot be made. */
typedef struct onednn_train onednn_train;
onednn_train *onednn_train_create(const bench_shape *s, int threads, const float *x, const float *w,
                                  const float *b, const float *dy, float *y, float *dx, float *db,
                                  char *err, size_t errlen);
/* "fwd <impl>, bwd-data <impl>, bwd-weights <impl>" */
const char *onednn_train_impl(const onednn_train *c);
/* Runs the three primitives in turn, waiting for each: this is what is timed.
 * t gets the seconds of forward, backward data, backward weights (+ bias). 0 on success. */
int onednn_train_execute(onednn_train *c, double t[3]);
/* The last diff_weights in OHWI ([G][O/G][Kh][Kw][I/G]), reordered when oneDNN
 * chose another layout (not timed). 0 on success. */
int onednn_train_dw_ohwi(onednn_train *c, float *dw);
void onednn_train_destroy(onednn_train *c);

/* ---- main.c: the layer set, the results, the report helpers ------------- */
enum { BENCH_MAX_LAYERS = 4096 };

/* IMPL_ANY_ORDER: convgrad with cg_set_reproducible(0) (one piece of each sum a
 * core), fp32; beside IMPL_CONVGRAD it shows what the same bits on every mask cost. */
enum impl { IMPL_CONVGRAD, IMPL_ONEDNN, IMPL_BASELINE, IMPL_ANY_ORDER, NIMPL };
/* convgrad, either way (no threads of its own to settle after). */
int is_convgrad(int impl);
enum dtype { DT_FP32, DT_FP16 };

/* "convgrad", "convgrad-fp16", "oneDNN", "im2col+BLAS", "cg any-order" */
const char *impl_label(int impl, int dtype);
const char *impl_key(int impl, int dtype); /* the CSV's names */
/* The operator's parameters of a layer (buffer_size_ its lower bound). */
ConvParameter bench_param_of(const bench_shape *s);
double layer_flops(const bench_shape *s); /* 2*N*OH*OW*Cout*Kh*Kw*Cin/G */
/* The bytes the filter gradient must move at least: x and dy read once, dw written
 * once, in dtype's elements (fp16: all three binary16, as hp_'s). */
double layer_min_bytes(const bench_shape *s, int dtype);
/* A dense layer: group 1 (not depthwise or grouped). */
int is_dense(const bench_layer *L);
/* A depthwise layer: one input and one output channel a group (group = Cin = Cout > 1). */
int is_depthwise(const bench_layer *L);

/* One implementation, dtype and mask on one layer: medians of the timed
 * (interleaved) rounds, and of the warm burst after them (back-to-back calls;
 * warm_reps 0: none). */
/* The cost of the same bits on every mask: convgrad (fp32) and cg any-order on
 * the same mask, back to back in pairs (the first of them in turn), each the
 * best of COST_CALLS calls; the median of convgrad's time over any-order's.
 * Drift between two calls a few ms apart is small; between two medians taken
 * over minutes it is not. */
enum { COST_PAIRS = 15, QUICK_COST_PAIRS = 2, COST_CALLS = 2 };

/* Warm rounds of a run at most (bench's WARM_ROUNDS). */
enum { WARM_ROUNDS_MOST = 8 };

typedef struct result {
    int layer, impl, dtype, mask, cores, reps;
    double median_ms, min_ms, max_ms, gflops;
    int warm_reps;
    double warm_ms, warm_gflops;
    double warm_round_ms[WARM_ROUNDS_MOST]; /* each warm round's median (0: no burst) */
    /* the share (%) of the FMA loop timed in the same round (bench_fma_now), the
     * median over the timed rounds and over the warm ones (0: none), and those
     * loops' median GFLOP/s */
    double pct_fma, warm_pct_fma, fma_gflops, warm_fma_gflops;
    double reorder_ms; /* oneDNN: the conversion to OHWI, not in median_ms */
    double cost_ratio; /* any-order: the median of convgrad's time over its own, in pairs
                          back to back (0: none) */
    int ok;
    int same_bits; /* convgrad on 2+ cores: 1 its 1-core result's bits, 0 not, -1 not compared */
    char check_desc[200];
    double worst;
    char dnn_impl[64];
    size_t ws_bytes, scratch_bytes;
} result;

extern result *g_results;
extern int g_nresults;
extern int g_reps_asked;
/* The result with a median for (layer, impl, dtype, cores), or NULL. */
const result *find_result(int layer, int impl, int dtype, int cores);
/* The figure the targets judge: the warm median when there is one, else the
 * interleaved median (ms). */
double judged_ms(const result *r);
/* a's judged time over b's: where both had warm bursts, the median of the
 * warm rounds' ratios (a round times every implementation and mask of a
 * layer within a second or so, so a change of the machine's speed between
 * rounds, as a busy host's, cancels), else judged_ms(a) / judged_ms(b). */
double judged_ratio(const result *a, const result *b);

/* ---- the training step: cg_conv2d_* against oneDNN's three primitives ---- */
enum train_impl { TRAIN_CONVGRAD, TRAIN_ONEDNN, NTRAIN };
/* The timed phases of one step. convgrad: cg_conv2d_forward (with bias),
 * cg_conv2d_backward_data, cg_conv2d_backward_weights_bias (dw and db), and
 * the whole backward in one call, cg_conv2d_backward (dx, dw and db); oneDNN:
 * forward_training (with bias), backward data, backward weights with
 * diff_bias (one primitive), and the whole backward: the two. The step is
 * the forward and the whole backward: convgrad's bwd-d and bwd-w are timed
 * alone, before its step's calls, for the phase table. */
enum { PH_FWD, PH_BWD_DATA, PH_BWD_WEIGHTS, PH_BWD, NPHASE };

/* A phase's FLOPs in convolutions' (the whole backward: two). */
static inline double phase_convolutions(int phase)
{
    return phase == PH_BWD ? 2.0 : 1.0;
}

/* Medians of the timed (interleaved) rounds, and of the warm burst after them
 * (back-to-back steps, as the filter gradient's; warm_reps 0: none). */
typedef struct train_result {
    int layer, impl, mask, cores, reps;
    double median_ms, min_ms, max_ms; /* the whole step */
    double gflops;                    /* train_flops over the median */
    double phase_ms[NPHASE];          /* the median of each phase alone */
    int warm_reps;
    double warm_ms, warm_gflops, warm_phase_ms[NPHASE];
    /* each warm round's medians: the step's, then each phase's (0: no burst) */
    double warm_round_ms[WARM_ROUNDS_MOST][1 + NPHASE];
    /* each phase's share (%) of the FMA loop timed in the same round, as result's */
    double phase_pct_fma[NPHASE], warm_phase_pct_fma[NPHASE];
    int ok;
    int same_bits; /* as result's: y, dx, dw and db against the 1-core step's */
    char check_desc[240];
    double worst;
    char dnn_impl[160];
} train_result;

extern train_result *g_train;
extern int g_ntrain;
extern int g_train_reps_asked;
/* The result with a median for (layer, train_impl, cores), or NULL. */
const train_result *find_train(int layer, int impl, int cores);
/* A median (ms) of the whole step (phase -1) or of one PH_* phase: the warm
 * burst's (warm 1; 0 when it had none) or the interleaved rounds' (warm 0). */
double train_ms(const train_result *r, int phase, int warm);
/* The figure the targets judge: the warm median when there is one, else the
 * interleaved one. */
double train_judged_ms(const train_result *r, int phase);
/* a's judged time of the step (phase -1) or a phase over b's, as
 * judged_ratio: the median of the warm rounds' ratios where both had bursts. */
double train_judged_ratio(const train_result *a, const train_result *b, int phase);
const char *train_label(int impl); /* "convgrad", "oneDNN" */
const char *train_key(int impl);   /* the CSV's names */
/* 3 * layer_flops: forward, backward data, backward weights (the bias not counted) */
double train_flops(const bench_shape *s);

/* The machine's limits, measured at each thread count the run uses. */
typedef struct limits {
    int threads[33];
    int n;
    double fma[33], fma_avx2[33], sgemm[33];
    double copy_gbs[33], triad_gbs[33]; /* STREAM copy and triad, GB/s */
    const char *fma_isa;
    int sgemm_n;
    size_t stream_bytes, llc_bytes; /* each STREAM array's; the last-level cache (0: unknown) */
    int stream_reps;
    const char *fma_note; /* why that width: the kernel set that runs */
    int fma_bits;         /* its width for bench_fma_now: 512, 256, or 0 (the CPU's widest) */
} limits;

extern limits g_lim;
/* FMA limit (GFLOP/s) for a run on `cores` cores: the figure at min(cores, CPUs) threads. */
double fma_limit_for(int cores);
/* The memory bandwidth (GB/s, STREAM triad) for a run on `cores` cores, the same way. */
double bandwidth_for(int cores);

/* Prints to stdout and to OUT/summary.txt (clearing the progress line first). */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- emulate.c -------------------------------------------------------------- */
typedef struct bench_emulate_opts {
    const char *out;   /* the output directory */
    int mask;          /* the emulated mask */
    const int *layers; /* indices into bench_layers */
    int nlayers;
    int reps; /* timed calls a (layer, mask) */
    int quick, no_plots;
} bench_emulate_opts;
/* --emulate: the table, emulate.csv and the Gantt chart; 0, or an exit status. */
int bench_emulate(const bench_emulate_opts *o);

/* ---- report.c --------------------------------------------------------------- */
void print_table_header(void);
void print_rows_for_layer(int li); /* the table's rows of one finished layer */
int max_cores_measured(void);
/* OUT/name for writing, or NULL after saying why not (path gets its name). */
FILE *csv_open(const char *out_dir, const char *name, char *path, size_t len);
/* Closes f: 0, or -1 after saying that path could not be written. */
int csv_close(FILE *f, const char *path);
/* Ends a row (header: the header row) with the cpu and commit columns. */
void csv_end_row(FILE *f, int header);
/* The CSV files: 0, or -1 after saying why they could not be written. */
int write_csv(const char *out_dir);
/* 1 when the PNGs were written; else 0 and why. */
int write_plots(const char *out_dir, int no_plots, char *why, size_t whylen);
/* The filter gradient's roofline: for each memory-bound (layer, dtype, cores), the
 * bytes moved at least, the GB/s achieved and their share of the measured bandwidth. */
void print_roofline_table(void);
/* convgrad against cg any-order: the cost of the same bits on every mask. */
void print_reproducible_cost(void);
void report_targets(const overhead_result *ov, int nov);
/* The training step: its table (every layer run, in run order), its geometric means,
 * the roofline of its memory-bound phases, and OUT/training.csv. */
void print_train_table(void);
int write_train_csv(const char *out_dir);

#endif
