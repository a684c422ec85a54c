/* SPDX-License-Identifier: MIT */
/* convgrad: the filter (weight) gradient of a 2-D convolution on emulated
 * cores. One public header; see README.md for the API tour. */
#ifndef CONVGRAD_H
#define CONVGRAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE binary16 storage. _Float16 where the C compiler has it, else the raw
 * bits in a uint16_t; both are 2 bytes, so the ABI is the same either way. */
#if !defined(__cplusplus) && defined(__FLT16_MAX__) && !defined(CG_FLOAT16_AS_BITS)
typedef _Float16 float16;
#else
typedef uint16_t float16;
#endif

typedef struct ConvParameter {
    void *workspace_;
    int output_batch_;
    int input_batch_;
    int input_h_;
    int input_w_;
    int output_h_;
    int output_w_;
    int input_channel_;
    int output_channel_;
    int kernel_h_;
    int kernel_w_;
    int group_;
    int pad_l_;
    int pad_u_;
    int dilation_h_;
    int dilation_w_;
    int stride_h_;
    int stride_w_;
    int buffer_size_; /* bytes; the workspace must hold buffer_size_ * sizeof(float) */
    int pad_d_;
    int pad_r_;
} ConvParameter;

/* ---- Status ---------------------------------------------------------- */

typedef enum cg_status {
    CG_OK = 0,
    CG_ERR_NULL_POINTER = -1,     /* dy, x, out_dw, conv_param or workspace_ is NULL */
    CG_ERR_BAD_SIZE = -2,         /* a batch, height, width, channel or kernel size < 1 */
    CG_ERR_BAD_GROUP = -3,        /* group_ < 1 or not dividing both channel counts */
    CG_ERR_BAD_STRIDE = -4,       /* stride_h_ or stride_w_ < 1 */
    CG_ERR_BAD_DILATION = -5,     /* dilation_h_ or dilation_w_ < 1 */
    CG_ERR_BAD_PAD = -6,          /* a negative pad */
    CG_ERR_BATCH_MISMATCH = -7,   /* input_batch_ != output_batch_ */
    CG_ERR_BUFFER_TOO_SMALL = -8, /* buffer_size_ under 2*(Kh*Kw*Cin/G)*sizeof(dtype) */
    CG_ERR_CORE_MASK = -9,        /* core_mask 0, or not inside the calling launch */
    CG_ERR_OVERFLOW = -10,        /* an element or byte count overflows (cg_conv2d: or an
                                     image plane, in_h*in_w or OH*OW, exceeds INT_MAX) */
    CG_ERR_CORE_BUSY = -11,       /* a core of the mask is busy in another launch */
    CG_ERR_NO_MEMORY = -12,       /* the library's own scratch could not be allocated */
    CG_ERR_THREAD = -13,          /* an emulated core's thread could not be started */
    CG_ERR_BAD_LAYOUT = -14       /* cg_conv2d.layout is not a cg_layout */
} cg_status;

/* Status of the calling thread's last convgrad call (entry points and launches). */
cg_status cg_last_status(void);
/* A clear, non-empty English sentence for any value, known or not. */
const char *cg_status_message(cg_status s);

/* Bytes `_s` needs on core_mask: max(buffer_size_*4, core_num*dw_elems*4).
 * dtype_size is 4 or 2 and does not change the result (partials are float).
 * Returns 0 for invalid parameters. */
size_t cg_grad_filter_workspace_bytes(const ConvParameter *p, int core_mask, size_t dtype_size);
/* The largest scratch of the library's own one core keeps for `_s` of these
 * parameters on core_mask (fp32 or fp16, whichever needs more): allocated on
 * a core's first call and reused, never per call. 0 if invalid. */
size_t cg_grad_filter_scratch_bytes(const ConvParameter *p, int core_mask);
/* Lower bound of buffer_size_: 2*(Kh*Kw*Cin/G)*dtype_size; 0 if invalid. */
int cg_grad_filter_min_buffer_size(const ConvParameter *p, size_t dtype_size);

/* ---- The operator (vendor card signatures) ---------------------------- */
/* out_dw[Cout][Kh][Kw][Cin/G] += dw (+ bias[c] once per call on row c).
 * `_s`: call from every core of core_mask inside core_mask_launch (SPMD), or
 * once from an ordinary thread (host mode). `_p`: one core, the caller. */
void hp_conv_grad_filter_s(float16 *input_dy, float16 *input_x, float16 *out_dw, float16 *bias,
                           ConvParameter *conv_param, int core_mask);
void fp_conv_grad_filter_s(float *input_dy, float *input_x, float *out_dw, float *bias,
                           ConvParameter *conv_param, int core_mask);
void hp_conv_grad_filter_p(float16 *input_dy, float16 *input_x, float16 *out_dw, float16 *bias,
                           ConvParameter *conv_param);
void fp_conv_grad_filter_p(float *input_dy, float *input_x, float *out_dw, float *bias,
                           ConvParameter *conv_param);

/* The same four, returning the status (also recorded for cg_last_status). */
cg_status cg_hp_conv_grad_filter_s(const float16 *input_dy, const float16 *input_x, float16 *out_dw,
                                   const float16 *bias, const ConvParameter *conv_param,
                                   int core_mask);
cg_status cg_fp_conv_grad_filter_s(const float *input_dy, const float *input_x, float *out_dw,
                                   const float *bias, const ConvParameter *conv_param,
                                   int core_mask);
cg_status cg_hp_conv_grad_filter_p(const float16 *input_dy, const float16 *input_x, float16 *out_dw,
                                   const float16 *bias, const ConvParameter *conv_param);
cg_status cg_fp_conv_grad_filter_p(const float *input_dy, const float *input_x, float *out_dw,
                                   const float *bias, const ConvParameter *conv_param);

/* ---- The whole training step: cg_conv2d_* ----------------------------- */
/* Forward, input gradient, weight gradient and bias gradient of a 2-D
 * convolution, on the cores of core_mask (called from an ordinary thread;
 * the library launches the cores). Every output is overwritten (=), never
 * accumulated into. Validation comes first: on any error nothing is written.
 *
 * Shapes (OH, OW from cg_conv2d_output_h/_w):
 *   layout CG_LAYOUT_NHWC: x [batch][in_h][in_w][in_c], y and dy
 *     [batch][OH][OW][out_c], w and dw OHWI [out_c][kernel_h][kernel_w][in_c/groups]
 *   layout CG_LAYOUT_NCHW: x [batch][in_c][in_h][in_w], y and dy
 *     [batch][out_c][OH][OW], w and dw OIHW [out_c][in_c/groups][kernel_h][kernel_w]
 *   b, db [out_c]
 * Formula: with iy = oh*stride_h + kh*dilation_h - pad_top and
 * ix = ow*stride_w + kw*dilation_w - pad_left (terms outside the input are 0),
 *   y[n, oh, ow, co] = b[co] + sum over kh, kw, ci of x[n, iy, ix, g*Ci' + ci] * w[co, kh, kw, ci]
 * for co in group g = co / (out_c/groups), Ci' = in_c/groups. */
typedef enum cg_layout { CG_LAYOUT_NHWC = 0, CG_LAYOUT_NCHW = 1 } cg_layout;

typedef struct cg_conv2d {
    cg_layout layout;
    int batch, in_h, in_w, in_c, out_c;
    int kernel_h, kernel_w, groups;
    int stride_h, stride_w, dilation_h, dilation_w;
    int pad_top, pad_bottom, pad_left, pad_right;
} cg_conv2d;

/* OH = (in_h + pad_top + pad_bottom - dilation_h*(kernel_h-1) - 1)/stride_h + 1,
 * OW likewise; 0 when the descriptor is invalid (cg_conv2d_check says why). */
int cg_conv2d_output_h(const cg_conv2d *conv);
int cg_conv2d_output_w(const cg_conv2d *conv);
/* CG_OK, or the first problem of the descriptor (the same rules as
 * ConvParameter, plus CG_ERR_BAD_SIZE when OH or OW would be < 1). */
cg_status cg_conv2d_check(const cg_conv2d *conv);

/* y = conv(x, w) + b; b may be NULL (no bias). */
cg_status cg_conv2d_forward(const cg_conv2d *conv, const float *x, const float *w, const float *b,
                            float *y, int core_mask);
/* dx = the gradient of sum(y * dy) with respect to x. */
cg_status cg_conv2d_backward_data(const cg_conv2d *conv, const float *dy, const float *w,
                                  float *dx, int core_mask);
/* dw = the gradient of sum(y * dy) with respect to w, in w's layout. */
cg_status cg_conv2d_backward_weights(const cg_conv2d *conv, const float *x, const float *dy,
                                     float *dw, int core_mask);
/* db[c] = sum over n, oh, ow of dy[n, oh, ow, c]. */
cg_status cg_conv2d_backward_bias(const cg_conv2d *conv, const float *dy, float *db,
                                  int core_mask);

/* ---- Emulated cores (vendor card names) ------------------------------- */
/* Physical id (bit index in the mask) of the calling core; -1 outside a launch. */
int get_core_id(void);
/* Rank of core_id among the set bits of core_mask; -1 if absent. */
int GetLogicCoreId(int core_mask, int core_id);
/* Number of set bits of core_mask. */
int GetCoreNum(int core_mask);
/* Barrier: returns once core_num cores of the calling launch have reached
 * bar_id (0..15, independent). Returns at once outside a launch. */
void sys_bar(int bar_id, int core_num);
/* Runs entry(arg) on every core of core_mask (bits 0..31) and returns 0 once
 * all have returned; a negative cg_status if the mask is 0, a core is busy in
 * another launch (refused at once) or a core's thread cannot be started. */
int core_mask_launch(int core_mask, void (*entry)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif
