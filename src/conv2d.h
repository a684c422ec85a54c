/* SPDX-License-Identifier: MIT */
/* The training-step operations behind the public cg_conv2d_* functions. */
#ifndef CG_CONV2D_H
#define CG_CONV2D_H
#include <stdint.h>

#include "convgrad.h"
#include "plan.h"

typedef enum cg_conv2d_op {
    CG_CONV2D_FORWARD,               /* in0 = x,  in1 = w,  bias = b (may be NULL), out = y  */
    CG_CONV2D_BACKWARD_DATA,         /* in0 = dy, in1 = w,                          out = dx */
    CG_CONV2D_BACKWARD_WEIGHTS,      /* in0 = x,  in1 = dy,                         out = dw */
    CG_CONV2D_BACKWARD_BIAS,         /* in0 = dy,                                   out = db */
    CG_CONV2D_BACKWARD_WEIGHTS_BIAS, /* as BACKWARD_WEIGHTS, and db = the bias's */
    CG_CONV2D_BACKWARD /* as BACKWARD_WEIGHTS (db may be NULL), and dx from dy and w */
} cg_conv2d_op;

/* Validates conv and fills plan with its shape (output size computed, the
 * ConvParameter rules applied); err (may be NULL) says what is wrong in
 * cg_conv2d's own words. */
cg_status cg_conv2d_plan(const cg_conv2d *conv, cg_plan *plan, cg_error *err);

/* One operation on core_mask, recorded for cg_last_status() and
 * cg_last_error_detail() as the public functions do. tile_rows > 0 forces
 * the rows of each tile (tests use it to reach tile edges); 0 lets the
 * library choose. */
cg_status cg_conv2d_run(cg_conv2d_op op, const cg_conv2d *conv, const float *in0, const float *in1,
                        const float *bias, float *out, float *db, int core_mask, int64_t tile_rows);

/* cg_conv2d_backward, recorded as cg_conv2d_run's; tile_rows as there. */
cg_status cg_conv2d_run_backward(const cg_conv2d *conv, const float *x, const float *dy,
                                 const float *w, float *dx, float *dw, float *db, int core_mask,
                                 int64_t tile_rows);
#endif
