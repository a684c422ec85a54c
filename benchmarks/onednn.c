/* SPDX-License-Identifier: MIT */
/* The oneDNN peers: convolution backward-weights (f32), src and diff_dst NHWC
 * in the caller's buffers, created once per shape and thread count, outside
 * any timing; and the training step (onednn_train_*): forward_training with
 * bias, backward data, and backward weights with its bias gradient.
 *
 * Weights layout. oneDNN 2.6 has no optimised backward-weights kernel that
 * writes plain OHWI: asked for OHWI (dnnl_ohwi, or dnnl_gohwi for groups) it
 * falls back to "ref:any", about 1000 times slower. So diff_weights is
 * created with format `any` (oneDNN picks its blocked layout and its fast
 * kernel) and only the primitive is timed; the conversion to OHWI, which a
 * caller wanting convgrad's layout would also pay, is a separate reorder,
 * timed on its own and used for the check. This favours oneDNN.
 *
 * Threads. Debian's libdnnl uses OpenMP (libgomp): DNNL_CPU_RUNTIME is
 * DNNL_RUNTIME_OMP. oneDNN sizes its work split from omp_get_max_threads()
 * when a primitive is created and runs on that many threads, so
 * omp_set_num_threads(k) is called before creating the primitive and again
 * before every execution (on the calling thread, whose ICV oneDNN reads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef CG_BENCH_HAVE_ONEDNN

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#else
#include <dnnl.h>
#endif

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define ONEDNN_RUNTIME "OpenMP"
static int set_threads(int n)
{
    omp_set_dynamic(0);
    omp_set_num_threads(n);
    return omp_get_max_threads() == n;
}
#elif DNNL_CPU_RUNTIME == DNNL_RUNTIME_SEQ
#define ONEDNN_RUNTIME "sequential"
static int set_threads(int n)
{
    return n == 1;
}
#else
#define ONEDNN_RUNTIME "TBB/threadpool (thread count not controlled here)"
static int set_threads(int n)
{
    (void)n;
    return 0;
}
#endif

struct onednn_conv {
    int threads;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, diff_dst, diff_w;
    dnnl_memory_t user_w;      /* OHWI view; its handle is set per copy */
    dnnl_primitive_t reorder;  /* NULL when oneDNN already writes OHWI */
    void *w_buf;               /* oneDNN's diff_weights, its layout */
    size_t w_bytes;
    char impl[64];
    int plain;
};

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
static int g_init_state; /* 0 not tried, 1 ok, -1 failed */

static int ensure_engine(void)
{
    if (g_init_state == 0) {
        g_init_state = -1;
        if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) == dnnl_success &&
            dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags) == dnnl_success)
            g_init_state = 1;
    }
    return g_init_state == 1;
}

int onednn_available(void)
{
    return ensure_engine();
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other";
    }
}

const char *onednn_describe(void)
{
    static char buf[256];
    if (!ensure_engine()) {
        snprintf(buf, sizeof buf, "oneDNN: not available (the CPU engine could not be created)");
        return buf;
    }
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (%s threading, max ISA %s)", v->major, v->minor,
             v->patch, ONEDNN_RUNTIME, isa_name(dnnl_get_effective_cpu_isa()));
    return buf;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success) {                                                                 \
            snprintf(err, errlen, "%s failed (status %d)", #call, (int)st_);                       \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* The descriptors of shape s, data type dt; weights as given in wtag. */
static dnnl_status_t make_descs(const bench_shape *s, dnnl_data_type_t dt, dnnl_format_tag_t wtag,
                                dnnl_memory_desc_t *src, dnnl_memory_desc_t *dst,
                                dnnl_memory_desc_t *w, dnnl_convolution_desc_t *fwd,
                                dnnl_convolution_desc_t *bwd)
{
    dnnl_dims_t sd = {s->n, s->cin, s->h, s->w};
    dnnl_dims_t dd = {s->n, s->cout, s->oh, s->ow};
    dnnl_dims_t str = {s->sh, s->sw};
    dnnl_dims_t dil = {s->dil_h - 1, s->dil_w - 1}; /* oneDNN counts dilation from 0 */
    dnnl_dims_t pl = {s->ph, s->pw};
    dnnl_dims_t pr = {s->pad_d, s->pad_r};
    dnnl_status_t st;
    if ((st = dnnl_memory_desc_init_by_tag(src, 4, sd, dt, dnnl_nhwc)) != dnnl_success)
        return st;
    if ((st = dnnl_memory_desc_init_by_tag(dst, 4, dd, dt, dnnl_nhwc)) != dnnl_success)
        return st;
    if (s->group == 1) {
        dnnl_dims_t wd = {s->cout, s->cin, s->kh, s->kw};
        st = dnnl_memory_desc_init_by_tag(w, 4, wd, dt, wtag);
    } else {
        dnnl_dims_t wd = {s->group, s->cout / s->group, s->cin / s->group, s->kh, s->kw};
        st = dnnl_memory_desc_init_by_tag(w, 5, wd, dt, wtag);
    }
    if (st != dnnl_success)
        return st;
    if ((st = dnnl_dilated_convolution_forward_desc_init(fwd, dnnl_forward_training,
                                                         dnnl_convolution_direct, src, w, NULL,
                                                         dst, str, dil, pl, pr)) != dnnl_success)
        return st;
    return dnnl_dilated_convolution_backward_weights_desc_init(bwd, dnnl_convolution_direct, src, w,
                                                               NULL, dst, str, dil, pl, pr);
}

onednn_conv *onednn_create(const bench_shape *s, int threads, const float *x, const float *dy,
                           char *err, size_t errlen)
{
    dnnl_primitive_desc_t fwd_pd = NULL, reorder_pd = NULL;
    onednn_conv *c = calloc(1, sizeof *c);
    if (!c || !ensure_engine()) {
        snprintf(err, errlen, "oneDNN engine not available");
        free(c);
        return NULL;
    }
    c->threads = threads;
    if (!set_threads(threads)) {
        snprintf(err, errlen, "cannot run oneDNN (%s) on exactly %d threads", ONEDNN_RUNTIME,
                 threads);
        goto fail;
    }
    const dnnl_format_tag_t plain_tag = s->group == 1 ? dnnl_ohwi : dnnl_gohwi;
    dnnl_memory_desc_t src_md, dst_md, w_any, w_plain;
    dnnl_convolution_desc_t fwd, bwd;
    TRY(make_descs(s, dnnl_f32, dnnl_format_tag_any, &src_md, &dst_md, &w_any, &fwd, &bwd));
    TRY(dnnl_primitive_desc_create(&fwd_pd, &fwd, NULL, g_engine, NULL));
    TRY(dnnl_primitive_desc_create(&c->pd, &bwd, NULL, g_engine, fwd_pd));
    TRY(dnnl_primitive_create(&c->prim, c->pd));
    const char *impl = NULL;
    dnnl_primitive_desc_query(c->pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(c->impl, sizeof c->impl, "%s", impl ? impl : "?");

    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(c->pd, dnnl_query_diff_weights_md, 0);
    if (s->group == 1) {
        dnnl_dims_t wd = {s->cout, s->cin, s->kh, s->kw};
        TRY(dnnl_memory_desc_init_by_tag(&w_plain, 4, wd, dnnl_f32, plain_tag));
    } else {
        dnnl_dims_t wd = {s->group, s->cout / s->group, s->cin / s->group, s->kh, s->kw};
        TRY(dnnl_memory_desc_init_by_tag(&w_plain, 5, wd, dnnl_f32, plain_tag));
    }
    c->plain = dnnl_memory_desc_equal(w_md, &w_plain);
    c->w_bytes = dnnl_memory_desc_get_size(w_md);
    c->w_buf = aligned_alloc(64, (c->w_bytes + 63) / 64 * 64);
    if (!c->w_buf) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    TRY(dnnl_memory_create(&c->src, &src_md, g_engine, (void *)x));
    TRY(dnnl_memory_create(&c->diff_dst, &dst_md, g_engine, (void *)dy));
    TRY(dnnl_memory_create(&c->diff_w, w_md, g_engine, c->w_buf));
    TRY(dnnl_memory_create(&c->user_w, &w_plain, g_engine, DNNL_MEMORY_NONE));
    if (!c->plain) {
        TRY(dnnl_reorder_primitive_desc_create(&reorder_pd, w_md, g_engine, &w_plain, g_engine,
                                               NULL));
        TRY(dnnl_primitive_create(&c->reorder, reorder_pd));
        dnnl_primitive_desc_destroy(reorder_pd);
        reorder_pd = NULL;
    }
    dnnl_primitive_desc_destroy(fwd_pd);
    return c;
fail:
    if (fwd_pd)
        dnnl_primitive_desc_destroy(fwd_pd);
    if (reorder_pd)
        dnnl_primitive_desc_destroy(reorder_pd);
    onednn_destroy(c);
    return NULL;
}

const char *onednn_impl(const onednn_conv *c)
{
    return c->impl;
}

const char *onednn_wformat(const onednn_conv *c)
{
    return c->plain ? "OHWI" : "blocked";
}

int onednn_execute(onednn_conv *c)
{
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, c->src},
                               {DNNL_ARG_DIFF_DST, c->diff_dst},
                               {DNNL_ARG_DIFF_WEIGHTS, c->diff_w}};
    if (dnnl_primitive_execute(c->prim, g_stream, 3, args) != dnnl_success)
        return -1;
    return dnnl_stream_wait(g_stream) == dnnl_success ? 0 : -1;
}

double onednn_to_ohwi(onednn_conv *c, float *dw)
{
    double t0 = bench_now();
    if (c->plain) {
        memcpy(dw, c->w_buf, c->w_bytes);
        return bench_now() - t0;
    }
    if (dnnl_memory_set_data_handle(c->user_w, dw) != dnnl_success)
        return -1.0;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, c->diff_w}, {DNNL_ARG_TO, c->user_w}};
    if (dnnl_primitive_execute(c->reorder, g_stream, 2, args) != dnnl_success ||
        dnnl_stream_wait(g_stream) != dnnl_success)
        return -1.0;
    return bench_now() - t0;
}

void onednn_set_threads(int threads)
{
    set_threads(threads);
}

void onednn_destroy(onednn_conv *c)
{
    if (!c)
        return;
    if (c->reorder)
        dnnl_primitive_destroy(c->reorder);
    if (c->user_w)
        dnnl_memory_destroy(c->user_w);
    if (c->diff_w)
        dnnl_memory_destroy(c->diff_w);
    if (c->diff_dst)
        dnnl_memory_destroy(c->diff_dst);
    if (c->src)
        dnnl_memory_destroy(c->src);
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->pd)
        dnnl_primitive_desc_destroy(c->pd);
    free(c->w_buf);
    free(c);
}

const char *onednn_fp16_note(const bench_shape *s)
{
    static char buf[160];
    dnnl_memory_desc_t src_md, dst_md, w_md;
    dnnl_convolution_desc_t fwd, bwd;
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    if (!ensure_engine())
        return "oneDNN not available";
    if (make_descs(s, dnnl_f16, dnnl_format_tag_any, &src_md, &dst_md, &w_md, &fwd, &bwd) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&fwd_pd, &fwd, NULL, g_engine, NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &bwd, NULL, g_engine, fwd_pd) != dnnl_success) {
        snprintf(buf, sizeof buf, "oneDNN has no f16 backward-weights for this CPU: not measured");
    } else {
        const char *impl = NULL;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        snprintf(buf, sizeof buf, "oneDNN f16 backward-weights would use %s: not measured",
                 impl ? impl : "?");
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (fwd_pd)
        dnnl_primitive_desc_destroy(fwd_pd);
    return buf;
}

/* ---- the training step ------------------------------------------------------
 *
 * Three primitives on one shape and thread count, each made with its own
 * primitive descriptor (the forward_training one is the hint of the two
 * backward ones): forward_training with bias (dst = y), backward data
 * (diff_src = dx) and backward weights with diff_bias (dw, db: oneDNN
 * computes the bias gradient inside the backward-weights primitive, no
 * separate primitive). Activations are plain NHWC: src and diff_dst are the
 * caller's x and dy in place, dst and diff_src the caller's y and dx. Weights
 * (forward and backward data) and diff_weights are created with format `any`:
 * asked for plain OHWI (dnnl_ohwi, dnnl_gohwi) oneDNN 2.6 picks "ref:any" for
 * all three primitives on the bench's layers (checked on dense 3x3, 1x1, the
 * 7x7 stem, depthwise and grouped), so it keeps its blocked layouts, as a
 * framework training with oneDNN does (with any, e.g. brgconv forward and
 * jit backward kernels on avx512_core). The caller's OHWI w is reordered once
 * into each primitive's weights layout here, when the peer is made (forward
 * and backward data may want different layouts: two copies); diff_weights is
 * reordered to OHWI after the rounds, only for the checks. None of these
 * reorders is timed: this favours oneDNN. */

struct onednn_train {
    int threads;
    dnnl_primitive_desc_t pd[3]; /* forward, backward data, backward weights */
    dnnl_primitive_t prim[3];
    dnnl_memory_t src, w_fwd, bias, dst;    /* forward */
    dnnl_memory_t diff_dst, w_bwd, diff_src; /* backward data */
    dnnl_memory_t diff_w, diff_b;           /* backward weights (src, diff_dst shared) */
    dnnl_memory_t user_w;                   /* an OHWI view; handle set per reorder */
    void *w_fwd_buf, *w_bwd_buf, *diff_w_buf; /* oneDNN's own layouts (NULL: caller's) */
    dnnl_primitive_t dw_reorder;            /* diff_weights -> OHWI; NULL when plain */
    size_t dw_bytes;
    char impl[160];
};

/* A oneDNN-layout copy of the caller's plain weights `user` (reordered once),
 * or the caller's buffer itself when oneDNN chose the plain layout. */
static dnnl_status_t weights_in(const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *plain,
                                const float *user, void **own, dnnl_memory_t *mem)
{
    dnnl_status_t st;
    *own = NULL;
    if (dnnl_memory_desc_equal(want, plain))
        return dnnl_memory_create(mem, want, g_engine, (void *)user);
    size_t bytes = dnnl_memory_desc_get_size(want);
    *own = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!*own)
        return dnnl_out_of_memory;
    if ((st = dnnl_memory_create(mem, want, g_engine, *own)) != dnnl_success)
        return st;
    dnnl_memory_t from = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    if ((st = dnnl_memory_create(&from, plain, g_engine, (void *)user)) == dnnl_success &&
        (st = dnnl_reorder_primitive_desc_create(&rpd, plain, g_engine, want, g_engine, NULL)) ==
            dnnl_success &&
        (st = dnnl_primitive_create(&r, rpd)) == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *mem}};
        if ((st = dnnl_primitive_execute(r, g_stream, 2, args)) == dnnl_success)
            st = dnnl_stream_wait(g_stream);
    }
    if (r)
        dnnl_primitive_destroy(r);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    if (from)
        dnnl_memory_destroy(from);
    return st;
}

static const char *pd_impl(dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl ? impl : "?";
}

onednn_train *onednn_train_create(const bench_shape *s, int threads, const float *x,
                                  const float *w, const float *b, const float *dy, float *y,
                                  float *dx, float *db, char *err, size_t errlen)
{
    dnnl_primitive_desc_t reorder_pd = NULL;
    onednn_train *c = calloc(1, sizeof *c);
    if (!c || !ensure_engine()) {
        snprintf(err, errlen, "oneDNN engine not available");
        free(c);
        return NULL;
    }
    c->threads = threads;
    if (!set_threads(threads)) {
        snprintf(err, errlen, "cannot run oneDNN (%s) on exactly %d threads", ONEDNN_RUNTIME,
                 threads);
        goto fail;
    }
    dnnl_memory_desc_t src_md, dst_md, w_any, w_plain, b_md;
    dnnl_convolution_desc_t fwd, bwd_d, bwd_w;
    dnnl_dims_t str = {s->sh, s->sw};
    dnnl_dims_t dil = {s->dil_h - 1, s->dil_w - 1};
    dnnl_dims_t pl = {s->ph, s->pw};
    dnnl_dims_t pr = {s->pad_d, s->pad_r};
    dnnl_dims_t bd = {s->cout};
    {
        dnnl_dims_t sd = {s->n, s->cin, s->h, s->w};
        dnnl_dims_t dd = {s->n, s->cout, s->oh, s->ow};
        TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, sd, dnnl_f32, dnnl_nhwc));
        TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, dnnl_nhwc));
        TRY(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x));
    }
    if (s->group == 1) {
        dnnl_dims_t wd = {s->cout, s->cin, s->kh, s->kw};
        TRY(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&w_plain, 4, wd, dnnl_f32, dnnl_ohwi));
    } else {
        dnnl_dims_t wd = {s->group, s->cout / s->group, s->cin / s->group, s->kh, s->kw};
        TRY(dnnl_memory_desc_init_by_tag(&w_any, 5, wd, dnnl_f32, dnnl_format_tag_any));
        TRY(dnnl_memory_desc_init_by_tag(&w_plain, 5, wd, dnnl_f32, dnnl_gohwi));
    }
    TRY(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training,
                                                   dnnl_convolution_direct, &src_md, &w_any, &b_md,
                                                   &dst_md, str, dil, pl, pr));
    TRY(dnnl_dilated_convolution_backward_data_desc_init(&bwd_d, dnnl_convolution_direct, &src_md,
                                                         &w_any, &dst_md, str, dil, pl, pr));
    TRY(dnnl_dilated_convolution_backward_weights_desc_init(&bwd_w, dnnl_convolution_direct,
                                                            &src_md, &w_any, &b_md, &dst_md, str,
                                                            dil, pl, pr));
    TRY(dnnl_primitive_desc_create(&c->pd[0], &fwd, NULL, g_engine, NULL));
    TRY(dnnl_primitive_desc_create(&c->pd[1], &bwd_d, NULL, g_engine, c->pd[0]));
    TRY(dnnl_primitive_desc_create(&c->pd[2], &bwd_w, NULL, g_engine, c->pd[0]));
    for (int k = 0; k < 3; ++k)
        TRY(dnnl_primitive_create(&c->prim[k], c->pd[k]));
    snprintf(c->impl, sizeof c->impl, "fwd %s, bwd-data %s, bwd-weights %s", pd_impl(c->pd[0]),
             pd_impl(c->pd[1]), pd_impl(c->pd[2]));

    /* forward: x, w (its layout), b, y */
    TRY(dnnl_memory_create(&c->src, &src_md, g_engine, (void *)x));
    TRY(dnnl_memory_create(&c->bias, &b_md, g_engine, (void *)b));
    TRY(dnnl_memory_create(&c->dst, &dst_md, g_engine, y));
    TRY(weights_in(dnnl_primitive_desc_query_md(c->pd[0], dnnl_query_weights_md, 0), &w_plain, w,
                   &c->w_fwd_buf, &c->w_fwd));
    /* backward data: dy, w (its layout), dx */
    TRY(dnnl_memory_create(&c->diff_dst, &dst_md, g_engine, (void *)dy));
    TRY(dnnl_memory_create(&c->diff_src, &src_md, g_engine, dx));
    TRY(weights_in(dnnl_primitive_desc_query_md(c->pd[1], dnnl_query_weights_md, 0), &w_plain, w,
                   &c->w_bwd_buf, &c->w_bwd));
    /* backward weights: x, dy, dw (its layout), db */
    const dnnl_memory_desc_t *dw_md =
        dnnl_primitive_desc_query_md(c->pd[2], dnnl_query_diff_weights_md, 0);
    c->dw_bytes = dnnl_memory_desc_get_size(dw_md);
    c->diff_w_buf = aligned_alloc(64, (c->dw_bytes + 63) / 64 * 64);
    if (!c->diff_w_buf) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    TRY(dnnl_memory_create(&c->diff_w, dw_md, g_engine, c->diff_w_buf));
    TRY(dnnl_memory_create(&c->diff_b, &b_md, g_engine, db));
    TRY(dnnl_memory_create(&c->user_w, &w_plain, g_engine, DNNL_MEMORY_NONE));
    if (!dnnl_memory_desc_equal(dw_md, &w_plain)) {
        TRY(dnnl_reorder_primitive_desc_create(&reorder_pd, dw_md, g_engine, &w_plain, g_engine,
                                               NULL));
        TRY(dnnl_primitive_create(&c->dw_reorder, reorder_pd));
        dnnl_primitive_desc_destroy(reorder_pd);
        reorder_pd = NULL;
    }
    return c;
fail:
    if (reorder_pd)
        dnnl_primitive_desc_destroy(reorder_pd);
    onednn_train_destroy(c);
    return NULL;
}

const char *onednn_train_impl(const onednn_train *c)
{
    return c->impl;
}

int onednn_train_execute(onednn_train *c, double t[3])
{
    dnnl_exec_arg_t fa[4] = {{DNNL_ARG_SRC, c->src},
                             {DNNL_ARG_WEIGHTS, c->w_fwd},
                             {DNNL_ARG_BIAS, c->bias},
                             {DNNL_ARG_DST, c->dst}};
    dnnl_exec_arg_t da[3] = {{DNNL_ARG_DIFF_DST, c->diff_dst},
                             {DNNL_ARG_WEIGHTS, c->w_bwd},
                             {DNNL_ARG_DIFF_SRC, c->diff_src}};
    dnnl_exec_arg_t wa[4] = {{DNNL_ARG_SRC, c->src},
                             {DNNL_ARG_DIFF_DST, c->diff_dst},
                             {DNNL_ARG_DIFF_WEIGHTS, c->diff_w},
                             {DNNL_ARG_DIFF_BIAS, c->diff_b}};
    const dnnl_exec_arg_t *args[3] = {fa, da, wa};
    const int nargs[3] = {4, 3, 4};
    double t0 = bench_now();
    for (int k = 0; k < 3; ++k) {
        if (dnnl_primitive_execute(c->prim[k], g_stream, nargs[k], args[k]) != dnnl_success ||
            dnnl_stream_wait(g_stream) != dnnl_success)
            return -1;
        double t1 = bench_now();
        t[k] = t1 - t0;
        t0 = t1;
    }
    return 0;
}

int onednn_train_dw_ohwi(onednn_train *c, float *dw)
{
    if (!c->dw_reorder) {
        memcpy(dw, c->diff_w_buf, c->dw_bytes);
        return 0;
    }
    if (dnnl_memory_set_data_handle(c->user_w, dw) != dnnl_success)
        return -1;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, c->diff_w}, {DNNL_ARG_TO, c->user_w}};
    if (dnnl_primitive_execute(c->dw_reorder, g_stream, 2, args) != dnnl_success ||
        dnnl_stream_wait(g_stream) != dnnl_success)
        return -1;
    return 0;
}

void onednn_train_destroy(onednn_train *c)
{
    if (!c)
        return;
    dnnl_memory_t *mems[] = {&c->src,      &c->w_fwd,  &c->bias,   &c->dst,
                             &c->diff_dst, &c->w_bwd,  &c->diff_src, &c->diff_w,
                             &c->diff_b,   &c->user_w};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; ++i)
        if (*mems[i])
            dnnl_memory_destroy(*mems[i]);
    if (c->dw_reorder)
        dnnl_primitive_destroy(c->dw_reorder);
    for (int k = 0; k < 3; ++k) {
        if (c->prim[k])
            dnnl_primitive_destroy(c->prim[k]);
        if (c->pd[k])
            dnnl_primitive_desc_destroy(c->pd[k]);
    }
    free(c->w_fwd_buf);
    free(c->w_bwd_buf);
    free(c->diff_w_buf);
    free(c);
}

#else /* no oneDNN */

struct onednn_conv {
    int unused;
};

int onednn_available(void)
{
    return 0;
}

const char *onednn_describe(void)
{
#ifdef CG_BENCH_ONEDNN_WHY
    return "oneDNN: not available (" CG_BENCH_ONEDNN_WHY ")";
#else
    return "oneDNN: not available (not found at build time: install libdnnl-dev and reconfigure)";
#endif
}

onednn_conv *onednn_create(const bench_shape *s, int threads, const float *x, const float *dy,
                           char *err, size_t errlen)
{
    (void)s;
    (void)threads;
    (void)x;
    (void)dy;
    snprintf(err, errlen, "oneDNN not available");
    return NULL;
}

const char *onednn_impl(const onednn_conv *c)
{
    (void)c;
    return "-";
}

const char *onednn_wformat(const onednn_conv *c)
{
    (void)c;
    return "-";
}

int onednn_execute(onednn_conv *c)
{
    (void)c;
    return -1;
}

double onednn_to_ohwi(onednn_conv *c, float *dw)
{
    (void)c;
    (void)dw;
    return -1.0;
}

void onednn_set_threads(int threads)
{
    (void)threads;
}

void onednn_destroy(onednn_conv *c)
{
    (void)c;
}

const char *onednn_fp16_note(const bench_shape *s)
{
    (void)s;
    return "oneDNN not available";
}

struct onednn_train {
    int unused;
};

onednn_train *onednn_train_create(const bench_shape *s, int threads, const float *x,
                                  const float *w, const float *b, const float *dy, float *y,
                                  float *dx, float *db, char *err, size_t errlen)
{
    (void)s;
    (void)threads;
    (void)x;
    (void)w;
    (void)b;
    (void)dy;
    (void)y;
    (void)dx;
    (void)db;
    snprintf(err, errlen, "oneDNN not available");
    return NULL;
}

const char *onednn_train_impl(const onednn_train *c)
{
    (void)c;
    return "-";
}

int onednn_train_execute(onednn_train *c, double t[3])
{
    (void)c;
    (void)t;
    return -1;
}

int onednn_train_dw_ohwi(onednn_train *c, float *dw)
{
    (void)c;
    (void)dw;
    return -1;
}

void onednn_train_destroy(onednn_train *c)
{
    (void)c;
}

#endif
