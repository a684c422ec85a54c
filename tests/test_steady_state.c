/* SPDX-License-Identifier: MIT */
/* After a first call, calls of the same shape allocate nothing: every
 * allocation function is wrapped (-Wl,--wrap) and counted while the steady
 * state runs, on every path, dtype and entry point. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "conv2d_reference.h"
#include "support.h"

static atomic_int counting, allocations;

#define COUNTED(ret, name, params, args)                                                           \
    ret __real_##name params;                                                                      \
    ret __wrap_##name params;                                                                      \
    ret __wrap_##name params                                                                       \
    {                                                                                              \
        if (atomic_load(&counting))                                                                \
            atomic_fetch_add(&allocations, 1);                                                     \
        return __real_##name args;                                                                 \
    }

COUNTED(void *, malloc, (size_t n), (n))
COUNTED(void *, calloc, (size_t n, size_t size), (n, size))
COUNTED(void *, realloc, (void *p, size_t n), (p, n))
COUNTED(void *, aligned_alloc, (size_t a, size_t n), (a, n))
COUNTED(int, posix_memalign, (void **p, size_t a, size_t n), (p, a, n))

typedef struct buffers {
    ConvParameter p;
    void *dy, *x, *dw, *bias;
} buffers;

static buffers make_buffers(const cgt_shape *s, size_t elem, int core_mask)
{
    buffers b = {.p = cgt_param(s)};
    b.dy = calloc(ref_dy_elems(&b.p), elem);
    b.x = calloc(ref_x_elems(&b.p), elem);
    b.dw = calloc(ref_dw_elems(&b.p), elem);
    b.bias = calloc((size_t)b.p.output_channel_, elem);
    size_t ws = cg_grad_filter_workspace_bytes(&b.p, core_mask, elem);
    b.p.workspace_ = calloc(ws, 1);
    return b;
}

static void free_buffers(buffers *b)
{
    free(b->dy);
    free(b->x);
    free(b->dw);
    free(b->bias);
    free(b->p.workspace_);
}

static cg_status call(buffers *b, int half, int private_call, int core_mask)
{
    if (half)
        return private_call
                   ? cg_hp_conv_grad_filter_p(b->dy, b->x, b->dw, b->bias, &b->p)
                   : cg_hp_conv_grad_filter_s(b->dy, b->x, b->dw, b->bias, &b->p, core_mask);
    return private_call ? cg_fp_conv_grad_filter_p(b->dy, b->x, b->dw, b->bias, &b->p)
                        : cg_fp_conv_grad_filter_s(b->dy, b->x, b->dw, b->bias, &b->p, core_mask);
}

Test(steady_state, calls_after_the_first_allocate_nothing)
{
    const cgt_shape shapes[] = {
        {.n = 2,
         .h = 12,
         .w = 10,
         .cin = 16,
         .cout = 24,
         .kh = 3,
         .kw = 3,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1}, /* general */
        {.n = 2,
         .h = 12,
         .w = 10,
         .cin = 16,
         .cout = 16,
         .kh = 3,
         .kw = 3,
         .g = 16,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1},                                                            /* depthwise */
        {.n = 2, .h = 12, .w = 10, .cin = 16, .cout = 24, .kh = 1, .kw = 1}}; /* 1x1 */
    const int masks[] = {0x3, 0x80000001, -1};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int half = 0; half < 2; half++)
            for (int private_call = 0; private_call < 2; private_call++)
                for (size_t m = 0; m < sizeof masks / sizeof *masks; m++) {
                    buffers b = make_buffers(&shapes[s], half ? 2 : 4, masks[m]);
                    cr_assert_eq(call(&b, half, private_call, masks[m]), CG_OK);
                    atomic_store(&allocations, 0);
                    atomic_store(&counting, 1);
                    for (int i = 0; i < 5; i++)
                        call(&b, half, private_call, masks[m]);
                    atomic_store(&counting, 0);
                    int n = atomic_load(&allocations);
                    free_buffers(&b);
                    cr_assert_eq(n, 0, "shape %zu %s %s mask %#x: %d allocations in 5 calls", s,
                                 half ? "hp" : "fp", private_call ? "_p" : "_s", (unsigned)masks[m],
                                 n);
                }
}

/* The training step: after one call of each of the four cg_conv2d functions,
 * further calls allocate nothing, in both layouts, on 2 cores; shapes with
 * groups, stride and pads, and depthwise. */
Test(steady_state, conv2d_calls_after_the_first_allocate_nothing)
{
    /* clang-format off */
    const cg_conv2d shapes[] = {
        {.batch = 2, .in_h = 12, .in_w = 10, .in_c = 16, .out_c = 24, .kernel_h = 3, .kernel_w = 3,
         .groups = 2, .stride_h = 2, .stride_w = 1, .dilation_h = 1, .dilation_w = 2,
         .pad_top = 1, .pad_bottom = 0, .pad_left = 2, .pad_right = 1},
        {.batch = 2, .in_h = 12, .in_w = 10, .in_c = 16, .out_c = 16, .kernel_h = 3, .kernel_w = 3,
         .groups = 16, .stride_h = 1, .stride_w = 1, .dilation_h = 1, .dilation_w = 1,
         .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
    };
    /* clang-format on */
    const char *names[] = {"forward", "backward_data", "backward_weights", "backward_bias"};
    const int mask = 0x3;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int layout = 0; layout < 2; layout++) {
            cg_conv2d c = shapes[s];
            c.layout = (cg_layout)layout;
            const size_t nx = cref_x_elems(&c), ny = cref_y_elems(&c), nw = cref_w_elems(&c);
            float *x = calloc(nx, sizeof(float)), *dx = calloc(nx, sizeof(float));
            float *y = calloc(ny, sizeof(float)), *dy = calloc(ny, sizeof(float));
            float *w = calloc(nw, sizeof(float)), *dw = calloc(nw, sizeof(float));
            float *b = calloc((size_t)c.out_c, sizeof(float));
            float *db = calloc((size_t)c.out_c, sizeof(float));
            int counts[4] = {0, 0, 0, 0};
            for (int round = 0; round < 6; round++) { /* round 0: the first calls */
                for (int f = 0; f < 4; f++) {
                    atomic_store(&allocations, 0);
                    atomic_store(&counting, round > 0);
                    cg_status st;
                    if (f == 0)
                        st = cg_conv2d_forward(&c, x, w, b, y, mask);
                    else if (f == 1)
                        st = cg_conv2d_backward_data(&c, dy, w, dx, mask);
                    else if (f == 2)
                        st = cg_conv2d_backward_weights(&c, x, dy, dw, mask);
                    else
                        st = cg_conv2d_backward_bias(&c, dy, db, mask);
                    atomic_store(&counting, 0);
                    counts[f] += atomic_load(&allocations);
                    cr_assert_eq(st, CG_OK, "shape %zu layout %d %s: status %d", s, layout,
                                 names[f], st);
                }
            }
            free(x);
            free(dx);
            free(y);
            free(dy);
            free(w);
            free(dw);
            free(b);
            free(db);
            for (int f = 0; f < 4; f++)
                cr_expect_eq(counts[f], 0,
                             "shape %zu %s cg_conv2d_%s mask %#x: %d allocations in 5 calls", s,
                             layout ? "NCHW" : "NHWC", names[f], (unsigned)mask, counts[f]);
        }
}
