/* SPDX-License-Identifier: MIT */
#include "plan.h"

#include <limits.h>

#include "status.h"

/* Per-core im2col scratch of `_s` stays near this size (bytes). */
enum { SHARED_TILE_TARGET_BYTES = 2 << 20 };
/* Columns split among cores in chunks of whole vectors of the GEMM kernels,
 * and only when each core gets enough chunks that one more or less matters
 * little (at most 1/8 of its work). */
enum { COLUMN_CHUNK = 16, COLUMN_UNITS_PER_CORE = 8 };

static int mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static int any_below(int limit, const int *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] < limit)
            return 1;
    return 0;
}

static cg_status check_fields(const ConvParameter *p)
{
    const int sizes[] = {p->output_batch_, p->input_batch_, p->input_h_,       p->input_w_,
                         p->output_h_,     p->output_w_,    p->input_channel_, p->output_channel_,
                         p->kernel_h_,     p->kernel_w_};
    const int pads[] = {p->pad_l_, p->pad_u_, p->pad_d_, p->pad_r_};
    if (any_below(1, sizes, (int)(sizeof sizes / sizeof *sizes)))
        return CG_ERR_BAD_SIZE;
    if (p->input_batch_ != p->output_batch_)
        return CG_ERR_BATCH_MISMATCH;
    if (p->group_ < 1 || p->input_channel_ % p->group_ || p->output_channel_ % p->group_)
        return CG_ERR_BAD_GROUP;
    if (p->stride_h_ < 1 || p->stride_w_ < 1)
        return CG_ERR_BAD_STRIDE;
    if (p->dilation_h_ < 1 || p->dilation_w_ < 1)
        return CG_ERR_BAD_DILATION;
    if (any_below(0, pads, 4))
        return CG_ERR_BAD_PAD;
    return CG_OK;
}

/* Every tensor's byte count must fit in size_t (and in ptrdiff_t, for
 * pointer arithmetic); the buffer lower bound must fit in int. */
static cg_status check_counts(const ConvParameter *p, size_t dtype_size, const cg_plan *plan)
{
    size_t x, dy, dw, bytes, bound;
    int ok = mul_ok((size_t)p->input_batch_, (size_t)p->input_h_, &x) &&
             mul_ok(x, (size_t)p->input_w_, &x) && mul_ok(x, (size_t)p->input_channel_, &x) &&
             mul_ok(x, sizeof(float), &bytes) && bytes <= PTRDIFF_MAX;
    ok = ok && mul_ok((size_t)p->output_batch_, (size_t)p->output_h_, &dy) &&
         mul_ok(dy, (size_t)p->output_w_, &dy) && mul_ok(dy, (size_t)p->output_channel_, &dy) &&
         mul_ok(dy, sizeof(float), &bytes) && bytes <= PTRDIFF_MAX;
    /* 32 partials of dw must be addressable: the most `_s` can ask for */
    ok = ok && mul_ok((size_t)plan->cout, (size_t)plan->taps, &dw) &&
         mul_ok(dw, (size_t)plan->cin_g, &dw) && mul_ok(dw, 32 * sizeof(float), &bytes) &&
         bytes <= PTRDIFF_MAX;
    ok = ok && mul_ok((size_t)plan->taps, (size_t)plan->cin_g, &bound) &&
         mul_ok(bound, 2 * dtype_size, &bound) && bound <= INT_MAX;
    return ok ? CG_OK : CG_ERR_OVERFLOW;
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

cg_status cg_plan_make(const ConvParameter *p, size_t dtype_size, cg_plan *plan)
{
    if (!p)
        return CG_ERR_NULL_POINTER;
    cg_status s = check_fields(p);
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
    s = check_counts(p, dtype_size, plan);
    if (s != CG_OK)
        return s;
    plan->row_len = plan->taps * plan->cin_g;
    plan->rows = plan->batch * plan->out_h * plan->out_w;
    plan->dw_elems = (size_t)plan->cout * (size_t)plan->row_len;
    if ((int64_t)p->buffer_size_ < 2 * plan->row_len * (int64_t)dtype_size)
        return CG_ERR_BUFFER_TOO_SMALL;
    return CG_OK;
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

int64_t cg_shared_tile_rows(int64_t tile_width, int64_t rows_of_core)
{
    int64_t t = SHARED_TILE_TARGET_BYTES / (int64_t)sizeof(float) / tile_width;
    if (t < 1)
        t = 1;
    return t < rows_of_core ? t : rows_of_core;
}

int64_t cg_column_unit(const cg_plan *plan)
{
    return plan->row_len >= 4 * COLUMN_CHUNK ? COLUMN_CHUNK : plan->row_len;
}

int64_t cg_column_units(const cg_plan *plan)
{
    int64_t unit = cg_column_unit(plan);
    return plan->groups * ((plan->row_len + unit - 1) / unit);
}

int cg_split_by_columns(const cg_plan *plan, int members)
{
    return plan->path != CG_PATH_DEPTHWISE && members > 1 &&
           cg_column_units(plan) >= COLUMN_UNITS_PER_CORE * members;
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
