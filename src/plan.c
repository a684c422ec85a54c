/* SPDX-License-Identifier: MIT */
#include "plan.h"

#include <limits.h>
#include <stdatomic.h>

#include "trace.h"

/* Per-core im2col scratch of `_s` stays near this size (bytes). */
enum { SHARED_TILE_TARGET_BYTES = 2 << 20 };
/* Column units are 16 floats (a cache line) of dw; the sum is split by
 * columns from 16 units (8 a core on 2 cores) up. */
enum { COLUMN_CHUNK = 16, COLUMN_UNITS_LEAST = 16 };
/* A slice of the sum is at least this many rows: a few passes. */
enum { SLICE_LEAST_ROWS = 512 };
/* Where the sum is cut by slices rather than by columns, and how many, keeps
 * their partials within this (a reduction that reads from the caches). */
enum { SLICES_CHEAP_BYTES = 4 << 20 };

static int mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

const cg_words cg_operator_words = {
    .field = {"output_batch_", "input_batch_",   "input_h_",        "input_w_",    "output_h_",
              "output_w_",     "input_channel_", "output_channel_", "kernel_h_",   "kernel_w_",
              "group_",        "pad_l_",         "pad_u_",          "dilation_h_", "dilation_w_",
              "stride_h_",     "stride_w_",      "buffer_size_",    "pad_d_",      "pad_r_"},
    .x = "input_x",
    .dy = "input_dy",
    .dw = "out_dw",
    .has_buffer = 1};

static const cg_field SIZES[] = {
    CG_F_OUTPUT_BATCH, CG_F_INPUT_BATCH,   CG_F_INPUT_H,        CG_F_INPUT_W,  CG_F_OUTPUT_H,
    CG_F_OUTPUT_W,     CG_F_INPUT_CHANNEL, CG_F_OUTPUT_CHANNEL, CG_F_KERNEL_H, CG_F_KERNEL_W};
static const cg_field GROUP[] = {CG_F_GROUP};
static const cg_field STRIDES[] = {CG_F_STRIDE_H, CG_F_STRIDE_W};
static const cg_field DILATIONS[] = {CG_F_DILATION_H, CG_F_DILATION_W};
static const cg_field PADS[] = {CG_F_PAD_L, CG_F_PAD_U, CG_F_PAD_D, CG_F_PAD_R};
static const cg_field X_DIMS[] = {CG_F_INPUT_BATCH, CG_F_INPUT_H, CG_F_INPUT_W, CG_F_INPUT_CHANNEL};
static const cg_field DY_DIMS[] = {CG_F_OUTPUT_BATCH, CG_F_OUTPUT_H, CG_F_OUTPUT_W,
                                   CG_F_OUTPUT_CHANNEL};
#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

/* s naming the first of fields[0..n) whose value is under `least`, or CG_OK. */
static cg_status at_least(const int *v, const cg_words *w, const cg_field *fields, int n, int least,
                          cg_status s, cg_error *err)
{
    for (int i = 0; i < n; i++)
        if (v[fields[i]] < least)
            return cg_fail(err, s, "%s=%d must be >= %d", w->field[fields[i]], v[fields[i]], least);
    return CG_OK;
}

static cg_status divides(const int *v, const cg_words *w, cg_field channels, cg_error *err)
{
    if (v[channels] % v[CG_F_GROUP] == 0)
        return CG_OK;
    return cg_fail(err, CG_ERR_BAD_GROUP, "%s=%d does not divide %s=%d", w->field[CG_F_GROUP],
                   v[CG_F_GROUP], w->field[channels], v[channels]);
}

/* v: p's int fields by cg_field. The first failing rule wins, in this order. */
static cg_status check_fields(const int *v, const cg_words *w, cg_error *err)
{
    cg_status s = at_least(v, w, SIZES, COUNT(SIZES), 1, CG_ERR_BAD_SIZE, err);
    if (s == CG_OK && v[CG_F_INPUT_BATCH] != v[CG_F_OUTPUT_BATCH])
        s = cg_fail(err, CG_ERR_BATCH_MISMATCH, "%s=%d differs from %s=%d",
                    w->field[CG_F_INPUT_BATCH], v[CG_F_INPUT_BATCH], w->field[CG_F_OUTPUT_BATCH],
                    v[CG_F_OUTPUT_BATCH]);
    if (s == CG_OK)
        s = at_least(v, w, GROUP, 1, 1, CG_ERR_BAD_GROUP, err);
    if (s == CG_OK)
        s = divides(v, w, CG_F_INPUT_CHANNEL, err);
    if (s == CG_OK)
        s = divides(v, w, CG_F_OUTPUT_CHANNEL, err);
    if (s == CG_OK)
        s = at_least(v, w, STRIDES, COUNT(STRIDES), 1, CG_ERR_BAD_STRIDE, err);
    if (s == CG_OK)
        s = at_least(v, w, DILATIONS, COUNT(DILATIONS), 1, CG_ERR_BAD_DILATION, err);
    if (s == CG_OK)
        s = at_least(v, w, PADS, COUNT(PADS), 0, CG_ERR_BAD_PAD, err);
    return s;
}

/* The tensor's byte count, the product of its four dims times `bytes`, must
 * be addressable (fit ptrdiff_t). */
static cg_status bytes_fit(const int *v, const cg_words *w, const char *tensor,
                           const cg_field *dims, size_t bytes, cg_error *err)
{
    size_t n = bytes;
    int ok = 1;
    for (int i = 0; i < 4; i++)
        ok = ok && mul_ok(n, (size_t)v[dims[i]], &n);
    if (ok && n <= PTRDIFF_MAX)
        return CG_OK;
    return cg_fail(err, CG_ERR_OVERFLOW,
                   "the byte count of %s, %s=%d * %s=%d * %s=%d * %s=%d * %zu, exceeds PTRDIFF_MAX",
                   tensor, w->field[dims[0]], v[dims[0]], w->field[dims[1]], v[dims[1]],
                   w->field[dims[2]], v[dims[2]], w->field[dims[3]], v[dims[3]], bytes);
}

/* Every tensor's byte count must fit in size_t (and in ptrdiff_t, for
 * pointer arithmetic); the buffer lower bound must fit in int. */
static cg_status check_counts(const int *v, const cg_words *w, size_t dtype_size,
                              const cg_plan *plan, cg_error *err)
{
    cg_status s = bytes_fit(v, w, w->x, X_DIMS, sizeof(float), err);
    if (s == CG_OK)
        s = bytes_fit(v, w, w->dy, DY_DIMS, sizeof(float), err);
    if (s != CG_OK)
        return s;
    /* 32 partials of dw must be addressable: the most `_s` can ask for */
    size_t dw, bytes, bound;
    if (!(mul_ok((size_t)plan->cout, (size_t)plan->taps, &dw) &&
          mul_ok(dw, (size_t)plan->cin_g, &dw) && mul_ok(dw, 32 * sizeof(float), &bytes) &&
          bytes <= PTRDIFF_MAX))
        return cg_fail(err, CG_ERR_OVERFLOW,
                       "the byte count of 32 float partials of %s, %s=%d * %s=%d * %s=%d * "
                       "(%s=%d / %s=%d) * 32 * 4, exceeds PTRDIFF_MAX",
                       w->dw, w->field[CG_F_OUTPUT_CHANNEL], v[CG_F_OUTPUT_CHANNEL],
                       w->field[CG_F_KERNEL_H], v[CG_F_KERNEL_H], w->field[CG_F_KERNEL_W],
                       v[CG_F_KERNEL_W], w->field[CG_F_INPUT_CHANNEL], v[CG_F_INPUT_CHANNEL],
                       w->field[CG_F_GROUP], v[CG_F_GROUP]);
    if (mul_ok((size_t)plan->taps, (size_t)plan->cin_g, &bound) &&
        mul_ok(bound, 2 * dtype_size, &bound) && bound <= INT_MAX)
        return CG_OK;
    if (w->has_buffer)
        return cg_fail(err, CG_ERR_OVERFLOW,
                       "the lower bound of %s, 2*(%s=%d * %s=%d * %s=%d / %s=%d)*%zu, exceeds "
                       "INT_MAX",
                       w->field[CG_F_BUFFER_SIZE], w->field[CG_F_KERNEL_H], v[CG_F_KERNEL_H],
                       w->field[CG_F_KERNEL_W], v[CG_F_KERNEL_W], w->field[CG_F_INPUT_CHANNEL],
                       v[CG_F_INPUT_CHANNEL], w->field[CG_F_GROUP], v[CG_F_GROUP], dtype_size);
    /* the caller never set a buffer: say what is too large in its own terms */
    return cg_fail(err, CG_ERR_OVERFLOW,
                   "a filter of %s=%d * %s=%d * %s=%d / %s=%d = %lld weights per output channel "
                   "exceeds the limit %d",
                   w->field[CG_F_KERNEL_H], v[CG_F_KERNEL_H], w->field[CG_F_KERNEL_W],
                   v[CG_F_KERNEL_W], w->field[CG_F_INPUT_CHANNEL], v[CG_F_INPUT_CHANNEL],
                   w->field[CG_F_GROUP], v[CG_F_GROUP], (long long)(plan->taps * plan->cin_g),
                   (int)(INT_MAX / (2 * dtype_size)));
}

static cg_path choose_path(const ConvParameter *p)
{
    if (p->output_channel_ == p->group_ && p->input_channel_ == p->group_ && p->dilation_h_ == 1 &&
        p->dilation_w_ == 1)
        return CG_PATH_DEPTHWISE;
    if (p->kernel_h_ == 1 && p->kernel_w_ == 1 && p->pad_l_ == 0 && p->pad_u_ == 0 &&
        p->pad_d_ == 0 && p->pad_r_ == 0 && p->dilation_h_ == 1 && p->dilation_w_ == 1 &&
        p->stride_h_ == 1 && p->stride_w_ == 1 && p->group_ == 1)
        return CG_PATH_1X1;
    return CG_PATH_GENERAL;
}

cg_status cg_plan_check(const ConvParameter *p, size_t dtype_size, const cg_words *words,
                        cg_plan *plan, cg_error *err)
{
    const int v[CG_FIELDS] = {
        p->output_batch_, p->input_batch_,   p->input_h_,        p->input_w_,    p->output_h_,
        p->output_w_,     p->input_channel_, p->output_channel_, p->kernel_h_,   p->kernel_w_,
        p->group_,        p->pad_l_,         p->pad_u_,          p->dilation_h_, p->dilation_w_,
        p->stride_h_,     p->stride_w_,      p->buffer_size_,    p->pad_d_,      p->pad_r_};
    cg_status s = check_fields(v, words, err);
    if (s != CG_OK)
        return s;
    *plan = (cg_plan){.batch = p->output_batch_,
                      .in_h = p->input_h_,
                      .in_w = p->input_w_,
                      .out_h = p->output_h_,
                      .out_w = p->output_w_,
                      .cin = p->input_channel_,
                      .cout = p->output_channel_,
                      .kernel_h = p->kernel_h_,
                      .kernel_w = p->kernel_w_,
                      .groups = p->group_,
                      .pad_l = p->pad_l_,
                      .pad_u = p->pad_u_,
                      .dil_h = p->dilation_h_,
                      .dil_w = p->dilation_w_,
                      .stride_h = p->stride_h_,
                      .stride_w = p->stride_w_,
                      .dtype_size = dtype_size,
                      .path = choose_path(p),
                      .budget_floats = p->buffer_size_};
    plan->cin_g = plan->cin / plan->groups;
    plan->cout_g = plan->cout / plan->groups;
    plan->taps = plan->kernel_h * plan->kernel_w;
    s = check_counts(v, words, dtype_size, plan, err);
    if (s != CG_OK)
        return s;
    plan->row_len = plan->taps * plan->cin_g;
    plan->rows = plan->batch * plan->out_h * plan->out_w;
    plan->dw_elems = (size_t)plan->cout * (size_t)plan->row_len;
    const int64_t bound = 2 * plan->row_len * (int64_t)dtype_size;
    if ((int64_t)p->buffer_size_ < bound)
        return cg_fail(err, CG_ERR_BUFFER_TOO_SMALL,
                       "%s=%d is under the lower bound %lld = 2*(%d*%d*%d/%d)*%zu",
                       words->field[CG_F_BUFFER_SIZE], p->buffer_size_, (long long)bound,
                       p->kernel_h_, p->kernel_w_, p->input_channel_, p->group_, dtype_size);
    return CG_OK;
}

cg_status cg_plan_make(const ConvParameter *p, size_t dtype_size, cg_plan *plan)
{
    if (!p)
        return CG_ERR_NULL_POINTER;
    return cg_plan_check(p, dtype_size, &cg_operator_words, plan, NULL);
}

int cg_depthwise_kernels_take(const cg_plan *plan)
{
    return plan->cin_g == 1 &&
           (plan->cout_g == 1 || (plan->cout_g <= CG_DEPTHWISE_MOST_MULTIPLIER &&
                                  plan->groups >= CG_DEPTHWISE_LEAST_GROUPS));
}

const char *cg_path_name(cg_path path)
{
    switch (path) {
    case CG_PATH_DEPTHWISE:
        return "depthwise";
    case CG_PATH_1X1:
        return "1x1";
    case CG_PATH_GENERAL:
        break;
    }
    return "general";
}

void cg_split_range(int64_t total, int rank, int members, int64_t *first, int64_t *last)
{
    int64_t base = total / members, extra = total % members;
    *first = rank * base + (rank < extra ? rank : extra);
    *last = *first + base + (rank < extra ? 1 : 0);
}

/* Takes the front (or back) item left of range r into *at; 0 when none is. */
static int take_from(atomic_ullong *taken, int64_t total, int members, int r, int back, int64_t *at)
{
    int64_t lo, hi;
    cg_split_range(total, r, members, &lo, &hi);
    unsigned long long w = atomic_load_explicit(&taken[r], memory_order_relaxed);
    for (;;) {
        const int64_t front = (int64_t)(w >> 32), from_back = (int64_t)(w & 0xffffffffu);
        if (lo + front >= hi - from_back)
            return 0;
        const unsigned long long now = back ? w + 1 : w + (1ull << 32);
        if (atomic_compare_exchange_weak_explicit(&taken[r], &w, now, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *at = back ? hi - from_back - 1 : lo + front;
            return 1;
        }
    }
}

int cg_take_item(atomic_ullong *taken, int64_t total, int members, int rank, int64_t *at)
{
    if (take_from(taken, total, members, rank, 0, at))
        return 1;
    for (;;) {
        int fullest = -1;
        int64_t most = 0;
        for (int r = 0; r < members; r++) {
            int64_t lo, hi;
            cg_split_range(total, r, members, &lo, &hi);
            const unsigned long long w = atomic_load_explicit(&taken[r], memory_order_relaxed);
            const int64_t left = (hi - (int64_t)(w & 0xffffffffu)) - (lo + (int64_t)(w >> 32));
            if (left > most) {
                most = left;
                fullest = r;
            }
        }
        if (fullest < 0)
            return 0;
        if (take_from(taken, total, members, fullest, 1, at))
            return 1;
    }
}

int64_t cg_shared_tile_rows(int64_t tile_width, int64_t rows_of_core)
{
    int64_t t = SHARED_TILE_TARGET_BYTES / (int64_t)sizeof(float) / tile_width;
    if (t < 1)
        t = 1;
    return t < rows_of_core ? t : rows_of_core;
}

int cg_grouped_few(const cg_plan *plan)
{
    return plan->groups > 1 && plan->cin_g == plan->cout_g && plan->cin_g <= CG_GROUPED_MOST;
}

int cg_outer_rows_fit(const cg_plan *plan)
{
    /* measured against the packed GEMM (docs/design.md) on 1 and 3 input
     * channels a group only: the outer products win up to rows of 49 (7x7,
     * one channel) and 27 (3x3, three), not at 147 (7x7, three); rows under
     * 64 are whole column units, so a block is always whole groups */
    return plan->path == CG_PATH_GENERAL && !cg_grouped_few(plan) && plan->cin_g <= 3 &&
           plan->row_len < 4 * COLUMN_CHUNK && plan->row_len <= CG_OUTER_MOST_ROW &&
           plan->cout_g <= CG_OUTER_MOST_COUT;
}

int64_t cg_column_unit(const cg_plan *plan)
{
    const int whole = plan->row_len < 4 * COLUMN_CHUNK || cg_grouped_few(plan);
    return whole ? plan->row_len : COLUMN_CHUNK;
}

int64_t cg_column_units(const cg_plan *plan)
{
    int64_t unit = cg_column_unit(plan);
    return plan->groups * ((plan->row_len + unit - 1) / unit);
}

/* The largest power of two up to `most` and CG_MAX_SLICES (at least 1). */
static int64_t slices_up_to(int64_t most)
{
    int64_t slices = 1;
    while (2 * slices <= most && 2 * slices <= CG_MAX_SLICES)
        slices *= 2;
    return slices;
}

/* Slices of the sum of at least SLICE_LEAST_ROWS rows, their partials
 * within `budget` bytes. */
static int64_t slices_within(const cg_plan *plan, int64_t budget)
{
    const int64_t dw_bytes = (int64_t)(plan->dw_elems * sizeof(float));
    const int64_t by_rows = plan->rows / SLICE_LEAST_ROWS, by_bytes = budget / dw_bytes;
    return slices_up_to(by_rows < by_bytes ? by_rows : by_bytes);
}

int cg_split_by_columns(const cg_plan *plan)
{
    /* by slices wherever 4 or more fit the cheap budget: each core then
     * packs only its own rows, where by columns every core packs all of dy
     * and all the rows of x that its columns reach */
    return !cg_depthwise_kernels_take(plan) && cg_column_units(plan) >= COLUMN_UNITS_LEAST &&
           slices_within(plan, SLICES_CHEAP_BYTES) < 4;
}

int64_t cg_slices_of(int64_t units, int64_t least, int64_t bytes_each)
{
    int64_t most = units / (least > 0 ? least : 1);
    if (bytes_each > 0 && CG_SLICES_MOST_BYTES / bytes_each < most)
        most = CG_SLICES_MOST_BYTES / bytes_each;
    return slices_up_to(most);
}

int64_t cg_row_slices(const cg_plan *plan)
{
    /* as many as the cheap budget holds, but 4 where the rows and the
     * largest budget allow, so that a few cores always share the sum */
    const int64_t cheap = slices_within(plan, SLICES_CHEAP_BYTES);
    const int64_t most = slices_within(plan, CG_SLICES_MOST_BYTES);
    const int64_t least = most < 4 ? most : 4;
    return cheap > least ? cheap : least;
}

int64_t cg_sum_slices(const cg_plan *plan)
{
    return cg_split_by_columns(plan) ? 1 : cg_row_slices(plan);
}

/* 1 by default; 0 only while convgrad-bench measures what the fixed order
 * costs (cg_set_reproducible). Relaxed: it changes between calls only. */
static atomic_int reproducible = 1;

CG_API int cg_set_reproducible(int on)
{
    return atomic_exchange_explicit(&reproducible, on != 0, memory_order_relaxed);
}

int64_t cg_slices_on(int64_t fixed, int members)
{
    const int any_order = !atomic_load_explicit(&reproducible, memory_order_relaxed);
    return any_order && members < fixed ? members : fixed;
}

CG_API size_t cg_grad_filter_workspace_bytes(const ConvParameter *p, int core_mask,
                                             size_t dtype_size)
{
    cg_plan plan;
    if ((dtype_size != 2 && dtype_size != 4) || core_mask == 0 ||
        cg_plan_make(p, dtype_size, &plan) != CG_OK)
        return 0;
    /* cannot overflow: check_counts made 32 partials of dw addressable */
    size_t partials = (size_t)GetCoreNum(core_mask) * plan.dw_elems * sizeof(float);
    size_t staged = (size_t)p->buffer_size_ * sizeof(float);
    return partials > staged ? partials : staged;
}

CG_API int cg_grad_filter_min_buffer_size(const ConvParameter *p, size_t dtype_size)
{
    cg_plan plan;
    if ((dtype_size != 2 && dtype_size != 4) || !p)
        return 0;
    /* the lower bound must not depend on buffer_size_ itself being valid */
    ConvParameter q = *p;
    q.buffer_size_ = INT_MAX;
    if (cg_plan_make(&q, dtype_size, &plan) != CG_OK)
        return 0;
    return (int)(2 * plan.row_len * (int64_t)dtype_size);
}

void cg_plan_trace_label(const char *function, const cg_plan *p)
{
    if (!cg_trace_on)
        return;
    cg_trace_label("%s N%lld %lldx%lld C%lld->K%lld k%lldx%lld s%lldx%lld d%lldx%lld g%lld",
                   function, (long long)p->batch, (long long)p->in_h, (long long)p->in_w,
                   (long long)p->cin, (long long)p->cout, (long long)p->kernel_h,
                   (long long)p->kernel_w, (long long)p->stride_h, (long long)p->stride_w,
                   (long long)p->dil_h, (long long)p->dil_w, (long long)p->groups);
}
