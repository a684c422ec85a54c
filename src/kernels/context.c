/* SPDX-License-Identifier: MIT */
/* One place chooses every kernel: from cpuid, the cache sizes and
 * CONVGRAD_ISA (and CONVGRAD_CACHES), once per process (BLIS's cntx,
 * oneDNN's ONEDNN_MAX_CPU_ISA). */
#include "kernels/context.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if CG_X86_KERNELS
#include <cpuid.h>
#endif

static const cg_kernel_entry kernel_list[] = {
#define CG_KERNEL(slot, name, isa, features, mr, nr)                                               \
    {#slot, #name, CG_ISA_##isa, features, mr, nr, (cg_any_fn *)name},
#include "kernels/kernels.inc"
};

const cg_kernel_entry *cg_kernel_list(int *count)
{
    *count = (int)(sizeof kernel_list / sizeof *kernel_list);
    return kernel_list;
}

const char *cg_isa_name(cg_isa isa)
{
    static const char *const names[] = {"ref", "avx2", "avx512"};
    return names[isa];
}

static unsigned detect_features(void)
{
    unsigned f = 0;
#if CG_X86_KERNELS
    __builtin_cpu_init();
    f |= __builtin_cpu_supports("avx") ? CG_CPU_AVX : 0;
    f |= __builtin_cpu_supports("avx2") ? CG_CPU_AVX2 : 0;
    f |= __builtin_cpu_supports("fma") ? CG_CPU_FMA : 0;
    f |= __builtin_cpu_supports("avx512f") ? CG_CPU_AVX512F : 0;
    f |= __builtin_cpu_supports("avx512bw") ? CG_CPU_AVX512BW : 0;
    f |= __builtin_cpu_supports("avx512vl") ? CG_CPU_AVX512VL : 0;
    /* clang (14 at least) has no "f16c" for __builtin_cpu_supports: cpuid
     * leaf 1, ECX bit 29 (usable only with AVX, which the OS check above
     * covers) */
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C))
        f |= CG_CPU_F16C;
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u &&
        c == 0x6c65746eu) /* "Genu" "ineI" "ntel" */
        f |= CG_CPU_INTEL;
#endif
    return f;
}

static cg_isa widest_isa(unsigned f)
{
    const unsigned avx2 = CG_CPU_AVX | CG_CPU_AVX2 | CG_CPU_FMA | CG_CPU_F16C;
    if ((f & (avx2 | CG_CPU_AVX512_FBWVL)) == (avx2 | CG_CPU_AVX512_FBWVL))
        return CG_ISA_AVX512;
    return (f & avx2) == avx2 ? CG_ISA_AVX2 : CG_ISA_REF;
}

/* CONVGRAD_ISA: the cap, or the CPU's own set when it is unset, unknown
 * (said on stderr) or more than the CPU has (said too: a fallback, never a
 * crash). */
static cg_isa capped_isa(cg_isa cpu)
{
    const char *want = getenv("CONVGRAD_ISA");
    if (!want || !*want)
        return cpu;
    for (cg_isa isa = CG_ISA_REF; isa <= CG_ISA_AVX512; isa++) {
        if (strcmp(want, cg_isa_name(isa)) != 0)
            continue;
        if (isa <= cpu)
            return isa;
        fprintf(stderr, "convgrad: CONVGRAD_ISA=%s: this CPU or build cannot run it; using %s\n",
                want, cg_isa_name(cpu));
        return cpu;
    }
    fprintf(stderr, "convgrad: CONVGRAD_ISA=%s is not ref, avx2 or avx512; using %s\n", want,
            cg_isa_name(cpu));
    return cpu;
}

/* sysconf's answer where it has one in [lo, hi], else `otherwise`. */
static long cache_bytes(int name, long lo, long hi, long otherwise)
{
    long bytes = name >= 0 ? sysconf(name) : -1;
    return bytes >= lo && bytes <= hi ? bytes : otherwise;
}

#ifndef _SC_LEVEL1_DCACHE_SIZE /* not glibc */
#define _SC_LEVEL1_DCACHE_SIZE (-1)
#define _SC_LEVEL2_CACHE_SIZE (-1)
#define _SC_LEVEL3_CACHE_SIZE (-1)
#endif

/* The largest level's size from sysfs (cpu0's caches), in bytes; -1 where
 * there is none. glibc's sysconf can be far off in a virtual machine (256
 * MiB of L3 reported for 16 MiB on an AMD EPYC guest). */
static long sysfs_llc_bytes(void)
{
    long best = -1;
    int best_level = 0;
    for (int i = 0; i < 10; i++) {
        char path[96], text[32];
        long size = -1;
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        char unit = 0;
        if (fgets(text, sizeof text, f) && sscanf(text, "%ld%c", &size, &unit) >= 1)
            size *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
        fclose(f);
        if (level >= best_level && size > 0) {
            best_level = level;
            best = size;
        }
    }
    return best;
}

/* One size of CONVGRAD_CACHES: digits, then K, M or G (1024-based) or
 * nothing; its end in *end. -1 where it is none, or past 2^31 units (no
 * cache size is: the product cannot overflow). */
static long cache_size_of(const char *s, const char **end)
{
    long v = 0;
    const char *at = s;
    for (; *at >= '0' && *at <= '9'; at++)
        if ((v = v * 10 + (*at - '0')) > (1L << 31))
            return -1;
    if (at == s)
        return -1;
    const long unit = *at == 'K' ? 1L << 10 : *at == 'M' ? 1L << 20 : *at == 'G' ? 1L << 30 : 1;
    *end = at + (unit > 1);
    return v * unit;
}

/* CONVGRAD_CACHES=L1,L2,L3 (e.g. 32K,512K,32M: an AMD Zen 3's): the sizes
 * the blocking and the paths are chosen for instead of this CPU's, so that
 * the suite runs another CPU's plans on any machine. Returns whether it is
 * set and valid (each in the range detection accepts, L3 >= L2); says on
 * stderr why not where it is set but invalid. */
static int caches_asked(long *l1, long *l2, long *l3)
{
    const char *want = getenv("CONVGRAD_CACHES");
    if (!want || !*want)
        return 0;
    long v[3];
    const char *at = want;
    int n = 0;
    for (; n < 3; n++) {
        if ((v[n] = cache_size_of(at, &at)) < 0 || *at != (n < 2 ? ',' : '\0'))
            break;
        at += n < 2;
    }
    if (n == 3 && v[0] >= 4 << 10 && v[0] <= 1 << 20 && v[1] >= 64 << 10 && v[1] <= 64 << 20 &&
        v[2] >= v[1] && v[2] <= 1L << 30) {
        *l1 = v[0];
        *l2 = v[1];
        *l3 = v[2];
        return 1;
    }
    fprintf(stderr,
            "convgrad: CONVGRAD_CACHES=%s is not L1,L2,L3 sizes (e.g. 32K,512K,32M; L1 4K-1M, "
            "L2 64K-64M, L3 L2-1G); using this CPU's\n",
            want);
    return 0;
}

/* Outputs streamed past the caches are larger than the last-level cache
 * and than this (make_context). */
enum { STREAM_MOST_BYTES = 16 << 20 };

static cg_kernel_context context;
static pthread_once_t context_once = PTHREAD_ONCE_INIT;

static int allows(const cg_kernel_context *ctx, const cg_kernel_entry *e)
{
    return e->isa <= ctx->isa && (e->features & ~ctx->cpu_features) == 0;
}

static void make_context(void)
{
    cg_kernel_context *ctx = &context;
    ctx->cpu_features = detect_features();
    ctx->cpu_isa = widest_isa(ctx->cpu_features);
    ctx->isa = capped_isa(ctx->cpu_isa);
    long llc_bytes;
    if (!caches_asked(&ctx->l1_bytes, &ctx->l2_bytes, &llc_bytes)) {
        ctx->l1_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 4 << 10, 1 << 20, 32 << 10);
        ctx->l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 64 << 10, 64 << 20, 512 << 10);
        const long llc = sysfs_llc_bytes();
        llc_bytes = llc >= ctx->l2_bytes && llc <= (1L << 30)
                        ? llc
                        : cache_bytes(_SC_LEVEL3_CACHE_SIZE, ctx->l2_bytes, 1L << 30, 32L << 20);
    }
    /* a guest sees its host's whole last-level cache (300 MiB on a Xeon of
     * family 6 model 207), of which it has a share: there, a depthwise
     * forward and one read of its output after it ran 0.62-0.96x as fast
     * streamed at 1.6-12.8 MB of output, 1.09-1.30x at 25.7-51.4 MB (1 and
     * 2 cores) */
    ctx->stream_bytes = llc_bytes < STREAM_MOST_BYTES ? llc_bytes : STREAM_MOST_BYTES;
    /* the list goes slowest to fastest: the last line allowed wins */
    const cg_kernel_entry *e = kernel_list;
#define CG_KERNEL(slot, name, isa, features, mr, nr)                                               \
    if (allows(ctx, e)) {                                                                          \
        ctx->slot = name;                                                                          \
        ctx->entry.slot = e;                                                                       \
    }                                                                                              \
    e++;
#include "kernels/kernels.inc"
}

const cg_kernel_context *cg_kernels(void)
{
    pthread_once(&context_once, make_context);
    return &context;
}

int cg_cpu_has(unsigned features)
{
    return (features & ~cg_kernels()->cpu_features) == 0;
}
