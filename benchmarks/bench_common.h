/* SPDX-License-Identifier: MIT */
/* What convgrad-bench and convgrad-bench-mpi share: the layer set (the
 * built-in one, or --shapes's), a layer's shape and its cg_conv2d
 * descriptor, and the median. */
#ifndef CG_BENCH_COMMON_H
#define CG_BENCH_COMMON_H

#include "convgrad.h"

/* One convolution of the layer set (built in, or read by --shapes). ph, pw are
 * the top and left pads; dil_h, dil_w count from 1 (1 = none), as the library's. */
typedef struct bench_layer {
    const char *name;
    int n, h, w, cin, cout, kh, kw, sh, sw, ph, pw, dil_h, dil_w, group;
    int oh, ow; /* 0: the forward formula's, with pads ph, pw on both sides */
} bench_layer;

/* The layer's shape, with its output size. */
typedef struct bench_shape {
    int n, h, w, cin, cout, kh, kw, sh, sw, ph, pw, dil_h, dil_w, group;
    int oh, ow;
    int pad_r, pad_d; /* the far-side pads that make the forward formula give oh, ow exactly */
} bench_shape;

/* The run's layer set: the built-in one unless --shapes replaced it. */
extern const bench_layer *bench_layers;
extern int bench_nlayers;

/* The layer's shape, its output size from the forward formula where not given. */
bench_shape shape_of(const bench_layer *L);
/* The training step's descriptor of a shape: NHWC, OHWI. */
cg_conv2d bench_conv2d_of(const bench_shape *s);
double bench_median(double *v, int n); /* sorts v */

#endif
