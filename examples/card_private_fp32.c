/* SPDX-License-Identifier: MIT */
/* The vendor card's private-memory example (MT7004, fp32, one core): the
 * calling thread runs fp_conv_grad_filter_p by itself.
 *
 * What differs from the card, and why:
 *  - the card's fixed AM addresses (0x10000000 ...) are heap buffers here;
 *  - the workspace is allocated once buffer_size_ is filled in, with the
 *    card's size for `_p`: buffer_size_ * sizeof(float) bytes (the field is a
 *    byte budget, but some of the chip's code counts it in floats);
 *  - out_dw is zeroed first (the operator accumulates into it);
 *  - the call is followed by cg_last_status() and a check against a plain
 *    double-precision loop of the formula (card_check.c, shared with
 *    card_shared_fp32.c).
 *
 * Exit status: 0 when the status is CG_OK and the result matches. */
#include <convgrad.h>

#include <stdio.h>
#include <stdlib.h>

#include "card_check.h" /* the card's shape (BATCH, ...), data, check and printout */

/* Stand-ins for the card's fixed addresses; main() sets them up. */
static float *g_input_dy;      /* 0x10000000: dy [BATCH][OUT_H][OUT_W][OUT_C] */
static float *g_input_x;       /* 0x10010000: x  [BATCH][IN_H][IN_W][IN_C] */
static float *g_out_dw;        /* 0x10020000: dw [OUT_C][K_H][K_W][IN_C/GROUP] */
static ConvParameter *g_param; /* 0x10040000 */
static float *g_workspace;     /* 0x10050000: allocated below */
static size_t g_workspace_bytes;

static void TestConvGradFilterAMFp32(void)
{
    float *input_dy = g_input_dy;
    float *input_x = g_input_x;
    float *out_dw = g_out_dw;
    ConvParameter *param = g_param;
    /* The field is the byte budget; the workspace should hold at least
     * buffer_size_ * sizeof(float) bytes. */
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
    /* The card sets param->workspace_ first; here it is allocated once
     * buffer_size_ is known. */
    g_workspace_bytes = (size_t)param->buffer_size_ * sizeof(float);
    g_workspace = malloc(g_workspace_bytes);
    param->workspace_ = g_workspace;
    fp_conv_grad_filter_p(input_dy, input_x, out_dw, NULL, param);
}

int main(void)
{
    int failed = 0;

    if (card_alloc("card_private_fp32", &g_input_dy, &g_input_x, &g_out_dw, &g_param) != 0)
        return 1;

    TestConvGradFilterAMFp32();
    cg_status status = cg_last_status(); /* right after the call, same thread */

    printf("card_private_fp32: fp_conv_grad_filter_p on the calling thread\n");
    if (status != CG_OK) {
        printf("cg_last_status %d (%s)\nFAIL\n", (int)status, cg_status_message(status));
        failed = 1;
        goto done;
    }
    if (!card_param_matches_buffers(g_param)) {
        printf("the ConvParameter does not match the buffers\nFAIL\n");
        failed = 1;
        goto done;
    }
    failed = card_report_and_check(g_param, g_workspace_bytes, "buffer_size_ * sizeof(float)",
                                   g_input_dy, g_input_x, g_out_dw);

done:
    free(g_workspace);
    card_free(g_input_dy, g_input_x, g_out_dw, g_param);
    return failed ? 1 : 0;
}
