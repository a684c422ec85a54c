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
 *    double-precision loop of the formula.
 *
 * Exit status: 0 when the status is CG_OK and the result matches. */
#include <convgrad.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The card's shape: batch 4, a 4x4x4 input, a 3x3 kernel, a 2x2x4 dy. */
enum {
    BATCH = 4,
    IN_H = 4,
    IN_W = 4,
    IN_C = 4,
    OUT_H = 2,
    OUT_W = 2,
    OUT_C = 4,
    K_H = 3,
    K_W = 3,
    GROUP = 1,
    DY_ELEMS = BATCH * OUT_H * OUT_W * OUT_C,
    X_ELEMS = BATCH * IN_H * IN_W * IN_C,
    DW_ELEMS = OUT_C * K_H * K_W * (IN_C / GROUP)
};

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

/* Deterministic data: multiples of 1/8 in [-1, 1], so every product and every
 * partial sum of this shape is exact in fp32 and the check is sharp. */
static void fill_data(float *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)((i * 37u + seed * 11u) % 17u) - 8) / 8.0f;
}

/* Offset of [n][h][w][c] in an NHWC tensor of H x W x C. */
static size_t nhwc(int n, int h, int w, int c, int height, int width, int channels)
{
    return (((size_t)n * height + h) * width + w) * channels + c;
}

/* One element of dw, straight from the contract's formula, in double:
 *   iy = oh*stride_h + kh*dilation_h - pad_u,  ix = ow*stride_w + kw*dilation_w - pad_l
 *   dw[g, co, kh, kw, ci] = sum over n, oh, ow of
 *                           dy[n, oh, ow, g*Co' + co] * x[n, iy, ix, g*Ci' + ci]
 * where a term whose (iy, ix) falls outside the input is 0. */
static double reference_element(const ConvParameter *p, const float *dy, const float *x, int g,
                                int co, int kh, int kw, int ci)
{
    const int dy_c = g * (p->output_channel_ / p->group_) + co;
    const int x_c = g * (p->input_channel_ / p->group_) + ci;
    double sum = 0.0;
    for (int n = 0; n < p->output_batch_; n++)
        for (int oh = 0; oh < p->output_h_; oh++)
            for (int ow = 0; ow < p->output_w_; ow++) {
                int iy = oh * p->stride_h_ + kh * p->dilation_h_ - p->pad_u_;
                int ix = ow * p->stride_w_ + kw * p->dilation_w_ - p->pad_l_;
                if (iy < 0 || iy >= p->input_h_ || ix < 0 || ix >= p->input_w_)
                    continue;
                size_t dy_at =
                    nhwc(n, oh, ow, dy_c, p->output_h_, p->output_w_, p->output_channel_);
                size_t x_at = nhwc(n, iy, ix, x_c, p->input_h_, p->input_w_, p->input_channel_);
                sum += (double)dy[dy_at] * (double)x[x_at];
            }
    return sum;
}

/* The whole dw, [Cout][Kh][Kw][Ci'] with row g*Co' + co: visiting g, co, kh,
 * kw, ci in that order walks it from the first element to the last. */
static void reference_dw(const ConvParameter *p, const float *dy, const float *x, double *dw)
{
    const int cog = p->output_channel_ / p->group_; /* Co' */
    const int cig = p->input_channel_ / p->group_;  /* Ci' */
    size_t at = 0;
    for (int g = 0; g < p->group_; g++)
        for (int co = 0; co < cog; co++)
            for (int kh = 0; kh < p->kernel_h_; kh++)
                for (int kw = 0; kw < p->kernel_w_; kw++)
                    for (int ci = 0; ci < cig; ci++)
                        dw[at++] = reference_element(p, dy, x, g, co, kh, kw, ci);
}

/* One line per (co, kh): the Kw*Ci' values of that kernel row. */
static void print_dw(const ConvParameter *p, const float *dw)
{
    const int cig = p->input_channel_ / p->group_;
    const int row = p->kernel_w_ * cig;
    printf("dw [Cout=%d][Kh=%d][Kw=%d][Ci'=%d]:\n", p->output_channel_, p->kernel_h_, p->kernel_w_,
           cig);
    for (int co = 0; co < p->output_channel_; co++)
        for (int kh = 0; kh < p->kernel_h_; kh++) {
            const float *v = dw + ((size_t)co * p->kernel_h_ + kh) * row;
            printf("  co %d kh %d:", co, kh);
            for (int i = 0; i < row; i++)
                printf(" %7.3f", v[i]);
            printf("\n");
        }
}

/* The buffers were sized from the enum; make sure the card's values describe
 * the same tensors before reading them. */
static int param_matches_buffers(const ConvParameter *p)
{
    return p->output_batch_ == BATCH && p->input_batch_ == BATCH && p->input_h_ == IN_H &&
           p->input_w_ == IN_W && p->input_channel_ == IN_C && p->output_h_ == OUT_H &&
           p->output_w_ == OUT_W && p->output_channel_ == OUT_C && p->kernel_h_ == K_H &&
           p->kernel_w_ == K_W && p->group_ == GROUP;
}

int main(void)
{
    int failed = 0;

    g_input_dy = malloc(DY_ELEMS * sizeof(float));
    g_input_x = malloc(X_ELEMS * sizeof(float));
    g_out_dw = malloc(DW_ELEMS * sizeof(float));
    g_param = calloc(1, sizeof(*g_param));
    double *ref = malloc(DW_ELEMS * sizeof(double));
    if (!g_input_dy || !g_input_x || !g_out_dw || !g_param || !ref) {
        fprintf(stderr, "card_private_fp32: out of memory\n");
        return 1;
    }
    fill_data(g_input_dy, DY_ELEMS, 1);
    fill_data(g_input_x, X_ELEMS, 2);
    memset(g_out_dw, 0, DW_ELEMS * sizeof(float)); /* out_dw is accumulated into */

    TestConvGradFilterAMFp32();
    cg_status status = cg_last_status(); /* right after the call, same thread */

    printf("card_private_fp32: fp_conv_grad_filter_p on the calling thread\n");
    if (status != CG_OK) {
        printf("cg_last_status %d (%s)\nFAIL\n", (int)status, cg_status_message(status));
        failed = 1;
        goto done;
    }
    if (!param_matches_buffers(g_param)) {
        printf("the ConvParameter does not match the buffers\nFAIL\n");
        failed = 1;
        goto done;
    }

    const ConvParameter *p = g_param;
    printf("shape: batch %d, x %dx%dx%d, dy %dx%dx%d, kernel %dx%d, group %d, stride %dx%d, "
           "dilation %dx%d, pads l%d u%d d%d r%d\n",
           p->input_batch_, p->input_h_, p->input_w_, p->input_channel_, p->output_h_, p->output_w_,
           p->output_channel_, p->kernel_h_, p->kernel_w_, p->group_, p->stride_h_, p->stride_w_,
           p->dilation_h_, p->dilation_w_, p->pad_l_, p->pad_u_, p->pad_d_, p->pad_r_);
    printf("buffer_size_ %d bytes; workspace %zu bytes (buffer_size_ * sizeof(float))\n",
           p->buffer_size_, g_workspace_bytes);
    print_dw(p, g_out_dw);

    reference_dw(p, g_input_dy, g_input_x, ref);
    double max_err = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < DW_ELEMS; i++) {
        double err = fabs((double)g_out_dw[i] - ref[i]);
        if (isnan(err) || err > max_err) /* a NaN sticks */
            max_err = err;
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    double tol = 1e-5 * (1.0 + max_ref);
    failed = !(max_err <= tol);
    printf("check against the double-precision reference: max abs error %.3g (tolerance %.3g) "
           "%s\n",
           max_err, tol, failed ? "FAIL" : "PASS");

done:
    free(g_workspace);
    free(ref);
    free(g_param);
    free(g_out_dw);
    free(g_input_x);
    free(g_input_dy);
    return failed ? 1 : 0;
}
