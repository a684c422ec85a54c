/* SPDX-License-Identifier: MIT */
/* The emulated-core runtime: launches, core ids, barriers, busy refusal,
 * concurrency of disjoint launches, the library barrier and per-core scratch. */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "convgrad.h"
#include "core_mask/core_mask_internal.h"

/* ---- helpers ---------------------------------------------------------- */

static double clock_sec(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now_sec(void)
{
    return clock_sec(CLOCK_MONOTONIC);
}

static void sleep_sec(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Polls (politely: 2 CPUs may carry 32 cores) until *f >= want; false on timeout. */
static bool wait_at_least(atomic_int *f, int want, double timeout)
{
    double end = now_sec() + timeout;
    while (atomic_load(f) < want) {
        if (now_sec() > end)
            return false;
        sleep_sec(20e-6);
    }
    return true;
}

static int my_rank(void)
{
    return GetLogicCoreId(cm_launch_mask(), get_core_id());
}

static void count_entry(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

/* ---- launch: every core once, the right ids --------------------------- */

typedef struct {
    int mask;
    pthread_t launcher;
    atomic_int hits[32];
    atomic_int bad;
} once_ctx;

static void once_entry(void *p)
{
    once_ctx *c = p;
    int id = get_core_id();
    bool ok = id >= 0 && id < 32 && (((uint32_t)c->mask >> id) & 1u) &&
              cm_launch_mask() == c->mask && GetLogicCoreId(c->mask, id) >= 0 &&
              !pthread_equal(pthread_self(), c->launcher);
    if (!ok) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    atomic_fetch_add(&c->hits[id], 1);
}

Test(core_mask, launch_runs_entry_once_per_core, .timeout = 60)
{
    const int masks[] = {0x1, 0xF, (int)0x80000001u, INT_MIN, 0x55555555, 0x7FFFFFFF, -1, 0x2};
    for (size_t k = 0; k < sizeof masks / sizeof masks[0]; k++) {
        for (int rep = 0; rep < 3; rep++) {
            once_ctx c = {.mask = masks[k], .launcher = pthread_self()};
            cr_assert_eq(core_mask_launch(c.mask, once_entry, &c), 0, "mask %#x", (unsigned)c.mask);
            cr_assert_eq(cg_last_status(), CG_OK);
            cr_assert_eq(atomic_load(&c.bad), 0, "wrong id/mask/thread on mask %#x",
                         (unsigned)c.mask);
            for (int i = 0; i < 32; i++)
                cr_assert_eq(atomic_load(&c.hits[i]), (int)(((uint32_t)c.mask >> i) & 1u),
                             "core %d of mask %#x", i, (unsigned)c.mask);
        }
    }
}

/* ---- the pool is persistent ------------------------------------------- */

static pthread_t g_self[32];

static void self_entry(void *p)
{
    (void)p;
    g_self[get_core_id()] = pthread_self();
}

Test(core_mask, launch_reuses_core_threads, .timeout = 30)
{
    pthread_t first[32];
    cr_assert_eq(core_mask_launch(-1, self_entry, NULL), 0);
    memcpy(first, g_self, sizeof first);
    cr_assert_eq(core_mask_launch(0x00F000F0, self_entry, NULL), 0);
    cr_assert_eq(core_mask_launch(-1, self_entry, NULL), 0);
    for (int i = 0; i < 32; i++)
        cr_assert(pthread_equal(first[i], g_self[i]), "core %d got a new thread", i);
}

/* ---- the cores' threads are bound to the process's CPUs ---------------- */

static int g_bound[32]; /* the one CPU a core's thread may run on, or -1 */

static void bound_entry(void *p)
{
    (void)p;
    cpu_set_t set;
    int only = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            if (CPU_ISSET(cpu, &set))
                only = cpu;
    g_bound[get_core_id()] = only;
}

/* With two CPUs or more, a launch of the library's own (cm_run_here: the
 * calling thread runs core 0) binds each other core's thread to one of the
 * process's CPUs, in turn after the caller's: cores 1 and 2 never share
 * one, wherever the caller is. */
Test(core_mask, launch_binds_core_threads_to_cpus, .timeout = 30)
{
    cpu_set_t mine;
    cr_assert_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    if (CPU_COUNT(&mine) < 2)
        cr_skip_test("one CPU: nothing to bind to");
    const char *bind = getenv("CONVGRAD_BIND");
    if (bind && strcmp(bind, "0") == 0)
        cr_skip_test("CONVGRAD_BIND=0");
    cg_error err;
    for (int round = 0; round < 20; round++) {
        cr_assert_eq(cm_run_here(0x7, bound_entry, NULL, &err), CG_OK);
        for (int core = 1; core <= 2; core++)
            cr_assert(g_bound[core] >= 0 && CPU_ISSET(g_bound[core], &mine),
                      "round %d: core %d's thread is bound to CPU %d", round, core, g_bound[core]);
        cr_assert_neq(g_bound[1], g_bound[2], "round %d: cores 1 and 2 share CPU %d", round,
                      g_bound[1]);
    }
}

/* ---- vendor tables ---------------------------------------------------- */

Test(core_mask, logic_core_id_and_core_num_tables)
{
    static const struct {
        int mask, n;
    } nums[] = {{0, 0},           {1, 1},          {0xF, 4},
                {INT_MIN, 1},     {-1, 32},        {(int)0x80000001u, 2},
                {0x55555555, 16}, {0x7FFFFFFF, 31}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        cr_assert_eq(GetCoreNum(nums[i].mask), nums[i].n, "GetCoreNum(%#x)",
                     (unsigned)nums[i].mask);

    static const struct {
        int mask, id, rank;
    } ranks[] = {{0xF, 0, 0},
                 {0xF, 3, 3},
                 {0xF, 4, -1},
                 {0xA, 1, 0},
                 {0xA, 3, 1},
                 {0xA, 2, -1},
                 {(int)0x80000001u, 0, 0},
                 {(int)0x80000001u, 31, 1},
                 {(int)0x80000001u, 5, -1},
                 {INT_MIN, 31, 0},
                 {INT_MIN, 30, -1},
                 {-1, 0, 0},
                 {-1, 31, 31},
                 {-1, 17, 17},
                 {-1, 32, -1},
                 {-1, -1, -1},
                 {-1, INT_MAX, -1},
                 {-1, INT_MIN, -1},
                 {0, 0, -1},
                 {0x55555555, 30, 15},
                 {0x55555555, 31, -1}};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        cr_assert_eq(GetLogicCoreId(ranks[i].mask, ranks[i].id), ranks[i].rank,
                     "GetLogicCoreId(%#x, %d)", (unsigned)ranks[i].mask, ranks[i].id);
}

/* ---- outside a launch ------------------------------------------------- */

static atomic_int g_outside_bad;

static bool looks_outside(void)
{
    return get_core_id() == -1 && cm_launch_mask() == 0 && cm_core_scratch(16) == NULL &&
           cm_bar_all(0xF, 1) != 0 && cm_bar_all(0xF, 0) == 0;
}

static void *outside_thread(void *p)
{
    (void)p;
    if (!looks_outside())
        atomic_fetch_add(&g_outside_bad, 1);
    sys_bar(0, 4); /* must return at once */
    return NULL;
}

/* A thread a core starts is not a core itself. */
static void spawn_entry(void *p)
{
    (void)p;
    pthread_t t;
    if (get_core_id() < 0 || pthread_create(&t, NULL, outside_thread, NULL) != 0) {
        atomic_fetch_add(&g_outside_bad, 1);
        return;
    }
    pthread_join(t, NULL);
}

Test(core_mask, core_id_is_minus_one_outside_a_launch, .timeout = 30)
{
    cr_assert(looks_outside(), "host thread before any launch");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, outside_thread, NULL), 0);
    pthread_join(t, NULL);
    cr_assert_eq(core_mask_launch(0x9, spawn_entry, NULL), 0);
    cr_assert(looks_outside(), "host thread after a launch");
    cr_assert_eq(atomic_load(&g_outside_bad), 0);
}

/* The calling thread's detail is `want`. */
static void expect_detail(const char *want, const char *when)
{
    cr_expect(strcmp(cg_last_error_detail(), want) == 0, "%s: detail '%s', want '%s'", when,
              cg_last_error_detail(), want);
}

Test(core_mask, mask_zero_and_null_entry_refused, .timeout = 30)
{
    atomic_int ran = 0;
    cr_assert_eq(core_mask_launch(0, count_entry, &ran), CG_ERR_CORE_MASK);
    cr_assert_eq(cg_last_status(), CG_ERR_CORE_MASK);
    expect_detail("core_mask is 0", "mask 0");
    cr_assert_eq(core_mask_launch(0x3, NULL, NULL), CG_ERR_CORE_MASK);
    expect_detail("entry is NULL", "entry NULL");
    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(core_mask_launch(0x3, count_entry, &ran), 0);
    cr_assert_eq(cg_last_status(), CG_OK, "a good launch records CG_OK");
    expect_detail("", "a good launch");
    cr_assert_eq(atomic_load(&ran), 2);
}

/* ---- sys_bar ---------------------------------------------------------- */

/* Each round every core writes its slot, meets the others, checks that all
 * wrote this round, and meets them again before the next write: a barrier
 * letting anyone through early shows up as a stale or future value. */
typedef struct {
    int mask, count_arg, rounds;
    atomic_int val[32];
    atomic_int errors;
} bar_ctx;

static void bar_entry(void *p)
{
    bar_ctx *c = p;
    int me = my_rank(), n = GetCoreNum(c->mask), errors = 0;
    for (int r = 1; r <= c->rounds; r++) {
        atomic_store_explicit(&c->val[me], r, memory_order_relaxed);
        sys_bar(r % 8, c->count_arg);
        for (int j = 0; j < n; j++)
            errors += atomic_load_explicit(&c->val[j], memory_order_relaxed) != r;
        sys_bar(8 + r % 8, c->count_arg);
    }
    atomic_fetch_add(&c->errors, errors);
}

static void run_bar_stress(int mask, int count_arg, int rounds)
{
    bar_ctx c = {.mask = mask, .count_arg = count_arg, .rounds = rounds};
    double t0 = now_sec();
    cr_assert_eq(core_mask_launch(mask, bar_entry, &c), 0);
    cr_log_info("sys_bar %d cores x %d rounds: %.3f s", GetCoreNum(mask), rounds, now_sec() - t0);
    cr_assert_eq(atomic_load(&c.errors), 0, "barrier let a core through early (mask %#x)",
                 (unsigned)mask);
}

Test(core_mask, sys_bar_stress_8_cores, .timeout = 120)
{
    run_bar_stress(0x000000FF, 8, 4000);
    run_bar_stress((int)0x81818181u, 8, 1000); /* holes and bit 31 */
}

Test(core_mask, sys_bar_stress_32_cores, .timeout = 120)
{
    run_bar_stress(-1, 32, 2000);
}

Test(core_mask, sys_bar_clamps_over_large_count, .timeout = 60)
{
    run_bar_stress(0xF0, 1000, 500);
}

/* Only core 0 calls the calls that must not wait: if any of them waited for
 * partners it would hang (timeout) since the others never join it. */
static void no_wait_entry(void *p)
{
    (void)p;
    if (my_rank() == 0) {
        sys_bar(16, 4);
        sys_bar(-1, 4);
        sys_bar(3, 1);
        sys_bar(3, 0);
        sys_bar(3, -7);
        (void)cm_bar_all(1 << get_core_id(), 1);
    }
    sys_bar(0, 4);
}

static void single_core_entry(void *p)
{
    sys_bar(0, 32); /* clamped to the launch's single core */
    *(int *)p = cm_bar_all(INT_MIN, 1);
}

Test(core_mask, sys_bar_returns_at_once_when_nothing_to_wait_for, .timeout = 10)
{
    sys_bar(0, 4); /* host thread */
    sys_bar(15, 32);
    sys_bar(16, 2);
    sys_bar(-1, 2);
    cr_assert_eq(core_mask_launch(0x0F000000, no_wait_entry, NULL), 0);
    int r = 0;
    cr_assert_eq(core_mask_launch(INT_MIN, single_core_entry, &r), 0);
    cr_assert_neq(r, 0);
}

/* ---- cm_bar_all ------------------------------------------------------- */

/* Results alternate round by round (odd: all ok; even: one core says no),
 * so a core reading the next round's result instead of its own fails. */
typedef struct {
    int mask, rounds;
    atomic_int errors;
} all_ctx;

static void all_entry(void *p)
{
    all_ctx *c = p;
    int me = my_rank(), n = GetCoreNum(c->mask), errors = 0;
    for (int r = 0; r < c->rounds; r++) {
        int bad = (r % 2) ? n : (r / 2) % n; /* n: nobody */
        int got = cm_bar_all(c->mask, me != bad ? 7 : 0);
        errors += (got != 0) != (bad == n);
    }
    atomic_fetch_add(&c->errors, errors);
}

Test(core_mask, bar_all_ands_ok_flags_across_rounds, .timeout = 120)
{
    const int masks[] = {0xFF, -1, 0x3};
    const int rounds[] = {4000, 1000, 4000};
    for (int k = 0; k < 3; k++) {
        all_ctx c = {.mask = masks[k], .rounds = rounds[k]};
        double t0 = now_sec();
        cr_assert_eq(core_mask_launch(c.mask, all_entry, &c), 0);
        cr_log_info("cm_bar_all %d cores x %d rounds: %.3f s", GetCoreNum(c.mask), c.rounds,
                    now_sec() - t0);
        cr_assert_eq(atomic_load(&c.errors), 0, "wrong AND on mask %#x", (unsigned)c.mask);
    }
}

/* ---- concurrency and refusal ------------------------------------------ */

/* Launch i of each side waits until launch i of the other side has started:
 * that can only finish if the two launches overlap in time. */
typedef struct {
    atomic_int progress[2];
    atomic_int timeouts;
} pair_ctx;

typedef struct {
    pair_ctx *pair;
    int side, mask, iter, failures;
} side_ctx;

static void side_entry(void *p)
{
    side_ctx *s = p;
    atomic_store(&s->pair->progress[s->side], s->iter + 1);
    if (!wait_at_least(&s->pair->progress[1 - s->side], s->iter + 1, 10.0))
        atomic_fetch_add(&s->pair->timeouts, 1);
}

static void *side_host(void *p)
{
    side_ctx *s = p;
    for (s->iter = 0; s->iter < 300; s->iter++)
        s->failures += core_mask_launch(s->mask, side_entry, s) != 0;
    return NULL;
}

Test(core_mask, disjoint_launches_run_concurrently, .timeout = 120)
{
    pair_ctx pair = {0};
    side_ctx a = {.pair = &pair, .side = 0, .mask = 0x0000000F};
    side_ctx b = {.pair = &pair, .side = 1, .mask = (int)0xF0000000u};
    pthread_t ta, tb;
    double t0 = now_sec();
    cr_assert_eq(pthread_create(&ta, NULL, side_host, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, side_host, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_log_info("2 x 300 concurrent launches: %.3f s", now_sec() - t0);
    cr_assert_eq(a.failures + b.failures, 0, "a disjoint launch was refused");
    cr_assert_eq(atomic_load(&pair.timeouts), 0, "disjoint launches did not overlap");
}

typedef struct {
    atomic_int started, release, timeouts;
    int rc;
} hold_ctx;

static void hold_entry(void *p)
{
    hold_ctx *h = p;
    atomic_fetch_add(&h->started, 1);
    if (!wait_at_least(&h->release, 1, 10.0))
        atomic_fetch_add(&h->timeouts, 1);
}

static void *hold_host(void *p)
{
    hold_ctx *h = p;
    h->rc = core_mask_launch(0x3, hold_entry, h);
    return NULL;
}

/* Results are gathered first and asserted only once the held launch is
 * released and joined, so a failure never leaves cores busy behind it. */
Test(core_mask, overlapping_launch_refused_while_busy, .timeout = 30)
{
    hold_ctx h = {0};
    atomic_int ran = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hold_host, &h), 0);
    bool started = wait_at_least(&h.started, 2, 10.0);

    const int overlapping[] = {0x6, 0x1, -1, (int)0x80000002u};
    /* the lowest core of the mask that the held launch (0x3) has */
    static const char *const details[] = {
        "core 1 of core_mask 0x00000006 is busy in another launch",
        "core 0 of core_mask 0x00000001 is busy in another launch",
        "core 0 of core_mask 0xffffffff is busy in another launch",
        "core 1 of core_mask 0x80000002 is busy in another launch"};
    int rc[4], status[4];
    char detail[4][256];
    double t0 = now_sec();
    for (int k = 0; k < 4; k++) {
        rc[k] = core_mask_launch(overlapping[k], count_entry, &ran);
        status[k] = cg_last_status();
        snprintf(detail[k], sizeof detail[k], "%s", cg_last_error_detail());
    }
    double refuse_time = now_sec() - t0;
    int ran_refused = atomic_load(&ran);
    int rc_disjoint = core_mask_launch(0x4, count_entry, &ran);
    int ran_disjoint = atomic_load(&ran);
    atomic_store(&h.release, 1);
    pthread_join(t, NULL);

    cr_assert(started, "held launch never started");
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(rc[k], CG_ERR_CORE_BUSY, "mask %#x", (unsigned)overlapping[k]);
        cr_assert_eq(status[k], CG_ERR_CORE_BUSY);
        cr_expect(strcmp(detail[k], details[k]) == 0, "mask %#x: detail '%s', want '%s'",
                  (unsigned)overlapping[k], detail[k], details[k]);
    }
    cr_assert_lt(refuse_time, 1.0, "refusal must not wait");
    cr_assert_eq(ran_refused, 0, "a refused launch ran its entry");
    cr_assert_eq(rc_disjoint, 0, "disjoint launch while held");
    cr_assert_eq(ran_disjoint, 1);
    cr_assert_eq(h.rc, 0);
    cr_assert_eq(atomic_load(&h.timeouts), 0);
    cr_assert_eq(core_mask_launch(0x6, count_entry, &ran), 0, "cores are free again");
    cr_assert_eq(atomic_load(&ran), 3);
}

/* A core can launch on other cores, never on its own. */
static void nested_entry(void *p)
{
    atomic_int *res = p;
    if (get_core_id() != 0)
        return;
    atomic_store(&res[0], core_mask_launch(0x1, count_entry, &res[2]));
    res[3] = strcmp(cg_last_error_detail(),
                    "core 0 of core_mask 0x00000001 is busy in the calling launch") == 0;
    atomic_store(&res[1], core_mask_launch(0x30, count_entry, &res[2]));
}

Test(core_mask, nested_launch_only_on_other_cores, .timeout = 30)
{
    atomic_int res[4] = {1, 1, 0, 0};
    cr_assert_eq(core_mask_launch(0x3, nested_entry, res), 0);
    cr_assert_eq(atomic_load(&res[0]), CG_ERR_CORE_BUSY);
    cr_assert(atomic_load(&res[3]), "the refused nested launch's detail names its own launch");
    cr_assert_eq(atomic_load(&res[1]), 0);
    cr_assert_eq(atomic_load(&res[2]), 2);
}

/* ---- per-core scratch ------------------------------------------------- */

static void *g_scratch[32];
static atomic_int g_scratch_bad;

static bool aligned64(const void *p)
{
    return p != NULL && (uintptr_t)p % 64 == 0;
}

static bool scratch_first_ok(int id)
{
    unsigned char *s = cm_core_scratch(1000);
    if (!aligned64(s))
        return false;
    memset(s, id, 1000);
    g_scratch[id] = s;
    return true;
}

static bool scratch_again_ok(int id)
{
    unsigned char *s = cm_core_scratch(1000);
    if (s != g_scratch[id] || cm_core_scratch(500) != s || cm_core_scratch(0) != s)
        return false;
    for (int i = 0; i < 1000; i++)
        if (s[i] != (unsigned char)id)
            return false;
    return true;
}

static bool scratch_grow_ok(int id)
{
    unsigned char *big = cm_core_scratch((size_t)1 << 20);
    if (!aligned64(big))
        return false;
    memset(big, 0xA5, (size_t)1 << 20);
    /* A growth that cannot happen fails without losing the buffer. */
    if (cm_core_scratch(SIZE_MAX) != NULL || cm_core_scratch(100) != big)
        return false;
    g_scratch[id] = big;
    return true;
}

static bool scratch_big_again_ok(int id)
{
    unsigned char *big = cm_core_scratch((size_t)1 << 20);
    return big == g_scratch[id] && big[0] == 0xA5 && big[((size_t)1 << 20) - 1] == 0xA5;
}

/* The step to run is the launch argument. */
static void scratch_entry(void *p)
{
    bool (*step)(int) = *(bool (**)(int))p;
    if (!step(get_core_id()))
        atomic_fetch_add(&g_scratch_bad, 1);
}

Test(core_mask, core_scratch_aligned_and_persistent, .timeout = 30)
{
    const int mask = (int)0x80000005u;
    cr_assert_null(cm_core_scratch(64), "host thread has no scratch");
    bool (*steps[])(int) = {scratch_first_ok, scratch_again_ok, scratch_grow_ok,
                            scratch_big_again_ok};
    for (int k = 0; k < 4; k++)
        cr_assert_eq(core_mask_launch(mask, scratch_entry, &steps[k]), 0);
    cr_assert_eq(atomic_load(&g_scratch_bad), 0);
    cr_assert_null(cm_core_scratch(64));
}

/* ---- nothing burns CPU while waiting ---------------------------------- */

/* CPU time of the pool's 32 threads and the calling thread, not of the
 * process: OpenBLAS starts a worker thread of its own when the library
 * loads, which spins for about 0.1 s (its thread timeout) before it sleeps,
 * and in the test that spin landed in the measured window whenever the first
 * launch came soon enough after start-up (often under ASan). */
static clockid_t g_core_clock[32];
static atomic_int g_clock_missing;

static void clock_entry(void *p)
{
    (void)p;
    if (pthread_getcpuclockid(pthread_self(), &g_core_clock[get_core_id()]) != 0)
        atomic_fetch_add(&g_clock_missing, 1);
}

static double pool_cpu_sec(void)
{
    double sum = clock_sec(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < 32; i++)
        sum += clock_sec(g_core_clock[i]);
    return sum;
}

static void late_core_entry(void *p)
{
    (void)p;
    if (get_core_id() == 0)
        sleep_sec(0.3);
    sys_bar(5, 32);
}

Test(core_mask, idle_and_waiting_cores_sleep, .timeout = 60)
{
    cr_assert_eq(core_mask_launch(-1, clock_entry, NULL), 0);
    cr_assert_eq(atomic_load(&g_clock_missing), 0, "a core's CPU clock is unavailable");
    double c0 = pool_cpu_sec();
    sleep_sec(0.3);
    double idle = pool_cpu_sec() - c0;
    cr_assert_lt(idle, 0.1, "idle pool used %.3f s of CPU in 0.3 s", idle);

    c0 = pool_cpu_sec();
    cr_assert_eq(core_mask_launch(-1, late_core_entry, NULL), 0);
    double waiting = pool_cpu_sec() - c0;
    cr_assert_lt(waiting, 0.15, "31 cores waiting 0.3 s used %.3f s of CPU", waiting);
}

/* ---- fork ------------------------------------------------------------- */

#if defined(__SANITIZE_THREAD__)
#define CM_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CM_TEST_TSAN 1
#endif
#endif

Test(core_mask, pool_restarts_in_a_forked_child, .timeout = 30)
{
#ifdef CM_TEST_TSAN
    cr_skip_test("TSan does not support starting threads after a multi-threaded fork");
#endif
    atomic_int ran = 0;
    cr_assert_eq(core_mask_launch(0xF, count_entry, &ran), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        atomic_int n = 0;
        int rc = core_mask_launch(0xF, count_entry, &n);
        _exit(rc == 0 && atomic_load(&n) == 4 ? 0 : 1);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "launch in a forked child failed");
}
