/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the four entry points (CONTRACT.md sections 1, 2, 4).
 *
 * The input bytes decode (see decode() below, and make_corpus.py, which
 * writes the same format) into every int field of ConvParameter, a core
 * mask, buffer_size_, the dtype, the entry point (fp/hp x _p/_s; `_s` from a
 * host thread or SPMD inside core_mask_launch; `_p` from a host thread or
 * from inside a one-core launch), NULL or real bias, NULL pointers, and
 * misaligned (natural alignment only) buffers. Each int field can be any
 * value (negative, 0, INT_MIN, INT_MAX, raw 32 bits), with a bias towards
 * small valid values so that most inputs reach the kernels.
 *
 * Tensors are real (exactly sized, so ASan sees one element past the end)
 * when they are small; otherwise a 64-byte dummy is passed. An independent
 * validator of the contract's rules says which error statuses the input
 * deserves. The checks, each an abort() on violation:
 *   - no crash, no out-of-bounds access, no UB (ASan + UBSan);
 *   - a valid input (all tensors real) returns CG_OK and out_dw equals
 *     out0 + the double reference (tests/reference.c) + bias, within the
 *     tests' tolerance (fp32 1e-5*(|out0|+sum|terms|+|bias|)+1e-6; fp16 adds
 *     2^-10*|ref|);
 *   - an invalid input returns one of the errors it deserves, and leaves
 *     out_dw and the workspace (real or dummy) bit-for-bit untouched; an
 *     invalid input returning CG_OK is a finding (its tensors may be dummies);
 *   - dy, x, bias and the ConvParameter are never written;
 *   - cg_status_message is non-empty; the cg_ variants return what
 *     cg_last_status() then reports; cg_last_error_detail() is "" exactly
 *     after CG_OK (on each core in SPMD mode); the two size helpers agree with the
 *     contract's formulas (or return 0 for invalid parameters).
 * A valid input whose tensors or workspace are too large to allocate, or
 * whose reference would be too slow, is skipped (returns -1: not kept).
 *
 * CG_FUZZ_VERBOSE=1 in the environment prints each decoded case. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convgrad.h"
#include "fuzz_common.h"
#include "reference.h"

enum {
    MAX_ELEMS = 4096,         /* dy, x, out_dw: real only up to this many elements */
    MAX_WS_BYTES = 512 << 10, /* workspace: real only up to this many bytes */
    DUMMY_BYTES = 64,         /* what stands in for a tensor too large to allocate */
    MAX_MACS = 1 << 22        /* a valid case's reference costs at most this */
};

/* ---- input decoding ------------------------------------------------------ */

typedef enum kind {
    K_BATCH_OUT,
    K_BATCH_IN,
    K_SPATIAL, /* input and output heights and widths */
    K_CIN,
    K_COUT,
    K_KERNEL,
    K_GROUP,
    K_PAD,
    K_STEP, /* stride, dilation */
    K_BUFFER
} kind;

/* The contract's lower bound of buffer_size_, 2*(Kh*Kw*Cin/G)*dtype, from
 * the (not yet validated) fields; -1 where it is not defined. */
static int64_t min_buffer(const ConvParameter *p, size_t ds)
{
    if (p->kernel_h_ < 1 || p->kernel_w_ < 1 || p->input_channel_ < 1 || p->group_ < 1)
        return -1;
    long double v =
        2.0L * p->kernel_h_ * p->kernel_w_ * (p->input_channel_ / p->group_) * (long double)ds;
    return v > 0x1p40L ? (int64_t)1 << 40 : (int64_t)v; /* saturated: past INT_MAX anyway */
}

static int decode_field(reader *r, kind k, const ConvParameter *p, size_t ds)
{
    uint8_t b = u8(r);
    if (b >= RAW_FROM)
        return as_int(u32(r));
    if (b >= SMALL_LIMIT)
        return (int)specials[b - SMALL_LIMIT];
    switch (k) {
    case K_BATCH_OUT:
        return 1 + b % 3;
    case K_BATCH_IN:
        return p->output_batch_;
    case K_SPATIAL:
        return 1 + b % 7;
    case K_CIN: /* now and then wide enough for `_s` to split dw's columns */
        return b % 16 < 12 ? 1 + b % 8 : 8 << (b % 4);
    case K_COUT:
        if (b % 4 == 0)
            return p->input_channel_;
        return b % 16 == 15 ? 32 : b % 16 == 7 ? 16 : 1 + b % 8;
    case K_KERNEL:
        return 1 + b % 4;
    case K_GROUP:
        switch (b % 4) {
        case 0:
            return 1;
        case 1:
            return p->input_channel_; /* depthwise when Cout == Cin */
        case 2: {
            int64_t g = gcd64(p->input_channel_, p->output_channel_);
            return g ? clamp_int(g) : 1;
        }
        default:
            return 1 + (b / 4) % 4;
        }
    case K_PAD:
        return b % 8 < 5 ? 0 : b % 8 - 4;
    case K_STEP:
        return b % 8 < 5 ? 1 : b % 8 - 3;
    case K_BUFFER: {
        int64_t m = min_buffer(p, ds);
        if (m < 0)
            m = 64;
        switch (b % 16) {
        case 7:
        case 8:
            return clamp_int(m + (int64_t)ds * (b / 16));
        case 9:
            return clamp_int(2 * m);
        case 10:
            return clamp_int(4 * m);
        case 11:
            return clamp_int(16 * m);
        case 12:
            return clamp_int(m - 1); /* just under the bound */
        case 13:
            return clamp_int(m / 2);
        case 14:
            return 1024;
        case 15:
            return 65536;
        default:
            return clamp_int(m);
        }
    }
    }
    return 0;
}

typedef enum entry { E_P_HOST, E_S_HOST, E_S_SPMD, E_P_IN_LAUNCH } entry;
static const char *const entry_names[] = {"_p (host thread)", "_s (host mode)", "_s (SPMD)",
                                          "_p (inside a one-core launch)"};
enum { NULL_DY, NULL_X, NULL_DW, NULL_WORKSPACE, NULL_PARAM, NULL_NONE };
static const char *const null_names[] = {"input_dy",   "input_x",    "out_dw",
                                         "workspace_", "conv_param", "none"};

static const uint32_t small_masks[] = {1, 1,   3, 3,          2,          5,          6,
                                       7, 0xF, 8, 0x80000000, 0x80000001, 0xC0000000, 0x10001};
static const uint32_t special_masks[] = {0,          0xFFFFFFFF, 0x7FFFFFFF, 0xFFFF,
                                         0xFFFF0000, 0x55555555, 0xAAAAAAAA, 0x80000000};

typedef struct fuzz_case {
    ConvParameter p; /* workspace_ set later */
    int fp16, with_bias, status_api, misalign, null_which;
    entry ent;
    int core_mask, launch_mask;
    uint64_t seed;
} fuzz_case;

/* Format: flags byte, the 20 int fields in struct order, core mask byte,
 * launch byte, NULL selector byte (read only when flag bit 6 is set), 4 seed
 * bytes. Flags: bit 0 fp16, bits 1-2 entry, bit 3 bias, bit 4 the cg_
 * status-returning variant, bit 5 misaligned buffers, bit 6 a NULL pointer. */
static void decode(reader *r, fuzz_case *c)
{
    memset(c, 0, sizeof *c);
    uint8_t f = u8(r);
    c->fp16 = f & 1;
    c->ent = (entry)((f >> 1) & 3);
    c->with_bias = (f >> 3) & 1;
    c->status_api = (f >> 4) & 1;
    c->misalign = (f >> 5) & 1;
    const int has_null = (f >> 6) & 1;
    const size_t ds = c->fp16 ? 2 : 4;
    ConvParameter *p = &c->p;
    p->output_batch_ = decode_field(r, K_BATCH_OUT, p, ds);
    p->input_batch_ = decode_field(r, K_BATCH_IN, p, ds);
    p->input_h_ = decode_field(r, K_SPATIAL, p, ds);
    p->input_w_ = decode_field(r, K_SPATIAL, p, ds);
    p->output_h_ = decode_field(r, K_SPATIAL, p, ds);
    p->output_w_ = decode_field(r, K_SPATIAL, p, ds);
    p->input_channel_ = decode_field(r, K_CIN, p, ds);
    p->output_channel_ = decode_field(r, K_COUT, p, ds);
    p->kernel_h_ = decode_field(r, K_KERNEL, p, ds);
    p->kernel_w_ = decode_field(r, K_KERNEL, p, ds);
    p->group_ = decode_field(r, K_GROUP, p, ds);
    p->pad_l_ = decode_field(r, K_PAD, p, ds);
    p->pad_u_ = decode_field(r, K_PAD, p, ds);
    p->dilation_h_ = decode_field(r, K_STEP, p, ds);
    p->dilation_w_ = decode_field(r, K_STEP, p, ds);
    p->stride_h_ = decode_field(r, K_STEP, p, ds);
    p->stride_w_ = decode_field(r, K_STEP, p, ds);
    p->buffer_size_ = decode_field(r, K_BUFFER, p, ds);
    p->pad_d_ = decode_field(r, K_PAD, p, ds);
    p->pad_r_ = decode_field(r, K_PAD, p, ds);

    uint8_t b = u8(r);
    uint32_t mask;
    if (b >= RAW_FROM)
        mask = u32(r);
    else if (b >= SMALL_LIMIT)
        mask = special_masks[(b - SMALL_LIMIT) % (sizeof special_masks / sizeof *special_masks)];
    else
        mask = small_masks[b % (sizeof small_masks / sizeof *small_masks)];
    c->core_mask = as_int(mask);

    b = u8(r);
    uint32_t launch = mask; /* b % 4 == 0 or 1: the same cores */
    if (c->ent == E_P_IN_LAUNCH)
        launch = 1u << (b % 32);
    else if (b % 4 == 2)
        launch = mask | (1u << ((b / 4) % 32)); /* one more core, not in core_mask */
    else if (b % 4 == 3)
        launch = u32(r); /* anything: may not cover core_mask */
    c->launch_mask = as_int(launch ? launch : 1);

    c->null_which = has_null ? u8(r) % 5 : NULL_NONE;
    c->seed = u32(r) * 0x9E3779B97F4A7C15ull + 1;
}

/* ---- the contract's rules, independently ------------------------------- */

#define ERR_BIT(s) (1u << (unsigned)(-(s)))

typedef struct expectation {
    unsigned errs; /* the rules the input breaks (bit -s): it must fail; 0: valid */
    unsigned may;  /* the statuses it may fail with: errs, and OVERFLOW when huge */
    int fields_ok; /* every field valid, buffer_size_ included (not pointers, mask) */
    int shape_ok;  /* the shape fields valid (buffer_size_ aside), and not huge */
    int huge;      /* some byte count past 2^31: never run for real, helpers not checked */
    int64_t min_buf;
    /* element counts; -1 where undefined (a size < 1) */
    int64_t n_dy, n_x, n_dw, row_len;
    size_t ws_doc;   /* the documented workspace bytes; 0 where undefined */
    size_t ws_alloc; /* the workspace the caller provides; 0: a dummy */
} expectation;

/* a*b*c*d of positive ints, saturated at 2^62. */
static int64_t prod4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    long double v = (long double)a * b * c * d;
    return v >= 0x1p62L ? (int64_t)1 << 62 : (int64_t)v;
}

static void expect(const fuzz_case *c, expectation *e)
{
    const ConvParameter *p = &c->p;
    const size_t ds = c->fp16 ? 2 : 4;
    memset(e, 0, sizeof *e);
    e->n_dy = e->n_x = e->n_dw = e->row_len = e->min_buf = -1;
    if (c->null_which != NULL_NONE)
        e->errs |= ERR_BIT(CG_ERR_NULL_POINTER);
    const int sizes[] = {p->output_batch_, p->input_batch_, p->input_h_,       p->input_w_,
                         p->output_h_,     p->output_w_,    p->input_channel_, p->output_channel_,
                         p->kernel_h_,     p->kernel_w_};
    int sizes_ok = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        sizes_ok &= sizes[i] >= 1;
    if (!sizes_ok)
        e->errs |= ERR_BIT(CG_ERR_BAD_SIZE);
    if (p->input_batch_ != p->output_batch_)
        e->errs |= ERR_BIT(CG_ERR_BATCH_MISMATCH);
    const int group_ok = p->group_ >= 1 && (int64_t)p->input_channel_ % p->group_ == 0 &&
                         (int64_t)p->output_channel_ % p->group_ == 0;
    if (!group_ok)
        e->errs |= ERR_BIT(CG_ERR_BAD_GROUP);
    if (p->stride_h_ < 1 || p->stride_w_ < 1)
        e->errs |= ERR_BIT(CG_ERR_BAD_STRIDE);
    if (p->dilation_h_ < 1 || p->dilation_w_ < 1)
        e->errs |= ERR_BIT(CG_ERR_BAD_DILATION);
    if (p->pad_l_ < 0 || p->pad_u_ < 0 || p->pad_d_ < 0 || p->pad_r_ < 0)
        e->errs |= ERR_BIT(CG_ERR_BAD_PAD);
    if (sizes_ok) {
        e->n_dy = prod4(p->output_batch_, p->output_h_, p->output_w_, p->output_channel_);
        e->n_x = prod4(p->input_batch_, p->input_h_, p->input_w_, p->input_channel_);
    }
    const int shared = c->ent == E_S_HOST || c->ent == E_S_SPMD;
    if (shared && (c->core_mask == 0 ||
                   (c->ent == E_S_SPMD && ((uint32_t)c->core_mask & ~(uint32_t)c->launch_mask))))
        e->errs |= ERR_BIT(CG_ERR_CORE_MASK);
    if (sizes_ok && group_ok) {
        e->row_len = prod4(p->kernel_h_, p->kernel_w_, p->input_channel_ / p->group_, 1);
        e->n_dw = prod4(p->output_channel_, e->row_len, 1, 1);
        e->min_buf = min_buffer(p, ds);
        /* Exact counts: each factor < 2^31, so products of four fit. */
        typedef unsigned __int128 u128;
        const u128 x =
            (u128)p->input_batch_ * (u128)p->input_h_ * (u128)p->input_w_ * (u128)p->input_channel_;
        const u128 dy = (u128)p->output_batch_ * (u128)p->output_h_ * (u128)p->output_w_ *
                        (u128)p->output_channel_;
        const u128 row =
            (u128)p->kernel_h_ * (u128)p->kernel_w_ * (u128)(p->input_channel_ / p->group_);
        const u128 dw = row * (u128)p->output_channel_, bound = 2 * row * ds;
        const unsigned cores = (unsigned)__builtin_popcount((unsigned)c->core_mask);
        /* The contract's overflow: a byte count past size_t (a tensor, or
         * the workspace `_s` needs), or the bound of buffer_size_ past
         * INT_MAX. The library must reject it. */
        if (x * ds > SIZE_MAX || dy * ds > SIZE_MAX || dw * ds > SIZE_MAX || bound > INT_MAX ||
            (shared && cores && dw > SIZE_MAX / 4 / cores))
            e->errs |= ERR_BIT(CG_ERR_OVERFLOW);
        /* A byte count past 2^31 (x, dy, 32 float partials of dw): the
         * library may call it an overflow too (it is stricter than size_t
         * for the sake of pointer arithmetic). Such a case is never run
         * with real tensors: valid, it is skipped; invalid, it must fail
         * anyway, and OVERFLOW is one acceptable reason. */
        const u128 big = (u128)1 << 31;
        e->huge = x * 4 >= big || dy * 4 >= big || dw * 128 >= big || bound > INT_MAX;
        if ((u128)(p->buffer_size_ < 0 ? 0 : p->buffer_size_) < bound)
            e->errs |= ERR_BIT(CG_ERR_BUFFER_TOO_SMALL);
    }
    e->may = e->errs | (e->huge ? ERR_BIT(CG_ERR_OVERFLOW) : 0);
    const unsigned field_bits = ERR_BIT(CG_ERR_BAD_SIZE) | ERR_BIT(CG_ERR_BATCH_MISMATCH) |
                                ERR_BIT(CG_ERR_BAD_GROUP) | ERR_BIT(CG_ERR_BAD_STRIDE) |
                                ERR_BIT(CG_ERR_BAD_DILATION) | ERR_BIT(CG_ERR_BAD_PAD) |
                                ERR_BIT(CG_ERR_OVERFLOW);
    e->shape_ok = !(e->errs & field_bits) && !e->huge;
    e->fields_ok = e->shape_ok && !(e->errs & ERR_BIT(CG_ERR_BUFFER_TOO_SMALL));

    /* The documented workspace (section 1): buffer_size_*4 bytes for `_p`;
     * max(buffer_size_*4, core_num*dw_elems*4) for `_s`. ws_doc is what the
     * helper must return; ws_alloc what the caller provides (the same, or its
     * best guess from the fields that make sense; 0: a dummy). */
    if (p->buffer_size_ > 0) {
        long double staged = (long double)p->buffer_size_ * 4, need = staged;
        if (shared && c->core_mask != 0 && e->n_dw >= 0) {
            long double partials =
                (long double)__builtin_popcount((unsigned)c->core_mask) * e->n_dw * 4;
            need = partials > staged ? partials : staged;
        }
        e->ws_alloc = need > 0x1p62L ? (size_t)1 << 62 : (size_t)need;
        if (e->fields_ok && (!shared || c->core_mask != 0))
            e->ws_doc = e->ws_alloc;
    }
}

/* ---- buffers -------------------------------------------------------------- */

/* Allocates `count` elements of `es` bytes when 0 < count <= limit (the
 * allocation ends exactly at the last element), else a dummy; fills it with
 * values in [-1, 1) (or random bytes for a dummy) and keeps a copy. */
static void buf_make(buf *b, int64_t count, int64_t limit, size_t es, int misalign, int values,
                     int fp16, uint64_t *rng)
{
    memset(b, 0, sizeof *b);
    b->real = count > 0 && count <= limit;
    size_t off = misalign ? es : 0; /* natural alignment only: 4 (or 2) mod 16 */
    b->bytes = b->real ? (size_t)count * es : DUMMY_BYTES;
    b->total = off + b->bytes;
    b->base = malloc(b->total);
    if (!b->base)
        abort();
    b->ptr = b->base + off;
    for (size_t i = 0; i < b->total; i++)
        b->base[i] = (unsigned char)next_rand(rng);
    if (b->real && values) {
        for (size_t i = 0; i < (size_t)count; i++) {
            /* a multiple of 2^-23 in [-1, 1): exact in fp32 */
            float v = (float)((int64_t)(next_rand(rng) >> 40) - (1 << 23)) * 0x1p-23f;
            if (fp16)
                ref_half_store(b->ptr, i, ref_float_to_half(v));
            else
                memcpy(b->ptr + i * 4, &v, 4);
        }
    }
    b->copy = malloc(b->total);
    if (!b->copy)
        abort();
    memcpy(b->copy, b->base, b->total);
}

/* ---- reporting ------------------------------------------------------------ */

static const fuzz_case *current;

static void describe(FILE *f, const fuzz_case *c)
{
    const ConvParameter *p = &c->p;
    fprintf(f,
            "case: %s %s bias=%s api=%s misalign=%d null=%s core_mask=0x%08x launch=0x%08x\n"
            "  batch out=%d in=%d  in %dx%d  out %dx%d  Cin=%d Cout=%d  K %dx%d  G=%d\n"
            "  pad l=%d u=%d d=%d r=%d  dil %d,%d  stride %d,%d  buffer_size_=%d\n",
            c->fp16 ? "hp" : "fp", entry_names[c->ent], c->with_bias ? "yes" : "NULL",
            c->status_api ? "cg_" : "void", c->misalign, null_names[c->null_which],
            (unsigned)c->core_mask, (unsigned)c->launch_mask, p->output_batch_, p->input_batch_,
            p->input_h_, p->input_w_, p->output_h_, p->output_w_, p->input_channel_,
            p->output_channel_, p->kernel_h_, p->kernel_w_, p->group_, p->pad_l_, p->pad_u_,
            p->pad_d_, p->pad_r_, p->dilation_h_, p->dilation_w_, p->stride_h_, p->stride_w_,
            p->buffer_size_);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n==== convgrad fuzz: CONTRACT VIOLATION: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (current)
        describe(stderr, current);
    abort();
}

static const char *path_of(const ConvParameter *p)
{
    if (p->output_channel_ == p->group_ && p->input_channel_ == p->group_ && p->dilation_h_ == 1 &&
        p->dilation_w_ == 1)
        return "depthwise";
    if (p->kernel_h_ == 1 && p->kernel_w_ == 1 && !p->pad_l_ && !p->pad_u_ && !p->pad_d_ &&
        !p->pad_r_ && p->dilation_h_ == 1 && p->dilation_w_ == 1 && p->stride_h_ == 1 &&
        p->stride_w_ == 1 && p->group_ == 1)
        return "1x1";
    return "general";
}

/* ---- the call ------------------------------------------------------------- */

typedef struct job {
    const fuzz_case *c;
    void *dy, *x, *dw, *bias;
    ConvParameter *param;
    cg_status status[32];
    int ran[32];
} job;

/* One call of the chosen entry point from the calling thread; returns the
 * status it recorded, after checking the cg_ variant's return agrees. */
static cg_status call_once(const job *j)
{
    const fuzz_case *c = j->c;
    const int shared = c->ent == E_S_HOST || c->ent == E_S_SPMD;
    cg_status ret = CG_OK;
    if (c->status_api) {
        if (shared && c->fp16)
            ret = cg_hp_conv_grad_filter_s(j->dy, j->x, j->dw, j->bias, j->param, c->core_mask);
        else if (shared)
            ret = cg_fp_conv_grad_filter_s(j->dy, j->x, j->dw, j->bias, j->param, c->core_mask);
        else if (c->fp16)
            ret = cg_hp_conv_grad_filter_p(j->dy, j->x, j->dw, j->bias, j->param);
        else
            ret = cg_fp_conv_grad_filter_p(j->dy, j->x, j->dw, j->bias, j->param);
    } else {
        if (shared && c->fp16)
            hp_conv_grad_filter_s(j->dy, j->x, j->dw, j->bias, j->param, c->core_mask);
        else if (shared)
            fp_conv_grad_filter_s(j->dy, j->x, j->dw, j->bias, j->param, c->core_mask);
        else if (c->fp16)
            hp_conv_grad_filter_p(j->dy, j->x, j->dw, j->bias, j->param);
        else
            fp_conv_grad_filter_p(j->dy, j->x, j->dw, j->bias, j->param);
    }
    cg_status s = cg_last_status();
    if (c->status_api && ret != s)
        fail("cg_ variant returned %d but cg_last_status() says %d", (int)ret, (int)s);
    const char *d = cg_last_error_detail();
    if ((s == CG_OK) != (d[0] == '\0'))
        fail("status %d with detail '%s' (\"\" exactly after CG_OK)", (int)s, d);
    return s;
}

static void on_core(void *arg)
{
    job *j = arg;
    int id = get_core_id();
    if (id < 0 || id > 31 || !(((uint32_t)j->c->launch_mask >> id) & 1u))
        fail("get_core_id() = %d inside a launch on 0x%08x", id, (unsigned)j->c->launch_mask);
    j->status[id] = call_once(j);
    j->ran[id] = 1;
}

static cg_status run(job *j)
{
    const fuzz_case *c = j->c;
    if (c->ent == E_P_HOST || c->ent == E_S_HOST)
        return call_once(j);
    int rc = core_mask_launch(c->launch_mask, on_core, j);
    if (rc != 0)
        fail("core_mask_launch(0x%08x) returned %d", (unsigned)c->launch_mask, rc);
    const uint32_t launch = (uint32_t)c->launch_mask;
    const uint32_t in = c->ent == E_S_SPMD ? launch & (uint32_t)c->core_mask : launch;
    cg_status s = CG_OK;
    int have = 0;
    for (int id = 0; id < 32; id++) {
        if (!((launch >> id) & 1u))
            continue;
        if (!j->ran[id])
            fail("core %d of the launch never ran", id);
        if ((in >> id) & 1u) { /* cores of core_mask all report the same */
            if (have && j->status[id] != s)
                fail("cores of core_mask disagree: %d vs %d", (int)s, (int)j->status[id]);
            s = j->status[id];
            have = 1;
        }
    }
    for (int id = 0; id < 32; id++) { /* the others: the same, or OK (returned at once) */
        if (!((launch >> id) & 1u) || ((in >> id) & 1u) || j->status[id] == CG_OK)
            continue;
        if (have && j->status[id] != s)
            fail("core %d outside core_mask reports %d, the cores of core_mask %d", id,
                 (int)j->status[id], (int)s);
        s = j->status[id];
        have = 1;
    }
    return s;
}

/* ---- checking a CG_OK result against the reference ----------------------- */

static void to_double(const void *src, double *dst, size_t n, int fp16)
{
    if (fp16) {
        ref_half_bits_to_double(src, dst, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, (const unsigned char *)src + 4 * i, 4);
            dst[i] = v;
        }
    }
}

static void check_result(const fuzz_case *c, const expectation *e, const buf *dy, const buf *x,
                         const buf *dw, const buf *bias)
{
    const int fp16 = c->fp16;
    const size_t ndy = (size_t)e->n_dy, nx = (size_t)e->n_x, ndw = (size_t)e->n_dw;
    const size_t cout = (size_t)c->p.output_channel_, row = (size_t)e->row_len;
    double *dyd = malloc(ndy * sizeof *dyd), *xd = malloc(nx * sizeof *xd);
    double *ref = malloc(ndw * sizeof *ref), *abs_sum = malloc(ndw * sizeof *abs_sum);
    double *out0 = malloc(ndw * sizeof *out0), *got = malloc(ndw * sizeof *got);
    double *bd = calloc(cout, sizeof *bd);
    if (!dyd || !xd || !ref || !abs_sum || !out0 || !got || !bd)
        abort();
    to_double(dy->ptr, dyd, ndy, fp16);
    to_double(x->ptr, xd, nx, fp16);
    to_double(dw->copy + (dw->ptr - dw->base), out0, ndw, fp16);
    to_double(dw->ptr, got, ndw, fp16);
    if (bias)
        to_double(bias->ptr, bd, cout, fp16);
    ref_grad_filter(&c->p, dyd, xd, ref, abs_sum);
    for (size_t i = 0; i < ndw; i++) {
        const double b = bd[i / row];
        const double want = out0[i] + ref[i] + b;
        double tol = 1e-5 * (fabs(out0[i]) + abs_sum[i] + fabs(b)) + 1e-6;
        if (fp16)
            tol += 0x1p-10 * fabs(want);
        if (!(fabs(got[i] - want) <= tol))
            fail("path %s: out_dw[%zu] (row %zu) = %.9g, want %.9g (out0 %.9g + dw %.9g + bias "
                 "%.9g), err %.3g > tol %.3g",
                 path_of(&c->p), i, i / row, got[i], want, out0[i], ref[i], b, fabs(got[i] - want),
                 tol);
    }
    free(dyd);
    free(xd);
    free(ref);
    free(abs_sum);
    free(out0);
    free(got);
    free(bd);
}

/* ---- the helpers ---------------------------------------------------------- */

static void check_helpers(const fuzz_case *c, const expectation *e)
{
    const size_t ds = c->fp16 ? 2 : 4;
    int mb = cg_grad_filter_min_buffer_size(&c->p, ds);
    if (e->shape_ok && mb != e->min_buf)
        fail("cg_grad_filter_min_buffer_size = %d, the contract's bound is %lld", mb,
             (long long)e->min_buf);
    if (!e->shape_ok && !e->huge && mb != 0)
        fail("cg_grad_filter_min_buffer_size = %d for invalid parameters (want 0)", mb);
    if (c->ent == E_S_HOST || c->ent == E_S_SPMD) {
        size_t wb = cg_grad_filter_workspace_bytes(&c->p, c->core_mask, ds);
        size_t want = e->fields_ok && c->core_mask != 0 ? e->ws_doc : 0;
        if (!e->huge && wb != want)
            fail("cg_grad_filter_workspace_bytes = %zu, want %zu", wb, want);
    }
}

/* ---- the target ----------------------------------------------------------- */

static int verbose = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (verbose < 0)
        verbose = getenv("CG_FUZZ_VERBOSE") && atoi(getenv("CG_FUZZ_VERBOSE")) > 0;
    reader r = {data, size, 0};
    fuzz_case c;
    decode(&r, &c);
    current = &c;
    expectation e;
    expect(&c, &e);
    const size_t es = c.fp16 ? 2 : 4;

    /* A valid case runs only with every buffer real. */
    if (!e.errs) {
        if (e.huge || e.n_dy > MAX_ELEMS || e.n_x > MAX_ELEMS || e.n_dw > MAX_ELEMS ||
            e.ws_doc > MAX_WS_BYTES || (double)e.n_dy * (double)e.row_len > MAX_MACS) {
            if (verbose)
                printf("skipped: valid, too large to run for real\n");
            return -1;
        }
    }

    uint64_t rng = c.seed;
    buf dy, x, dw, bias, ws;
    buf_make(&dy, e.n_dy, MAX_ELEMS, es, c.misalign, 1, c.fp16, &rng);
    buf_make(&x, e.n_x, MAX_ELEMS, es, c.misalign, 1, c.fp16, &rng);
    buf_make(&dw, e.n_dw, MAX_ELEMS, es, c.misalign, 1, c.fp16, &rng);
    /* bias holds output_channel_ values when the call is valid */
    buf_make(&bias, c.p.output_channel_, MAX_ELEMS, es, c.misalign, 1, c.fp16, &rng);
    buf_make(&ws, (int64_t)(e.ws_alloc / 4), MAX_WS_BYTES / 4, 4, c.misalign, 0, 0, &rng);
    if (!e.errs && !(dy.real && x.real && dw.real && bias.real && ws.real))
        fail("harness: a valid case without real buffers");

    ConvParameter param = c.p;
    param.workspace_ = c.null_which == NULL_WORKSPACE ? NULL : ws.ptr;
    const ConvParameter param_before = param;
    job j = {.c = &c,
             .dy = c.null_which == NULL_DY ? NULL : dy.ptr,
             .x = c.null_which == NULL_X ? NULL : x.ptr,
             .dw = c.null_which == NULL_DW ? NULL : dw.ptr,
             .bias = c.with_bias ? bias.ptr : NULL,
             .param = c.null_which == NULL_PARAM ? NULL : &param};

    if (c.null_which != NULL_PARAM)
        check_helpers(&c, &e);
    else if (cg_grad_filter_min_buffer_size(NULL, es) != 0 ||
             cg_grad_filter_workspace_bytes(NULL, c.core_mask, es) != 0)
        fail("a size helper returned non-zero for a NULL ConvParameter");
    if (verbose) {
        describe(stdout, &c);
        fflush(stdout);
    }
    cg_status s = run(&j);

    const char *msg = cg_status_message(s);
    if (!msg || !msg[0])
        fail("cg_status_message(%d) is empty", (int)s);
    if (verbose) {
        printf("  path %s, expected %s (errs 0x%x), got %d: %s\n", path_of(&c.p),
               e.errs ? "an error" : "CG_OK", e.errs, (int)s, msg);
    }

    if (memcmp(&param, &param_before, sizeof param) != 0)
        fail("the ConvParameter was written");
    if (!buf_same(&dy) || !buf_same(&x) || !buf_same(&bias))
        fail("an input (dy %d, x %d, bias %d: 0 = written) was written", buf_same(&dy),
             buf_same(&x), buf_same(&bias));
    if (s == CG_OK) {
        if (e.errs)
            fail("CG_OK for an invalid input (it deserves error bits 0x%x; tensors real: dy %d "
                 "x %d dw %d workspace %d)",
                 e.errs, dy.real, x.real, dw.real, ws.real);
        if (dw.ptr != dw.base && memcmp(dw.base, dw.copy, (size_t)(dw.ptr - dw.base)) != 0)
            fail("bytes before out_dw were written");
        if (ws.ptr != ws.base && memcmp(ws.base, ws.copy, (size_t)(ws.ptr - ws.base)) != 0)
            fail("bytes before the workspace were written");
        check_result(&c, &e, &dy, &x, &dw, c.with_bias ? &bias : NULL);
    } else {
        if (s > 0 || s < -31 || !(e.may & ERR_BIT(s)))
            fail("status %d (%s) for an input that deserves %s (error bits 0x%x)", (int)s, msg,
                 e.errs ? "other errors" : "CG_OK", e.may);
        if (!buf_same(&dw))
            fail("out_dw written on error %d (first changed byte %lld)", (int)s,
                 buf_first_change(&dw));
        if (!buf_same(&ws))
            fail("workspace written on error %d (first changed byte %lld)", (int)s,
                 buf_first_change(&ws));
    }
    buf_free(&dy);
    buf_free(&x);
    buf_free(&dw);
    buf_free(&bias);
    buf_free(&ws);
    current = NULL;
    return 0;
}
