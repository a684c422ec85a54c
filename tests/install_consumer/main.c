/* SPDX-License-Identifier: MIT */
/* Uses an installed convgrad: one fp_conv_grad_filter_p call on a tiny
 * shape whose answer is known by hand.
 *
 * x is one 3x3 channel holding 1..9, dy one 2x2 channel of ones, the kernel
 * 2x2, stride 1, no padding. Then dw[kh][kw] is the sum of the 2x2 window of
 * x starting at (kh, kw): dw = {12, 16, 24, 28}. dw starts at 1 everywhere
 * to show it is accumulated into: expect {13, 17, 25, 29}. */
#include <convgrad.h>

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float dy[4] = {1, 1, 1, 1};
    float dw[4] = {1, 1, 1, 1};
    const float expect[4] = {13, 17, 25, 29};

    ConvParameter p = {0};
    p.output_batch_ = p.input_batch_ = 1;
    p.input_h_ = p.input_w_ = 3;
    p.output_h_ = p.output_w_ = 2;
    p.input_channel_ = p.output_channel_ = 1;
    p.kernel_h_ = p.kernel_w_ = 2;
    p.group_ = 1;
    p.dilation_h_ = p.dilation_w_ = 1;
    p.stride_h_ = p.stride_w_ = 1;
    p.buffer_size_ = cg_grad_filter_min_buffer_size(&p, sizeof(float));
    if (p.buffer_size_ <= 0) {
        printf("consumer: cg_grad_filter_min_buffer_size gave %d\n", p.buffer_size_);
        return 1;
    }
    /* `_p` writes inside workspace_[0, buffer_size_ * sizeof(float)). */
    p.workspace_ = malloc((size_t)p.buffer_size_ * sizeof(float));
    if (!p.workspace_)
        return 1;

    fp_conv_grad_filter_p(dy, x, dw, NULL, &p);
    cg_status status = cg_last_status();
    free(p.workspace_);

    printf("consumer: status %d (%s); dw = {%g, %g, %g, %g}\n", (int)status,
           cg_status_message(status), dw[0], dw[1], dw[2], dw[3]);
    if (status != CG_OK)
        return 1;
    for (int i = 0; i < 4; i++)
        if (dw[i] != expect[i]) {
            printf("consumer: dw[%d] = %g, expected %g: FAIL\n", i, dw[i], expect[i]);
            return 1;
        }
    printf("consumer: PASS\n");
    return 0;
}
