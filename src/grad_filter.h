/* SPDX-License-Identifier: MIT */
/* The weight gradient's per-core share, cut by the shape alone (plan.h,
 * cg_split_by_columns): the operator's `_s` and cg_conv2d's NHWC weight
 * gradient both run it. */
#ifndef CG_GRAD_FILTER_H
#define CG_GRAD_FILTER_H
#include <stdatomic.h>

#include "plan.h"
#include "status.h"

/* The most cores a core_mask names (its bits). */
enum { CG_CORES_MOST = 32 };

typedef struct cg_weights_call {
    cg_plan plan;
    const void *dy, *x, *bias;
    void *out_dw;
    float *workspace;  /* `_s`: where a core stages its columns (bias or fp16) */
    int overwrite;     /* dw = the sum (cg_conv2d), else out_dw += sum + bias */
    int64_t kc_forced; /* rows a pass where > 0 (tests), else the library's */
    int core_mask, core_num;
    /* cg_conv2d_backward_weights_bias (fp32 NHWC): db, summed while each
     * slice of dy's rows is in cache (bias.h); NULL: none. db_sums: a table
     * of CG_MAX_SLICES pointers the cores fill, one to each slice's sums. */
    float *out_db;
    const double **db_sums;
    /* Where the cores share this call alone (host mode) and are no more
     * than the process's CPUs: a count from 0 by which they take the slices
     * of the sum in turn, a table of CG_MAX_SLICES pointers they fill, one
     * to each slice's partial, and 2 * CG_CORES_MOST words, zero, by which
     * they share dw's columns pass by pass (grad_filter.c,
     * columns_in_turn). NULL (SPMD mode, whose cores share nothing of the
     * caller's, or a larger chip emulated): each core sums an equal range
     * of the slices or columns. */
    atomic_llong *slices_taken;
    const float **partials;
    atomic_ullong *column_ranges;
    /* cg_conv2d_backward, depthwise sums only (cg_depthwise_kernels_take:
     * their kernels go through a slice's rows once a block of channels,
     * so every block can take a piece before the next): each slice's rows
     * go in pieces of `piece_rows`, and after each piece [first, last),
     * while its dy is in cache, after_piece(piece_ctx, first, last, space),
     * space: piece_floats floats of the calling core's own scratch. NULL:
     * none. */
    void (*after_piece)(void *piece_ctx, int64_t first, int64_t last, float *space);
    void *piece_ctx;
    int64_t piece_rows, piece_floats;
} cg_weights_call;

/* Logical core `rank`'s share of c on the cores of c->core_mask, all of
 * which call it: collective, returns when out_dw is complete. */
cg_status cg_weights_core(const cg_weights_call *c, int rank, cg_error *err);
#endif
