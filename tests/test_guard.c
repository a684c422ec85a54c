/* SPDX-License-Identifier: MIT */
/* Guard tests: the workspace is EXACTLY the documented size (_s:
 * cg_grad_filter_workspace_bytes, i.e. max(buffer_size_*4, core_num*dw*4);
 * _p: buffer_size_*4) and ends at (or starts at) a PROT_NONE page, so any
 * access past it faults; out_dw likewise, with canaries around; inputs and
 * the ConvParameter read-only and checksummed. Every path, both dtypes,
 * several masks, every mode. Also the helpers against hand formulas, and a
 * check that the guard machinery itself catches what it should. */
#define _DEFAULT_SOURCE /* sigaction, fork */
#include <criterion/criterion.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define TEST_TIMEOUT 300.0

/* ---- the harness catches what it claims to ------------------------------- */

/* Runs fn in a forked child with its own SIGSEGV/SIGBUS handler (so it
 * works under ASan/TSan too, which would otherwise report and exit) and
 * returns 1 if fn faulted. */
static void fault_handler(int sig)
{
    (void)sig;
    _exit(77);
}

static int faults(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = fault_handler;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return (WIFEXITED(st) && WEXITSTATUS(st) == 77) ||
           (WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS));
}

static void write_past_end(void)
{
    cgt_buf b;
    cgt_buf_alloc(&b, 100, 0, CGT_AT_END);
    volatile unsigned char *p = b.ptr;
    p[100] = 1; /* first byte of the guard page */
}

static void read_before_start(void)
{
    cgt_buf b;
    cgt_buf_alloc(&b, 100, 0, CGT_AT_START);
    volatile unsigned char *p = b.ptr;
    volatile unsigned char v = p[-1];
    (void)v;
}

static void write_readonly(void)
{
    cgt_buf b;
    cgt_buf_alloc(&b, 64, 0, CGT_AT_END);
    cgt_buf_readonly(&b);
    volatile unsigned char *p = b.ptr;
    p[3] = 1;
}

static void touch_inside(void)
{
    cgt_buf b;
    cgt_buf_alloc(&b, 100, 0, CGT_AT_END);
    volatile unsigned char *p = b.ptr;
    p[0] = 1;
    p[99] = 2;
    cgt_buf_free(&b);
}

Test(guard_harness, guard_pages_fault)
{
    cr_expect(faults(write_past_end), "writing the byte after a CGT_AT_END buffer did not fault");
    cr_expect(faults(read_before_start),
              "reading the byte before a CGT_AT_START buffer did not fault");
    cr_expect(faults(write_readonly), "writing a read-only buffer did not fault");
    cr_expect(!faults(touch_inside), "touching the first and last bytes of a buffer faulted");
}

Test(guard_harness, canary_damage_is_seen)
{
    cgt_buf b;
    cgt_buf_alloc(&b, 40, 16, CGT_AT_END);
    cr_assert_eq(cgt_buf_canary_damage(&b), -1, "fresh buffer has damaged canaries");
    memset(b.ptr, 0x11, 40); /* the user region is free to change */
    cr_assert_eq(cgt_buf_canary_damage(&b), -1, "writing the user region flagged as damage");
    b.ptr[40] ^= 1;
    cr_assert_eq(cgt_buf_canary_damage(&b), 40, "write just past the end not seen");
    b.ptr[40] ^= 1;
    b.ptr[-3] ^= 0x80;
    cr_assert_eq(cgt_buf_canary_damage(&b), -3, "write just before the start not seen");
    cgt_buf_free(&b);
}

Test(guard_harness, run_case_catches_a_wrong_result)
{
    /* The checker must be able to reject: demand an exact result of random
     * fp32 data (whose exact sum a float cannot hold). Uses the library, so
     * it shows the comparison is live, not that the library is wrong. */
    cgt_shape s = {.n = 2, .h = 6, .w = 6, .cin = 8, .cout = 8, .kh = 3, .kw = 3, .pu = 1, .pl = 1};
    cgt_case c;
    memset(&c, 0, sizeof c);
    c.p = cgt_param(&s);
    c.dtype = CGT_FP32;
    c.mode = CGT_P_HOST;
    c.prefill = 1;
    c.seed = 42;
    c.exact = 1;
    cgt_result r = cgt_run_case(&c);
    cr_assert(
        !r.ok,
        "run_case accepted random fp32 data with tolerance 0 everywhere: the checker is blind");
    cr_assert(r.bad_elems > 0, "failure without wrong elements: %s", r.msg);
}

/* ---- exact-size workspace, every path ----------------------------------- */

/* One shape a line (clang-format would put one field a line). */
/* clang-format off */
static const cgt_shape GUARD_SHAPES[] = {
    /* depthwise, channels not a multiple of 4/8/16 (tail code) */
    {.n = 2, .h = 5, .w = 7, .cin = 13, .cout = 13, .g = 13, .kh = 3, .kw = 2,
     .pu = 1, .pd = 1, .pl = 1, .pr = 0},
    /* depthwise, odd channel count and stride */
    {.n = 1, .h = 6, .w = 4, .cin = 7, .cout = 7, .g = 7, .kh = 2, .kw = 3,
     .sh = 2, .sw = 1, .pl = 1},
    /* 1x1 */
    {.n = 3, .h = 4, .w = 5, .cin = 17, .cout = 5, .kh = 1, .kw = 1},
    {.n = 1, .h = 3, .w = 3, .cin = 3, .cout = 33, .kh = 1, .kw = 1},
    /* general: groups + dilation + asymmetric pads */
    {.n = 2, .h = 6, .w = 5, .cin = 6, .cout = 9, .g = 3, .kh = 3, .kw = 2, .dh = 2,
     .pu = 2, .pd = 0, .pl = 1, .pr = 1},
    /* general: depth multiplier, stride > kernel */
    {.n = 2, .h = 7, .w = 8, .cin = 5, .cout = 10, .g = 5, .kh = 2, .kw = 1, .sh = 3, .sw = 2},
};
/* clang-format on */
#define N_GUARD_SHAPES ((int)(sizeof GUARD_SHAPES / sizeof GUARD_SHAPES[0]))

static const int GUARD_MASKS[] = {0x1, 0xf, INT_MIN, 0x0a0a, -1};
#define N_GUARD_MASKS ((int)(sizeof GUARD_MASKS / sizeof GUARD_MASKS[0]))

/* A case of p with bias and a pre-filled out_dw; the rest zero. */
static cgt_case biased_prefilled_case(const ConvParameter *p, int dt, int mode, int mask,
                                      uint64_t seed)
{
    cgt_case c;
    memset(&c, 0, sizeof c);
    c.p = *p;
    c.dtype = (cgt_dtype)dt;
    c.mode = (cgt_mode)mode;
    c.core_mask = mask;
    c.with_bias = 1;
    c.prefill = 1;
    c.seed = seed;
    return c;
}

/* Counts a failed case in *failures; the first 6 are reported in full. */
static void expect_case_passed(const char *test, const cgt_case *c, const cgt_result *r,
                               int *failures)
{
    if (!r->ok && ++*failures <= 6) {
        char desc[1024];
        cgt_case_str(c, desc, sizeof desc);
        cr_expect(r->ok, "%s: %s%s", test, desc, r->msg);
    }
}

/* Runs every mode x dtype x mask x buffer-size choice on the shapes of one
 * path; the workspace is exact and guarded on the side `where`. */
static void guard_path(const char *test, cgt_path path, int ws_at_start, int in_at_start)
{
    int n = 0, failures = 0;
    for (int si = 0; si < N_GUARD_SHAPES; ++si) {
        ConvParameter p = cgt_param(&GUARD_SHAPES[si]);
        if (cgt_path_of(&p) != path)
            continue;
        for (int dt = 0; dt < 2; ++dt) {
            for (int mode = 0; mode < 4; ++mode) {
                for (int mi = 0; mi < N_GUARD_MASKS; ++mi) {
                    if (mode == CGT_P_HOST && mi > 0)
                        continue; /* the mask plays no part */
                    /* buffer_size_: the minimum (partials dominate the _s
                     * workspace on many cores) and a large one (the
                     * buffer_size_*4 term dominates) */
                    for (int big = 0; big < 2; ++big) {
                        cgt_case c = biased_prefilled_case(
                            &p, dt, mode, GUARD_MASKS[mi],
                            cgt_mix64(cgt_base_seed() ^ (uint64_t)(n + 1000 * (int)path)));
                        c.api = (cgt_api)((n / 2) % 2);
                        c.with_bias = n % 3 != 0;
                        c.p.buffer_size_ =
                            big ? 0x4000 + 2 * n : (int)cgt_min_buffer(&p, dt ? 2 : 4);
                        c.ws_slack = 0;
                        c.out_slack = 0;
                        c.ws_at_start = ws_at_start;
                        c.in_at_start = in_at_start;
                        c.readonly_inputs = 1;
                        /* _s: the documented size is what the helper says */
                        if (mode == CGT_S_HOST || mode == CGT_S_SPMD) {
                            const size_t helper =
                                cg_grad_filter_workspace_bytes(&c.p, c.core_mask, dt ? 2 : 4);
                            cr_expect_eq(helper, cgt_ws_bytes_s(&c.p, c.core_mask),
                                         "%s: cg_grad_filter_workspace_bytes = %zu, formula says "
                                         "%zu (mask 0x%x)",
                                         test, helper, cgt_ws_bytes_s(&c.p, c.core_mask),
                                         (unsigned)c.core_mask);
                        }
                        cgt_result r = cgt_run_case(&c);
                        expect_case_passed(test, &c, &r, &failures);
                        ++n;
                    }
                }
            }
        }
    }
    cr_assert(n > 0, "%s: no shape of this path in the table", test);
    cr_assert(failures == 0, "%s: %d of %d cases failed", test, failures, n);
}

Test(guard, depthwise_exact_workspace, .timeout = TEST_TIMEOUT)
{
    guard_path("depthwise_exact_workspace", CGT_PATH_DEPTHWISE, 0, 0);
}

Test(guard, one_by_one_exact_workspace, .timeout = TEST_TIMEOUT)
{
    guard_path("one_by_one_exact_workspace", CGT_PATH_1X1, 0, 0);
}

Test(guard, general_exact_workspace, .timeout = TEST_TIMEOUT)
{
    guard_path("general_exact_workspace", CGT_PATH_GENERAL, 0, 0);
}

/* The same with every buffer starting at a guard page: catches reads and
 * writes before the start (negative offsets, off-by-one at index -1). */
Test(guard, depthwise_starts_at_guard, .timeout = TEST_TIMEOUT)
{
    guard_path("depthwise_starts_at_guard", CGT_PATH_DEPTHWISE, 1, 1);
}

Test(guard, one_by_one_starts_at_guard, .timeout = TEST_TIMEOUT)
{
    guard_path("one_by_one_starts_at_guard", CGT_PATH_1X1, 1, 1);
}

Test(guard, general_starts_at_guard, .timeout = TEST_TIMEOUT)
{
    guard_path("general_starts_at_guard", CGT_PATH_GENERAL, 1, 1);
}

/* Buffers at only their natural alignment: a 2-byte-aligned fp16 out_dw and
 * inputs, 4-byte-aligned fp32 ones (never 8/16/32 aligned). */
Test(guard, natural_alignment_only, .timeout = TEST_TIMEOUT)
{
    int failures = 0, n = 0;
    for (int si = 0; si < N_GUARD_SHAPES; ++si) {
        for (int dt = 0; dt < 2; ++dt) {
            for (int mode = 0; mode < 4; ++mode) {
                const ConvParameter p = cgt_param(&GUARD_SHAPES[si]);
                cgt_case c = biased_prefilled_case(&p, dt, mode, 0x3,
                                                   cgt_mix64(cgt_base_seed() + 777 + (uint64_t)n));
                /* odd element offsets from the page end: pointers end up at an
                 * odd multiple of the element size */
                const size_t es = dt ? 2 : 4;
                c.out_slack = es * (size_t)(1 + 2 * (n % 4));
                c.ws_slack = 4 * (size_t)(1 + 2 * (n % 3));
                c.p.buffer_size_ = (int)cgt_min_buffer(&c.p, es) + (n % 2);
                cgt_result r = cgt_run_case(&c);
                expect_case_passed("natural_alignment_only", &c, &r, &failures);
                ++n;
            }
        }
    }
    cr_assert(failures == 0, "natural_alignment_only: %d of %d cases failed", failures, n);
}

/* ---- the helpers against hand formulas ---------------------------------- */

Test(guard_helpers, card_example_values)
{
    /* The card's shape: Cout 4, 3x3, Cin 4, group 1 -> dw_elems 144. */
    const cgt_shape s = cgt_card_shape();
    ConvParameter p = cgt_param(&s);
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 4), 2 * 9 * 4 * 4, "fp32 min buffer");
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 2), 2 * 9 * 4 * 2, "fp16 min buffer");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, 4), (size_t)0x10000 * 4,
                 "buffer_size_*4 dominates on 4 cores");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, 2), (size_t)0x10000 * 4,
                 "dtype_size must not change the workspace (partials are float)");
    p.buffer_size_ = 288;
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, 4), (size_t)4 * 144 * 4,
                 "partials dominate: 4 cores * 144 * 4 = 2304 > 288*4 = 1152");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, -1, 4), (size_t)32 * 144 * 4,
                 "32 cores (mask -1)");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, INT_MIN, 4), (size_t)288 * 4,
                 "bit 31 alone is one core: max(1152, 576) = 1152");
    p.buffer_size_ = INT_MAX; /* buffer_size_*4 needs size_t, not int */
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, 4), (size_t)INT_MAX * 4,
                 "buffer_size_ INT_MAX");
    p.buffer_size_ = 288;
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0x00010100, 2),
                 (size_t)2 * 144 * 4 > 288 * 4 ? (size_t)2 * 144 * 4 : (size_t)288 * 4,
                 "mask with holes counts set bits");
}

Test(guard_helpers, grouped_and_depthwise_values)
{
    /* grouped: Cout 12, Cin 8, G 4 -> Ci' 2, 3x2 kernel -> row 12, dw 144 */
    cgt_shape s = {
        .n = 1, .h = 5, .w = 5, .cin = 8, .cout = 12, .g = 4, .kh = 3, .kw = 2, .bs = 100};
    ConvParameter p = cgt_param(&s);
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 4), 2 * 3 * 2 * 2 * 4,
                 "grouped fp32 min buffer");
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 2), 2 * 3 * 2 * 2 * 2,
                 "grouped fp16 min buffer");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0x7, 4), (size_t)3 * 12 * 3 * 2 * 2 * 4,
                 "grouped, 3 cores");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0x1, 4), (size_t)576,
                 "grouped, 1 core: max(400, 576)");
    /* depthwise 13 channels, 5x5: row 25, dw 325 */
    cgt_shape d = {
        .n = 1, .h = 5, .w = 5, .cin = 13, .cout = 13, .g = 13, .kh = 5, .kw = 5, .bs = 0x1000};
    p = cgt_param(&d);
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 4), 2 * 25 * 4, "depthwise fp32 min buffer");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xff, 4),
                 (size_t)8 * 325 * 4 > (size_t)0x1000 * 4 ? (size_t)8 * 325 * 4
                                                          : (size_t)0x1000 * 4,
                 "depthwise, 8 cores");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, -1, 4), (size_t)32 * 325 * 4,
                 "depthwise, 32 cores");
}

Test(guard_helpers, random_shapes_match_formulas)
{
    cgt_rng r = cgt_rng_seeded(cgt_base_seed() ^ 0x4e1e);
    for (int i = 0; i < 2000; ++i) {
        cgt_shape s;
        memset(&s, 0, sizeof s);
        s.g = cgt_rng_int(&r, 1, 6);
        s.cin = s.g * cgt_rng_int(&r, 1, 40);
        s.cout = s.g * cgt_rng_int(&r, 1, 40);
        s.n = cgt_rng_int(&r, 1, 8);
        s.h = cgt_rng_int(&r, 1, 50);
        s.w = cgt_rng_int(&r, 1, 50);
        s.kh = cgt_rng_int(&r, 1, 11);
        s.kw = cgt_rng_int(&r, 1, 11);
        s.sh = cgt_rng_int(&r, 1, 4);
        s.dw = cgt_rng_int(&r, 1, 4);
        s.pu = cgt_rng_int(&r, 0, 5);
        s.pr = cgt_rng_int(&r, 0, 5);
        ConvParameter p = cgt_param(&s);
        const size_t es = cgt_rng_chance(&r, 50) ? 4 : 2;
        const long long mn = cgt_min_buffer(&p, es);
        p.buffer_size_ = cgt_rng_int(&r, (int)mn, (int)mn * 40 + 5);
        int mask = (int)(unsigned)cgt_rng_next(&r);
        if (i % 7 == 0)
            mask = -1;
        if (i % 11 == 0)
            mask = INT_MIN;
        if (mask == 0)
            mask = 1;
        if (i % 3 == 0)
            p.workspace_ = NULL; /* sizes are asked before the workspace exists */
        cr_expect_eq((long long)cg_grad_filter_min_buffer_size(&p, es), mn,
                     "min buffer, case %d (dtype %zu) K=%dx%d Cin=%d G=%d", i, es, p.kernel_h_,
                     p.kernel_w_, p.input_channel_, p.group_);
        cr_expect_eq(cg_grad_filter_workspace_bytes(&p, mask, es), cgt_ws_bytes_s(&p, mask),
                     "workspace bytes, case %d mask 0x%08x (dtype %zu)", i, (unsigned)mask, es);
    }
}
