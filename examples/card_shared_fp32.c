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
 *    check against a plain double-precision loop of the formula.
 *
 * Exit status: 0 when every core reported CG_OK and the result matches. */
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
    DW_ELEMS = OUT_C * K_H * K_W * (IN_C / GROUP),
    MAX_CORES = 32
};

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

/* The buffers above were sized from the enum; make sure the card's values,
 * filled in by core 0, describe the same tensors before reading them. */
static int param_matches_buffers(const ConvParameter *p)
{
    return p->output_batch_ == BATCH && p->input_batch_ == BATCH && p->input_h_ == IN_H &&
           p->input_w_ == IN_W && p->input_channel_ == IN_C && p->output_h_ == OUT_H &&
           p->output_w_ == OUT_W && p->output_channel_ == OUT_C && p->kernel_h_ == K_H &&
           p->kernel_w_ == K_W && p->group_ == GROUP;
}

int main(void)
{
    int core_mask = 0b1111; /* as the card's main(): cores 0..3 */
    int failed = 0;

    g_input_dy = malloc(DY_ELEMS * sizeof(float));
    g_input_x = malloc(X_ELEMS * sizeof(float));
    g_out_dw = malloc(DW_ELEMS * sizeof(float));
    g_param = calloc(1, sizeof(*g_param));
    double *ref = malloc(DW_ELEMS * sizeof(double));
    if (!g_input_dy || !g_input_x || !g_out_dw || !g_param || !ref) {
        fprintf(stderr, "card_shared_fp32: out of memory\n");
        return 1;
    }
    fill_data(g_input_dy, DY_ELEMS, 1);
    fill_data(g_input_x, X_ELEMS, 2);
    memset(g_out_dw, 0, DW_ELEMS * sizeof(float)); /* out_dw is accumulated into */

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
    if (!param_matches_buffers(g_param)) {
        printf("the ConvParameter filled by core 0 does not match the buffers\n");
        failed = 1;
    }
    if (failed) {
        printf("FAIL\n");
        goto done;
    }

    const ConvParameter *p = g_param;
    printf("shape: batch %d, x %dx%dx%d, dy %dx%dx%d, kernel %dx%d, group %d, stride %dx%d, "
           "dilation %dx%d, pads l%d u%d d%d r%d\n",
           p->input_batch_, p->input_h_, p->input_w_, p->input_channel_, p->output_h_, p->output_w_,
           p->output_channel_, p->kernel_h_, p->kernel_w_, p->group_, p->stride_h_, p->stride_w_,
           p->dilation_h_, p->dilation_w_, p->pad_l_, p->pad_u_, p->pad_d_, p->pad_r_);
    printf("buffer_size_ %d bytes; workspace %zu bytes (cg_grad_filter_workspace_bytes)\n",
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
