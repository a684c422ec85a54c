/* SPDX-License-Identifier: MIT */
/* Uses an installed convgrad: its version, then one fp_conv_grad_filter_p
 * call on a tiny shape whose answer is known by hand.
 *
 * CONSUMER_PACKAGE_VERSION is the version the package that found convgrad
 * gave (CMake's convgrad_VERSION, or pkg-config --modversion): the library
 * loaded at run time, cg_version(), must be that one and the header's.
 *
 * x is one 3x3 channel holding 1..9, dy one 2x2 channel of ones, the kernel
 * 2x2, stride 1, no padding. Then dw[kh][kw] is the sum of the 2x2 window of
 * x starting at (kh, kw): dw = {12, 16, 24, 28}. dw starts at 1 everywhere
 * to show it is accumulated into: expect {13, 17, 25, 29}. */
#include <convgrad.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CONSUMER_PACKAGE_VERSION
#error "build with -DCONSUMER_PACKAGE_VERSION=\"the package's version\""
#endif

static int check_version(void)
{
    char header[32];
    snprintf(header, sizeof header, "%d.%d.%d", CONVGRAD_VERSION_MAJOR, CONVGRAD_VERSION_MINOR,
             CONVGRAD_VERSION_PATCH);
    printf("consumer: cg_version() %s, package %s, header %s\n", cg_version(),
           CONSUMER_PACKAGE_VERSION, header);
    if (strcmp(cg_version(), CONSUMER_PACKAGE_VERSION) != 0 || strcmp(cg_version(), header) != 0) {
        printf("consumer: version mismatch: FAIL\n");
        return 1;
    }
    return 0;
}

int main(void)
{
    if (check_version() != 0)
        return 1;

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
