/* SPDX-License-Identifier: MIT */
/* The naive reference of the cg_conv2d operations (include/convgrad.h, "The
 * whole training step"), straight from the header's formula, for both
 * layouts. Plain nested loops with the bounds checks, nothing clever: it
 * must be obviously right rather than fast.
 *
 * The double versions accumulate in double and can also report, per output
 * element, the sum of |terms| (for error bounds). The float versions run
 * them on float data and round once: on data whose every sum is exact in
 * fp32 (small integers) that is the exact result, which any order of float
 * additions gives too. Every output is overwritten, as the library's are. */
#ifndef CGT_CONV2D_REFERENCE_H
#define CGT_CONV2D_REFERENCE_H

#include <stddef.h>

#include "convgrad.h"

#ifdef __cplusplus
extern "C" {
#endif

/* OH, OW: floor((in + pads - dilation*(k-1) - 1) / stride) + 1, in int64;
 * <= 0 when the (dilated) kernel does not fit in the padded input. The
 * descriptor's other fields must be valid. */
long long cref_out_h(const cg_conv2d *c);
long long cref_out_w(const cg_conv2d *c);

/* Element counts (the descriptor must be valid). */
size_t cref_x_elems(const cg_conv2d *c); /* batch * in_c * in_h * in_w */
size_t cref_y_elems(const cg_conv2d *c); /* batch * out_c * OH * OW */
size_t cref_w_elems(const cg_conv2d *c); /* out_c * (in_c/groups) * kernel_h * kernel_w */

/* Where an element lives in the descriptor's layout:
 *   NHWC: x [n][y][x][c], y [n][oh][ow][co], w OHWI [co][kh][kw][ci]
 *   NCHW: x [n][c][y][x], y [n][co][oh][ow], w OIHW [co][ci][kh][kw]
 * c is a channel of x (0..in_c-1); ci a channel within the group. */
size_t cref_x_index(const cg_conv2d *c, long long n, long long iy, long long ix, long long ch);
size_t cref_y_index(const cg_conv2d *c, long long n, long long oh, long long ow, long long co);
size_t cref_w_index(const cg_conv2d *c, long long co, long long kh, long long kw, long long ci);
/* The inverse, for messages. */
void cref_x_coords(const cg_conv2d *c, size_t i, int *n, int *iy, int *ix, int *ch);
void cref_y_coords(const cg_conv2d *c, size_t i, int *n, int *oh, int *ow, int *co);
void cref_w_coords(const cg_conv2d *c, size_t i, int *co, int *kh, int *kw, int *ci);

/* ---- float (exact data only: the double loops, rounded once) ------------- */
/* y = conv(x, w) + b; b may be NULL. */
void cref_forward_f32(const cg_conv2d *c, const float *x, const float *w, const float *b, float *y);
/* dx: the forward formula's terms scattered back, dx[n, iy, ix, ci] += dy * w. */
void cref_backward_data_f32(const cg_conv2d *c, const float *dy, const float *w, float *dx);
/* dw[co, kh, kw, ci] = sum over n, oh, ow of dy[n, oh, ow, co] * x[n, iy, ix, g*Ci' + ci]. */
void cref_backward_weights_f32(const cg_conv2d *c, const float *x, const float *dy, float *dw);
/* db[co] = sum over n, oh, ow of dy[n, oh, ow, co]. */
void cref_backward_bias_f32(const cg_conv2d *c, const float *dy, float *db);

/* ---- double; abs (may be NULL) receives the sum of |terms| per element --- */
void cref_forward_f64(const cg_conv2d *c, const double *x, const double *w, const double *b,
                      double *y, double *abs);
void cref_backward_data_f64(const cg_conv2d *c, const double *dy, const double *w, double *dx,
                            double *abs);
void cref_backward_weights_f64(const cg_conv2d *c, const double *x, const double *dy, double *dw,
                               double *abs);
void cref_backward_bias_f64(const cg_conv2d *c, const double *dy, double *db, double *abs);

/* The most terms any one element of each operation sums (bias excluded):
 * forward Kh*Kw*Ci', backward data (out_c/groups)*Kh*Kw, backward weights and
 * bias batch*OH*OW. For error bounds and exactness preconditions. */
long long cref_terms_forward(const cg_conv2d *c);
long long cref_terms_backward_data(const cg_conv2d *c);
long long cref_terms_backward_weights(const cg_conv2d *c);
long long cref_terms_backward_bias(const cg_conv2d *c);

#ifdef __cplusplus
}
#endif
#endif
