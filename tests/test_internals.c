/* SPDX-License-Identifier: MIT */
/* The library's internal pieces, each against a plain version of itself:
 * fp16 conversion, the shape-only plan (paths, splits), the fixed-order
 * reduction, and the steady-state promise that a call allocates nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "plan.h"
#include "reduce/reduce.h"
#include "support.h"

/* ---- fp16 -------------------------------------------------------------- */

Test(fp16, every_half_converts_exactly_to_float)
{
    static uint16_t halves[65536];
    static float fast[65536], portable[65536];
    for (int i = 0; i < 65536; i++)
        halves[i] = (uint16_t)i;
    cg_halves_to_floats(fast, halves, 65536);
    cg_f16_to_f32_ref(portable, halves, 65536);
    for (int i = 0; i < 65536; i++) {
        float want = ref_half_to_float((uint16_t)i);
        if (isnan(want)) {
            cr_assert(isnan(fast[i]) && isnan(portable[i]), "half %#06x: nan expected", i);
            continue;
        }
        cr_assert(memcmp(&fast[i], &want, 4) == 0, "half %#06x: bulk %a, want %a", i, fast[i],
                  want);
        cr_assert(memcmp(&portable[i], &want, 4) == 0, "half %#06x: scalar %a, want %a", i,
                  portable[i], want);
    }
}

/* Floats across every exponent a half can reach, plus the rounding edges:
 * each converts like the tests' own round-to-nearest-even. */
Test(fp16, floats_round_to_nearest_even)
{
    enum { N = 1 << 16 };
    static float f[N];
    static uint16_t fast[N], portable[N];
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int round = 0; round < 64; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t bits = (uint32_t)cgt_rng_next(&rng);
            if (i % 4 != 0) /* exponents near half's range, where rounding happens */
                bits = (bits & 0x807fffffu) | ((uint32_t)(98 + cgt_rng_int(&rng, 0, 46)) << 23);
            if (i % 8 == 1) /* exactly halfway between two halves */
                bits = (bits & 0xffffe000u) | 0x1000u;
            memcpy(&f[i], &bits, 4);
        }
        cg_floats_to_halves(fast, f, N);
        cg_f32_to_f16_ref(portable, f, N);
        for (int i = 0; i < N; i++) {
            uint16_t want = ref_float_to_half(f[i]);
            int nan = isnan(f[i]);
            cr_assert(nan ? (fast[i] & 0x7fff) > 0x7c00 : fast[i] == want,
                      "float %a: bulk %#06x, want %#06x", f[i], fast[i], want);
            cr_assert(nan ? (portable[i] & 0x7fff) > 0x7c00 : portable[i] == want,
                      "float %a: scalar %#06x, want %#06x", f[i], portable[i], want);
        }
    }
}

/* ---- the plan ---------------------------------------------------------- */

static ConvParameter shape(int cin, int cout, int g, int k, int stride, int dil, int pad)
{
    cgt_shape s = {.n = 2,
                   .h = 9,
                   .w = 7,
                   .cin = cin,
                   .cout = cout,
                   .kh = k,
                   .kw = k,
                   .g = g,
                   .sh = stride,
                   .sw = stride,
                   .dh = dil,
                   .dw = dil,
                   .pu = pad,
                   .pd = pad,
                   .pl = pad,
                   .pr = pad};
    return cgt_param(&s);
}

Test(plan, paths_follow_the_contract_conditions)
{
    const ConvParameter cases[] = {
        shape(8, 8, 8, 3, 1, 1, 1),  shape(8, 8, 8, 3, 2, 1, 0), shape(8, 8, 8, 3, 1, 2, 1),
        shape(8, 16, 8, 3, 1, 1, 1), shape(8, 8, 1, 1, 1, 1, 0), shape(8, 8, 1, 1, 2, 1, 0),
        shape(8, 8, 1, 1, 1, 2, 0),  shape(8, 8, 1, 1, 1, 1, 1), shape(8, 8, 2, 1, 1, 1, 0),
        shape(1, 1, 1, 1, 1, 1, 0),  shape(1, 1, 1, 3, 1, 1, 0), shape(4, 8, 2, 3, 1, 1, 0)};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int asym = 0; asym < 2; asym++) {
            ConvParameter p = cases[i];
            if (asym) /* a lone bottom/right pad also rules 1x1 out */
                p.pad_r_ = 1;
            cg_plan plan;
            cr_assert_eq(cg_plan_make(&p, 4, &plan), CG_OK);
            cgt_path want = cgt_path_of(&p);
            cg_path got = plan.path;
            int same = (want == CGT_PATH_DEPTHWISE && got == CG_PATH_DEPTHWISE) ||
                       (want == CGT_PATH_1X1 && got == CG_PATH_1X1) ||
                       (want == CGT_PATH_GENERAL && got == CG_PATH_GENERAL);
            char desc[256];
            cgt_param_str(&p, desc, sizeof desc);
            cr_assert(same, "%s: plan chose %s, the contract says %s", desc, cg_path_name(got),
                      cgt_path_name(want));
        }
    }
}

/* The rows of the long sum go to the cores whole, once, in order, balanced
 * to within one row: also for fewer rows than cores. */
Test(plan, row_split_covers_every_row_once_balanced)
{
    const int64_t rows[] = {1, 2, 3, 31, 32, 33, 1000, 100003, (int64_t)1 << 40};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (int members = 1; members <= 32; members++) {
            int64_t next = 0, lo = INT64_MAX, hi = 0;
            for (int r = 0; r < members; r++) {
                int64_t first, last;
                cg_split_range(rows[i], r, members, &first, &last);
                cr_assert_eq(first, next, "rows %lld, core %d of %d", (long long)rows[i], r,
                             members);
                cr_assert(last >= first);
                lo = last - first < lo ? last - first : lo;
                hi = last - first > hi ? last - first : hi;
                next = last;
            }
            cr_assert_eq(next, rows[i]);
            cr_assert(hi - lo <= 1, "rows %lld over %d cores: %lld..%lld", (long long)rows[i],
                      members, (long long)lo, (long long)hi);
        }
}

Test(plan, reduction_slices_are_disjoint_whole_lines)
{
    const size_t sizes[] = {1, 15, 16, 17, 100, 4096, 4097, 2359296};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int members = 1; members <= 32; members++) {
            size_t next = 0;
            for (int r = 0; r < members; r++) {
                size_t b, e;
                cg_reduce_slice(sizes[i], 16, r, members, &b, &e);
                cr_assert_eq(b, next, "n %zu core %d of %d", sizes[i], r, members);
                cr_assert(e >= b && (b % 16 == 0 || b == sizes[i]));
                next = e;
            }
            cr_assert_eq(next, sizes[i]);
        }
}

Test(plan, shared_tiles_stay_bounded)
{
    ConvParameter p = shape(512, 512, 1, 3, 1, 1, 1);
    cg_plan plan;
    cr_assert_eq(cg_plan_make(&p, 4, &plan), CG_OK);
    int64_t t = cg_shared_tile_rows(plan.row_len, 1 << 20);
    cr_assert(t >= 1 && t * plan.row_len * 4 <= (4 << 20), "tile of %lld rows", (long long)t);
    cr_assert_eq(cg_shared_tile_rows(plan.row_len, 3), 3);
}

/* ---- reduction ------------------------------------------------------------ */

Test(reduce, sums_partials_in_core_order)
{
    enum { N = 1000, PARTS = 7 };
    static float parts[PARTS * N], sum[N];
    cgt_rng rng;
    cgt_rng_seed(&rng, cgt_base_seed());
    for (int i = 0; i < PARTS * N; i++) /* wide magnitudes: order changes results */
        parts[i] = (float)(cgt_rng_sym(&rng) * pow(2.0, cgt_rng_int(&rng, -20, 20)));
    const float *part[PARTS];
    for (int p = 0; p < PARTS; p++)
        part[p] = parts + p * N;
    for (int nparts = 1; nparts <= PARTS; nparts++) {
        cg_reduce_partials(sum, part, nparts, 100, 900);
        for (int i = 100; i < 900; i++) {
            float want = parts[i];
            for (int p = 1; p < nparts; p++)
                want += parts[p * N + i];
            cr_assert(memcmp(&sum[i - 100], &want, 4) == 0, "element %d of %d parts", i, nparts);
        }
    }
}

/* ---- the workspace is written before it is read --------------------------- */

static void fill_nan(void *p, size_t bytes)
{
    const uint32_t nan_bits = 0x7fc00001u;
    for (size_t i = 0; i + 4 <= bytes; i += 4)
        memcpy((char *)p + i, &nan_bits, 4);
}

Test(workspace, nan_garbage_is_never_read)
{
    const ConvParameter shapes[] = {shape(8, 8, 8, 3, 1, 1, 1), shape(8, 6, 1, 1, 1, 1, 0),
                                    shape(6, 9, 3, 3, 2, 2, 1)};
    const int masks[] = {1, 0x3, 0x80000101, -1};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t m = 0; m < sizeof masks / sizeof *masks; m++)
            for (int private_call = 0; private_call < 2; private_call++) {
                ConvParameter p = shapes[i];
                size_t dy_n =
                    (size_t)p.output_batch_ * p.output_h_ * p.output_w_ * p.output_channel_;
                size_t x_n = (size_t)p.input_batch_ * p.input_h_ * p.input_w_ * p.input_channel_;
                size_t dw_n = (size_t)p.output_channel_ * p.kernel_h_ * p.kernel_w_ *
                              (p.input_channel_ / p.group_);
                size_t ws = private_call ? (size_t)p.buffer_size_ * 4
                                         : cg_grad_filter_workspace_bytes(&p, masks[m], 4);
                float *dy = calloc(dy_n, 4), *x = calloc(x_n, 4), *dw = calloc(dw_n, 4);
                for (size_t k = 0; k < dy_n; k++)
                    dy[k] = 1.0f;
                for (size_t k = 0; k < x_n; k++)
                    x[k] = 1.0f;
                p.workspace_ = malloc(ws);
                fill_nan(p.workspace_, ws);
                cg_status s = private_call
                                  ? cg_fp_conv_grad_filter_p(dy, x, dw, NULL, &p)
                                  : cg_fp_conv_grad_filter_s(dy, x, dw, NULL, &p, masks[m]);
                cr_assert_eq(s, CG_OK);
                for (size_t k = 0; k < dw_n; k++)
                    cr_assert(isfinite(dw[k]), "shape %zu mask %#x %s: dw[%zu] = %g", i,
                              (unsigned)masks[m], private_call ? "_p" : "_s", k, dw[k]);
                free(p.workspace_);
                free(dy);
                free(x);
                free(dw);
            }
}

/* ---- the column split ------------------------------------------------------ */

/* Shapes that `_s` splits by columns on 2..8 cores: 16-column chunks that
 * end mid-tap and mid-group, whole short groups several to a core, fp32 1x1
 * straight from x, micro-panels shared pass by pass (host mode, no more
 * cores than CPUs, fp32 without bias: columns_in_turn); each checked
 * against the reference with guard pages. */
Test(split, column_split_matches_the_reference)
{
    const cgt_shape shapes[] = {
        {.n = 2,
         .h = 7,
         .w = 6,
         .cin = 37,
         .cout = 11,
         .kh = 3,
         .kw = 3,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1}, /* chunks mid-tap */
        {.n = 1,
         .h = 5,
         .w = 9,
         .cin = 40,
         .cout = 6,
         .kh = 2,
         .kw = 3,
         .g = 2,
         .sh = 2,
         .dw = 2,
         .pl = 2}, /* chunks mid-group */
        {.n = 2,
         .h = 5,
         .w = 4,
         .cin = 60,
         .cout = 9,
         .kh = 2,
         .kw = 3,
         .g = 3,
         .pr = 1,
         .pd = 2}, /* a core's chunks span groups */
        {.n = 2,
         .h = 6,
         .w = 6,
         .cin = 64,
         .cout = 64,
         .kh = 3,
         .kw = 1,
         .g = 32,
         .pu = 1,
         .pd = 1},                                                         /* whole groups */
        {.n = 3, .h = 4, .w = 5, .cin = 300, .cout = 7, .kh = 1, .kw = 1}, /* 1x1 */
        {.n = 1, .h = 3, .w = 3, .cin = 129, .cout = 3, .kh = 3, .kw = 3, .pu = 2, .pl = 1},
        {.n = 1,
         .h = 4,
         .w = 4,
         .cin = 200,
         .cout = 5,
         .kh = 3,
         .kw = 3,
         .pu = 1,
         .pd = 1,
         .pl = 1,
         .pr = 1}}; /* the packed path's panels, 38 a pass */
    const int masks[] = {0x3, 0x7, 0xF, 0x80000001, 0xFF};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t m = 0; m < sizeof masks / sizeof *masks; m++)
            for (int dtype = 0; dtype < 2; dtype++)
                for (int mode = 0; mode < 4; mode++) {
                    cgt_case c = {.p = cgt_param(&shapes[i]),
                                  .dtype = dtype ? CGT_FP16 : CGT_FP32,
                                  .mode = mode & 1 ? CGT_S_SPMD : CGT_S_HOST,
                                  .core_mask = masks[m],
                                  .with_bias = mode < 2,
                                  .prefill = 1,
                                  .calls = 2,
                                  .seed = cgt_base_seed() + i};
                    cg_plan plan;
                    cr_assert_eq(cg_plan_make(&c.p, dtype ? 2 : 4, &plan), CG_OK);
                    cgt_result r = cgt_run_case(&c);
                    char desc[512];
                    cgt_case_str(&c, desc, sizeof desc);
                    cr_assert(r.ok, "%s (by %s): %s", desc,
                              cg_split_by_columns(&plan) ? "columns" : "slices", r.msg);
                }
}

/* The cut depends on the shape alone: by columns where dw's rows hold
 * enough units, else slices of the sum, a power of two, each a few passes
 * long, their partials bounded. */
Test(split, cut_by_the_shape_alone)
{
    ConvParameter wide = shape(64, 64, 1, 3, 1, 1, 1); /* 576 columns: 36 chunks */
    ConvParameter dw = shape(64, 64, 64, 3, 1, 1, 1);
    ConvParameter narrow = shape(64, 16, 1, 1, 1, 1, 1); /* 16 columns: one unit */
    cg_plan pw, pd, pn;
    cr_assert_eq(cg_plan_make(&wide, 4, &pw), CG_OK);
    cr_assert_eq(cg_plan_make(&dw, 4, &pd), CG_OK);
    cr_assert_eq(cg_plan_make(&narrow, 4, &pn), CG_OK);
    cr_assert_eq(cg_column_units(&pw), 36);
    cr_assert(cg_split_by_columns(&pw) && cg_sum_slices(&pw) == 1);
    cr_assert(!cg_split_by_columns(&pd), "depthwise never splits by columns");
    cr_assert(!cg_split_by_columns(&pn));
    for (const cg_plan *p = &pd; p; p = p == &pd ? &pn : NULL) {
        int64_t s = cg_sum_slices(p);
        cr_assert(s >= 1 && s <= CG_MAX_SLICES && (s & (s - 1)) == 0, "%lld slices", (long long)s);
        cr_assert(s == 1 || p->rows / s >= 512, "slices of %lld rows", (long long)(p->rows / s));
        cr_assert_leq((size_t)s * p->dw_elems * sizeof(float), (size_t)CG_SLICES_MOST_BYTES);
    }
    cr_assert_eq(cg_slices_of(100000, 512, 4), 32);
    cr_assert_eq(cg_slices_of(100000, 512, CG_SLICES_MOST_BYTES / 3), 2);
    cr_assert_eq(cg_slices_of(1000, 512, 4), 1);
}

/* The scratch query stays near the per-core tile target and is 0 for
 * invalid parameters. */
Test(split, scratch_bytes_bound_and_zero_when_invalid)
{
    ConvParameter p = shape(64, 64, 1, 3, 1, 1, 1);
    cr_assert_gt(cg_grad_filter_scratch_bytes(&p, 0x3), 0);
    cr_assert_leq(cg_grad_filter_scratch_bytes(&p, 0x3), (size_t)4 << 20);
    cr_assert_eq(cg_grad_filter_scratch_bytes(&p, 0), 0);
    /* many rows and a wide dy: fp16's converted dy counts against the tile too */
    cgt_shape wide_dy = {.n = 16, .h = 56, .w = 56, .cin = 64, .cout = 256, .kh = 1, .kw = 1};
    ConvParameter q = cgt_param(&wide_dy);
    cr_assert_leq(cg_grad_filter_scratch_bytes(&q, 0x3), (size_t)4 << 20, "%zu bytes",
                  cg_grad_filter_scratch_bytes(&q, 0x3));
    p.group_ = 5;
    cr_assert_eq(cg_grad_filter_scratch_bytes(&p, 0x3), 0);
    cr_assert_eq(cg_grad_filter_scratch_bytes(NULL, 0x3), 0);
}
