/* SPDX-License-Identifier: MIT */
/* Everything that depends only on the shape: validation, the path, the
 * sizes of the pieces. A pure function of ConvParameter and dtype, so tests
 * can call it. */
#ifndef CG_PLAN_H
#define CG_PLAN_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "convgrad.h"
#include "status.h"

typedef enum cg_path { CG_PATH_GENERAL, CG_PATH_DEPTHWISE, CG_PATH_1X1 } cg_path;

typedef struct cg_plan {
    /* the shape, widened so index arithmetic cannot overflow */
    int64_t batch, in_h, in_w, out_h, out_w, cin, cout, kernel_h, kernel_w, groups;
    int64_t pad_l, pad_u, dil_h, dil_w, stride_h, stride_w;
    int64_t cin_g, cout_g; /* channels per group */
    int64_t taps;          /* kernel_h * kernel_w */
    int64_t row_len;       /* taps * cin_g: one dw row, and the width of im2col */
    int64_t rows;          /* batch * out_h * out_w: the length of the sum */
    size_t dw_elems;       /* cout * row_len */
    size_t dtype_size;     /* 4 (fp_) or 2 (hp_) */
    cg_path path;
    int64_t budget_floats; /* buffer_size_: _p stages at most this many floats */
} cg_plan;

/* The int fields of ConvParameter, in declaration order. */
typedef enum cg_field {
    CG_F_OUTPUT_BATCH,
    CG_F_INPUT_BATCH,
    CG_F_INPUT_H,
    CG_F_INPUT_W,
    CG_F_OUTPUT_H,
    CG_F_OUTPUT_W,
    CG_F_INPUT_CHANNEL,
    CG_F_OUTPUT_CHANNEL,
    CG_F_KERNEL_H,
    CG_F_KERNEL_W,
    CG_F_GROUP,
    CG_F_PAD_L,
    CG_F_PAD_U,
    CG_F_DILATION_H,
    CG_F_DILATION_W,
    CG_F_STRIDE_H,
    CG_F_STRIDE_W,
    CG_F_BUFFER_SIZE,
    CG_F_PAD_D,
    CG_F_PAD_R,
    CG_FIELDS
} cg_field;

/* What the validator's messages call things: the names the caller set, so
 * one validator speaks to the operator's callers and to cg_conv2d's. */
typedef struct cg_words {
    const char *field[CG_FIELDS]; /* by cg_field */
    const char *x, *dy, *dw;      /* the tensors */
    int has_buffer;               /* buffer_size_ is the caller's (else the library's) */
} cg_words;

/* The operator's: ConvParameter's fields, the entry points' parameters. */
extern const cg_words cg_operator_words;

/* Validates every field of p (not the tensor pointers) and fills plan.
 * Returns the first problem found, or CG_OK; err (may be NULL) then says
 * what is wrong, in `words`. */
cg_status cg_plan_check(const ConvParameter *p, size_t dtype_size, const cg_words *words,
                        cg_plan *plan, cg_error *err);
/* cg_plan_check in the operator's words, with no detail. */
cg_status cg_plan_make(const ConvParameter *p, size_t dtype_size, cg_plan *plan);

/* Labels the calling core's trace events (trace.h) with `function` and p's
 * shape; nothing when tracing is off. */
void cg_plan_trace_label(const char *function, const cg_plan *p);

/* Name of a path, for messages and benchmarks. */
const char *cg_path_name(cg_path path);

/* Whether the depthwise kernels take the shape (the weight gradient, and
 * the training step's NHWC forward and input gradient): one input channel a
 * group, any dilation, and one output channel a group, or up to
 * CG_DEPTHWISE_MOST_MULTIPLIER (the channel multiplier) where the groups
 * are CG_DEPTHWISE_LEAST_GROUPS or more (the kernels' vectors run over the
 * groups). That is the contract's depthwise path and shapes its names put
 * on the general path, whose kernels filled a vector with one group's few
 * channels: 128 -> 256 channels (multiplier 2), 1 core, weight gradient
 * 6.2x, forward 38x, input gradient 14x; 32 -> 256 (multiplier 8) 1.7x,
 * 9x, 9x; dilation 2, 128 channels, weight gradient 2.3x; with 8 groups
 * or fewer the outer-product kernels were faster. */
int cg_depthwise_kernels_take(const cg_plan *plan);
enum { CG_DEPTHWISE_MOST_MULTIPLIER = 8, CG_DEPTHWISE_LEAST_GROUPS = 32 };

/* The weight gradient's long sum is cut by the shape alone, never by the
 * core_mask, so every mask gives the same bits (and `_p` those of `_s`):
 * - by slices: the rows of the sum are cut into cg_sum_slices() slices,
 *   each summed from zero into its own partial dw, and the partials are
 *   added in slice order; cores take whole slices, or with more cores than
 *   slices share each slice's column units (grad_filter.c, a column cut
 *   changes no element's sum). Wherever 4 slices' or more partials fit in
 *   4 MiB, and wherever dw's rows are short;
 * - else by columns: each core owns column units of dw and sums them over
 *   every row of the sum, in passes fixed by the shape; no partial, no
 *   reduction. */
int cg_split_by_columns(const cg_plan *plan);
/* Slices of the sum (a power of two, 1 to CG_MAX_SLICES; 1 when by
 * columns), each at least 512 rows: as many as fit their partials in
 * 4 MiB, but 4 where the rows allow and 4 partials fit in
 * CG_SLICES_MOST_BYTES. */
int64_t cg_sum_slices(const cg_plan *plan);
/* The slices the rows of the sum would be cut into if not by columns (the
 * NCHW weight gradient's, which is never by columns). */
int64_t cg_row_slices(const cg_plan *plan);
/* A power of two of slices of `units` things, each at least `least` of
 * them, the slices' partials (`bytes_each`) within CG_SLICES_MOST_BYTES. */
int64_t cg_slices_of(int64_t units, int64_t least, int64_t bytes_each);
enum { CG_MAX_SLICES = 32, CG_SLICES_MOST_BYTES = 32 << 20 };
/* The slices a sum of `fixed` slices (one of the above) is cut into on
 * `members` cores: `fixed`, the shape's; with cg_set_reproducible(0), one
 * a core where that is fewer, so the sums depend on the mask. */
int64_t cg_slices_on(int64_t fixed, int members);
/* Column units: 16-column chunks of each group's row, or whole groups when
 * rows are short or a group is a few channels (the grouped kernels take
 * whole groups); unit u is group u / (units per group). */
int64_t cg_column_unit(const cg_plan *plan);
int64_t cg_column_units(const cg_plan *plan);
/* Whole groups of a few channels each, as many in as out: the grouped
 * kernels' shifted sums rather than GEMMs of a few floats a row. */
int cg_grouped_few(const cg_plan *plan);
/* Most channels a group the grouped kernels take (kernels/list.h). */
enum { CG_GROUPED_MOST = 8 };
/* Small dw rows of whole groups (a first layer's few input channels): the
 * outer_rows kernels' sums in registers rather than GEMMs on panels mostly
 * padding. The kernels take cout_g <= CG_OUTER_MOST_COUT and row_len <=
 * CG_OUTER_MOST_ROW. */
int cg_outer_rows_fit(const cg_plan *plan);
enum { CG_OUTER_MOST_COUT = 64, CG_OUTER_MOST_ROW = 64 };

/* [*first, *last) of `total` items (rows of the sum, or column units) that
 * logical core `rank` of `members` takes: contiguous, balanced to within one. */
void cg_split_range(int64_t total, int rank, int members, int64_t *first, int64_t *last);

/* Items [0, total) shared by `members` cores, each first taking its own
 * range (cg_split_range's) from the front, then, with its own done, the back
 * of whichever range has most left: a core slowed by something else on its
 * CPU leaves the rest of its range to the others, while each core's usual
 * items stay the same from call to call. taken[r] counts the items taken of
 * range r, from its front in the high half and from its back in the low
 * half, all 0 at the start. Into *at the next item for core `rank`; 0 when
 * none is left. */
int cg_take_item(atomic_ullong *taken, int64_t total, int members, int rank, int64_t *at);

/* Rows of im2col per tile of `tile_width` floats a row, for `_s`, whose
 * per-core scratch is bounded. */
int64_t cg_shared_tile_rows(int64_t tile_width, int64_t rows_of_core);
#endif
