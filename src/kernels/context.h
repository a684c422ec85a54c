/* SPDX-License-Identifier: MIT */
/* The kernel context: for this CPU, the kernel of each slot of the list
 * and the sizes the drivers block for, chosen once per process
 * (docs/kernels.md). CONVGRAD_ISA=ref|avx2|avx512 in the environment caps
 * the choice; CONVGRAD_CACHES=L1,L2,L3 sets the cache sizes instead of the
 * CPU's. */
#ifndef CG_KERNELS_CONTEXT_H
#define CG_KERNELS_CONTEXT_H
#include "kernels/list.h"

typedef struct cg_kernel_context {
    cg_isa isa;            /* the widest kernel set in use: the CPU's, capped */
    cg_isa cpu_isa;        /* the widest this CPU and build run */
    unsigned cpu_features; /* CG_CPU_* bits of this CPU (0 without x86 kernels) */
    long l1_bytes;         /* one core's L1 data cache */
    long l2_bytes;         /* one core's L2 cache */
    long stream_bytes;     /* outputs larger go past the caches (cg_dwconv_run.stream) */

    cg_gemm_panel_fn *gemm_panel; /* its A panel and B micro-panel: entry.gemm_panel->mr, ->nr */
    cg_gemm_panel_packing_fn *gemm_panel_packing; /* NULL where none runs; gemm_panel's tile */
    cg_gemm_indirect_fn *gemm_indirect; /* the same tile as gemm_panel's */
    cg_gemm_runs_fn *gemm_runs;
    cg_pack_rows_fn *pack_rows;
    cg_pack_rows_f16_fn *pack_rows_f16;
    cg_pack_transposed_fn *pack_transposed;
    cg_dwconv_rows_fn *dwconv_rows;
    cg_dwconv3x3_rows_fn *dwconv3x3_rows; /* NULL where no 3x3 kernel runs */
    cg_grouped_rows_fn *grouped_rows;
    cg_outer_rows_fn *outer_rows;
    cg_dwconv_pixel_fn *dwconv_pixel;
    cg_dwconv_run_fn *dwconv_run;
    cg_grouped_pixel_fn *grouped_pixel;
    cg_transpose_fn *transpose;
    cg_sum_rows_fn *sum_rows;
    cg_f16_to_f32_fn *f16_to_f32;
    cg_f32_to_f16_fn *f32_to_f16;

    /* The list's line of each chosen kernel (its name, ISA, tile), or NULL. */
    struct {
        const cg_kernel_entry *gemm_panel, *gemm_panel_packing, *gemm_indirect, *gemm_runs,
            *pack_rows, *pack_rows_f16, *pack_transposed, *dwconv_rows, *dwconv3x3_rows,
            *grouped_rows, *outer_rows, *dwconv_pixel, *dwconv_run, *grouped_pixel, *transpose,
            *sum_rows, *f16_to_f32, *f32_to_f16;
    } entry;
} cg_kernel_context;

/* The context, made on the first call (thread-safe); never NULL. */
const cg_kernel_context *cg_kernels(void);

/* "ref", "avx2" or "avx512". */
const char *cg_isa_name(cg_isa isa);

/* Whether this CPU has every feature of `features` (CG_CPU_* bits): a kernel
 * that needs them runs here, whatever the cap. */
int cg_cpu_has(unsigned features);
#endif
