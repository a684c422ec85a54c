/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* clock_gettime, CLOCK_THREAD_CPUTIME_ID */
#include "trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convgrad.h"
#include "status.h"

int cg_trace_on;

/* Events a core keeps between two flushes: bounded memory; past it a
 * launch's further events are counted, not kept. */
enum { CORES = 32, EVENTS_A_CORE = 4096, LABEL = 160 };

typedef struct event {
    int64_t start, dur, cpu; /* ns: wall start (from the trace's start), wall and CPU time */
    int phase;
} event;

typedef struct core_trace {
    event *ev;
    int n;
    long dropped;
    int64_t inner; /* ns of inner steps since the current region started */
    long launch;   /* the launch its events are of, once flushed */
    uint32_t mask; /* that launch's mask */
    int named;     /* its track's name written */
    char label[LABEL];
} core_trace;

static core_trace g_core[CORES];
static FILE *g_file;
static long g_written; /* events in the file */
static long g_launches;
static int64_t g_t0;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *const PHASE_NAMES[CG_NPHASES] = {"pack", "compute", "barrier", "reduce",
                                                    "finish"};

static int64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t cg_trace_wall_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

void cg_trace_init(void)
{
    const char *path = getenv("CONVGRAD_TRACE");
    if (path == NULL || path[0] == '\0')
        return;
    g_file = fopen(path, "w+");
    for (int i = 0; g_file && i < CORES; i++)
        if ((g_core[i].ev = calloc(EVENTS_A_CORE, sizeof(event))) == NULL) {
            fclose(g_file);
            g_file = NULL;
        }
    if (g_file == NULL) {
        fprintf(stderr, "convgrad: CONVGRAD_TRACE=%s: cannot open it (or no memory); no trace\n",
                path);
        return;
    }
    fputs("[\n]\n", g_file);
    fflush(g_file);
    g_t0 = cg_trace_wall_ns();
    cg_trace_on = 1;
}

static core_trace *calling_core(void)
{
    const int id = get_core_id();
    return id >= 0 && id < CORES ? &g_core[id] : NULL;
}

cg_trace_mark cg_trace_start_now(void)
{
    core_trace *c = calling_core();
    if (c)
        c->inner = 0;
    /* the wall clock first: reading the CPU clock is a system call, where the
     * thread may be switched out, and that time belongs in the region, not
     * between two regions, which would leave a hole in the core's track */
    cg_trace_mark m;
    m.wall = cg_trace_wall_ns();
    m.cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return m;
}

void cg_trace_inner_add(int64_t ns)
{
    core_trace *c = calling_core();
    if (c)
        c->inner += ns;
}

static void add_event(core_trace *c, int phase, int64_t start, int64_t dur, int64_t cpu)
{
    if (c->n == EVENTS_A_CORE) {
        c->dropped++;
        return;
    }
    c->ev[c->n++] = (event){start - g_t0, dur, cpu, phase};
}

void cg_trace_region_at(cg_phase phase, cg_phase inner, cg_trace_mark from)
{
    core_trace *c = calling_core();
    if (c == NULL) /* not an emulated core: not part of a launch */
        return;
    const int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - from.cpu; /* then the wall clock */
    const int64_t wall = cg_trace_wall_ns() - from.wall;
    int64_t first = c->inner < wall ? c->inner : wall;
    c->inner = 0;
    if (first > 0 && inner != phase) /* the CPU time shared in proportion */
        add_event(c, inner, from.wall, first, wall ? (int64_t)((double)cpu * first / wall) : 0);
    else
        first = 0;
    add_event(c, phase, from.wall + first, wall - first,
              wall ? (int64_t)((double)cpu * (wall - first) / wall) : cpu);
}

void cg_trace_waited_since_at(int64_t since)
{
    core_trace *c = calling_core();
    if (c)
        add_event(c, CG_PHASE_BARRIER, since, cg_trace_wall_ns() - since, 0);
}

void cg_trace_label(const char *fmt, ...)
{
    core_trace *c = calling_core();
    if (!cg_trace_on || c == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
}

/* One event, after a comma unless it is the file's first. */
static void begin_event(void)
{
    fputs(g_written++ ? ",\n" : "", g_file);
}

void cg_trace_begin(uint32_t core_mask)
{
    if (!cg_trace_on)
        return;
    pthread_mutex_lock(&g_mu);
    for (uint32_t m = core_mask; m; m &= m - 1) {
        core_trace *c = &g_core[__builtin_ctz(m)];
        c->n = 0;
        c->dropped = 0;
        c->launch = 0;
        c->label[0] = '\0';
    }
    pthread_mutex_unlock(&g_mu);
}

CG_API int cg_trace_last_launch(int core_mask, cg_trace_event *ev, int max)
{
    const uint32_t mask = (uint32_t)core_mask;
    if (!cg_trace_on || mask == 0)
        return 0;
    pthread_mutex_lock(&g_mu);
    long launch = g_core[__builtin_ctz(mask)].launch;
    int n = 0;
    for (uint32_t m = mask; launch && m; m &= m - 1)
        if (g_core[__builtin_ctz(m)].launch != launch || g_core[__builtin_ctz(m)].mask != mask)
            launch = 0;
    for (uint32_t m = mask; launch && m; m &= m - 1) {
        const int id = __builtin_ctz(m);
        const core_trace *c = &g_core[id];
        for (int i = 0; i < c->n; i++, n++)
            if (n < max && ev)
                ev[n] = (cg_trace_event){id, (cg_phase)c->ev[i].phase, c->ev[i].start * 1e-9,
                                         c->ev[i].dur * 1e-9, c->ev[i].cpu * 1e-9};
    }
    pthread_mutex_unlock(&g_mu);
    return n;
}

void cg_trace_flush(uint32_t core_mask)
{
    if (!cg_trace_on)
        return;
    pthread_mutex_lock(&g_mu);
    const long launch = ++g_launches;
    const int pid = (int)getpid();
    fseek(g_file, -2, SEEK_END); /* over the closing "]\n" */
    for (uint32_t m = core_mask; m; m &= m - 1) {
        const int id = __builtin_ctz(m);
        core_trace *c = &g_core[id];
        if (!c->named) {
            begin_event();
            fprintf(g_file,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"core %d\"}}",
                    pid, id, id);
            c->named = 1;
        }
        for (int i = 0; i < c->n; i++) {
            const event *e = &c->ev[i];
            begin_event();
            fprintf(g_file,
                    "{\"name\":\"%s\",\"cat\":\"convgrad\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                    "\"pid\":%d,\"tid\":%d,\"args\":{\"launch\":%ld,\"core\":%d,\"rank\":%d,"
                    "\"mask\":\"0x%08x\",\"op\":\"%s\",\"cpu_us\":%.3f}}",
                    PHASE_NAMES[e->phase], e->start * 1e-3, e->dur * 1e-3, pid, id, launch, id,
                    GetLogicCoreId((int)core_mask, id), (unsigned)core_mask,
                    c->label[0] ? c->label : "user code", e->cpu * 1e-3);
        }
        if (c->dropped) {
            begin_event();
            fprintf(g_file,
                    "{\"name\":\"%ld events not kept\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,"
                    "\"pid\":%d,\"tid\":%d}",
                    c->dropped, (cg_trace_wall_ns() - g_t0) * 1e-3, pid, id);
        }
        c->launch = launch;
        c->mask = core_mask;
    }
    fputs("\n]\n", g_file);
    fflush(g_file);
    pthread_mutex_unlock(&g_mu);
}
