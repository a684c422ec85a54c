/* SPDX-License-Identifier: MIT */
/* The packed micro-kernel in plain C: the oracle of the gemm_panel kernels
 * and the portable path. The inner loop runs along a step of B and a row of
 * C (contiguous: the compiler vectorises it). */
#include "kernels/list.h"

enum { MR = 8, NR = 16 }; /* the list's tile for this kernel */

void cg_f32_gemm_panel_ref_8x16(int m, int n, int k, const float *a, const float *b, float beta,
                                float *c, int ldc, const char *prefetch, const char *prefetch_end)
{
    (void)prefetch, (void)prefetch_end; /* a hint this kernel does without */
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < n; j++)
                ci[j] = 0.0f;
        for (int p = 0; p < k; p++) {
            const float aip = a[(size_t)p * MR + i], *bp = b + (size_t)p * NR;
            for (int j = 0; j < n; j++)
                ci[j] += aip * bp[j];
        }
    }
}

void cg_f32_pack_run_ref(cg_panel_cursor *cur, const float *src, int64_t n)
{
    while (n > 0) {
        const int64_t len = n < cur->room ? n : cur->room;
        for (int64_t i = 0; i < len; i++)
            cur->at[i] = src ? src[i] : 0.0f;
        src = src ? src + len : NULL;
        n -= len;
        cur->at += len;
        if ((cur->room -= len) == 0) {
            cur->at += cur->jump;
            cur->room = cur->width;
        }
    }
}

void cg_f16_pack_run_ref(cg_panel_cursor *cur, const void *src_halves, int64_t n)
{
    float converted[64];
    const unsigned char *src = src_halves;
    for (int64_t done = 0; done < n; done += 64) {
        const int64_t len = n - done < 64 ? n - done : 64;
        cg_f16_to_f32_ref(converted, src + 2 * done, (size_t)len);
        cg_f32_pack_run_ref(cur, converted, len);
    }
}
