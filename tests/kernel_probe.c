/* SPDX-License-Identifier: MIT */
/* Prints the kernel context this process gets (tests/test_kernel_context.c
 * runs it with CONVGRAD_ISA or CONVGRAD_CACHES set: the context is chosen
 * once per process):
 *
 *   isa avx2
 *   cpu_isa avx512
 *   cache 49152 2097152 16777216   (L1, L2, the streaming threshold)
 *   gemm_tile 12 16
 *   gemm_panel cg_f32_gemm_panel_avx2_12x16
 *   gemm_indirect cg_f32_gemm_indirect_avx2_12x16
 *   ...one line per slot
 */
#include <stdio.h>

#include "kernels/context.h"

int main(void)
{
    const cg_kernel_context *k = cg_kernels();
    printf("isa %s\ncpu_isa %s\ncache %ld %ld %ld\ngemm_tile %d %d\n", cg_isa_name(k->isa),
           cg_isa_name(k->cpu_isa), k->l1_bytes, k->l2_bytes, k->stream_bytes,
           k->entry.gemm_panel->mr, k->entry.gemm_panel->nr);
    const char *const slots[] = {
        "gemm_panel",    "gemm_panel_packing", "gemm_indirect", "gemm_runs",      "pack_rows",
        "pack_rows_f16", "pack_transposed",    "dwconv_rows",   "dwconv3x3_rows", "grouped_rows",
        "outer_rows",    "dwconv_pixel",       "dwconv_run",    "grouped_pixel",  "transpose",
        "sum_rows",      "f16_to_f32",         "f32_to_f16"};
    const cg_kernel_entry *const chosen[] = {
        k->entry.gemm_panel,      k->entry.gemm_panel_packing, k->entry.gemm_indirect,
        k->entry.gemm_runs,       k->entry.pack_rows,          k->entry.pack_rows_f16,
        k->entry.pack_transposed, k->entry.dwconv_rows,        k->entry.dwconv3x3_rows,
        k->entry.grouped_rows,    k->entry.outer_rows,         k->entry.dwconv_pixel,
        k->entry.dwconv_run,      k->entry.grouped_pixel,      k->entry.transpose,
        k->entry.sum_rows,        k->entry.f16_to_f32,         k->entry.f32_to_f16};
    for (size_t i = 0; i < sizeof chosen / sizeof *chosen; i++)
        printf("%s %s\n", slots[i], chosen[i] ? chosen[i]->name : "none");
    /* the pointers the library calls are the lines printed */
    const int same =
        (cg_any_fn *)k->gemm_panel == k->entry.gemm_panel->fn &&
        (k->entry.gemm_panel_packing
             ? (cg_any_fn *)k->gemm_panel_packing == k->entry.gemm_panel_packing->fn
             : !k->gemm_panel_packing) &&
        (cg_any_fn *)k->gemm_indirect == k->entry.gemm_indirect->fn &&
        (cg_any_fn *)k->gemm_runs == k->entry.gemm_runs->fn &&
        (cg_any_fn *)k->pack_rows == k->entry.pack_rows->fn &&
        (cg_any_fn *)k->pack_rows_f16 == k->entry.pack_rows_f16->fn &&
        (cg_any_fn *)k->pack_transposed == k->entry.pack_transposed->fn &&
        (cg_any_fn *)k->dwconv_rows == k->entry.dwconv_rows->fn &&
        (k->entry.dwconv3x3_rows ? (cg_any_fn *)k->dwconv3x3_rows == k->entry.dwconv3x3_rows->fn
                                 : !k->dwconv3x3_rows) &&
        (cg_any_fn *)k->grouped_rows == k->entry.grouped_rows->fn &&
        (cg_any_fn *)k->outer_rows == k->entry.outer_rows->fn &&
        (cg_any_fn *)k->dwconv_pixel == k->entry.dwconv_pixel->fn &&
        (cg_any_fn *)k->dwconv_run == k->entry.dwconv_run->fn &&
        (cg_any_fn *)k->grouped_pixel == k->entry.grouped_pixel->fn &&
        (cg_any_fn *)k->transpose == k->entry.transpose->fn &&
        (cg_any_fn *)k->sum_rows == k->entry.sum_rows->fn &&
        (cg_any_fn *)k->f16_to_f32 == k->entry.f16_to_f32->fn &&
        (cg_any_fn *)k->f32_to_f16 == k->entry.f32_to_f16->fn;
    return same ? 0 : 1;
}
