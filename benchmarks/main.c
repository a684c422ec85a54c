/* SPDX-License-Identifier: MIT */
/* convgrad-bench: fp_/hp_conv_grad_filter_s (host mode) on a built-in layer
 * set, for core masks 0b1, 0b11, ... up to the machine's CPUs, against its
 * peers measured in the same run: oneDNN backward-weights, a plain im2col +
 * OpenBLAS sgemm, and the machine's limits (an FMA loop at the widest vector
 * width, STREAM's copy and triad for the memory bandwidth, OpenBLAS sgemm on a
 * large square product). See --help and docs/benchmarks.md.
 *
 * Roofline: a (layer, dtype, cores) is memory-bound when its FLOPs over the
 * bytes it must move at least (x, dy read once, dw written once) fall below
 * the machine balance (the FMA limit over the triad at that many threads); for
 * those the report gives the GB/s reached and their share of the triad.
 *
 * Timing: interleaved rounds (each round runs every implementation and core
 * count once, in a rotating order), after warm-up runs; medians are kept.
 * Each round (and warm round) starts with a few milliseconds of the FMA loop
 * on each core count's threads: a call's share of the FMA limit (%FMA, the
 * targets) is its round's GFLOP/s over that round's loop, the median over
 * the rounds, so that a slow stretch of a shared host, which slows both,
 * does not read as the code's. The best-of limits measured first stay the
 * CPU's figures (the limits' table, the plots, the machine balance).
 * Only the call is timed: buffers, primitives and workspaces are made before,
 * and out_dw is zeroed before each convgrad call outside the timed region.
 *
 * Checking: the data are multiples of 1/8 in [-1, 1], so every product is a
 * multiple of 1/64 and, for these sizes, every partial sum is exact in fp32:
 * a correct fp32 result equals the double reference exactly, whatever the
 * summation order. Each measured result is checked against the reference on
 * sampled elements of dw (each summed exactly in double), on every element
 * for the smaller layers, and oneDNN's against convgrad's on every element.
 * A failed check is reported loudly and the exit status is 1.
 *
 * The training step (fp32): on every layer and mask, cg_conv2d_forward (with
 * bias) + cg_conv2d_backward (dx, dw and db in one call), timed as one step
 * (and per phase; cg_conv2d_backward_data and
 * cg_conv2d_backward_weights_bias timed alone before it), against
 * oneDNN's forward_training (with bias), backward-data and backward-weights
 * (with diff_bias) primitives on as many threads, in the same interleaved
 * rounds: its runners take part in --train-reps of them (20 by default; at
 * most ~6 s of timed runs each, 3 at least), spread evenly over the layer's
 * rounds, and in every warm-up round. With the same data (and w, b
 * multiples of 1/8) every y, dx, dw and db sum is exact in fp32 as well: each
 * step's last outputs are checked on sampled elements of y and dx (summed in
 * double), on every element of db, on dw against the filter-gradient
 * reference, and, on every element, convgrad's against oneDNN's and
 * fp_conv_grad_filter_s's dw on the same mask.
 *
 * Warm bursts: after the rounds, WARM_ROUNDS more rounds in which every
 * runner (the training step's too) makes one untimed call, then back-to-back
 * calls for its share of --warm-ms; the median of all of them is the warm
 * figure the targets judge. Rounds, not one burst each: a guest's share of
 * its host drifts over seconds, and one window each would compare
 * implementations in different windows. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "bench.h"
#include "reference.h"

#define DEFAULT_OUT TOOL_DEFAULT_OUT("convgrad-bench")

enum { DEFAULT_REPS = 40, QUICK_REPS = 2, DEFAULT_WARMUP = 2, QUICK_WARMUP = 1 };
/* The warm bursts after the interleaved rounds, per (implementation, mask):
 * WARM_ROUNDS rounds, each one untimed call then back-to-back timed calls for
 * a WARM_ROUNDS-th of the budget (one at least); none for a call slower than
 * WARM_MAX_CALL_S, whose interleaved figure stands (so long a call is not
 * helped by warm caches, and the bursts would cost seconds). */
enum { DEFAULT_WARM_MS = 300, QUICK_WARM_MS = 50, WARM_MAX_CALLS = 200 };
enum { WARM_ROUNDS = WARM_ROUNDS_MOST, QUICK_WARM_ROUNDS = 2 };
static const double WARM_MAX_CALL_S = 0.5;
/* Timed rounds of the training step per layer and mask (of the layer's --reps),
 * fewer than the filter gradient's: a step costs three convolutions. */
enum { DEFAULT_TRAIN_REPS = 20 };
enum { NSAMPLES = 64 }; /* random dw elements checked per layer, plus first and last */
static const double FULL_REF_MACS = 1.5e8; /* full double reference up to this size */
static const double SLOW_BUDGET_S = 12.0;  /* timed seconds per implementation and layer, at most */
static const double TRAIN_BUDGET_S = 6.0;  /* the same, training-step runners */
/* After a multi-threaded peer's run: OpenBLAS's idle threads spin for ~100 ms
 * (oneDNN's OpenMP ones for well under 25 ms) before they sleep, and would take
 * CPU from the next measurement. The pause keeps every CPU busy (bench_settle_ms). */
static const double SETTLE_MS = 120.0;

const char *impl_label(int impl, int dtype)
{
    switch (impl) {
    case IMPL_CONVGRAD:
        return dtype == DT_FP16 ? "convgrad-fp16" : "convgrad";
    case IMPL_ONEDNN:
        return "oneDNN";
    case IMPL_ANY_ORDER:
        return "cg any-order";
    default:
        return "im2col+BLAS";
    }
}

const char *impl_key(int impl, int dtype)
{
    switch (impl) {
    case IMPL_CONVGRAD:
        return dtype == DT_FP16 ? "convgrad_fp16" : "convgrad";
    case IMPL_ONEDNN:
        return "onednn";
    case IMPL_ANY_ORDER:
        return "convgrad_any_order";
    default:
        return "im2col_blas";
    }
}

int is_convgrad(int impl)
{
    return impl == IMPL_CONVGRAD || impl == IMPL_ANY_ORDER;
}

const char *train_label(int impl)
{
    return impl == TRAIN_ONEDNN ? "oneDNN" : "convgrad";
}

const char *train_key(int impl)
{
    return impl == TRAIN_ONEDNN ? "onednn" : "convgrad";
}

/* ---- small utilities ----------------------------------------------------- */

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spins until the monotonic time `*until`. */
static void *keep_busy(void *until)
{
    while (bench_now() < *(const double *)until) {
        for (volatile int i = 0; i < 4096; i++) {
        }
    }
    return NULL;
}

/* Waits ms with every CPU busy: on the virtual machines measured here a CPU
 * left idle for 120 ms came back slowly (the next 2-core call's threads
 * started up to 1 ms late and lost CPU time for milliseconds after), which
 * made whatever ran after the pause slower than in a training loop. */
static void bench_settle_ms(double ms)
{
    enum { MOST_HELPERS = 255 };
    pthread_t helper[MOST_HELPERS];
    double until = bench_now() + ms * 1e-3;
    int want = tool_online_cpus() - 1, n = 0;
    if (want > MOST_HELPERS)
        want = MOST_HELPERS;
    while (n < want && pthread_create(&helper[n], NULL, keep_busy, &until) == 0)
        n++;
    keep_busy(&until);
    while (n > 0)
        pthread_join(helper[--n], NULL);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Memory running out is a failure at run time (--help's exit status 1). */
static void out_of_memory(size_t bytes)
{
    fprintf(stderr, "convgrad-bench: out of memory (%zu bytes)\n", bytes);
    exit(TOOL_EXIT_FAILURE);
}

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!p)
        out_of_memory(bytes);
    return p;
}

/* Everything the report says goes to stdout and to OUT/summary.txt. */
static FILE *g_summary;
static int g_progress_tty;
static int g_progress_shown;

static void progress_clear(void)
{
    if (g_progress_tty && g_progress_shown) {
        fputs("\r\033[K", stderr);
        g_progress_shown = 0;
    }
}

void say(const char *fmt, ...)
{
    va_list ap;
    progress_clear();
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_summary) {
        va_start(ap, fmt);
        vfprintf(g_summary, fmt, ap);
        va_end(ap);
    }
}

static void progress(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (g_progress_tty) {
        fprintf(stderr, "\r\033[K%s", line);
        g_progress_shown = 1;
    } else {
        /* a log, not a terminal: a line every few seconds at most */
        static double last = -1e9;
        double now = bench_now();
        if (now - last < 5.0)
            return;
        last = now;
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void fmt_duration(char *buf, size_t len, double s)
{
    if (s < 0)
        s = 0;
    int m = (int)(s / 60.0);
    snprintf(buf, len, "%d:%02d", m, (int)(s - m * 60.0));
}

static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* ---- options --------------------------------------------------------------- */

typedef struct options {
    const char *out_dir;
    int reps, warmup;
    int train_reps; /* timed rounds of the training step; 0: not run */
    int quick;
    int fp32, fp16;
    int masks[32];
    int nmasks;
    int layers[BENCH_MAX_LAYERS];
    int nlayers;
    double settle_ms;
    int no_plots;
    const char *isa;    /* --isa, or NULL */
    const char *shapes; /* --shapes FILE, or NULL */
    int warm_ms;        /* each warm burst's time budget; 0: no warm figures */
    int emulate_mask;   /* --emulate MASK, or 0 */
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: convgrad-bench [options]\n"
            "\n"
            "Runs fp_conv_grad_filter_s (host mode) on the built-in layer set (or --shapes's)\n"
            "for core masks 0b1, 0b11, ... up to the CPU count, against oneDNN\n"
            "backward-weights, a plain im2col + OpenBLAS sgemm baseline, itself with\n"
            "cg_set_reproducible(0) (\"cg any-order\": one piece of each sum a core, so the\n"
            "cost of the same bits on every mask is measured) and the machine's\n"
            "limits (an FMA loop, OpenBLAS sgemm, the memory bandwidth: STREAM copy and\n"
            "triad), and the whole fp32 training step (cg_conv2d_*) against oneDNN's, all in\n"
            "one run; checks every result; prints tables (warm and interleaved figures; a\n"
            "roofline of the memory-bound layers: the bytes they must move at least, the\n"
            "GB/s reached, its share of the measured bandwidth) and writes CSV and PNG plots.\n"
            "\n"
            "  --layers a,b,c   layers to run, by name (default: all; --list shows them)\n"
            "  --shapes FILE    the layers of FILE instead of the built-in set: one oneDNN\n"
            "                   benchdnn convolution descriptor a line, e.g.\n"
            "                     mb8ic64ih56oc64oh56kh3ph1n\"res2a\"\n"
            "                   keys g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw, n\"name\";\n"
            "                   '_' ignored, '#' to the end of a line a comment, blank lines\n"
            "                   skipped; as benchdnn: mb 2, g 1, sh 1, ph 0, dh 0 by default,\n"
            "                   the w values default to the h ones, dilation counts from 0\n"
            "                   (dh0: none), ph is the top pad (the bottom one makes oh come\n"
            "                   out), oh absent is (ih + 2ph - (kh-1)(dh+1) - 1)/sh + 1, oh\n"
            "                   given with ph absent gives ph; unnamed layers are named by\n"
            "                   their line. A malformed line: its number and why, exit 2\n"
            "  --isa ISA        run the library on that kernel set: avx512, avx2 or ref (sets\n"
            "                   CONVGRAD_ISA before the library's first call; without --isa,\n"
            "                   CONVGRAD_ISA from the environment is honoured). The CPU caps\n"
            "                   it (avx512 on an AVX2-only CPU runs avx2); the header, the\n"
            "                   CSV rows and metadata.csv say \"requested X, running Y\". The\n"
            "                   FMA limit is measured at the running kernels' width (ref:\n"
            "                   the CPU's widest FMA loop, what this CPU can do); the peers\n"
            "                   (oneDNN, OpenBLAS) are not capped\n"
            "  --warm-ms X      the warm calls' budget in ms per implementation and mask\n"
            "                   (default %d, --quick %d; 0: none): after the interleaved\n"
            "                   rounds, %d rounds more, each one untimed call then back-to-\n"
            "                   back calls for X/%d ms (one at least), in a rotating order:\n"
            "                   the filter gradient's, and the training step's\n"
            "                   (convgrad's step and oneDNN's, each phase timed too); the\n"
            "                   median of all is the \"warm (repeated calls)\" figure, beside\n"
            "                   the interleaved one (each call after other work: what a\n"
            "                   training loop sees); the targets, the training step's too,\n"
            "                   judge the warm figures, a ratio (against a peer, fp16, 1\n"
            "                   core) as the median of the rounds' ratios. No burst for a\n"
            "                   call or step over %.1f s (its interleaved figure stands);\n"
            "                   results.csv and training.csv: warm_* columns\n"
            "  --reps N         timed rounds per layer (default %d; the median is kept)\n"
            "  --warmup N       untimed runs of each implementation first (default %d)\n"
            "  --train-reps N   timed rounds of the training step (cg_conv2d_* forward +\n"
            "                   backward data + backward weights and bias (one call), against\n"
            "                   oneDNN's three primitives), spread over the layer's rounds\n"
            "                   (default %d, at most --reps; 0 leaves the training step out;\n"
            "                   --dtype fp16 too), then a warm burst of steps (--warm-ms)\n"
            "  --masks m,m      core masks (decimal, 0x.. or 0b..; default 1,3,7,... up to\n"
            "                   the CPUs)\n"
            "  --emulate MASK   instead of the run above: the fp32 filter gradient of each\n"
            "                   layer on 1 core, on the machine's CPUs and on MASK (e.g.\n"
            "                   0xFFFF, more emulated cores than CPUs), each core's CPU time\n"
            "                   by phase read from the library's trace (CONVGRAD_TRACE, set\n"
            "                   to /dev/null unless given), the imbalance, the shares of\n"
            "                   reduction and barriers, the speedup this predicts on as many\n"
            "                   real cores, checked against the measured one at the CPU\n"
            "                   count; emulate.csv and gantt.png (one call, a row a core)\n"
            "  --dtype T        fp32, fp16 or both (default both; fp16 = hp_conv_grad_filter_s)\n"
            "  --quick          smoke test: %d rounds, %d warm-up, %d warm rounds, %d cost\n"
            "                   pairs, small limit measurements\n"
            "                   (64 MiB STREAM arrays, not 4x the last-level cache)\n"
            "  --out DIR        where results.csv, training.csv, limits.csv, overhead.csv,\n"
            "                   metadata.csv (the build and the CPU), summary.txt and the\n"
            "                   plots go (default %s, under the current directory)\n"
            "  --settle-ms X    pause after a multi-threaded peer's run, so that its spinning\n"
            "                   threads sleep before the next measurement, with every CPU\n"
            "                   kept busy, not idle (default %.0f)\n"
            "  --no-plots       do not run gnuplot\n"
            "  --list           list the layer set (--shapes's when given) and exit\n"
            "  --version        print \"convgrad-bench VERSION\" (the library's) and exit\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 when every check passed; 1 on a failure at run time (a check or\n"
            "a call failed, an output could not be written, e.g. an --out that cannot be\n"
            "made, or memory ran out); 2 on bad usage (an unknown option, a bad value or a\n"
            "malformed --shapes line).\n"
            "Targets missed are reported, not an error.\n",
            DEFAULT_WARM_MS, QUICK_WARM_MS, WARM_ROUNDS, WARM_ROUNDS, WARM_MAX_CALL_S, DEFAULT_REPS,
            DEFAULT_WARMUP, DEFAULT_TRAIN_REPS, QUICK_REPS, QUICK_WARMUP, QUICK_WARM_ROUNDS,
            QUICK_COST_PAIRS, DEFAULT_OUT, SETTLE_MS);
}

static int parse_int(const char *s, long *out)
{
    char *end;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
        s += 2;
        base = 2;
    } else if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        base = 16;
    }
    if (!*s)
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || *end || v > 0xFFFFFFFFull)
        return -1;
    *out = (long)v;
    return 0;
}

/* Option opt's value v as an int in [lo, hi] into *out; else says what the
 * option wants and returns -1. */
static int int_value(const char *opt, const char *v, long lo, long hi, const char *wants, int *out)
{
    long n;
    if (parse_int(v, &n) || n < lo || n > hi) {
        fprintf(stderr, "convgrad-bench: %s wants %s, not '%s'\n", opt, wants, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

static int find_layer(const char *name)
{
    for (int i = 0; i < bench_nlayers; ++i)
        if (strcmp(bench_layers[i].name, name) == 0)
            return i;
    return -1;
}

/* --list: the run's layer set (--shapes's when given), then exit. */
static void list_layers(void)
{
    printf("%-15s %4s %4s %4s %5s %5s %2s %2s %5s %5s %5s %5s %5s %5s\n", "layer", "N", "H", "W",
           "Cin", "Cout", "Kh", "Kw", "sh,sw", "ph,pw", "dh,dw", "group", "OH", "OW");
    for (int l = 0; l < bench_nlayers; ++l) {
        const bench_layer *L = &bench_layers[l];
        bench_shape s = shape_of(L);
        char st[32], pd[32], dl[32];
        snprintf(st, sizeof st, "%d,%d", L->sh, L->sw);
        snprintf(pd, sizeof pd, "%d,%d", L->ph, L->pw);
        snprintf(dl, sizeof dl, "%d,%d", L->dil_h - 1, L->dil_w - 1); /* benchdnn's, from 0 */
        printf("%-15s %4d %4d %4d %5d %5d %2d %2d %5s %5s %5s %5d %5d %5d\n", L->name, L->n, L->h,
               L->w, L->cin, L->cout, L->kh, L->kw, st, pd, dl, L->group, s.oh, s.ow);
    }
    exit(TOOL_EXIT_OK);
}

/* --layers a,b,c (NULL or "all": every layer of the set) into o->layers. */
static int parse_layers(const char *arg, options *o)
{
    o->nlayers = 0;
    if (!arg || !strcmp(arg, "all")) {
        for (int l = 0; l < bench_nlayers; ++l)
            o->layers[o->nlayers++] = l;
        return 0;
    }
    char *buf = strdup(arg);
    if (!buf)
        out_of_memory(strlen(arg) + 1);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int l = find_layer(tok);
        if (l < 0) {
            fprintf(stderr, "convgrad-bench: no layer '%s' (--list shows the set)\n", tok);
            free(buf);
            return -1;
        }
        int dup = 0;
        for (int k = 0; k < o->nlayers; ++k)
            dup |= o->layers[k] == l;
        if (!dup)
            o->layers[o->nlayers++] = l;
    }
    free(buf);
    if (!o->nlayers) {
        fprintf(stderr, "convgrad-bench: --layers is empty\n");
        return -1;
    }
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out_dir = DEFAULT_OUT;
    o->reps = -1;
    o->warmup = -1;
    o->train_reps = -1;
    o->fp32 = o->fp16 = 1;
    o->settle_ms = SETTLE_MS;
    o->warm_ms = -1;
    int list = 0;
    const char *layers_arg = NULL; /* resolved once --shapes is read */
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (!v) {                                                                                  \
            fprintf(stderr, "convgrad-bench: %s needs a value\n", a);                              \
            return -1;                                                                             \
        }                                                                                          \
        ++i;                                                                                       \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--version")) {
            printf("convgrad-bench %s\n", cg_version());
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else if (!strcmp(a, "--isa")) {
            NEED_VALUE();
            if (tool_isa_check(v) != 0) {
                fprintf(stderr, "convgrad-bench: --isa is avx512, avx2 or ref, not '%s'\n", v);
                return -1;
            }
            o->isa = v;
        } else if (!strcmp(a, "--shapes")) {
            NEED_VALUE();
            o->shapes = v;
        } else if (!strcmp(a, "--warm-ms")) {
            NEED_VALUE();
            if (int_value(a, v, 0, 60000, "milliseconds", &o->warm_ms))
                return -1;
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--no-plots")) {
            o->no_plots = 1;
        } else if (!strcmp(a, "--reps")) {
            NEED_VALUE();
            if (int_value(a, v, 1, 100000, "a positive count", &o->reps))
                return -1;
        } else if (!strcmp(a, "--warmup")) {
            NEED_VALUE();
            if (int_value(a, v, 0, 1000, "a count", &o->warmup))
                return -1;
        } else if (!strcmp(a, "--train-reps")) {
            NEED_VALUE();
            if (int_value(a, v, 0, 100000, "a count", &o->train_reps))
                return -1;
        } else if (!strcmp(a, "--settle-ms")) {
            NEED_VALUE();
            char *end;
            double d = strtod(v, &end);
            if (*end || d < 0 || d > 10000) {
                fprintf(stderr, "convgrad-bench: --settle-ms wants milliseconds, not '%s'\n", v);
                return -1;
            }
            o->settle_ms = d;
        } else if (!strcmp(a, "--out")) {
            NEED_VALUE();
            o->out_dir = v;
        } else if (!strcmp(a, "--dtype")) {
            NEED_VALUE();
            if (!strcmp(v, "fp32")) {
                o->fp32 = 1;
                o->fp16 = 0;
            } else if (!strcmp(v, "fp16")) {
                o->fp32 = 0;
                o->fp16 = 1;
            } else if (!strcmp(v, "both")) {
                o->fp32 = o->fp16 = 1;
            } else {
                fprintf(stderr, "convgrad-bench: --dtype is fp32, fp16 or both, not '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--layers")) {
            NEED_VALUE();
            layers_arg = v;
        } else if (!strcmp(a, "--masks")) {
            NEED_VALUE();
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            o->nmasks = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (parse_int(tok, &n) || n == 0) {
                    fprintf(stderr, "convgrad-bench: '%s' is not a non-zero 32-bit core mask\n",
                            tok);
                    return -1;
                }
                if (o->nmasks == 32) {
                    fprintf(stderr, "convgrad-bench: at most 32 masks\n");
                    return -1;
                }
                o->masks[o->nmasks++] = (int)(uint32_t)n;
            }
            if (!o->nmasks) {
                fprintf(stderr, "convgrad-bench: --masks is empty\n");
                return -1;
            }
        } else if (!strcmp(a, "--emulate")) {
            NEED_VALUE();
            if (parse_int(v, &n) || n == 0) {
                fprintf(stderr,
                        "convgrad-bench: --emulate wants a non-zero 32-bit core mask, not "
                        "'%s'\n",
                        v);
                return -1;
            }
            o->emulate_mask = (int)(uint32_t)n;
        } else {
            fprintf(stderr, "convgrad-bench: unknown option '%s' (--help lists them)\n", a);
            return -1;
        }
#undef NEED_VALUE
    }
    /* before the library's first call: it reads CONVGRAD_ISA once, at its first kernel use */
    if (o->isa && setenv("CONVGRAD_ISA", o->isa, 1) != 0) {
        fprintf(stderr, "convgrad-bench: cannot set CONVGRAD_ISA: %s\n", strerror(errno));
        return -1;
    }
    if (o->shapes) {
        bench_layer *read;
        char err[1400];
        if (bench_read_shapes(o->shapes, &read, &bench_nlayers, err, sizeof err) != 0) {
            fprintf(stderr, "convgrad-bench: %s\n", err);
            return -1;
        }
        bench_layers = read; /* the process's layer set from here on */
    }
    if (list)
        list_layers();
    if (parse_layers(layers_arg, o) != 0)
        return -1;
    if (o->warm_ms < 0)
        o->warm_ms = o->quick ? QUICK_WARM_MS : DEFAULT_WARM_MS;
    if (o->reps < 0)
        o->reps = o->quick ? QUICK_REPS : DEFAULT_REPS;
    if (o->warmup < 0)
        o->warmup = o->quick ? QUICK_WARMUP : DEFAULT_WARMUP;
    if (o->train_reps < 0)
        o->train_reps = o->quick ? o->reps : DEFAULT_TRAIN_REPS;
    if (o->train_reps > o->reps)
        o->train_reps = o->reps;
    if (!o->fp32)
        o->train_reps = 0;
    if (!o->nmasks) {
        int k = tool_online_cpus();
        if (k > 32)
            k = 32;
        for (int c = 1; c <= k; ++c)
            o->masks[o->nmasks++] = (int)(c == 32 ? 0xFFFFFFFFu : ((1u << c) - 1u));
    }
    return 0;
}

/* ---- shapes, data, the sampled reference ------------------------------------ */

ConvParameter bench_param_of(const bench_shape *s)
{
    ConvParameter p;
    memset(&p, 0, sizeof p);
    p.output_batch_ = p.input_batch_ = s->n;
    p.input_h_ = s->h;
    p.input_w_ = s->w;
    p.output_h_ = s->oh;
    p.output_w_ = s->ow;
    p.input_channel_ = s->cin;
    p.output_channel_ = s->cout;
    p.kernel_h_ = s->kh;
    p.kernel_w_ = s->kw;
    p.group_ = s->group;
    p.pad_u_ = s->ph;
    p.pad_l_ = s->pw;
    p.pad_d_ = s->pad_d;
    p.pad_r_ = s->pad_r;
    p.dilation_h_ = s->dil_h;
    p.dilation_w_ = s->dil_w;
    p.stride_h_ = s->sh;
    p.stride_w_ = s->sw;
    p.buffer_size_ = cg_grad_filter_min_buffer_size(&p, sizeof(float));
    return p;
}

double layer_flops(const bench_shape *s)
{
    return 2.0 * s->n * s->oh * s->ow * (double)s->cout * s->kh * s->kw * (s->cin / s->group);
}

double train_flops(const bench_shape *s)
{
    return 3.0 * layer_flops(s);
}

static size_t dw_elems(const bench_shape *s)
{
    return (size_t)s->cout * s->kh * s->kw * (size_t)(s->cin / s->group);
}

/* out_dw is accumulated into, so a call also reads dw: not counted, as the
 * roofline's definition (dw is small beside x and dy where it matters). */
double layer_min_bytes(const bench_shape *s, int dtype)
{
    const double elems = (double)s->n * s->h * s->w * s->cin +
                         (double)s->n * s->oh * s->ow * s->cout + (double)dw_elems(s);
    return elems * (dtype == DT_FP16 ? sizeof(float16) : sizeof(float));
}

/* Multiples of 1/8 in [-1, 1]: exact in binary16 too. */
static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = (float)((int)(rng_next() % 17) - 8) / 8.0f;
}

/* dw element e, summed exactly in double; *abs_out gets the sum of |terms|. */
static double exact_elem(const bench_shape *s, const float *x, const float *dy, size_t e,
                         double *abs_out)
{
    const int cip = s->cin / s->group, cop = s->cout / s->group;
    const size_t row = (size_t)s->kh * s->kw * cip;
    const int co = (int)(e / row);
    const size_t rem = e % row;
    const int kh = (int)(rem / ((size_t)s->kw * cip));
    const int kw = (int)((rem / cip) % s->kw);
    const int ci = (int)(rem % cip);
    const int g = co / cop;
    const int cx = g * cip + ci;
    double sum = 0, abs_sum = 0;
    for (int n = 0; n < s->n; ++n)
        for (int oh = 0; oh < s->oh; ++oh) {
            const int iy = oh * s->sh + kh * s->dil_h - s->ph;
            if (iy < 0 || iy >= s->h)
                continue;
            for (int ow = 0; ow < s->ow; ++ow) {
                const int ix = ow * s->sw + kw * s->dil_w - s->pw;
                if (ix < 0 || ix >= s->w)
                    continue;
                const double t =
                    (double)dy[(((size_t)n * s->oh + oh) * s->ow + ow) * s->cout + co] *
                    (double)x[(((size_t)n * s->h + iy) * s->w + ix) * s->cin + cx];
                sum += t;
                abs_sum += fabs(t);
            }
        }
    *abs_out = abs_sum;
    return sum;
}

/* The expected values: sampled elements always; every element when full != NULL. */
typedef struct expected {
    size_t idx[NSAMPLES + 2];
    double val[NSAMPLES + 2], abs[NSAMPLES + 2];
    int nsamples;
    double *full, *full_abs; /* dw_elems each, or NULL */
} expected;

/* ---- checks ----------------------------------------------------------------- */

typedef struct check {
    long checked, bad;
    double worst; /* max |got - want| / tol */
    size_t worst_i;
    double worst_got, worst_want;
    char what[64];
} check;

static void check_one(check *c, size_t i, double got, double want, double tol)
{
    double err = fabs(got - want);
    double r = err / tol;
    if (!(err <= tol))
        c->bad++;
    if (!(r <= c->worst) || isnan(got)) {
        c->worst = isnan(got) ? INFINITY : r;
        c->worst_i = i;
        c->worst_got = got;
        c->worst_want = want;
    }
    c->checked++;
}

static double tol_fp32(double abs_sum)
{
    return ldexp(abs_sum, -22) + 1e-30;
}

static double tol_fp16(double want, double abs_sum)
{
    return ldexp(fabs(want), -11) * 1.0001 + ldexp(abs_sum, -22) + ldexp(1.0, -24);
}

static float half_at(const void *buf, size_t i)
{
    return ref_half_to_float(ref_half_load(buf, i));
}

static void check_against_reference(check *c, const expected *ex, size_t elems, const void *out,
                                    int is_half)
{
    if (ex->full) {
        snprintf(c->what, sizeof c->what, "reference, all %zu", elems);
        for (size_t i = 0; i < elems; ++i) {
            double got = is_half ? half_at(out, i) : ((const float *)out)[i];
            double tol =
                is_half ? tol_fp16(ex->full[i], ex->full_abs[i]) : tol_fp32(ex->full_abs[i]);
            check_one(c, i, got, ex->full[i], tol);
        }
    } else {
        snprintf(c->what, sizeof c->what, "reference, %d sampled", ex->nsamples);
    }
    for (int k = 0; k < ex->nsamples; ++k) {
        size_t i = ex->idx[k];
        double got = is_half ? half_at(out, i) : ((const float *)out)[i];
        double tol = is_half ? tol_fp16(ex->val[k], ex->abs[k]) : tol_fp32(ex->abs[k]);
        check_one(c, i, got, ex->val[k], tol);
    }
}

/* ---- runners: one implementation on one mask ----------------------------------- */

typedef struct runner {
    int impl, dtype, mask, cores;
    double *t, *t_reorder;
    double *t_fma;                         /* the GFLOP/s of the FMA loop timed in t[i]'s round */
    double pct_fma, phase_pct_fma[NPHASE]; /* the timed rounds' (median_pct_fma) */
    int nt;
    double warm[WARM_MAX_CALLS]; /* the warm burst's seconds */
    int nwarm;
    double warm_fma[WARM_ROUNDS_MOST]; /* the FMA loop's GFLOP/s in each warm round */
    /* each warm round's medians (ms): the call's or step's, then each phase's */
    double warm_round[WARM_ROUNDS_MOST][1 + NPHASE];
    double cost[COST_PAIRS]; /* any-order: convgrad's time over its own, a pair each */
    int ncost;
    void *out; /* convgrad (fp32 or fp16) and baseline results */
    size_t out_bytes;
    void *ws; /* convgrad workspace */
    size_t ws_bytes;
    size_t scratch_bytes; /* library's own scratch per core, when it says */
    onednn_conv *dnn;
    int max_reps; /* a slow peer is timed in the first max_reps rounds only */
    int call_failures;
    char failure[160];
    check chk, chk_peer; /* against the reference; oneDNN also against convgrad */
    int has_peer_check;
    float *dnn_ohwi; /* oneDNN's result in OHWI, for the checks */
    /* the training step (impl is a train_impl then) */
    int train;
    onednn_train *tdnn;
    float *y, *dx, *tdw, *db; /* its outputs (oneDNN's dw reordered to OHWI after the rounds) */
    float *alone; /* convgrad's backward phases timed alone: their dx, dw, db (not checked) */
    double *tph;              /* NPHASE seconds per timed round, then per warm step */
    check tchk[4], tpeer[4];  /* y, dx, dw, db: against the references; against oneDNN's */
    check tgrad;              /* dw against fp_conv_grad_filter_s's on the same mask */
    int has_tpeer, has_tgrad;
    int same_bits; /* convgrad on 2+ cores: 1 its 1-core result's bits, 0 not; -1 not compared */
} runner;

enum { T_Y, T_DX, T_DW, T_DB };
static const char *const tnames[4] = {"y", "dx", "dw", "db"};

typedef struct layer_ctx {
    const bench_layer *L;
    bench_shape s;
    ConvParameter p;
    float *x, *dy, *col;
    float16 *x16, *dy16;
    double flops;
    cg_conv2d cv; /* the training step's descriptor: NHWC, OHWI */
    float *w, *b; /* its weights and bias */
} layer_ctx;

static const char *runner_label(const runner *r)
{
    if (r->train)
        return r->impl == TRAIN_ONEDNN ? "oneDNN step" : "convgrad step";
    return impl_label(r->impl, r->dtype);
}

/* One training step; ph gets each phase's seconds. Returns the step's seconds, < 0 on failure. */
static double run_train_once(runner *r, layer_ctx *c, double ph[NPHASE])
{
    if (r->impl == TRAIN_ONEDNN) {
        onednn_set_threads(r->cores);
        if (onednn_train_execute(r->tdnn, ph) != 0) {
            if (!r->call_failures++)
                snprintf(r->failure, sizeof r->failure, "oneDNN training-step execution failed");
            return -1;
        }
        ph[PH_BWD] = ph[PH_BWD_DATA] + ph[PH_BWD_WEIGHTS];
        return ph[PH_FWD] + ph[PH_BWD];
    }
    /* the two backward phases alone (into buffers of their own: the step's
     * outputs are its calls' alone, NaN where they never wrote), then the
     * step, its backward right after its forward as in a training loop */
    cg_status st[4];
    const double t0 = bench_now();
    float *dx = r->alone, *dw = dx + (size_t)c->s.n * c->s.h * c->s.w * c->s.cin;
    st[0] = cg_conv2d_backward_data(&c->cv, c->dy, c->w, dx, r->mask);
    const double t1 = bench_now();
    st[1] = cg_conv2d_backward_weights_bias(&c->cv, c->x, c->dy, dw, dw + dw_elems(&c->s), r->mask);
    const double t2 = bench_now();
    st[2] = cg_conv2d_forward(&c->cv, c->x, c->w, c->b, r->y, r->mask);
    const double t3 = bench_now();
    st[3] = cg_conv2d_backward(&c->cv, c->x, c->dy, c->w, r->dx, r->tdw, r->db, r->mask);
    const double t4 = bench_now();
    static const char *const calls[4] = {"cg_conv2d_backward_data",
                                         "cg_conv2d_backward_weights_bias", "cg_conv2d_forward",
                                         "cg_conv2d_backward"};
    for (int k = 0; k < 4; ++k)
        if (st[k] != CG_OK) {
            if (!r->call_failures++)
                snprintf(r->failure, sizeof r->failure, "%s: status %d: %s", calls[k], (int)st[k],
                         cg_status_message(st[k]));
            return -1;
        }
    ph[PH_BWD_DATA] = t1 - t0;
    ph[PH_BWD_WEIGHTS] = t2 - t1;
    ph[PH_FWD] = t3 - t2;
    ph[PH_BWD] = t4 - t3;
    return t4 - t2;
}

/* Runs r once; returns the seconds of the timed part, < 0 on failure. A
 * training-step runner's phases go to its tph slot `slot` (-1: warm-up). */
static double run_once(runner *r, layer_ctx *c, int slot)
{
    double t0, dt;
    if (r->train) {
        double ph[NPHASE];
        dt = run_train_once(r, c, ph);
        if (dt >= 0 && slot >= 0)
            for (int k = 0; k < NPHASE; ++k)
                r->tph[(size_t)slot * NPHASE + k] = ph[k];
        return dt;
    }
    switch (r->impl) {
    case IMPL_ANY_ORDER: /* fp32 only; the setting changes outside the timing */
    case IMPL_CONVGRAD: {
        memset(r->out, 0, r->out_bytes);
        c->p.workspace_ = r->ws;
        cg_set_reproducible(r->impl == IMPL_CONVGRAD);
        cg_status st;
        if (r->dtype == DT_FP32) {
            t0 = bench_now();
            fp_conv_grad_filter_s(c->dy, c->x, (float *)r->out, NULL, &c->p, r->mask);
            dt = bench_now() - t0;
        } else {
            t0 = bench_now();
            hp_conv_grad_filter_s(c->dy16, c->x16, (float16 *)r->out, NULL, &c->p, r->mask);
            dt = bench_now() - t0;
        }
        st = cg_last_status();
        cg_set_reproducible(1);
        if (st != CG_OK) {
            if (!r->call_failures++)
                snprintf(r->failure, sizeof r->failure, "status %d: %s", (int)st,
                         cg_status_message(st));
            return -1;
        }
        return dt;
    }
    case IMPL_ONEDNN:
        onednn_set_threads(r->cores);
        t0 = bench_now();
        if (onednn_execute(r->dnn) != 0) {
            if (!r->call_failures++)
                snprintf(r->failure, sizeof r->failure, "oneDNN execution failed");
            return -1;
        }
        return bench_now() - t0;
    default:
        bench_blas_threads(r->cores);
        t0 = bench_now();
        baseline_run(&c->s, c->x, c->dy, (float *)r->out, c->col);
        dt = bench_now() - t0;
        bench_blas_threads(1);
        return dt;
    }
}

/* ---- results ------------------------------------------------------------------ */

/* Median, min and max of n > 0 times in seconds, in ms (sorts t). */
static void summarise_ms(double *t, int n, double *median, double *min, double *max)
{
    double mn = t[0], mx = t[0];
    for (int k = 0; k < n; ++k) {
        mn = t[k] < mn ? t[k] : mn;
        mx = t[k] > mx ? t[k] : mx;
    }
    *median = bench_median(t, n) * 1e3;
    *min = mn * 1e3;
    *max = mx * 1e3;
}

/* `array` (of `count` elements of `size` bytes, room for *cap) with room for
 * one more, zeroed; exits when memory runs out. */
static void *grow_by_one(void *array, int count, int *cap, size_t size)
{
    if (count == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        array = realloc(array, size * (size_t)*cap);
        if (!array)
            out_of_memory(size * (size_t)*cap);
    }
    memset((char *)array + size * (size_t)count, 0, size);
    return array;
}

int g_reps_asked;
result *g_results;
int g_nresults;
static int g_cap_results;

static result *add_result(void)
{
    g_results = grow_by_one(g_results, g_nresults, &g_cap_results, sizeof *g_results);
    return &g_results[g_nresults++];
}

int g_train_reps_asked;
train_result *g_train;
int g_ntrain;
static int g_cap_train;

static train_result *add_train_result(void)
{
    g_train = grow_by_one(g_train, g_ntrain, &g_cap_train, sizeof *g_train);
    return &g_train[g_ntrain++];
}

const train_result *find_train(int layer, int impl, int cores)
{
    for (int i = 0; i < g_ntrain; ++i) {
        const train_result *r = &g_train[i];
        if (r->layer == layer && r->impl == impl && r->cores == cores && r->median_ms > 0)
            return r;
    }
    return NULL;
}

double judged_ms(const result *r)
{
    return r->warm_reps > 0 ? r->warm_ms : r->median_ms;
}

double train_ms(const train_result *r, int phase, int warm)
{
    if (warm)
        return r->warm_reps <= 0 ? 0 : phase < 0 ? r->warm_ms : r->warm_phase_ms[phase];
    return phase < 0 ? r->median_ms : r->phase_ms[phase];
}

double train_judged_ms(const train_result *r, int phase)
{
    return train_ms(r, phase, r->warm_reps > 0);
}

/* The median of a[k] / b[k] over the rounds k both have (> 0), of
 * `stride`-apart values; 0 where they share none. */
static double median_of_ratios(const double *a, const double *b, int stride)
{
    double v[WARM_ROUNDS_MOST];
    int n = 0;
    for (int k = 0; k < WARM_ROUNDS_MOST; ++k)
        if (a[k * stride] > 0 && b[k * stride] > 0)
            v[n++] = a[k * stride] / b[k * stride];
    return n > 0 ? bench_median(v, n) : 0;
}

double judged_ratio(const result *a, const result *b)
{
    const double paired = a->warm_reps > 0 && b->warm_reps > 0
                              ? median_of_ratios(a->warm_round_ms, b->warm_round_ms, 1)
                              : 0;
    return paired > 0 ? paired : judged_ms(a) / judged_ms(b);
}

double train_judged_ratio(const train_result *a, const train_result *b, int phase)
{
    const double paired = a->warm_reps > 0 && b->warm_reps > 0
                              ? median_of_ratios(&a->warm_round_ms[0][1 + phase],
                                                 &b->warm_round_ms[0][1 + phase], 1 + NPHASE)
                              : 0;
    return paired > 0 ? paired : train_judged_ms(a, phase) / train_judged_ms(b, phase);
}

const result *find_result(int layer, int impl, int dtype, int cores)
{
    for (int i = 0; i < g_nresults; ++i) {
        const result *r = &g_results[i];
        if (r->layer == layer && r->impl == impl && r->dtype == dtype && r->cores == cores &&
            r->median_ms > 0)
            return r;
    }
    return NULL;
}

/* ---- the machine's limits -------------------------------------------------------- */

limits g_lim;

/* g_lim's index for a run on `cores` cores (the figures at min(cores, CPUs)
 * threads), or -1 when they were not measured. */
static int limits_index(int cores)
{
    int t = cores < tool_online_cpus() ? cores : tool_online_cpus();
    for (int i = 0; i < g_lim.n; ++i)
        if (g_lim.threads[i] == t)
            return i;
    return -1;
}

double fma_limit_for(int cores)
{
    int i = limits_index(cores);
    return i < 0 ? 0 : g_lim.fma[i];
}

static double sgemm_limit_for(int cores)
{
    int i = limits_index(cores);
    return i < 0 ? 0 : g_lim.sgemm[i];
}

double bandwidth_for(int cores)
{
    int i = limits_index(cores);
    return i < 0 ? 0 : g_lim.triad_gbs[i];
}

/* ---- the run-time estimate (a model, refined by what the run measures) ------------ */

int is_dense(const bench_layer *L)
{
    return L->group == 1;
}

int is_depthwise(const bench_layer *L)
{
    return L->group > 1 && L->group == L->cin && L->group == L->cout;
}

static double guess_seconds(const bench_layer *L, int impl, int cores)
{
    bench_shape s = shape_of(L);
    double f = layer_flops(&s);
    double fma = fma_limit_for(cores), blas = sgemm_limit_for(cores);
    if (fma <= 0)
        fma = 50.0 * cores;
    if (blas <= 0)
        blas = 25.0 * cores;
    switch (impl) {
    case IMPL_CONVGRAD:
    case IMPL_ANY_ORDER:
    case IMPL_ONEDNN:
        return f / (1e9 * (is_dense(L) ? 0.75 * fma : 0.15 * fma));
    default: {
        double col = (double)baseline_col_bytes(&s);
        double gemm = is_dense(L) ? f / (1e9 * 0.6 * blas) : f / (1e9 * 0.5);
        return col / 3e9 + gemm;
    }
    }
}

/* The warm rounds of the run (--quick: fewer). */
static int warm_rounds(const options *o)
{
    return o->quick ? QUICK_WARM_ROUNDS : WARM_ROUNDS;
}

/* Model seconds of the warm bursts of calls of t seconds each (none over
 * WARM_MAX_CALL_S): a round's untimed call, then its share of the budget (one
 * call at least). */
static double est_warm(double t, double settle, const options *o)
{
    if (o->warm_ms <= 0 || t > WARM_MAX_CALL_S)
        return 0;
    const double share = o->warm_ms * 1e-3 / warm_rounds(o);
    return warm_rounds(o) * ((t > share ? t : share) + t + settle);
}

/* Model seconds of one runner over a layer: its runs (a slow one capped as the
 * rounds cap it), the pauses after a multi-threaded peer and its warm burst. */
static double est_runner(const bench_layer *L, int impl, int dtype, int cores, const options *o)
{
    double t = guess_seconds(L, impl, cores) * (dtype == DT_FP16 ? 1.1 : 1.0);
    int reps = o->reps;
    if (t > 0) {
        double cap = SLOW_BUDGET_S / t;
        if (cap < 3)
            cap = 3;
        if (cap < reps)
            reps = (int)cap;
    }
    double settle = !is_convgrad(impl) && cores > 1 ? o->settle_ms * 1e-3 : 0.0;
    return (o->warmup + reps) * (t + settle) + est_warm(t, settle, o);
}

/* Model seconds of the cost pairs of convgrad against any-order. */
static double est_cost_pairs(const bench_layer *L, int cores, const options *o)
{
    const double t = guess_seconds(L, IMPL_CONVGRAD, cores);
    return t > WARM_MAX_CALL_S ? 0 : 2.0 * COST_CALLS * (o->quick ? QUICK_COST_PAIRS : COST_PAIRS) * t;
}

/* The same for a training-step runner: three convolutions a step, --train-reps rounds. */
static double est_train_runner(const bench_layer *L, int impl, int cores, const options *o)
{
    double t = 3.0 * guess_seconds(L, IMPL_CONVGRAD, cores);
    int reps = o->train_reps;
    double cap = t > 0 ? TRAIN_BUDGET_S / t : reps;
    if (cap < 3)
        cap = 3;
    if (cap < reps)
        reps = (int)cap;
    double settle = impl == TRAIN_ONEDNN && cores > 1 ? o->settle_ms * 1e-3 : 0.0;
    return (o->warmup + reps) * (t + settle) + est_warm(t, settle, o);
}

/* ---- the training step's references ------------------------------------------------- */

/* Sampled elements of y and dx (exact sums in double, with the sum of |terms|),
 * every element of db. */
typedef struct train_expected {
    size_t yi[NSAMPLES + 2], xi[NSAMPLES + 2];
    double yv[NSAMPLES + 2], ya[NSAMPLES + 2], xv[NSAMPLES + 2], xa[NSAMPLES + 2];
    int ny, nx;
    double *db, *db_abs; /* cout each */
} train_expected;

/* y element e (NHWC) = b[co] + sum over kh, kw, ci of x * w (OHWI). */
static double exact_y(const layer_ctx *c, size_t e, double *abs_out)
{
    const bench_shape *s = &c->s;
    const int cip = s->cin / s->group, cop = s->cout / s->group;
    const int co = (int)(e % s->cout);
    const int ow = (int)((e / s->cout) % s->ow);
    const int oh = (int)((e / ((size_t)s->cout * s->ow)) % s->oh);
    const int n = (int)(e / ((size_t)s->cout * s->ow * s->oh));
    const int g = co / cop;
    double sum = c->b[co], abs_sum = fabs(c->b[co]);
    for (int kh = 0; kh < s->kh; ++kh) {
        const int iy = oh * s->sh + kh * s->dil_h - s->ph;
        if (iy < 0 || iy >= s->h)
            continue;
        for (int kw = 0; kw < s->kw; ++kw) {
            const int ix = ow * s->sw + kw * s->dil_w - s->pw;
            if (ix < 0 || ix >= s->w)
                continue;
            const float *xp =
                c->x + (((size_t)n * s->h + iy) * s->w + ix) * s->cin + (size_t)g * cip;
            const float *wp = c->w + (((size_t)co * s->kh + kh) * s->kw + kw) * cip;
            for (int ci = 0; ci < cip; ++ci) {
                const double t = (double)xp[ci] * (double)wp[ci];
                sum += t;
                abs_sum += fabs(t);
            }
        }
    }
    *abs_out = abs_sum;
    return sum;
}

/* dx element e (NHWC) = sum over the co of its group, kh, kw of dy * w, where
 * oh*sh + kh*dil_h - ph = ih and ow*sw + kw*dil_w - pw = iw. */
static double exact_dx(const layer_ctx *c, size_t e, double *abs_out)
{
    const bench_shape *s = &c->s;
    const int cip = s->cin / s->group, cop = s->cout / s->group;
    const int cx = (int)(e % s->cin);
    const int iw = (int)((e / s->cin) % s->w);
    const int ih = (int)((e / ((size_t)s->cin * s->w)) % s->h);
    const int n = (int)(e / ((size_t)s->cin * s->w * s->h));
    const int g = cx / cip, ci = cx % cip;
    double sum = 0, abs_sum = 0;
    for (int kh = 0; kh < s->kh; ++kh) {
        const int py = ih + s->ph - kh * s->dil_h;
        if (py < 0 || py % s->sh || py / s->sh >= s->oh)
            continue;
        const int oh = py / s->sh;
        for (int kw = 0; kw < s->kw; ++kw) {
            const int px = iw + s->pw - kw * s->dil_w;
            if (px < 0 || px % s->sw || px / s->sw >= s->ow)
                continue;
            const int ow = px / s->sw;
            const float *dyp = c->dy + (((size_t)n * s->oh + oh) * s->ow + ow) * s->cout;
            for (int co = g * cop; co < (g + 1) * cop; ++co) {
                const float wv = c->w[(((size_t)co * s->kh + kh) * s->kw + kw) * cip + ci];
                const double t = (double)dyp[co] * (double)wv;
                sum += t;
                abs_sum += fabs(t);
            }
        }
    }
    *abs_out = abs_sum;
    return sum;
}

static void train_references(const layer_ctx *c, train_expected *te)
{
    const bench_shape *s = &c->s;
    const size_t ny = (size_t)s->n * s->oh * s->ow * s->cout;
    const size_t nx = (size_t)s->n * s->h * s->w * s->cin;
    memset(te, 0, sizeof *te);
    te->yi[te->ny++] = 0;
    te->yi[te->ny++] = ny - 1;
    te->xi[te->nx++] = 0;
    te->xi[te->nx++] = nx - 1;
    for (int k = 0; k < NSAMPLES; ++k) {
        te->yi[te->ny++] = (size_t)(rng_next() % ny);
        te->xi[te->nx++] = (size_t)(rng_next() % nx);
    }
    for (int k = 0; k < te->ny; ++k)
        te->yv[k] = exact_y(c, te->yi[k], &te->ya[k]);
    for (int k = 0; k < te->nx; ++k)
        te->xv[k] = exact_dx(c, te->xi[k], &te->xa[k]);
    te->db = xalloc((size_t)s->cout * sizeof(double));
    te->db_abs = xalloc((size_t)s->cout * sizeof(double));
    for (int co = 0; co < s->cout; ++co)
        te->db[co] = te->db_abs[co] = 0;
    for (size_t i = 0; i < ny; ++i) {
        te->db[i % s->cout] += c->dy[i];
        te->db_abs[i % s->cout] += fabs(c->dy[i]);
    }
}

/* Every element of a against b (two results of the same step), as the
 * oneDNN/convgrad peer check of the filter gradient. */
static void check_all_pairs(check *k, const char *what, const float *a, const float *b, size_t n)
{
    snprintf(k->what, sizeof k->what, "%s", what);
    for (size_t e = 0; e < n; ++e)
        check_one(k, e, a[e], b[e], 1e-6 * (fabs(a[e]) + fabs(b[e])) + 1e-6);
}

static void check_train_references(runner *r, const layer_ctx *c, const train_expected *te,
                                   const expected *ex)
{
    check *k = r->tchk;
    snprintf(k[T_Y].what, sizeof k[T_Y].what, "y, %d sampled", te->ny);
    for (int i = 0; i < te->ny; ++i)
        check_one(&k[T_Y], te->yi[i], r->y[te->yi[i]], te->yv[i], tol_fp32(te->ya[i]));
    snprintf(k[T_DX].what, sizeof k[T_DX].what, "dx, %d sampled", te->nx);
    for (int i = 0; i < te->nx; ++i)
        check_one(&k[T_DX], te->xi[i], r->dx[te->xi[i]], te->xv[i], tol_fp32(te->xa[i]));
    check_against_reference(&k[T_DW], ex, dw_elems(&c->s), r->tdw, 0);
    snprintf(k[T_DW].what, sizeof k[T_DW].what, "dw, %s", ex->full ? "all" : "sampled");
    snprintf(k[T_DB].what, sizeof k[T_DB].what, "db, all %d", c->s.cout);
    for (int co = 0; co < c->s.cout; ++co)
        check_one(&k[T_DB], (size_t)co, r->db[co], te->db[co], tol_fp32(te->db_abs[co]));
}

static void nan_fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = NAN;
}

/* ---- one layer ---------------------------------------------------------------------- */

typedef struct run_state {
    const options *o;
    double t_start;
    double est_total, est_done; /* model seconds */
    double real_done;           /* seconds spent in finished layers */
    int layer_pos;
    int failures;
    double train_s; /* wall seconds of the training step's runs and pauses */
} run_state;

/* The medians (ms) of each phase of r's steps in slots first .. first + n - 1. */
static void phase_medians(const runner *r, int first, int n, double ms[NPHASE])
{
    double *v = xalloc((size_t)n * sizeof(double));
    for (int ph = 0; ph < NPHASE; ++ph) {
        for (int k = 0; k < n; ++k)
            v[k] = r->tph[(size_t)(first + k) * NPHASE + ph];
        ms[ph] = bench_median(v, n) * 1e3;
    }
    free(v);
}

/* fma_now[cores] = the FMA loop (bench_fma_now) on as many threads as each
 * core count of the runners (the CPUs at most), timed at the start of a round:
 * the limit its calls are measured against, at the machine's pace of that
 * moment (a shared host's slow stretches slow both alike). */
static void time_fma_now(const runner *rs, int nr, double fma_now[33])
{
    double by_threads[33] = {0};
    for (int i = 0; i < nr; ++i) {
        const int threads = rs[i].cores < tool_online_cpus() ? rs[i].cores : tool_online_cpus();
        if (by_threads[threads] <= 0)
            by_threads[threads] = bench_fma_now(threads, g_lim.fma_bits);
        fma_now[rs[i].cores] = by_threads[threads];
    }
}

/* The median of the n values' positive ones (0: none). */
static double median_positive(const double *x, int n)
{
    double *v = xalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int m = 0;
    for (int k = 0; k < n; ++k)
        if (x[k] > 0)
            v[m++] = x[k];
    const double med = m > 0 ? bench_median(v, m) : 0;
    free(v);
    return med;
}

/* The median share (%) of the FMA loop that `flops` reach in time[k * stride]
 * (`unit` seconds each) against fma[k] GFLOP/s, over the n entries with both;
 * 0 where none has. */
static double median_pct_fma(double flops, const double *time, int stride, double unit,
                             const double *fma, int n)
{
    double *v = xalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int m = 0;
    for (int k = 0; k < n; ++k)
        if (time[(size_t)k * stride] > 0 && fma[k] > 0)
            v[m++] = 100.0 * flops / (time[(size_t)k * stride] * unit * 1e9) / fma[k];
    const double pct = m > 0 ? bench_median(v, m) : 0;
    free(v);
    return pct;
}

/* r's warm burst of round `round` (< warm_rounds), after the timed rounds: one
 * untimed call (or step), then back-to-back ones for a warm_rounds-th of
 * --warm-ms (one at least), into r->warm; a training-step runner's phases go
 * to its slots after the timed rounds'. None when r has no timed run or its
 * interleaved median is over WARM_MAX_CALL_S. */
static void warm_burst(run_state *st, runner *r, layer_ctx *c, int round)
{
    const options *o = st->o;
    if (r->nt == 0 || bench_median(r->t, r->nt) > WARM_MAX_CALL_S) /* sorts r->t: order-free */
        return;
    progress("[%d/%d] %-14s %-13s %2d core%s  warm burst %d/%d", st->layer_pos + 1, o->nlayers,
             c->L->name, runner_label(r), r->cores, r->cores == 1 ? " " : "s", round + 1,
             warm_rounds(o));
    const double t0 = bench_now();
    if (run_once(r, c, -1) < 0)
        return;
    const int first = r->nwarm, most = (round + 1) * WARM_MAX_CALLS / warm_rounds(o);
    while (r->nwarm < most &&
           (r->nwarm == first || bench_now() - t0 < o->warm_ms * 1e-3 / warm_rounds(o))) {
        double dt = run_once(r, c, o->reps + r->nwarm);
        if (dt < 0)
            break;
        r->warm[r->nwarm++] = dt;
    }
    const int n = r->nwarm - first;
    if (n > 0) { /* this round's medians (a copy: bench_median sorts) */
        double v[WARM_MAX_CALLS];
        memcpy(v, r->warm + first, (size_t)n * sizeof *v);
        r->warm_round[round][0] = bench_median(v, n) * 1e3;
        if (r->train)
            phase_medians(r, o->reps + first, n, &r->warm_round[round][1]);
    }
    if (!is_convgrad(r->impl) && r->cores > 1 && o->settle_ms > 0)
        bench_settle_ms(o->settle_ms);
}

/* The best of COST_CALLS calls of r, in seconds; -1 where one failed. */
static double best_call(runner *r, layer_ctx *c)
{
    double best = -1;
    for (int k = 0; k < COST_CALLS; ++k) {
        const double dt = run_once(r, c, -1);
        if (dt < 0)
            return -1;
        best = best < 0 || dt < best ? dt : best;
    }
    return best;
}

/* any's cost pairs against cg (convgrad, fp32, the same mask): none where a
 * call is over WARM_MAX_CALL_S, as the warm bursts. */
static void cost_pairs(run_state *st, runner *cg, runner *any, layer_ctx *c)
{
    const options *o = st->o;
    if (cg->nt == 0 || any->nt == 0 || bench_median(cg->t, cg->nt) > WARM_MAX_CALL_S)
        return;
    progress("[%d/%d] %-14s same bits vs any-order %2d core%s", st->layer_pos + 1, o->nlayers,
             c->L->name, cg->cores, cg->cores == 1 ? " " : "s");
    const int pairs = o->quick ? QUICK_COST_PAIRS : COST_PAIRS;
    for (int i = 0; i < pairs; ++i) {
        runner *first = i % 2 ? any : cg, *second = i % 2 ? cg : any;
        const double a = best_call(first, c), b = best_call(second, c);
        if (a <= 0 || b <= 0)
            return;
        any->cost[any->ncost++] = i % 2 ? b / a : a / b;
    }
}

static void run_layer(run_state *st, int li)
{
    const options *o = st->o;
    layer_ctx c;
    memset(&c, 0, sizeof c);
    c.L = &bench_layers[li];
    c.s = shape_of(c.L);
    c.p = bench_param_of(&c.s);
    c.flops = layer_flops(&c.s);
    const size_t nx = (size_t)c.s.n * c.s.h * c.s.w * c.s.cin;
    const size_t ndy = (size_t)c.s.n * c.s.oh * c.s.ow * c.s.cout;
    const size_t ndw = dw_elems(&c.s);
    const double t_layer0 = bench_now();

    progress("[%d/%d] %s: preparing data and the reference", st->layer_pos + 1, o->nlayers,
             c.L->name);
    rng_state = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(li + 1) * 0x100000001B3ull);
    c.x = xalloc(nx * sizeof(float));
    c.dy = xalloc(ndy * sizeof(float));
    fill(c.x, nx);
    fill(c.dy, ndy);
    if (o->fp16) {
        c.x16 = xalloc(nx * sizeof(float16));
        c.dy16 = xalloc(ndy * sizeof(float16));
        for (size_t i = 0; i < nx; ++i)
            ref_half_store(c.x16, i, ref_float_to_half(c.x[i]));
        for (size_t i = 0; i < ndy; ++i)
            ref_half_store(c.dy16, i, ref_float_to_half(c.dy[i]));
    }

    /* the expected values */
    expected ex;
    memset(&ex, 0, sizeof ex);
    ex.idx[ex.nsamples++] = 0;
    ex.idx[ex.nsamples++] = ndw - 1;
    for (int k = 0; k < NSAMPLES; ++k)
        ex.idx[ex.nsamples++] = (size_t)(rng_next() % ndw);
    for (int k = 0; k < ex.nsamples; ++k)
        ex.val[k] = exact_elem(&c.s, c.x, c.dy, ex.idx[k], &ex.abs[k]);
    if (c.flops / 2 <= FULL_REF_MACS) {
        double *xd = xalloc(nx * sizeof(double)), *dyd = xalloc(ndy * sizeof(double));
        ref_float_to_double(c.x, xd, nx);
        ref_float_to_double(c.dy, dyd, ndy);
        ex.full = xalloc(ndw * sizeof(double));
        ex.full_abs = xalloc(ndw * sizeof(double));
        ref_grad_filter(&c.p, dyd, xd, ex.full, ex.full_abs);
        free(xd);
        free(dyd);
    }

    /* the runners */
    runner *rs = calloc((size_t)(NIMPL * 2 + NTRAIN) * 32, sizeof *rs);
    if (!rs)
        out_of_memory((size_t)(NIMPL * 2 + NTRAIN) * 32 * sizeof *rs);
    int nr = 0;
    char dnn_err[200] = "";
    int any_baseline = 0;
    for (int impl = 0; impl < NIMPL; ++impl)
        for (int dt = DT_FP32; dt <= DT_FP16; ++dt) {
            if ((dt == DT_FP32 && !o->fp32) || (dt == DT_FP16 && !o->fp16))
                continue;
            if (impl != IMPL_CONVGRAD && dt == DT_FP16)
                continue; /* peers and the any-order cut are fp32 only */
            if (impl == IMPL_ONEDNN && !onednn_available())
                continue;
            for (int m = 0; m < o->nmasks; ++m) {
                runner *r = &rs[nr];
                memset(r, 0, sizeof *r);
                r->impl = impl;
                r->dtype = dt;
                r->mask = o->masks[m];
                r->cores = GetCoreNum(r->mask);
                r->max_reps = 0; /* decided after its first run */
                r->t = calloc((size_t)o->reps, sizeof(double));
                r->t_fma = calloc((size_t)o->reps, sizeof(double));
                r->t_reorder = calloc((size_t)o->reps, sizeof(double));
                if (is_convgrad(impl)) {
                    r->out_bytes = ndw * (dt == DT_FP32 ? sizeof(float) : sizeof(float16));
                    r->out = xalloc(r->out_bytes);
                    r->ws_bytes = cg_grad_filter_workspace_bytes(
                        &c.p, r->mask, dt == DT_FP32 ? sizeof(float) : sizeof(float16));
                    r->ws = xalloc(r->ws_bytes ? r->ws_bytes : 64);
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
                    r->scratch_bytes = cg_grad_filter_scratch_bytes(&c.p, r->mask);
#endif
                } else if (impl == IMPL_ONEDNN) {
                    r->dnn = onednn_create(&c.s, r->cores, c.x, c.dy, dnn_err, sizeof dnn_err);
                    if (!r->dnn) {
                        free(r->t);
                        free(r->t_fma);
                        free(r->t_reorder);
                        continue;
                    }
                    r->dnn_ohwi = xalloc(ndw * sizeof(float));
                    memset(r->dnn_ohwi, 0, ndw * sizeof(float));
                } else {
                    r->out_bytes = ndw * sizeof(float);
                    r->out = xalloc(r->out_bytes);
                    any_baseline = 1;
                }
                nr++;
            }
        }
    if (any_baseline)
        c.col = xalloc(baseline_col_bytes(&c.s));
    if (dnn_err[0])
        say("  !! oneDNN primitive for %s not created: %s\n", c.L->name, dnn_err);

    /* the training step: w and b (multiples of 1/8 too), its references, its runners */
    train_expected te;
    memset(&te, 0, sizeof te);
    if (o->train_reps > 0) {
        progress("[%d/%d] %s: preparing the training step", st->layer_pos + 1, o->nlayers,
                 c.L->name);
        c.cv = bench_conv2d_of(&c.s);
        c.w = xalloc(ndw * sizeof(float));
        c.b = xalloc((size_t)c.s.cout * sizeof(float));
        fill(c.w, ndw);
        fill(c.b, (size_t)c.s.cout);
        train_references(&c, &te);
        char terr[200] = "";
        for (int impl = 0; impl < NTRAIN; ++impl) {
            if (impl == TRAIN_ONEDNN && !onednn_available())
                continue;
            for (int m = 0; m < o->nmasks; ++m) {
                runner *r = &rs[nr];
                memset(r, 0, sizeof *r);
                r->train = 1;
                r->impl = impl;
                r->dtype = DT_FP32;
                r->mask = o->masks[m];
                r->cores = GetCoreNum(r->mask);
                r->y = xalloc(ndy * sizeof(float));
                r->dx = xalloc(nx * sizeof(float));
                r->tdw = xalloc(ndw * sizeof(float));
                r->db = xalloc((size_t)c.s.cout * sizeof(float));
                /* outputs are overwritten: NaN shows an element never written */
                nan_fill(r->y, ndy);
                nan_fill(r->dx, nx);
                nan_fill(r->tdw, ndw);
                nan_fill(r->db, (size_t)c.s.cout);
                if (impl == TRAIN_CONVGRAD)
                    r->alone = xalloc((nx + ndw + (size_t)c.s.cout) * sizeof(float));
                if (impl == TRAIN_ONEDNN) {
                    r->tdnn = onednn_train_create(&c.s, r->cores, c.x, c.w, c.b, c.dy, r->y, r->dx,
                                                  r->db, terr, sizeof terr);
                    if (!r->tdnn) {
                        free(r->y);
                        free(r->dx);
                        free(r->tdw);
                        free(r->db);
                        continue;
                    }
                }
                r->t = calloc((size_t)o->reps, sizeof(double));
                r->t_fma = calloc((size_t)o->reps, sizeof(double));
                r->tph = calloc((size_t)(o->reps + WARM_MAX_CALLS) * NPHASE, sizeof(double));
                nr++;
            }
        }
        if (terr[0])
            say("  !! oneDNN training-step primitives for %s not created: %s\n", c.L->name, terr);
    }

    /* warm-up, then the interleaved rounds */
    const int total = o->warmup + o->reps;
    double est_layer = 0;
    for (int i = 0; i < nr; ++i)
        est_layer += rs[i].train ? est_train_runner(c.L, rs[i].impl, rs[i].cores, o)
                                 : est_runner(c.L, rs[i].impl, rs[i].dtype, rs[i].cores, o);
    double fma_now[33] = {0}; /* by cores: the FMA loop of this round */
    for (int round = 0; round < total; ++round) {
        const int timed = round >= o->warmup;
        if (timed)
            time_fma_now(rs, nr, fma_now);
        for (int k = 0; k < nr; ++k) {
            runner *r = &rs[(k + round) % nr];
            if (timed && r->max_reps && r->nt >= r->max_reps)
                continue;
            /* the training step: its max_reps timed runs spread evenly over the rounds */
            if (timed && r->train && r->max_reps &&
                r->nt >= (int)((long)(round - o->warmup + 1) * r->max_reps / o->reps))
                continue;
            {
                double elapsed = bench_now() - st->t_start;
                double frac = (double)(round * nr + k) / (double)(total * nr);
                double done_model = st->est_done + est_layer * frac;
                double scale = done_model > 0 && elapsed > 5 ? elapsed / done_model : 1.0;
                double eta = (st->est_total - done_model) * scale;
                char e1[16], e2[16];
                fmt_duration(e1, sizeof e1, elapsed);
                fmt_duration(e2, sizeof e2, eta);
                progress("[%d/%d] %-14s %-13s %2d core%s  %s %d/%d   elapsed %s  ETA ~%s",
                         st->layer_pos + 1, o->nlayers, c.L->name, runner_label(r), r->cores,
                         r->cores == 1 ? " " : "s", timed ? "round" : "warm-up",
                         timed ? round - o->warmup + 1 : round + 1, timed ? o->reps : o->warmup, e1,
                         e2);
            }
            const double t_run0 = bench_now();
            double dt = run_once(r, &c, timed ? r->nt : -1);
            if (timed && dt >= 0) {
                r->t_fma[r->nt] = fma_now[r->cores];
                r->t[r->nt++] = dt;
            }
            if (!r->max_reps && dt >= 0) {
                /* at most ~SLOW_BUDGET_S of timed runs each (3 at least): the
                 * im2col baseline of a depthwise layer takes seconds a run;
                 * ~TRAIN_BUDGET_S and --train-reps for a training-step runner */
                int cap = (int)((r->train ? TRAIN_BUDGET_S : SLOW_BUDGET_S) / dt);
                r->max_reps = cap < 3 ? 3 : cap;
                if (r->max_reps > o->reps)
                    r->max_reps = o->reps;
                if (r->train && r->max_reps > o->train_reps)
                    r->max_reps = o->train_reps;
            }
            if (!is_convgrad(r->impl) && r->cores > 1 && o->settle_ms > 0)
                bench_settle_ms(o->settle_ms);
            if (r->train)
                st->train_s += bench_now() - t_run0;
        }
    }
    /* the timed rounds' shares of the FMA loop, while t[i] and t_fma[i] still
     * pair (a warm burst's median sorts t) */
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (!r->train)
            r->pct_fma = median_pct_fma(c.flops, r->t, 1, 1.0, r->t_fma, r->nt);
        for (int ph = 0; r->train && ph < NPHASE; ++ph)
            r->phase_pct_fma[ph] = median_pct_fma(c.flops * phase_convolutions(ph), r->tph + ph,
                                                  NPHASE, 1.0, r->t_fma, r->nt);
    }
    /* the warm bursts: every runner's back-to-back calls (or steps), in
     * rounds after the timed ones (the checks below then see a burst's last
     * result) */
    for (int round = 0; round < warm_rounds(o) && o->warm_ms > 0; ++round) {
        time_fma_now(rs, nr, fma_now);
        for (int k = 0; k < nr; ++k) {
            runner *r = &rs[(k + round) % nr];
            const double t_run0 = bench_now();
            r->warm_fma[round] = fma_now[r->cores];
            warm_burst(st, r, &c, round);
            if (r->train)
                st->train_s += bench_now() - t_run0;
        }
    }

    /* the cost of the same bits: convgrad against any-order, in pairs */
    for (int i = 0; i < nr; ++i)
        for (int k = 0; k < nr; ++k)
            if (rs[i].impl == IMPL_CONVGRAD && !rs[i].train && rs[i].dtype == DT_FP32 &&
                rs[k].impl == IMPL_ANY_ORDER && !rs[k].train && rs[k].cores == rs[i].cores)
                cost_pairs(st, &rs[i], &rs[k], &c);

    /* oneDNN's conversion to OHWI: timed on its own, after the rounds */
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (r->train || r->impl != IMPL_ONEDNN)
            continue;
        int n = o->reps < 5 ? o->reps : 5;
        for (int k = 0; k < n; ++k) {
            onednn_set_threads(r->cores);
            r->t_reorder[k] = onednn_to_ohwi(r->dnn, r->dnn_ohwi);
        }
        if (r->cores > 1 && o->settle_ms > 0)
            bench_settle_ms(o->settle_ms);
    }

    /* checks: every runner's last result */
    progress("[%d/%d] %s: checking", st->layer_pos + 1, o->nlayers, c.L->name);
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (r->train)
            continue;
        if (r->impl == IMPL_ONEDNN) {
            check_against_reference(&r->chk, &ex, ndw, r->dnn_ohwi, 0);
            /* against convgrad fp32 on the same mask, every element */
            for (int j = 0; j < nr; ++j) {
                runner *q = &rs[j];
                if (!q->train && q->impl == IMPL_CONVGRAD && q->dtype == DT_FP32 &&
                    q->mask == r->mask) {
                    r->has_peer_check = 1;
                    const float *a = r->dnn_ohwi, *b = q->out;
                    for (size_t e = 0; e < ndw; ++e)
                        check_one(&r->chk_peer, e, a[e], b[e],
                                  1e-6 * (fabs(a[e]) + fabs(b[e])) + 1e-6);
                }
            }
        } else {
            check_against_reference(&r->chk, &ex, ndw, r->out, r->dtype == DT_FP16);
        }
    }

    /* the training step's checks: its last outputs against the references, and
     * convgrad's against oneDNN's and fp_conv_grad_filter_s's on the same mask */
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (r->train && r->impl == TRAIN_ONEDNN) {
            onednn_set_threads(r->cores);
            if (onednn_train_dw_ohwi(r->tdnn, r->tdw) != 0 && !r->call_failures++)
                snprintf(r->failure, sizeof r->failure,
                         "oneDNN diff_weights reorder to OHWI failed");
        }
    }
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (!r->train)
            continue;
        check_train_references(r, &c, &te, &ex);
        if (r->impl != TRAIN_CONVGRAD)
            continue;
        for (int j = 0; j < nr; ++j) {
            runner *q = &rs[j];
            if (q->mask != r->mask)
                continue;
            if (q->train && q->impl == TRAIN_ONEDNN) {
                r->has_tpeer = 1;
                check_all_pairs(&r->tpeer[T_Y], "y", r->y, q->y, ndy);
                check_all_pairs(&r->tpeer[T_DX], "dx", r->dx, q->dx, nx);
                check_all_pairs(&r->tpeer[T_DW], "dw", r->tdw, q->tdw, ndw);
                check_all_pairs(&r->tpeer[T_DB], "db", r->db, q->db, (size_t)c.s.cout);
            } else if (!q->train && q->impl == IMPL_CONVGRAD && q->dtype == DT_FP32) {
                r->has_tgrad = 1;
                check_all_pairs(&r->tgrad, "dw", r->tdw, (const float *)q->out, ndw);
            }
        }
    }
    /* convgrad on more than one core gives its 1-core result's bits (the
     * guarantee of every core_mask): a difference fails the check */
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        r->same_bits = -1;
        const int ours = r->train ? r->impl == TRAIN_CONVGRAD : r->impl == IMPL_CONVGRAD;
        for (int j = 0; ours && r->cores > 1 && j < nr; ++j) {
            const runner *q = &rs[j];
            if (q->cores != 1 || q->train != r->train || q->impl != r->impl)
                continue;
            if (!r->train && q->dtype == r->dtype)
                r->same_bits = memcmp(r->out, q->out, r->out_bytes) == 0;
            else if (r->train)
                r->same_bits = !memcmp(r->y, q->y, ndy * sizeof(float)) &&
                               !memcmp(r->dx, q->dx, nx * sizeof(float)) &&
                               !memcmp(r->tdw, q->tdw, ndw * sizeof(float)) &&
                               !memcmp(r->db, q->db, (size_t)c.s.cout * sizeof(float));
        }
    }
    if (o->train_reps > 0 && onednn_available() && o->settle_ms > 0)
        bench_settle_ms(o->settle_ms);

    /* results */
    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        if (r->train) {
            train_result *res = add_train_result();
            res->layer = li;
            res->impl = r->impl;
            res->mask = r->mask;
            res->cores = r->cores;
            res->reps = r->nt;
            if (r->nt > 0) {
                summarise_ms(r->t, r->nt, &res->median_ms, &res->min_ms, &res->max_ms);
                res->gflops = train_flops(&c.s) / (res->median_ms * 1e-3) * 1e-9;
                phase_medians(r, 0, r->nt, res->phase_ms);
            }
            if (r->nwarm > 0) {
                res->warm_reps = r->nwarm;
                res->warm_ms = bench_median(r->warm, r->nwarm) * 1e3;
                res->warm_gflops = train_flops(&c.s) / (res->warm_ms * 1e-3) * 1e-9;
                phase_medians(r, o->reps, r->nwarm, res->warm_phase_ms);
                memcpy(res->warm_round_ms, r->warm_round, sizeof res->warm_round_ms);
                for (int ph = 0; ph < NPHASE; ++ph)
                    res->warm_phase_pct_fma[ph] =
                        median_pct_fma(c.flops * phase_convolutions(ph), &r->warm_round[0][1 + ph],
                                       1 + NPHASE, 1e-3, r->warm_fma, WARM_ROUNDS_MOST);
            }
            memcpy(res->phase_pct_fma, r->phase_pct_fma, sizeof res->phase_pct_fma);
            if (r->impl == TRAIN_ONEDNN)
                snprintf(res->dnn_impl, sizeof res->dnn_impl, "%s", onednn_train_impl(r->tdnn));
            long bad = 0, checked = 0;
            double worst = 0;
            const check *all[9];
            const char *vs[9], *nm[9];
            int na = 0;
            for (int k = 0; k < 4; ++k) {
                vs[na] = "the reference";
                nm[na] = tnames[k];
                all[na++] = &r->tchk[k];
            }
            if (r->has_tpeer)
                for (int k = 0; k < 4; ++k) {
                    vs[na] = "oneDNN's (same mask)";
                    nm[na] = tnames[k];
                    all[na++] = &r->tpeer[k];
                }
            if (r->has_tgrad) {
                vs[na] = "fp_conv_grad_filter_s's (same mask)";
                nm[na] = "dw";
                all[na++] = &r->tgrad;
            }
            for (int k = 0; k < na; ++k) {
                bad += all[k]->bad;
                checked += all[k]->checked;
                worst = all[k]->worst > worst ? all[k]->worst : worst;
            }
            int refs_checked = 1;
            for (int k = 0; k < 4; ++k)
                refs_checked &= r->tchk[k].checked > 0;
            int ok = r->call_failures == 0 && r->nt > 0 && r->nt == r->max_reps && bad == 0 &&
                     refs_checked && r->same_bits != 0;
            res->ok = ok;
            res->same_bits = r->same_bits;
            res->worst = worst;
            snprintf(res->check_desc, sizeof res->check_desc,
                     "y %ld sampled, dx %ld sampled, dw %ld (reference), db all %ld: %ld/%ld bad, "
                     "worst %.3g tol%s%s%s",
                     r->tchk[T_Y].checked, r->tchk[T_DX].checked, r->tchk[T_DW].checked,
                     r->tchk[T_DB].checked, bad, checked, worst,
                     r->has_tpeer ? "; y dx dw db vs oneDNN all" : "",
                     r->has_tgrad ? "; dw vs fp_conv_grad_filter_s all" : "",
                     r->same_bits == 1   ? "; y dx dw db bits = 1 core's"
                     : r->same_bits == 0 ? "; bits DIFFER from 1 core's"
                                         : "");
            if (!ok) {
                st->failures++;
                say("  !! CHECK FAILED: %s training step, %s on mask 0x%x (%d cores)\n", c.L->name,
                    train_label(r->impl), (unsigned)r->mask, r->cores);
                if (r->call_failures)
                    say("  !!   %d failed calls; first: %s\n", r->call_failures, r->failure);
                else if (r->nt != r->max_reps)
                    say("  !!   %d of %d timed runs\n", r->nt, r->max_reps);
                for (int k = 0; k < na; ++k) {
                    const check *q = all[k];
                    if (!q->bad)
                        continue;
                    say("  !!   %s against %s: %ld of %ld elements out of tolerance; worst "
                        "%s[%zu] = %.9g, want %.9g (%.3g x tol)\n",
                        q->what, vs[k], q->bad, q->checked, nm[k], q->worst_i, q->worst_got,
                        q->worst_want, q->worst);
                }
            }
            continue;
        }
        result *res = add_result();
        res->layer = li;
        res->impl = r->impl;
        res->dtype = r->dtype;
        res->mask = r->mask;
        res->cores = r->cores;
        res->reps = r->nt;
        res->ws_bytes = r->ws_bytes;
        res->scratch_bytes = r->scratch_bytes;
        if (r->nt > 0) {
            summarise_ms(r->t, r->nt, &res->median_ms, &res->min_ms, &res->max_ms);
            res->gflops = c.flops / (res->median_ms * 1e-3) * 1e-9;
        }
        if (r->nwarm > 0) {
            res->warm_reps = r->nwarm;
            res->warm_ms = bench_median(r->warm, r->nwarm) * 1e3;
            res->warm_gflops = c.flops / (res->warm_ms * 1e-3) * 1e-9;
            for (int k = 0; k < WARM_ROUNDS_MOST; ++k)
                res->warm_round_ms[k] = r->warm_round[k][0];
            res->warm_pct_fma =
                median_pct_fma(c.flops, res->warm_round_ms, 1, 1e-3, r->warm_fma, WARM_ROUNDS_MOST);
            res->warm_fma_gflops = median_positive(r->warm_fma, WARM_ROUNDS_MOST);
        }
        res->pct_fma = r->pct_fma;
        res->fma_gflops = median_positive(r->t_fma, r->nt);
        if (r->ncost > 0)
            res->cost_ratio = bench_median(r->cost, r->ncost);
        if (r->impl == IMPL_ONEDNN) {
            int n = o->reps < 5 ? o->reps : 5;
            res->reorder_ms = bench_median(r->t_reorder, n) * 1e3;
            snprintf(res->dnn_impl, sizeof res->dnn_impl, "%s (%s weights)", onednn_impl(r->dnn),
                     onednn_wformat(r->dnn));
        }
        int ok = r->call_failures == 0 && r->nt > 0 && r->nt == r->max_reps && r->chk.bad == 0 &&
                 r->chk_peer.bad == 0 && r->chk.checked > 0 && r->same_bits != 0;
        res->ok = ok;
        res->same_bits = r->same_bits;
        res->worst = r->chk.worst > r->chk_peer.worst ? r->chk.worst : r->chk_peer.worst;
        snprintf(res->check_desc, sizeof res->check_desc, "%s: %ld/%ld bad, worst %.3g tol%s%s",
                 r->chk.what, r->chk.bad, r->chk.checked, r->chk.worst,
                 r->has_peer_check ? "; vs convgrad all" : "",
                 r->same_bits == 1   ? "; bits = 1 core's"
                 : r->same_bits == 0 ? "; bits DIFFER from 1 core's"
                                     : "");
        if (!ok) {
            st->failures++;
            say("  !! CHECK FAILED: %s %s on mask 0x%x (%d cores)\n", c.L->name,
                impl_label(r->impl, r->dtype), (unsigned)r->mask, r->cores);
            if (r->call_failures)
                say("  !!   %d failed calls; first: %s\n", r->call_failures, r->failure);
            if (r->chk.bad || r->chk.checked == 0)
                say("  !!   %s: %ld of %ld elements out of tolerance; worst dw[%zu] = %.9g, want "
                    "%.9g (%.3g x tol)\n",
                    r->chk.what, r->chk.bad, r->chk.checked, r->chk.worst_i, r->chk.worst_got,
                    r->chk.worst_want, r->chk.worst);
            if (r->chk_peer.bad)
                say("  !!   oneDNN and convgrad (same mask) differ on %ld of %ld elements; worst "
                    "dw[%zu]: oneDNN %.9g, convgrad %.9g (the reference checks say which is "
                    "wrong)\n",
                    r->chk_peer.bad, r->chk_peer.checked, r->chk_peer.worst_i,
                    r->chk_peer.worst_got, r->chk_peer.worst_want);
        }
    }

    print_rows_for_layer(li);

    for (int i = 0; i < nr; ++i) {
        runner *r = &rs[i];
        free(r->t);
        free(r->t_fma);
        free(r->t_reorder);
        free(r->out);
        free(r->ws);
        free(r->dnn_ohwi);
        onednn_destroy(r->dnn);
        onednn_train_destroy(r->tdnn);
        free(r->y);
        free(r->dx);
        free(r->tdw);
        free(r->alone);
        free(r->db);
        free(r->tph);
    }
    free(rs);
    free(c.w);
    free(c.b);
    free(te.db);
    free(te.db_abs);
    free(c.col);
    free(c.x);
    free(c.dy);
    free(c.x16);
    free(c.dy16);
    free(ex.full);
    free(ex.full_abs);
    st->est_done += est_layer;
    st->real_done += bench_now() - t_layer0;
}

/* ---- main ------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o) != 0)
        return TOOL_EXIT_USAGE;
    /* the trace is read when the first launch starts: before any */
    if (o.emulate_mask && !getenv("CONVGRAD_TRACE"))
        setenv("CONVGRAD_TRACE", "/dev/null", 1);
    g_progress_tty = isatty(2);
    g_reps_asked = o.reps;
    g_train_reps_asked = o.train_reps;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* every file goes to out (absolute): a bad --out fails here, before any work */
    char out[4096], summary[4200];
    if (tool_open_out("convgrad-bench", o.out_dir, argc, argv, out, sizeof out) != 0)
        return TOOL_EXIT_FAILURE;
    g_summary = csv_open(out, "summary.txt", summary, sizeof summary);
    if (!g_summary)
        return TOOL_EXIT_FAILURE;
    int write_failures = 0;
    const double t_start = bench_now();
    const int ncpu = tool_online_cpus();
    const double load0 = load_average();

    say("convgrad-bench: %s\n", tool_build_text());
    say("CPU: %s\n", tool_cpu_text());
    const tool_isa *isa = tool_isa_info();
    /* the FMA limit at the kernels' width; the reference's against the CPU's widest */
    g_lim.fma_bits = isa->bits;
    g_lim.fma_note = isa->bits ? "the width of the kernels that run"
                               : "the CPU's widest width (the ref kernels against what this CPU "
                                 "can do)";
    say("kernels: %s (%s; the peers are not capped); FMA limit: %s\n", tool_isa_text(),
        o.isa            ? "CONVGRAD_ISA set by --isa"
        : isa->requested ? "CONVGRAD_ISA from the environment"
                         : "the CPU's widest",
        g_lim.fma_note);
    if (o.shapes)
        say("layers from --shapes %s (%d, benchdnn descriptors)\n", o.shapes, bench_nlayers);
    say("convgrad-bench: filter gradient, fp_/hp_conv_grad_filter_s in host mode, against its "
        "peers\n");
    say("load average at start %.2f\n", load0);
    if (load0 > 0.5 * ncpu)
        say("  !! the machine is busy (load %.2f on %d CPUs): other processes share the CPUs, "
            "figures will be low and noisy\n",
            load0, ncpu);
    {
        const char *ct = getenv("OPENBLAS_CORETYPE");
        const char *l2 = getenv("OPENBLAS_L2_SIZE");
        say("OpenBLAS: %s; core %s; OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s (left as set)\n",
            openblas_get_config(), openblas_get_corename(), ct ? ct : "(unset)",
            l2 ? l2 : "(unset)");
    }
    say("%s\n", onednn_describe());
    if (onednn_available())
        say("  oneDNN's diff_weights layout is its own choice (format any): asked for OHWI it "
            "falls "
            "back to ref:any; the reorder to OHWI is timed apart (CSV) and not in its median\n");
    say("layers:");
    for (int i = 0; i < o.nlayers; ++i)
        say(" %s", bench_layers[o.layers[i]].name);
    if (o.emulate_mask) { /* --emulate: a run of its own */
        say("\noutput: %s\n", out);
        const bench_emulate_opts eo = {
            out, o.emulate_mask, o.layers, o.nlayers, o.quick ? 3 : 9, o.quick, o.no_plots};
        const int status = bench_emulate(&eo);
        return csv_close(g_summary, summary) ? TOOL_EXIT_FAILURE : status;
    }
    say("\nmasks:");
    for (int i = 0; i < o.nmasks; ++i)
        say(" 0x%x", (unsigned)o.masks[i]);
    say("; dtype: %s; %d warm-up + %d timed rounds (interleaved), medians%s\n",
        o.fp32 && o.fp16 ? "fp32 and fp16"
        : o.fp32         ? "fp32"
                         : "fp16",
        o.warmup, o.reps, o.quick ? "; --quick" : "");
    if (o.warm_ms > 0)
        say("warm figures: after the rounds, %d rounds more in which every implementation and "
            "mask (the training step's too) makes one untimed call then back-to-back calls for "
            "%d ms (one at least), median of all; none for a call over %.1f s (--warm-ms)\n",
            warm_rounds(&o), o.warm_ms / warm_rounds(&o), WARM_MAX_CALL_S);
    else
        say("warm figures: left out (--warm-ms 0): the targets are judged on the interleaved "
            "medians\n");
    if (o.train_reps > 0)
        say("training step (fp32 NHWC, OHWI weights): convgrad cg_conv2d_forward (with bias) + "
            "backward_data + backward_weights_bias, against oneDNN forward_training "
            "(with bias) + backward data + backward weights (with diff_bias), in %d of the %d "
            "timed rounds (spread evenly; --train-reps)\n",
            o.train_reps, o.reps);
    else
        say("training step: left out (%s)\n", o.fp32 ? "--train-reps 0" : "fp32 not run");
    say("output: %s\n", out);

    /* launch and barrier costs, first, while nothing else has threads */
    progress("measuring launch and barrier costs");
    overhead_result ov[2];
    int nov = 0;
    ov[nov++] = bench_overhead(0x3, o.quick);
    ov[nov++] = bench_overhead((int)0xFFFFFFFFu, o.quick);
    say("\nLaunch and barrier costs (medians):\n");
    for (int i = 0; i < nov; ++i)
        say("  %2d emulated cores (mask 0x%08x): core_mask_launch of an empty entry %8.2f us; "
            "one sys_bar round %8.2f us; a library call of one pixel %8.2f us%s\n",
            ov[i].cores, (unsigned)ov[i].mask, ov[i].launch_us, ov[i].bar_us, ov[i].call_us,
            ov[i].ok ? "" : "  (A LAUNCH FAILED)");

    /* the machine's limits at every thread count the run uses (1 always) */
    {
        int want[33], nw = 0;
        want[nw++] = 1;
        for (int i = 0; i < o.nmasks; ++i) {
            int t = GetCoreNum(o.masks[i]);
            if (t > ncpu)
                t = ncpu;
            int seen = 0;
            for (int k = 0; k < nw; ++k)
                seen |= want[k] == t;
            if (!seen)
                want[nw++] = t;
        }
        g_lim.sgemm_n = o.quick ? 768 : 4096;
        say("\nThe machine's limits (best of several runs; the FMA loop at %s):\n", g_lim.fma_note);
        for (int k = 0; k < nw; ++k) {
            progress("measuring the machine's limits: FMA loop, %d thread%s", want[k],
                     want[k] == 1 ? "" : "s");
            fma_result fr = bench_fma_limit(want[k], isa->bits, o.quick);
            double avx2 = bench_fma_avx2(want[k], o.quick);
            /* before sgemm: OpenBLAS's threads spin after it, until the settle pause */
            progress("measuring the machine's limits: memory bandwidth (STREAM), %d thread%s",
                     want[k], want[k] == 1 ? "" : "s");
            stream_result sr = bench_stream(want[k], o.quick);
            progress("measuring the machine's limits: OpenBLAS sgemm %d^3, %d thread%s",
                     g_lim.sgemm_n, want[k], want[k] == 1 ? "" : "s");
            double sg = bench_sgemm_limit(g_lim.sgemm_n, want[k], o.quick ? 2 : 3);
            if (want[k] > 1)
                bench_settle_ms(o.settle_ms);
            g_lim.threads[g_lim.n] = want[k];
            g_lim.fma[g_lim.n] = fr.gflops;
            g_lim.fma_avx2[g_lim.n] = avx2;
            g_lim.sgemm[g_lim.n] = sg;
            g_lim.copy_gbs[g_lim.n] = sr.copy_gbs;
            g_lim.triad_gbs[g_lim.n] = sr.triad_gbs;
            g_lim.stream_bytes = sr.array_bytes;
            g_lim.llc_bytes = sr.llc_bytes;
            g_lim.stream_reps = sr.reps;
            g_lim.fma_isa = fr.isa;
            g_lim.n++;
            say("  %2d thread%s: FMA loop (%s) %8.1f GFLOP/s; AVX2 FMA loop %8.1f; OpenBLAS "
                "sgemm %d^3 %8.1f GFLOP/s (%.0f%% of the FMA limit)\n",
                want[k], want[k] == 1 ? " " : "s", fr.isa, fr.gflops, avx2, g_lim.sgemm_n, sg,
                fr.gflops > 0 ? 100.0 * sg / fr.gflops : 0.0);
            if (sr.triad_gbs > 0)
                say("              memory bandwidth: copy %6.1f GB/s, triad %6.1f GB/s; machine "
                    "balance %.1f FLOP/byte (the FMA limit over the triad)\n",
                    sr.copy_gbs, sr.triad_gbs, fr.gflops / sr.triad_gbs);
            else
                say("              memory bandwidth: not measured (3 arrays of %zu MiB could "
                    "not be allocated)\n",
                    sr.array_bytes >> 20);
        }
        /* A core can do at least its share of what more cores did together:
         * a run of the loop on fewer threads that fell in a slow stretch of a
         * busy host (a 1-thread loop at 86 GFLOP/s beside a 2-thread one at
         * 322 was seen) would make every share of it too high. */
        for (int k = 0; k < g_lim.n; ++k)
            for (int j = 0; j < g_lim.n; ++j) {
                const double share = (double)g_lim.threads[k] / g_lim.threads[j];
                if (g_lim.threads[j] <= g_lim.threads[k])
                    continue;
                if (g_lim.fma[j] * share > g_lim.fma[k]) {
                    say("  %2d thread%s: FMA loop %.1f GFLOP/s, not %.1f: %d threads' %.1f "
                        "shared out (a slow stretch of the host during the fewer threads' "
                        "runs)\n",
                        g_lim.threads[k], g_lim.threads[k] == 1 ? " " : "s", g_lim.fma[j] * share,
                        g_lim.fma[k], g_lim.threads[j], g_lim.fma[j]);
                    g_lim.fma[k] = g_lim.fma[j] * share;
                }
                if (g_lim.fma_avx2[j] * share > g_lim.fma_avx2[k])
                    g_lim.fma_avx2[k] = g_lim.fma_avx2[j] * share;
            }
        char llc[160] = "the last-level cache: unknown";
        if (g_lim.llc_bytes)
            snprintf(llc, sizeof llc, "the last-level cache: %zu MiB%s", g_lim.llc_bytes >> 20,
                     g_lim.stream_bytes < g_lim.llc_bytes ? ", more than an array: the figures may "
                                                            "be partly the cache's"
                                                          : "");
        say("  (memory bandwidth: STREAM's copy a = b and triad a = b + s*c, each thread on its "
            "part of 3 float arrays of %zu MiB (%s), first touched by that thread; best of %d; "
            "bytes as STREAM counts them, 8 (copy) and 12 (triad) an element, the write-allocate "
            "reads not counted)\n",
            g_lim.stream_bytes >> 20, llc, g_lim.stream_reps);
        char path[4200];
        FILE *f = csv_open(out, "limits.csv", path, sizeof path);
        if (f) {
            /* a compute limit in gflops, a bandwidth in gb_per_s (the other empty) */
            fprintf(f, "measure,threads,isa,gflops,gb_per_s");
            csv_end_row(f, 1);
            for (int k = 0; k < g_lim.n; ++k) {
                fprintf(f, "fma_loop,%d,%s,%.3f,", g_lim.threads[k], g_lim.fma_isa, g_lim.fma[k]);
                csv_end_row(f, 0);
                fprintf(f, "fma_loop_avx2,%d,avx2+fma,%.3f,", g_lim.threads[k], g_lim.fma_avx2[k]);
                csv_end_row(f, 0);
                fprintf(f, "openblas_sgemm_%d,%d,,%.3f,", g_lim.sgemm_n, g_lim.threads[k],
                        g_lim.sgemm[k]);
                csv_end_row(f, 0);
                fprintf(f, "stream_copy,%d,,,%.3f", g_lim.threads[k], g_lim.copy_gbs[k]);
                csv_end_row(f, 0);
                fprintf(f, "stream_triad,%d,,,%.3f", g_lim.threads[k], g_lim.triad_gbs[k]);
                csv_end_row(f, 0);
            }
        }
        write_failures += !f || csv_close(f, path) != 0;
        f = csv_open(out, "overhead.csv", path, sizeof path);
        if (f) {
            fprintf(
                f,
                "mask,cores,launch_empty_us,sys_bar_round_us,call_one_pixel_us,launches,rounds,ok");
            csv_end_row(f, 1);
            for (int i = 0; i < nov; ++i) {
                fprintf(f, "0x%x,%d,%.3f,%.3f,%.3f,%d,%d,%d", (unsigned)ov[i].mask, ov[i].cores,
                        ov[i].launch_us, ov[i].bar_us, ov[i].call_us, ov[i].launches, ov[i].rounds,
                        ov[i].ok);
                csv_end_row(f, 0);
            }
        }
        write_failures += !f || csv_close(f, path) != 0;
    }

    /* the estimate */
    run_state st;
    memset(&st, 0, sizeof st);
    st.o = &o;
    st.t_start = bench_now();
    for (int i = 0; i < o.nlayers; ++i) {
        const bench_layer *L = &bench_layers[o.layers[i]];
        for (int m = 0; m < o.nmasks; ++m) {
            int c = GetCoreNum(o.masks[m]);
            if (o.fp32)
                st.est_total +=
                    2 * est_runner(L, IMPL_CONVGRAD, DT_FP32, c, &o) + /* and any-order */
                    est_cost_pairs(L, c, &o) +
                    est_runner(L, IMPL_BASELINE, DT_FP32, c, &o) +
                    (onednn_available() ? est_runner(L, IMPL_ONEDNN, DT_FP32, c, &o) : 0);
            if (o.fp16)
                st.est_total += est_runner(L, IMPL_CONVGRAD, DT_FP16, c, &o);
            if (o.train_reps > 0)
                st.est_total += est_train_runner(L, TRAIN_CONVGRAD, c, &o) +
                                (onednn_available() ? est_train_runner(L, TRAIN_ONEDNN, c, &o) : 0);
        }
    }
    {
        char e[16];
        fmt_duration(e, sizeof e, st.est_total + 1.0 * o.nlayers);
        say("\nEstimated time for the layers: ~%s (min:s) with %d rounds and %d ms warm bursts "
            "(--reps, --warm-ms to change)\n",
            e, o.reps, o.warm_ms);
    }

    /* the layers */
    say("\n");
    print_table_header();
    for (int i = 0; i < o.nlayers; ++i) {
        st.layer_pos = i;
        run_layer(&st, o.layers[i]);
    }
    progress_clear();
    say("(warm: the median of back-to-back repeated calls (what other benchmarks report; the "
        "targets judge these); interleaved: the median of the rounds, each call after other "
        "layers' and implementations' work (what a training loop sees); a '-' warm figure: no "
        "burst, the interleaved one stands in the verdicts. %%FMA: GFLOP/s over the FMA loop "
        "timed at the start of the same round on as many cores, the median over the rounds "
        "(warm: over the warm rounds); vs oneDNN: oneDNN's time over this row's (>1 = "
        "faster than oneDNN, same cores); x1core: the same implementation's 1-core time over "
        "this row's; check: ok when every result matched the reference (and oneDNN's), =1c when "
        "convgrad's result on this many cores has exactly its 1-core result's bits, which it "
        "must: a difference fails the check; the training step's table marks the same of y, dx, "
        "dw and db)\n");
    print_roofline_table();
    print_reproducible_cost();
    if (o.train_reps > 0)
        print_train_table();

    /* oneDNN's implementations and the fp16 note */
    if (onednn_available()) {
        say("\noneDNN implementation per layer (max cores) and its reorder to OHWI (not timed "
            "above):\n");
        const int K = max_cores_measured();
        for (int i = 0; i < o.nlayers; ++i) {
            const result *d = find_result(o.layers[i], IMPL_ONEDNN, DT_FP32, K);
            if (d)
                say("  %-15s %-36s reorder to OHWI %.3f ms\n", bench_layers[o.layers[i]].name,
                    d->dnn_impl, d->reorder_ms);
        }
        if (o.train_reps > 0) {
            say("oneDNN's training-step primitives per layer (max cores; weights and diff_weights "
                "in its blocked layouts, reorders not timed):\n");
            for (int i = 0; i < o.nlayers; ++i) {
                const train_result *d = find_train(o.layers[i], TRAIN_ONEDNN, K);
                if (d)
                    say("  %-15s %s\n", bench_layers[o.layers[i]].name, d->dnn_impl);
            }
        }
        if (o.fp16) {
            bench_shape s = shape_of(&bench_layers[o.layers[0]]);
            say("  fp16: %s (%s); convgrad-fp16 rows compare with oneDNN fp32\n",
                onednn_fp16_note(&s), bench_layers[o.layers[0]].name);
        }
    } else if (o.fp16) {
        say("\nfp16: no oneDNN peer; convgrad-fp16 rows are compared with convgrad fp32\n");
    }
    if (o.fp16)
        say("im2col+BLAS is fp32 only (OpenBLAS has no fp16 sgemm).\n");

    /* memory per layer */
    say("\nMemory per layer: the caller's workspace (cg_grad_filter_workspace_bytes)%s\n",
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
        " and the library's own scratch per core (cg_grad_filter_scratch_bytes)"
#else
        "; the library declares no cg_grad_filter_scratch_bytes, so its own scratch is not shown"
#endif
    );
    say("  %-15s %12s", "layer", "dw bytes");
    for (int m = 0; m < o.nmasks; ++m) {
        char h[32];
        snprintf(h, sizeof h, "ws %dc", GetCoreNum(o.masks[m]));
        say(" %12s", h);
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
        snprintf(h, sizeof h, "scratch/core %dc", GetCoreNum(o.masks[m]));
        say(" %16s", h);
#endif
    }
    say("\n");
    for (int i = 0; i < o.nlayers; ++i) {
        bench_shape s = shape_of(&bench_layers[o.layers[i]]);
        ConvParameter p = bench_param_of(&s);
        say("  %-15s %12zu", bench_layers[o.layers[i]].name, dw_elems(&s) * sizeof(float));
        for (int m = 0; m < o.nmasks; ++m) {
            say(" %12zu", cg_grad_filter_workspace_bytes(&p, o.masks[m], sizeof(float)));
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
            say(" %16zu", cg_grad_filter_scratch_bytes(&p, o.masks[m]));
#endif
        }
        say("\n");
    }

    report_targets(ov, nov);

    /* files */
    write_failures += write_csv(out) != 0;
    if (o.train_reps > 0)
        write_failures += write_train_csv(out) != 0;
    char why[256] = "";
    int plotted = write_plots(out, o.no_plots, why, sizeof why);
    const double load1 = load_average();
    char e[16];
    fmt_duration(e, sizeof e, bench_now() - t_start);
    if (o.train_reps > 0) {
        char e2[16];
        fmt_duration(e2, sizeof e2, st.train_s);
        say("\nTotal time %s (min:s), of which the training step's runs %s; load average at end "
            "%.2f\n",
            e, e2, load1);
    } else {
        say("\nTotal time %s (min:s); load average at end %.2f\n", e, load1);
    }
    if (load1 > 0.5 * ncpu)
        say("  !! the machine was busy during the run (load %.2f on %d CPUs)\n", load1, ncpu);
    if (st.failures) {
        say("\n!! %d CHECK FAILURE%s: see the '!!' lines above. Exit status 1.\n", st.failures,
            st.failures == 1 ? "" : "S");
    } else {
        say("All %d measured results checked: ok.\n", g_nresults + g_ntrain);
    }
    if (write_failures)
        say("!! %d output file%s could not be written: see the '!!' lines above. Exit status 1.\n",
            write_failures, write_failures == 1 ? "" : "s");
    say("Wrote %s: results.csv (one row per measurement), %slimits.csv, overhead.csv, "
        "metadata.csv (the build and the CPU), summary.txt",
        out, o.train_reps > 0 ? "training.csv (the training step), " : "");
    if (plotted)
        say(",\n  plots: gflops_<N>core(s).png (GFLOP/s by layer and implementation), "
            "speedup.png%s\n",
            o.train_reps > 0 ? ",\n  training_<N>core(s).png (training step GFLOP/s by layer)"
                             : "");
    else
        say("\n  plots skipped: %s\n", why);
    FILE *f = g_summary;
    g_summary = NULL; /* say() must not write to it once closed */
    write_failures += csv_close(f, summary) != 0;
    free(g_results);
    free(g_train);
    return st.failures || write_failures ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
}
