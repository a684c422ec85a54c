/* SPDX-License-Identifier: MIT */
/* The host-side machinery of the card's two examples: data, the
 * double-precision reference of the formula, and the printout (card_check.h). */
#include "card_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic data: multiples of 1/8 in [-1, 1], so every product and every
 * partial sum of this shape is exact in fp32 and the check is sharp. */
static void fill_data(float *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)((i * 37u + seed * 11u) % 17u) - 8) / 8.0f;
}

int card_alloc(const char *program, float **dy, float **x, float **out_dw, ConvParameter **param)
{
    *dy = malloc(DY_ELEMS * sizeof(float));
    *x = malloc(X_ELEMS * sizeof(float));
    *out_dw = malloc(DW_ELEMS * sizeof(float));
    *param = calloc(1, sizeof(**param));
    if (!*dy || !*x || !*out_dw || !*param) {
        fprintf(stderr, "%s: out of memory\n", program);
        card_free(*dy, *x, *out_dw, *param);
        *dy = *x = *out_dw = NULL;
        *param = NULL;
        return 1;
    }
    fill_data(*dy, DY_ELEMS, 1);
    fill_data(*x, X_ELEMS, 2);
    memset(*out_dw, 0, DW_ELEMS * sizeof(float)); /* out_dw is accumulated into */
    return 0;
}

void card_free(float *dy, float *x, float *out_dw, ConvParameter *param)
{
    free(param);
    free(out_dw);
    free(x);
    free(dy);
}

int card_param_matches_buffers(const ConvParameter *p)
{
    return p->output_batch_ == BATCH && p->input_batch_ == BATCH && p->input_h_ == IN_H &&
           p->input_w_ == IN_W && p->input_channel_ == IN_C && p->output_h_ == OUT_H &&
           p->output_w_ == OUT_W && p->output_channel_ == OUT_C && p->kernel_h_ == K_H &&
           p->kernel_w_ == K_W && p->group_ == GROUP;
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

/* The largest |out_dw - reference| (a NaN sticks) against a tolerance
 * relative to the largest |reference|; prints the line with PASS or FAIL and
 * returns 1 on FAIL. */
static int check_dw(const ConvParameter *p, const float *dy, const float *x, const float *out_dw)
{
    double ref[DW_ELEMS];
    reference_dw(p, dy, x, ref);
    double max_err = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < DW_ELEMS; i++) {
        double err = fabs((double)out_dw[i] - ref[i]);
        if (isnan(err) || err > max_err) /* a NaN sticks */
            max_err = err;
        if (fabs(ref[i]) > max_ref)
            max_ref = fabs(ref[i]);
    }
    double tol = 1e-5 * (1.0 + max_ref);
    int failed = !(max_err <= tol);
    printf("check against the double-precision reference: max abs error %.3g (tolerance %.3g) "
           "%s\n",
           max_err, tol, failed ? "FAIL" : "PASS");
    return failed;
}

int card_report_and_check(const ConvParameter *p, size_t workspace_bytes,
                          const char *workspace_sizing, const float *dy, const float *x,
                          const float *out_dw)
{
    printf("shape: batch %d, x %dx%dx%d, dy %dx%dx%d, kernel %dx%d, group %d, stride %dx%d, "
           "dilation %dx%d, pads l%d u%d d%d r%d\n",
           p->input_batch_, p->input_h_, p->input_w_, p->input_channel_, p->output_h_, p->output_w_,
           p->output_channel_, p->kernel_h_, p->kernel_w_, p->group_, p->stride_h_, p->stride_w_,
           p->dilation_h_, p->dilation_w_, p->pad_l_, p->pad_u_, p->pad_d_, p->pad_r_);
    printf("buffer_size_ %d bytes; workspace %zu bytes (%s)\n", p->buffer_size_, workspace_bytes,
           workspace_sizing);
    print_dw(p, out_dw);
    return check_dw(p, dy, x, out_dw);
}
