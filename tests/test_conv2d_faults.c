/* SPDX-License-Identifier: MIT */
/* Fault injection on the training-step functions (src/fault.h; this
 * executable links the CONVGRAD_FAULT_INJECTION copy of the library): a
 * core's scratch that cannot be allocated, and a core's thread that cannot
 * start. The failing call returns CG_ERR_NO_MEMORY / CG_ERR_THREAD (also in
 * cg_last_status, with a detail naming the core and, for scratch, the bytes
 * it could not get), its output is bit-for-bit untouched, and the next call is
 * exact (tests/conv2d_reference.c, integer data). Each case runs on cores no
 * other case uses, since the TSan tree runs every test in one process where
 * the cores' scratch persists. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "conv2d_reference.h"
#include "fault.h"
#include "support.h"

enum { OPS = 5, BIAS = 3, WEIGHTS_BIAS = 4 };
static const char *const OP_NAMES[OPS] = {"forward", "backward_data", "backward_weights",
                                          "backward_bias", "backward_weights_bias"};

/* out is the operation's output (backward_weights_bias: dw, and db its
 * second); before: what the caller had there; want: the reference. */
typedef struct buffers {
    cg_conv2d c;
    float *x, *w, *b, *dy, *out, *before, *want;
    float *db, *db_before, *db_want;
    size_t n_out;
} buffers;

static float *integers(cgt_rng *r, size_t n)
{
    float *v = malloc(n * sizeof(float));
    cr_assert(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)cgt_rng_int(r, -3, 3);
    return v;
}

/* A strided, padded, grouped convolution: every operation needs scratch
 * (dw's rows of 66 are the packed GEMM's, not the outer products'); the
 * bias, 64 images: NHWC's is summed by slices of dy's rows (with scratch)
 * only where there are 2048 rows or more, as the weight gradient's. */
static void buffers_init(buffers *f, cg_layout layout, int op)
{
    f->c = (cg_conv2d){.layout = layout,
                       .batch = op >= BIAS ? 64 : 2,
                       .in_h = 9,
                       .in_w = 8,
                       .in_c = 22,
                       .out_c = 4,
                       .kernel_h = 3,
                       .kernel_w = 2,
                       .groups = 2,
                       .stride_h = 2,
                       .stride_w = 1,
                       .dilation_h = 1,
                       .dilation_w = 2,
                       .pad_top = 1,
                       .pad_bottom = 2,
                       .pad_left = 0,
                       .pad_right = 1};
    cgt_rng r;
    cgt_rng_seed(&r, cgt_mix64(cgt_base_seed() ^ (uint64_t)(layout * OPS + op)));
    f->x = integers(&r, cref_x_elems(&f->c));
    f->w = integers(&r, cref_w_elems(&f->c));
    f->b = integers(&r, (size_t)f->c.out_c);
    f->dy = integers(&r, cref_y_elems(&f->c));
    const size_t sizes[OPS] = {cref_y_elems(&f->c), cref_x_elems(&f->c), cref_w_elems(&f->c),
                               (size_t)f->c.out_c, cref_w_elems(&f->c)};
    f->n_out = sizes[op];
    f->out = integers(&r, f->n_out); /* stands for whatever the caller had there */
    f->before = malloc(f->n_out * sizeof(float));
    f->want = malloc(f->n_out * sizeof(float));
    const size_t nb = (size_t)f->c.out_c;
    f->db = integers(&r, nb);
    f->db_before = malloc(nb * sizeof(float));
    f->db_want = malloc(nb * sizeof(float));
    cr_assert(f->before && f->want && f->db_before && f->db_want);
    memcpy(f->before, f->out, f->n_out * sizeof(float));
    memcpy(f->db_before, f->db, nb * sizeof(float));
    cref_backward_bias_f32(&f->c, f->dy, f->db_want);
    switch (op) {
    case 0:
        cref_forward_f32(&f->c, f->x, f->w, f->b, f->want);
        break;
    case 1:
        cref_backward_data_f32(&f->c, f->dy, f->w, f->want);
        break;
    case 2:
    case WEIGHTS_BIAS:
        cref_backward_weights_f32(&f->c, f->x, f->dy, f->want);
        break;
    default:
        cref_backward_bias_f32(&f->c, f->dy, f->want);
        break;
    }
}

static void buffers_free(buffers *f)
{
    free(f->x);
    free(f->w);
    free(f->b);
    free(f->dy);
    free(f->out);
    free(f->before);
    free(f->want);
    free(f->db);
    free(f->db_before);
    free(f->db_want);
}

static cg_status call(buffers *f, int op, int mask)
{
    switch (op) {
    case 0:
        return cg_conv2d_forward(&f->c, f->x, f->w, f->b, f->out, mask);
    case 1:
        return cg_conv2d_backward_data(&f->c, f->dy, f->w, f->out, mask);
    case 2:
        return cg_conv2d_backward_weights(&f->c, f->x, f->dy, f->out, mask);
    case WEIGHTS_BIAS:
        return cg_conv2d_backward_weights_bias(&f->c, f->x, f->dy, f->out, f->db, mask);
    default:
        return cg_conv2d_backward_bias(&f->c, f->dy, f->out, mask);
    }
}

/* The armed call fails with `want` and writes nothing; disarmed, the next
 * call is exact. */
static void fails_then_recovers(int op, cg_layout layout, int mask, cg_fault_point point,
                                cg_status want)
{
    buffers f;
    buffers_init(&f, layout, op);
    const char *what = OP_NAMES[op], *lay = layout == CG_LAYOUT_NCHW ? "NCHW" : "NHWC";
    cg_fault_arm(point, 1, -1);
    cg_status st = call(&f, op, mask);
    long fired = cg_fault_failures(point);
    cg_fault_disarm_all();
    cr_expect_eq(st, want, "%s %s: status %d, want %d", what, lay, st, want);
    cr_expect_eq(cg_last_status(), want, "%s %s: cg_last_status", what, lay);
    char why[400];
    cr_expect(cgt_core_failure_detail_ok(cg_last_error_detail(), want, mask, 0, why, sizeof why),
              "%s %s: %s", what, lay, why);
    cr_expect(fired > 0, "%s %s: the fault never fired", what, lay);
    cr_expect(memcmp(f.out, f.before, f.n_out * sizeof(float)) == 0,
              "%s %s: the failed call wrote its output", what, lay);
    const size_t db_bytes = (size_t)f.c.out_c * sizeof(float);
    cr_expect(memcmp(f.db, f.db_before, db_bytes) == 0, "%s %s: the failed call wrote db", what,
              lay);
    cr_expect_eq(call(&f, op, mask), CG_OK, "%s %s: the next call", what, lay);
    cr_expect(cg_last_error_detail()[0] == '\0', "%s %s: detail '%s' after the next call", what,
              lay, cg_last_error_detail());
    cr_expect(memcmp(f.out, f.want, f.n_out * sizeof(float)) == 0,
              "%s %s: the next call is not exact", what, lay);
    if (op == WEIGHTS_BIAS)
        cr_expect(memcmp(f.db, f.db_want, db_bytes) == 0, "%s %s: the next call's db is not exact",
                  what, lay);
    buffers_free(&f);
}

/* Cores 2*i and 2*i + 1 for case i (i < 10): fresh scratch every case. */
Test(conv2d_faults, scratch_allocation_fails_nothing_written, .timeout = 120.0)
{
    for (int layout = 0; layout < 2; layout++)
        for (int op = 0; op < OPS; op++)
            fails_then_recovers(op, (cg_layout)layout, 0x3 << (2 * (layout * OPS + op)),
                                CG_FAULT_SCRATCH_ALLOC, CG_ERR_NO_MEMORY);
}

/* Cores 30 and 31 start here: their threads are the pool's growth. */
Test(conv2d_faults, thread_start_fails_nothing_written, .timeout = 120.0)
{
    fails_then_recovers(2, CG_LAYOUT_NHWC, (int)0xC0000000u, CG_FAULT_THREAD_START, CG_ERR_THREAD);
}

/* NCHW without its NHWC copies (refused, as past 512 MiB or when they
 * cannot be had): every operation on NCHW's own path, exact, on cores 20-23
 * (a mask with fewer cores than the weight gradient's slices, and one with
 * as many). */
Test(conv2d_faults, nchw_own_path_exact, .timeout = 120.0)
{
    static const int masks[] = {0x100000, 0x300000, 0xF00000};
    for (int op = 0; op < OPS; op++)
        for (int m = 0; m < 3; m++) {
            buffers f;
            buffers_init(&f, CG_LAYOUT_NCHW, op);
            cg_fault_arm(CG_FAULT_NCHW_STAGING, 1, -1);
            const cg_status st = call(&f, op, masks[m]);
            const long refused = cg_fault_failures(CG_FAULT_NCHW_STAGING);
            cg_fault_disarm_all();
            cr_expect_eq(st, CG_OK, "%s on 0x%x: status %d", OP_NAMES[op], masks[m], st);
            cr_expect(refused == (op != BIAS), "%s: the copies refused %ld times", OP_NAMES[op],
                      refused);
            cr_expect(memcmp(f.out, f.want, f.n_out * sizeof(float)) == 0, "%s on 0x%x: not exact",
                      OP_NAMES[op], masks[m]);
            if (op == WEIGHTS_BIAS)
                cr_expect(memcmp(f.db, f.db_want, (size_t)f.c.out_c * sizeof(float)) == 0,
                          "%s on 0x%x: db not exact", OP_NAMES[op], masks[m]);
            buffers_free(&f);
        }
}

/* A depthwise 3x3 layer (2 images of 9x8, pads 1), its inputs, and dx, dw
 * and db from the reference. */
typedef struct depthwise_case {
    cg_conv2d c;
    float *x, *w, *dy, *want[3];
    size_t n[3];
} depthwise_case;

static const char *const BACKWARD_OUTPUTS[3] = {"dx", "dw", "db"};

static void depthwise_case_init(depthwise_case *d, cg_layout layout, int channels, int stride)
{
    d->c = (cg_conv2d){.layout = layout,
                       .batch = 2,
                       .in_h = 9,
                       .in_w = 8,
                       .in_c = channels,
                       .out_c = channels,
                       .kernel_h = 3,
                       .kernel_w = 3,
                       .groups = channels,
                       .stride_h = stride,
                       .stride_w = stride,
                       .dilation_h = 1,
                       .dilation_w = 1,
                       .pad_top = 1,
                       .pad_bottom = 1,
                       .pad_left = 1,
                       .pad_right = 1};
    cgt_rng r;
    cgt_rng_seed(&r, cgt_mix64(cgt_base_seed() ^ (uint64_t)((channels * 8 + stride) * 2 + layout)));
    d->n[0] = cref_x_elems(&d->c);
    d->n[1] = cref_w_elems(&d->c);
    d->n[2] = (size_t)channels;
    d->x = integers(&r, d->n[0]);
    d->w = integers(&r, d->n[1]);
    d->dy = integers(&r, cref_y_elems(&d->c));
    for (int k = 0; k < 3; k++) {
        d->want[k] = malloc(d->n[k] * sizeof(float));
        cr_assert(d->want[k]);
    }
    cref_backward_data_f32(&d->c, d->dy, d->w, d->want[0]);
    cref_backward_weights_f32(&d->c, d->x, d->dy, d->want[1]);
    cref_backward_bias_f32(&d->c, d->dy, d->want[2]);
}

static void depthwise_case_free(depthwise_case *d)
{
    for (int k = 0; k < 3; k++)
        free(d->want[k]);
    free(d->x);
    free(d->w);
    free(d->dy);
}

/* cg_conv2d_backward of a depthwise layer (dx computed inside the weight
 * gradient, in one launch), of one block of channels and of two, of stride
 * 1 and 2: a core's scratch that cannot be had leaves dx, dw and db
 * untouched; the next call is exact. NHWC: the cores have had the input
 * gradient's scratch alone before, so that two calls would write dx before
 * failing (NCHW's input gradient alone, by bands, takes more scratch than
 * the whole backward: not had first). Cores 24-29. */
static void backward_in_pieces_case(cg_layout layout, int channels, int stride, int mask)
{
    depthwise_case d;
    depthwise_case_init(&d, layout, channels, stride);
    cgt_rng r;
    cgt_rng_seed(&r, cgt_mix64(cgt_base_seed() ^ (uint64_t)channels));
    float *out[3], *before[3];
    for (int k = 0; k < 3; k++) {
        out[k] = integers(&r, d.n[k]);
        before[k] = malloc(d.n[k] * sizeof(float));
        cr_assert(before[k]);
        memcpy(before[k], out[k], d.n[k] * sizeof(float));
    }
    if (layout == CG_LAYOUT_NHWC) {
        float *warm = malloc(d.n[0] * sizeof(float));
        cr_assert(warm);
        cr_expect_eq(cg_conv2d_backward_data(&d.c, d.dy, d.w, warm, mask), CG_OK);
        free(warm);
    }
    cg_fault_arm(CG_FAULT_SCRATCH_ALLOC, 1, -1);
    cg_status st = cg_conv2d_backward(&d.c, d.x, d.dy, d.w, out[0], out[1], out[2], mask);
    const long fired = cg_fault_failures(CG_FAULT_SCRATCH_ALLOC);
    cg_fault_disarm_all();
    cr_expect_eq(st, CG_ERR_NO_MEMORY, "cg_conv2d_backward, %d channels: status %d", channels, st);
    cr_expect(fired > 0, "cg_conv2d_backward, %d channels: the fault never fired", channels);
    for (int k = 0; k < 3; k++)
        cr_expect(memcmp(out[k], before[k], d.n[k] * sizeof(float)) == 0,
                  "cg_conv2d_backward, %d channels: the failed call wrote %s", channels,
                  BACKWARD_OUTPUTS[k]);
    st = cg_conv2d_backward(&d.c, d.x, d.dy, d.w, out[0], out[1], out[2], mask);
    cr_expect_eq(st, CG_OK, "cg_conv2d_backward, %d channels: the next call's status %d", channels,
                 st);
    for (int k = 0; k < 3; k++) {
        cr_expect(memcmp(out[k], d.want[k], d.n[k] * sizeof(float)) == 0,
                  "cg_conv2d_backward, %d channels: the next call's %s is not exact", channels,
                  BACKWARD_OUTPUTS[k]);
        free(out[k]);
        free(before[k]);
    }
    depthwise_case_free(&d);
}

/* NCHW (on its staged NHWC copies, transposed once for both gradients)
 * after NHWC on the same cores, with twice the channels: their scratch
 * must grow (the tests may share one process: inprocess_runner). */
Test(conv2d_faults, backward_in_pieces_nothing_written, .timeout = 120.0)
{
    backward_in_pieces_case(CG_LAYOUT_NHWC, 16, 1, 0x3000000);
    backward_in_pieces_case(CG_LAYOUT_NHWC, 300, 1, 0xC000000);
    backward_in_pieces_case(CG_LAYOUT_NHWC, 48, 2, 0x30000000);
    backward_in_pieces_case(CG_LAYOUT_NCHW, 32, 1, 0x3000000);
    backward_in_pieces_case(CG_LAYOUT_NCHW, 600, 1, 0xC000000);
    backward_in_pieces_case(CG_LAYOUT_NCHW, 96, 2, 0x30000000);
}

/* NCHW without its NHWC copies: cg_conv2d_backward makes the two calls on
 * NCHW's own path, exact. */
Test(conv2d_faults, backward_nchw_own_path_exact, .timeout = 120.0)
{
    depthwise_case d;
    depthwise_case_init(&d, CG_LAYOUT_NCHW, 48, 2);
    float *got[3];
    for (int k = 0; k < 3; k++) {
        got[k] = malloc(d.n[k] * sizeof(float));
        cr_assert(got[k]);
    }
    cg_fault_arm(CG_FAULT_NCHW_STAGING, 1, -1);
    const cg_status st = cg_conv2d_backward(&d.c, d.x, d.dy, d.w, got[0], got[1], got[2], 0x3);
    const long refused = cg_fault_failures(CG_FAULT_NCHW_STAGING);
    cg_fault_disarm_all();
    cr_expect_eq(st, CG_OK, "status %d", st);
    cr_expect(refused > 0, "the copies were never refused");
    for (int k = 0; k < 3; k++) {
        cr_expect(memcmp(got[k], d.want[k], d.n[k] * sizeof(float)) == 0, "%s not exact",
                  BACKWARD_OUTPUTS[k]);
        free(got[k]);
    }
    depthwise_case_free(&d);
}
