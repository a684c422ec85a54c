/* SPDX-License-Identifier: MIT */
/* What the vendor card's two examples (card_shared_fp32.c, card_private_fp32.c)
 * share on the host: the card's shape, heap stand-ins for its fixed addresses
 * with deterministic data, and the check of out_dw against a plain
 * double-precision loop of the formula, printed as the examples report it. */
#ifndef CARD_CHECK_H
#define CARD_CHECK_H

#include <convgrad.h>

#include <stddef.h>

/* The card's shape: batch 4, a 4x4x4 input, a 3x3 kernel, a 2x2x4 dy. */
enum {
    BATCH = 4,
    IN_H = 4,
    IN_W = 4,
    IN_C = 4,
    OUT_H = 2,
    OUT_W = 2,
    OUT_C = 4,
    K_H = 3,
    K_W = 3,
    GROUP = 1,
    DY_ELEMS = BATCH * OUT_H * OUT_W * OUT_C,
    X_ELEMS = BATCH * IN_H * IN_W * IN_C,
    DW_ELEMS = OUT_C * K_H * K_W * (IN_C / GROUP)
};

/* Heap memory for the card's addresses, sized from the enum: dy and x filled
 * with deterministic data, out_dw zeroed (the operator accumulates into it),
 * the ConvParameter zeroed. Returns 0; when memory runs out, prints
 * "<program>: out of memory" on stderr, frees what it got and returns 1. */
int card_alloc(const char *program, float **dy, float **x, float **out_dw, ConvParameter **param);
void card_free(float *dy, float *x, float *out_dw, ConvParameter *param);

/* The buffers were sized from the enum; whether the card's values, filled in
 * by the example, describe the same tensors (check before reading them). */
int card_param_matches_buffers(const ConvParameter *p);

/* Prints the shape, buffer_size_ and the workspace size (and how it was
 * sized), then out_dw, then its check against the double-precision reference
 * with PASS or FAIL. Returns 0 on PASS, 1 on FAIL. */
int card_report_and_check(const ConvParameter *p, size_t workspace_bytes,
                          const char *workspace_sizing, const float *dy, const float *x,
                          const float *out_dw);

#endif
