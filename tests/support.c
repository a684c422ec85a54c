/* SPDX-License-Identifier: MIT */
/* Test support; see support.h. */
#define _DEFAULT_SOURCE /* mmap flags, sysconf */
#include "support.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- RNG ------------------------------------------------------------------ */

uint64_t cgt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cgt_rng_seed(cgt_rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t cgt_rng_next(cgt_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return cgt_mix64(r->s);
}

int cgt_rng_int(cgt_rng *r, int lo, int hi)
{
    if (hi <= lo)
        return lo;
    const uint64_t span = (uint64_t)((int64_t)hi - (int64_t)lo) + 1u;
    return (int)((int64_t)lo + (int64_t)(cgt_rng_next(r) % span));
}

double cgt_rng_unit(cgt_rng *r)
{
    return (double)(cgt_rng_next(r) >> 11) * 0x1.0p-53;
}

double cgt_rng_sym(cgt_rng *r)
{
    return 2.0 * cgt_rng_unit(r) - 1.0;
}

int cgt_rng_pick(cgt_rng *r, const int *v, int n)
{
    return v[cgt_rng_int(r, 0, n - 1)];
}

int cgt_rng_chance(cgt_rng *r, int percent)
{
    return cgt_rng_int(r, 0, 99) < percent;
}

cgt_rng cgt_rng_seeded(uint64_t seed)
{
    cgt_rng r;
    cgt_rng_seed(&r, seed);
    return r;
}

uint64_t cgt_base_seed(void)
{
    const char *s = getenv("CGT_SEED");
    if (s && *s)
        return (uint64_t)strtoull(s, NULL, 0);
    return 0x5eed0c0de2024ULL;
}

/* ---- data ----------------------------------------------------------------- */

void cgt_fill_f32(cgt_rng *r, float *v, size_t n, double range)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = (float)(range * cgt_rng_sym(r));
}

void cgt_fill_f16(cgt_rng *r, void *bits, size_t n, double range)
{
    for (size_t i = 0; i < n; ++i)
        ref_half_store(bits, i, ref_float_to_half((float)(range * cgt_rng_sym(r))));
}

void cgt_fill(cgt_rng *r, cgt_dtype dt, void *v, size_t n, double range)
{
    if (dt == CGT_FP32)
        cgt_fill_f32(r, v, n, range);
    else
        cgt_fill_f16(r, v, n, range);
}

void cgt_fill_dyadic_f32(cgt_rng *r, float *v, size_t n, int range)
{
    for (size_t i = 0; i < n; ++i)
        v[i] = (float)cgt_rng_int(r, -32 * range, 32 * range) / 32.0f;
}

void cgt_fill_dyadic_f16(cgt_rng *r, void *bits, size_t n, int range)
{
    for (size_t i = 0; i < n; ++i)
        ref_half_store(bits, i,
                       ref_float_to_half((float)cgt_rng_int(r, -32 * range, 32 * range) / 32.0f));
}

void cgt_fill_bytes(cgt_rng *r, void *p, size_t n)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; ++i)
        b[i] = (unsigned char)(cgt_rng_next(r) >> 56);
}

uint64_t cgt_fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; ++i) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---- guard-page buffers ---------------------------------------------------- */

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE); /* no static: test threads call this concurrently */
}

static unsigned char canary_byte(size_t i)
{
    return (unsigned char)(0xA5u ^ (unsigned)(i * 131u) ^ (unsigned)(i >> 8));
}

void cgt_buf_alloc(cgt_buf *b, size_t n, size_t slack, int where)
{
    const size_t ps = page_size();
    size_t pages = (n + slack + ps - 1) / ps;
    if (pages == 0)
        pages = 1;
    memset(b, 0, sizeof *b);
    b->data_len = pages * ps;
    b->map_len = b->data_len + 2 * ps;
    void *m = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "cgt_buf_alloc: mmap of %zu bytes failed\n", b->map_len);
        abort();
    }
    b->map = m;
    b->data = b->map + ps;
    if (mprotect(b->map, ps, PROT_NONE) != 0 ||
        mprotect(b->data + b->data_len, ps, PROT_NONE) != 0) {
        fprintf(stderr, "cgt_buf_alloc: mprotect failed\n");
        abort();
    }
    b->n = n;
    b->ptr = where == CGT_AT_START ? b->data + slack : b->data + b->data_len - slack - n;
    for (size_t i = 0; i < b->data_len; ++i)
        b->data[i] = canary_byte(i);
}

void cgt_buf_free(cgt_buf *b)
{
    if (b->map)
        munmap(b->map, b->map_len);
    memset(b, 0, sizeof *b);
}

long long cgt_buf_canary_damage(const cgt_buf *b)
{
    const size_t lo = (size_t)(b->ptr - b->data), hi = lo + b->n;
    for (size_t i = 0; i < b->data_len; ++i) {
        if (i >= lo && i < hi)
            continue;
        if (b->data[i] != canary_byte(i))
            return (long long)i - (long long)lo;
    }
    return -1;
}

void cgt_buf_readonly(cgt_buf *b)
{
    if (mprotect(b->data, b->data_len, PROT_READ) != 0) {
        fprintf(stderr, "cgt_buf_readonly: mprotect failed\n");
        abort();
    }
}

/* ---- shapes ---------------------------------------------------------------- */

long long cgt_fwd_out(int in, int pa, int pb, int k, int dil, int stride)
{
    const long long num = (long long)in + pa + pb - (long long)dil * (k - 1) - 1;
    if (num < 0)
        return 0;
    return num / stride + 1;
}

ConvParameter cgt_param(const cgt_shape *s)
{
    ConvParameter p;
    memset(&p, 0, sizeof p);
    p.output_batch_ = p.input_batch_ = s->n;
    p.input_h_ = s->h;
    p.input_w_ = s->w;
    p.input_channel_ = s->cin;
    p.output_channel_ = s->cout;
    p.kernel_h_ = s->kh;
    p.kernel_w_ = s->kw;
    p.group_ = s->g ? s->g : 1;
    p.stride_h_ = s->sh ? s->sh : 1;
    p.stride_w_ = s->sw ? s->sw : 1;
    p.dilation_h_ = s->dh ? s->dh : 1;
    p.dilation_w_ = s->dw ? s->dw : 1;
    p.pad_u_ = s->pu;
    p.pad_d_ = s->pd;
    p.pad_l_ = s->pl;
    p.pad_r_ = s->pr;
    if (s->oh > 0) {
        p.output_h_ = s->oh;
    } else {
        long long o = cgt_fwd_out(s->h, s->pu, s->pd, s->kh, p.dilation_h_, p.stride_h_);
        p.output_h_ = o < 1 ? 1 : (int)o;
    }
    if (s->ow > 0) {
        p.output_w_ = s->ow;
    } else {
        long long o = cgt_fwd_out(s->w, s->pl, s->pr, s->kw, p.dilation_w_, p.stride_w_);
        p.output_w_ = o < 1 ? 1 : (int)o;
    }
    p.buffer_size_ = s->bs > 0 ? s->bs : 0x10000;
    return p;
}

long long cgt_min_buffer(const ConvParameter *p, size_t dtype_size)
{
    const double v = 2.0 * p->kernel_h_ * p->kernel_w_ * (p->input_channel_ / p->group_) *
                     (double)dtype_size; /* exact below 2^53; no int64 overflow */
    return v > INT_MAX ? -1 : (long long)v;
}

int cgt_popcount(int mask)
{
    unsigned m = (unsigned)mask;
    int c = 0;
    while (m) {
        m &= m - 1;
        ++c;
    }
    return c;
}

size_t cgt_ws_bytes_s(const ConvParameter *p, int core_mask)
{
    const size_t a = (size_t)p->buffer_size_ * sizeof(float);
    const size_t b = (size_t)cgt_popcount(core_mask) * ref_dw_elems(p) * sizeof(float);
    return a > b ? a : b;
}

cgt_path cgt_path_of(const ConvParameter *p)
{
    if (p->output_channel_ == p->group_ && p->group_ == p->input_channel_ && p->dilation_h_ == 1 &&
        p->dilation_w_ == 1)
        return CGT_PATH_DEPTHWISE;
    if (p->kernel_h_ == 1 && p->kernel_w_ == 1 && p->pad_u_ == 0 && p->pad_d_ == 0 &&
        p->pad_l_ == 0 && p->pad_r_ == 0 && p->dilation_h_ == 1 && p->dilation_w_ == 1 &&
        p->stride_h_ == 1 && p->stride_w_ == 1 && p->group_ == 1)
        return CGT_PATH_1X1;
    return CGT_PATH_GENERAL;
}

const char *cgt_path_name(cgt_path path)
{
    switch (path) {
    case CGT_PATH_DEPTHWISE:
        return "depthwise";
    case CGT_PATH_1X1:
        return "1x1";
    default:
        return "general";
    }
}

void cgt_param_str(const ConvParameter *p, char *buf, size_t len)
{
    snprintf(buf, len,
             "[%s] N=%d/%d H=%d W=%d Cin=%d Cout=%d K=%dx%d G=%d stride=%dx%d dil=%dx%d "
             "pad(u=%d d=%d l=%d r=%d) OH=%d OW=%d buffer_size_=%d",
             cgt_path_name(cgt_path_of(p)), p->input_batch_, p->output_batch_, p->input_h_,
             p->input_w_, p->input_channel_, p->output_channel_, p->kernel_h_, p->kernel_w_,
             p->group_, p->stride_h_, p->stride_w_, p->dilation_h_, p->dilation_w_, p->pad_u_,
             p->pad_d_, p->pad_l_, p->pad_r_, p->output_h_, p->output_w_, p->buffer_size_);
}

void cgt_draw_kernel_geom(cgt_rng *r, cgt_shape *s, int maxk, int maxs, int maxd, int maxp)
{
    s->kh = cgt_rng_int(r, 1, maxk);
    s->kw = cgt_rng_int(r, 1, maxk);
    s->sh = cgt_rng_int(r, 1, maxs);
    s->sw = cgt_rng_int(r, 1, maxs);
    s->dh = cgt_rng_int(r, 1, maxd);
    s->dw = cgt_rng_int(r, 1, maxd);
    s->pu = cgt_rng_int(r, 0, maxp);
    s->pd = cgt_rng_int(r, 0, maxp);
    s->pl = cgt_rng_int(r, 0, maxp);
    s->pr = cgt_rng_int(r, 0, maxp);
}

cgt_shape cgt_card_shape(void)
{
    cgt_shape s = {.n = 4, .h = 4, .w = 4, .cin = 4, .cout = 4, .kh = 3, .kw = 3};
    s.oh = s.ow = 2;
    s.bs = 0x10000;
    return s;
}

/* ---- run_case -------------------------------------------------------------- */

const char *cgt_mode_name(cgt_mode m)
{
    switch (m) {
    case CGT_S_HOST:
        return "_s host";
    case CGT_S_SPMD:
        return "_s SPMD";
    case CGT_P_HOST:
        return "_p host";
    default:
        return "_p SPMD";
    }
}

void cgt_case_str(const cgt_case *c, char *buf, size_t len)
{
    char ps[400];
    cgt_param_str(&c->p, ps, sizeof ps);
    snprintf(buf, len,
             "seed=0x%016llx %s %s%s mask=0x%08x bias=%d prefill=%d calls=%d ws_slack=%zu "
             "out_slack=%zu%s%s%s%s%s%s %s",
             (unsigned long long)c->seed, c->dtype == CGT_FP16 ? "hp" : "fp",
             cgt_mode_name(c->mode),
             c->api == CGT_API_STATUS ? " (cg_* twin)" : " (void+cg_last_status)",
             (unsigned)c->core_mask, c->with_bias, c->prefill, c->calls ? c->calls : 1, c->ws_slack,
             c->out_slack, c->ws_at_start ? " ws@start" : "", c->in_at_start ? " inputs@start" : "",
             c->readonly_inputs ? " ro-inputs" : "", c->zero_dy ? " zero-dy" : "",
             c->fp16_tiny ? " fp16-tiny"
             : c->dyadic  ? " dyadic"
                          : "",
             c->exact ? " exact" : "", ps);
}

cgt_result cgt_result_passing(void)
{
    cgt_result r;
    memset(&r, 0, sizeof r);
    r.ok = 1;
    return r;
}

void cgt_result_addf(cgt_result *r, const char *fmt, ...)
{
    size_t used = strlen(r->msg);
    if (used + 1 >= sizeof r->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + used, sizeof r->msg - used, fmt, ap);
    va_end(ap);
}

int cgt_core_failure_detail_ok(const char *detail, cg_status s, int core_mask, size_t most_bytes,
                               char *why, size_t why_len)
{
    int core = -1, end = 0;
    unsigned mask = 0;
    size_t bytes = 0;
    if (s == CG_ERR_NO_MEMORY) {
        sscanf(detail, "core %d of core_mask 0x%x could not allocate %zu bytes of scratch%n", &core,
               &mask, &bytes, &end);
        if (end == 0 || detail[end] != '\0' || mask != (unsigned)core_mask || bytes == 0 ||
            (most_bytes > 0 && bytes > most_bytes)) {
            snprintf(why, why_len,
                     "'%s' is not \"core N of core_mask 0x%08x could not allocate B bytes of "
                     "scratch\" with 0 < B <= %zu",
                     detail, (unsigned)core_mask, most_bytes);
            return 0;
        }
    } else if (s == CG_ERR_THREAD) {
        sscanf(detail, "the thread of core %d could not be started: %n", &core, &end);
        if (end == 0 || detail[end] == '\0') {
            snprintf(why, why_len, "'%s' is not \"the thread of core N could not be started: why\"",
                     detail);
            return 0;
        }
    } else {
        snprintf(why, why_len, "status %d is not a failure on a core", (int)s);
        return 0;
    }
    if (core < 0 || core > 31 || !(((unsigned)core_mask >> core) & 1u)) {
        snprintf(why, why_len, "'%s' names core %d, not one of core_mask 0x%08x", detail, core,
                 (unsigned)core_mask);
        return 0;
    }
    return 1;
}

/* The buffers of one call: one set, or one per core of the mask (P_SPMD). */
typedef struct call_slot {
    cgt_buf out, ws, param;
    ConvParameter *pp;
} call_slot;

/* What one caller (the host thread, or one emulated core) saw. */
typedef struct core_record {
    cg_status status[CGT_MAX_CALLS]; /* returned (twin) or cg_last_status() (void) */
    cg_status last[CGT_MAX_CALLS];   /* cg_last_status() right after the call */
    int ran;
} core_record;

typedef struct run_ctx {
    const cgt_case *c;
    int calls;
    const void *dy, *x, *bias;
    call_slot *slots;
    core_record rec[32]; /* by rank in the mask; rec[0] for host modes */
    atomic_int seen[32]; /* launches of each physical core */
    atomic_int bad_id;   /* get_core_id() out of the mask */
} run_ctx;

static void call_once(const run_ctx *k, call_slot *s, cg_status *status, cg_status *last)
{
    const cgt_case *c = k->c;
    const int is_s = c->mode == CGT_S_HOST || c->mode == CGT_S_SPMD;
    /* The seed entries take non-const pointers; the library must not write
     * through them (the buffers may be read-only). */
    float *dyf = (float *)(uintptr_t)k->dy, *xf = (float *)(uintptr_t)k->x;
    float *bf = (float *)(uintptr_t)k->bias;
    float16 *dyh = (float16 *)(uintptr_t)k->dy, *xh = (float16 *)(uintptr_t)k->x;
    float16 *bh = (float16 *)(uintptr_t)k->bias;
    if (c->api == CGT_API_STATUS) {
        cg_status st;
        if (c->dtype == CGT_FP32)
            st = is_s ? cg_fp_conv_grad_filter_s(dyf, xf, (float *)s->out.ptr, bf, s->pp,
                                                 c->core_mask)
                      : cg_fp_conv_grad_filter_p(dyf, xf, (float *)s->out.ptr, bf, s->pp);
        else
            st = is_s ? cg_hp_conv_grad_filter_s(dyh, xh, (float16 *)s->out.ptr, bh, s->pp,
                                                 c->core_mask)
                      : cg_hp_conv_grad_filter_p(dyh, xh, (float16 *)s->out.ptr, bh, s->pp);
        *status = st;
        *last = cg_last_status();
    } else {
        if (c->dtype == CGT_FP32) {
            if (is_s)
                fp_conv_grad_filter_s(dyf, xf, (float *)s->out.ptr, bf, s->pp, c->core_mask);
            else
                fp_conv_grad_filter_p(dyf, xf, (float *)s->out.ptr, bf, s->pp);
        } else {
            if (is_s)
                hp_conv_grad_filter_s(dyh, xh, (float16 *)s->out.ptr, bh, s->pp, c->core_mask);
            else
                hp_conv_grad_filter_p(dyh, xh, (float16 *)s->out.ptr, bh, s->pp);
        }
        *status = cg_last_status();
        *last = *status;
    }
}

static int rank_in_mask(int mask, int id)
{
    if (id < 0 || id > 31 || !(((unsigned)mask >> id) & 1u))
        return -1;
    return cgt_popcount((int)((unsigned)mask & ((1u << id) - 1u)));
}

static void spmd_entry(void *arg)
{
    run_ctx *k = arg;
    const int id = get_core_id();
    const int r = rank_in_mask(k->c->core_mask, id);
    if (id >= 0 && id < 32)
        atomic_fetch_add(&k->seen[id], 1);
    if (r < 0) {
        atomic_store(&k->bad_id, 1);
        if (k->c->mode == CGT_P_SPMD)
            return; /* no buffers of its own */
    }
    /* _s: the same collective calls on every core, shared buffers (slot 0);
     * _p: each core its own slot. Either way the record is the core's own. */
    call_slot *s = &k->slots[k->c->mode == CGT_P_SPMD ? r : 0];
    core_record *mine = &k->rec[r < 0 ? 0 : r];
    for (int i = 0; i < k->calls; ++i) {
        cg_status st, last;
        call_once(k, s, &st, &last);
        if (r >= 0) {
            mine->status[i] = st;
            mine->last[i] = last;
        }
    }
    if (r >= 0)
        mine->ran++;
}

static void decode_index(const ConvParameter *p, size_t i, int *co, int *kh, int *kw, int *ci)
{
    const size_t cip = (size_t)(p->input_channel_ / p->group_);
    const size_t row = ref_dw_row(p);
    *co = (int)(i / row);
    size_t rem = i % row;
    *kh = (int)(rem / ((size_t)p->kernel_w_ * cip));
    *kw = (int)((rem / cip) % (size_t)p->kernel_w_);
    *ci = (int)(rem % cip);
}

static double elem_to_double(const void *buf, size_t i, cgt_dtype dt)
{
    if (dt == CGT_FP32) {
        float f;
        memcpy(&f, (const unsigned char *)buf + 4 * i, 4);
        return (double)f;
    }
    return ref_half_to_double(ref_half_load(buf, i));
}

/* fp16 values m * 2^-24, |m| <= 2047: subnormals, the smallest normals and
 * both zeros (exact products with small integers, exact fp32 sums). */
static void fill_tiny_halves(cgt_rng *rng, void *p, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        const int k = cgt_rng_int(rng, 0, 9);
        uint16_t h;
        if (k == 0)
            h = 0x0000;
        else if (k == 1)
            h = 0x8000; /* -0 */
        else
            h = ref_float_to_half(ldexpf((float)cgt_rng_int(rng, -2047, 2047), -24));
        ref_half_store(p, i, h);
    }
}

static void fill_small_int_halves(cgt_rng *rng, void *p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        ref_half_store(p, i, ref_float_to_half((float)cgt_rng_int(rng, -64, 64)));
}

static void fill_input(cgt_rng *rng, void *p, size_t n, const cgt_case *c, double range)
{
    if (c->dtype == CGT_FP32) {
        if (c->dyadic)
            cgt_fill_dyadic_f32(rng, p, n, (int)(range < 1 ? 1 : range));
        else
            cgt_fill_f32(rng, p, n, range);
    } else {
        if (c->dyadic)
            cgt_fill_dyadic_f16(rng, p, n, (int)(range < 1 ? 1 : range));
        else
            cgt_fill_f16(rng, p, n, range);
    }
}

static void to_double(const void *p, double *d, size_t n, cgt_dtype dt)
{
    if (dt == CGT_FP32)
        ref_float_to_double(p, d, n);
    else
        ref_half_bits_to_double(p, d, n);
}

static void check_canary(cgt_result *res, const cgt_buf *b, const char *what)
{
    long long off = cgt_buf_canary_damage(b);
    if (off != -1) {
        res->ok = 0;
        cgt_result_addf(res,
                        "\n  %s: byte at offset %lld (relative to its start, size %zu) written",
                        what, off, b->n);
    }
}

void cgt_expected_compute(cgt_expected *e, const ConvParameter *p, cgt_dtype dt, const void *dy,
                          const void *x, const void *bias, const void *out0, int calls, int exact)
{
    const size_t ndy = ref_dy_elems(p), nx = ref_x_elems(p), ndw = ref_dw_elems(p);
    const size_t nb = (size_t)p->output_channel_, row = ref_dw_row(p);
    double *dyd = malloc((ndy + 1) * sizeof *dyd), *xd = malloc((nx + 1) * sizeof *xd);
    double *bd = calloc(nb + 1, sizeof *bd);
    double *dw = malloc((ndw + 1) * sizeof *dw), *ab = malloc((ndw + 1) * sizeof *ab);
    to_double(dy, dyd, ndy, dt);
    to_double(x, xd, nx, dt);
    if (bias)
        to_double(bias, bd, nb, dt);
    ref_grad_filter(p, dyd, xd, dw, ab);

    e->n = ndw;
    e->calls = calls;
    e->want = malloc((ndw + 1) * sizeof *e->want);
    e->tol = malloc((ndw + 1) * sizeof *e->tol);
    e->out0 = malloc((ndw + 1) * sizeof *e->out0);
    e->dw = dw;
    e->bias = malloc((ndw + 1) * sizeof *e->bias);
    e->overflow = 0;
    e->inexact = 0;
    for (size_t i = 0; i < ndw; ++i) {
        const double b = bd[i / row];
        double want = elem_to_double(out0, i, dt), tol = 0.0;
        e->out0[i] = want;
        e->bias[i] = b;
        for (int k = 0; k < calls; ++k) {
            const double prev = want;
            want = prev + dw[i] + b;
            tol += 1e-5 * (fabs(prev) + ab[i] + fabs(b)) + 1e-6;
            if (dt == CGT_FP16) {
                tol += 0x1p-10 * fabs(want);
                /* exact mode: float(out0) + sum + bias is exact in fp32 (the
                 * caller's dyadic data), then rounded once to half, to
                 * nearest even */
                if (exact)
                    want = ref_half_to_double(ref_float_to_half((float)want));
            }
        }
        if (dt == CGT_FP16 && fabs(want) > 60000.0)
            e->overflow = 1;
        /* exact mode needs every fp32 partial sum exact: dyadic data are
         * multiples of 2^-10 after a product, so magnitudes must stay < 2^14 */
        if (exact && fabs(e->out0[i]) + calls * (ab[i] + fabs(b)) >=
                         (exact == CGT_EXACT_TINY ? 1.0 : 16384.0))
            e->inexact = 1;
        e->want[i] = want;
        e->tol[i] = exact ? 0.0 : tol;
    }
    free(dyd);
    free(xd);
    free(bd);
    free(ab);
}

int cgt_expected_compare(const cgt_expected *e, const ConvParameter *p, cgt_dtype dt,
                         const void *got_buf, cgt_result *res, const char *label)
{
    int bad = 0;
    if (e->overflow) {
        res->ok = 0;
        cgt_result_addf(res, "\n  TEST HARNESS: an expected value overflows fp16");
    }
    if (e->inexact) {
        res->ok = 0;
        cgt_result_addf(res, "\n  TEST HARNESS: exact mode, but fp32 sums of this data may round");
    }
    for (size_t i = 0; i < e->n; ++i) {
        const double got = elem_to_double(got_buf, i, dt);
        const double err = fabs(got - e->want[i]);
        const double tol = e->tol[i];
        const double ratio = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0);
        if (!(err <= tol)) {
            if (bad < 5) {
                int co, kh, kw, ci;
                decode_index(p, i, &co, &kh, &kw, &ci);
                cgt_result_addf(res,
                                "\n  out_dw[%zu] (co=%d kh=%d kw=%d ci=%d)%s: got %.9g want %.9g "
                                "(out0 %.9g + %d x (dw %.9g + bias %.9g)) err %.3g tol %.3g",
                                i, co, kh, kw, ci, label ? label : "", got, e->want[i], e->out0[i],
                                e->calls, e->dw[i], e->bias[i], err, tol);
            }
            ++bad;
        }
        if (ratio > res->worst_ratio || ratio != ratio)
            res->worst_ratio = ratio;
    }
    if (bad) {
        res->ok = 0;
        res->bad_elems += bad;
        cgt_result_addf(res, "\n  %d of %zu elements wrong%s", bad, e->n, label ? label : "");
    }
    return bad == 0;
}

void cgt_expected_free(cgt_expected *e)
{
    free(e->want);
    free(e->tol);
    free(e->out0);
    free(e->dw);
    free(e->bias);
    memset(e, 0, sizeof *e);
}

cgt_result cgt_run_case(const cgt_case *c)
{
    cgt_result res;
    memset(&res, 0, sizeof res);
    res.ok = 1;
    const ConvParameter *P = &c->p;
    const int calls = c->calls < 1 ? 1 : (c->calls > CGT_MAX_CALLS ? CGT_MAX_CALLS : c->calls);
    const size_t es = c->dtype == CGT_FP32 ? 4 : 2;
    const size_t ndy = ref_dy_elems(P), nx = ref_x_elems(P), ndw = ref_dw_elems(P);
    const size_t nb = (size_t)P->output_channel_;
    const double range = c->range > 0 ? c->range : 1.0;
    const int is_s = c->mode == CGT_S_HOST || c->mode == CGT_S_SPMD;
    const int nslots = c->mode == CGT_P_SPMD ? cgt_popcount(c->core_mask) : 1;
    const size_t ws_bytes =
        is_s ? cgt_ws_bytes_s(P, c->core_mask) : (size_t)P->buffer_size_ * sizeof(float);
    const int where_in = c->in_at_start ? CGT_AT_START : CGT_AT_END;
    cgt_rng rng;
    cgt_rng_seed(&rng, c->seed);

    /* inputs */
    cgt_buf bdy, bx, bb;
    memset(&bb, 0, sizeof bb);
    cgt_buf_alloc(&bdy, ndy * es, 0, where_in);
    cgt_buf_alloc(&bx, nx * es, 0, where_in);
    const int tiny = c->fp16_tiny && c->dtype == CGT_FP16;
    if (c->zero_dy)
        memset(bdy.ptr, 0, ndy * es);
    else if (tiny)
        fill_small_int_halves(&rng, bdy.ptr, ndy);
    else
        fill_input(&rng, bdy.ptr, ndy, c, range);
    if (tiny)
        fill_tiny_halves(&rng, bx.ptr, nx);
    else
        fill_input(&rng, bx.ptr, nx, c, range);
    if (c->with_bias) {
        cgt_buf_alloc(&bb, nb * es, 0, where_in);
        if (tiny)
            fill_tiny_halves(&rng, bb.ptr, nb);
        else
            fill_input(&rng, bb.ptr, nb, c, range);
    }
    const uint64_t sum_dy = cgt_fnv1a(bdy.ptr, bdy.n), sum_x = cgt_fnv1a(bx.ptr, bx.n);
    const uint64_t sum_b = c->with_bias ? cgt_fnv1a(bb.ptr, bb.n) : 0;

    /* out_dw's initial value, the same for every slot */
    unsigned char *out0 = malloc(ndw * es + 1);
    if (c->prefill && tiny)
        fill_tiny_halves(&rng, out0, ndw);
    else if (c->prefill)
        fill_input(&rng, out0, ndw, c, range);
    else
        memset(out0, 0, ndw * es);

    /* per-call buffers */
    call_slot *slots = calloc((size_t)nslots, sizeof *slots);
    const int ws_fill = cgt_rng_int(&rng, 0, 2);
    for (int s = 0; s < nslots; ++s) {
        cgt_buf_alloc(&slots[s].param, sizeof(ConvParameter), 0, CGT_AT_END);
        cgt_buf_alloc(&slots[s].out, ndw * es, c->out_slack, CGT_AT_END);
        cgt_buf_alloc(&slots[s].ws, ws_bytes, c->ws_slack,
                      c->ws_at_start ? CGT_AT_START : CGT_AT_END);
        memcpy(slots[s].out.ptr, out0, ndw * es);
        /* garbage workspace: the library must not assume zeros */
        if (ws_fill == 0)
            memset(slots[s].ws.ptr, 0xff, ws_bytes); /* NaNs */
        else if (ws_fill == 1)
            memset(slots[s].ws.ptr, 0x7f, ws_bytes); /* ~3.4e38 */
        else
            cgt_fill_bytes(&rng, slots[s].ws.ptr, ws_bytes);
        ConvParameter pv = *P;
        pv.workspace_ = slots[s].ws.ptr;
        memcpy(slots[s].param.ptr, &pv, sizeof pv);
        slots[s].pp = (ConvParameter *)slots[s].param.ptr;
    }
    if (c->readonly_inputs) {
        cgt_buf_readonly(&bdy);
        cgt_buf_readonly(&bx);
        if (c->with_bias)
            cgt_buf_readonly(&bb);
        for (int s = 0; s < nslots; ++s)
            cgt_buf_readonly(&slots[s].param);
    }

    /* run */
    run_ctx *k = calloc(1, sizeof *k);
    k->c = c;
    k->calls = calls;
    k->dy = bdy.ptr;
    k->x = bx.ptr;
    k->bias = c->with_bias ? bb.ptr : NULL;
    k->slots = slots;
    int nrec = 1;
    if (c->mode == CGT_S_HOST || c->mode == CGT_P_HOST) {
        for (int i = 0; i < calls; ++i)
            call_once(k, &slots[0], &k->rec[0].status[i], &k->rec[0].last[i]);
        k->rec[0].ran = 1;
    } else {
        nrec = cgt_popcount(c->core_mask);
        int rc = core_mask_launch(c->core_mask, spmd_entry, k);
        if (rc != 0) {
            res.ok = 0;
            cgt_result_addf(&res, "\n  core_mask_launch(0x%08x) returned %d (%s)",
                            (unsigned)c->core_mask, rc, cg_status_message((cg_status)rc));
        }
        if (atomic_load(&k->bad_id)) {
            res.ok = 0;
            cgt_result_addf(&res,
                            "\n  get_core_id() returned an id outside the mask in the launch");
        }
        for (int id = 0; id < 32 && rc == 0; ++id) {
            const int want = ((unsigned)c->core_mask >> id) & 1u;
            if (atomic_load(&k->seen[id]) != want) {
                res.ok = 0;
                cgt_result_addf(&res, "\n  core %d ran the entry %d times (want %d)", id,
                                atomic_load(&k->seen[id]), want);
            }
        }
    }
    for (int r = 0; r < nrec; ++r) {
        if (k->rec[r].ran != 1) {
            if (res.ok || strlen(res.msg) < 1500)
                cgt_result_addf(&res, "\n  caller rank %d finished %d times (want 1)", r,
                                k->rec[r].ran);
            res.ok = 0;
            continue;
        }
        for (int i = 0; i < calls; ++i) {
            if (k->rec[r].status[i] != CG_OK || k->rec[r].last[i] != CG_OK) {
                if (res.ok)
                    cgt_result_addf(&res,
                                    "\n  call %d on caller rank %d: status %d, "
                                    "cg_last_status %d (%s)",
                                    i, r, (int)k->rec[r].status[i], (int)k->rec[r].last[i],
                                    cg_status_message(k->rec[r].status[i]));
                res.ok = 0;
            }
        }
    }

    /* reference and comparison */
    cgt_expected ex;
    cgt_expected_compute(&ex, P, c->dtype, bdy.ptr, bx.ptr, c->with_bias ? bb.ptr : NULL, out0,
                         calls, c->exact ? (tiny ? CGT_EXACT_TINY : CGT_EXACT_DYADIC) : 0);
    for (int s = 0; s < nslots; ++s) {
        char label[48];
        if (nslots > 1)
            snprintf(label, sizeof label, " [core rank %d's out_dw]", s);
        else
            label[0] = 0;
        cgt_expected_compare(&ex, P, c->dtype, slots[s].out.ptr, &res, label);
    }
    cgt_expected_free(&ex);

    /* nothing else written */
    for (int s = 0; s < nslots; ++s) {
        check_canary(&res, &slots[s].out, "around out_dw");
        check_canary(&res, &slots[s].ws, "outside the allowed workspace range");
        check_canary(&res, &slots[s].param, "around the ConvParameter");
        ConvParameter pv = *P;
        pv.workspace_ = slots[s].ws.ptr;
        if (memcmp(slots[s].param.ptr, &pv, sizeof pv) != 0) {
            res.ok = 0;
            cgt_result_addf(&res, "\n  the ConvParameter was modified");
        }
    }
    check_canary(&res, &bdy, "around dy");
    check_canary(&res, &bx, "around x");
    if (cgt_fnv1a(bdy.ptr, bdy.n) != sum_dy) {
        res.ok = 0;
        cgt_result_addf(&res, "\n  input dy was modified");
    }
    if (cgt_fnv1a(bx.ptr, bx.n) != sum_x) {
        res.ok = 0;
        cgt_result_addf(&res, "\n  input x was modified");
    }
    if (c->with_bias) {
        check_canary(&res, &bb, "around bias");
        if (cgt_fnv1a(bb.ptr, bb.n) != sum_b) {
            res.ok = 0;
            cgt_result_addf(&res, "\n  input bias was modified");
        }
    }

    free(out0);
    free(k);
    for (int s = 0; s < nslots; ++s) {
        cgt_buf_free(&slots[s].param);
        cgt_buf_free(&slots[s].out);
        cgt_buf_free(&slots[s].ws);
    }
    free(slots);
    cgt_buf_free(&bdy);
    cgt_buf_free(&bx);
    if (c->with_bias)
        cgt_buf_free(&bb);
    return res;
}
