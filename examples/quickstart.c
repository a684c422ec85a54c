/* SPDX-License-Identifier: MIT */
/* The README's example, compiled and run by ctest so the README stays true. */
#include <convgrad.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{ /* dw of a 3x3 convolution, 16 -> 32 channels, 4 images of 28x28, on 2 emulated cores */
    /* clang-format off */
    ConvParameter p = {.output_batch_ = 4, .input_batch_ = 4, .input_h_ = 28, .input_w_ = 28,
                       .output_h_ = 28, .output_w_ = 28, .input_channel_ = 16,
                       .output_channel_ = 32, .kernel_h_ = 3, .kernel_w_ = 3, .group_ = 1,
                       .pad_l_ = 1, .pad_u_ = 1, .pad_d_ = 1, .pad_r_ = 1, .dilation_h_ = 1,
                       .dilation_w_ = 1, .stride_h_ = 1, .stride_w_ = 1};
    /* clang-format on */
    const int core_mask = 0x3;
    p.buffer_size_ = cg_grad_filter_min_buffer_size(&p, sizeof(float));
    size_t nx = 4 * 28 * 28 * 16, ndy = 4 * 28 * 28 * 32, ndw = 32 * 3 * 3 * 16;
    float *x = malloc(nx * sizeof *x), *dy = malloc(ndy * sizeof *dy);
    float *dw = calloc(ndw, sizeof *dw); /* the operator adds into dw */
    p.workspace_ = malloc(cg_grad_filter_workspace_bytes(&p, core_mask, sizeof(float)));
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)(i % 7) - 3.0f;
    for (size_t i = 0; i < ndy; i++)
        dy[i] = (float)(i % 5) - 2.0f;
    fp_conv_grad_filter_s(dy, x, dw, NULL, &p, core_mask); /* the library runs the cores */
    if (cg_last_status() != CG_OK) {
        fprintf(stderr, "convgrad %s: %s\n", cg_version(), cg_last_error_detail());
        return 1;
    }
    printf("dw[0] = %g, dw[last] = %g\n", dw[0], dw[ndw - 1]);
    free(p.workspace_);
    free(dw);
    free(dy);
    free(x);
    return 0;
}
