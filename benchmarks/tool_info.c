/* SPDX-License-Identifier: MIT */
/* The tools' build and machine description, metadata.csv and output
 * directory (tool_info.h). */
#define _GNU_SOURCE
#include "tool_info.h"

#include <convgrad.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TOOL_X86 1
#endif

typedef struct cpu_info {
    char name[128];              /* the brand string, or /proc/cpuinfo's model name */
    char vendor[16];             /* e.g. GenuineIntel, AuthenticAMD */
    int family, model, stepping; /* as Linux shows them, decimal; -1 unknown */
    int avx512f;
    int kernel_bits;     /* the library kernels' vector width; 0: the reference */
    const char *kernels; /* their description */
} cpu_info;

static void trim(char *s)
{
    size_t n = strlen(s), k = strspn(s, " \t");
    while (n > k && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'))
        n--;
    memmove(s, s + k, n - k);
    s[n - k] = 0;
}

#ifdef TOOL_X86
/* Vendor, brand string and signature from cpuid; family and model with their
 * extended fields folded in as Linux does (extended model from family 6 on). */
static void cpu_from_cpuid(cpu_info *c)
{
    unsigned a, b, d, x;
    if (!__get_cpuid(0, &a, &b, &x, &d))
        return;
    memcpy(c->vendor, &b, 4);
    memcpy(c->vendor + 4, &d, 4);
    memcpy(c->vendor + 8, &x, 4);
    c->vendor[12] = 0;
    if (__get_cpuid(1, &a, &b, &x, &d)) {
        int family = (int)(a >> 8 & 0xf), model = (int)(a >> 4 & 0xf);
        if (family == 0xf)
            family += (int)(a >> 20 & 0xff);
        if (family >= 6)
            model += (int)(a >> 16 & 0xf) << 4;
        c->family = family;
        c->model = model;
        c->stepping = (int)(a & 0xf);
    }
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; ++i)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(c->name, r, sizeof r);
        c->name[sizeof r] = 0;
        trim(c->name);
    }
}
#endif

/* What cpuid did not give (any of it off x86), from the first processor's
 * block of /proc/cpuinfo. */
static void cpu_from_proc(cpu_info *c)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) && line[0] != '\n') {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = 0;
        char *value = colon + 1;
        trim(line);
        trim(value);
        if (!strcmp(line, "model name") && !c->name[0])
            snprintf(c->name, sizeof c->name, "%s", value);
        else if (!strcmp(line, "vendor_id") && !c->vendor[0])
            snprintf(c->vendor, sizeof c->vendor, "%s", value);
        else if (!strcmp(line, "cpu family") && c->family < 0)
            c->family = atoi(value);
        else if (!strcmp(line, "model") && c->model < 0)
            c->model = atoi(value);
        else if (!strcmp(line, "stepping") && c->stepping < 0)
            c->stepping = atoi(value);
    }
    fclose(f);
}

static const char *const isa_names[] = {"ref", "avx2", "avx512"};

int tool_isa_check(const char *name)
{
    for (size_t i = 0; i < sizeof isa_names / sizeof *isa_names; ++i)
        if (!strcmp(name, isa_names[i]))
            return 0;
    return -1;
}

/* The library's dispatch: AVX-512F kernels where the CPU has it, else
 * AVX2+FMA, else the reference; CONVGRAD_ISA caps it (a wider ISA than the CPU
 * has, or an unknown name, falls back to the widest, as the library does). */
static void cpu_kernels(cpu_info *c, tool_isa *isa)
{
    int widest = 0; /* index in isa_names */
#ifdef TOOL_X86
    __builtin_cpu_init();
    c->avx512f = __builtin_cpu_supports("avx512f") != 0;
    if (c->avx512f)
        widest = 2;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        widest = 1;
#endif
    int run = widest;
    isa->requested = getenv("CONVGRAD_ISA");
    for (int i = 0; isa->requested && i < widest; ++i)
        if (!strcmp(isa->requested, isa_names[i]))
            run = i;
    isa->running = isa_names[run];
    static const int bits[] = {0, 256, 512};
    static const char *const text[] = {"portable C reference", "256-bit (AVX2+FMA)",
                                       "512-bit (AVX-512F)"};
    isa->bits = c->kernel_bits = bits[run];
    c->kernels = text[run];
}

static tool_isa g_isa;

static const cpu_info *cpu(void)
{
    static cpu_info c;
    static int done;
    if (!done) {
        c.family = c.model = c.stepping = -1;
#ifdef TOOL_X86
        cpu_from_cpuid(&c);
#endif
        cpu_from_proc(&c);
        if (!c.name[0])
            snprintf(c.name, sizeof c.name, "unknown CPU");
        if (!c.vendor[0])
            snprintf(c.vendor, sizeof c.vendor, "unknown vendor");
        cpu_kernels(&c, &g_isa);
        done = 1;
    }
    return &c;
}

const tool_isa *tool_isa_info(void)
{
    cpu();
    return &g_isa;
}

const char *tool_isa_text(void)
{
    static char buf[320];
    const tool_isa *i = tool_isa_info();
    if (i->requested)
        snprintf(buf, sizeof buf, "requested %s, running %s", i->requested, i->running);
    else
        snprintf(buf, sizeof buf, "CONVGRAD_ISA unset, running %s", i->running);
    /* the library plans for these caches instead of the CPU's (docs/kernels.md) */
    const char *caches = getenv("CONVGRAD_CACHES");
    if (caches && *caches)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ", planned for CONVGRAD_CACHES=%.60s",
                 caches);
    return buf;
}

int tool_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

const char *tool_build_text(void)
{
    static char buf[160];
    snprintf(buf, sizeof buf, "convgrad %s, commit %s", cg_version(), tool_commit);
    return buf;
}

const char *tool_cpu_text(void)
{
    static char buf[400];
    const cpu_info *c = cpu();
    char sig[96] = "family/model unknown";
    if (c->family >= 0)
        snprintf(sig, sizeof sig, "family %d model %d stepping %d", c->family, c->model,
                 c->stepping);
    int n = tool_online_cpus();
    snprintf(buf, sizeof buf, "%s (%s, %s); AVX-512F %s, the library's kernels %s; %d online CPU%s",
             c->name, c->vendor, sig, c->avx512f ? "yes" : "no", c->kernels, n, n == 1 ? "" : "s");
    return buf;
}

void tool_csv_field(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void meta_row(FILE *f, const char *key, const char *value)
{
    fprintf(f, "%s,", key);
    tool_csv_field(f, value);
    fputc('\n', f);
}

static void meta_int(FILE *f, const char *key, int value)
{
    fprintf(f, "%s,%d\n", key, value);
}

static int write_metadata(const char *path, const char *program, int argc, char **argv)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const cpu_info *c = cpu();
    char when[32] = "unknown", cmd[4096] = "";
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < argc; ++i) {
        size_t len = strlen(cmd);
        snprintf(cmd + len, sizeof cmd - len, "%s%s", i ? " " : "", argv[i]);
    }
    fprintf(f, "key,value\n");
    meta_row(f, "tool", program);
    meta_row(f, "library_version", cg_version());
    meta_row(f, "commit", tool_commit);
    meta_row(f, "cpu_model_name", c->name);
    meta_row(f, "cpu_vendor", c->vendor);
    meta_int(f, "cpu_family", c->family);
    meta_int(f, "cpu_model", c->model);
    meta_int(f, "cpu_stepping", c->stepping);
    meta_row(f, "avx512f", c->avx512f ? "yes" : "no");
    meta_int(f, "kernel_vector_bits", c->kernel_bits);
    meta_row(f, "kernels", c->kernels);
    meta_row(f, "isa_requested", g_isa.requested ? g_isa.requested : "");
    meta_row(f, "isa_running", g_isa.running);
    meta_int(f, "online_cpus", tool_online_cpus());
    meta_row(f, "cpu", tool_cpu_text());
    meta_row(f, "started_utc", when);
    meta_row(f, "command", cmd);
    return fclose(f) == 0 ? 0 : -1;
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; ++p) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(tmp, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int tool_open_out(const char *program, const char *dir, int argc, char **argv, char *abs,
                  size_t abslen)
{
    char real[PATH_MAX], path[PATH_MAX + 16];
    const char *what = "create the output directory";
    if (mkdir_p(dir) == 0) {
        what = "resolve the output directory";
        if (realpath(dir, real)) {
            snprintf(abs, abslen, "%s", real);
            snprintf(path, sizeof path, "%s/metadata.csv", real);
            what = "write metadata.csv in the output directory";
            if (write_metadata(path, program, argc, argv) == 0)
                return 0;
        }
    }
    fprintf(stderr, "%s: cannot %s %s: %s\n", program, what, dir, strerror(errno));
    return -1;
}
