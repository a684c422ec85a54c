/* SPDX-License-Identifier: MIT */
/* Where a row of the long sum sits in the tensors: shared by the packers
 * (src/kernels.c) and the depthwise reference (kernels/ref/dwconv.c). */
#ifndef CG_KERNELS_GEOMETRY_H
#define CG_KERNELS_GEOMETRY_H
#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "plan.h"

/* Position of a row of the sum: row = (n * out_h + oh) * out_w + ow. */
typedef struct cg_pixel {
    int64_t n, oh, ow;
} cg_pixel;

static inline cg_pixel cg_pixel_of_row(const cg_plan *p, int64_t row)
{
    int64_t per_image = p->out_h * p->out_w;
    int64_t in_image = row % per_image;
    return (cg_pixel){row / per_image, in_image / p->out_w, in_image % p->out_w};
}

static inline void cg_next_pixel(const cg_plan *p, cg_pixel *px)
{
    if (++px->ow < p->out_w)
        return;
    px->ow = 0;
    if (++px->oh < p->out_h)
        return;
    px->oh = 0;
    px->n++;
}

/* Elements [*first, *last) of x (NHWC) that rows [r, r + count) of the sum
 * reach: the input lines from the first pixel's top kernel row to the last
 * pixel's bottom one, clamped to their images (count >= 1). */
static inline void cg_input_span(const cg_plan *p, int64_t r, int64_t count, int64_t *first,
                                 int64_t *last)
{
    const cg_pixel a = cg_pixel_of_row(p, r), z = cg_pixel_of_row(p, r + count - 1);
    int64_t top = a.oh * p->stride_h - p->pad_u;
    int64_t bottom = z.oh * p->stride_h - p->pad_u + (p->kernel_h - 1) * p->dil_h + 1;
    top = top < 0 ? 0 : top > p->in_h ? p->in_h : top;
    bottom = bottom < 0 ? 0 : bottom > p->in_h ? p->in_h : bottom;
    *first = (a.n * p->in_h + top) * p->in_w * p->cin;
    *last = (z.n * p->in_h + bottom) * p->in_w * p->cin;
}

/* Element index of x[n][iy][ix][channel], or -1 where (iy, ix) is padding. */
static inline int64_t cg_x_index(const cg_plan *p, const cg_pixel *px, int64_t kh, int64_t kw,
                                 int64_t channel)
{
    int64_t iy = px->oh * p->stride_h + kh * p->dil_h - p->pad_u;
    int64_t ix = px->ow * p->stride_w + kw * p->dil_w - p->pad_l;
    if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w)
        return -1;
    return ((px->n * p->in_h + iy) * p->in_w + ix) * p->cin + channel;
}

/* dst[0, n) = tensor[index, index + n) as floats, whatever the storage. */
static inline void cg_load_floats(float *dst, const void *tensor, int64_t index, int64_t n,
                                  size_t dtype_size)
{
    if (dtype_size == sizeof(float))
        memcpy(dst, (const float *)tensor + index, (size_t)n * sizeof(float));
    else
        cg_halves_to_floats(dst, (const unsigned char *)tensor + 2 * index, (size_t)n);
}
#endif
