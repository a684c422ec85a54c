/* SPDX-License-Identifier: MIT */
/* convgrad-stress: random configurations of the operator, run until a case
 * count or a time limit, each checked by cgt_run_case() (guard pages,
 * canaries, input checksums, the double-precision reference).
 *
 * Case i of a run is a pure function of (seed, i, --cores) (stress_case.c),
 * so every failure is one printed line away from a rerun: --replay SEED:I.
 * Several host threads run cases at once; a case occupies the emulated cores
 * of its mask, and a scheduler starts it only when no running case holds any
 * of them (cases on disjoint masks overlap: concurrent launches), and never
 * ahead of an earlier waiting case that needs one of them (no starvation). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stress.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRESS_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRESS_SANITIZED 1
#endif
#ifdef STRESS_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

enum {
    MAX_THREADS = 32,
    MAX_PEERS = 8,          /* overlapping cases remembered per case */
    DETAILED_FAILURES = 10, /* failures printed with the checker's message */
    MAX_REPLAY = MAX_THREADS
};

typedef struct options {
    uint64_t seed;
    double seconds; /* 0: no time limit */
    uint64_t cases; /* 0: no case limit */
    int cores, threads;
    uint64_t max_failures;
    double timeout;
    int verbose;
    int replay; /* replay[0..nreplay) instead of a run */
    int nreplay;
    uint64_t replay_idx[MAX_REPLAY];
} options;

/* Counts for the report; updated under pool.mu after each case. */
typedef struct stats {
    uint64_t cases, failures;
    uint64_t by[3][2][4]; /* path x dtype x mode */
    uint64_t twin, bias, prefill, multi_call, exact, min_buffer, odd_output;
    uint64_t mask_all, mask_one, mask_top, overlapped, overlapped_launch;
    double macs, slowest_s;
    uint64_t slowest_idx;
} stats;

typedef struct worker {
    pthread_t th;
    /* under pool.mu */
    int waiting, running, overlapped, overlapped_launch;
    uint64_t index;
    uint32_t need;
    int npeers;
    uint64_t peers[MAX_PEERS];
    /* also read without the lock, by the watchdog and the signal handler */
    _Atomic uint64_t inflight; /* index + 1 while a case runs, else 0 */
    _Atomic uint32_t cores;    /* the cores of that case */
    _Atomic long long started_ns;
} worker;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const options *opt;
    uint32_t busy;   /* cores held by running cases */
    uint64_t next;   /* next case index, or next position in opt->replay_idx */
    int stop, live;  /* live: workers not yet finished */
    int tty, drawn;  /* drawn: a progress line is on the terminal */
    double t0;       /* start, monotonic seconds */
    double last_log; /* last plain progress line (not a tty) */
    int nworkers;
    worker w[MAX_THREADS];
    stats st;
} pool;

static pool g_pool;                     /* one per process; the signal handler reads it */
static _Thread_local int t_worker = -1; /* this thread's worker, if it is one */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- fatal signals ------------------------------------------------------- */

/* Async-signal-safe: formats with a local buffer and write(2) only. */
static size_t fmt_u64(char *buf, uint64_t v, int hex)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % (hex ? 16u : 10u)];
        v /= hex ? 16u : 10u;
    } while (v && n < sizeof tmp);
    for (size_t i = 0; i < n; ++i)
        buf[i] = tmp[n - 1 - i];
    return n;
}

static void put(const char *s, size_t n)
{
    while (n) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

static void put_str(const char *s)
{
    put(s, strlen(s));
}

static void put_reproducer(uint64_t index)
{
    char b[24];
    put_str("  convgrad-stress --replay 0x");
    put(b, fmt_u64(b, g_pool.opt->seed, 1));
    put_str(":");
    put(b, fmt_u64(b, index, 0));
    if (g_pool.opt->cores != STRESS_MAX_CORES) {
        put_str(" --cores ");
        put(b, fmt_u64(b, (uint64_t)g_pool.opt->cores, 0));
    }
    put_str("\n");
}

/* The worker whose case the crashing thread belongs to: itself (a host-mode
 * call runs on it) or the case holding the emulated core it is; -1 if
 * unknown. */
static int crashing_worker(void)
{
    if (t_worker >= 0)
        return t_worker;
    const int core = get_core_id();
    for (int i = 0; core >= 0 && core < 32 && i < g_pool.nworkers; ++i)
        if (atomic_load(&g_pool.w[i].inflight) && (atomic_load(&g_pool.w[i].cores) >> core & 1u))
            return i;
    return -1;
}

static const int FATAL_SIGNALS[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
enum { NFATAL = sizeof FATAL_SIGNALS / sizeof FATAL_SIGNALS[0] };
static struct sigaction g_previous[NFATAL]; /* e.g. a sanitizer's handlers */

/* Names the case the calling thread works for, with its reproducer, and the
 * other cases running. Async-signal-safe. */
static void report_in_flight(const char *what, int sig)
{
    char b[24];
    const int culprit = crashing_worker();
    const uint64_t v = culprit >= 0 ? atomic_load(&g_pool.w[culprit].inflight) : 0;
    put_str("\nconvgrad-stress: FAIL: ");
    put_str(what);
    if (sig)
        put(b, fmt_u64(b, (uint64_t)sig, 0));
    if (v) {
        put_str(" in case ");
        put(b, fmt_u64(b, v - 1, 0));
        put_str(", reproducer:\n");
        put_reproducer(v - 1);
    } else {
        put_str(" (case unknown)\n");
    }
    const char *head = v ? "convgrad-stress: also running:\n" : "convgrad-stress: running:\n";
    for (int i = 0; i < g_pool.nworkers; ++i) {
        const uint64_t u = atomic_load(&g_pool.w[i].inflight);
        if (!u || i == culprit)
            continue;
        put_str(head);
        head = "";
        put_reproducer(u - 1);
    }
}

static atomic_int g_sanitizer_reported;

/* A crash (a guard page hit, an abort) ends the process before any report:
 * name the case, so the crash has a reproducer like any other failure. Then
 * the previous handler takes over: a sanitizer's still prints its report
 * with the faulting stack. */
static void on_fatal_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    /* a sanitizer's abort after its report: the death callback has spoken */
    if (!(sig == SIGABRT && atomic_load(&g_sanitizer_reported)))
        report_in_flight("fatal signal ", sig);
    for (int i = 0; i < NFATAL; ++i)
        if (FATAL_SIGNALS[i] == sig)
            sigaction(sig, &g_previous[i], NULL);
    /* a fault returns to the faulting instruction, which faults again into
     * the previous handler; a sent signal (abort) is sent again */
    if (info->si_code <= 0 || sig == SIGABRT)
        raise(sig);
}

#ifdef STRESS_SANITIZED
/* A sanitizer that halts on an error (a TSan race, a UBSan error) exits
 * without a signal: its death callback names the case, after its report. */
static void on_sanitizer_death(void)
{
    atomic_store(&g_sanitizer_reported, 1);
    report_in_flight("sanitizer error", 0);
}
#endif

static void install_signal_handlers(void)
{
#ifdef STRESS_SANITIZED
    __sanitizer_set_death_callback(on_sanitizer_death);
#endif
    for (int i = 0; i < NFATAL; ++i) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(FATAL_SIGNALS[i], &sa, &g_previous[i]);
    }
}

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: convgrad-stress [options]\n"
          "\n"
          "Runs random configurations of fp_/hp_conv_grad_filter_s/_p (every path, both\n"
          "dtypes, _s host, _s SPMD, _p host and _p SPMD, seed entries and cg_* twins,\n"
          "random core masks, bias, prefilled out_dw, buffer_size_ from its minimum up)\n"
          "and checks each against the double-precision reference, with guard pages and\n"
          "canaries around out_dw and the workspace. Cases on disjoint core masks run at\n"
          "the same time from different host threads. Case I of a run depends only on\n"
          "(seed, I, --cores), so each failure prints a line that reruns it.\n"
          "\n"
          "  --seconds S        stop after S seconds (default 60 unless --cases is given)\n"
          "  --cases N          stop after N cases (with --seconds: whichever comes first)\n"
          "  --seed X           the run's seed, decimal or 0x hex (default: from the clock;\n"
          "                     printed at the start)\n"
          "  --cores K          core masks use bits 0..K-1 only, 1..32 (default 32)\n"
          "  --threads T        host threads running cases, 1..32 (default 3)\n"
          "  --replay X:I[,J..] rerun case I of seed X alone and report it; several indices\n"
          "                     run together, one thread each (as they overlapped in a run)\n"
          "  --max-failures N   stop after N failures (default 50; 0 = never)\n"
          "  --timeout S        a case running longer than S seconds is reported as hung\n"
          "                     and ends the run (default 120)\n"
          "  --verbose          print every case as it finishes\n"
          "  --version          print \"convgrad-stress VERSION\" (the library's) and exit\n"
          "  --help             this text\n"
          "\n"
          "Output: a progress line (updated in place on a terminal, every 10 s otherwise),\n"
          "one 'FAIL convgrad-stress --replay X:I ...' line per failure, counts by path,\n"
          "dtype and mode, and last one summary line:\n"
          "  convgrad-stress: N cases, N failures, R cases/s, T s, seed 0xX\n"
          "It writes no files. Exit status: 0 if every case passed; 1 on a failure at run\n"
          "time (a case failed or hung, a thread could not start); 2 on bad usage (an\n"
          "unknown option or a bad value). A crash ends it by its signal, a sanitizer's\n"
          "error with the sanitizer's exit status, each after a FAIL line naming the case.\n",
          f);
}

static int bad_value(const char *opt, const char *v)
{
    fprintf(stderr, "convgrad-stress: bad value '%s' for %s (see --help)\n", v ? v : "", opt);
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return 0;
    *out = v;
    return 1;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    uint64_t v;
    if (!parse_u64(s, &v) || v < (uint64_t)lo || v > (uint64_t)hi)
        return 0;
    *out = (int)v;
    return 1;
}

static int parse_seconds(const char *s, double *out)
{
    if (!s || !*s)
        return 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v > 0) || v > 1e9)
        return 0;
    *out = v;
    return 1;
}

/* "SEED:I[,J...]" */
static int parse_replay(const char *s, options *o)
{
    const char *colon = s ? strchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= 32)
        return 0;
    char seed[32];
    memcpy(seed, s, (size_t)(colon - s));
    seed[colon - s] = 0;
    if (!parse_u64(seed, &o->seed))
        return 0;
    o->nreplay = 0;
    const char *p = colon + 1;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9' || o->nreplay == MAX_REPLAY)
            return 0;
        errno = 0;
        o->replay_idx[o->nreplay++] = strtoull(p, &end, 10);
        if (errno)
            return 0;
        if (*end == 0)
            break;
        if (*end != ',')
            return 0;
        p = end + 1;
    }
    o->replay = 1;
    return 1;
}

static uint64_t clock_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return cgt_mix64((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^
           ((uint64_t)getpid() << 32);
}

/* Returns 1 and fills o, 0 on a usage error, -1 for --help, -2 for --version. */
static int parse_args(int argc, char **argv, options *o)
{
    int seed_given = 0, seconds_given = 0, cases_given = 0;
    memset(o, 0, sizeof *o);
    o->cores = STRESS_MAX_CORES;
    o->threads = 3;
    o->max_failures = 50;
    o->timeout = 120;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return -1;
        if (!strcmp(a, "--version"))
            return -2;
        if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
            takes = 0;
        } else if (!strcmp(a, "--seconds")) {
            ok = parse_seconds(v, &o->seconds), seconds_given = 1;
        } else if (!strcmp(a, "--cases")) {
            ok = parse_u64(v, &o->cases) && o->cases > 0, cases_given = 1;
        } else if (!strcmp(a, "--seed")) {
            ok = parse_u64(v, &o->seed), seed_given = 1;
        } else if (!strcmp(a, "--cores")) {
            ok = parse_int(v, 1, STRESS_MAX_CORES, &o->cores);
        } else if (!strcmp(a, "--threads")) {
            ok = parse_int(v, 1, MAX_THREADS, &o->threads);
        } else if (!strcmp(a, "--replay")) {
            ok = parse_replay(v, o), seed_given = 1;
        } else if (!strcmp(a, "--max-failures")) {
            ok = parse_u64(v, &o->max_failures);
        } else if (!strcmp(a, "--timeout")) {
            ok = parse_seconds(v, &o->timeout);
        } else {
            fprintf(stderr, "convgrad-stress: unknown option '%s' (see --help)\n", a);
            return 0;
        }
        if (!ok)
            return bad_value(a, v);
        i += takes;
    }
    if (!seed_given)
        o->seed = clock_seed();
    if (!seconds_given && !cases_given)
        o->seconds = 60;
    if (o->replay) {
        o->seconds = 0;
        o->cases = 0;
        o->max_failures = 0;
        o->threads = o->nreplay;
    }
    return 1;
}

/* ---- scheduling ---------------------------------------------------------- */

/* Under mu. The next index to run; 0 when there is none. */
static int next_index(pool *P, uint64_t *idx)
{
    const options *o = P->opt;
    if (P->stop)
        return 0;
    if (o->replay) {
        if (P->next >= (uint64_t)o->nreplay)
            return 0;
        *idx = o->replay_idx[P->next++];
        return 1;
    }
    if (o->cases && P->next >= o->cases)
        return 0;
    *idx = P->next++;
    return 1;
}

/* Under mu. The cores are free, and no case drawn earlier is waiting for
 * any of them: the earliest waiter waits only for running cases, which end,
 * so every case starts eventually. */
static int may_start(const pool *P, const worker *me)
{
    if (P->busy & me->need)
        return 0;
    for (int i = 0; i < P->nworkers; ++i) {
        const worker *o = &P->w[i];
        if (o != me && o->waiting && o->index < me->index && (o->need & me->need))
            return 0;
    }
    return 1;
}

static void add_peer(worker *w, uint64_t idx)
{
    if (w->npeers < MAX_PEERS)
        w->peers[w->npeers++] = idx;
}

/* Under mu: waits for the cores, takes them, notes who it overlaps. */
static void claim(pool *P, worker *me, uint64_t idx, uint32_t need)
{
    me->index = idx;
    me->need = need;
    me->npeers = 0;
    me->overlapped = me->overlapped_launch = 0;
    me->waiting = 1;
    while (!may_start(P, me))
        pthread_cond_wait(&P->cv, &P->mu);
    me->waiting = 0;
    me->running = 1;
    P->busy |= need;
    for (int i = 0; i < P->nworkers; ++i) {
        worker *o = &P->w[i];
        if (o == me || !o->running)
            continue;
        add_peer(me, o->index);
        add_peer(o, idx);
        me->overlapped = o->overlapped = 1;
        if (need && o->need)
            me->overlapped_launch = o->overlapped_launch = 1;
    }
    atomic_store(&me->started_ns, now_ns());
    atomic_store(&me->cores, need);
    atomic_store(&me->inflight, idx + 1);
}

static void release(pool *P, worker *me)
{
    atomic_store(&me->inflight, 0);
    me->running = 0;
    P->busy &= ~me->need;
    pthread_cond_broadcast(&P->cv);
}

/* ---- reporting ------------------------------------------------------------ */

/* Under mu: stdout lines must not land in the middle of the progress line. */
static void clear_progress(pool *P)
{
    if (P->tty && P->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        P->drawn = 0;
    }
}

static int output_is_odd(const ConvParameter *p)
{
    long long fh =
        cgt_fwd_out(p->input_h_, p->pad_u_, p->pad_d_, p->kernel_h_, p->dilation_h_, p->stride_h_);
    long long fw =
        cgt_fwd_out(p->input_w_, p->pad_l_, p->pad_r_, p->kernel_w_, p->dilation_w_, p->stride_w_);
    return p->output_h_ != (fh < 1 ? 1 : fh) || p->output_w_ != (fw < 1 ? 1 : fw);
}

static void count_case(stats *s, const cgt_case *c, const worker *w, double secs)
{
    const ConvParameter *p = &c->p;
    const int popc = cgt_popcount(c->core_mask);
    s->cases++;
    s->by[cgt_path_of(p)][c->dtype][c->mode]++;
    s->twin += c->api == CGT_API_STATUS;
    s->bias += c->with_bias != 0;
    s->prefill += c->prefill != 0;
    s->multi_call += c->calls > 1;
    s->exact += c->exact != 0;
    s->min_buffer += p->buffer_size_ == cgt_min_buffer(p, c->dtype == CGT_FP32 ? 4 : 2);
    s->odd_output += output_is_odd(p);
    if (c->mode != CGT_P_HOST) { /* the mask matters */
        s->mask_all += popc == g_pool.opt->cores;
        s->mask_one += popc == 1;
        s->mask_top += stress_case_cores(c) == 1u << (g_pool.opt->cores - 1);
    }
    s->overlapped += w->overlapped != 0;
    s->overlapped_launch += w->overlapped_launch != 0;
    s->macs += ref_macs(p);
    if (secs > s->slowest_s) {
        s->slowest_s = secs;
        s->slowest_idx = w->index;
    }
}

static void print_failure(pool *P, const worker *w, const cgt_case *c, const cgt_result *res,
                          double secs)
{
    const options *o = P->opt;
    char repro[160], desc[1024];
    stress_reproducer(repro, sizeof repro, o->seed, &w->index, 1, o->cores);
    cgt_case_str(c, desc, sizeof desc);
    clear_progress(P);
    printf("FAIL %s  # case %llu, %.1f ms: %s\n", repro, (unsigned long long)w->index, 1e3 * secs,
           desc);
    if (P->st.failures <= DETAILED_FAILURES || o->replay) {
        printf("  what is wrong:%s\n", res->msg);
        if (w->npeers && !o->replay) {
            uint64_t all[MAX_PEERS + 1];
            all[0] = w->index;
            memcpy(all + 1, w->peers, (size_t)w->npeers * sizeof all[0]);
            stress_reproducer(repro, sizeof repro, o->seed, all, w->npeers + 1, o->cores);
            printf("  it ran alongside other cases; if it passes alone, rerun them together:\n"
                   "  %s\n",
                   repro);
        }
    }
    fflush(stdout);
}

static void print_pass(pool *P, const worker *w, const cgt_case *c, double secs)
{
    char desc[1024];
    cgt_case_str(c, desc, sizeof desc);
    clear_progress(P);
    printf("ok   case %llu, %.1f ms: %s\n", (unsigned long long)w->index, 1e3 * secs, desc);
    fflush(stdout);
}

/* Under mu, after a case. */
static void record(pool *P, const worker *w, const cgt_case *c, const cgt_result *res, double secs)
{
    count_case(&P->st, c, w, secs);
    if (!res->ok) {
        P->st.failures++;
        print_failure(P, w, c, res, secs);
        if (P->opt->max_failures && P->st.failures >= P->opt->max_failures)
            P->stop = 1;
    } else if (P->opt->verbose || P->opt->replay) {
        print_pass(P, w, c, secs);
    }
}

static void *worker_main(void *arg)
{
    worker *me = arg;
    pool *P = &g_pool;
    t_worker = (int)(me - P->w);
    pthread_mutex_lock(&P->mu);
    uint64_t idx;
    while (next_index(P, &idx)) {
        pthread_mutex_unlock(&P->mu);
        const cgt_case c = stress_case(P->opt->seed, idx, P->opt->cores);
        pthread_mutex_lock(&P->mu);
        claim(P, me, idx, stress_case_cores(&c));
        pthread_mutex_unlock(&P->mu);

        const double t = now_s();
        const cgt_result res = cgt_run_case(&c);
        const double secs = now_s() - t;

        pthread_mutex_lock(&P->mu);
        release(P, me);
        record(P, me, &c, &res, secs);
    }
    P->live--;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* Under mu. */
static void progress_line(pool *P, char *buf, size_t len)
{
    const double el = now_s() - P->t0;
    snprintf(buf, len, "convgrad-stress: %llu cases, %llu failures, %.1f cases/s, %.1f s",
             (unsigned long long)P->st.cases, (unsigned long long)P->st.failures,
             el > 0 ? (double)P->st.cases / el : 0.0, el);
}

static void show_progress(pool *P, int final)
{
    char line[200];
    const double t = now_s();
    if (P->opt->replay)
        return;
    if (P->tty) {
        if (!final && t - P->last_log < 0.25)
            return; /* a few redraws a second are enough to read */
        P->last_log = t;
        progress_line(P, line, sizeof line);
        fprintf(stderr, "\r%s\033[K", line);
        P->drawn = 1;
        if (final)
            clear_progress(P);
        fflush(stderr);
    } else if (!final && t - P->last_log >= 10.0) {
        progress_line(P, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
        P->last_log = t;
    }
}

/* Under mu. A case past --timeout: report it (its description is a pure
 * function of its index) and end the run: a hung core cannot be joined. */
static void check_hung(pool *P)
{
    const options *o = P->opt;
    const long long now = now_ns();
    for (int i = 0; i < P->nworkers; ++i) {
        const uint64_t v = atomic_load(&P->w[i].inflight);
        const double secs = 1e-9 * (double)(now - atomic_load(&P->w[i].started_ns));
        if (!v || secs < o->timeout)
            continue;
        const uint64_t idx = v - 1;
        const cgt_case c = stress_case(o->seed, idx, o->cores);
        char repro[160], desc[1024];
        stress_reproducer(repro, sizeof repro, o->seed, &idx, 1, o->cores);
        cgt_case_str(&c, desc, sizeof desc);
        clear_progress(P);
        printf("FAIL %s  # case %llu, hung: still running after %.0f s (--timeout %g): %s\n", repro,
               (unsigned long long)idx, secs, o->timeout, desc);
        P->st.failures++;
        fflush(stdout);
        return;
    }
}

/* ---- the run --------------------------------------------------------------- */

static void print_counts(const stats *s, const options *o)
{
    static const char *dt[2] = {"fp32", "fp16"};
    printf("convgrad-stress: cases by path, dtype and mode:\n"
           "                     _s host  _s SPMD  _p host  _p SPMD\n");
    for (int p = 0; p < 3; ++p)
        for (int d = 0; d < 2; ++d)
            printf("  %-9s %s %9llu%9llu%9llu%9llu\n", cgt_path_name((cgt_path)p), dt[d],
                   (unsigned long long)s->by[p][d][0], (unsigned long long)s->by[p][d][1],
                   (unsigned long long)s->by[p][d][2], (unsigned long long)s->by[p][d][3]);
    printf("convgrad-stress: cg_* twin %llu, bias %llu, prefilled out_dw %llu, 2-3 calls %llu, "
           "exact %llu, minimum buffer_size_ %llu, output size not the forward formula %llu\n",
           (unsigned long long)s->twin, (unsigned long long)s->bias, (unsigned long long)s->prefill,
           (unsigned long long)s->multi_call, (unsigned long long)s->exact,
           (unsigned long long)s->min_buffer, (unsigned long long)s->odd_output);
    printf("convgrad-stress: masks: all %d cores %llu, one core %llu, core %d alone %llu; "
           "overlapping another case %llu (another launch %llu); mean MACs %.0f; "
           "slowest case %llu (%.1f ms)\n",
           o->cores, (unsigned long long)s->mask_all, (unsigned long long)s->mask_one, o->cores - 1,
           (unsigned long long)s->mask_top, (unsigned long long)s->overlapped,
           (unsigned long long)s->overlapped_launch, s->cases ? s->macs / (double)s->cases : 0.0,
           (unsigned long long)s->slowest_idx, 1e3 * s->slowest_s);
}

static void print_summary(pool *P)
{
    const double el = now_s() - P->t0;
    if (!P->opt->replay)
        print_counts(&P->st, P->opt);
    printf("convgrad-stress: %llu cases, %llu failures, %.1f cases/s, %.1f s, seed 0x%016llx\n",
           (unsigned long long)P->st.cases, (unsigned long long)P->st.failures,
           el > 0 ? (double)P->st.cases / el : 0.0, el, (unsigned long long)P->opt->seed);
    fflush(stdout);
}

static void print_start(const options *o)
{
    if (o->replay) {
        printf("convgrad-stress: replaying %d case(s) of seed 0x%016llx%s\n", o->nreplay,
               (unsigned long long)o->seed, o->nreplay > 1 ? ", together" : ", alone");
    } else {
        char lim[64] = "", more[64] = "";
        if (o->cases)
            snprintf(lim, sizeof lim, " --cases %llu", (unsigned long long)o->cases);
        if (o->seconds > 0)
            snprintf(lim + strlen(lim), sizeof lim - strlen(lim), " --seconds %g", o->seconds);
        if (o->cores != STRESS_MAX_CORES)
            snprintf(more, sizeof more, " --cores %d", o->cores);
        printf("convgrad-stress: seed 0x%016llx, %d threads, masks on %d cores "
               "(rerun: convgrad-stress --seed 0x%016llx%s%s --threads %d)\n",
               (unsigned long long)o->seed, o->threads, o->cores, (unsigned long long)o->seed, lim,
               more, o->threads);
    }
    fflush(stdout);
}

/* The main thread watches: progress, the time limit, hung cases. Returns 0
 * when the workers have finished, 1 after a hang. */
static int monitor(pool *P)
{
    pthread_mutex_lock(&P->mu);
    for (;;) {
        /* woken by every finished case and worker, else every 100 ms */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&P->cv, &P->mu, &until);
        if (P->opt->seconds > 0 && now_s() - P->t0 >= P->opt->seconds)
            P->stop = 1;
        const uint64_t failures = P->st.failures;
        check_hung(P);
        const int hung = P->st.failures != failures;
        const int done = P->live == 0;
        show_progress(P, done || hung);
        if (done || hung) {
            pthread_mutex_unlock(&P->mu);
            return hung;
        }
    }
}

static int run(const options *o)
{
    pool *P = &g_pool;
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv, NULL);
    P->opt = o;
    P->tty = isatty(STDERR_FILENO);
    P->t0 = P->last_log = now_s();
    P->nworkers = o->threads;
    install_signal_handlers();
    print_start(o);
    pthread_mutex_lock(&P->mu);
    for (int i = 0; i < P->nworkers; ++i) {
        if (pthread_create(&P->w[i].th, NULL, worker_main, &P->w[i]) != 0) {
            fprintf(stderr, "convgrad-stress: cannot start thread %d\n", i);
            exit(1); /* a failure at run time, not bad usage */
        }
        P->live++;
    }
    pthread_mutex_unlock(&P->mu);
    if (monitor(P)) {
        print_summary(P); /* workers still run; their cores may be hung */
        _exit(1);
    }
    for (int i = 0; i < P->nworkers; ++i)
        pthread_join(P->w[i].th, NULL);
    if (o->replay && P->st.failures == 0 && o->nreplay == 1)
        printf("convgrad-stress: passed alone; a case that failed in a run but passes alone\n"
               "needs the cases that overlapped it: rerun them together (see its FAIL lines)\n");
    print_summary(P); /* the last line, always */
    return P->st.failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    static options o; /* the signal handler reads it through g_pool */
    const int r = parse_args(argc, argv, &o);
    if (r == -2) {
        printf("convgrad-stress %s\n", cg_version());
        return 0;
    }
    if (r < 0) {
        usage(stdout);
        return 0;
    }
    if (r == 0)
        return 2;
    return run(&o);
}
