/* SPDX-License-Identifier: MIT */
/* Fault injection: the library's own allocations and thread starts fail on
 * demand (src/fault.h; this executable links the CONVGRAD_FAULT_INJECTION
 * copy of the library). Points:
 *
 *   CG_FAULT_THREAD_START   pthread_create of an emulated core: the pool's
 *                           first thread, or a later launch growing the pool;
 *   CG_FAULT_SCRATCH_ALLOC  a core's scratch, on first use or when growing.
 *
 * For each: `_s` host mode and SPMD mode (where the point is reachable), fp32
 * and fp16. The failing call gets CG_ERR_THREAD / CG_ERR_NO_MEMORY with a
 * non-empty message (returned and in cg_last_status) and a detail naming the
 * core (and the bytes it could not get) on the calling thread, out_dw and the whole
 * workspace are bit-for-bit untouched, and the NEXT call succeeds with the
 * right result (tests/reference.c). The ASan tree's LeakSanitizer checks
 * nothing leaks; Criterion's per-test timeout catches a deadlock.
 *
 * Order independence: Criterion forks per test, but the TSan tree runs every
 * test in one process (tests/inprocess_runner), where the pool and the
 * cores' scratch persist across tests. So each test uses cores no other test
 * here uses (the CORES_* masks below), and the fault counts restart at each
 * arming. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "support.h"

#define TEST_TIMEOUT 120.0

/* One disjoint set of cores per test. */
enum {
    CORES_FIRST_FP = 0x3,           /* 0, 1 */
    CORES_FIRST_HP = 0xC,           /* 2, 3 */
    CORES_GROW_FP_OLD = 0x10,       /* 4 */
    CORES_GROW_FP = 0x70,           /* 4, 5, 6 */
    CORES_GROW_HP_OLD = 0x80,       /* 7 */
    CORES_GROW_HP = 0x380,          /* 7, 8, 9 */
    CORES_STUCK = 0x400,            /* 10 */
    CORES_COLUMNS = 0x2000800,      /* 11, 25 */
    CORES_LAUNCH = 0x7000,          /* 12, 13, 14 */
    CORES_SCRATCH_FP = 0x18000,     /* 15, 16 */
    CORES_SCRATCH_HP = 0x60000,     /* 17, 18 */
    CORES_GROWTH_FP = 0x180000,     /* 19, 20 */
    CORES_GROWTH_HP = 0x600000,     /* 21, 22 */
    CORES_DEPTHWISE_FP = 0x1800000, /* 23, 24 */
    CORES_SPMD_FP = 0xC000000,      /* 26, 27 */
    CORES_SPMD_HP = 0x30000000,     /* 28, 29 */
};
static const int CORES_DEPTHWISE_HP = (int)0xC0000000u; /* 30, 31 */

/* One shape a declaration (clang-format would put one field a line). */
/* clang-format off */
/* General path: groups, asymmetric pads (im2col tiles: per-core scratch). */
static const cgt_shape GENERAL = {.n = 2, .h = 5, .w = 6, .cin = 4, .cout = 6, .g = 2,
                                  .kh = 3, .kw = 2, .pu = 1, .pd = 1, .pl = 1, .bs = 0x400};
/* The same with many more rows: its tiles need more scratch than GENERAL's. */
static const cgt_shape GENERAL_BIG = {.n = 3, .h = 40, .w = 33, .cin = 4, .cout = 6, .g = 2,
                                      .kh = 3, .kw = 2, .pu = 1, .pd = 1, .pl = 1, .bs = 0x400};
/* General path with long dw rows (Kh*Kw*Ci' = 288): `_s` on 2 cores splits
 * dw's columns instead of the sum (src/plan.c, cg_split_by_columns). */
static const cgt_shape COLUMNS = {.n = 2, .h = 6, .w = 6, .cin = 32, .cout = 8, .kh = 3, .kw = 3,
                                  .pu = 1, .pd = 1, .pl = 1, .pr = 1, .bs = 0x1000};
/* The same with more output channels: wider A panels, so cores that ran
 * COLUMNS must grow their scratch again. */
static const cgt_shape COLUMNS_WIDE = {.n = 2, .h = 6, .w = 6, .cin = 32, .cout = 32, .kh = 3,
                                       .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1, .bs = 0x1000};
/* Depthwise path (per-core accumulators); 1152 rows of the sum: two
 * slices, one a core on two cores. */
static const cgt_shape DEPTHWISE = {.n = 2, .h = 24, .w = 24, .cin = 8, .cout = 8, .g = 8,
                                    .kh = 3, .kw = 3, .pu = 1, .pd = 1, .pl = 1, .pr = 1,
                                    .bs = 0x400};
/* clang-format on */

typedef enum { API_STATUS, API_VOID } api;

/* ---- buffers of one problem, with snapshots -------------------------------- */

typedef struct fx {
    ConvParameter p; /* workspace_ set */
    cgt_dtype dt;
    int mask;
    size_t es, ndy, nx, ndw, nws;
    void *dy, *x, *bias, *out, *ws;
    unsigned char *out0, *ws0; /* out_dw and workspace before the calls */
} fx;

static void fx_init(fx *f, const cgt_shape *s, cgt_dtype dt, int mask, uint64_t salt)
{
    memset(f, 0, sizeof *f);
    f->p = cgt_param(s);
    f->dt = dt;
    f->mask = mask;
    f->es = dt == CGT_FP16 ? 2 : 4;
    f->ndy = ref_dy_elems(&f->p);
    f->nx = ref_x_elems(&f->p);
    f->ndw = ref_dw_elems(&f->p);
    f->nws = cgt_ws_bytes_s(&f->p, mask);
    f->dy = malloc(f->ndy * f->es);
    f->x = malloc(f->nx * f->es);
    f->bias = malloc((size_t)f->p.output_channel_ * f->es);
    f->out = malloc(f->ndw * f->es);
    f->ws = malloc(f->nws);
    f->out0 = malloc(f->ndw * f->es);
    f->ws0 = malloc(f->nws);
    cr_assert(f->dy && f->x && f->bias && f->out && f->ws && f->out0 && f->ws0);
    cgt_rng r;
    cgt_rng_seed(&r, cgt_mix64(cgt_base_seed() ^ salt ^ (uint64_t)dt << 40));
    if (dt == CGT_FP16) {
        cgt_fill_f16(&r, f->dy, f->ndy, 1.0);
        cgt_fill_f16(&r, f->x, f->nx, 1.0);
        cgt_fill_f16(&r, f->bias, (size_t)f->p.output_channel_, 1.0);
        cgt_fill_f16(&r, f->out, f->ndw, 1.0);
    } else {
        cgt_fill_f32(&r, f->dy, f->ndy, 1.0);
        cgt_fill_f32(&r, f->x, f->nx, 1.0);
        cgt_fill_f32(&r, f->bias, (size_t)f->p.output_channel_, 1.0);
        cgt_fill_f32(&r, f->out, f->ndw, 1.0);
    }
    cgt_fill_bytes(&r, f->ws, f->nws); /* garbage: the library must not assume zeros */
    f->p.workspace_ = f->ws;
}

/* Remembers out_dw and the workspace as they are now. */
static void fx_snapshot(fx *f)
{
    memcpy(f->out0, f->out, f->ndw * f->es);
    memcpy(f->ws0, f->ws, f->nws);
}

static void fx_free(fx *f)
{
    free(f->dy);
    free(f->x);
    free(f->bias);
    free(f->out);
    free(f->ws);
    free(f->out0);
    free(f->ws0);
}

/* out_dw and the whole workspace are what the snapshot holds. */
static int fx_untouched(const fx *f)
{
    return memcmp(f->out, f->out0, f->ndw * f->es) == 0 && memcmp(f->ws, f->ws0, f->nws) == 0;
}

/* out_dw == snapshot + dw + bias (one call), within the reference's tolerance. */
static void fx_expect_one_call_result(const fx *f, const char *what)
{
    cgt_expected e;
    cgt_result res;
    memset(&res, 0, sizeof res);
    res.ok = 1;
    cgt_expected_compute(&e, &f->p, f->dt, f->dy, f->x, f->bias, f->out0, 1, 0);
    cgt_expected_compare(&e, &f->p, f->dt, f->out, &res, NULL);
    cgt_expected_free(&e);
    cr_expect(res.ok, "%s: wrong result after the failed call:%s", what, res.msg);
}

/* `_s` on f's buffers and mask, from whatever thread calls it. */
static cg_status call_s(fx *f, api a)
{
    if (f->dt == CGT_FP32) {
        if (a == API_STATUS)
            return cg_fp_conv_grad_filter_s(f->dy, f->x, f->out, f->bias, &f->p, f->mask);
        fp_conv_grad_filter_s(f->dy, f->x, f->out, f->bias, &f->p, f->mask);
    } else {
        if (a == API_STATUS)
            return cg_hp_conv_grad_filter_s(f->dy, f->x, f->out, f->bias, &f->p, f->mask);
        hp_conv_grad_filter_s(f->dy, f->x, f->out, f->bias, &f->p, f->mask);
    }
    return cg_last_status();
}

static cg_status call_p(fx *f)
{
    if (f->dt == CGT_FP32)
        return cg_fp_conv_grad_filter_p(f->dy, f->x, f->out, f->bias, &f->p);
    return cg_hp_conv_grad_filter_p(f->dy, f->x, f->out, f->bias, &f->p);
}

static const char *dt_name(cgt_dtype dt)
{
    return dt == CGT_FP16 ? "fp16" : "fp32";
}

static void expect_message(cg_status s, const char *what)
{
    const char *m = cg_status_message(s);
    cr_expect(m && m[0] && strcmp(m, cg_status_message((cg_status)12345)) != 0,
              "%s: no proper message for status %d", what, (int)s);
}

/* The detail of a failure on a core of f's mask names the core, and for
 * scratch the byte count, at most what the library says a core keeps. */
static void expect_core_detail(const fx *f, cg_status s, const char *detail, const char *what)
{
    char why[400];
    const size_t most = s == CG_ERR_NO_MEMORY ? cg_grad_filter_scratch_bytes(&f->p, f->mask) : 0;
    cr_expect(cgt_core_failure_detail_ok(detail, s, f->mask, most, why, sizeof why), "%s: %s", what,
              why);
}

/* Host mode: the armed call fails with `want`, touching nothing; the fault
 * fired `fired` times (-1: at least once). Leaves the fault disarmed. */
static void host_call_fails(fx *f, api a, cg_status want, cg_fault_point pt, long fired,
                            const char *what)
{
    fx_snapshot(f);
    cg_status st = call_s(f, a);
    cg_status last = cg_last_status();
    char detail[256];
    snprintf(detail, sizeof detail, "%s", cg_last_error_detail());
    long failures = cg_fault_failures(pt);
    cg_fault_disarm_all();
    cr_expect_eq(st, want, "%s: status %d (%s), want %d (%s)", what, (int)st, cg_status_message(st),
                 (int)want, cg_status_message(want));
    cr_expect_eq(last, st, "%s: cg_last_status %d, the call returned %d", what, (int)last, (int)st);
    expect_message(st, what);
    expect_core_detail(f, want, detail, what);
    if (fired < 0)
        cr_expect(failures >= 1, "%s: the fault never fired (the call did not reach the point)",
                  what);
    else
        cr_expect_eq(failures, fired, "%s: the fault fired %ld times, want %ld", what, failures,
                     fired);
    cr_expect(fx_untouched(f), "%s: out_dw or the workspace was written by a failing call", what);
}

/* The next call, unarmed, succeeds with the right result. */
static void host_call_works(fx *f, api a, const char *what)
{
    fx_snapshot(f);
    cg_status st = call_s(f, a);
    cr_expect_eq(st, CG_OK, "%s: the next call got %d (%s)", what, (int)st, cg_status_message(st));
    cr_expect_eq(cg_last_status(), CG_OK, "%s: cg_last_status after the next call", what);
    cr_expect(cg_last_error_detail()[0] == '\0', "%s: detail '%s' after the next call", what,
              cg_last_error_detail());
    if (st == CG_OK)
        fx_expect_one_call_result(f, what);
}

/* Arms `pt` (cg_fault_arm(pt, nth, times)), then host_call_fails with the
 * point's status: CG_ERR_THREAD for a thread start, CG_ERR_NO_MEMORY for a
 * scratch allocation. */
static void armed_call_fails(fx *f, cg_fault_point pt, long nth, long times, api a, long fired,
                             const char *what)
{
    cg_fault_arm(pt, nth, times);
    host_call_fails(f, a, pt == CG_FAULT_THREAD_START ? CG_ERR_THREAD : CG_ERR_NO_MEMORY, pt, fired,
                    what);
}

/* ---- thread start: the pool's first thread ----------------------------------- */

static void first_thread_start(cgt_dtype dt, int mask, api a)
{
    char what[160];
    snprintf(what, sizeof what, "%s _s host, first thread start on mask %#x", dt_name(dt),
             (unsigned)mask);
    fx f;
    fx_init(&f, &GENERAL, dt, mask, 1);
    armed_call_fails(&f, CG_FAULT_THREAD_START, 1, 1, a, 1, what);
    host_call_works(&f, a, what);
    fx_free(&f);
}

Test(faults, thread_start_first_call_fp32, .timeout = TEST_TIMEOUT)
{
    first_thread_start(CGT_FP32, CORES_FIRST_FP, API_STATUS);
}

Test(faults, thread_start_first_call_fp16, .timeout = TEST_TIMEOUT)
{
    first_thread_start(CGT_FP16, CORES_FIRST_HP, API_VOID);
}

/* ---- thread start: a later launch growing the pool ---------------------------- */

static void pool_growth(cgt_dtype dt, int old_mask, int mask)
{
    char what[160];
    fx f;
    /* the pool has old_mask's threads */
    fx_init(&f, &GENERAL, dt, old_mask, 2);
    snprintf(what, sizeof what, "%s _s host on %#x (warming the pool)", dt_name(dt),
             (unsigned)old_mask);
    host_call_works(&f, API_STATUS, what);
    fx_free(&f);

    fx_init(&f, &GENERAL, dt, mask, 3);
    /* the first new core's thread fails: nothing else is tried */
    snprintf(what, sizeof what, "%s _s host on %#x, first new thread fails", dt_name(dt),
             (unsigned)mask);
    armed_call_fails(&f, CG_FAULT_THREAD_START, 1, 1, API_STATUS, 1, what);
    /* the second new core's fails: the first stays parked in the pool */
    snprintf(what, sizeof what, "%s _s host on %#x, second new thread fails", dt_name(dt),
             (unsigned)mask);
    armed_call_fails(&f, CG_FAULT_THREAD_START, 2, 1, API_VOID, 1, what);
    /* only the one still missing is started now */
    cg_fault_arm(CG_FAULT_THREAD_START, 0, 0);
    host_call_works(&f, API_STATUS, what);
    cr_expect_eq(cg_fault_calls(CG_FAULT_THREAD_START), 1,
                 "%s: %ld thread starts on the good call, want 1 (the one missing core)", what,
                 cg_fault_calls(CG_FAULT_THREAD_START));
    fx_free(&f);
}

Test(faults, thread_start_pool_growth_fp32, .timeout = TEST_TIMEOUT)
{
    pool_growth(CGT_FP32, CORES_GROW_FP_OLD, CORES_GROW_FP);
}

Test(faults, thread_start_pool_growth_fp16, .timeout = TEST_TIMEOUT)
{
    pool_growth(CGT_FP16, CORES_GROW_HP_OLD, CORES_GROW_HP);
}

/* Threads that keep failing: every call fails the same clean way, then works. */
Test(faults, thread_start_keeps_failing, .timeout = TEST_TIMEOUT)
{
    fx f;
    fx_init(&f, &GENERAL, CGT_FP32, CORES_STUCK, 4);
    for (int i = 0; i < 3; i++) {
        char what[120];
        snprintf(what, sizeof what, "fp32 _s host on %#x, every thread start fails, call %d",
                 (unsigned)CORES_STUCK, i);
        armed_call_fails(&f, CG_FAULT_THREAD_START, 1, -1, i % 2 ? API_VOID : API_STATUS, 1, what);
    }
    host_call_works(&f, API_STATUS, "fp32 _s host after the thread starts recovered");
    fx_free(&f);
}

/* ---- thread start: core_mask_launch itself (SPMD) ------------------------------ */

typedef struct launch_ctx {
    fx *f;
    atomic_int ran[32];
    cg_status st[32], last[32];
} launch_ctx;

static void spmd_once_entry(void *arg)
{
    launch_ctx *k = arg;
    int id = get_core_id();
    cg_status st = call_s(k->f, API_STATUS);
    if (id >= 0 && id < 32) {
        k->st[id] = st;
        k->last[id] = cg_last_status();
        atomic_fetch_add(&k->ran[id], 1);
    }
}

static void count_entry(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

Test(faults, launch_thread_start_fault_releases_cores, .timeout = TEST_TIMEOUT)
{
    const int mask = CORES_LAUNCH;
    for (int dti = 0; dti < 2; dti++) {
        const cgt_dtype dt = dti ? CGT_FP16 : CGT_FP32;
        fx f;
        fx_init(&f, &GENERAL, dt, mask, 5);
        fx_snapshot(&f);
        /* the second of three thread starts fails (first pass; on the second
         * pass every thread exists, so arm the first start, which never comes) */
        cg_fault_arm(CG_FAULT_THREAD_START, dti ? 1 : 2, 1);
        launch_ctx *k = calloc(1, sizeof *k);
        k->f = &f;
        int rc = core_mask_launch(mask, spmd_once_entry, k);
        cg_status last = cg_last_status();
        char detail[256];
        snprintf(detail, sizeof detail, "%s", cg_last_error_detail());
        long fired = cg_fault_failures(CG_FAULT_THREAD_START);
        cg_fault_disarm_all();
        if (dti == 0) {
            cr_expect_eq(fired, 1, "the launch's thread start fault did not fire");
            cr_expect_eq(rc, CG_ERR_THREAD, "core_mask_launch returned %d, want CG_ERR_THREAD", rc);
            cr_expect_eq(last, CG_ERR_THREAD, "cg_last_status %d after the failed launch",
                         (int)last);
            expect_message((cg_status)rc, "failed launch");
            /* the second of cores 12, 13, 14 to start */
            cr_expect(strncmp(detail, "the thread of core 13 could not be started: ", 44) == 0,
                      "the failed launch's detail: '%s'", detail);
            for (int id = 0; id < 32; id++)
                cr_expect_eq(atomic_load(&k->ran[id]), 0,
                             "core %d ran the entry of a failed launch", id);
            cr_expect(fx_untouched(&f), "a failed launch wrote out_dw or the workspace");
            /* the cores were released: the same mask launches, and `_s` in
             * SPMD mode computes the right thing */
            memset(k, 0, sizeof *k);
            k->f = &f;
            rc = core_mask_launch(mask, spmd_once_entry, k);
        } else {
            cr_expect_eq(fired, 0, "a launch on running cores started a thread");
        }
        cr_assert_eq(rc, 0, "%s: the launch after the failed one returned %d", dt_name(dt), rc);
        for (int id = 0; id < 32; id++) {
            int in = ((unsigned)mask >> id) & 1u;
            cr_expect_eq(atomic_load(&k->ran[id]), in, "core %d ran %d times", id,
                         atomic_load(&k->ran[id]));
            if (in) {
                cr_expect_eq(k->st[id], CG_OK, "%s SPMD: core %d got %d", dt_name(dt), id,
                             (int)k->st[id]);
                cr_expect_eq(k->last[id], CG_OK);
            }
        }
        fx_expect_one_call_result(&f, dti ? "fp16 SPMD after a failed launch"
                                          : "fp32 SPMD after a failed launch");
        free(k);
        fx_free(&f);
    }
    /* nothing stayed claimed: a subset of the mask launches too */
    atomic_int hits = 0;
    cr_expect_eq(core_mask_launch(mask & (mask - 1), count_entry, &hits), 0);
    cr_expect_eq(atomic_load(&hits), GetCoreNum(mask & (mask - 1)));
}

/* ---- scratch: first allocation ------------------------------------------------- */

static void scratch_first(cgt_dtype dt, int mask)
{
    char what[160];
    snprintf(what, sizeof what, "%s _s host on %#x, first scratch allocation fails", dt_name(dt),
             (unsigned)mask);
    fx f;
    fx_init(&f, &GENERAL, dt, mask, 6);
    armed_call_fails(&f, CG_FAULT_SCRATCH_ALLOC, 1, 1, API_STATUS, 1, what);
    host_call_works(&f, API_VOID, what);
    fx_free(&f);
}

Test(faults, scratch_first_allocation_fp32, .timeout = TEST_TIMEOUT)
{
    scratch_first(CGT_FP32, CORES_SCRATCH_FP);
}

Test(faults, scratch_first_allocation_fp16, .timeout = TEST_TIMEOUT)
{
    scratch_first(CGT_FP16, CORES_SCRATCH_HP);
}

/* ---- scratch: growth ------------------------------------------------------------ */

static void scratch_growth(cgt_dtype dt, int mask)
{
    char what[160];
    fx f;
    fx_init(&f, &GENERAL, dt, mask, 7);
    snprintf(what, sizeof what, "%s _s host on %#x, small shape", dt_name(dt), (unsigned)mask);
    host_call_works(&f, API_STATUS, what);
    fx_free(&f);

    fx_init(&f, &GENERAL_BIG, dt, mask, 8);
    /* the second core's growth fails (the first core's succeeds) */
    snprintf(what, sizeof what, "%s _s host on %#x, the 2nd scratch growth fails", dt_name(dt),
             (unsigned)mask);
    armed_call_fails(&f, CG_FAULT_SCRATCH_ALLOC, 2, 1, API_STATUS, 1, what);
    /* every growth fails */
    snprintf(what, sizeof what, "%s _s host on %#x, every scratch growth fails", dt_name(dt),
             (unsigned)mask);
    armed_call_fails(&f, CG_FAULT_SCRATCH_ALLOC, 1, -1, API_VOID, -1, what);
    host_call_works(&f, API_STATUS, what);
    /* grown now: the same shape again allocates nothing, even armed */
    snprintf(what, sizeof what, "%s _s host on %#x, steady state after the growth", dt_name(dt),
             (unsigned)mask);
    cg_fault_arm(CG_FAULT_SCRATCH_ALLOC, 1, -1);
    host_call_works(&f, API_VOID, what);
    cr_expect_eq(cg_fault_calls(CG_FAULT_SCRATCH_ALLOC), 0,
                 "%s: %ld scratch allocations in a steady-state call", what,
                 cg_fault_calls(CG_FAULT_SCRATCH_ALLOC));
    cg_fault_disarm_all();
    fx_free(&f);
}

Test(faults, scratch_growth_fp32, .timeout = TEST_TIMEOUT)
{
    scratch_growth(CGT_FP32, CORES_GROWTH_FP);
}

Test(faults, scratch_growth_fp16, .timeout = TEST_TIMEOUT)
{
    scratch_growth(CGT_FP16, CORES_GROWTH_HP);
}

/* Depthwise accumulators, every core's allocation failing: each core tries
 * once, all agree on the failure. */
static void scratch_depthwise(cgt_dtype dt, int mask)
{
    char what[160];
    snprintf(what, sizeof what, "%s _s host depthwise on %#x, every scratch allocation fails",
             dt_name(dt), (unsigned)mask);
    fx f;
    fx_init(&f, &DEPTHWISE, dt, mask, 9);
    armed_call_fails(&f, CG_FAULT_SCRATCH_ALLOC, 1, -1, API_STATUS, GetCoreNum(mask), what);
    host_call_works(&f, API_STATUS, what);
    fx_free(&f);
}

Test(faults, scratch_depthwise_every_core_fp32, .timeout = TEST_TIMEOUT)
{
    scratch_depthwise(CGT_FP32, CORES_DEPTHWISE_FP);
}

Test(faults, scratch_depthwise_every_core_fp16, .timeout = TEST_TIMEOUT)
{
    scratch_depthwise(CGT_FP16, CORES_DEPTHWISE_HP);
}

/* Split by dw's columns: the first allocations, then (fp16 tiles are larger
 * than fp32's) a growth. */
Test(faults, scratch_column_split, .timeout = TEST_TIMEOUT)
{
    for (int dti = 0; dti < 2; dti++) {
        const cgt_dtype dt = dti ? CGT_FP16 : CGT_FP32;
        char what[160];
        snprintf(what, sizeof what, "%s _s host, columns split on %#x, a scratch allocation fails",
                 dt_name(dt), (unsigned)CORES_COLUMNS);
        fx f;
        fx_init(&f, dti ? &COLUMNS_WIDE : &COLUMNS, dt, CORES_COLUMNS, 12);
        armed_call_fails(&f, CG_FAULT_SCRATCH_ALLOC, dti ? 1 : 2, 1, API_STATUS, 1, what);
        host_call_works(&f, API_VOID, what);
        fx_free(&f);
    }
}

/* ---- scratch: SPMD mode ------------------------------------------------------- */

typedef struct spmd_ctx {
    fx *f;
    int untouched; /* seen by rank 0 between the two calls */
    long fired;
    cg_status st1[32], last1[32], st2[32], last2[32];
    char detail1[32][256], detail2[32][256];
    atomic_int ran[32];
} spmd_ctx;

/* Every core calls `_s` (armed: fails), then, in the same launch, calls it
 * again (disarmed by rank 0 between two barriers: succeeds). */
static void spmd_twice_entry(void *arg)
{
    spmd_ctx *k = arg;
    const int id = get_core_id(), n = GetCoreNum(k->f->mask);
    const int rank = GetLogicCoreId(k->f->mask, id);
    cg_status st1 = call_s(k->f, API_STATUS), last1 = cg_last_status();
    if (id >= 0 && id < 32)
        snprintf(k->detail1[id], sizeof k->detail1[id], "%s", cg_last_error_detail());
    sys_bar(0, n);
    if (rank == 0) {
        k->fired = cg_fault_failures(CG_FAULT_SCRATCH_ALLOC);
        cg_fault_disarm_all();
        k->untouched = fx_untouched(k->f);
    }
    sys_bar(0, n);
    cg_status st2 = call_s(k->f, API_VOID), last2 = cg_last_status();
    if (id >= 0 && id < 32) {
        snprintf(k->detail2[id], sizeof k->detail2[id], "%s", cg_last_error_detail());
        k->st1[id] = st1;
        k->last1[id] = last1;
        k->st2[id] = st2;
        k->last2[id] = last2;
        atomic_fetch_add(&k->ran[id], 1);
    }
}

static void scratch_spmd(cgt_dtype dt, int mask, const cgt_shape *shape)
{
    char what[160];
    snprintf(what, sizeof what, "%s _s SPMD on %#x, a scratch allocation fails", dt_name(dt),
             (unsigned)mask);
    fx f;
    fx_init(&f, shape, dt, mask, 10);
    fx_snapshot(&f);
    spmd_ctx *k = calloc(1, sizeof *k);
    k->f = &f;
    cg_fault_arm(CG_FAULT_SCRATCH_ALLOC, 1, 1);
    int rc = core_mask_launch(mask, spmd_twice_entry, k);
    cg_fault_disarm_all();
    cr_assert_eq(rc, 0, "%s: core_mask_launch returned %d", what, rc);
    cr_expect_eq(k->fired, 1, "%s: the fault fired %ld times, want 1", what, k->fired);
    cr_expect(k->untouched, "%s: out_dw or the workspace was written by the failing call", what);
    for (int id = 0; id < 32; id++) {
        if (!(((unsigned)mask >> id) & 1u))
            continue;
        cr_expect_eq(atomic_load(&k->ran[id]), 1, "%s: core %d", what, id);
        cr_expect_eq(k->st1[id], CG_ERR_NO_MEMORY, "%s: core %d got %d (%s), want CG_ERR_NO_MEMORY",
                     what, id, (int)k->st1[id], cg_status_message(k->st1[id]));
        cr_expect_eq(k->last1[id], k->st1[id], "%s: core %d cg_last_status", what, id);
        /* every core records the same detail: the core whose allocation failed */
        expect_core_detail(&f, CG_ERR_NO_MEMORY, k->detail1[id], what);
        const int first = __builtin_ctz((unsigned)mask);
        cr_expect(strcmp(k->detail1[id], k->detail1[first]) == 0,
                  "%s: core %d's detail '%s' differs from core %d's '%s'", what, id, k->detail1[id],
                  first, k->detail1[first]);
        cr_expect(k->detail2[id][0] == '\0', "%s: core %d's detail '%s' after the next call", what,
                  id, k->detail2[id]);
        cr_expect_eq(k->st2[id], CG_OK, "%s: core %d's next call got %d (%s)", what, id,
                     (int)k->st2[id], cg_status_message(k->st2[id]));
        cr_expect_eq(k->last2[id], CG_OK);
    }
    expect_message(CG_ERR_NO_MEMORY, what);
    fx_expect_one_call_result(&f, what);
    free(k);
    fx_free(&f);
}

Test(faults, scratch_spmd_fp32, .timeout = TEST_TIMEOUT)
{
    scratch_spmd(CGT_FP32, CORES_SPMD_FP, &GENERAL);
}

Test(faults, scratch_spmd_fp16_columns, .timeout = TEST_TIMEOUT)
{
    scratch_spmd(CGT_FP16, CORES_SPMD_HP, &COLUMNS);
}

/* ---- `_p` reaches neither point ------------------------------------------------- */

Test(faults, private_needs_no_thread_and_no_scratch, .timeout = TEST_TIMEOUT)
{
    const cgt_shape *shapes[] = {&GENERAL, &DEPTHWISE};
    for (int si = 0; si < 2; si++)
        for (int dti = 0; dti < 2; dti++) {
            fx f;
            fx_init(&f, shapes[si], dti ? CGT_FP16 : CGT_FP32, 0x1, 11);
            fx_snapshot(&f);
            cg_fault_arm(CG_FAULT_THREAD_START, 1, -1);
            cg_fault_arm(CG_FAULT_SCRATCH_ALLOC, 1, -1);
            cg_status st = call_p(&f);
            long calls =
                cg_fault_calls(CG_FAULT_THREAD_START) + cg_fault_calls(CG_FAULT_SCRATCH_ALLOC);
            cg_fault_disarm_all();
            cr_expect_eq(st, CG_OK, "_p (%s, shape %d) got %d (%s) with every fault armed",
                         dt_name(f.dt), si, (int)st, cg_status_message(st));
            cr_expect_eq(calls, 0, "_p reached a fault point %ld times", calls);
            fx_expect_one_call_result(&f, "_p with every fault armed");
            fx_free(&f);
        }
}
