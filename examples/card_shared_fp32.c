/* SPDX-License-Identifier: MIT */
/* The vendor card's shared-memory example (MT7004, fp32, four cores), run on
 * convgrad's emulated cores.
 *
 * As on the card: TestConvGradFilterSMCFp32(core_mask) runs on every core of
 * the mask; logical core 0 fills the ConvParameter, sys_bar(0, core_num) holds
 * the other cores until it has, then every core calls fp_conv_grad_filter_s
 * with the same arguments (a collective call that returns on every core once
 * out_dw is complete).
 *
 * What differs from the card, and why:
 *  - the card's fixed DDR addresses (0x86000000 ...) are heap buffers here;
 *  - logical core 0 allocates the workspace once it has filled in the shape,
 *    sized by cg_grad_filter_workspace_bytes. This is the card's warning: on
 *    `_s` the workspace also holds every core's float partial dw, so
 *    buffer_size_ * sizeof(float) alone can be too small;
 *  - out_dw is zeroed first (the operator accumulates into it);
 *  - the card's main() becomes core_mask_launch(0b1111, ...) followed by a
 *    check against a plain double-precision loop of the formula (card_check.c,
 *    shared with card_private_fp32.c).
 *
 * Exit status: 0 when every core reported CG_OK and the result matches. */
#include <convgrad.h>

#include <stdio.h>
#include <stdlib.h>

#include "card_check.h" /* the card's shape (BATCH, ...), data, check and printout */

enum { MAX_CORES = 32 };

/* Stand-ins for the card's fixed addresses; main() sets them up before the launch. */
static float *g_input_dy;      /* 0x86000000: dy [BATCH][OUT_H][OUT_W][OUT_C] */
static float *g_input_x;       /* 0x87000000: x  [BATCH][IN_H][IN_W][IN_C] */
static float *g_out_dw;        /* 0x88000000: dw [OUT_C][K_H][K_W][IN_C/GROUP] */
static ConvParameter *g_param; /* 0x89000000 */
static float *g_workspace;     /* 0x8A000000: allocated by logical core 0 */
static size_t g_workspace_bytes;

/* cg_last_status() belongs to the calling thread, i.e. to each emulated core:
 * every core leaves its own here for main() to check after the launch. */
static cg_status g_core_status[MAX_CORES];
static int g_core_ran[MAX_CORES];

static void TestConvGradFilterSMCFp32(int core_mask)
{
    int core_id = get_core_id();
    int logic_core_id = GetLogicCoreId(core_mask, core_id);
    int core_num = GetCoreNum(core_mask);
    float *input_dy = g_input_dy;
    float *input_x = g_input_x;
    float *out_dw = g_out_dw;
    ConvParameter *param = g_param;
    if (logic_core_id == 0) {
        /* The field is the byte budget; the allocation follows the card's
         * warning (it may be larger than buffer_size_). */
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
        /* The card sets param->workspace_ first; on the host it is allocated
         * here, now that the shape it depends on is known. 0 means the
         * parameters are invalid: pass NULL and let the operator say so. */
        g_workspace_bytes = cg_grad_filter_workspace_bytes(param, core_mask, sizeof(float));
        g_workspace = g_workspace_bytes ? malloc(g_workspace_bytes) : NULL;
        param->workspace_ = g_workspace;
    }
    sys_bar(0, core_num);
    fp_conv_grad_filter_s(input_dy, input_x, out_dw, NULL, param, core_mask);

    if (core_id >= 0 && core_id < MAX_CORES) {
        g_core_status[core_id] = cg_last_status();
        g_core_ran[core_id] = 1;
    }
}

/* core_mask_launch passes one pointer; the card's function takes the mask. */
static void core_entry(void *arg)
{
    TestConvGradFilterSMCFp32(*(const int *)arg);
}

int main(void)
{
    int core_mask = 0b1111; /* as the card's main(): cores 0..3 */
    int failed = 0;

    if (card_alloc("card_shared_fp32", &g_input_dy, &g_input_x, &g_out_dw, &g_param) != 0)
        return 1;

    int rc = core_mask_launch(core_mask, core_entry, &core_mask);
    printf("card_shared_fp32: fp_conv_grad_filter_s on core_mask 0x%x (%d cores), "
           "every core calling (SPMD)\n",
           (unsigned)core_mask, GetCoreNum(core_mask));
    if (rc != 0) {
        printf("core_mask_launch: %d (%s)\nFAIL\n", rc, cg_status_message((cg_status)rc));
        failed = 1;
        goto done;
    }
    for (int c = 0; c < MAX_CORES; c++) {
        if (!((unsigned)core_mask & (1u << c)))
            continue;
        if (!g_core_ran[c]) {
            printf("core %d: did not run\n", c);
            failed = 1;
        } else if (g_core_status[c] != CG_OK) {
            printf("core %d: cg_last_status %d (%s)\n", c, (int)g_core_status[c],
                   cg_status_message(g_core_status[c]));
            failed = 1;
        }
    }
    if (!card_param_matches_buffers(g_param)) {
        printf("the ConvParameter filled by core 0 does not match the buffers\n");
        failed = 1;
    }
    if (failed) {
        printf("FAIL\n");
        goto done;
    }
    failed = card_report_and_check(g_param, g_workspace_bytes, "cg_grad_filter_workspace_bytes",
                                   g_input_dy, g_input_x, g_out_dw);

done:
    free(g_workspace);
    card_free(g_input_dy, g_input_x, g_out_dw, g_param);
    return failed ? 1 : 0;
}
