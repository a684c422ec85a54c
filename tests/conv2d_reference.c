/* SPDX-License-Identifier: MIT */
/* The naive cg_conv2d reference; see conv2d_reference.h. */
#include "conv2d_reference.h"

#include <math.h>
#include <stdlib.h>

static long long out_size(long long in, long long pad_a, long long pad_b, long long k,
                          long long dil, long long stride)
{
    const long long num = in + pad_a + pad_b - dil * (k - 1) - 1;
    if (num < 0)
        return 0; /* the kernel does not fit: floor(num / stride) + 1 <= 0 */
    return num / stride + 1;
}

long long cref_out_h(const cg_conv2d *c)
{
    return out_size(c->in_h, c->pad_top, c->pad_bottom, c->kernel_h, c->dilation_h, c->stride_h);
}

long long cref_out_w(const cg_conv2d *c)
{
    return out_size(c->in_w, c->pad_left, c->pad_right, c->kernel_w, c->dilation_w, c->stride_w);
}

size_t cref_x_elems(const cg_conv2d *c)
{
    return (size_t)c->batch * (size_t)c->in_c * (size_t)c->in_h * (size_t)c->in_w;
}

size_t cref_y_elems(const cg_conv2d *c)
{
    return (size_t)c->batch * (size_t)c->out_c * (size_t)cref_out_h(c) * (size_t)cref_out_w(c);
}

size_t cref_w_elems(const cg_conv2d *c)
{
    return (size_t)c->out_c * (size_t)(c->in_c / c->groups) * (size_t)c->kernel_h *
           (size_t)c->kernel_w;
}

size_t cref_x_index(const cg_conv2d *c, long long n, long long iy, long long ix, long long ch)
{
    const long long H = c->in_h, W = c->in_w, C = c->in_c;
    if (c->layout == CG_LAYOUT_NCHW)
        return (size_t)(((n * C + ch) * H + iy) * W + ix);
    return (size_t)(((n * H + iy) * W + ix) * C + ch);
}

size_t cref_y_index(const cg_conv2d *c, long long n, long long oh, long long ow, long long co)
{
    const long long OH = cref_out_h(c), OW = cref_out_w(c), C = c->out_c;
    if (c->layout == CG_LAYOUT_NCHW)
        return (size_t)(((n * C + co) * OH + oh) * OW + ow);
    return (size_t)(((n * OH + oh) * OW + ow) * C + co);
}

size_t cref_w_index(const cg_conv2d *c, long long co, long long kh, long long kw, long long ci)
{
    const long long Kh = c->kernel_h, Kw = c->kernel_w, Cip = c->in_c / c->groups;
    if (c->layout == CG_LAYOUT_NCHW)
        return (size_t)(((co * Cip + ci) * Kh + kh) * Kw + kw);
    return (size_t)(((co * Kh + kh) * Kw + kw) * Cip + ci);
}

/* Splits i into four coordinates, the last one varying fastest. */
static void split4(size_t i, long long d1, long long d2, long long d3, int *a, int *b, int *c,
                   int *d)
{
    *d = (int)(i % (size_t)d3);
    i /= (size_t)d3;
    *c = (int)(i % (size_t)d2);
    i /= (size_t)d2;
    *b = (int)(i % (size_t)d1);
    *a = (int)(i / (size_t)d1);
}

void cref_x_coords(const cg_conv2d *c, size_t i, int *n, int *iy, int *ix, int *ch)
{
    if (c->layout == CG_LAYOUT_NCHW)
        split4(i, c->in_c, c->in_h, c->in_w, n, ch, iy, ix);
    else
        split4(i, c->in_h, c->in_w, c->in_c, n, iy, ix, ch);
}

void cref_y_coords(const cg_conv2d *c, size_t i, int *n, int *oh, int *ow, int *co)
{
    if (c->layout == CG_LAYOUT_NCHW)
        split4(i, c->out_c, cref_out_h(c), cref_out_w(c), n, co, oh, ow);
    else
        split4(i, cref_out_h(c), cref_out_w(c), c->out_c, n, oh, ow, co);
}

void cref_w_coords(const cg_conv2d *c, size_t i, int *co, int *kh, int *kw, int *ci)
{
    const int cip = c->in_c / c->groups;
    if (c->layout == CG_LAYOUT_NCHW)
        split4(i, cip, c->kernel_h, c->kernel_w, co, ci, kh, kw);
    else
        split4(i, c->kernel_h, c->kernel_w, cip, co, kh, kw, ci);
}

long long cref_terms_forward(const cg_conv2d *c)
{
    return (long long)c->kernel_h * c->kernel_w * (c->in_c / c->groups);
}

long long cref_terms_backward_data(const cg_conv2d *c)
{
    return (long long)(c->out_c / c->groups) * c->kernel_h * c->kernel_w;
}

long long cref_terms_backward_weights(const cg_conv2d *c)
{
    return (long long)c->batch * cref_out_h(c) * cref_out_w(c);
}

long long cref_terms_backward_bias(const cg_conv2d *c)
{
    return cref_terms_backward_weights(c);
}

/* The shape, widened, shared by every loop below. */
typedef struct dims {
    long long N, H, W, OH, OW, Cin, Cout, Kh, Kw, Cip, Cop;
    long long sh, sw, dh, dw, pt, pl;
} dims;

static dims dims_of(const cg_conv2d *c)
{
    dims d;
    d.N = c->batch;
    d.H = c->in_h;
    d.W = c->in_w;
    d.OH = cref_out_h(c);
    d.OW = cref_out_w(c);
    d.Cin = c->in_c;
    d.Cout = c->out_c;
    d.Kh = c->kernel_h;
    d.Kw = c->kernel_w;
    d.Cip = c->in_c / c->groups;
    d.Cop = c->out_c / c->groups;
    d.sh = c->stride_h;
    d.sw = c->stride_w;
    d.dh = c->dilation_h;
    d.dw = c->dilation_w;
    d.pt = c->pad_top;
    d.pl = c->pad_left;
    return d;
}

/* ---- double ---------------------------------------------------------------- */

void cref_forward_f64(const cg_conv2d *c, const double *x, const double *w, const double *b,
                      double *y, double *abs)
{
    const dims d = dims_of(c);
    for (long long n = 0; n < d.N; ++n)
        for (long long co = 0; co < d.Cout; ++co) {
            const long long g = co / d.Cop;
            for (long long oh = 0; oh < d.OH; ++oh)
                for (long long ow = 0; ow < d.OW; ++ow) {
                    double acc = b ? b[co] : 0.0, mag = b ? fabs(b[co]) : 0.0;
                    for (long long ci = 0; ci < d.Cip; ++ci)
                        for (long long kh = 0; kh < d.Kh; ++kh) {
                            const long long iy = oh * d.sh + kh * d.dh - d.pt;
                            if (iy < 0 || iy >= d.H)
                                continue;
                            for (long long kw = 0; kw < d.Kw; ++kw) {
                                const long long ix = ow * d.sw + kw * d.dw - d.pl;
                                if (ix < 0 || ix >= d.W)
                                    continue;
                                const double t = x[cref_x_index(c, n, iy, ix, g * d.Cip + ci)] *
                                                 w[cref_w_index(c, co, kh, kw, ci)];
                                acc += t;
                                mag += fabs(t);
                            }
                        }
                    const size_t i = cref_y_index(c, n, oh, ow, co);
                    y[i] = acc;
                    if (abs)
                        abs[i] = mag;
                }
        }
}

void cref_backward_data_f64(const cg_conv2d *c, const double *dy, const double *w, double *dx,
                            double *abs)
{
    const dims d = dims_of(c);
    const size_t nx = cref_x_elems(c);
    for (size_t i = 0; i < nx; ++i) {
        dx[i] = 0.0;
        if (abs)
            abs[i] = 0.0;
    }
    for (long long n = 0; n < d.N; ++n)
        for (long long co = 0; co < d.Cout; ++co) {
            const long long g = co / d.Cop;
            for (long long oh = 0; oh < d.OH; ++oh)
                for (long long ow = 0; ow < d.OW; ++ow) {
                    const double g_out = dy[cref_y_index(c, n, oh, ow, co)];
                    for (long long ci = 0; ci < d.Cip; ++ci)
                        for (long long kh = 0; kh < d.Kh; ++kh) {
                            const long long iy = oh * d.sh + kh * d.dh - d.pt;
                            if (iy < 0 || iy >= d.H)
                                continue;
                            for (long long kw = 0; kw < d.Kw; ++kw) {
                                const long long ix = ow * d.sw + kw * d.dw - d.pl;
                                if (ix < 0 || ix >= d.W)
                                    continue;
                                const size_t i = cref_x_index(c, n, iy, ix, g * d.Cip + ci);
                                const double t = g_out * w[cref_w_index(c, co, kh, kw, ci)];
                                dx[i] += t;
                                if (abs)
                                    abs[i] += fabs(t);
                            }
                        }
                }
        }
}

void cref_backward_weights_f64(const cg_conv2d *c, const double *x, const double *dy, double *dw,
                               double *abs)
{
    const dims d = dims_of(c);
    for (long long co = 0; co < d.Cout; ++co) {
        const long long g = co / d.Cop;
        for (long long ci = 0; ci < d.Cip; ++ci)
            for (long long kh = 0; kh < d.Kh; ++kh)
                for (long long kw = 0; kw < d.Kw; ++kw) {
                    double acc = 0.0, mag = 0.0;
                    for (long long n = 0; n < d.N; ++n)
                        for (long long oh = 0; oh < d.OH; ++oh) {
                            const long long iy = oh * d.sh + kh * d.dh - d.pt;
                            if (iy < 0 || iy >= d.H)
                                continue;
                            for (long long ow = 0; ow < d.OW; ++ow) {
                                const long long ix = ow * d.sw + kw * d.dw - d.pl;
                                if (ix < 0 || ix >= d.W)
                                    continue;
                                const double t = dy[cref_y_index(c, n, oh, ow, co)] *
                                                 x[cref_x_index(c, n, iy, ix, g * d.Cip + ci)];
                                acc += t;
                                mag += fabs(t);
                            }
                        }
                    const size_t i = cref_w_index(c, co, kh, kw, ci);
                    dw[i] = acc;
                    if (abs)
                        abs[i] = mag;
                }
    }
}

void cref_backward_bias_f64(const cg_conv2d *c, const double *dy, double *db, double *abs)
{
    const dims d = dims_of(c);
    for (long long co = 0; co < d.Cout; ++co) {
        double acc = 0.0, mag = 0.0;
        for (long long n = 0; n < d.N; ++n)
            for (long long oh = 0; oh < d.OH; ++oh)
                for (long long ow = 0; ow < d.OW; ++ow) {
                    const double t = dy[cref_y_index(c, n, oh, ow, co)];
                    acc += t;
                    mag += fabs(t);
                }
        db[co] = acc;
        if (abs)
            abs[co] = mag;
    }
}

/* ---- float: the double loops below, rounded once ------------------------- */
/* The float versions serve data whose every sum is exact in fp32: there any
 * order of float additions gives the double result, rounded once. */

static double *widen(const float *v, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    if (!d)
        abort();
    for (size_t i = 0; i < n; ++i)
        d[i] = v[i];
    return d;
}

static void narrow(float *out, double *v, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        out[i] = (float)v[i];
    free(v);
}

void cref_forward_f32(const cg_conv2d *c, const float *x, const float *w, const float *b, float *y)
{
    double *xd = widen(x, cref_x_elems(c)), *wd = widen(w, cref_w_elems(c));
    double *bd = b ? widen(b, (size_t)c->out_c) : NULL, *yd = widen(y, cref_y_elems(c));
    cref_forward_f64(c, xd, wd, bd, yd, NULL);
    narrow(y, yd, cref_y_elems(c));
    free(xd);
    free(wd);
    free(bd);
}

void cref_backward_data_f32(const cg_conv2d *c, const float *dy, const float *w, float *dx)
{
    double *dyd = widen(dy, cref_y_elems(c)), *wd = widen(w, cref_w_elems(c));
    double *dxd = widen(dx, cref_x_elems(c));
    cref_backward_data_f64(c, dyd, wd, dxd, NULL);
    narrow(dx, dxd, cref_x_elems(c));
    free(dyd);
    free(wd);
}

void cref_backward_weights_f32(const cg_conv2d *c, const float *x, const float *dy, float *dw)
{
    double *xd = widen(x, cref_x_elems(c)), *dyd = widen(dy, cref_y_elems(c));
    double *dwd = widen(dw, cref_w_elems(c));
    cref_backward_weights_f64(c, xd, dyd, dwd, NULL);
    narrow(dw, dwd, cref_w_elems(c));
    free(xd);
    free(dyd);
}

void cref_backward_bias_f32(const cg_conv2d *c, const float *dy, float *db)
{
    double *dyd = widen(dy, cref_y_elems(c)), *dbd = widen(db, (size_t)c->out_c);
    cref_backward_bias_f64(c, dyd, dbd, NULL);
    narrow(db, dbd, (size_t)c->out_c);
    free(dyd);
}
