/* SPDX-License-Identifier: MIT */
/* The kernel context under each CONVGRAD_ISA (and CONVGRAD_CACHES): it is chosen once per
 * process, so each case runs tests/kernel_probe.c in a child with the
 * variable set and reads what it chose. Stated against the list: the cap
 * in effect, each slot's kernel at most that wide and the fastest line the
 * cap and the CPU allow, and the one-line notice of a fallback. */
#define _POSIX_C_SOURCE 200809L /* popen */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/context.h"

typedef struct probe {
    char out[4096];
} probe;

/* The probe's stdout and stderr with `env` before it (env(1)'s arguments). */
static void run_probe_env(const char *env, probe *pr)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s '%s' 2>&1", env, CG_KERNEL_PROBE);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen %s", cmd);
    size_t n = fread(pr->out, 1, sizeof pr->out - 1, f);
    pr->out[n] = '\0';
    cr_assert_eq(pclose(f), 0, "%s failed:\n%s", cmd, pr->out);
}

/* The probe with CONVGRAD_ISA=value. */
static void run_probe(const char *value, probe *pr)
{
    char env[256];
    snprintf(env, sizeof env, "CONVGRAD_ISA='%s'", value);
    run_probe_env(env, pr);
}

/* A field of the probe's output against what it must be. */
#define assert_same(got, want, pr)                                                                 \
    cr_assert(strcmp((got), (want)) == 0, "'%s' where '%s' is due, in:\n%s", (got), (want),        \
              (pr)->out)

/* The word after "key " at the start of a line of the probe's output. */
static const char *field(const probe *pr, const char *key, char *buf, size_t len)
{
    size_t k = strlen(key);
    for (const char *line = pr->out; line && *line; line = strchr(line, '\n'), line += !!line)
        if (strncmp(line, key, k) == 0 && line[k] == ' ') {
            size_t w = strcspn(line + k + 1, "\n");
            snprintf(buf, len, "%.*s", (int)w, line + k + 1);
            return buf;
        }
    cr_assert_fail("no line '%s' in the probe's output:\n%s", key, pr->out);
    return NULL;
}

static const cg_kernel_entry *entry_named(const char *name)
{
    int n;
    const cg_kernel_entry *list = cg_kernel_list(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    cr_assert_fail("%s is no kernel of the list", name);
    return NULL;
}

static const char *const slots[] = {
    "gemm_panel",    "gemm_panel_packing", "gemm_indirect", "gemm_runs",      "pack_rows",
    "pack_rows_f16", "pack_transposed",    "dwconv_rows",   "dwconv3x3_rows", "grouped_rows",
    "outer_rows",    "dwconv_pixel",       "dwconv_run",    "grouped_pixel",  "transpose",
    "sum_rows",      "f16_to_f32",         "f32_to_f16"};

/* Whether the cap and the CPU allow a line. */
static int allowed(const cg_kernel_entry *e, cg_isa isa)
{
    return e->isa <= isa && cg_cpu_has(e->features);
}

/* The probe ran with cap `isa`: every slot holds the last line of the list
 * for it that the cap and the CPU allow; the gemm tile is its kernel's. */
static void check_choice(const probe *pr, cg_isa isa)
{
    char buf[128];
    assert_same(field(pr, "isa", buf, sizeof buf), cg_isa_name(isa), pr);
    int n;
    const cg_kernel_entry *list = cg_kernel_list(&n);
    for (size_t s = 0; s < sizeof slots / sizeof *slots; s++) {
        const char *name = field(pr, slots[s], buf, sizeof buf);
        if (strcmp(name, "none") == 0) { /* only a specialisation may be empty */
            for (int i = 0; i < n; i++)
                cr_assert(strcmp(list[i].slot, slots[s]) != 0 || !allowed(&list[i], isa),
                          "%s: none chosen where %s is allowed", slots[s], list[i].name);
            cr_assert(strcmp(slots[s], "dwconv3x3_rows") == 0 ||
                          strcmp(slots[s], "gemm_panel_packing") == 0,
                      "%s has no kernel", slots[s]);
            continue;
        }
        const cg_kernel_entry *e = entry_named(name);
        cr_assert(strcmp(e->slot, slots[s]) == 0, "%s holds %s", slots[s], e->name);
        cr_assert(allowed(e, isa), "%s: %s is wider than %s", slots[s], e->name, cg_isa_name(isa));
        for (const cg_kernel_entry *later = e + 1; later < list + n; later++)
            cr_assert(strcmp(later->slot, e->slot) != 0 || !allowed(later, isa),
                      "%s: %s chosen where %s is allowed", slots[s], e->name, later->name);
        if (s == 0) {
            char want[32];
            snprintf(want, sizeof want, "%d %d", e->mr, e->nr);
            assert_same(field(pr, "gemm_tile", buf, sizeof buf), want, pr);
        }
    }
    long l1, l2, stream;
    cr_assert_eq(sscanf(field(pr, "cache", buf, sizeof buf), "%ld %ld %ld", &l1, &l2, &stream), 3);
    cr_assert(l1 >= 4096 && l2 >= 65536 && stream > 0, "cache sizes %ld %ld %ld", l1, l2, stream);
}

/* How the probe begins: the notice, or nothing (its first line is "isa"). */
static void check_notice(const probe *pr, const char *notice)
{
    if (!notice) {
        cr_assert(strncmp(pr->out, "isa ", 4) == 0, "a notice where none is due:\n%s", pr->out);
        return;
    }
    size_t k = strlen(notice);
    cr_assert(strncmp(pr->out, notice, k) == 0 && pr->out[k] == '\n' &&
                  strncmp(pr->out + k + 1, "isa ", 4) == 0,
              "want the one line\n%s\ngot\n%s", notice, pr->out);
}

static void check_request(const char *value, cg_isa want)
{
    const cg_isa cpu = cg_kernels()->cpu_isa;
    probe pr;
    run_probe(value, &pr);
    char buf[128];
    assert_same(field(&pr, "cpu_isa", buf, sizeof buf), cg_isa_name(cpu), &pr);
    char notice[256];
    if (want > cpu) {
        snprintf(notice, sizeof notice,
                 "convgrad: CONVGRAD_ISA=%s: this CPU or build cannot run it; using %s", value,
                 cg_isa_name(cpu));
        check_notice(&pr, notice);
        want = cpu;
    } else {
        check_notice(&pr, NULL);
    }
    check_choice(&pr, want);
}

Test(kernel_context, unset_takes_the_widest_set_the_cpu_runs)
{
    probe pr;
    run_probe_env("-u CONVGRAD_ISA", &pr);
    check_notice(&pr, NULL);
    check_choice(&pr, cg_kernels()->cpu_isa);
}

/* The portable set: the references. */
Test(kernel_context, ref_takes_the_portable_kernels)
{
    check_request("ref", CG_ISA_REF);
    probe pr;
    run_probe("ref", &pr);
    char buf[128];
    assert_same(field(&pr, "gemm_panel", buf, sizeof buf), "cg_f32_gemm_panel_ref_8x16", &pr);
    assert_same(field(&pr, "dwconv_rows", buf, sizeof buf), "cg_f32_dwconv_rows_ref", &pr);
    assert_same(field(&pr, "dwconv3x3_rows", buf, sizeof buf), "none", &pr);
}

Test(kernel_context, avx2_takes_the_avx2_kernels_or_falls_back)
{
    check_request("avx2", CG_ISA_AVX2);
    if (cg_kernels()->cpu_isa >= CG_ISA_AVX2) {
        probe pr;
        run_probe("avx2", &pr);
        char buf[128];
        assert_same(field(&pr, "gemm_panel", buf, sizeof buf), "cg_f32_gemm_panel_avx2_12x16", &pr);
        assert_same(field(&pr, "f16_to_f32", buf, sizeof buf), "cg_f16_to_f32_f16c", &pr);
    }
}

Test(kernel_context, avx512_takes_the_avx512_kernels_or_falls_back)
{
    check_request("avx512", CG_ISA_AVX512);
    if (cg_kernels()->cpu_isa == CG_ISA_AVX512) {
        probe pr;
        run_probe("avx512", &pr);
        char buf[128];
        assert_same(field(&pr, "gemm_panel", buf, sizeof buf), "cg_f32_gemm_panel_avx512_24x48",
                    &pr);
    }
}

Test(kernel_context, an_unknown_value_says_so_and_takes_the_default)
{
    const cg_isa cpu = cg_kernels()->cpu_isa;
    const char *const values[] = {"AVX2", "sse4", "avx2 "};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        probe pr;
        run_probe(values[i], &pr);
        char notice[256];
        snprintf(notice, sizeof notice,
                 "convgrad: CONVGRAD_ISA=%s is not ref, avx2 or avx512; using %s", values[i],
                 cg_isa_name(cpu));
        check_notice(&pr, notice);
        check_choice(&pr, cpu);
    }
}

/* An empty value is no request: no notice. */
Test(kernel_context, an_empty_value_takes_the_default_quietly)
{
    probe pr;
    run_probe("", &pr);
    check_notice(&pr, NULL);
    check_choice(&pr, cg_kernels()->cpu_isa);
}

/* CONVGRAD_CACHES sets the sizes the plans are made for: L1, L2 and the
 * last level (the streaming threshold is the smaller of it and 16 MiB). */
Test(kernel_context, caches_set_the_sizes)
{
    static const struct {
        const char *value, *cache;
    } cases[] = {{"32K,512K,8M", "32768 524288 8388608"},
                 {"48K,2M,1G", "49152 2097152 16777216"},
                 {"32768,1048576,33554432", "32768 1048576 16777216"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char env[256], buf[128];
        snprintf(env, sizeof env, "-u CONVGRAD_ISA CONVGRAD_CACHES='%s'", cases[i].value);
        probe pr;
        run_probe_env(env, &pr);
        check_notice(&pr, NULL);
        check_choice(&pr, cg_kernels()->cpu_isa);
        assert_same(field(&pr, "cache", buf, sizeof buf), cases[i].cache, &pr);
    }
}

/* A value that is not three sizes in range says so in one line and keeps
 * the CPU's sizes; an empty one is no request. */
Test(kernel_context, caches_not_three_sizes_say_so)
{
    probe own;
    run_probe_env("-u CONVGRAD_ISA -u CONVGRAD_CACHES", &own);
    char cpu[128], buf[128];
    field(&own, "cache", cpu, sizeof cpu);
    static const char *const values[] = {
        "32K,512K",      "32K,512K,32M,1", "1K,512K,32M", "32k,512K,32M",
        "32K,512K,256K", "32K;512K;32M",   "32K,512K,",   "32K,512K,99999999999999999999G"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        char env[256], notice[256];
        snprintf(env, sizeof env, "-u CONVGRAD_ISA CONVGRAD_CACHES='%s'", values[i]);
        probe pr;
        run_probe_env(env, &pr);
        snprintf(notice, sizeof notice,
                 "convgrad: CONVGRAD_CACHES=%s is not L1,L2,L3 sizes (e.g. 32K,512K,32M; L1 "
                 "4K-1M, L2 64K-64M, L3 L2-1G); using this CPU's",
                 values[i]);
        check_notice(&pr, notice);
        assert_same(field(&pr, "cache", buf, sizeof buf), cpu, &pr);
    }
    probe pr;
    run_probe_env("-u CONVGRAD_ISA CONVGRAD_CACHES=", &pr);
    check_notice(&pr, NULL);
    assert_same(field(&pr, "cache", buf, sizeof buf), cpu, &pr);
}
