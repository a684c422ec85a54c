/* SPDX-License-Identifier: MIT */
/* The four entry points: validation, then `_p` on the calling thread, or
 * `_s` split across the cores of core_mask (partials, barrier, reduction). */
#include <stdint.h>
#include <string.h>

#include "core_mask/core_mask_internal.h"
#include "fp16.h"
#include "kernels.h"
#include "plan.h"
#include "reduce/reduce.h"
#include "status.h"
#include "thread_scratch.h"

/* Elements the reduction and the epilogue handle at a time (on the stack). */
enum { CHUNK = 512 };
/* Reduction slices are whole cache lines of out_dw and of the partials. */
enum { REDUCE_UNIT = 16 };
/* Per-core depthwise accumulators of `_s` stay near this size (bytes). */
enum { DEPTHWISE_ACC_TARGET_BYTES = 256 << 10 };

typedef struct call {
    cg_plan plan;
    const void *dy, *x, *bias;
    void *out_dw;
    float *workspace;
    int core_mask, core_num;
    cg_status status; /* of the whole launch (host mode), set by logical core 0 */
    cg_error *err;    /* the caller's: logical core 0 says there what failed */
} call;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static float bias_of_row(const call *c, int64_t row)
{
    if (!c->bias)
        return 0.0f;
    if (c->plan.dtype_size == sizeof(float))
        return ((const float *)c->bias)[row];
    uint16_t h;
    memcpy(&h, (const unsigned char *)c->bias + 2 * row, sizeof h);
    return cg_half_to_float(h);
}

/* out_dw[first + i] += sum[i] + bias[row], i < n: the only writes to out_dw.
 * fp16 output is converted once, from float(out) + sum + bias. */
static void finish_into_out(const call *c, size_t first, const float *sum, size_t n)
{
    float add[CHUNK], old[CHUNK];
    const size_t row_len = (size_t)c->plan.row_len;
    for (size_t done = 0; done < n;) {
        size_t e = first + done, row = e / row_len;
        size_t m = n - done < CHUNK ? n - done : CHUNK;
        size_t row_end = (row + 1) * row_len; /* the chunk stops at a row's end */
        if (e + m > row_end)
            m = row_end - e;
        float b = bias_of_row(c, (int64_t)row);
        for (size_t i = 0; i < m; i++)
            add[i] = sum[done + i] + b;
        if (c->plan.dtype_size == sizeof(float)) {
            float *out = (float *)c->out_dw + e;
            for (size_t i = 0; i < m; i++)
                out[i] += add[i];
        } else {
            unsigned char *out = (unsigned char *)c->out_dw + 2 * e;
            cg_halves_to_floats(old, out, m);
            for (size_t i = 0; i < m; i++)
                old[i] += add[i];
            cg_floats_to_halves(out, old, m);
        }
        done += m;
    }
}

static cg_status validate(const void *dy, const void *x, const void *out_dw, const ConvParameter *p,
                          size_t dtype_size, cg_plan *plan, cg_error *err)
{
    static const char *const names[] = {"input_dy", "input_x", "out_dw", "conv_param",
                                        "conv_param->workspace_"};
    const void *const ptrs[] = {dy, x, out_dw, p, p ? p->workspace_ : NULL};
    cg_status s = cg_require(ptrs, names, 5, err);
    return s != CG_OK ? s : cg_plan_check(p, dtype_size, &cg_operator_words, plan, err);
}

/* ---- `_s`: one core's share ------------------------------------------ */

static int64_t depthwise_block(const cg_plan *p, int64_t budget_floats)
{
    int64_t block = budget_floats / p->taps;
    block = min64(block, min64(p->cout, CG_DEPTHWISE_MAX_BLOCK));
    return block < 1 ? 1 : block;
}

typedef struct shared_share {
    int by_columns;      /* see cg_split_by_columns */
    int64_t first, last; /* rows of the sum, or column units */
    int64_t tile_rows;   /* general path: rows of the sum a pass */
    int64_t block;       /* depthwise path: channels per block */
    size_t scratch_bytes;
} shared_share;

/* The next block of dw among this core's column units [*unit, last): part of
 * one group's rows, or whole groups when a unit is a whole group. */
static cg_dw_block next_column_block(const cg_plan *p, int64_t *unit, int64_t last)
{
    const int64_t width = cg_column_unit(p), per_group = (p->row_len + width - 1) / width;
    const int64_t g = *unit / per_group, chunk = *unit % per_group;
    if (per_group == 1) {
        cg_dw_block whole = {g, g + (last - *unit), 0, p->cout_g, 0, p->row_len};
        *unit = last;
        return whole;
    }
    const int64_t end = min64(per_group, chunk + (last - *unit));
    cg_dw_block part = {g, g + 1, 0, p->cout_g, chunk * width, min64(p->row_len, end * width)};
    *unit += end - chunk;
    return part;
}

static shared_share plan_column_share(const cg_plan *p, int rank, int members)
{
    shared_share s = {.by_columns = 1};
    cg_split_range(cg_column_units(p), rank, members, &s.first, &s.last);
    int64_t scratch = 0;
    for (int64_t u = s.first; u < s.last;) { /* the widest block sets the passes */
        cg_dw_block b = next_column_block(p, &u, s.last);
        s.tile_rows = max64(s.tile_rows, cg_general_rows_per_pass(&b, p->rows));
    }
    for (int64_t u = s.first; u < s.last;) {
        cg_dw_block b = next_column_block(p, &u, s.last);
        scratch = max64(scratch, cg_general_scratch_floats(p, s.tile_rows, &b));
    }
    s.scratch_bytes = (size_t)scratch * sizeof(float);
    return s;
}

static shared_share plan_share(const cg_plan *p, int rank, int members)
{
    if (cg_split_by_columns(p, members))
        return plan_column_share(p, rank, members);
    shared_share s = {0};
    cg_split_range(p->rows, rank, members, &s.first, &s.last);
    if (s.first == s.last)
        return s;
    if (p->path == CG_PATH_DEPTHWISE) {
        s.block = depthwise_block(p, DEPTHWISE_ACC_TARGET_BYTES / (int64_t)sizeof(float));
        s.scratch_bytes = (size_t)(p->taps * s.block) * sizeof(float);
    } else {
        const cg_dw_block all = {0, p->groups, 0, p->cout_g, 0, p->row_len};
        s.tile_rows = cg_general_rows_per_pass(&all, s.last - s.first);
        s.scratch_bytes = (size_t)cg_general_scratch_floats(p, s.tile_rows, &all) * sizeof(float);
    }
    return s;
}

static void compute_partial(const call *c, const shared_share *s, float *scratch, float *partial)
{
    const cg_plan *p = &c->plan;
    if (p->path == CG_PATH_DEPTHWISE) {
        for (int64_t c0 = 0; c0 < p->cout; c0 += s->block) {
            int64_t c1 = min64(p->cout, c0 + s->block);
            cg_depthwise_rows(p, c->dy, c->x, c0, c1, s->first, s->last, scratch,
                              partial + c0 * p->taps);
        }
        return;
    }
    const cg_dw_block all = {0, p->groups, 0, p->cout_g, 0, p->row_len};
    cg_general_rows(p, c->dy, c->x, &all, s->first, s->last, s->tile_rows, scratch, 0.0f, partial);
}

/* out_dw itself where the general path may add its sums straight into it
 * (fp32, no bias: what finish_into_out would do), else NULL: staging the
 * sums and adding them in a second pass costs a read and a write of all of
 * dw, which for a dw larger than L2 is 5-10% of the call. */
static float *direct_out(const call *c)
{
    const int direct =
        c->plan.dtype_size == sizeof(float) && c->bias == NULL && c->plan.path != CG_PATH_DEPTHWISE;
    return direct ? (float *)c->out_dw : NULL;
}

/* By columns: this core's blocks of dw over every row of the sum, staged in
 * its own partial at their places in dw, then finished into out_dw (or
 * added straight into it: direct_out). */
static void compute_and_finish_columns(const call *c, const shared_share *s, float *scratch,
                                       float *partial)
{
    const cg_plan *p = &c->plan;
    float *direct = direct_out(c);
    for (int64_t u = s->first; u < s->last;) {
        cg_dw_block b = next_column_block(p, &u, s->last);
        if (direct) {
            cg_general_rows(p, c->dy, c->x, &b, 0, p->rows, s->tile_rows, scratch, 1.0f,
                            direct + b.group_first * p->cout_g * p->row_len);
            continue;
        }
        cg_general_rows(p, c->dy, c->x, &b, 0, p->rows, s->tile_rows, scratch, 0.0f,
                        partial + b.group_first * p->cout_g * p->row_len);
        for (int64_t row = b.group_first * p->cout_g; row < b.group_last * p->cout_g; row++) {
            size_t e = (size_t)(row * p->row_len + b.col_first);
            finish_into_out(c, e, partial + e, (size_t)(b.col_last - b.col_first));
        }
    }
}

/* Sums the partials of the cores that had rows into this core's slice of
 * out_dw, in core order. */
static void reduce_slice(const call *c, int rank)
{
    const cg_plan *p = &c->plan;
    int parts = (int)min64(c->core_num, p->rows); /* cores past `rows` had no rows */
    const float *part[32];
    for (int i = 0; i < parts; i++)
        part[i] = c->workspace + (size_t)i * p->dw_elems;
    size_t begin, end;
    float sum[CHUNK];
    cg_reduce_slice(p->dw_elems, REDUCE_UNIT, rank, c->core_num, &begin, &end);
    for (size_t e = begin; e < end; e += CHUNK) {
        size_t stop = end - e < CHUNK ? end : e + CHUNK;
        cg_reduce_partials(sum, part, parts, e, stop);
        finish_into_out(c, e, sum, stop - e);
    }
}

static cg_status shared_core(const call *c, int rank, cg_error *err)
{
    const cg_plan *p = &c->plan;
    shared_share s = plan_share(p, rank, c->core_num);
    void *mem;
    /* every core agrees before anything is written */
    if (cm_scratch_all(c->core_mask, s.scratch_bytes, &mem, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    float *scratch = mem;
    float *partial = c->workspace + (size_t)rank * p->dw_elems;
    if (s.by_columns) {
        compute_and_finish_columns(c, &s, scratch, partial);
    } else if (c->core_num == 1 && direct_out(c)) { /* no partial to reduce */
        const cg_dw_block all = {0, p->groups, 0, p->cout_g, 0, p->row_len};
        cg_general_rows(p, c->dy, c->x, &all, s.first, s.last, s.tile_rows, scratch, 1.0f,
                        direct_out(c));
    } else {
        if (s.first < s.last)
            compute_partial(c, &s, scratch, partial);
        cm_bar_all(c->core_mask, 1); /* all partials written */
        reduce_slice(c, rank);
    }
    cm_bar_all(c->core_mask, 1); /* out_dw complete, partials free to reuse */
    return CG_OK;
}

static void shared_entry(void *arg)
{
    call *c = arg;
    int rank = GetLogicCoreId(c->core_mask, get_core_id());
    cg_error mine; /* the other cores' copy of the same error */
    cg_status s = shared_core(c, rank, rank == 0 ? c->err : &mine);
    if (rank == 0)
        c->status = s;
}

static cg_status grad_filter_shared(const void *dy, const void *x, void *out_dw, const void *bias,
                                    const ConvParameter *p, int core_mask, size_t dtype_size,
                                    cg_error *err)
{
    call c = {.dy = dy, .x = x, .bias = bias, .out_dw = out_dw, .core_mask = core_mask, .err = err};
    cg_status s = validate(dy, x, out_dw, p, dtype_size, &c.plan, err);
    if (s != CG_OK)
        return s;
    if (core_mask == 0)
        return cg_fail(err, CG_ERR_CORE_MASK, "core_mask is 0");
    c.workspace = p->workspace_;
    c.core_num = GetCoreNum(core_mask);
    int id = get_core_id();
    if (id < 0) { /* host mode: run the cores ourselves */
        s = cm_run(core_mask, shared_entry, &c, err);
        return s != CG_OK ? s : c.status;
    }
    /* SPMD mode: every core of core_mask is already here */
    const uint32_t launch = (uint32_t)cm_launch_mask(), outside = (uint32_t)core_mask & ~launch;
    if (outside)
        return cg_fail(err, CG_ERR_CORE_MASK,
                       "core_mask 0x%08x names cores 0x%08x outside the calling launch's mask "
                       "0x%08x",
                       (unsigned)core_mask, (unsigned)outside, (unsigned)launch);
    if (!((uint32_t)core_mask & (1u << id)))
        return CG_OK; /* this core is not one of core_mask's */
    return shared_core(&c, GetLogicCoreId(core_mask, id), err);
}

CG_API size_t cg_grad_filter_scratch_bytes(const ConvParameter *p, int core_mask)
{
    size_t most = 0;
    int members = GetCoreNum(core_mask);
    for (size_t dtype_size = 2; dtype_size <= 4; dtype_size += 2) {
        cg_plan plan;
        if (core_mask == 0 || cg_plan_make(p, dtype_size, &plan) != CG_OK)
            return 0;
        for (int rank = 0; rank < members; rank++) {
            size_t bytes = plan_share(&plan, rank, members).scratch_bytes;
            most = bytes > most ? bytes : most;
        }
    }
    return most;
}

/* ---- `_p`: one core, everything staged inside buffer_size_ floats ------ */

static void grad_filter_private_depthwise(const call *c)
{
    const cg_plan *p = &c->plan;
    int64_t block = depthwise_block(p, p->budget_floats / 2);
    float *acc = c->workspace, *sums = c->workspace + p->taps * block;
    for (int64_t c0 = 0; c0 < p->cout; c0 += block) {
        int64_t c1 = min64(p->cout, c0 + block);
        cg_depthwise_rows(p, c->dy, c->x, c0, c1, 0, p->rows, acc, sums);
        finish_into_out(c, (size_t)(c0 * p->taps), sums, (size_t)((c1 - c0) * p->taps));
    }
}

/* The float sums of a block of output channels in the workspace (as many
 * as buffer_size_ floats hold), or straight in out_dw (direct_out); the
 * packing in the thread's own space. */
static cg_status grad_filter_private_general(const call *c, cg_error *err)
{
    const cg_plan *p = &c->plan;
    float *direct = direct_out(c);
    const int64_t block = direct ? p->cout_g : min64(p->cout_g, p->budget_floats / p->row_len);
    /* whole groups a pass, as many as the budget holds */
    const int64_t group_floats = p->cout_g * p->row_len;
    const int64_t together = direct             ? p->groups
                             : block < p->cout_g ? 1
                                                 : min64(p->groups, p->budget_floats / group_floats);
    const cg_dw_block widest = {0, together, 0, block, 0, p->row_len};
    const int64_t kc = cg_general_rows_per_pass(&widest, p->rows);
    const size_t floats = (size_t)cg_general_scratch_floats(p, kc, &widest);
    float *acc = c->workspace, *scratch = floats ? cg_thread_floats(floats) : NULL;
    if (floats && scratch == NULL)
        return cg_fail(err, CG_ERR_NO_MEMORY, "could not allocate %zu bytes of packing space",
                       floats * sizeof(float));
    if (direct) {
        cg_general_rows(p, c->dy, c->x, &widest, 0, p->rows, kc, scratch, 1.0f, direct);
        return CG_OK;
    }
    for (int64_t g = 0; g < p->groups; g += together)
        for (int64_t co0 = 0; co0 < p->cout_g; co0 += block) {
            const int64_t co1 = min64(p->cout_g, co0 + block), g1 = min64(p->groups, g + together);
            const cg_dw_block blk = {g, g1, co0, co1, 0, p->row_len};
            cg_general_rows(p, c->dy, c->x, &blk, 0, p->rows, kc, scratch, 0.0f, acc);
            finish_into_out(c, (size_t)((g * p->cout_g + co0) * p->row_len), acc,
                            (size_t)((g1 - g) * (co1 - co0) * p->row_len));
        }
    return CG_OK;
}

static cg_status grad_filter_private(const void *dy, const void *x, void *out_dw, const void *bias,
                                     const ConvParameter *p, size_t dtype_size, cg_error *err)
{
    call c = {.dy = dy, .x = x, .bias = bias, .out_dw = out_dw, .core_num = 1};
    cg_status s = validate(dy, x, out_dw, p, dtype_size, &c.plan, err);
    if (s != CG_OK)
        return s;
    c.workspace = p->workspace_;
    if (c.plan.path != CG_PATH_DEPTHWISE)
        return grad_filter_private_general(&c, err);
    grad_filter_private_depthwise(&c);
    return CG_OK;
}

/* ---- Public entry points ---------------------------------------------- */

static cg_status recorded_shared(const void *dy, const void *x, void *out_dw, const void *bias,
                                 const ConvParameter *p, int core_mask, size_t dtype_size)
{
    cg_error err;
    return cg_record(grad_filter_shared(dy, x, out_dw, bias, p, core_mask, dtype_size, &err), &err);
}

static cg_status recorded_private(const void *dy, const void *x, void *out_dw, const void *bias,
                                  const ConvParameter *p, size_t dtype_size)
{
    cg_error err;
    return cg_record(grad_filter_private(dy, x, out_dw, bias, p, dtype_size, &err), &err);
}

CG_API cg_status cg_fp_conv_grad_filter_s(const float *input_dy, const float *input_x,
                                          float *out_dw, const float *bias,
                                          const ConvParameter *conv_param, int core_mask)
{
    return recorded_shared(input_dy, input_x, out_dw, bias, conv_param, core_mask, sizeof(float));
}

CG_API cg_status cg_hp_conv_grad_filter_s(const float16 *input_dy, const float16 *input_x,
                                          float16 *out_dw, const float16 *bias,
                                          const ConvParameter *conv_param, int core_mask)
{
    return recorded_shared(input_dy, input_x, out_dw, bias, conv_param, core_mask, sizeof(float16));
}

CG_API cg_status cg_fp_conv_grad_filter_p(const float *input_dy, const float *input_x,
                                          float *out_dw, const float *bias,
                                          const ConvParameter *conv_param)
{
    return recorded_private(input_dy, input_x, out_dw, bias, conv_param, sizeof(float));
}

CG_API cg_status cg_hp_conv_grad_filter_p(const float16 *input_dy, const float16 *input_x,
                                          float16 *out_dw, const float16 *bias,
                                          const ConvParameter *conv_param)
{
    return recorded_private(input_dy, input_x, out_dw, bias, conv_param, sizeof(float16));
}

CG_API void fp_conv_grad_filter_s(float *input_dy, float *input_x, float *out_dw, float *bias,
                                  ConvParameter *conv_param, int core_mask)
{
    cg_fp_conv_grad_filter_s(input_dy, input_x, out_dw, bias, conv_param, core_mask);
}

CG_API void hp_conv_grad_filter_s(float16 *input_dy, float16 *input_x, float16 *out_dw,
                                  float16 *bias, ConvParameter *conv_param, int core_mask)
{
    cg_hp_conv_grad_filter_s(input_dy, input_x, out_dw, bias, conv_param, core_mask);
}

CG_API void fp_conv_grad_filter_p(float *input_dy, float *input_x, float *out_dw, float *bias,
                                  ConvParameter *conv_param)
{
    cg_fp_conv_grad_filter_p(input_dy, input_x, out_dw, bias, conv_param);
}

CG_API void hp_conv_grad_filter_p(float16 *input_dy, float16 *input_x, float16 *out_dw,
                                  float16 *bias, ConvParameter *conv_param)
{
    cg_hp_conv_grad_filter_p(input_dy, input_x, out_dw, bias, conv_param);
}
