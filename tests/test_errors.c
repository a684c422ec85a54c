/* SPDX-License-Identifier: MIT */
/* Bad input: one row per contract error, on all four entry points in both
 * styles (seed void entry + cg_last_status, and the cg_* twin), host and
 * SPMD. For each: the status is the header's code for that error, the
 * message is non-empty, cg_last_error_detail() is the row's sentence naming
 * the field or pointer and its value (on every core in SPMD mode), out_dw
 * and the WHOLE workspace are bit-for-bit untouched, inputs unchanged, and
 * the next valid call on the same buffers succeeds with the right result
 * and an empty detail. Also: status messages, the detail per thread, and
 * the helpers returning 0 for invalid parameters. */
#define _DEFAULT_SOURCE /* usleep */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define TEST_TIMEOUT 300.0

/* ---- the base problem: valid, general path (groups, pads) --------------- */
/* clang-format off */
static const cgt_shape BASE = {.n = 2, .h = 5, .w = 6, .cin = 4, .cout = 6, .g = 2, .kh = 3,
                               .kw = 2, .pu = 1, .pd = 1, .pl = 1, .pr = 0, .bs = 0x400};
/* clang-format on */

/* ---- rows ---------------------------------------------------------------- */
enum {
    ONLY_S = 1,      /* row applies to _s only */
    ONLY_SPMD = 2,   /* row needs a launch (mask vs launch) */
    SHAPE_BAD = 4,   /* the helpers must return 0 for this ConvParameter */
    NULL_PARAM = 16, /* pass conv_param = NULL */
    NULL_DY = 32,
    NULL_X = 64,
    NULL_OUT = 128,
    MASK_ZERO = 256, /* _s with core_mask 0 */
};

typedef void (*mutator)(ConvParameter *p, size_t es);

typedef struct err_row {
    const char *name;
    mutator mutate;
    cg_status want;
    cg_status alt; /* also acceptable where two errors are both true; CG_OK = none */
    int flags;
    int call_mask;         /* _s mask to pass; 0 = default (host: 0x3, SPMD: the launch's) */
    int launch_mask;       /* SPMD launch mask when the row needs one (0: default 0x5) */
    const char *detail;    /* cg_last_error_detail() after the call, exactly */
    const char *detail_hp; /* the same for hp_ when it differs (NULL: as detail) */
} err_row;

#define SET(fname, body)                                                                           \
    static void fname(ConvParameter *p, size_t es)                                                 \
    {                                                                                              \
        (void)es;                                                                                  \
        body;                                                                                      \
    }

static void nothing(ConvParameter *p, size_t es)
{
    (void)p;
    (void)es;
}
SET(null_ws, p->workspace_ = NULL)
SET(batch_0, p->input_batch_ = p->output_batch_ = 0)
SET(batch_neg, p->input_batch_ = p->output_batch_ = -2)
SET(in_batch_0, p->input_batch_ = 0)
SET(out_batch_neg, p->output_batch_ = -1)
SET(in_h_0, p->input_h_ = 0)
SET(in_h_neg, p->input_h_ = -2)
SET(in_h_min, p->input_h_ = INT_MIN)
SET(in_w_0, p->input_w_ = 0)
SET(in_w_neg, p->input_w_ = -2)
SET(out_h_0, p->output_h_ = 0)
SET(out_h_neg, p->output_h_ = -2)
SET(out_w_0, p->output_w_ = 0)
SET(out_w_neg, p->output_w_ = -2)
SET(cin_0, p->input_channel_ = 0)
SET(cin_neg, p->input_channel_ = -2)
SET(cout_0, p->output_channel_ = 0)
SET(cout_neg, p->output_channel_ = -2)
SET(kh_0, p->kernel_h_ = 0)
SET(kh_neg, p->kernel_h_ = -2)
SET(kw_0, p->kernel_w_ = 0)
SET(kw_neg, p->kernel_w_ = -2)
SET(batch_mismatch, p->input_batch_ = 3)
SET(batch_mismatch2, p->input_batch_ = 1)
SET(group_0, p->group_ = 0)
SET(group_neg, p->group_ = -2)
SET(group_not_cin, p->group_ = 3)  /* 6 % 3 == 0, 4 % 3 != 0 */
SET(group_not_cout, p->group_ = 4) /* 4 % 4 == 0, 6 % 4 != 0 */
SET(group_neither, p->group_ = 8)
SET(stride_h_0, p->stride_h_ = 0)
SET(stride_w_0, p->stride_w_ = 0)
SET(stride_h_neg, p->stride_h_ = -1)
SET(stride_w_min, p->stride_w_ = INT_MIN)
SET(dil_h_0, p->dilation_h_ = 0)
SET(dil_w_0, p->dilation_w_ = 0)
SET(dil_h_neg, p->dilation_h_ = -3)
SET(pad_l_neg, p->pad_l_ = -1)
SET(pad_u_neg, p->pad_u_ = -1)
SET(pad_d_neg, p->pad_d_ = -1)
SET(pad_r_neg, p->pad_r_ = -1)
SET(pad_u_min, p->pad_u_ = INT_MIN)
SET(buf_one_under, p->buffer_size_ = (int)(2 * 3 * 2 * 2 * es) - 1) /* 2*Kh*Kw*(Cin/G)*es - 1 */
SET(buf_0, p->buffer_size_ = 0)
SET(buf_neg, p->buffer_size_ = -1)
SET(buf_min, p->buffer_size_ = INT_MIN)

/* A shape with tiny everything, then one huge dimension set. */
static void tiny(ConvParameter *p)
{
    p->input_batch_ = p->output_batch_ = 1;
    p->input_h_ = p->input_w_ = 1;
    p->output_h_ = p->output_w_ = 1;
    p->input_channel_ = p->output_channel_ = 1;
    p->group_ = 1;
    p->kernel_h_ = p->kernel_w_ = 1;
    p->pad_l_ = p->pad_u_ = p->pad_d_ = p->pad_r_ = 0;
}
/* x's byte count N*H*W*Cin*es is about 2^93 */
SET(ovf_x, tiny(p); p->input_batch_ = p->output_batch_ = INT_MAX; p->input_h_ = INT_MAX;
    p->input_w_ = INT_MAX)
/* dy's byte count N*OH*OW*Cout*es is about 2^93 */
SET(ovf_dy, tiny(p); p->input_batch_ = p->output_batch_ = INT_MAX; p->output_h_ = INT_MAX;
    p->output_w_ = INT_MAX)
/* dw's count Cout*Kh*Kw*Ci' is about 2^93 (and its lower bound > INT_MAX) */
SET(ovf_dw, tiny(p); p->output_channel_ = INT_MAX; p->kernel_h_ = INT_MAX; p->kernel_w_ = INT_MAX)
/* lower bound 2*Kh*Kw*Ci'*es = 2^32 (fp32) / 2^31 (fp16) > INT_MAX; nothing else overflows */
SET(ovf_bound, tiny(p); p->input_channel_ = 1 << 29; p->buffer_size_ = INT_MAX)
/* _s on 32 cores: 32 * dw_elems * 4 = 32 * (2^31-1) * 2^27 * 4 > 2^64, while
 * every other count fits (dw bytes ~2^60, bound 2^30) */
SET(ovf_ws32, tiny(p); p->output_channel_ = INT_MAX; p->kernel_h_ = 1 << 14; p->kernel_w_ = 1 << 13;
    p->buffer_size_ = 1 << 30)

/* The details name the field (or pointer) at fault and its value. */
#define BOUND32 " is under the lower bound 96 = 2*(3*2*4/2)*4"
#define BOUND16 " is under the lower bound 48 = 2*(3*2*4/2)*2"
#define OUTSIDE " outside the calling launch's mask "
/* clang-format off */
static const err_row ROWS[] = {
    {"dy NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_DY, 0, 0, "input_dy is NULL", NULL},
    {"x NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_X, 0, 0, "input_x is NULL", NULL},
    {"out_dw NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_OUT, 0, 0, "out_dw is NULL", NULL},
    {"conv_param NULL", nothing, CG_ERR_NULL_POINTER, CG_OK, NULL_PARAM, 0, 0,
     "conv_param is NULL", NULL},
    {"workspace_ NULL", null_ws, CG_ERR_NULL_POINTER, CG_OK, 0, 0, 0,
     "conv_param->workspace_ is NULL", NULL},
    {"both batches 0", batch_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "output_batch_=0 must be >= 1", NULL},
    {"both batches -2", batch_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "output_batch_=-2 must be >= 1", NULL},
    {"input_batch_ 0", in_batch_0, CG_ERR_BAD_SIZE, CG_ERR_BATCH_MISMATCH, SHAPE_BAD, 0, 0,
     "input_batch_=0 must be >= 1", NULL},
    {"output_batch_ -1", out_batch_neg, CG_ERR_BAD_SIZE, CG_ERR_BATCH_MISMATCH, SHAPE_BAD, 0, 0,
     "output_batch_=-1 must be >= 1", NULL},
    {"input_h_ 0", in_h_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "input_h_=0 must be >= 1",
     NULL},
    {"input_h_ -2", in_h_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "input_h_=-2 must be >= 1",
     NULL},
    {"input_h_ INT_MIN", in_h_min, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "input_h_=-2147483648 must be >= 1", NULL},
    {"input_w_ 0", in_w_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "input_w_=0 must be >= 1",
     NULL},
    {"input_w_ -2", in_w_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "input_w_=-2 must be >= 1",
     NULL},
    {"output_h_ 0", out_h_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "output_h_=0 must be >= 1",
     NULL},
    {"output_h_ -2", out_h_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "output_h_=-2 must be >= 1", NULL},
    {"output_w_ 0", out_w_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "output_w_=0 must be >= 1",
     NULL},
    {"output_w_ -2", out_w_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "output_w_=-2 must be >= 1", NULL},
    {"input_channel_ 0", cin_0, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, SHAPE_BAD, 0, 0,
     "input_channel_=0 must be >= 1", NULL},
    {"input_channel_ -2", cin_neg, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, SHAPE_BAD, 0, 0,
     "input_channel_=-2 must be >= 1", NULL},
    {"output_channel_ 0", cout_0, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, SHAPE_BAD, 0, 0,
     "output_channel_=0 must be >= 1", NULL},
    {"output_channel_ -2", cout_neg, CG_ERR_BAD_SIZE, CG_ERR_BAD_GROUP, SHAPE_BAD, 0, 0,
     "output_channel_=-2 must be >= 1", NULL},
    {"kernel_h_ 0", kh_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "kernel_h_=0 must be >= 1",
     NULL},
    {"kernel_h_ -2", kh_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "kernel_h_=-2 must be >= 1", NULL},
    {"kernel_w_ 0", kw_0, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0, "kernel_w_=0 must be >= 1",
     NULL},
    {"kernel_w_ -2", kw_neg, CG_ERR_BAD_SIZE, CG_OK, SHAPE_BAD, 0, 0,
     "kernel_w_=-2 must be >= 1", NULL},
    {"input_batch_ 3 vs output_batch_ 2", batch_mismatch, CG_ERR_BATCH_MISMATCH, CG_OK, SHAPE_BAD,
     0, 0, "input_batch_=3 differs from output_batch_=2", NULL},
    {"input_batch_ 1 vs output_batch_ 2", batch_mismatch2, CG_ERR_BATCH_MISMATCH, CG_OK, SHAPE_BAD,
     0, 0, "input_batch_=1 differs from output_batch_=2", NULL},
    {"group_ 0", group_0, CG_ERR_BAD_GROUP, CG_OK, SHAPE_BAD, 0, 0, "group_=0 must be >= 1",
     NULL},
    {"group_ -2", group_neg, CG_ERR_BAD_GROUP, CG_OK, SHAPE_BAD, 0, 0, "group_=-2 must be >= 1",
     NULL},
    {"group_ 3 not dividing Cin 4", group_not_cin, CG_ERR_BAD_GROUP, CG_OK, SHAPE_BAD, 0, 0,
     "group_=3 does not divide input_channel_=4", NULL},
    {"group_ 4 not dividing Cout 6", group_not_cout, CG_ERR_BAD_GROUP, CG_OK, SHAPE_BAD, 0, 0,
     "group_=4 does not divide output_channel_=6", NULL},
    {"group_ 8 dividing neither", group_neither, CG_ERR_BAD_GROUP, CG_OK, SHAPE_BAD, 0, 0,
     "group_=8 does not divide input_channel_=4", NULL},
    {"stride_h_ 0", stride_h_0, CG_ERR_BAD_STRIDE, CG_OK, SHAPE_BAD, 0, 0,
     "stride_h_=0 must be >= 1", NULL},
    {"stride_w_ 0", stride_w_0, CG_ERR_BAD_STRIDE, CG_OK, SHAPE_BAD, 0, 0,
     "stride_w_=0 must be >= 1", NULL},
    {"stride_h_ -1", stride_h_neg, CG_ERR_BAD_STRIDE, CG_OK, SHAPE_BAD, 0, 0,
     "stride_h_=-1 must be >= 1", NULL},
    {"stride_w_ INT_MIN", stride_w_min, CG_ERR_BAD_STRIDE, CG_OK, SHAPE_BAD, 0, 0,
     "stride_w_=-2147483648 must be >= 1", NULL},
    {"dilation_h_ 0", dil_h_0, CG_ERR_BAD_DILATION, CG_OK, SHAPE_BAD, 0, 0,
     "dilation_h_=0 must be >= 1", NULL},
    {"dilation_w_ 0", dil_w_0, CG_ERR_BAD_DILATION, CG_OK, SHAPE_BAD, 0, 0,
     "dilation_w_=0 must be >= 1", NULL},
    {"dilation_h_ -3", dil_h_neg, CG_ERR_BAD_DILATION, CG_OK, SHAPE_BAD, 0, 0,
     "dilation_h_=-3 must be >= 1", NULL},
    {"pad_l_ -1", pad_l_neg, CG_ERR_BAD_PAD, CG_OK, SHAPE_BAD, 0, 0, "pad_l_=-1 must be >= 0",
     NULL},
    {"pad_u_ -1", pad_u_neg, CG_ERR_BAD_PAD, CG_OK, SHAPE_BAD, 0, 0, "pad_u_=-1 must be >= 0",
     NULL},
    {"pad_d_ -1", pad_d_neg, CG_ERR_BAD_PAD, CG_OK, SHAPE_BAD, 0, 0, "pad_d_=-1 must be >= 0",
     NULL},
    {"pad_r_ -1", pad_r_neg, CG_ERR_BAD_PAD, CG_OK, SHAPE_BAD, 0, 0, "pad_r_=-1 must be >= 0",
     NULL},
    {"pad_u_ INT_MIN", pad_u_min, CG_ERR_BAD_PAD, CG_OK, SHAPE_BAD, 0, 0,
     "pad_u_=-2147483648 must be >= 0", NULL},
    {"buffer_size_ one under the minimum", buf_one_under, CG_ERR_BUFFER_TOO_SMALL, CG_OK, 0, 0, 0,
     "buffer_size_=95" BOUND32, "buffer_size_=47" BOUND16},
    {"buffer_size_ 0", buf_0, CG_ERR_BUFFER_TOO_SMALL, CG_OK, 0, 0, 0, "buffer_size_=0" BOUND32,
     "buffer_size_=0" BOUND16},
    {"buffer_size_ -1", buf_neg, CG_ERR_BUFFER_TOO_SMALL, CG_OK, 0, 0, 0,
     "buffer_size_=-1" BOUND32, "buffer_size_=-1" BOUND16},
    {"buffer_size_ INT_MIN", buf_min, CG_ERR_BUFFER_TOO_SMALL, CG_OK, 0, 0, 0,
     "buffer_size_=-2147483648" BOUND32, "buffer_size_=-2147483648" BOUND16},
    {"x byte count overflows size_t", ovf_x, CG_ERR_OVERFLOW, CG_OK, SHAPE_BAD, 0, 0,
     "the byte count of input_x, input_batch_=2147483647 * input_h_=2147483647 * "
     "input_w_=2147483647 * input_channel_=1 * 4, exceeds PTRDIFF_MAX", NULL},
    {"dy byte count overflows size_t", ovf_dy, CG_ERR_OVERFLOW, CG_OK, SHAPE_BAD, 0, 0,
     "the byte count of input_dy, output_batch_=2147483647 * output_h_=2147483647 * "
     "output_w_=2147483647 * output_channel_=1 * 4, exceeds PTRDIFF_MAX", NULL},
    {"dw count overflows size_t", ovf_dw, CG_ERR_OVERFLOW, CG_OK, SHAPE_BAD, 0, 0,
     "the byte count of 32 float partials of out_dw, output_channel_=2147483647 * "
     "kernel_h_=2147483647 * kernel_w_=2147483647 * (input_channel_=1 / group_=1) * 32 * 4, "
     "exceeds PTRDIFF_MAX", NULL},
    {"buffer lower bound over INT_MAX", ovf_bound, CG_ERR_OVERFLOW, CG_OK, SHAPE_BAD, 0, 0,
     "the lower bound of buffer_size_, 2*(kernel_h_=1 * kernel_w_=1 * input_channel_=536870912 / "
     "group_=1)*4, exceeds INT_MAX",
     "the lower bound of buffer_size_, 2*(kernel_h_=1 * kernel_w_=1 * input_channel_=536870912 / "
     "group_=1)*2, exceeds INT_MAX"},
    {"_s workspace bytes on 32 cores overflow size_t", ovf_ws32, CG_ERR_OVERFLOW, CG_OK, ONLY_S, -1,
     -1, "the byte count of 32 float partials of out_dw, output_channel_=2147483647 * "
     "kernel_h_=16384 * kernel_w_=8192 * (input_channel_=1 / group_=1) * 32 * 4, exceeds "
     "PTRDIFF_MAX", NULL},
    {"core_mask 0", nothing, CG_ERR_CORE_MASK, CG_OK, ONLY_S | MASK_ZERO, 0, 0, "core_mask is 0",
     NULL},
    {"core_mask names a core outside the launch (launch 0x3, mask 0x7)", nothing, CG_ERR_CORE_MASK,
     CG_OK, ONLY_S | ONLY_SPMD, 0x7, 0x3,
     "core_mask 0x00000007 names cores 0x00000004" OUTSIDE "0x00000003", NULL},
    {"core_mask disjoint from the launch (launch 0x3, mask 0xc)", nothing, CG_ERR_CORE_MASK, CG_OK,
     ONLY_S | ONLY_SPMD, 0xc, 0x3, "core_mask 0x0000000c names cores 0x0000000c" OUTSIDE
     "0x00000003", NULL},
    {"core_mask names core 31 outside the launch (launch 0x1, mask INT_MIN|1)", nothing,
     CG_ERR_CORE_MASK, CG_OK, ONLY_S | ONLY_SPMD, INT_MIN | 1, 0x1,
     "core_mask 0x80000001 names cores 0x80000000" OUTSIDE "0x00000001", NULL},
};
/* clang-format on */
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

/* Longest detail the library keeps, terminator included. */
enum { DETAIL_MAX = 256 };

/* ---- entry-point variants -------------------------------------------------- */
typedef struct variant {
    int fp16; /* hp_ vs fp_ */
    int is_s; /* _s vs _p */
    int twin; /* cg_* status-returning twin vs void + cg_last_status */
    const char *name;
} variant;

static const variant VARIANTS[] = {
    {0, 1, 0, "fp_conv_grad_filter_s"}, {0, 1, 1, "cg_fp_conv_grad_filter_s"},
    {1, 1, 0, "hp_conv_grad_filter_s"}, {1, 1, 1, "cg_hp_conv_grad_filter_s"},
    {0, 0, 0, "fp_conv_grad_filter_p"}, {0, 0, 1, "cg_fp_conv_grad_filter_p"},
    {1, 0, 0, "hp_conv_grad_filter_p"}, {1, 0, 1, "cg_hp_conv_grad_filter_p"},
};
#define N_VARIANTS ((int)(sizeof VARIANTS / sizeof VARIANTS[0]))

/* Calls one variant; returns the status (the twin's return value, or
 * cg_last_status() for a void entry) and what cg_last_status() says after. */
static cg_status invoke(const variant *v, const void *dy, const void *x, void *out,
                        const void *bias, ConvParameter *p, int mask, cg_status *last)
{
    cg_status st;
    float *dyf = (float *)(uintptr_t)dy, *xf = (float *)(uintptr_t)x,
          *bf = (float *)(uintptr_t)bias;
    float16 *dyh = (float16 *)(uintptr_t)dy, *xh = (float16 *)(uintptr_t)x;
    float16 *bh = (float16 *)(uintptr_t)bias;
    if (v->twin) {
        if (!v->fp16)
            st = v->is_s ? cg_fp_conv_grad_filter_s(dyf, xf, out, bf, p, mask)
                         : cg_fp_conv_grad_filter_p(dyf, xf, out, bf, p);
        else
            st = v->is_s ? cg_hp_conv_grad_filter_s(dyh, xh, out, bh, p, mask)
                         : cg_hp_conv_grad_filter_p(dyh, xh, out, bh, p);
        *last = cg_last_status();
        return st;
    }
    if (!v->fp16) {
        if (v->is_s)
            fp_conv_grad_filter_s(dyf, xf, out, bf, p, mask);
        else
            fp_conv_grad_filter_p(dyf, xf, out, bf, p);
    } else {
        if (v->is_s)
            hp_conv_grad_filter_s(dyh, xh, out, bh, p, mask);
        else
            hp_conv_grad_filter_p(dyh, xh, out, bh, p);
    }
    *last = cg_last_status();
    return *last;
}

/* SPMD: every core of the launch makes the same call. */
typedef struct spmd_call {
    const variant *v;
    const void *dy, *x, *bias;
    void *out;
    ConvParameter *p;
    int mask;
    cg_status st[32], last[32];
    char detail[32][DETAIL_MAX]; /* each core's cg_last_error_detail() */
    atomic_int ran[32];
} spmd_call;

static void spmd_entry(void *arg)
{
    spmd_call *k = arg;
    const int id = get_core_id();
    cg_status last;
    cg_status st = invoke(k->v, k->dy, k->x, k->out, k->bias, k->p, k->mask, &last);
    if (id >= 0 && id < 32) {
        k->st[id] = st;
        k->last[id] = last;
        snprintf(k->detail[id], sizeof k->detail[id], "%s", cg_last_error_detail());
        atomic_fetch_add(&k->ran[id], 1);
    }
}

/* Every core of launch calls v with these arguments; each core's status,
 * cg_last_status and call count land in k. Returns core_mask_launch's
 * result. */
static int launch_spmd_call(spmd_call *k, int launch, const variant *v, const void *dy,
                            const void *x, const void *bias, void *out, ConvParameter *p, int mask)
{
    memset(k, 0, sizeof *k);
    k->v = v;
    k->dy = dy;
    k->x = x;
    k->bias = bias;
    k->out = out;
    k->p = p;
    k->mask = mask;
    return core_mask_launch(launch, spmd_entry, k);
}

/* ---- the fixture: buffers of the base problem ----------------------------- */
typedef struct fixture {
    ConvParameter base;
    cgt_dtype dt;
    size_t es, ndy, nx, ndw, ws_bytes;
    void *dy, *x, *bias, *out, *ws;
    uint64_t sum_dy, sum_x, sum_b;
    cgt_rng rng;
} fixture;

static void fixture_init(fixture *f, int fp16, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->base = cgt_param(&BASE);
    f->dt = fp16 ? CGT_FP16 : CGT_FP32;
    f->es = fp16 ? 2 : 4;
    f->ndy = ref_dy_elems(&f->base);
    f->nx = ref_x_elems(&f->base);
    f->ndw = ref_dw_elems(&f->base);
    /* the largest any valid call here needs: _s on 32 cores */
    f->ws_bytes = cgt_ws_bytes_s(&f->base, -1);
    cgt_rng_seed(&f->rng, seed);
    f->dy = malloc(f->ndy * f->es);
    f->x = malloc(f->nx * f->es);
    f->bias = malloc((size_t)f->base.output_channel_ * f->es);
    f->out = malloc(f->ndw * f->es);
    f->ws = malloc(f->ws_bytes);
    cgt_fill(&f->rng, f->dt, f->dy, f->ndy, 1.0);
    cgt_fill(&f->rng, f->dt, f->x, f->nx, 1.0);
    cgt_fill(&f->rng, f->dt, f->bias, (size_t)f->base.output_channel_, 1.0);
    f->sum_dy = cgt_fnv1a(f->dy, f->ndy * f->es);
    f->sum_x = cgt_fnv1a(f->x, f->nx * f->es);
    f->sum_b = cgt_fnv1a(f->bias, (size_t)f->base.output_channel_ * f->es);
}

static void fixture_free(fixture *f)
{
    free(f->dy);
    free(f->x);
    free(f->bias);
    free(f->out);
    free(f->ws);
}

/* Fresh random out_dw values and random workspace bytes. */
static void fixture_scramble(fixture *f)
{
    cgt_fill(&f->rng, f->dt, f->out, f->ndw, 1.0);
    cgt_fill_bytes(&f->rng, f->ws, f->ws_bytes);
}

/* Copies of out_dw and the workspace as they are, to compare with after a
 * call that must not write. */
typedef struct outputs_copy {
    unsigned char *out, *ws;
} outputs_copy;

static outputs_copy fixture_copy_outputs(const fixture *f)
{
    outputs_copy u = {malloc(f->ndw * f->es), malloc(f->ws_bytes)};
    memcpy(u.out, f->out, f->ndw * f->es);
    memcpy(u.ws, f->ws, f->ws_bytes);
    return u;
}

static void outputs_copy_free(outputs_copy *u)
{
    free(u->out);
    free(u->ws);
}

/* A valid host call of v with mask on f's buffers (`when`: the situation, for
 * the messages): CG_OK, and out_dw becomes out0 + dw + bias. */
static void expect_valid_host_call(fixture *f, const variant *v, ConvParameter *p, int mask,
                                   const char *when)
{
    cgt_expected ex;
    cgt_expected_compute(&ex, p, f->dt, f->dy, f->x, f->bias, f->out, 1, 0);
    cg_status last;
    const cg_status st = invoke(v, f->dy, f->x, f->out, f->bias, p, mask, &last);
    cr_expect_eq(st, CG_OK, "%s host on 0x%x %s: %d (%s)", v->name, (unsigned)mask, when, st,
                 cg_status_message(st));
    cr_expect(cg_last_error_detail()[0] == '\0', "%s host on 0x%x %s: detail '%s' after success",
              v->name, (unsigned)mask, when, cg_last_error_detail());
    cgt_result res = cgt_result_passing();
    cgt_expected_compare(&ex, p, f->dt, f->out, &res, "");
    cr_expect(res.ok, "%s: wrong result on 0x%x %s%s", v->name, (unsigned)mask, when, res.msg);
    cgt_expected_free(&ex);
}

/* The row's detail for v, exactly: it names the field or pointer and its value. */
static void expect_detail(const err_row *row, const variant *v, const char *where, int core,
                          const char *got)
{
    const char *want = v->fp16 && row->detail_hp ? row->detail_hp : row->detail;
    cr_expect(strcmp(got, want) == 0, "[%s] %s %s (core %d): detail\n  '%s', want\n  '%s'",
              row->name, v->name, where, core, got, want);
}

/* Runs one row on one variant, host (spmd == 0) or SPMD; all checks. */
static void run_row(const err_row *row, const variant *v, int spmd)
{
    fixture f;
    const uint64_t seed = cgt_mix64(cgt_base_seed() ^ cgt_fnv1a(row->name, strlen(row->name)) ^
                                    (uint64_t)(v - VARIANTS) * 131 ^ (uint64_t)spmd);
    fixture_init(&f, v->fp16, seed);
    fixture_scramble(&f);
    const char *where = spmd ? "SPMD" : "host";

    ConvParameter bad = f.base;
    bad.workspace_ = f.ws;
    row->mutate(&bad, f.es);
    const int launch = row->launch_mask ? row->launch_mask : 0x5;
    int mask = row->call_mask ? row->call_mask : (spmd ? launch : 0x3);
    if (row->flags & MASK_ZERO)
        mask = 0;

    outputs_copy before = fixture_copy_outputs(&f);
    const ConvParameter bad_copy = bad;

    const void *dy = (row->flags & NULL_DY) ? NULL : f.dy;
    const void *x = (row->flags & NULL_X) ? NULL : f.x;
    void *out = (row->flags & NULL_OUT) ? NULL : f.out;
    ConvParameter *pp = (row->flags & NULL_PARAM) ? NULL : &bad;

    /* -- the bad call -- */
    if (!spmd) {
        cg_status last;
        cg_status st = invoke(v, dy, x, out, f.bias, pp, mask, &last);
        cr_expect(st == row->want || (row->alt != CG_OK && st == row->alt),
                  "[%s] %s %s: status %d (%s), want %d (%s)", row->name, v->name, where, st,
                  cg_status_message(st), row->want, cg_status_message(row->want));
        cr_expect_eq(last, st, "[%s] %s %s: cg_last_status %d disagrees with the status %d",
                     row->name, v->name, where, last, st);
        expect_detail(row, v, where, -1, cg_last_error_detail());
    } else {
        spmd_call k;
        const int rc = launch_spmd_call(&k, launch, v, dy, x, f.bias, out, pp, mask);
        cr_assert_eq(rc, 0, "[%s] %s SPMD: core_mask_launch(0x%x) returned %d", row->name, v->name,
                     (unsigned)launch, rc);
        for (int id = 0; id < 32; ++id) {
            if (!(((unsigned)launch >> id) & 1u))
                continue;
            cr_expect_eq(atomic_load(&k.ran[id]), 1, "[%s] %s SPMD: core %d did not return once",
                         row->name, v->name, id);
            cr_expect(k.st[id] == row->want || (row->alt != CG_OK && k.st[id] == row->alt),
                      "[%s] %s SPMD: core %d got status %d (%s), want %d (%s)", row->name, v->name,
                      id, k.st[id], cg_status_message(k.st[id]), row->want,
                      cg_status_message(row->want));
            cr_expect_eq(k.last[id], k.st[id],
                         "[%s] %s SPMD: core %d cg_last_status %d vs status %d", row->name, v->name,
                         id, k.last[id], k.st[id]);
            expect_detail(row, v, where, id, k.detail[id]);
        }
    }
    const char *msg = cg_status_message(row->want);
    cr_expect(msg && msg[0], "[%s] empty message for %d", row->name, row->want);

    /* -- nothing touched -- */
    cr_expect(memcmp(before.out, f.out, f.ndw * f.es) == 0,
              "[%s] %s %s: out_dw was modified by a failing call", row->name, v->name, where);
    size_t first = f.ws_bytes;
    for (size_t i = 0; i < f.ws_bytes; ++i)
        if (((unsigned char *)f.ws)[i] != before.ws[i]) {
            first = i;
            break;
        }
    cr_expect(first == f.ws_bytes, "[%s] %s %s: workspace byte %zu modified by a failing call",
              row->name, v->name, where, first);
    cr_expect(memcmp(&bad_copy, &bad, sizeof bad) == 0,
              "[%s] %s %s: the ConvParameter was modified", row->name, v->name, where);
    cr_expect(cgt_fnv1a(f.dy, f.ndy * f.es) == f.sum_dy && cgt_fnv1a(f.x, f.nx * f.es) == f.sum_x &&
                  cgt_fnv1a(f.bias, (size_t)f.base.output_channel_ * f.es) == f.sum_b,
              "[%s] %s %s: an input was modified", row->name, v->name, where);

    /* -- the next valid call succeeds, right result -- */
    ConvParameter good = f.base;
    good.workspace_ = f.ws;
    const int good_mask = spmd ? (row->launch_mask ? row->launch_mask : 0x5) : 0x3;
    cgt_expected ex;
    cgt_expected_compute(&ex, &good, f.dt, f.dy, f.x, f.bias, f.out, 1, 0);
    if (!spmd || !v->is_s) {
        cg_status last;
        cg_status st = invoke(v, f.dy, f.x, f.out, f.bias, &good, good_mask, &last);
        cr_expect_eq(st, CG_OK, "[%s] %s %s: the valid call after the error failed: %d (%s)",
                     row->name, v->name, where, st, cg_status_message(st));
        cr_expect_eq(last, CG_OK, "[%s] %s %s: cg_last_status after a valid call is %d", row->name,
                     v->name, where, last);
        cr_expect(cg_last_error_detail()[0] == '\0', "[%s] %s %s: detail after a valid call: '%s'",
                  row->name, v->name, where, cg_last_error_detail());
    } else {
        spmd_call k;
        cr_assert_eq(launch_spmd_call(&k, good_mask, v, f.dy, f.x, f.bias, f.out, &good, good_mask),
                     0, "[%s] relaunch", row->name);
        for (int id = 0; id < 32; ++id)
            if (((unsigned)good_mask >> id) & 1u) {
                cr_expect_eq(k.st[id], CG_OK,
                             "[%s] %s SPMD: valid call after the error: core %d status %d (%s)",
                             row->name, v->name, id, k.st[id], cg_status_message(k.st[id]));
                cr_expect(k.detail[id][0] == '\0',
                          "[%s] %s SPMD: core %d detail after a valid call: '%s'", row->name,
                          v->name, id, k.detail[id]);
            }
    }
    cgt_result res = cgt_result_passing();
    cgt_expected_compare(&ex, &good, f.dt, f.out, &res, "");
    cr_expect(res.ok, "[%s] %s %s: wrong result of the valid call after the error (seed 0x%llx)%s",
              row->name, v->name, where, (unsigned long long)seed, res.msg);
    cgt_expected_free(&ex);
    outputs_copy_free(&before);
    fixture_free(&f);
}

static void run_rows(int spmd)
{
    for (int r = 0; r < N_ROWS; ++r) {
        const err_row *row = &ROWS[r];
        for (int vi = 0; vi < N_VARIANTS; ++vi) {
            const variant *v = &VARIANTS[vi];
            if ((row->flags & ONLY_S) && !v->is_s)
                continue;
            if ((row->flags & ONLY_SPMD) && !spmd)
                continue;
            if (spmd && !v->is_s)
                continue; /* _p inside a launch is the host case again */
            run_row(row, v, spmd);
        }
    }
}

Test(errors, every_row_host, .timeout = TEST_TIMEOUT)
{
    run_rows(0);
}

Test(errors, every_row_spmd, .timeout = TEST_TIMEOUT)
{
    run_rows(1);
}

/* ---- status messages --------------------------------------------------------- */

Test(errors, status_messages_non_empty_and_distinct)
{
    const cg_status codes[] = {CG_OK,
                               CG_ERR_NULL_POINTER,
                               CG_ERR_BAD_SIZE,
                               CG_ERR_BAD_GROUP,
                               CG_ERR_BAD_STRIDE,
                               CG_ERR_BAD_DILATION,
                               CG_ERR_BAD_PAD,
                               CG_ERR_BATCH_MISMATCH,
                               CG_ERR_BUFFER_TOO_SMALL,
                               CG_ERR_CORE_MASK,
                               CG_ERR_OVERFLOW,
                               CG_ERR_CORE_BUSY,
                               CG_ERR_NO_MEMORY,
                               CG_ERR_THREAD,
                               CG_ERR_BAD_LAYOUT,
                               CG_ERR_INSIDE_LAUNCH};
    const int n = (int)(sizeof codes / sizeof codes[0]);
    const char *unknown_msg = cg_status_message((cg_status)-16);
    for (int i = 0; i < n; ++i) {
        const char *a = cg_status_message(codes[i]);
        cr_assert(a != NULL && a[0] != '\0', "message of %d is empty", codes[i]);
        cr_expect(strcmp(a, unknown_msg) != 0, "code %d has the unknown status's message '%s'",
                  codes[i], a);
        for (int j = 0; j < i; ++j)
            cr_expect(strcmp(a, cg_status_message(codes[j])) != 0,
                      "codes %d and %d share the message '%s'", codes[i], codes[j], a);
    }
    cr_expect(strstr(cg_status_message(CG_ERR_INSIDE_LAUNCH), "ordinary thread") != NULL,
              "CG_ERR_INSIDE_LAUNCH's message says what to do: '%s'",
              cg_status_message(CG_ERR_INSIDE_LAUNCH));
    const int unknown[] = {1, 42, -16, -999, INT_MIN, INT_MAX};
    for (int i = 0; i < 6; ++i) {
        const char *m = cg_status_message((cg_status)unknown[i]);
        cr_expect(m != NULL && m[0] != '\0', "message of unknown status %d is empty", unknown[i]);
    }
}

/* cg_last_status() and cg_last_error_detail() are what the calling thread
 * expects after a call. */
static void expect_last(cg_status st, const char *detail, const char *when)
{
    cr_expect_eq(cg_last_status(), st, "%s: cg_last_status %d, want %d", when, cg_last_status(),
                 st);
    cr_expect(strcmp(cg_last_error_detail(), detail) == 0, "%s: detail '%s', want '%s'", when,
              cg_last_error_detail(), detail);
}

Test(errors, last_status_is_per_call)
{
    /* A failing call sets it; a valid call resets it to CG_OK and the detail to "". */
    fixture f;
    fixture_init(&f, 0, 99);
    fixture_scramble(&f);
    ConvParameter p = f.base;
    p.workspace_ = f.ws;
    p.stride_h_ = 0;
    fp_conv_grad_filter_p(f.dy, f.x, f.out, NULL, &p);
    expect_last(CG_ERR_BAD_STRIDE, "stride_h_=0 must be >= 1", "after a bad stride");
    p.stride_h_ = 1;
    fp_conv_grad_filter_p(f.dy, f.x, f.out, NULL, &p);
    expect_last(CG_OK, "", "after a valid call");
    p.pad_l_ = -1;
    fp_conv_grad_filter_s(f.dy, f.x, f.out, NULL, &p, 0x3);
    expect_last(CG_ERR_BAD_PAD, "pad_l_=-1 must be >= 0", "after a bad pad on _s");
    p.pad_l_ = 0;
    fp_conv_grad_filter_s(f.dy, f.x, f.out, NULL, &p, 0x3);
    expect_last(CG_OK, "", "after a valid _s call");
    /* the helpers record nothing */
    p.group_ = 5;
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 4), 0, "an invalid shape's bound");
    expect_last(CG_OK, "", "after a helper call on an invalid shape");
    fixture_free(&f);
}

/* Two threads fail differently at the same time: each keeps its own status
 * and detail; a thread that made no call has CG_OK and "". */
typedef struct thread_errors {
    fixture *f;
    pthread_barrier_t *both_failed, *both_checked;
    cg_status st;
    char detail[DETAIL_MAX];
} thread_errors;

static void *other_thread(void *arg)
{
    thread_errors *t = arg;
    ConvParameter p = t->f->base;
    p.workspace_ = t->f->ws;
    p.group_ = 4;
    cg_fp_conv_grad_filter_s(t->f->dy, t->f->x, t->f->out, NULL, &p, 0x3);
    pthread_barrier_wait(t->both_failed);
    t->st = cg_last_status();
    snprintf(t->detail, sizeof t->detail, "%s", cg_last_error_detail());
    pthread_barrier_wait(t->both_checked);
    return NULL;
}

static void *fresh_thread(void *arg)
{
    thread_errors *t = arg;
    t->st = cg_last_status();
    snprintf(t->detail, sizeof t->detail, "%s", cg_last_error_detail());
    return NULL;
}

Test(errors, detail_is_per_thread)
{
    fixture f;
    fixture_init(&f, 0, 98);
    pthread_barrier_t both_failed, both_checked;
    pthread_barrier_init(&both_failed, NULL, 2);
    pthread_barrier_init(&both_checked, NULL, 2);
    thread_errors other = {&f, &both_failed, &both_checked, CG_OK, ""};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, other_thread, &other), 0, "pthread_create");
    ConvParameter p = f.base;
    p.workspace_ = f.ws;
    fp_conv_grad_filter_p(f.dy, NULL, f.out, NULL, &p);
    pthread_barrier_wait(&both_failed);
    expect_last(CG_ERR_NULL_POINTER, "input_x is NULL", "this thread, while the other failed");
    pthread_barrier_wait(&both_checked);
    pthread_join(th, NULL);
    cr_expect_eq(other.st, CG_ERR_BAD_GROUP, "the other thread's status %d", other.st);
    cr_expect(strcmp(other.detail, "group_=4 does not divide output_channel_=6") == 0,
              "the other thread's detail '%s'", other.detail);
    expect_last(CG_ERR_NULL_POINTER, "input_x is NULL", "this thread, after the other ended");

    thread_errors fresh = {0};
    cr_assert_eq(pthread_create(&th, NULL, fresh_thread, &fresh), 0, "pthread_create");
    pthread_join(th, NULL);
    cr_expect(fresh.st == CG_OK && fresh.detail[0] == '\0',
              "a thread that made no call: status %d, detail '%s'", fresh.st, fresh.detail);
    pthread_barrier_destroy(&both_failed);
    pthread_barrier_destroy(&both_checked);
    fixture_free(&f);
}

/* ---- helpers: 0 for invalid parameters --------------------------------------- */

Test(errors, helpers_return_zero_for_invalid_params)
{
    int checked = 0;
    for (int r = 0; r < N_ROWS; ++r) {
        const err_row *row = &ROWS[r];
        if (!(row->flags & SHAPE_BAD))
            continue;
        for (int e = 2; e <= 4; e += 2) {
            ConvParameter p = cgt_param(&BASE);
            row->mutate(&p, (size_t)e);
            cr_expect_eq(cg_grad_filter_min_buffer_size(&p, (size_t)e), 0,
                         "[%s] cg_grad_filter_min_buffer_size(dtype %d) = %d, want 0", row->name, e,
                         cg_grad_filter_min_buffer_size(&p, (size_t)e));
            cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, (size_t)e), (size_t)0,
                         "[%s] cg_grad_filter_workspace_bytes(dtype %d) = %zu, want 0", row->name,
                         e, cg_grad_filter_workspace_bytes(&p, 0xf, (size_t)e));
            ++checked;
        }
    }
    cr_assert(checked > 20, "too few rows checked");

    /* the 32-core workspace overflow: the count is not representable */
    ConvParameter p = cgt_param(&BASE);
    ovf_ws32(&p, 4);
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, -1, 4), (size_t)0,
                 "32*dw_elems*4 overflows size_t: want 0, got %zu",
                 cg_grad_filter_workspace_bytes(&p, -1, 4));
    /* its lower bound (2^30) fits an int; a library may still call the shape
     * invalid (dw alone is 2^60 bytes, 32 partials exceed PTRDIFF_MAX) */
    const int mb = cg_grad_filter_min_buffer_size(&p, 4);
    cr_expect(mb == 0 || mb == 2 * (1 << 27) * 4, "lower bound of that shape: %d, want 2^30 or 0",
              mb);

    /* NULL, mask 0, dtype sizes other than 2 and 4 */
    p = cgt_param(&BASE);
    cr_expect_eq(cg_grad_filter_workspace_bytes(NULL, 0xf, 4), (size_t)0, "NULL param");
    cr_expect_eq(cg_grad_filter_min_buffer_size(NULL, 4), 0, "NULL param");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0, 4), (size_t)0, "core_mask 0");
    const size_t bad_sizes[] = {0, 1, 3, 8};
    for (int i = 0; i < 4; ++i) {
        cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, bad_sizes[i]), (size_t)0,
                     "dtype_size %zu", bad_sizes[i]);
        cr_expect_eq(cg_grad_filter_min_buffer_size(&p, bad_sizes[i]), 0, "dtype_size %zu",
                     bad_sizes[i]);
    }
    /* and valid ones are not 0, workspace_ NULL or not */
    p.workspace_ = NULL;
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 4), 96, "valid base, fp32");
    cr_expect_eq(cg_grad_filter_min_buffer_size(&p, 2), 48, "valid base, fp16");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, 0xf, 4), (size_t)0x400 * 4,
                 "valid base, 4 cores");
    cr_expect_eq(cg_grad_filter_workspace_bytes(&p, -1, 2), (size_t)32 * 72 * 4,
                 "valid base, 32 cores");
}

/* ---- a core of the mask busy in another launch ---------------------------- */

static atomic_int g_block_started, g_block_release;

static void blocking_entry(void *arg)
{
    (void)arg;
    atomic_store(&g_block_started, 1);
    while (!atomic_load(&g_block_release))
        usleep(200);
}

static void *blocker_thread(void *arg)
{
    int *rc = arg;
    *rc = core_mask_launch(0x2, blocking_entry, NULL);
    return NULL;
}

/* Host-mode _s on a mask whose core 1 is held by another launch: refused at
 * once with CG_ERR_CORE_BUSY (never a deadlock), nothing written; once the
 * core is free the same call succeeds. */
Test(errors, core_busy_in_another_launch, .timeout = 60.0)
{
    for (int vi = 0; vi < N_VARIANTS; ++vi) {
        const variant *v = &VARIANTS[vi];
        if (!v->is_s)
            continue;
        fixture f;
        fixture_init(&f, v->fp16, 0xb05e + (uint64_t)vi);
        fixture_scramble(&f);
        ConvParameter p = f.base;
        p.workspace_ = f.ws;
        outputs_copy before = fixture_copy_outputs(&f);

        atomic_store(&g_block_started, 0);
        atomic_store(&g_block_release, 0);
        pthread_t th;
        int blocker_rc = 1;
        cr_assert_eq(pthread_create(&th, NULL, blocker_thread, &blocker_rc), 0, "pthread_create");
        while (!atomic_load(&g_block_started))
            sched_yield();

        cg_status last;
        cg_status st = invoke(v, f.dy, f.x, f.out, f.bias, &p, 0x3, &last);
        cr_expect_eq(st, CG_ERR_CORE_BUSY,
                     "%s host on 0x3 while core 1 is busy: status %d (%s), want %d", v->name, st,
                     cg_status_message(st), CG_ERR_CORE_BUSY);
        cr_expect_eq(last, st, "%s: cg_last_status %d vs %d", v->name, last, st);
        const char *want = "core 1 of core_mask 0x00000003 is busy in another launch";
        cr_expect(strcmp(cg_last_error_detail(), want) == 0, "%s: detail '%s', want '%s'", v->name,
                  cg_last_error_detail(), want);
        cr_expect(memcmp(before.out, f.out, f.ndw * f.es) == 0,
                  "%s: out_dw modified by a refused call", v->name);
        cr_expect(memcmp(before.ws, f.ws, f.ws_bytes) == 0,
                  "%s: workspace modified by a refused call", v->name);
        /* a disjoint mask is not refused while the other launch runs */
        expect_valid_host_call(&f, v, &p, 0x1d,
                               "(disjoint from the busy core 1) during another launch");

        atomic_store(&g_block_release, 1);
        pthread_join(th, NULL);
        cr_expect_eq(blocker_rc, 0, "the blocking launch returned %d", blocker_rc);

        /* core 1 free again: the refused call now works */
        expect_valid_host_call(&f, v, &p, 0x3, "after the other launch ended");
        outputs_copy_free(&before);
        fixture_free(&f);
    }
}
