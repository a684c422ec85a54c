/* SPDX-License-Identifier: MIT */
/* What convgrad-bench and convgrad-bench-mpi share (bench_common.h). */
#include "bench_common.h"

#include <stdlib.h>
#include <string.h>

/* stride, pad and dilation alike in h and w; oh, ow from the forward formula */
#define SQUARE(name, n, h, w, cin, cout, k, st, pad, dil, g)                                       \
    {                                                                                              \
        name, n, h, w, cin, cout, k, k, st, st, pad, pad, dil, dil, g, 0, 0                        \
    }
static const bench_layer builtin_layers[] = {
    /*     name            N    H    W  Cin Cout  K  s pad dil  G */
    SQUARE("r50_3x3_56", 8, 56, 56, 64, 64, 3, 1, 1, 1, 1),
    SQUARE("r50_3x3_28", 8, 28, 28, 128, 128, 3, 1, 1, 1, 1),
    SQUARE("r50_3x3_14", 8, 14, 14, 256, 256, 3, 1, 1, 1, 1),
    SQUARE("r50_3x3_7", 8, 7, 7, 512, 512, 3, 1, 1, 1, 1),
    SQUARE("r50_3x3_56_s2", 8, 56, 56, 128, 128, 3, 2, 1, 1, 1),
    SQUARE("stem_7x7_s2", 8, 224, 224, 3, 64, 7, 2, 3, 1, 1),
    SQUARE("r50_1x1_56", 16, 56, 56, 64, 256, 1, 1, 0, 1, 1),
    SQUARE("r50_1x1_14", 16, 14, 14, 1024, 256, 1, 1, 0, 1, 1),
    SQUARE("mbv1_dw_112", 32, 112, 112, 32, 32, 3, 1, 1, 1, 32),
    SQUARE("mbv1_dw_56", 32, 56, 56, 128, 128, 3, 1, 1, 1, 128),
    SQUARE("mbv1_dw_28_s2", 64, 28, 28, 256, 256, 3, 2, 1, 1, 256),
    SQUARE("rnx_g32_56", 8, 56, 56, 128, 128, 3, 1, 1, 1, 32),
    SQUARE("dil2_3x3_28", 8, 28, 28, 256, 256, 3, 1, 2, 2, 1),
    SQUARE("r50_3x3_56_n1", 1, 56, 56, 64, 64, 3, 1, 1, 1, 1),
};
#undef SQUARE
const bench_layer *bench_layers = builtin_layers;
int bench_nlayers = (int)(sizeof builtin_layers / sizeof builtin_layers[0]);

bench_shape shape_of(const bench_layer *L)
{
    bench_shape s;
    s.n = L->n;
    s.h = L->h;
    s.w = L->w;
    s.cin = L->cin;
    s.cout = L->cout;
    s.kh = L->kh;
    s.kw = L->kw;
    s.sh = L->sh;
    s.sw = L->sw;
    s.ph = L->ph;
    s.pw = L->pw;
    s.dil_h = L->dil_h;
    s.dil_w = L->dil_w;
    s.group = L->group;
    s.oh = L->oh ? L->oh : (s.h + 2 * s.ph - s.dil_h * (s.kh - 1) - 1) / s.sh + 1;
    s.ow = L->ow ? L->ow : (s.w + 2 * s.pw - s.dil_w * (s.kw - 1) - 1) / s.sw + 1;
    s.pad_d = (s.oh - 1) * s.sh + s.dil_h * (s.kh - 1) + 1 - s.h - s.ph;
    s.pad_r = (s.ow - 1) * s.sw + s.dil_w * (s.kw - 1) + 1 - s.w - s.pw;
    return s;
}

cg_conv2d bench_conv2d_of(const bench_shape *s)
{
    cg_conv2d cv;
    memset(&cv, 0, sizeof cv);
    cv.layout = CG_LAYOUT_NHWC;
    cv.batch = s->n;
    cv.in_h = s->h;
    cv.in_w = s->w;
    cv.in_c = s->cin;
    cv.out_c = s->cout;
    cv.kernel_h = s->kh;
    cv.kernel_w = s->kw;
    cv.groups = s->group;
    cv.stride_h = s->sh;
    cv.stride_w = s->sw;
    cv.dilation_h = s->dil_h;
    cv.dilation_w = s->dil_w;
    cv.pad_top = s->ph;
    cv.pad_left = s->pw;
    cv.pad_bottom = s->pad_d;
    cv.pad_right = s->pad_r;
    return cv;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
