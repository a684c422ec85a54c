/* SPDX-License-Identifier: MIT */
/* convgrad-bench --emulate MASK: the filter gradient on an emulated mask
 * larger than the machine, each emulated core's work read from the trace
 * (CONVGRAD_TRACE, cg_trace_last_launch), and the time this predicts on as
 * many real cores; checked against the measured speedup at the machine's
 * own core count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool_info.h"

enum { MOST_EVENTS = 32 * 4096 };

/* One call's emulated cores, from its events: the busiest core's CPU time
 * outside barriers, the mean, the barriers a core waited at (the launch's
 * wait included), and the CPU time by phase over all cores. */
typedef struct call_work {
    double busiest, mean, phase_cpu[CG_NPHASES];
    int barriers;
} call_work;

static call_work work_of(const cg_trace_event *ev, int n, int mask)
{
    call_work w;
    memset(&w, 0, sizeof w);
    double busy[32] = {0};
    int bars[32] = {0};
    for (int i = 0; i < n; i++) {
        w.phase_cpu[ev[i].phase] += ev[i].cpu;
        if (ev[i].phase == CG_PHASE_BARRIER)
            bars[ev[i].core]++;
        else
            busy[ev[i].core] += ev[i].cpu;
    }
    const int cores = GetCoreNum(mask);
    for (int c = 0; c < 32; c++) {
        if (!(((unsigned)mask >> c) & 1u))
            continue;
        w.mean += busy[c] / cores;
        w.busiest = busy[c] > w.busiest ? busy[c] : w.busiest;
        w.barriers = bars[c] > w.barriers ? bars[c] : w.barriers;
    }
    return w;
}

typedef struct layer_bufs {
    ConvParameter p;
    float *x, *dy, *dw;
} layer_bufs;

static layer_bufs bufs_of(const bench_layer *L, int mask)
{
    layer_bufs b;
    bench_shape s = shape_of(L);
    b.p = bench_param_of(&s);
    const size_t nx = (size_t)s.n * s.h * s.w * s.cin, ndy = (size_t)s.n * s.oh * s.ow * s.cout;
    const size_t ndw = (size_t)s.cout * s.kh * s.kw * (size_t)(s.cin / s.group);
    b.x = malloc(nx * sizeof(float));
    b.dy = malloc(ndy * sizeof(float));
    b.dw = calloc(ndw, sizeof(float));
    b.p.workspace_ = malloc(cg_grad_filter_workspace_bytes(&b.p, mask, sizeof(float)));
    if (!b.x || !b.dy || !b.dw || !b.p.workspace_) {
        fprintf(stderr, "convgrad-bench: out of memory for %s\n", L->name);
        exit(TOOL_EXIT_FAILURE);
    }
    for (size_t i = 0; i < nx; i++)
        b.x[i] = (float)((int)(i * 7919 % 17) - 8) / 8.0f;
    for (size_t i = 0; i < ndy; i++)
        b.dy[i] = (float)((int)(i * 104729 % 17) - 8) / 8.0f;
    return b;
}

static void bufs_free(layer_bufs *b)
{
    free(b->x);
    free(b->dy);
    free(b->dw);
    free(b->p.workspace_);
}

static int by_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One call replayed on as many real cores: every core starts after the
 * launch, does its events back to back at their CPU times, and leaves each
 * barrier when the last core reaches it, one measured round later. Fills
 * out (the replayed events, n of them) and returns the call's predicted
 * time; -1 when the cores met different numbers of barriers (code of the
 * caller's own: no replay). */
static double replay(const cg_trace_event *ev, int n, int mask, double bar_s, double launch_s,
                     cg_trace_event *out)
{
    int first[33], count[32] = {0}, ncores = 0, cores[32];
    for (int c = 0; c < 32; c++)
        if (((unsigned)mask >> c) & 1u)
            cores[ncores++] = c;
    for (int i = 0; i < n; i++)
        count[ev[i].core]++;
    /* the events are by core, then time */
    for (int k = 0, at = 0; k < ncores; k++) {
        first[k] = at;
        at += count[cores[k]];
    }
    first[ncores] = n;
    int bars = -1;
    for (int k = 0; k < ncores; k++) {
        int b = 0;
        for (int i = first[k]; i < first[k + 1]; i++)
            b += ev[i].phase == CG_PHASE_BARRIER;
        if (bars >= 0 && b != bars)
            return -1;
        bars = b;
    }
    int pos[32];
    for (int k = 0; k < ncores; k++)
        pos[k] = first[k];
    double t = launch_s;
    for (int round = 0; round <= bars; round++) {
        double end[32], latest = t;
        for (int k = 0; k < ncores; k++) { /* this core's work up to its next barrier */
            double at = t;
            for (; pos[k] < first[k + 1] && ev[pos[k]].phase != CG_PHASE_BARRIER; pos[k]++) {
                out[pos[k]] = ev[pos[k]];
                out[pos[k]].start = at;
                out[pos[k]].wall = ev[pos[k]].cpu;
                at += ev[pos[k]].cpu;
            }
            end[k] = at;
            latest = at > latest ? at : latest;
        }
        const double leave = round < bars ? latest + (round ? bar_s : 0) : latest;
        for (int k = 0; k < ncores && round < bars; k++) { /* the barrier itself */
            out[pos[k]] = ev[pos[k]];
            out[pos[k]].start = end[k];
            out[pos[k]].wall = leave - end[k];
            pos[k]++;
        }
        t = leave;
    }
    return t;
}

/* Medians over `reps` calls on mask: the wall time; the time the traced
 * work predicts on as many real cores (the busiest core's CPU time plus a
 * measured barrier round a barrier and a launch); the share of that in
 * barriers and the launch; each call's wall time over its own prediction
 * (`off`: the stretches of a shared host that slow a call's cores slow its
 * CPU times too, and cancel here). `last` gets the last call's work. */
typedef struct mask_run {
    double wall, predicted, sync, off;
    call_work last;
} mask_run;

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_double);
    return v[n / 2];
}

static mask_run run_mask(layer_bufs *b, int mask, int reps, const overhead_result *own,
                         cg_trace_event *ev, cg_trace_event *replayed, int *nev)
{
    double wall[64], pred[64], sync[64], off[64];
    mask_run r;
    memset(&r, 0, sizeof r);
    reps = reps > 64 ? 64 : reps;
    fp_conv_grad_filter_s(b->dy, b->x, b->dw, NULL, &b->p, mask); /* warm-up */
    for (int i = 0; i < reps; i++) {
        const double t0 = bench_now();
        fp_conv_grad_filter_s(b->dy, b->x, b->dw, NULL, &b->p, mask);
        wall[i] = bench_now() - t0;
        *nev = cg_trace_last_launch(mask, ev, MOST_EVENTS);
        *nev = *nev < MOST_EVENTS ? *nev : MOST_EVENTS;
        r.last = work_of(ev, *nev, mask);
        pred[i] = replay(ev, *nev, mask, own->bar_us * 1e-6, own->launch_us * 1e-6, replayed);
        if (pred[i] < 0) /* no replay: the busiest core, a barrier round a barrier */
            pred[i] = r.last.busiest + own->launch_us * 1e-6 +
                      (r.last.barriers > 1 ? r.last.barriers - 1 : 0) * own->bar_us * 1e-6;
        sync[i] = 1 - r.last.busiest / pred[i];
        off[i] = wall[i] / pred[i];
    }
    r.wall = median_of(wall, reps);
    r.predicted = median_of(pred, reps);
    r.sync = median_of(sync, reps);
    r.off = median_of(off, reps);
    return r;
}

/* One call's events as gnuplot data: core, start ms, end ms, phase. */
static int write_events(const char *out, const char *name, const char *what,
                        const cg_trace_event *ev, int n)
{
    char path[4200];
    FILE *f = csv_open(out, name, path, sizeof path);
    if (!f)
        return -1;
    double t0 = 1e30;
    for (int i = 0; i < n; i++)
        t0 = ev[i].start < t0 ? ev[i].start : t0;
    fprintf(f, "# %s: core, start ms, end ms, phase (0 pack ... 4 finish)\n", what);
    for (int i = 0; i < n; i++)
        fprintf(f, "%d %.4f %.4f %d\n", ev[i].core, (ev[i].start - t0) * 1e3,
                (ev[i].start + ev[i].wall - t0) * 1e3, (int)ev[i].phase);
    return csv_close(f, path);
}

/* gantt.png: one call replayed on as many real cores; gantt_wall.png: the
 * same call as it ran here, the emulated cores taking turns on the CPUs. */
static void write_gantt(const char *out, const char *layer, int mask, const cg_trace_event *ev,
                        const cg_trace_event *replayed, int n, int no_plots)
{
    char what[200], path[4200];
    snprintf(what, sizeof what, "one call of %s on mask 0x%08x", layer, (unsigned)mask);
    if (write_events(out, "gantt.dat", what, replayed, n) ||
        write_events(out, "gantt_wall.dat", what, ev, n))
        return;
    FILE *f = csv_open(out, "gantt.gp", path, sizeof path);
    if (!f)
        return;
    const int cores = GetCoreNum(mask);
    fprintf(f,
            "# written by convgrad-bench --emulate; run from this directory: gnuplot gantt.gp\n"
            "set terminal pngcairo size 1400,%d font ',10'\n"
            "set xlabel 'ms since the call began'\nset ylabel 'emulated core'\n"
            "set yrange [-1:%d]\nset key outside right\n"
            "names = 'pack compute barrier reduce finish'\n"
            "colors = '#1f77b4 #2ca02c #d62728 #9467bd #ff7f0e'\n"
            "bar(file) = sprintf(\"plot for [ph=0:4] '%%s' using "
            "(($4==ph)?($2+$3)/2:1/0):1:2:3:($1-0.4):($1+0.4) with boxxyerror fs solid 1.0 "
            "noborder lc rgb word(colors, ph+1) title word(names, ph+1)\", file)\n"
            "set output 'gantt.png'\n"
            "set title \"%s: one call on mask 0x%08x, replayed on %d real cores (each core's CPU "
            "time a phase; barriers left when the last core arrives)\" noenhanced\n"
            "eval bar('gantt.dat')\n"
            "set output 'gantt_wall.png'\n"
            "set title \"%s: the same call as it ran here, wall clock (%d emulated cores taking "
            "turns on %d CPUs)\" noenhanced\n"
            "eval bar('gantt_wall.dat')\n",
            400 + 20 * cores, 32 - __builtin_clz((unsigned)mask), layer, (unsigned)mask, cores,
            layer, cores, tool_online_cpus());
    if (csv_close(f, path) || no_plots || system("command -v gnuplot >/dev/null 2>&1") != 0)
        return;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot gantt.gp > gantt.log 2>&1", out);
    if (system(cmd) == 0)
        say("Gantt charts of one call of %s: %s/gantt.png (replayed), gantt_wall.png (as run)\n",
            layer, out);
    else
        say("gnuplot failed on gantt.gp (see %s/gantt.log)\n", out);
}

int bench_emulate(const bench_emulate_opts *o)
{
    const int own_mask = (int)((1u << (tool_online_cpus() > 31 ? 31 : tool_online_cpus())) - 1);
    const overhead_result own = bench_overhead(own_mask, o->quick);
    say("\nEmulated cores: the filter gradient (fp32 fp_conv_grad_filter_s, host mode) on mask "
        "0x%08x (%d cores) on this machine's %d CPUs; each emulated core's CPU time by phase "
        "from the trace (CONVGRAD_TRACE, cg_trace_last_launch); predicted time on %d real "
        "cores: the call replayed, each core doing its phases back to back at their CPU times "
        "and leaving each barrier when the last core reaches it, one sys_bar round (%.1f us, "
        "measured on %d cores) later, after a launch (%.1f us); medians of %d calls\n",
        (unsigned)o->mask, GetCoreNum(o->mask), tool_online_cpus(), GetCoreNum(o->mask), own.bar_us,
        GetCoreNum(own_mask), own.launch_us, o->reps);
    say("%-15s %5s %9s %9s %9s %8s %8s %6s %6s %6s  %s\n", "layer", "cores", "1-core ms", "wall ms",
        "pred ms", "pred x", "meas x", "imbal", "reduce", "sync", "check");
    char path[4200];
    FILE *csv = csv_open(o->out, "emulate.csv", path, sizeof path);
    if (csv)
        fprintf(csv, "layer,mask,cores,cpus,one_core_ms,wall_ms,predicted_ms,predicted_speedup,"
                     "measured_speedup,imbalance,reduce_share,sync_share,pack_share\n");
    cg_trace_event *ev = malloc(MOST_EVENTS * sizeof *ev);
    cg_trace_event *replayed = malloc(MOST_EVENTS * sizeof *replayed);
    double worst_validation = 0;
    int validated = 0, gantt_done = 0;
    for (int li = 0; li < o->nlayers; li++) {
        const bench_layer *L = &bench_layers[o->layers[li]];
        layer_bufs b = bufs_of(L, GetCoreNum(o->mask) > GetCoreNum(own_mask) ? o->mask : own_mask);
        int nev = 0;
        const mask_run one = run_mask(&b, 0x1, o->reps, &own, ev, replayed, &nev);
        if (nev == 0) {
            say("convgrad-bench --emulate: no trace of the calls (CONVGRAD_TRACE=%s could not "
                "be written?)\n",
                getenv("CONVGRAD_TRACE") ? getenv("CONVGRAD_TRACE") : "");
            bufs_free(&b);
            free(ev);
            free(replayed);
            if (csv)
                fclose(csv);
            return TOOL_EXIT_FAILURE;
        }
        const int masks[2] = {own_mask, o->mask};
        for (int k = 0; k < 2; k++) {
            if (k == 1 && o->mask == own_mask)
                break;
            const mask_run r = run_mask(&b, masks[k], o->reps, &own, ev, replayed, &nev);
            const double sum =
                r.last.phase_cpu[CG_PHASE_PACK] + r.last.phase_cpu[CG_PHASE_COMPUTE] +
                r.last.phase_cpu[CG_PHASE_REDUCE] + r.last.phase_cpu[CG_PHASE_FINISH];
            const double reduce =
                sum > 0
                    ? (r.last.phase_cpu[CG_PHASE_REDUCE] + r.last.phase_cpu[CG_PHASE_FINISH]) / sum
                    : 0;
            const double pack = sum > 0 ? r.last.phase_cpu[CG_PHASE_PACK] / sum : 0;
            const double sync = r.sync;
            const double pred_x = one.wall / r.predicted, meas_x = one.wall / r.wall;
            const int cores = GetCoreNum(masks[k]);
            char meas[16] = "-", check[64] = "";
            if (cores <= tool_online_cpus()) { /* real cores: the prediction checked */
                snprintf(meas, sizeof meas, "%.2fx", meas_x);
                const double err = r.off - 1; /* a call's pred_x / meas_x - 1 */
                snprintf(check, sizeof check, "predicted/measured %+.1f%%%s", 100 * err,
                         fabs(err) <= 0.10 ? "" : " (over 10%)");
                worst_validation = fabs(err) > worst_validation ? fabs(err) : worst_validation;
                validated++;
            }
            say("%-15s %5d %9.3f %9.3f %9.3f %7.2fx %8s %6.2f %5.1f%% %5.1f%%  %s\n",
                k == 0 ? L->name : "", cores, one.wall * 1e3, r.wall * 1e3, r.predicted * 1e3,
                pred_x, meas, r.last.mean > 0 ? r.last.busiest / r.last.mean : 0, 100 * reduce,
                100 * sync, check);
            if (csv) {
                fprintf(csv, "%s,0x%08x,%d,%d,%.6f,%.6f,%.6f,%.4f,", L->name, (unsigned)masks[k],
                        cores, tool_online_cpus(), one.wall * 1e3, r.wall * 1e3, r.predicted * 1e3,
                        pred_x);
                if (cores <= tool_online_cpus())
                    fprintf(csv, "%.4f", meas_x);
                fprintf(csv, ",%.4f,%.4f,%.4f,%.4f\n",
                        r.last.mean > 0 ? r.last.busiest / r.last.mean : 0, reduce, sync, pack);
            }
            if (k == 1 && !gantt_done) {
                write_gantt(o->out, L->name, masks[k], ev, replayed, nev, o->no_plots);
                gantt_done = 1;
            }
        }
        bufs_free(&b);
    }
    if (csv)
        fclose(csv);
    free(ev);
    free(replayed);
    say("(wall ms: on this machine, the emulated cores taking turns on its CPUs; pred x: the "
        "1-core time over the predicted one; meas x: the measured speedup, where the cores are "
        "real; imbal: the busiest core's CPU time over the mean; reduce: the share of CPU time "
        "adding slices' partials and finishing; sync: the share of the predicted time in "
        "barriers and the launch; check: the median over the calls of each call's wall time "
        "over its own prediction, which the measured and predicted speedups of that call "
        "differ by. The prediction takes the cores' CPU time as it is here: "
        "memory bandwidth shared by more real cores, and their caches, are not modelled)\n");
    say("verdict: predicted against measured speedup at %d cores, %d layers: worst %.1f%% "
        "(target: within 10%%) %s\n",
        GetCoreNum(own_mask), validated, 100 * worst_validation,
        worst_validation <= 0.10 ? "MET" : "MISSED");
    say("CSV: %s\n", path);
    return 0;
}
