/* SPDX-License-Identifier: MIT */
/* The machine's limits, measured in the same run as the layers:
 *  - an FMA loop at the vector width of the library's kernels (the widest the
 *    CPU has: AVX-512F when __builtin_cpu_supports says so, else AVX2+FMA,
 *    else scalar fmaf; AVX2+FMA under --isa avx2), with
 *    many independent accumulators so that it is throughput-bound, on 1..k
 *    threads at once;
 *  - the memory bandwidth: STREAM's copy and triad on arrays far larger than
 *    the last-level cache, on the same thread counts;
 *  - OpenBLAS sgemm on a large square product, at 1 and k threads;
 * and the emulated cores' fixed costs: core_mask_launch of an empty entry and
 * one sys_bar round, as medians in microseconds. */
#define _GNU_SOURCE
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* ---- FMA loops ---------------------------------------------------------- */

/* Every accumulator named once: X(i) for i in 0..23 (or 0..11). */
#define ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ACC24(X) ACC12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
enum { FMA512_ACC = 24, FMA256_ACC = 12 };

/* 24 zmm accumulators: FMA latency 4 x 2 pipes needs 8 in flight; 24 leaves
 * room for wider machines. a = a*b + c converges to c/(1-b): no overflow, no
 * denormals. Returns a value derived from every accumulator so nothing is
 * dead code. FLOPs = iters * 24 * 16 * 2. */
__attribute__((target("avx512f"), noinline)) static float fma_loop_avx512(long iters)
{
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, b, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
    ACC24(DECL)
    for (long it = 0; it < iters; ++it) {
        ACC24(STEP)
        __asm__ volatile("" ::: "memory");
    }
    __m512 s = _mm512_setzero_ps();
    ACC24(SUM)
#undef DECL
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* 12 ymm accumulators (16 registers in all). FLOPs = iters * 12 * 8 * 2. */
__attribute__((target("avx2,fma"), noinline)) static float fma_loop_avx2(long iters)
{
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(0.001f * (i + 1));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, b, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
    ACC12(DECL)
    for (long it = 0; it < iters; ++it) {
        ACC12(STEP)
        __asm__ volatile("" ::: "memory");
    }
    __m256 s = _mm256_setzero_ps();
    ACC12(SUM)
#undef DECL
#undef STEP
#undef SUM
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

/* Portable fallback: 8 scalar chains. FLOPs = iters * 8 * 2. */
static float fma_loop_scalar(long iters)
{
    float a[8];
    for (int i = 0; i < 8; ++i)
        a[i] = 0.001f * (float)(i + 1);
    for (long it = 0; it < iters; ++it) {
        for (int i = 0; i < 8; ++i)
            a[i] = fmaf(a[i], 0.999999f, 1e-6f);
        __asm__ volatile("" ::: "memory");
    }
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

enum fma_kind { FMA_512, FMA_256, FMA_SCALAR };

static double flops_per_iter(enum fma_kind k)
{
    switch (k) {
    case FMA_512:
        return FMA512_ACC * 16.0 * 2.0;
    case FMA_256:
        return FMA256_ACC * 8.0 * 2.0;
    default:
        return 8.0 * 2.0;
    }
}

static float run_fma(enum fma_kind k, long iters)
{
    switch (k) {
    case FMA_512:
        return fma_loop_avx512(iters);
    case FMA_256:
        return fma_loop_avx2(iters);
    default:
        return fma_loop_scalar(iters);
    }
}

static enum fma_kind widest_fma(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return FMA_512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return FMA_256;
#endif
    return FMA_SCALAR;
}

static int has_avx2_fma(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* ---- threads released together ------------------------------------------- */

enum { TEAM_MAX = 64 };

/* One thread's share of a team's work: part t of `threads`. */
typedef void (*team_work)(void *arg, int t, int threads);

typedef struct team_member {
    team_work work;
    void *arg;
    int t, threads;
    pthread_barrier_t *start;
    double began, ended; /* its own clock readings around its work */
} team_member;

/* Pins the calling thread to the t-th CPU it may run on (of
 * sched_getaffinity's), so that a team's threads start on CPUs of their own:
 * new threads start beside their creator and the scheduler spreads them
 * only after a few milliseconds, a short loop's whole length. Best effort. */
static void pin_to_cpu(int t)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == t % CPU_COUNT(&allowed)) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

static void *team_thread(void *p)
{
    team_member *m = p;
    if (m->threads > 1)
        pin_to_cpu(m->t);
    pthread_barrier_wait(m->start);
    m->began = bench_now();
    m->work(m->arg, m->t, m->threads);
    m->ended = bench_now();
    return NULL;
}

static int team_size(int threads)
{
    return threads < 1 ? 1 : threads > TEAM_MAX ? TEAM_MAX : threads;
}

/* work(arg, t, threads) on `threads` (team_size) threads released by one
 * barrier: the wall seconds from the first thread's start to the last one's
 * end, each read by the thread itself (the calling thread, which waits, may
 * get a CPU only after the others: its own readings would miss or add the
 * time they ran without it). */
static double team_run(int threads, team_work work, void *arg)
{
    pthread_t tid[TEAM_MAX];
    team_member m[TEAM_MAX];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; ++t) {
        m[t] = (team_member){work, arg, t, threads, &start, 0, 0};
        pthread_create(&tid[t], NULL, team_thread, &m[t]);
    }
    pthread_barrier_wait(&start);
    for (int t = 0; t < threads; ++t)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&start);
    double first = m[0].began, last = m[0].ended;
    for (int t = 1; t < threads; ++t) {
        first = m[t].began < first ? m[t].began : first;
        last = m[t].ended > last ? m[t].ended : last;
    }
    return last - first;
}

/* ---- the FMA limit ----------------------------------------------------------- */

typedef struct fma_job {
    enum fma_kind kind;
    long iters;
    volatile float sink[TEAM_MAX];
} fma_job;

static void fma_work(void *arg, int t, int threads)
{
    fma_job *j = arg;
    (void)threads;
    j->sink[t] = run_fma(j->kind, j->iters);
}

/* One timed run of `threads` loops at once: total GFLOP/s from the wall time
 * between the common start and the last thread's end. */
static double fma_once(enum fma_kind kind, int threads, long iters)
{
    fma_job j = {.kind = kind, .iters = iters};
    threads = team_size(threads);
    double dt = team_run(threads, fma_work, &j);
    return flops_per_iter(kind) * (double)iters * threads / dt * 1e-9;
}

/* Seconds of one loop of `iters` on the calling thread. */
static double fma_seconds(enum fma_kind kind, long iters)
{
    const double t0 = bench_now();
    volatile float s = run_fma(kind, iters);
    (void)s;
    return bench_now() - t0;
}

/* Iterations of one loop of about `seconds` on one thread (1000 at least). */
static long fma_iters_for(enum fma_kind kind, double seconds)
{
    const long probe = 100000;
    const double dt = fma_seconds(kind, probe);
    const long iters = dt > 0 ? (long)(probe * seconds / dt) : probe;
    return iters < 1000 ? 1000 : iters;
}

static double fma_measure(enum fma_kind kind, int threads, int quick)
{
    const long iters = fma_iters_for(kind, quick ? 0.02 : 0.15);
    /* the limit is what the hardware can do: report the best run, not a median
     * dragged down by whatever else shares the machine. With several threads,
     * runs go on (to four times as many) while the best is under 90% of that
     * many single threads measured beside them: a host that lends this guest
     * fewer CPUs than it has for a while would otherwise make the limit, and
     * every share of it, wrong. */
    const int reps = quick ? 3 : 7;
    double best = 0, single = 0;
    for (int r = 0; r < 4 * reps; ++r) {
        if (threads > 1 && r % reps == 0) {
            const double one = fma_once(kind, 1, iters);
            single = one > single ? one : single;
        }
        const double v = fma_once(kind, threads, iters);
        best = v > best ? v : best;
        if (r + 1 >= reps && (threads == 1 || best >= 0.9 * threads * single))
            break;
    }
    return best;
}

/* The FMA loop of `bits` (as bench_fma_limit's). */
static enum fma_kind fma_kind_for(int bits)
{
    enum fma_kind k = widest_fma();
    /* narrower than the widest only on request (--isa avx2 on an AVX-512 CPU) */
    return bits == 256 && k == FMA_512 ? FMA_256 : k;
}

fma_result bench_fma_limit(int threads, int bits, int quick)
{
    const enum fma_kind k = fma_kind_for(bits);
    fma_result r;
    r.isa = k == FMA_512 ? "avx512f" : k == FMA_256 ? "avx2+fma" : "scalar";
    r.gflops = fma_measure(k, threads, quick);
    return r;
}

double bench_fma_now(int threads, int bits)
{
    enum { NOW_MS = 4 };
    static long iters[FMA_SCALAR + 1]; /* NOW_MS of each loop, calibrated once */
    const enum fma_kind k = fma_kind_for(bits);
    if (!iters[k])
        iters[k] = fma_iters_for(k, NOW_MS * 1e-3);
    if (threads <= 1) /* on the calling thread, where a 1-core call runs */
        return flops_per_iter(k) * (double)iters[k] / fma_seconds(k, iters[k]) * 1e-9;
    return fma_once(k, threads, iters[k]);
}

double bench_fma_avx2(int threads, int quick)
{
    return has_avx2_fma() ? fma_measure(FMA_256, threads, quick) : 0.0;
}

/* ---- memory bandwidth: STREAM copy and triad ---------------------------------- */

/* The copy walks one cache line (16 floats) at a time with a compiler barrier
 * between lines: a plain a[i] = b[i] loop becomes a memcpy call, whose path for
 * large sizes stores non-temporally and so would count differently from the
 * triad. */
enum { STREAM_LINE = 16 };

/* The last-level cache in bytes (sysconf's L3, else the largest cache /sys
 * lists); 0 when unknown. */
static size_t llc_bytes(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0)
        return (size_t)l3;
#endif
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            size_t bytes = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : 1ul);
            best = bytes > best ? bytes : best;
        }
        fclose(f);
    }
    return best;
}

/* Bytes of each of the three arrays: STREAM's rule, 4x the last-level cache, 64
 * MiB at least, 2 GiB at most, the three within a quarter of the memory; 64 MiB
 * under --quick (still far beyond the L2s, and fast under the sanitizers, where
 * every access is checked); a whole number of cache lines. */
static size_t stream_array_bytes(size_t llc, int quick)
{
    const size_t mib = 1024ul * 1024;
    size_t bytes = quick ? 64 * mib : 4 * llc;
    if (bytes < 64 * mib)
        bytes = 64 * mib;
    if (bytes > 2048 * mib)
        bytes = 2048 * mib;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && 3 * bytes > (size_t)pages * (size_t)page / 4)
        bytes = (size_t)pages * (size_t)page / 12;
    return bytes / (STREAM_LINE * sizeof(float)) * (STREAM_LINE * sizeof(float));
}

static void stream_copy(float *restrict a, const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i += STREAM_LINE) {
        for (size_t k = 0; k < STREAM_LINE; ++k)
            a[i + k] = b[i + k];
        __asm__ volatile("" ::: "memory");
    }
}

static void stream_triad(float *restrict a, const float *restrict b, const float *restrict c,
                         float s, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        a[i] = b[i] + s * c[i];
}

enum stream_op { STREAM_TOUCH, STREAM_COPY, STREAM_TRIAD };

typedef struct stream_job {
    float *a, *b, *c;
    size_t n; /* elements of each array, a whole number of lines */
    enum stream_op op;
} stream_job;

/* Thread t's part of the arrays, whole lines: the same part in every pass, so
 * that the pages it first touched are the ones it streams (local on NUMA). */
static void stream_work(void *arg, int t, int threads)
{
    stream_job *j = arg;
    const size_t lines = j->n / STREAM_LINE;
    const size_t lo = lines * (size_t)t / (size_t)threads * STREAM_LINE;
    const size_t n = lines * (size_t)(t + 1) / (size_t)threads * STREAM_LINE - lo;
    switch (j->op) {
    case STREAM_TOUCH:
        for (size_t i = lo; i < lo + n; ++i) {
            j->a[i] = 0.0f;
            j->b[i] = 1.0f;
            j->c[i] = 2.0f;
        }
        break;
    case STREAM_COPY:
        stream_copy(j->a + lo, j->b + lo, n);
        break;
    case STREAM_TRIAD:
        stream_triad(j->a + lo, j->b + lo, j->c + lo, 3.0f, n);
        break;
    }
}

stream_result bench_stream(int threads, int quick)
{
    stream_result r = {0};
    threads = team_size(threads);
    r.llc_bytes = llc_bytes();
    r.array_bytes = stream_array_bytes(r.llc_bytes, quick);
    r.reps = quick ? 3 : 6;
    stream_job j = {.n = r.array_bytes / sizeof(float)};
    j.a = aligned_alloc(64, r.array_bytes);
    j.b = aligned_alloc(64, r.array_bytes);
    j.c = aligned_alloc(64, r.array_bytes);
    if (j.a && j.b && j.c) {
        j.op = STREAM_TOUCH;
        team_run(threads, stream_work, &j);
        /* bytes as STREAM counts them: copy reads b and writes a, triad reads b
         * and c and writes a; the write-allocate reads of a are not counted */
        const double copy_bytes = 2.0 * r.array_bytes, triad_bytes = 3.0 * r.array_bytes;
        for (int k = 0; k < r.reps; ++k) {
            j.op = STREAM_COPY;
            double g = copy_bytes / team_run(threads, stream_work, &j) * 1e-9;
            r.copy_gbs = g > r.copy_gbs ? g : r.copy_gbs;
            j.op = STREAM_TRIAD;
            g = triad_bytes / team_run(threads, stream_work, &j) * 1e-9;
            r.triad_gbs = g > r.triad_gbs ? g : r.triad_gbs;
        }
    }
    free(j.a);
    free(j.b);
    free(j.c);
    return r;
}

/* ---- OpenBLAS sgemm ----------------------------------------------------- */

double bench_sgemm_limit(int n, int threads, int reps)
{
    size_t nn = (size_t)n * n;
    float *a = aligned_alloc(64, nn * sizeof(float));
    float *b = aligned_alloc(64, nn * sizeof(float));
    float *c = aligned_alloc(64, nn * sizeof(float));
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return 0.0;
    }
    for (size_t i = 0; i < nn; ++i) {
        a[i] = (float)((int)(i % 17) - 8) / 8.0f;
        b[i] = (float)((int)(i % 13) - 6) / 8.0f;
    }
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double g = 2.0 * n * (double)n * n / (bench_now() - t0) * 1e-9;
        if (g > best)
            best = g;
    }
    openblas_set_num_threads(1);
    free(a);
    free(b);
    free(c);
    return best;
}

/* ---- launch and barrier costs -------------------------------------------- */

static void empty_entry(void *arg)
{
    (void)arg;
}

typedef struct bar_job {
    int mask, cores, rounds;
    double *stamps; /* rounds + 1, written by logical core 0 */
} bar_job;

static void bar_entry(void *arg)
{
    bar_job *j = arg;
    const int lead = GetLogicCoreId(j->mask, get_core_id()) == 0;
    sys_bar(0, j->cores); /* line up first */
    if (lead)
        j->stamps[0] = bench_now();
    for (int r = 0; r < j->rounds; ++r) {
        sys_bar(1, j->cores);
        if (lead)
            j->stamps[r + 1] = bench_now();
    }
}

overhead_result bench_overhead(int mask, int quick)
{
    overhead_result o;
    memset(&o, 0, sizeof o);
    o.mask = mask;
    o.cores = GetCoreNum(mask);
    o.ok = 1;
    const int many = o.cores > tool_online_cpus();
    o.launches = quick ? 20 : (many ? 300 : 2000);
    o.rounds = quick ? 20 : (many ? 300 : 2000);

    /* the first launches start the cores' threads: not part of the cost */
    for (int i = 0; i < 5; ++i)
        if (core_mask_launch(mask, empty_entry, NULL) != 0)
            o.ok = 0;
    double *t =
        malloc(sizeof(double) * (size_t)(o.launches > o.rounds * 3 ? o.launches : o.rounds * 3));
    for (int i = 0; i < o.launches; ++i) {
        double t0 = bench_now();
        if (core_mask_launch(mask, empty_entry, NULL) != 0)
            o.ok = 0;
        t[i] = bench_now() - t0;
    }
    o.launch_us = bench_median(t, o.launches) * 1e6;

    /* three launches of `rounds` barrier rounds each; every round's time */
    double *stamps = malloc(sizeof(double) * (size_t)(o.rounds + 1));
    int nt = 0;
    for (int l = 0; l < 3; ++l) {
        bar_job j = {mask, o.cores, o.rounds, stamps};
        if (core_mask_launch(mask, bar_entry, &j) != 0) {
            o.ok = 0;
            continue;
        }
        for (int r = 0; r < o.rounds; ++r)
            t[nt++] = stamps[r + 1] - stamps[r];
    }
    o.bar_us = nt ? bench_median(t, nt) * 1e6 : 0.0;

    /* the operator on one pixel: all its cost is fixed */
    ConvParameter p;
    memset(&p, 0, sizeof p);
    p.output_batch_ = p.input_batch_ = 1;
    p.input_h_ = p.input_w_ = p.output_h_ = p.output_w_ = 1;
    p.input_channel_ = p.output_channel_ = p.kernel_h_ = p.kernel_w_ = p.group_ = 1;
    p.dilation_h_ = p.dilation_w_ = p.stride_h_ = p.stride_w_ = 1;
    p.buffer_size_ = 1 << 16;
    float one[1] = {1.0f}, dw[1];
    p.workspace_ = malloc(cg_grad_filter_workspace_bytes(&p, mask, sizeof(float)));
    for (int i = 0; i < o.launches + 5; ++i) {
        double t0 = bench_now();
        if (!p.workspace_ || cg_fp_conv_grad_filter_s(one, one, dw, NULL, &p, mask) != CG_OK)
            o.ok = 0;
        if (i >= 5)
            t[i - 5] = bench_now() - t0;
    }
    o.call_us = bench_median(t, o.launches) * 1e6;
    free(p.workspace_);
    free(stamps);
    free(t);
    return o;
}
