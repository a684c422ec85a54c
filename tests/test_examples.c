/* SPDX-License-Identifier: MIT */
/* The vendor card's two C examples (seed 003), as tests: the shared-storage
 * SPMD one (every core of 0b1111 runs TestConvGradFilterSMCFp32; logical
 * core 0 fills the ConvParameter, sys_bar(0, core_num), then every core calls
 * fp_conv_grad_filter_s) and the private-storage _p one. Heap memory stands
 * in for the card's fixed addresses; data is random; the result is checked
 * against the reference. The hp_ twins (MT7004 supports fp16) and the SPMD
 * example on other masks are run too. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define TEST_TIMEOUT 120.0

/* The card's shape. */
enum { BATCH = 4, IN_H = 4, IN_W = 4, IN_C = 4, OUT_H = 2, OUT_W = 2, OUT_C = 4, K_H = 3, K_W = 3 };
enum {
    DY_ELEMS = BATCH * OUT_H * OUT_W * OUT_C,
    X_ELEMS = BATCH * IN_H * IN_W * IN_C,
    DW_ELEMS = OUT_C * K_H * K_W * IN_C
};

/* Stand-ins for the card's fixed addresses. */
static void *g_input_dy;       /* 0x86000000 */
static void *g_input_x;        /* 0x87000000 */
static void *g_out_dw;         /* 0x88000000 */
static ConvParameter *g_param; /* 0x89000000 */
static void *g_workspace;      /* 0x8A000000 */
static int g_fp16;
static cg_status g_status[32];
static atomic_int g_ran[32];
static int g_logic_ids[32];

/* What both of the card's examples assign, in the card's order and values:
 * the workspace first, then buffer_size_ and the shape. */
static void card_fill_param(ConvParameter *param, float *workspace)
{
    param->workspace_ = workspace;
    param->buffer_size_ = 0x10000;
    param->input_batch_ = 4;
    param->output_batch_ = 4;
    param->input_h_ = 4;
    param->input_w_ = 4;
    param->input_channel_ = 4;
    param->output_h_ = 2;
    param->output_w_ = 2;
    param->output_channel_ = 4;
    param->kernel_h_ = 3;
    param->kernel_w_ = 3;
    param->group_ = 1;
    param->pad_l_ = 0;
    param->pad_u_ = 0;
    param->pad_d_ = 0;
    param->pad_r_ = 0;
    param->dilation_h_ = 1;
    param->dilation_w_ = 1;
    param->stride_h_ = 1;
    param->stride_w_ = 1;
}

/* The card's function body, unchanged but for the addresses, its field
 * assignments in card_fill_param (and the dtype switch for the hp_ twin). */
static void TestConvGradFilterSMCFp32(int core_mask)
{
    int core_id = get_core_id();
    int logic_core_id = GetLogicCoreId(core_mask, core_id);
    int core_num = GetCoreNum(core_mask);
    float *input_dy = g_input_dy;
    float *input_x = g_input_x;
    float *out_dw = g_out_dw;
    ConvParameter *param = g_param;
    float *workspace = g_workspace;
    if (logic_core_id == 0)
        card_fill_param(param, workspace);
    sys_bar(0, core_num);
    if (!g_fp16)
        fp_conv_grad_filter_s(input_dy, input_x, out_dw, NULL, param, core_mask);
    else
        hp_conv_grad_filter_s((float16 *)(void *)input_dy, (float16 *)(void *)input_x,
                              (float16 *)(void *)out_dw, NULL, param, core_mask);
    if (core_id >= 0 && core_id < 32) {
        g_status[core_id] = cg_last_status();
        g_logic_ids[core_id] = logic_core_id;
        atomic_fetch_add(&g_ran[core_id], 1);
    }
}

static int g_mask;
static void card_entry(void *arg)
{
    (void)arg;
    TestConvGradFilterSMCFp32(g_mask);
}

/* The card's _p example body, addresses replaced, its field assignments in
 * card_fill_param. */
static void TestConvGradFilterAMFp32(void)
{
    float *input_dy = g_input_dy;
    float *input_x = g_input_x;
    float *out_dw = g_out_dw;
    ConvParameter *param = g_param;
    float *workspace = g_workspace;
    card_fill_param(param, workspace);
    if (!g_fp16)
        fp_conv_grad_filter_p(input_dy, input_x, out_dw, NULL, param);
    else
        hp_conv_grad_filter_p((float16 *)(void *)input_dy, (float16 *)(void *)input_x,
                              (float16 *)(void *)out_dw, NULL, param);
}

/* Heap memory for the card's addresses: random inputs, zeroed out_dw
 * ("callers usually zero it first"), a garbage-filled ConvParameter, and a
 * workspace sized by the card's warning for `cores` cores. */
static void setup(int fp16, int cores, uint64_t seed)
{
    const size_t es = fp16 ? 2 : 4;
    cgt_rng r = cgt_rng_seeded(seed);
    g_fp16 = fp16;
    g_input_dy = malloc(DY_ELEMS * es);
    g_input_x = malloc(X_ELEMS * es);
    g_out_dw = calloc(DW_ELEMS, es);
    g_param = malloc(sizeof *g_param);
    memset(g_param, 0xab, sizeof *g_param);
    /* dw_elems = Cout*Kh*Kw*(Cin/G); bytes = max(buffer_size_*4, core_num*dw_elems*4) */
    const size_t a = (size_t)0x10000 * sizeof(float), b = (size_t)cores * DW_ELEMS * sizeof(float);
    const size_t ws_bytes = a > b ? a : b;
    g_workspace = malloc(ws_bytes);
    memset(g_workspace, 0xff, ws_bytes);
    cgt_fill(&r, fp16 ? CGT_FP16 : CGT_FP32, g_input_dy, DY_ELEMS, 1.0);
    cgt_fill(&r, fp16 ? CGT_FP16 : CGT_FP32, g_input_x, X_ELEMS, 1.0);
    memset(g_status, 0x7f, sizeof g_status);
    for (int i = 0; i < 32; ++i) {
        atomic_store(&g_ran[i], 0);
        g_logic_ids[i] = -100;
    }
}

static void teardown(void)
{
    free(g_input_dy);
    free(g_input_x);
    free(g_out_dw);
    free(g_param);
    free(g_workspace);
}

/* out_dw must be the card shape's gradient of the inputs (out0 = 0, no bias). */
static void check_result(const char *what)
{
    const cgt_shape s = cgt_card_shape();
    ConvParameter p = cgt_param(&s);
    const cgt_dtype dt = g_fp16 ? CGT_FP16 : CGT_FP32;
    void *zeros = calloc(DW_ELEMS, g_fp16 ? 2 : 4);
    cgt_expected ex;
    cgt_expected_compute(&ex, &p, dt, g_input_dy, g_input_x, NULL, zeros, 1, 0);
    cgt_result res = cgt_result_passing();
    cgt_expected_compare(&ex, &p, dt, g_out_dw, &res, "");
    cr_expect(res.ok, "%s: wrong out_dw%s", what, res.msg);
    /* the example's parameters were filled in as the card says */
    cr_expect_eq(g_param->workspace_, g_workspace, "%s: workspace_", what);
    cr_expect_eq(g_param->buffer_size_, 0x10000, "%s: buffer_size_ changed", what);
    cr_expect_eq(g_param->kernel_h_, 3, "%s: kernel_h_ changed", what);
    cgt_expected_free(&ex);
    free(zeros);
}

static void run_card_spmd(int fp16, int mask, const char *what)
{
    setup(fp16, cgt_popcount(mask), 0xca4d + (uint64_t)mask * 7 + (uint64_t)fp16);
    g_mask = mask;
    const int rc = core_mask_launch(mask, card_entry, NULL);
    cr_assert_eq(rc, 0, "%s: core_mask_launch(0x%x) returned %d", what, (unsigned)mask, rc);
    int rank = 0;
    for (int id = 0; id < 32; ++id) {
        if (!(((unsigned)mask >> id) & 1u)) {
            cr_expect_eq(atomic_load(&g_ran[id]), 0, "%s: core %d is not in the mask but ran", what,
                         id);
            continue;
        }
        cr_expect_eq(atomic_load(&g_ran[id]), 1, "%s: core %d ran %d times", what, id,
                     atomic_load(&g_ran[id]));
        cr_expect_eq(g_status[id], CG_OK, "%s: core %d: cg_last_status %d (%s)", what, id,
                     g_status[id], cg_status_message(g_status[id]));
        cr_expect_eq(g_logic_ids[id], rank, "%s: GetLogicCoreId(0x%x, %d) = %d, want %d", what,
                     (unsigned)mask, id, g_logic_ids[id], rank);
        ++rank;
    }
    check_result(what);
    teardown();
}

Test(examples, card_shared_fp32_0b1111, .timeout = TEST_TIMEOUT)
{
    run_card_spmd(0, 0xf, "card SPMD example, fp32, core_mask 0b1111");
}

Test(examples, card_shared_fp16_0b1111, .timeout = TEST_TIMEOUT)
{
    run_card_spmd(1, 0xf, "card SPMD example, hp_ twin, core_mask 0b1111");
}

Test(examples, card_shared_other_masks, .timeout = TEST_TIMEOUT)
{
    const int masks[] = {0x1, 0x3, 0xf0, 0x5a, INT_MIN, (int)0x80000001u, -1};
    for (int i = 0; i < 7; ++i) {
        char what[96];
        snprintf(what, sizeof what, "card SPMD example, fp32, core_mask 0x%08x",
                 (unsigned)masks[i]);
        run_card_spmd(0, masks[i], what);
        snprintf(what, sizeof what, "card SPMD example, fp16, core_mask 0x%08x",
                 (unsigned)masks[i]);
        run_card_spmd(1, masks[i], what);
    }
}

/* The _p example on the test thread: status, then the result. */
static void run_card_private(int fp16, uint64_t seed, const char *what)
{
    setup(fp16, 1, seed);
    TestConvGradFilterAMFp32();
    const cg_status st = cg_last_status();
    cr_expect_eq(st, CG_OK, "%s: status %d (%s)", what, st, cg_status_message(st));
    check_result(what);
    teardown();
}

Test(examples, card_private_fp32, .timeout = TEST_TIMEOUT)
{
    run_card_private(0, 0x9a11, "card _p example, fp32");
}

Test(examples, card_private_fp16, .timeout = TEST_TIMEOUT)
{
    run_card_private(1, 0x9a12, "card _p example, hp_ twin");
}

/* The _p example on an emulated core (as on the chip: private storage, one
 * core), inside a launch of one core. */
static void private_entry(void *arg)
{
    (void)arg;
    TestConvGradFilterAMFp32();
    const int id = get_core_id();
    if (id >= 0 && id < 32) {
        g_status[id] = cg_last_status();
        atomic_fetch_add(&g_ran[id], 1);
    }
}

Test(examples, card_private_on_an_emulated_core, .timeout = TEST_TIMEOUT)
{
    for (int fp16 = 0; fp16 < 2; ++fp16) {
        setup(fp16, 1, 0x9a13 + (uint64_t)fp16);
        cr_assert_eq(core_mask_launch(1 << 6, private_entry, NULL), 0, "launch");
        cr_expect_eq(atomic_load(&g_ran[6]), 1, "core 6 ran %d times", atomic_load(&g_ran[6]));
        cr_expect_eq(g_status[6], CG_OK, "core 6 status %d", g_status[6]);
        check_result(fp16 ? "card _p example on core 6, fp16" : "card _p example on core 6, fp32");
        teardown();
    }
}
