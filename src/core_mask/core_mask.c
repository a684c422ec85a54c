/* SPDX-License-Identifier: MIT */
/* Emulated cores: one persistent pthread per core (bits 0..31 of a mask),
 * launches that claim their cores atomically and never wait for a busy one,
 * and per-launch barriers that sleep rather than burn a CPU another core
 * needs.
 *
 * Ownership: a launch owns the cores of its mask from the moment its CAS on
 * g_busy sets their bits until it clears them. Everything a launch shares
 * with its cores lives in the persistent slot g_launch[lowest bit of mask];
 * that core is owned by the launch, so the slot is exclusively its, and since
 * the slots are never freed no late thread can touch freed memory. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall() */
#define _GNU_SOURCE     /* sched_getcpu, CPU_SET, pthread_setaffinity_np */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Barrier waiters sleep on a futex where there is one: the completer wakes
 * them all with one syscall and none has to re-take a mutex, about 3x faster
 * than a condvar with 32 cores on 2 CPUs. Elsewhere (or with
 * -DCM_USE_FUTEX=0) a mutex and condvar do the same job. */
#ifndef CM_USE_FUTEX
#ifdef __linux__
#define CM_USE_FUTEX 1
#else
#define CM_USE_FUTEX 0
#endif
#endif
#if CM_USE_FUTEX
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "core_mask/core_mask_internal.h"
#include "fault.h"
#include "status.h"
#include "thread_scratch.h"
#include "trace.h"

enum {
    CM_CORES = 32,
    CM_USER_BARS = 16, /* sys_bar ids 0..15 */
    /* the library's own barriers (cm_bar_all), one per lowest core of the
     * calling subset, so disjoint subsets of one launch never share one */
    CM_LIB_BARS = CM_USER_BARS,
    CM_BARS = CM_USER_BARS + CM_CORES,
    CM_SPIN = 1024, /* pause iterations before sleeping */
    CM_LINE = 64
};

/* A barrier's whole state is one word, so arriving, completing a round,
 * resetting the count and publishing the AND of the ok flags are a single
 * atomic step: no core of the next round can overwrite what a slow waiter of
 * this round still has to read, and no arrival can slip between "count
 * reached" and "count reset". Layout: count (6 bits), running AND, result of
 * the last completed round, generation (24 bits, wraps harmlessly). */
#define BW_COUNT 0x3Fu
#define BW_ACC 0x40u
#define BW_RESULT 0x80u
#define BW_GEN_SHIFT 8
#define BW_IDLE BW_ACC /* count 0, running AND 1 */

typedef struct cm_barrier {
    _Alignas(CM_LINE) atomic_uint word;
    atomic_uint sleepers; /* sleeping waiters; the completer skips the wake-up at 0 */
    pthread_mutex_t mu;   /* mu and cv: only without futexes */
    pthread_cond_t cv;
} cm_barrier;

/* What a launch shares with its cores. Plain fields are written by the
 * launcher before it hands the launch to the cores (under each core's mutex)
 * and only read by them afterwards. */
typedef struct cm_launch {
    uint32_t mask;
    int ncores;
    bool spin; /* ncores <= online CPUs: brief spinning cannot starve a core */
    void (*entry)(void *);
    void *arg;
    atomic_int remaining; /* cores still running entry */
    int64_t dispatched;   /* tracing: when the cores were handed the launch (ns) */
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
    cm_barrier bars[CM_BARS];
} cm_launch;

typedef struct cm_core {
    _Alignas(CM_LINE) pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint seq;    /* bumped under mu once per launch handed to this core */
    cm_launch *job;     /* the launch of the latest seq, written under mu before the bump */
    unsigned start_seq; /* seq when the thread was created: nothing before is its job */
    bool started;       /* read and written only by the launch owning this core */
    void *scratch;      /* owned by the core's own thread */
    size_t scratch_cap;
    /* bytes the core's last cm_scratch_all failed to get, 0 if it got them;
     * written by the core, read by the others of its mask between barriers */
    size_t scratch_failed;
    pthread_t thread; /* set when started */
    int bound_cpu;    /* the CPU its thread is bound to (bind_cores), -1: none */
} cm_core;

static cm_core g_core[CM_CORES];
static cm_launch g_launch[CM_CORES];
static atomic_uint_least32_t g_busy; /* cores claimed by running launches */
static int g_ncpu = 1;
/* The CPUs the process may run on, in order (g_ncpu of them), and whether a
 * launch binds its cores' threads to them (CONVGRAD_BIND=0: not). */
static int g_cpus[CPU_SETSIZE];
static bool g_bind;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static _Thread_local int tls_core = -1;
static _Thread_local cm_launch *tls_launch; /* non-NULL only while running entry */

/* ---- small helpers --------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline unsigned bw_gen(unsigned w)
{
    return w >> BW_GEN_SHIFT;
}

static void init_sync(pthread_mutex_t *mu, pthread_cond_t *cv)
{
    pthread_mutex_init(mu, NULL);
    pthread_cond_init(cv, NULL);
}

/* Mutexes and condvars are created once and never destroyed: a core that
 * signals a finished launch's condvar after its launcher returned must still
 * find a valid object. */
static void init_all_sync(void)
{
    for (int i = 0; i < CM_CORES; i++) {
        init_sync(&g_core[i].mu, &g_core[i].cv);
        init_sync(&g_launch[i].done_mu, &g_launch[i].done_cv);
        for (int b = 0; b < CM_BARS; b++)
            init_sync(&g_launch[i].bars[b].mu, &g_launch[i].bars[b].cv);
    }
}

/* The child of a fork has none of the pool threads, and condvars that think
 * they have waiters could swallow a wake-up: start the pool afresh there. */
static void after_fork_child(void)
{
    atomic_store(&g_busy, 0);
    init_all_sync();
    for (int i = 0; i < CM_CORES; i++) {
        g_core[i].started = false;
        g_core[i].bound_cpu = -1;
    }
}

/* The process's CPUs (its affinity: a cpuset or taskset may leave a few),
 * else every online one. */
static void find_cpus(void)
{
    cpu_set_t set;
    g_ncpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &set))
                g_cpus[g_ncpu++] = cpu;
    if (g_ncpu == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        g_ncpu = n > 0 && n < CPU_SETSIZE ? (int)n : 1;
        for (int cpu = 0; cpu < g_ncpu; cpu++)
            g_cpus[cpu] = cpu;
    }
    const char *bind = getenv("CONVGRAD_BIND");
    g_bind = g_ncpu > 1 && !(bind && strcmp(bind, "0") == 0);
}

static void cm_init(void)
{
    find_cpus();
    for (int i = 0; i < CM_CORES; i++)
        g_core[i].bound_cpu = -1;
    init_all_sync();
    pthread_atfork(NULL, NULL, after_fork_child);
    cg_trace_init();
}

int cm_cpus(void)
{
    pthread_once(&g_once, cm_init);
    return g_ncpu;
}

/* ---- vendor names ---------------------------------------------------- */

CG_API int get_core_id(void)
{
    return tls_launch ? tls_core : -1;
}

CG_API int GetCoreNum(int core_mask)
{
    return __builtin_popcount((uint32_t)core_mask);
}

CG_API int GetLogicCoreId(int core_mask, int core_id)
{
    uint32_t m = (uint32_t)core_mask;
    if (core_id < 0 || core_id >= CM_CORES || !((m >> core_id) & 1u))
        return -1;
    return __builtin_popcount(m & ((1u << core_id) - 1u));
}

int cm_launch_mask(void)
{
    return tls_launch ? (int)tls_launch->mask : 0;
}

/* ---- barriers -------------------------------------------------------- */

/* One atomic arrival: adds this core and its ok flag, or, if it is the n-th,
 * completes the round (new generation, count 0, result published). Returns
 * the word it wrote; *before is the word it replaced. */
static unsigned bar_arrive(cm_barrier *b, unsigned n, bool ok, unsigned *before)
{
    unsigned old = atomic_load_explicit(&b->word, memory_order_relaxed), nw;
    do {
        bool acc = (old & BW_ACC) && ok;
        unsigned cnt = (old & BW_COUNT) + 1;
        if (cnt >= n) /* >= : a core passing a smaller count than others must not wrap */
            nw = ((bw_gen(old) + 1u) << BW_GEN_SHIFT) | BW_IDLE | (acc ? BW_RESULT : 0);
        else
            nw = (old & ~(BW_COUNT | BW_ACC)) | (acc ? BW_ACC : 0) | cnt;
    } while (!atomic_compare_exchange_weak(&b->word, &old, nw));
    *before = old;
    return nw;
}

/* Sleeping on a barrier is a Dekker handshake on two seq_cst variables: the
 * completer's CAS on word then its load of sleepers, against the waiter's
 * increment of sleepers then its load of word. Either the waiter sees the new
 * generation and does not sleep, or the completer sees the sleeper and wakes
 * it (the futex re-checks word in the kernel; the condvar path holds the
 * mutex from the increment until it sleeps). */
#if CM_USE_FUTEX
_Static_assert(sizeof(atomic_uint) == 4, "futex words are 32 bits");

static void bar_wake(cm_barrier *b)
{
    if (atomic_load(&b->sleepers) != 0)
        syscall(SYS_futex, &b->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Each arrival changes word, so a sleeper may wake early (EAGAIN) and
 * simply looks again. */
static unsigned bar_sleep(cm_barrier *b, unsigned gen)
{
    unsigned w;
    atomic_fetch_add(&b->sleepers, 1);
    while (bw_gen(w = atomic_load(&b->word)) == gen)
        syscall(SYS_futex, &b->word, FUTEX_WAIT_PRIVATE, w, NULL, NULL, 0);
    atomic_fetch_sub(&b->sleepers, 1);
    return w;
}
#else
static void bar_wake(cm_barrier *b)
{
    if (atomic_load(&b->sleepers) == 0)
        return;
    pthread_mutex_lock(&b->mu);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static unsigned bar_sleep(cm_barrier *b, unsigned gen)
{
    unsigned w;
    pthread_mutex_lock(&b->mu);
    atomic_fetch_add(&b->sleepers, 1);
    while (bw_gen(w = atomic_load(&b->word)) == gen)
        pthread_cond_wait(&b->cv, &b->mu);
    atomic_fetch_sub(&b->sleepers, 1);
    pthread_mutex_unlock(&b->mu);
    return w;
}
#endif

/* Waits until the generation moves past gen; returns the word that shows it.
 * Spins first only if every core of the launch can have its own CPU. */
static unsigned bar_wait(cm_barrier *b, unsigned gen, bool spin)
{
    for (int i = 0; spin && i < CM_SPIN; i++) {
        unsigned w = atomic_load_explicit(&b->word, memory_order_acquire);
        if (bw_gen(w) != gen)
            return w;
        cpu_relax();
    }
    return bar_sleep(b, gen);
}

/* Barrier `id` over core_num cores of the calling launch; returns the AND of
 * the ok flags of the round (ok itself when there is nothing to wait for). */
static bool bar_sync(int id, int core_num, bool ok)
{
    cm_launch *L = tls_launch;
    if (L == NULL || core_num <= 1 || L->ncores <= 1)
        return ok;
    unsigned n = (unsigned)(core_num < L->ncores ? core_num : L->ncores);
    cm_barrier *b = &L->bars[id];
    const cg_trace_mark since = cg_trace_start();
    unsigned old, w = bar_arrive(b, n, ok, &old);
    if (bw_gen(w) != bw_gen(old))
        bar_wake(b);
    else
        w = bar_wait(b, bw_gen(old), L->spin);
    cg_trace_region(CG_PHASE_BARRIER, CG_PHASE_BARRIER, since);
    return (w & BW_RESULT) != 0;
}

CG_API void sys_bar(int bar_id, int core_num)
{
    if (bar_id >= 0 && bar_id < CM_USER_BARS)
        (void)bar_sync(bar_id, core_num, true);
}

int cm_bar_all(int core_mask, int ok)
{
    if (core_mask == 0)
        return ok != 0;
    return bar_sync(CM_LIB_BARS + __builtin_ctz((uint32_t)core_mask), GetCoreNum(core_mask),
                    ok != 0);
}

/* ---- per-core scratch ------------------------------------------------ */

/* Grow-only: the old buffer is freed only once its replacement exists, so a
 * failed growth leaves the core with what it had. Contents are not kept
 * across a growth. */
void *cm_core_scratch(size_t bytes)
{
    if (tls_launch == NULL)
        return NULL;
    cm_core *c = &g_core[tls_core];
    if (c->scratch != NULL && bytes <= c->scratch_cap)
        return c->scratch;
    if (bytes > SIZE_MAX - (CM_LINE - 1))
        return NULL;
    size_t cap = bytes == 0 ? CM_LINE : (bytes + CM_LINE - 1) & ~(size_t)(CM_LINE - 1);
    void *p = cg_fault_should_fail(CG_FAULT_SCRATCH_ALLOC) ? NULL : aligned_alloc(CM_LINE, cap);
    if (p == NULL)
        return NULL;
    free(c->scratch);
    c->scratch = p;
    c->scratch_cap = cap;
    return p;
}

cg_status cm_scratch_all(int core_mask, size_t bytes, void **mem, cg_error *err)
{
    *mem = bytes ? cm_core_scratch(bytes) : NULL;
    cm_core *self = &g_core[tls_core];
    self->scratch_failed = bytes && !*mem ? bytes : 0;
    if (cm_bar_all(core_mask, !self->scratch_failed))
        return CG_OK;
    /* every core names the same one: the lowest that failed */
    uint32_t m = (uint32_t)core_mask;
    while (!g_core[__builtin_ctz(m)].scratch_failed)
        m &= m - 1;
    const int id = __builtin_ctz(m);
    cg_fail(err, CG_ERR_NO_MEMORY,
            "core %d of core_mask 0x%08x could not allocate %zu bytes of scratch", id,
            (unsigned)core_mask, g_core[id].scratch_failed);
    /* no core's next call may overwrite scratch_failed before all have read it */
    cm_bar_all(core_mask, 1);
    return CG_ERR_NO_MEMORY;
}

void *cm_scratch_of(int core_mask, int rank)
{
    uint32_t m = (uint32_t)core_mask;
    for (int r = 0; r < rank; r++)
        m &= m - 1;
    return g_core[__builtin_ctz(m)].scratch;
}

/* ---- core threads ---------------------------------------------------- */

static bool job_posted(cm_core *c, unsigned seen)
{
    return atomic_load_explicit(&c->seq, memory_order_acquire) != seen;
}

/* Idle: spin briefly (only if the last launch fit on the CPUs), then sleep
 * on the core's condvar until a launcher bumps seq. */
static cm_launch *next_job(cm_core *c, unsigned *seen, bool spin)
{
    bool ready = false;
    for (int i = 0; spin && !ready && i < CM_SPIN; i++) {
        ready = job_posted(c, *seen);
        if (!ready)
            cpu_relax();
    }
    if (!ready) {
        pthread_mutex_lock(&c->mu);
        while (!job_posted(c, *seen))
            pthread_cond_wait(&c->cv, &c->mu);
        pthread_mutex_unlock(&c->mu);
    }
    /* A core runs one launch at a time, so exactly one new job is posted. */
    *seen += 1;
    return c->job;
}

/* The last core to finish wakes the launcher. The slot and its condvar are
 * persistent, so signalling after the launcher already saw 0 and left is
 * harmless (at worst a spurious wake-up of the slot's next launcher). */
static void finish(cm_launch *L)
{
    if (atomic_fetch_sub(&L->remaining, 1) != 1)
        return;
    pthread_mutex_lock(&L->done_mu);
    pthread_cond_signal(&L->done_cv);
    pthread_mutex_unlock(&L->done_mu);
}

static void *core_main(void *p)
{
    cm_core *c = p;
    unsigned seen = c->start_seq;
    bool spin = false;
    tls_core = (int)(c - g_core);
    for (;;) {
        cm_launch *L = next_job(c, &seen, spin);
        spin = L->spin; /* read now: after finish() the slot may be reused */
        tls_launch = L;
        cg_trace_waited_since(L->dispatched); /* for the launch to reach this core */
        L->entry(L->arg);
        tls_launch = NULL;
        finish(L);
    }
    return NULL;
}

/* ---- launching ------------------------------------------------------- */

/* Claims every core of m, or none: returns 0, or the cores of m found busy. */
static uint32_t claim(uint32_t m)
{
    uint_least32_t cur = atomic_load_explicit(&g_busy, memory_order_relaxed);
    do {
        if (cur & m)
            return (uint32_t)(cur & m);
    } while (!atomic_compare_exchange_weak_explicit(&g_busy, &cur, cur | m, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 0;
}

static void release(uint32_t m)
{
    atomic_fetch_and_explicit(&g_busy, ~m, memory_order_release);
}

/* 0, or the error number of what failed. */
static int start_core(cm_core *c)
{
    pthread_attr_t at;
    pthread_t t;
    int rc = pthread_attr_init(&at);
    if (rc != 0)
        return rc;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED); /* never joined */
    c->start_seq = atomic_load_explicit(&c->seq, memory_order_relaxed);
    rc = cg_fault_should_fail(CG_FAULT_THREAD_START) ? EAGAIN
                                                     : pthread_create(&t, &at, core_main, c);
    c->started = rc == 0;
    if (c->started)
        c->thread = t;
    c->bound_cpu = -1;
    pthread_attr_destroy(&at);
    return rc;
}

/* Threads already started by a failing call stay parked in the pool; the
 * caller only has to give its cores back. */
static cg_status start_cores(uint32_t m, cg_error *err)
{
    for (; m; m &= m - 1) {
        const int id = __builtin_ctz(m);
        int rc = g_core[id].started ? 0 : start_core(&g_core[id]);
        if (rc != 0) {
            char why[64];
            if (strerror_r(rc, why, sizeof why) != 0)
                snprintf(why, sizeof why, "error %d", rc);
            return cg_fail(err, CG_ERR_THREAD, "the thread of core %d could not be started: %s", id,
                           why);
        }
    }
    return CG_OK;
}

static cm_launch *prepare(uint32_t m, void (*entry)(void *), void *arg)
{
    cm_launch *L = &g_launch[__builtin_ctz(m)];
    L->mask = m;
    L->ncores = __builtin_popcount(m);
    L->spin = L->ncores <= g_ncpu;
    L->entry = entry;
    L->arg = arg;
    atomic_store_explicit(&L->remaining, L->ncores, memory_order_relaxed);
    /* Counts are 0 after any launch that completed; reset anyway so a
     * launch can never inherit a half-filled round. */
    for (int b = 0; b < CM_BARS; b++)
        atomic_store_explicit(&L->bars[b].word, BW_IDLE, memory_order_relaxed);
    return L;
}

/* Binds the threads of `cores` (a launch's, on their own threads) to the
 * process's CPUs after the calling thread's, one each in turn: left to the
 * scheduler, a woken core's thread was often put on the CPU of the thread
 * that woke it, and the two took turns there while the other CPU idled
 * (the batch-1 filter gradient on 2 cores, a KVM guest: 2.4 ms, the
 * 1-core time, where it takes 1.2 ms on two CPUs, in a tenth of the calls
 * or in nine tenths, by the caller's CPU). A thread is bound again only
 * when the caller has moved. */
static void bind_cores(uint32_t cores)
{
    const int here = g_bind ? sched_getcpu() : -1;
    if (here < 0)
        return;
    int at = 0; /* the caller's place among the CPUs (0 if it is on none of them) */
    while (at < g_ncpu && g_cpus[at] != here)
        at++;
    at = at < g_ncpu ? at : 0;
    int k = 1;
    for (uint32_t m = cores; m; m &= m - 1, k++) {
        cm_core *c = &g_core[__builtin_ctz(m)];
        const int cpu = g_cpus[(at + k) % g_ncpu];
        if (c->bound_cpu == cpu)
            continue;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        c->bound_cpu = pthread_setaffinity_np(c->thread, sizeof set, &set) == 0 ? cpu : -1;
    }
}

/* Hands L to the cores of `cores` (L's mask, or all of it but a joined core). */
static void dispatch(cm_launch *L, uint32_t cores)
{
    for (uint32_t m = cores; m; m &= m - 1) {
        cm_core *c = &g_core[__builtin_ctz(m)];
        pthread_mutex_lock(&c->mu);
        c->job = L;
        atomic_fetch_add_explicit(&c->seq, 1, memory_order_release);
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
}

/* The calling thread runs core `core`'s share of L itself (cm_run_here), as
 * that core: its id, barriers and scratch, its own thread scratch kept apart
 * (it may hold the call's staged tensors). */
static void run_joined(cm_launch *L, int core)
{
    tls_core = core;
    tls_launch = L;
    cg_thread_floats_as_core(core);
    cg_trace_waited_since(L->dispatched);
    L->entry(L->arg);
    cg_thread_floats_as_core(-1);
    tls_launch = NULL;
    tls_core = -1;
    atomic_fetch_sub_explicit(&L->remaining, 1, memory_order_acq_rel);
}

/* The launcher spins only if it and every core still on its own thread can
 * have a CPU each (`joined`: 1 when the launcher ran a core's share). */
static void wait_done(cm_launch *L, int joined)
{
    for (int i = 0; L->ncores - joined < g_ncpu && i < CM_SPIN; i++) {
        if (atomic_load_explicit(&L->remaining, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&L->done_mu);
    while (atomic_load_explicit(&L->remaining, memory_order_acquire) != 0)
        pthread_cond_wait(&L->done_cv, &L->done_mu);
    pthread_mutex_unlock(&L->done_mu);
}

/* cm_run, and cm_run_here when `join`. */
static cg_status run(int core_mask, void (*entry)(void *arg), void *arg, bool join, cg_error *err)
{
    uint32_t m = (uint32_t)core_mask;
    if (m == 0)
        return cg_fail(err, CG_ERR_CORE_MASK, "core_mask is 0");
    if (entry == NULL)
        return cg_fail(err, CG_ERR_CORE_MASK, "entry is NULL");
    pthread_once(&g_once, cm_init);
    uint32_t busy = claim(m);
    if (busy) {
        const int core = __builtin_ctz(busy);
        const bool own = tls_launch && (tls_launch->mask >> core & 1u);
        return cg_fail(err, CG_ERR_CORE_BUSY, "core %d of core_mask 0x%08x is busy in %s launch",
                       core, (unsigned)m, own ? "the calling" : "another");
    }
    cg_status s = start_cores(m, err);
    if (s != CG_OK) {
        release(m);
        return s;
    }
    cm_launch *L = prepare(m, entry, arg);
    join = join && tls_launch == NULL; /* a core's own calls are SPMD: no launch */
    bind_cores(join ? m & (m - 1) : m);
    cg_trace_begin(m);
    L->dispatched = cg_trace_on ? cg_trace_wall_ns() : 0;
    dispatch(L, join ? m & (m - 1) : m);
    if (join)
        run_joined(L, __builtin_ctz(m));
    wait_done(L, join);
    cg_trace_flush(m);
    release(m);
    return CG_OK;
}

cg_status cm_run(int core_mask, void (*entry)(void *arg), void *arg, cg_error *err)
{
    return run(core_mask, entry, arg, false, err);
}

cg_status cm_run_here(int core_mask, void (*entry)(void *arg), void *arg, cg_error *err)
{
    return run(core_mask, entry, arg, true, err);
}

CG_API int core_mask_launch(int core_mask, void (*entry)(void *arg), void *arg)
{
    cg_error err;
    return cg_record(cm_run(core_mask, entry, arg, &err), &err);
}
