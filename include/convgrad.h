/* SPDX-License-Identifier: MIT */
/**
 * @file convgrad.h
 * @brief convgrad: the filter (weight) gradient of a 2-D convolution, and the
 * rest of its training step, on the emulated cores of a `core_mask`.
 *
 * The one public header. It declares the vendor card's operator
 * (`fp_/hp_conv_grad_filter_s/_p` with their `ConvParameter`), status-returning
 * twins of it, the training-step API `cg_conv2d_*`, the emulated cores
 * (`core_mask_launch`, `sys_bar`, ...), errors with a per-thread detail, and
 * the library's version.
 */
#ifndef CONVGRAD_H
#define CONVGRAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ---------------------------------------------------------- */
/* The one place the version is written: CMake reads these three lines
 * (project VERSION), and the package files and tools take it from there. */
/** Major version: changes when the API or ABI changes incompatibly. */
#define CONVGRAD_VERSION_MAJOR 0
/** Minor version: changes when names are added. */
#define CONVGRAD_VERSION_MINOR 2
/** Patch version: changes for fixes only. */
#define CONVGRAD_VERSION_PATCH 0
/** The version as one number, MAJOR*10000 + MINOR*100 + PATCH, for `#if`. */
#define CONVGRAD_VERSION                                                                           \
    (CONVGRAD_VERSION_MAJOR * 10000 + CONVGRAD_VERSION_MINOR * 100 + CONVGRAD_VERSION_PATCH)

/**
 * The version of the library linked at run time, "MAJOR.MINOR.PATCH".
 * Compare it with the CONVGRAD_VERSION_* macros (the header compiled against)
 * to detect a mismatched shared library.
 */
const char *cg_version(void);

/** IEEE binary16 storage. _Float16 where the C compiler has it, else the raw
 * bits in a uint16_t; both are 2 bytes, so the ABI is the same either way. */
#if !defined(__cplusplus) && defined(__FLT16_MAX__) && !defined(CG_FLOAT16_AS_BITS)
typedef _Float16 float16;
#else
typedef uint16_t float16;
#endif

/**
 * The operator's parameters, field for field as the vendor card declares them.
 *
 * The operator computes, for group g, output channel co, input channel ci and
 * kernel tap (kh, kw), with iy = oh*stride_h_ + kh*dilation_h_ - pad_u_ and
 * ix = ow*stride_w_ + kw*dilation_w_ - pad_l_ (terms outside the input are 0):
 *
 *     dw[g*Co' + co][kh][kw][ci] += sum over n, oh, ow of
 *         dy[n][oh][ow][g*Co' + co] * x[n][iy][ix][g*Ci' + ci]
 *
 * with Co' = output_channel_/group_ and Ci' = input_channel_/group_; x is
 * [input_batch_][input_h_][input_w_][input_channel_], dy is
 * [output_batch_][output_h_][output_w_][output_channel_] and dw is OHWI,
 * [output_channel_][kernel_h_][kernel_w_][Ci'].
 */
typedef struct ConvParameter {
    void *workspace_;    /**< scratch the caller owns; see cg_grad_filter_workspace_bytes */
    int output_batch_;   /**< batch of dy; must equal input_batch_ */
    int input_batch_;    /**< batch of x */
    int input_h_;        /**< height of x */
    int input_w_;        /**< width of x */
    int output_h_;       /**< height of dy, taken as given (any value >= 1) */
    int output_w_;       /**< width of dy, taken as given (any value >= 1) */
    int input_channel_;  /**< channels of x (Cin) */
    int output_channel_; /**< channels of dy (Cout) */
    int kernel_h_;       /**< kernel height (Kh) */
    int kernel_w_;       /**< kernel width (Kw) */
    int group_;          /**< groups (G), dividing both channel counts */
    int pad_l_;          /**< zero padding on the left of x */
    int pad_u_;          /**< zero padding above x */
    int dilation_h_;     /**< vertical distance between kernel taps, >= 1 */
    int dilation_w_;     /**< horizontal distance between kernel taps, >= 1 */
    int stride_h_;       /**< vertical step between output pixels, >= 1 */
    int stride_w_;       /**< horizontal step between output pixels, >= 1 */
    int buffer_size_;    /**< bytes, at least cg_grad_filter_min_buffer_size(); the workspace
                              must hold buffer_size_ * sizeof(float) bytes */
    int pad_d_;          /**< zero padding below x (checked >= 0, not in the formula) */
    int pad_r_;          /**< zero padding on the right of x (checked >= 0, not in the formula) */
} ConvParameter;

/* ---- Status ---------------------------------------------------------- */

/** What a call did: CG_OK, or the first problem it found (all negative). */
typedef enum cg_status {
    CG_OK = 0,                    /**< success */
    CG_ERR_NULL_POINTER = -1,     /**< a required pointer (a tensor, the parameters or the
                                       workspace) is NULL */
    CG_ERR_BAD_SIZE = -2,         /**< a batch, height, width, channel or kernel size < 1
                                       (cg_conv2d: or an output height or width < 1) */
    CG_ERR_BAD_GROUP = -3,        /**< the group count is < 1 or does not divide both
                                       channel counts */
    CG_ERR_BAD_STRIDE = -4,       /**< a stride < 1 */
    CG_ERR_BAD_DILATION = -5,     /**< a dilation < 1 */
    CG_ERR_BAD_PAD = -6,          /**< a negative pad */
    CG_ERR_BATCH_MISMATCH = -7,   /**< input_batch_ != output_batch_ */
    CG_ERR_BUFFER_TOO_SMALL = -8, /**< buffer_size_ under 2*(Kh*Kw*Cin/G)*sizeof(dtype) */
    CG_ERR_CORE_MASK = -9,        /**< core_mask is 0, or (SPMD `_s`) names a core outside
                                       the calling launch, or core_mask_launch's entry is NULL */
    CG_ERR_OVERFLOW = -10,        /**< an element or byte count overflows (cg_conv2d: or an
                                       image plane, in_h*in_w or OH*OW, exceeds INT_MAX) */
    CG_ERR_CORE_BUSY = -11,       /**< a core of the mask is busy in another launch */
    CG_ERR_NO_MEMORY = -12,       /**< the library's own scratch could not be allocated */
    CG_ERR_THREAD = -13,          /**< an emulated core's thread could not be started */
    CG_ERR_BAD_LAYOUT = -14,      /**< cg_conv2d.layout is not a cg_layout */
    CG_ERR_INSIDE_LAUNCH = -15    /**< a cg_conv2d_* function was called on an emulated
                                       core: call it from an ordinary thread */
} cg_status;

/** Status of the calling thread's last convgrad call (entry points and launches). */
cg_status cg_last_status(void);
/** A clear, non-empty English sentence for any value, known or not. */
const char *cg_status_message(cg_status s);
/**
 * What exactly was wrong in the calling thread's last convgrad call, naming
 * the field or pointer and its value, for example
 * "group_=4 does not divide input_channel_=6" or "x is NULL"; the fields are
 * those the caller set (ConvParameter's for the operator, cg_conv2d's for
 * cg_conv2d_*). "" after a call that succeeded. Never NULL; the text stays
 * valid until the thread's next convgrad call.
 */
const char *cg_last_error_detail(void);

/**
 * Bytes `_s` needs on core_mask: max(buffer_size_*4, core_num*dw_elems*4),
 * dw_elems = Cout*Kh*Kw*(Cin/G). dtype_size is 4 or 2 and does not change the
 * result (partials are float). 0 for invalid parameters.
 */
size_t cg_grad_filter_workspace_bytes(const ConvParameter *p, int core_mask, size_t dtype_size);
/**
 * The largest scratch of the library's own that one core keeps for `_s` of
 * these parameters on core_mask (fp32 or fp16, whichever needs more): its
 * packing space and its slices' partial sums (at most 32 MiB over all cores),
 * allocated on a core's first call and reused, never per call. 0 if invalid.
 */
size_t cg_grad_filter_scratch_bytes(const ConvParameter *p, int core_mask);
/** Lower bound of buffer_size_: 2*(Kh*Kw*Cin/G)*dtype_size; 0 if invalid. */
int cg_grad_filter_min_buffer_size(const ConvParameter *p, size_t dtype_size);

/**
 * The same bits on every core_mask (on = 1, the default): every long sum of
 * the operator and of cg_conv2d_* is cut into pieces fixed by the shape alone
 * and added in a fixed order. on = 0 cuts each into one piece a core instead
 * (fewer partials to write and add; results then depend on the mask), which
 * is there to measure what the guarantee costs (convgrad-bench's "any-order"
 * rows). Process-wide: change it only while no call runs. Returns the
 * previous setting.
 */
int cg_set_reproducible(int on);

/* ---- The operator (vendor card signatures) ---------------------------- */

/**
 * fp16 filter gradient on the cores of core_mask:
 * out_dw[Cout][Kh][Kw][Cin/G] += dw, plus bias[c] once per call on every
 * element of row c when bias is not NULL. Products are summed in fp32.
 *
 * Two ways to call it: from every core of core_mask inside core_mask_launch,
 * with the same arguments (SPMD mode, as on the chip; collective, returns on
 * every core when out_dw is complete); or once from an ordinary thread (host
 * mode: the library runs the cores itself). Writes only out_dw and
 * workspace_[0, cg_grad_filter_workspace_bytes()). On bad input nothing is
 * written; the status is in cg_last_status() and cg_last_error_detail().
 */
void hp_conv_grad_filter_s(float16 *input_dy, float16 *input_x, float16 *out_dw, float16 *bias,
                           ConvParameter *conv_param, int core_mask);
/** fp32 hp_conv_grad_filter_s(): the same operator on float tensors. */
void fp_conv_grad_filter_s(float *input_dy, float *input_x, float *out_dw, float *bias,
                           ConvParameter *conv_param, int core_mask);
/**
 * fp16 filter gradient on one core, the caller's, staged inside
 * workspace_[0, buffer_size_ * sizeof(float)): out_dw += dw (+ bias once).
 */
void hp_conv_grad_filter_p(float16 *input_dy, float16 *input_x, float16 *out_dw, float16 *bias,
                           ConvParameter *conv_param);
/** fp32 hp_conv_grad_filter_p(): the same operator on float tensors. */
void fp_conv_grad_filter_p(float *input_dy, float *input_x, float *out_dw, float *bias,
                           ConvParameter *conv_param);

/** hp_conv_grad_filter_s(), returning the status (also kept for cg_last_status()). */
cg_status cg_hp_conv_grad_filter_s(const float16 *input_dy, const float16 *input_x, float16 *out_dw,
                                   const float16 *bias, const ConvParameter *conv_param,
                                   int core_mask);
/** fp_conv_grad_filter_s(), returning the status (also kept for cg_last_status()). */
cg_status cg_fp_conv_grad_filter_s(const float *input_dy, const float *input_x, float *out_dw,
                                   const float *bias, const ConvParameter *conv_param,
                                   int core_mask);
/** hp_conv_grad_filter_p(), returning the status (also kept for cg_last_status()). */
cg_status cg_hp_conv_grad_filter_p(const float16 *input_dy, const float16 *input_x, float16 *out_dw,
                                   const float16 *bias, const ConvParameter *conv_param);
/** fp_conv_grad_filter_p(), returning the status (also kept for cg_last_status()). */
cg_status cg_fp_conv_grad_filter_p(const float *input_dy, const float *input_x, float *out_dw,
                                   const float *bias, const ConvParameter *conv_param);

/* ---- The whole training step: cg_conv2d_* ----------------------------- */

/**
 * Memory layout of the tensors of a cg_conv2d.
 *
 * Shapes (OH, OW from cg_conv2d_output_h() and cg_conv2d_output_w()):
 * - CG_LAYOUT_NHWC: x [batch][in_h][in_w][in_c], y and dy
 *   [batch][OH][OW][out_c], w and dw OHWI [out_c][kernel_h][kernel_w][in_c/groups]
 * - CG_LAYOUT_NCHW: x [batch][in_c][in_h][in_w], y and dy
 *   [batch][out_c][OH][OW], w and dw OIHW [out_c][in_c/groups][kernel_h][kernel_w]
 * - b and db: [out_c]
 */
typedef enum cg_layout {
    CG_LAYOUT_NHWC = 0, /**< channels last; weights OHWI */
    CG_LAYOUT_NCHW = 1  /**< channels first; weights OIHW */
} cg_layout;

/**
 * A 2-D convolution for the training-step functions cg_conv2d_*.
 *
 * Forward, input gradient, weight gradient and bias gradient run on the
 * cores of a core_mask, called from an ordinary thread (the library launches
 * the cores; called on an emulated core, they return CG_ERR_INSIDE_LAUNCH).
 * Every output is overwritten (=), never accumulated into.
 * Validation comes first: on any error nothing is written.
 *
 * Formula: with iy = oh*stride_h + kh*dilation_h - pad_top and
 * ix = ow*stride_w + kw*dilation_w - pad_left (terms outside the input are 0),
 *
 *     y[n, oh, ow, co] = b[co] + sum over kh, kw, ci of
 *                        x[n, iy, ix, g*Ci' + ci] * w[co, kh, kw, ci]
 *
 * for co in group g = co / (out_c/groups), Ci' = in_c/groups.
 */
typedef struct cg_conv2d {
    cg_layout layout; /**< CG_LAYOUT_NHWC or CG_LAYOUT_NCHW */
    int batch;        /**< images, >= 1 */
    int in_h;         /**< input height, >= 1 */
    int in_w;         /**< input width, >= 1 */
    int in_c;         /**< input channels, a multiple of groups */
    int out_c;        /**< output channels, a multiple of groups */
    int kernel_h;     /**< kernel height, >= 1 */
    int kernel_w;     /**< kernel width, >= 1 */
    int groups;       /**< groups, >= 1 (in_c == out_c == groups: depthwise) */
    int stride_h;     /**< vertical stride, >= 1 */
    int stride_w;     /**< horizontal stride, >= 1 */
    int dilation_h;   /**< vertical dilation, >= 1 (1: taps side by side) */
    int dilation_w;   /**< horizontal dilation, >= 1 */
    int pad_top;      /**< zero padding above the input, >= 0 */
    int pad_bottom;   /**< zero padding below the input, >= 0 */
    int pad_left;     /**< zero padding left of the input, >= 0 */
    int pad_right;    /**< zero padding right of the input, >= 0 */
} cg_conv2d;

/**
 * Output height OH = (in_h + pad_top + pad_bottom - dilation_h*(kernel_h-1) - 1)/stride_h + 1;
 * 0 when the descriptor is invalid (cg_conv2d_check() says why).
 */
int cg_conv2d_output_h(const cg_conv2d *conv);
/** Output width OW, as cg_conv2d_output_h() with the horizontal fields. */
int cg_conv2d_output_w(const cg_conv2d *conv);
/**
 * CG_OK, or the first problem of the descriptor (the same rules as
 * ConvParameter, plus CG_ERR_BAD_SIZE when OH or OW would be < 1). Records
 * the status and its detail for cg_last_status() and cg_last_error_detail().
 */
cg_status cg_conv2d_check(const cg_conv2d *conv);

/** y = conv(x, w) + b; b may be NULL (no bias). */
cg_status cg_conv2d_forward(const cg_conv2d *conv, const float *x, const float *w, const float *b,
                            float *y, int core_mask);
/** dx = the gradient of sum(y * dy) with respect to x. */
cg_status cg_conv2d_backward_data(const cg_conv2d *conv, const float *dy, const float *w, float *dx,
                                  int core_mask);
/** dw = the gradient of sum(y * dy) with respect to w, in w's layout. */
cg_status cg_conv2d_backward_weights(const cg_conv2d *conv, const float *x, const float *dy,
                                     float *dw, int core_mask);
/** db[c] = sum over n, oh, ow of dy[n, oh, ow, c]. */
cg_status cg_conv2d_backward_bias(const cg_conv2d *conv, const float *dy, float *db, int core_mask);
/**
 * cg_conv2d_backward_weights and cg_conv2d_backward_bias in one call, with
 * the same bits as the two: db is summed from each part of dy while the
 * weight gradient has it in cache, where the two calls read dy from memory
 * twice. Neither output is written unless both can be.
 */
cg_status cg_conv2d_backward_weights_bias(const cg_conv2d *conv, const float *x, const float *dy,
                                          float *dw, float *db, int core_mask);
/**
 * The whole backward pass in one call, as the separate calls with their
 * bits: dx as cg_conv2d_backward_data, dw and db as
 * cg_conv2d_backward_weights_bias (db may be NULL: no bias gradient). A
 * depthwise NHWC layer of stride 1 computes dx from each piece of dy while
 * the weight gradient has it in cache, reading dy from memory once where
 * the separate calls read it twice. Nothing is written on an argument
 * error; on other layers, which run the two calls in turn, a failure of the
 * second (CG_ERR_NO_MEMORY, or CG_ERR_CORE_BUSY where another launch took a
 * core in between) leaves dx written and dw, db not.
 */
cg_status cg_conv2d_backward(const cg_conv2d *conv, const float *x, const float *dy, const float *w,
                             float *dx, float *dw, float *db, int core_mask);

/* ---- Emulated cores (vendor card names) ------------------------------- */

/** Physical id (bit index in the mask) of the calling core; -1 outside a launch. */
int get_core_id(void);
/** Rank of core_id among the set bits of core_mask; -1 if absent. */
int GetLogicCoreId(int core_mask, int core_id);
/** Number of set bits of core_mask. */
int GetCoreNum(int core_mask);
/**
 * Barrier: returns once core_num cores of the calling launch have reached
 * bar_id (0..15, independent). Returns at once outside a launch. Waiting
 * does not burn a CPU another emulated core needs.
 */
void sys_bar(int bar_id, int core_num);
/**
 * Runs entry(arg) on every core of core_mask (bits 0..31, one persistent
 * thread a core) and returns 0 once all have returned; a negative cg_status
 * if the mask is 0, a core is busy in another launch (refused at once, never
 * a deadlock) or a core's thread cannot be started. Launches on disjoint
 * masks run at the same time from different host threads.
 */
int core_mask_launch(int core_mask, void (*entry)(void *arg), void *arg);

/* ---- What the emulated cores did: CONVGRAD_TRACE ----------------------- */

/**
 * The phases of an emulated core's work. CONVGRAD_TRACE=FILE (set before the
 * process's first launch) appends one event per core and phase of every
 * launch to FILE, as Chrome trace-event JSON (Perfetto, chrome://tracing).
 */
typedef enum cg_phase {
    CG_PHASE_PACK,    /**< copying operands into panels or im2col tiles */
    CG_PHASE_COMPUTE, /**< the products and sums */
    CG_PHASE_BARRIER, /**< waiting: at a barrier, or for the launch to reach the core */
    CG_PHASE_REDUCE,  /**< adding the slices' partial sums together */
    CG_PHASE_FINISH,  /**< writing results out (bias, fp16, out_dw) */
    CG_NPHASES
} cg_phase;

/** One event of an emulated core: a phase from `start` for `wall` seconds. */
typedef struct cg_trace_event {
    int core;       /**< physical id of the core */
    cg_phase phase; /**< what it did */
    double start;   /**< seconds since the trace began */
    double wall;    /**< seconds it took */
    double cpu;     /**< the core's thread CPU time in it (seconds) */
} cg_trace_event;

/**
 * With CONVGRAD_TRACE on: the events of the last completed launch on exactly
 * core_mask (every core of it; none of another launch since), at most `max`
 * of them into ev, by core then time. Returns how many the launch had (more
 * than max: only max were copied), 0 when tracing is off or there is no such
 * launch.
 */
int cg_trace_last_launch(int core_mask, cg_trace_event *ev, int max);

#ifdef __cplusplus
}
#endif
#endif
