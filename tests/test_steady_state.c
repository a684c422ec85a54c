/* After a first call, calls of the same shape allocate nothing: every
 * allocation function is wrapped (-Wl,--wrap) and counted while the steady
 * state runs, on every path, dtype and entry point. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

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
