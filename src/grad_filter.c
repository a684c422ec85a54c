/* SPDX-License-Identifier: MIT */
/* The four entry points: validation, then `_p` on the calling thread, or
 * `_s` split across the cores of core_mask (partials, barrier, reduction). */
#include <stdint.h>
#include <string.h>

#include "bias.h"
#include "core_mask/core_mask_internal.h"
#include "fp16.h"
#include "gemm/gemm.h"
#include "grad_filter.h"
#include "kernels.h"
#include "plan.h"
#include "reduce/reduce.h"
#include "status.h"
#include "thread_scratch.h"
#include "trace.h"

/* Elements the reduction and the epilogue handle at a time (on the stack). */
enum { CHUNK = 512 };
/* Reduction slices are whole cache lines of out_dw and of the partials. */
enum { REDUCE_UNIT = 16 };
/* Per-core depthwise accumulators of `_s` stay near this size (bytes). */
enum { DEPTHWISE_ACC_TARGET_BYTES = 256 << 10 };

/* The operator's call: the shared part, and how the launch went. */
typedef struct call {
    cg_weights_call w;
    cg_status status;          /* of the whole launch (host mode), set by logical core 0 */
    cg_error *err;             /* the caller's: logical core 0 says there what failed */
    atomic_llong slices_taken; /* host mode: w.slices_taken */
    atomic_ullong column_ranges[2 * CG_CORES_MOST]; /* host mode: w.column_ranges */
    const float *partials[CG_MAX_SLICES]; /* host mode: w.partials */
} call;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static float bias_of_row(const cg_weights_call *c, int64_t row)
{
    if (!c->bias)
        return 0.0f;
    if (c->plan.dtype_size == sizeof(float))
        return ((const float *)c->bias)[row];
    uint16_t h;
    memcpy(&h, (const unsigned char *)c->bias + 2 * row, sizeof h);
    return cg_half_to_float(h);
}

/* out_dw[first + i] += sum[i] + bias[row] (overwrite: =), i < n: the only
 * writes to out_dw. fp16 output is converted once, from float(out) + sum +
 * bias. */
static void finish_into_out(const cg_weights_call *c, size_t first, const float *sum, size_t n)
{
    float old[CHUNK];
    const size_t row_len = (size_t)c->plan.row_len;
    for (size_t done = 0; done < n;) {
        size_t e = first + done, row = e / row_len;
        size_t m = n - done < CHUNK ? n - done : CHUNK;
        size_t row_end = (row + 1) * row_len; /* the chunk stops at a row's end */
        if (e + m > row_end)
            m = row_end - e;
        const float b = bias_of_row(c, (int64_t)row), *add = sum + done;
        if (c->plan.dtype_size == sizeof(float)) {
            float *out = (float *)c->out_dw + e;
            for (size_t i = 0; i < m; i++)
                out[i] = c->overwrite ? add[i] + b : out[i] + (add[i] + b);
        } else {
            unsigned char *out = (unsigned char *)c->out_dw + 2 * e;
            cg_halves_to_floats(old, out, m);
            for (size_t i = 0; i < m; i++)
                old[i] += add[i] + b;
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

/* ---- the shares of the sum (plan.h: cut by the shape alone) ---------- */

static cg_dw_block whole_dw(const cg_plan *p)
{
    return (cg_dw_block){0, p->groups, 0, p->cout_g, 0, p->row_len};
}

/* Channels a depthwise block (its accumulators near the target size),
 * whole groups. */
static int64_t depthwise_block(const cg_plan *p)
{
    int64_t block = DEPTHWISE_ACC_TARGET_BYTES / (int64_t)sizeof(float) / p->taps;
    block = min64(block, min64(p->cout, CG_DEPTHWISE_MAX_BLOCK)) / p->cout_g * p->cout_g;
    return block < p->cout_g ? p->cout_g : block;
}

/* Rows a pass of the general path: one number for the shape, whichever
 * core runs which part, since a pass is a step of every sum's order. */
static int64_t pass_rows(const cg_weights_call *c, int64_t slices)
{
    const cg_plan *p = &c->plan;
    const int64_t slice_rows = (p->rows + slices - 1) / slices;
    if (c->kc_forced > 0)
        return min64(c->kc_forced, slice_rows);
    const cg_dw_block all = whole_dw(p);
    return cg_general_rows_per_pass(&all, slice_rows);
}

/* out_dw itself where the general path may add its sums straight into it
 * (fp32, no bias: what finish_into_out would do), else NULL: staging the
 * sums and adding them in a second pass costs a read and a write of all of
 * dw, which for a dw larger than L2 is 5-10% of the call. */
static float *direct_out(const cg_weights_call *c)
{
    const int direct = c->plan.dtype_size == sizeof(float) && c->bias == NULL &&
                       !cg_depthwise_kernels_take(&c->plan);
    return direct ? (float *)c->out_dw : NULL;
}

/* The beta of a sum added straight into out_dw. */
static float direct_beta(const cg_weights_call *c)
{
    return c->overwrite ? 0.0f : 1.0f;
}

typedef struct share {
    int by_columns;
    int64_t slices;                            /* of the whole sum (1 when by columns) */
    int64_t first, last;                       /* this core's column units, or slices */
    int in_team;                               /* by slices, one slice shared by several cores */
    int holder;                                /* in a team: the core holding its partial */
    int64_t team_units_first, team_units_last; /* in a team: its column units */
    int64_t kc;                                /* general path: rows a pass */
    int64_t held;        /* by slices, not in a team: the partials it has room for */
    int64_t pack_floats; /* the packing's (or depthwise accumulators') scratch */
    int64_t part_floats; /* then this core's slices' partials */
    int64_t db_doubles;  /* then, from a cache line, the db sums of the slices it sums */
} share;

/* The next block of dw among column units [*unit, last): part of one
 * group's row, or whole groups when a unit is a whole group. */
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

/* Packing scratch for the blocks of column units [first, last). */
static int64_t columns_pack_floats(const cg_plan *p, int64_t kc, int64_t first, int64_t last)
{
    int64_t most = 0;
    for (int64_t u = first; u < last;) {
        cg_dw_block b = next_column_block(p, &u, last);
        most = max64(most, cg_general_scratch_floats(p, kc, &b));
    }
    return most;
}

/* The slices [s->first, s->last) need no partial when there is one slice
 * and its sums go straight into out_dw. */
static int whole_into_out(const cg_weights_call *c, const share *s)
{
    return s->slices == 1 && direct_out(c);
}

/* By slices, the scratch ahead of a core's partials: the packing space (or
 * the depthwise accumulators: of a block, or of every block where a slice
 * goes in pieces), the same on every core that has slices. */
static int64_t slices_pack_floats(const cg_weights_call *c, int64_t kc)
{
    const cg_plan *p = &c->plan;
    const cg_dw_block all = whole_dw(p);
    if (!cg_depthwise_kernels_take(p))
        return cg_general_scratch_floats(p, kc, &all);
    return p->taps * (c->after_piece ? p->cout : depthwise_block(p));
}

/* By slices with more cores than slices (general path): slice i's team is
 * the cores cg_split_range(members, i, slices) gives, which split its
 * column units; the team's first core holds the slice's partial. A column
 * cut changes no element's sum, so the bits stay those of a core a slice. */
static int slices_in_teams(const cg_plan *p, int64_t slices, int members)
{
    return members > slices && !cg_depthwise_kernels_take(p);
}

/* The first core of slice i's team. */
static int team_holder(int64_t slices, int members, int64_t i)
{
    int64_t first, last;
    cg_split_range(members, (int)i, (int)slices, &first, &last);
    return (int)first;
}

static void join_team(const cg_plan *p, int rank, int members, share *s)
{
    for (int64_t i = 0; i < s->slices; i++) {
        int64_t first, last;
        cg_split_range(members, (int)i, (int)s->slices, &first, &last);
        if (rank >= first && rank < last) {
            s->first = i;
            s->last = i + 1;
            s->in_team = 1;
            s->holder = (int)first;
            cg_split_range(cg_column_units(p), (int)(rank - first), (int)(last - first),
                           &s->team_units_first, &s->team_units_last);
            return;
        }
    }
}

/* Whether the cores take the slices in turn (whichever is free takes the
 * next: a core on a CPU the host lends less, or a smaller core, leaves more
 * to the others, where equal ranges ran a 2-core call at the slower one's
 * pace): by slices, each summed into a partial (not one slice straight into
 * out_dw), not in teams, where the caller set slices_taken (host mode, no
 * more cores than CPUs). The partials are added in slice order whoever
 * summed them, so the bits do not change. */
static int slices_in_turn(const cg_weights_call *c, const share *s)
{
    return c->slices_taken && !s->by_columns && !s->in_team && s->slices > 1;
}

/* Partials a core has room for where the slices are taken in turn: half as
 * many again as an equal share, so that a faster core can take a third more
 * than its share (all of them on 2 cores up to 3 slices). */
static int64_t turn_held(int64_t slices, int members)
{
    const int64_t even = (slices + members - 1) / members;
    return min64(slices, (3 * even + 1) / 2);
}

/* By columns, where the caller set column_ranges (host mode, no more
 * cores than CPUs) and the packed path takes them
 * (cg_general_rows_take_turns): the cores share the micro-panels pass by
 * pass, a barrier after each (a column's next pass may run on another core:
 * out_dw, or the staging in the workspace's first slot, holds its sum so
 * far; staged sums are finished into out_dw after the last pass, each core
 * a range of them). Each core starts on
 * its own equal range from the front; once it is done it takes from the
 * back of the range with most left. So a core whose CPU runs slower (the
 * host lending it less, a smaller core) leaves panels to the others, where
 * equal ranges ran the call at its pace; each keeps mostly the same columns
 * from pass to pass (its part of out_dw stays in its cache); and dy is
 * packed once a pass, as before, where runs of columns taken in turn over
 * every row packed it once a run. Each element's sum is the same whoever
 * computes its passes: the bits do not change. Else each core has its
 * equal range of column units, [first, last). */
static int columns_in_turn(const cg_weights_call *c, const share *s)
{
    const cg_dw_block all = whole_dw(&c->plan);
    return s->by_columns && c->column_ranges && c->core_num > 1 &&
           (direct_out(c) || c->workspace) && cg_general_rows_take_turns(&c->plan, &all, s->kc);
}

/* Whether sum_slice sums db (fp32: the bias gradient) as its kernels read
 * dy, into the core's slot: by slices, and for depthwise even with one
 * slice (one on one core: db is summed by channels after it otherwise).
 * A second pass over dy cost mbv1_dw_112's weight and bias gradient half
 * as much again as the weight gradient alone, r50_1x1_56's 15% more. */
static int slice_sums_db(const cg_weights_call *c, const share *s)
{
    return c->out_db && !s->in_team && (s->slices > 1 || cg_depthwise_kernels_take(&c->plan));
}

static share plan_share(const cg_weights_call *c, int rank, int members)
{
    const cg_plan *p = &c->plan;
    share s = {.by_columns = cg_split_by_columns(p),
               .slices = cg_slices_on(cg_sum_slices(p), members)};
    s.kc = pass_rows(c, s.slices);
    if (!s.by_columns && slices_in_teams(p, s.slices, members))
        join_team(p, rank, members, &s);
    else if (columns_in_turn(c, &s)) /* any of them */
        s.last = cg_column_units(p);
    else
        cg_split_range(s.by_columns ? cg_column_units(p) : s.slices, rank, members, &s.first,
                       &s.last);
    if (s.in_team) {
        s.pack_floats = slices_pack_floats(c, s.kc);
        s.part_floats = rank == s.holder && !whole_into_out(c, &s) ? (int64_t)p->dw_elems : 0;
    } else if (s.by_columns) {
        s.pack_floats = columns_pack_floats(p, s.kc, s.first, s.last);
    } else if (s.first < s.last) {
        s.pack_floats = slices_pack_floats(c, s.kc);
        s.held = slices_in_turn(c, &s) ? turn_held(s.slices, members) : s.last - s.first;
        s.part_floats = whole_into_out(c, &s) ? 0 : s.held * (int64_t)p->dw_elems;
    }
    if (c->out_db && (s.slices > 1 || slice_sums_db(c, &s))) {
        const int64_t summed = s.in_team ? rank == s.holder : s.held;
        s.db_doubles = summed * cg_bias_slice_doubles(p);
    }
    return s;
}

/* Floats ahead of a core's db sums: its packing space and partials, to a
 * cache line. */
static int64_t db_sums_at(const share *s)
{
    return (s->pack_floats + s->part_floats + REDUCE_UNIT - 1) / REDUCE_UNIT * REDUCE_UNIT;
}

static size_t share_bytes(const share *s)
{
    if (s->db_doubles == 0)
        return (size_t)(s->pack_floats + s->part_floats) * sizeof(float);
    return (size_t)db_sums_at(s) * sizeof(float) + (size_t)s->db_doubles * sizeof(double);
}

/* Bytes of a core's scratch ahead of after_piece's space: its share's, to
 * a cache line. */
static size_t piece_space_at(const share *s)
{
    const size_t line = REDUCE_UNIT * sizeof(float);
    return (share_bytes(s) + line - 1) / line * line;
}

static size_t scratch_bytes(const cg_weights_call *c, const share *s)
{
    if (!c->after_piece)
        return share_bytes(s);
    return piece_space_at(s) + (size_t)c->piece_floats * sizeof(float);
}

/* The core's `k`th slot of db sums (a slice's). */
static double *db_slot(const cg_weights_call *c, const share *s, int64_t k, float *scratch)
{
    return (double *)(scratch + db_sums_at(s)) + k * cg_bias_slice_doubles(&c->plan);
}

/* A team's slice i (rows [r0, r1)): db's sums from dy after the team's
 * columns, into the holder's first slot; where the sum is one slice, db is
 * summed by channels after it instead (finish_db). */
static void team_db(const cg_weights_call *c, const share *s, int64_t i, int64_t r0, int64_t r1,
                    float *scratch)
{
    if (!c->out_db || s->slices == 1)
        return;
    double *sums = db_slot(c, s, 0, scratch);
    cg_bias_slice(&c->plan, c->dy, r0, r1, sums);
    c->db_sums[i] = sums;
}

/* db from the slices' sums (after a barrier), or summed by channels. */
static void finish_db(const cg_weights_call *c, const share *s, int rank)
{
    if (!c->out_db)
        return;
    const cg_trace_mark since = cg_trace_start();
    if (s->slices == 1 && slice_sums_db(c, s)) {
        if (s->first < s->last) /* the slice's core: its sums of every row */
            for (int64_t ch = 0; ch < c->plan.cout; ch++)
                c->out_db[ch] = (float)c->db_sums[0][ch];
    } else if (s->slices == 1)
        cg_bias_channels(&c->plan, c->dy, rank, c->core_num, c->out_db);
    else
        cg_bias_reduce(&c->plan, c->db_sums, s->slices, rank, c->core_num, c->out_db);
    cg_trace_region(s->slices == 1 ? CG_PHASE_COMPUTE : CG_PHASE_REDUCE, CG_PHASE_REDUCE, since);
}

/* Slice i's sum, from zero, into dst: dw over rows cut i of `slices`; its
 * db sums (if any) into the core's slot k. */
static void sum_slice(const cg_weights_call *c, const share *s, int64_t i, int64_t k,
                      float *scratch, float beta, float *dst)
{
    const cg_plan *p = &c->plan;
    const cg_trace_mark since = cg_trace_start();
    int64_t r0, r1;
    cg_split_range(p->rows, (int)i, (int)s->slices, &r0, &r1);
    double *db_sums = slice_sums_db(c, s) ? db_slot(c, s, k, scratch) : NULL;
    if (cg_depthwise_kernels_take(p)) {
        /* the rows in one piece, or in after_piece's: then every block's
         * sums rest in accumulators of their own between pieces */
        const int64_t block = depthwise_block(p), piece = c->after_piece ? c->piece_rows : r1 - r0;
        float *space = c->after_piece ? (float *)((char *)scratch + piece_space_at(s)) : NULL;
        for (int64_t a = r0;;) {
            const int64_t b = min64(r1, a + piece);
            for (int64_t c0 = 0; c0 < p->cout; c0 += block)
                cg_depthwise_rows(p, c->dy, c->x, c0, min64(p->cout, c0 + block), a, b,
                                  c->after_piece ? scratch + c0 * p->taps : scratch, a > r0,
                                  b == r1 ? dst + c0 * p->taps : NULL,
                                  db_sums ? db_sums + c0 : NULL);
            if (c->after_piece)
                c->after_piece(c->piece_ctx, a, b, space);
            if ((a = b) == r1)
                break;
        }
    } else {
        const cg_dw_block all = whole_dw(p);
        cg_general_rows(p, c->dy, c->x, &all, r0, r1, s->kc, scratch, beta, dst, NULL, db_sums);
    }
    if (db_sums)
        c->db_sums[i] = db_sums;
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
}

/* Block b of dw summed over rows [r0, r1) into its place in dw_like (a dw). */
static void block_sum(const cg_weights_call *c, const share *s, const cg_dw_block *b, int64_t r0,
                      int64_t r1, float *scratch, float beta, float *dw_like)
{
    const cg_plan *p = &c->plan;
    const int64_t at = b->group_first * p->cout_g * p->row_len;
    const cg_trace_mark since = cg_trace_start();
    cg_general_rows(p, c->dy, c->x, b, r0, r1, s->kc, scratch, beta, dw_like + at, NULL, NULL);
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, since);
}

/* In a team: its slice's sum over the team's column units, at their places
 * in dw_like (the holder's partial, or out_dw). */
static void team_slice(const cg_weights_call *c, const share *s, int rank, float *scratch,
                       float beta, float *dw_like)
{
    int64_t r0, r1;
    cg_split_range(c->plan.rows, (int)s->first, (int)s->slices, &r0, &r1);
    for (int64_t u = s->team_units_first; u < s->team_units_last;) {
        const cg_dw_block b = next_column_block(&c->plan, &u, s->team_units_last);
        block_sum(c, s, &b, r0, r1, scratch, beta, dw_like);
    }
    if (rank == s->holder) {
        const cg_trace_mark since = cg_trace_start();
        team_db(c, s, s->first, r0, r1, scratch);
        cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_COMPUTE, since);
    }
}

/* A core's place in the weight gradient's column turns (cg_column_turns.ctx). */
typedef struct column_turn {
    const cg_weights_call *c;
    int rank;
    int64_t pass;        /* the last pass this core took from */
    int64_t panels;      /* dw's micro-panels, the items of every pass */
    cg_trace_mark since; /* the pass's start: each pass is a traced region */
} column_turn;

/* cg_column_turns.take: the panels taken in pass p are counted in
 * column_ranges[p % 2] (cg_take_item); each core clears its count of the
 * next pass on its first take of a pass (the barrier after pass p - 1 has
 * ended every use of it). */
static int take_panel(void *ctx, int64_t pass, int64_t *first, int64_t *last)
{
    column_turn *t = ctx;
    atomic_ullong *taken = t->c->column_ranges + (pass & 1) * CG_CORES_MOST;
    if (pass != t->pass) {
        t->pass = pass;
        atomic_store_explicit(t->c->column_ranges + ((pass + 1) & 1) * CG_CORES_MOST + t->rank, 0,
                              memory_order_relaxed);
    }
    int64_t at;
    if (!cg_take_item(taken, t->panels, t->c->core_num, t->rank, &at))
        return 0;
    *first = at;
    *last = at + 1;
    return 1;
}

static void turn_pass_end(void *ctx)
{
    column_turn *t = ctx;
    cg_trace_region(CG_PHASE_COMPUTE, CG_PHASE_PACK, t->since);
    cm_bar_all(t->c->core_mask, 1); /* every panel of the pass summed */
    t->since = cg_trace_start();
}

/* columns_in_turn: the whole sum, this core's turns of it. */
static void columns_turns(const cg_weights_call *c, const share *s, int rank, float *scratch)
{
    const cg_plan *p = &c->plan;
    const int64_t nr = cg_gemm_blocking_here()->nr;
    /* pass 0's counts start at 0: the call's column_ranges are zeroed */
    column_turn t = {c, rank, -1, (p->row_len + nr - 1) / nr, cg_trace_start()};
    const cg_column_turns turns = {take_panel, turn_pass_end, &t, c->core_num};
    const cg_dw_block all = whole_dw(p);
    float *direct = direct_out(c);
    cg_general_rows(p, c->dy, c->x, &all, 0, p->rows, s->kc, scratch,
                    direct ? direct_beta(c) : 0.0f, direct ? direct : c->workspace, &turns, NULL);
    if (direct)
        return;
    size_t begin, end; /* after the last pass's barrier: every sum staged */
    cg_reduce_slice(p->dw_elems, REDUCE_UNIT, rank, c->core_num, &begin, &end);
    const cg_trace_mark since = cg_trace_start();
    finish_into_out(c, begin, c->workspace + begin, end - begin);
    cg_trace_region(CG_PHASE_FINISH, CG_PHASE_FINISH, since);
}

/* By columns: this core's blocks of dw over every row of the sum, added
 * straight into out_dw (direct_out), or staged at their places in
 * `staging` (a dw) and finished from there. */
static void columns_share(const cg_weights_call *c, const share *s, float *scratch, float *staging)
{
    const cg_plan *p = &c->plan;
    float *direct = direct_out(c);
    for (int64_t u = s->first; u < s->last;) {
        cg_dw_block b = next_column_block(p, &u, s->last);
        block_sum(c, s, &b, 0, p->rows, scratch, direct ? direct_beta(c) : 0.0f,
                  direct ? direct : staging);
        if (direct)
            continue;
        const cg_trace_mark since = cg_trace_start();
        for (int64_t row = b.group_first * p->cout_g; row < b.group_last * p->cout_g; row++) {
            size_t e = (size_t)(row * p->row_len + b.col_first);
            finish_into_out(c, e, staging + e, (size_t)(b.col_last - b.col_first));
        }
        cg_trace_region(CG_PHASE_FINISH, CG_PHASE_FINISH, since);
    }
}

/* The next slice this core sums, after the k it has summed: taken from the
 * shared count, or the next of its range; s->slices or more where none is
 * left, or it has no room for another partial. */
static int64_t next_slice(const cg_weights_call *c, const share *s, int64_t k)
{
    if (k >= s->held)
        return s->slices;
    return slices_in_turn(c, s)
               ? (int64_t)atomic_fetch_add_explicit(c->slices_taken, 1, memory_order_relaxed)
               : s->first + k;
}

/* Sums the slices' partials into this core's part of out_dw, in slice
 * order. Each slice's partial is in its core's scratch, after the packing
 * space (slices_pack_floats): where the slices were taken in turn, as the
 * table says. */
static void reduce_slices(const cg_weights_call *c, const share *s, int rank)
{
    const float *part[CG_MAX_SLICES];
    const int64_t pack = slices_pack_floats(c, s->kc); /* this core may have none */
    if (slices_in_turn(c, s)) {
        for (int64_t i = 0; i < s->slices; i++)
            part[i] = c->partials[i];
    } else if (s->in_team) {
        for (int64_t i = 0; i < s->slices; i++)
            part[i] =
                (const float *)cm_scratch_of(c->core_mask, team_holder(s->slices, c->core_num, i)) +
                pack;
    } else {
        for (int r = 0; r < c->core_num; r++) {
            int64_t first, last;
            cg_split_range(s->slices, r, c->core_num, &first, &last);
            for (int64_t i = first; i < last; i++)
                part[i] = (const float *)cm_scratch_of(c->core_mask, r) + pack +
                          (i - first) * (int64_t)c->plan.dw_elems;
        }
    }
    size_t begin, end;
    float sum[CHUNK];
    cg_reduce_slice(c->plan.dw_elems, REDUCE_UNIT, rank, c->core_num, &begin, &end);
    const cg_trace_mark since = cg_trace_start();
    for (size_t e = begin; e < end; e += CHUNK) {
        size_t stop = end - e < CHUNK ? end : e + CHUNK;
        cg_reduce_partials(sum, part, (int)s->slices, e, stop);
        const int64_t finishing = cg_trace_inner_start();
        finish_into_out(c, e, sum, stop - e);
        cg_trace_inner_end(finishing);
    }
    cg_trace_region(CG_PHASE_REDUCE, CG_PHASE_FINISH, since);
}

/* One core, every slice in turn: each slice's partial added into the
 * running sum of those before it as soon as it is made, the adds of
 * reduce_slices in its order (the bits of every core_mask), so that two
 * partials stay in L2 where every slice's went to memory and came back for
 * the sum at the end. The sum is then finished into out_dw. */
static void slices_in_order(const cg_weights_call *c, const share *s, float *scratch)
{
    const size_t n = c->plan.dw_elems;
    float *sum = scratch + s->pack_floats, *part = sum + n;
    for (int64_t i = 0; i < s->slices; i++) {
        sum_slice(c, s, i, i, scratch, 0.0f, i == 0 ? sum : part);
        if (i == 0)
            continue;
        const cg_trace_mark since = cg_trace_start();
        for (size_t e = 0; e < n; e++)
            sum[e] += part[e];
        cg_trace_region(CG_PHASE_REDUCE, CG_PHASE_REDUCE, since);
    }
}

cg_status cg_weights_core(const cg_weights_call *c, int rank, cg_error *err)
{
    const cg_plan *p = &c->plan;
    const share s = plan_share(c, rank, c->core_num);
    void *mem;
    /* every core agrees before anything is written */
    if (cm_scratch_all(c->core_mask, scratch_bytes(c, &s), &mem, err) != CG_OK)
        return CG_ERR_NO_MEMORY;
    float *scratch = mem;
    if (columns_in_turn(c, &s)) {
        columns_turns(c, &s, rank, scratch);
        finish_db(c, &s, rank);
    } else if (s.by_columns) {
        /* cg_conv2d has no workspace: its sums always go straight into dw */
        columns_share(c, &s, scratch,
                      c->workspace ? c->workspace + (size_t)rank * p->dw_elems : NULL);
        finish_db(c, &s, rank);
    } else if (whole_into_out(c, &s)) {
        if (s.in_team)
            team_slice(c, &s, rank, scratch, direct_beta(c), direct_out(c));
        else if (s.first < s.last)
            sum_slice(c, &s, 0, 0, scratch, direct_beta(c), direct_out(c));
        finish_db(c, &s, rank);
    } else {
        const int alone = c->core_num == 1 && !s.in_team;
        if (s.in_team) {
            float *held = cm_scratch_of(c->core_mask, s.holder);
            team_slice(c, &s, rank, scratch, 0.0f, held + s.pack_floats);
        } else if (alone) {
            slices_in_order(c, &s, scratch);
        } else {
            int64_t i;
            for (int64_t k = 0; (i = next_slice(c, &s, k)) < s.slices; k++) {
                float *part = scratch + s.pack_floats + k * (int64_t)p->dw_elems;
                sum_slice(c, &s, i, k, scratch, 0.0f, part);
                if (c->partials)
                    c->partials[i] = part;
            }
        }
        cm_bar_all(c->core_mask, 1); /* every slice's partial (and db sums) written */
        finish_db(c, &s, rank);
        if (alone) {
            const cg_trace_mark since = cg_trace_start();
            finish_into_out(c, 0, scratch + s.pack_floats, p->dw_elems);
            cg_trace_region(CG_PHASE_FINISH, CG_PHASE_FINISH, since);
        } else {
            reduce_slices(c, &s, rank);
        }
    }
    cm_bar_all(c->core_mask, 1); /* out_dw complete, scratch free to reuse */
    return CG_OK;
}

/* ---- `_s` ------------------------------------------------------------- */

static const char *function_name(const cg_weights_call *c)
{
    return c->plan.dtype_size == sizeof(float) ? "fp_conv_grad_filter_s" : "hp_conv_grad_filter_s";
}

static void shared_entry(void *arg)
{
    call *c = arg;
    int rank = GetLogicCoreId(c->w.core_mask, get_core_id());
    cg_plan_trace_label(function_name(&c->w), &c->w.plan);
    cg_error mine; /* the other cores' copy of the same error */
    cg_status s = cg_weights_core(&c->w, rank, rank == 0 ? c->err : &mine);
    if (rank == 0)
        c->status = s;
}

static cg_status grad_filter_shared(const void *dy, const void *x, void *out_dw, const void *bias,
                                    const ConvParameter *p, int core_mask, size_t dtype_size,
                                    cg_error *err)
{
    call c = {.w = {.dy = dy, .x = x, .bias = bias, .out_dw = out_dw, .core_mask = core_mask},
              .err = err};
    cg_status s = validate(dy, x, out_dw, p, dtype_size, &c.w.plan, err);
    if (s != CG_OK)
        return s;
    if (core_mask == 0)
        return cg_fail(err, CG_ERR_CORE_MASK, "core_mask is 0");
    c.w.workspace = p->workspace_;
    c.w.core_num = GetCoreNum(core_mask);
    int id = get_core_id();
    if (id < 0) {                        /* host mode: run the cores ourselves */
        if (c.w.core_num <= cm_cpus()) { /* else a larger chip's equal shares */
            c.w.slices_taken = &c.slices_taken;
            c.w.column_ranges = c.column_ranges;
            c.w.partials = c.partials;
        }
        s = cm_run_here(core_mask, shared_entry, &c, err);
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
    cg_plan_trace_label(function_name(&c.w), &c.w.plan);
    return cg_weights_core(&c.w, GetLogicCoreId(core_mask, id), err);
}

CG_API size_t cg_grad_filter_scratch_bytes(const ConvParameter *p, int core_mask)
{
    size_t most = 0;
    int members = GetCoreNum(core_mask);
    for (size_t dtype_size = 2; dtype_size <= 4; dtype_size += 2) {
        atomic_llong untouched; /* host mode's shares: room for more slices, any columns */
        atomic_ullong ranges[2 * CG_CORES_MOST];
        float staging; /* `_s` always has a workspace: only whether there is one matters */
        const int host = members <= cm_cpus();
        cg_weights_call c = {.overwrite = 0,
                             .core_num = members,
                             .workspace = &staging,
                             .slices_taken = host ? &untouched : NULL,
                             .column_ranges = host ? ranges : NULL};
        if (core_mask == 0 || cg_plan_make(p, dtype_size, &c.plan) != CG_OK)
            return 0;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            c.bias = with_bias ? p : NULL; /* only whether there is one matters */
            for (int rank = 0; rank < members; rank++) {
                size_t bytes = share_bytes((share[]){plan_share(&c, rank, members)});
                most = bytes > most ? bytes : most;
            }
        }
    }
    return most;
}

/* ---- `_p`: one core, the same sums in the same order ------------------ */

/* By slices: each slice's sum in turn, added to the running total (the
 * order of reduce_slices), then finished; or the one slice straight into
 * out_dw. */
static cg_status private_slices(const cg_weights_call *c, cg_error *err)
{
    const cg_plan *p = &c->plan;
    const share s = plan_share(c, 0, 1);
    const int64_t part = whole_into_out(c, &s) ? 0 : (int64_t)p->dw_elems;
    const size_t floats = (size_t)(s.pack_floats + part * (s.slices > 1 ? 2 : 1));
    float *scratch = cg_thread_floats(floats);
    if (scratch == NULL)
        return cg_fail(err, CG_ERR_NO_MEMORY, "could not allocate %zu bytes of scratch",
                       floats * sizeof(float));
    if (part == 0) {
        sum_slice(c, &s, 0, 0, scratch, direct_beta(c), direct_out(c));
        return CG_OK;
    }
    float *total = scratch + s.pack_floats, *next = total + part;
    sum_slice(c, &s, 0, 0, scratch, 0.0f, total);
    for (int64_t i = 1; i < s.slices; i++) {
        sum_slice(c, &s, i, 0, scratch, 0.0f, next);
        for (size_t e = 0; e < p->dw_elems; e++)
            total[e] += next[e];
    }
    finish_into_out(c, 0, total, p->dw_elems);
    return CG_OK;
}

/* By columns: straight into out_dw (direct_out) in one go; or blocks of
 * whole rows of dw, as many as the budget stages (whole groups where the
 * grouped kernels take them, in the thread's scratch if one is more than
 * the budget), each finished from there. A block's sums are those of `_s`:
 * no sum depends on which rows or columns share its block. */
static cg_status private_columns(const cg_weights_call *c, cg_error *err)
{
    const cg_plan *p = &c->plan;
    const share s = plan_share(c, 0, 1);
    const int64_t budget = p->budget_floats, group_floats = p->cout_g * p->row_len;
    const int64_t block = cg_grouped_few(p) || cg_outer_rows_fit(p)
                              ? p->cout_g
                              : min64(p->cout_g, max64(1, budget / p->row_len));
    const int64_t together =
        block < p->cout_g ? 1 : min64(p->groups, max64(1, budget / group_floats));
    const cg_dw_block widest = {0, together, 0, block, 0, p->row_len};
    const int64_t pack =
        direct_out(c) ? s.pack_floats : cg_general_scratch_floats(p, s.kc, &widest);
    const int64_t staged = together * block * p->row_len;
    const int64_t own = !direct_out(c) && staged > budget ? staged : 0;
    float *scratch = cg_thread_floats((size_t)(pack + own));
    if (scratch == NULL && pack + own > 0)
        return cg_fail(err, CG_ERR_NO_MEMORY, "could not allocate %zu bytes of scratch",
                       (size_t)(pack + own) * sizeof(float));
    if (direct_out(c)) {
        columns_share(c, &s, scratch, NULL);
        return CG_OK;
    }
    float *stage = own ? scratch + pack : c->workspace;
    for (int64_t g = 0; g < p->groups; g += together)
        for (int64_t co0 = 0; co0 < p->cout_g; co0 += block) {
            const int64_t co1 = min64(p->cout_g, co0 + block), g1 = min64(p->groups, g + together);
            const cg_dw_block b = {g, g1, co0, co1, 0, p->row_len};
            cg_general_rows(p, c->dy, c->x, &b, 0, p->rows, s.kc, scratch, 0.0f, stage, NULL, NULL);
            finish_into_out(c, (size_t)((g * p->cout_g + co0) * p->row_len), stage,
                            (size_t)((g1 - g) * (co1 - co0) * p->row_len));
        }
    return CG_OK;
}

static cg_status grad_filter_private(const void *dy, const void *x, void *out_dw, const void *bias,
                                     const ConvParameter *p, size_t dtype_size, cg_error *err)
{
    cg_weights_call c = {.dy = dy, .x = x, .bias = bias, .out_dw = out_dw, .core_num = 1};
    cg_status s = validate(dy, x, out_dw, p, dtype_size, &c.plan, err);
    if (s != CG_OK)
        return s;
    c.workspace = p->workspace_;
    return cg_split_by_columns(&c.plan) ? private_columns(&c, err) : private_slices(&c, err);
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
