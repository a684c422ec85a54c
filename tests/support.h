/* SPDX-License-Identifier: MIT */
/* Test support: seeded random data, guard-page buffers, canaries, checksums,
 * shapes, and run_case(), which runs one configuration on one entry point and
 * checks everything the contract promises about it. */
#ifndef CGT_SUPPORT_H
#define CGT_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "convgrad.h"
#include "reference.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- seeded RNG (splitmix64) ------------------------------------------- */
typedef struct cgt_rng {
    uint64_t s;
} cgt_rng;

uint64_t cgt_mix64(uint64_t z); /* the splitmix64 finaliser */
void cgt_rng_seed(cgt_rng *r, uint64_t seed);
uint64_t cgt_rng_next(cgt_rng *r);
int cgt_rng_int(cgt_rng *r, int lo, int hi); /* uniform in [lo, hi] */
double cgt_rng_unit(cgt_rng *r);             /* uniform in [0, 1) */
double cgt_rng_sym(cgt_rng *r);              /* uniform in [-1, 1] */
int cgt_rng_pick(cgt_rng *r, const int *v, int n);
int cgt_rng_chance(cgt_rng *r, int percent); /* 1 with probability percent/100 */
cgt_rng cgt_rng_seeded(uint64_t seed);       /* a generator seeded with seed */

/* Base seed of a test binary: $CGT_SEED if set (decimal or 0x hex), else a
 * fixed default, so runs are reproducible and failures name their seed. */
uint64_t cgt_base_seed(void);

/* ---- data --------------------------------------------------------------- */
/* Uniform values in [-range, range]. */
void cgt_fill_f32(cgt_rng *r, float *v, size_t n, double range);
/* Uniform values in [-range, range], rounded to binary16 (bits stored). */
void cgt_fill_f16(cgt_rng *r, void *bits, size_t n, double range);
/* Small dyadic values k/32 with |k/32| <= range: exact in fp16 and fp32;
 * their products are multiples of 2^-10, so fp32 sums of them are exact up
 * to 2^14 in magnitude, and they have more bits than half keeps, so the
 * final rounding to half is exercised. */
void cgt_fill_dyadic_f32(cgt_rng *r, float *v, size_t n, int range);
void cgt_fill_dyadic_f16(cgt_rng *r, void *bits, size_t n, int range);
void cgt_fill_bytes(cgt_rng *r, void *p, size_t n);
uint64_t cgt_fnv1a(const void *p, size_t n);

/* ---- guard-page buffers ------------------------------------------------- */
/* Layout: [PROT_NONE page][data pages][PROT_NONE page]. The n user bytes sit
 * at the END of the data pages (followed by `slack` canary bytes, then the
 * guard page) or at the START (after `slack` canary bytes). Every data byte
 * outside [ptr, ptr+n) holds a position-dependent canary. */
enum { CGT_AT_END = 0, CGT_AT_START = 1 };
typedef struct cgt_buf {
    unsigned char *map;
    size_t map_len;
    unsigned char *data; /* first data page */
    size_t data_len;
    unsigned char *ptr; /* the user region */
    size_t n;
} cgt_buf;

/* Aborts the process (test failure) if mmap fails. */
void cgt_buf_alloc(cgt_buf *b, size_t n, size_t slack, int where);
void cgt_buf_free(cgt_buf *b);
/* -1 if every canary byte is intact, else the offset (relative to ptr,
 * negative = before) of the first damaged one. */
long long cgt_buf_canary_damage(const cgt_buf *b);
/* Makes the whole data area read-only (writes fault). */
void cgt_buf_readonly(cgt_buf *b);

/* ---- shapes ------------------------------------------------------------- */
/* Compact shape: zero group/stride/dilation mean 1; oh/ow <= 0 mean "the
 * forward formula" (clamped to >= 1); bs <= 0 means 0x10000. Batch n is
 * used for both batches. */
typedef struct cgt_shape {
    int n, h, w, cin, cout, kh, kw, g;
    int sh, sw, dh, dw;
    int pu, pd, pl, pr;
    int oh, ow;
    int bs;
} cgt_shape;

ConvParameter cgt_param(const cgt_shape *s);
/* Forward output size (in + pa + pb - dil*(k-1) - 1)/stride + 1, in int64;
 * may be <= 0 (caller decides). */
long long cgt_fwd_out(int in, int pa, int pb, int k, int dil, int stride);
/* The contract's formulas, by hand: -1 when the bound exceeds INT_MAX. */
long long cgt_min_buffer(const ConvParameter *p, size_t dtype_size);
size_t cgt_ws_bytes_s(const ConvParameter *p, int core_mask);
int cgt_popcount(int mask);
/* The contract's path predicates. */
typedef enum { CGT_PATH_DEPTHWISE, CGT_PATH_1X1, CGT_PATH_GENERAL } cgt_path;
cgt_path cgt_path_of(const ConvParameter *p);
const char *cgt_path_name(cgt_path path);
/* One-line description of the shape fields. */
void cgt_param_str(const ConvParameter *p, char *buf, size_t len);
/* Draws the kernel and its geometry, each field on its own (so Kh != Kw and
 * asymmetric pads are common): Kh, Kw in [1, maxk], strides in [1, maxs],
 * dilations in [1, maxd], pads in [0, maxp], in that order. */
void cgt_draw_kernel_geom(cgt_rng *r, cgt_shape *s, int maxk, int maxs, int maxd, int maxp);
/* The vendor card's example shape: batch 4, a 4x4x4 input, a 3x3 kernel, a
 * 2x2x4 dy, group 1, buffer_size_ 0x10000. */
cgt_shape cgt_card_shape(void);

/* ---- one configuration, run and checked --------------------------------- */
typedef enum { CGT_FP32, CGT_FP16 } cgt_dtype;
/* cgt_fill_f32 or cgt_fill_f16, as dt says: n values of the dtype in v. */
void cgt_fill(cgt_rng *r, cgt_dtype dt, void *v, size_t n, double range);
typedef enum {
    CGT_S_HOST, /* _s called once from the test thread (host mode) */
    CGT_S_SPMD, /* _s called by every core of the mask inside core_mask_launch */
    CGT_P_HOST, /* _p called from the test thread */
    CGT_P_SPMD  /* _p called by every core of the mask, each with its own
                   out_dw, ConvParameter and workspace, same inputs */
} cgt_mode;
typedef enum {
    CGT_API_VOID,  /* seed entry point + cg_last_status() */
    CGT_API_STATUS /* cg_* twin returning the status */
} cgt_api;

#define CGT_MAX_CALLS 4

typedef struct cgt_case {
    ConvParameter p; /* shape fields and buffer_size_; workspace_ is ignored */
    cgt_dtype dtype;
    cgt_mode mode;
    cgt_api api;
    int core_mask; /* for _s and P_SPMD */
    int with_bias;
    int prefill; /* out_dw pre-filled with random values, else zeros */
    int calls;   /* consecutive calls on the same buffers (<= CGT_MAX_CALLS); 0 = 1 */
    size_t
        ws_slack; /* canary bytes after the allowed workspace range (0: guard page right after) */
    size_t out_slack;    /* canary bytes after out_dw (0: guard page right after) */
    int ws_at_start;     /* workspace starts at a guard page (catches underflow) */
    int in_at_start;     /* inputs start at a guard page instead of ending at one */
    int readonly_inputs; /* dy, x, bias and the ConvParameter made read-only */
    int zero_dy;         /* dy all zeros (dw == 0): isolates the bias */
    int dyadic;          /* small dyadic data; with exact, results must be exact */
    int exact;           /* demand got == expected bit for bit (dyadic or fp16_tiny
                            data only; fp16: one round-to-nearest-even of the exact sum) */
    int fp16_tiny;       /* fp16: x, bias, out0 are m*2^-24 (subnormals, smallest
                            normals, +-0), dy small integers: exact, tiny results */
    double range;        /* data range, 0 = 1.0 */
    uint64_t seed;       /* data seed */
} cgt_case;

typedef struct cgt_result {
    int ok;
    int bad_elems;
    double worst_ratio; /* max |got-ref| / tol */
    char msg[2048];
} cgt_result;

/* The expected out_dw of a call sequence and its per-element tolerance:
 * want = out0 + calls*(dw + bias[row]), from the reference in double on the
 * dtype's actual input values. Tolerance per call: fp32 1e-5*(|prev| +
 * sum|terms| + |bias|) + 1e-6; fp16 adds 2^-10*|result| (the final rounding
 * to half). exact (CGT_EXACT_*): tolerance 0, and for fp16 each call's result is the
 * double sum rounded to float then to half (nearest even): right when the
 * data make every fp32 sum exact (dyadic data), so it checks fp32
 * accumulation and one final rounding. bias may be NULL; out0, dy, x, bias
 * are buffers of the dtype (fp16 as raw bits). */
typedef struct cgt_expected {
    size_t n;
    int calls;
    int overflow; /* fp16: an expected value would overflow half (harness bug) */
    int inexact;  /* exact mode, but the data allow fp32 rounding (harness bug) */
    double *want, *tol, *out0, *dw, *bias;
} cgt_expected;
enum {
    CGT_EXACT_DYADIC = 1, /* exact: dyadic data, fp32 sums exact below 2^14 */
    CGT_EXACT_TINY = 2    /* exact: fp16_tiny data, fp32 sums exact below 1 */
};
void cgt_expected_compute(cgt_expected *e, const ConvParameter *p, cgt_dtype dt, const void *dy,
                          const void *x, const void *bias, const void *out0, int calls, int exact);
/* Adds mismatches (at most 5 listed) to res, labelled; returns 1 if all match. */
int cgt_expected_compare(const cgt_expected *e, const ConvParameter *p, cgt_dtype dt,
                         const void *got, cgt_result *res, const char *label);
void cgt_expected_free(cgt_expected *e);

/* Runs c and checks: every call's status is CG_OK (and cg_last_status agrees
 * for the void entries, on every core in SPMD), out_dw == out0 + calls*(dw +
 * bias) within the tolerance, canaries around out_dw and outside the allowed
 * workspace range intact, inputs and ConvParameter unchanged. */
cgt_result cgt_run_case(const cgt_case *c);
/* One line naming everything needed to reproduce c. */
void cgt_case_str(const cgt_case *c, char *buf, size_t len);
const char *cgt_mode_name(cgt_mode m);

/* A result that has found nothing wrong yet (ok, no message): the start of a
 * check that adds to it, e.g. with cgt_expected_compare. */
cgt_result cgt_result_passing(void);
/* Append to a result's message (printf style), truncating. */
void cgt_result_addf(cgt_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- error details --------------------------------------------------- */
/* Whether `detail` is right for a failure found on an emulated core of
 * core_mask: CG_ERR_NO_MEMORY's "core N of core_mask 0x... could not
 * allocate B bytes of scratch" (N in the mask, 0 < B, and B <= most_bytes
 * when most_bytes > 0) or CG_ERR_THREAD's "the thread of core N could not be
 * started: ..." (N in the mask). 1 if so; else 0 and why in `why`. */
int cgt_core_failure_detail_ok(const char *detail, cg_status s, int core_mask, size_t most_bytes,
                               char *why, size_t why_len);

/* Nonzero when a detail speaks the operator's language, which a cg_conv2d_*
 * detail must not: a word ending in '_' (pad_l_, workspace_), or the
 * operator's pointers and buffer. Inline, so the fuzz targets use it without
 * the support library. */
static inline int cgt_names_operator_field(const char *detail)
{
    static const char *const words[] = {"workspace", "buffer_size", "conv_param",
                                        "input_x",   "input_dy",    "out_dw"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(detail, words[i]))
            return 1;
    for (const char *c = detail; *c; c++) {
        const char next = c[1];
        const int ends_word = !(next == '_' || next == '*' || (next >= '0' && next <= '9') ||
                                (next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z'));
        if (*c == '_' && c > detail && c[-1] != ' ' && ends_word)
            return 1;
    }
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
