/* SPDX-License-Identifier: MIT */
/* convgrad-bench's reports: the table rows, the performance targets, the CSV
 * files and the gnuplot plots. Everything here reads the results main.c
 * collected (g_results) and the limits it measured (g_lim). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The layer column's width: the longest name of the set (--shapes names may be long). */
static int name_width(void)
{
    int w = 15;
    for (int i = 0; i < bench_nlayers; ++i) {
        int n = (int)strlen(bench_layers[i].name);
        w = n > w ? n : w;
    }
    return w < 48 ? w : 48;
}

void print_table_header(void)
{
    const int nw = name_width();
    say("%-*s %6s  %-13s %5s  %-46s  %-27s\n", nw, "", "", "", "",
        "----------- warm (repeated calls) -----------", "-------- interleaved --------");
    say("%-*s %6s  %-13s %5s  %10s %9s %6s %9s %7s  %10s %9s %6s  %s\n", nw, "layer", "GFLOP",
        "impl", "cores", "median ms", "GFLOP/s", "%FMA", "vs oneDNN", "x1core", "median ms",
        "GFLOP/s", "%FMA", "check");
}

/* "%.1f%%" of the FMA limit at `cores`, or "-" */
static void fmt_pct(char *buf, size_t len, double gflops, int cores)
{
    double lim = fma_limit_for(cores);
    if (lim > 0 && gflops > 0)
        snprintf(buf, len, "%.1f%%", 100.0 * gflops / lim);
    else
        snprintf(buf, len, "-");
}

void print_rows_for_layer(int li)
{
    const bench_layer *L = &bench_layers[li];
    int first = 1;
    for (int impl = 0; impl < NIMPL; ++impl)
        for (int dt = DT_FP32; dt <= DT_FP16; ++dt)
            for (int i = 0; i < g_nresults; ++i) {
                const result *r = &g_results[i];
                if (r->layer != li || r->impl != impl || r->dtype != dt)
                    continue;
                bench_shape s = shape_of(L);
                char gflop[16] = "";
                if (first)
                    snprintf(gflop, sizeof gflop, "%.3f", layer_flops(&s) * 1e-9);
                char ratio[16] = "-", speed[16] = "-", wpct[16] = "-", wmed[16] = "-",
                     wgf[16] = "-";
                char pct[16] = "-", med[16] = "-", gf[16] = "-";
                if (r->median_ms > 0) {
                    snprintf(med, sizeof med, "%.3f", r->median_ms);
                    snprintf(gf, sizeof gf, "%.1f", r->gflops);
                    fmt_pct(pct, sizeof pct, r->gflops, r->cores);
                    /* the ratios on the judged figures: warm, when both sides have them */
                    const result *d = find_result(li, IMPL_ONEDNN, DT_FP32, r->cores);
                    if (d)
                        snprintf(ratio, sizeof ratio, "%.2fx", judged_ms(d) / judged_ms(r));
                    const result *one = find_result(li, impl, dt, 1);
                    if (one)
                        snprintf(speed, sizeof speed, "%.2fx", judged_ms(one) / judged_ms(r));
                }
                if (r->warm_reps > 0) {
                    snprintf(wmed, sizeof wmed, "%.3f", r->warm_ms);
                    snprintf(wgf, sizeof wgf, "%.1f", r->warm_gflops);
                    fmt_pct(wpct, sizeof wpct, r->warm_gflops, r->cores);
                }
                char chk[48];
                if (r->reps < g_reps_asked)
                    snprintf(chk, sizeof chk, "%s (%d rounds)", r->ok ? "ok" : "FAIL", r->reps);
                else
                    snprintf(chk, sizeof chk, "%s", r->ok ? "ok" : "FAIL");
                say("%-*s %6s  %-13s %5d  %10s %9s %6s %9s %7s  %10s %9s %6s  %s\n", name_width(),
                    first ? L->name : "", gflop, impl_label(impl, dt), r->cores, wmed, wgf, wpct,
                    ratio, speed, med, gf, pct, chk);
                first = 0;
            }
}

/* ---- the training step ------------------------------------------------------------- */

/* The layers and core counts of the training-step results, in run order / ascending. */
static int train_layers(int *out, int cap)
{
    int n = 0;
    for (int i = 0; i < g_ntrain; ++i) {
        int seen = 0;
        for (int k = 0; k < n; ++k)
            seen |= out[k] == g_train[i].layer;
        if (!seen && n < cap)
            out[n++] = g_train[i].layer;
    }
    return n;
}

static int train_cores(int *out, int cap)
{
    int n = 0;
    for (int i = 0; i < g_ntrain; ++i) {
        int seen = 0;
        for (int k = 0; k < n; ++k)
            seen |= out[k] == g_train[i].cores;
        if (!seen && n < cap)
            out[n++] = g_train[i].cores;
    }
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b)
            if (out[b] < out[a]) {
                int t = out[a];
                out[a] = out[b];
                out[b] = t;
            }
    return n;
}

/* Any training-step result for (layer, impl, cores), with a median or not. */
static const train_result *any_train(int layer, int impl, int cores)
{
    for (int i = 0; i < g_ntrain; ++i)
        if (g_train[i].layer == layer && g_train[i].impl == impl && g_train[i].cores == cores)
            return &g_train[i];
    return NULL;
}

void print_train_table(void)
{
    int layers[BENCH_MAX_LAYERS], cores[33];
    const int nl = train_layers(layers, BENCH_MAX_LAYERS), nc = train_cores(cores, 33);
    say("\nTraining step, fp32 NHWC, OHWI weights: convgrad = cg_conv2d_forward (with bias) + "
        "cg_conv2d_backward_data + cg_conv2d_backward_weights + cg_conv2d_backward_bias; oneDNN = "
        "forward_training (with bias) + backward data + backward weights (with diff_bias), on as "
        "many threads; medians of %d timed round%s%s; GFLOP = 3x the convolution's (bias not "
        "counted)\n",
        g_train_reps_asked, g_train_reps_asked == 1 ? "" : "s",
        g_train_reps_asked < g_reps_asked
            ? " (fewer than the filter gradient's, spread evenly over its rounds)"
            : " (the filter gradient's rounds)");
    say("%-15s %6s %5s %11s %10s %7s %8s %11s %7s %7s %7s  %s\n", "layer", "GFLOP", "cores",
        "convgrad ms", "oneDNN ms", "ratio", "GFLOP/s", "oneDNN GF/s", "fwd", "bwd-d", "bwd-w",
        "check");
    for (int a = 0; a < nl; ++a) {
        const int li = layers[a];
        bench_shape s = shape_of(&bench_layers[li]);
        for (int b = 0; b < nc; ++b) {
            const train_result *cg = any_train(li, TRAIN_CONVGRAD, cores[b]);
            const train_result *dn = any_train(li, TRAIN_ONEDNN, cores[b]);
            if (!cg && !dn)
                continue;
            char cms[16] = "-", dms[16] = "-", ratio[16] = "-", cgf[16] = "-", dgf[16] = "-";
            char ph[NPHASE][16];
            for (int k = 0; k < NPHASE; ++k)
                snprintf(ph[k], sizeof ph[k], "-");
            if (cg && cg->median_ms > 0) {
                snprintf(cms, sizeof cms, "%.3f", cg->median_ms);
                snprintf(cgf, sizeof cgf, "%.1f", cg->gflops);
            }
            if (dn && dn->median_ms > 0) {
                snprintf(dms, sizeof dms, "%.3f", dn->median_ms);
                snprintf(dgf, sizeof dgf, "%.1f", dn->gflops);
            }
            if (cg && dn && cg->median_ms > 0 && dn->median_ms > 0) {
                snprintf(ratio, sizeof ratio, "%.2fx", dn->median_ms / cg->median_ms);
                for (int k = 0; k < NPHASE; ++k)
                    if (cg->phase_ms[k] > 0)
                        snprintf(ph[k], sizeof ph[k], "%.2fx", dn->phase_ms[k] / cg->phase_ms[k]);
            }
            int ok = (!cg || cg->ok) && (!dn || dn->ok);
            int fewest = g_train_reps_asked;
            if (cg && cg->reps < fewest)
                fewest = cg->reps;
            if (dn && dn->reps < fewest)
                fewest = dn->reps;
            char chk[64];
            if (fewest < g_train_reps_asked)
                snprintf(chk, sizeof chk, "%s (%d rounds)", ok ? "ok" : "FAIL", fewest);
            else
                snprintf(chk, sizeof chk, "%s", ok ? "ok" : "FAIL");
            char gflop[16] = "";
            if (b == 0)
                snprintf(gflop, sizeof gflop, "%.3f", train_flops(&s) * 1e-9);
            say("%-15s %6s %5d %11s %10s %7s %8s %11s %7s %7s %7s  %s\n",
                b == 0 ? bench_layers[li].name : "", gflop, cores[b], cms, dms, ratio, cgf, dgf,
                ph[PH_FWD], ph[PH_BWD_DATA], ph[PH_BWD_WEIGHTS], chk);
        }
    }
    int have_dnn = 0;
    for (int i = 0; i < g_ntrain; ++i)
        have_dnn |= g_train[i].impl == TRAIN_ONEDNN;
    if (!have_dnn)
        say("(no oneDNN training-step results: %s)\n", onednn_describe());
    say("(ratio: oneDNN's median step time over convgrad's, >1 = convgrad faster, same cores; "
        "GFLOP/s: convgrad's, then oneDNN's; "
        "fwd, bwd-d, bwd-w: the same ratio for each phase alone (bwd-w includes the bias "
        "gradient on both sides); oneDNN's weights stay in its blocked layouts: the reorders "
        "of w into them and of dw to OHWI (for the checks) are not timed)\n");
    char line[512] = "";
    size_t len = 0;
    for (int b = 0; b < nc; ++b) {
        double logsum = 0;
        int n = 0;
        for (int a = 0; a < nl; ++a) {
            const train_result *cg = find_train(layers[a], TRAIN_CONVGRAD, cores[b]);
            const train_result *dn = find_train(layers[a], TRAIN_ONEDNN, cores[b]);
            if (cg && dn) {
                logsum += log(dn->median_ms / cg->median_ms);
                n++;
            }
        }
        if (n && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%d core%s %.2fx (%d layers)",
                                    len ? ", " : "", cores[b], cores[b] == 1 ? "" : "s",
                                    exp(logsum / n), n);
    }
    if (len)
        say("Geometric mean of oneDNN's step time over convgrad's (>1 = convgrad faster): %s\n",
            line);
}

/* ---- the CSV files ------------------------------------------------------------ */

FILE *csv_open(const char *out_dir, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        say("  !! cannot write %s: %s\n", path, strerror(errno));
    return f;
}

int csv_close(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        say("  !! cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Every row names the kernel set (requested, running), the CPU and the commit,
 * so that rows of runs on other kernel sets, machines or commits stay apart
 * when their files are put together. */
void csv_end_row(FILE *f, int header)
{
    if (header) {
        fputs(",isa_requested,isa_running,cpu,commit\n", f);
        return;
    }
    const tool_isa *isa = tool_isa_info();
    fputc(',', f);
    tool_csv_field(f, isa->requested ? isa->requested : "");
    fprintf(f, ",%s,", isa->running);
    tool_csv_field(f, tool_cpu_text());
    fputc(',', f);
    tool_csv_field(f, tool_commit);
    fputc('\n', f);
}

/* The layer's columns of results.csv and training.csv, and its shape. */
#define CSV_LAYER_HEADER                                                                           \
    "layer,n,h,w,cin,cout,kh,kw,stride_h,stride_w,pad_top,pad_left,pad_bottom,pad_right,"          \
    "dilation_h,dilation_w,group,oh,ow,"
static bench_shape csv_layer(FILE *f, int li)
{
    const bench_layer *L = &bench_layers[li];
    bench_shape s = shape_of(L);
    if (strpbrk(L->name, ",\" \t")) /* a --shapes name */
        tool_csv_field(f, L->name);
    else
        fputs(L->name, f);
    fprintf(f, ",%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,", s.n, s.h, s.w, s.cin,
            s.cout, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.pad_d, s.pad_r, s.dil_h, s.dil_w, s.group,
            s.oh, s.ow);
    return s;
}

int write_train_csv(const char *out_dir)
{
    char path[4096];
    FILE *f = csv_open(out_dir, "training.csv", path, sizeof path);
    if (!f)
        return -1;
    fprintf(f, CSV_LAYER_HEADER
            "gflop_step,impl,mask,"
            "cores,reps,median_ms,min_ms,max_ms,gflops,fwd_ms,bwd_data_ms,bwd_weights_bias_ms,"
            "bias_ms,ratio_vs_onednn,check,check_worst_err_over_tol,check_detail,onednn_impl");
    csv_end_row(f, 1);
    for (int i = 0; i < g_ntrain; ++i) {
        const train_result *r = &g_train[i];
        const train_result *d = find_train(r->layer, TRAIN_ONEDNN, r->cores);
        bench_shape s = csv_layer(f, r->layer);
        fprintf(f, "%.6f,%s,0x%x,%d,%d,%.6f,%.6f,%.6f,%.3f,%.6f,%.6f,%.6f,", train_flops(&s) * 1e-9,
                train_key(r->impl), (unsigned)r->mask, r->cores, r->reps, r->median_ms, r->min_ms,
                r->max_ms, r->gflops, r->phase_ms[PH_FWD], r->phase_ms[PH_BWD_DATA],
                r->phase_ms[PH_BWD_WEIGHTS]);
        if (r->impl == TRAIN_CONVGRAD)
            fprintf(f, "%.6f,", r->bias_ms);
        else
            fprintf(f, ",");
        if (d && r->median_ms > 0)
            fprintf(f, "%.4f,", d->median_ms / r->median_ms);
        else
            fprintf(f, ",");
        fprintf(f, "%s,%.4g,\"%s\",\"%s\"", r->ok ? "ok" : "FAIL", r->worst, r->check_desc,
                r->dnn_impl);
        csv_end_row(f, 0);
    }
    return csv_close(f, path);
}

int max_cores_measured(void)
{
    int m = 0;
    for (int i = 0; i < g_nresults; ++i)
        if (g_results[i].cores > m)
            m = g_results[i].cores;
    return m;
}

static int is_3x3_or_1x1_dense(const bench_layer *L)
{
    return L->group == 1 && L->kh == L->kw && (L->kh == 3 || L->kh == 1);
}

int write_csv(const char *out_dir)
{
    char path[4096];
    FILE *f = csv_open(out_dir, "results.csv", path, sizeof path);
    if (!f)
        return -1;
    fprintf(f, CSV_LAYER_HEADER
            "gflop,dtype,impl,mask,"
            "cores,reps,median_ms,min_ms,max_ms,gflops,pct_fma_limit,fma_limit_gflops,"
            "ratio_vs_onednn,speedup_vs_1core,check,check_worst_err_over_tol,check_detail,"
            "onednn_impl,onednn_reorder_to_ohwi_ms,workspace_bytes,scratch_per_core_bytes,"
            "warm_reps,warm_median_ms,warm_gflops,warm_pct_fma_limit,warm_ratio_vs_onednn,"
            "warm_speedup_vs_1core");
    csv_end_row(f, 1);
    for (int i = 0; i < g_nresults; ++i) {
        const result *r = &g_results[i];
        double lim = fma_limit_for(r->cores);
        const result *d = find_result(r->layer, IMPL_ONEDNN, DT_FP32, r->cores);
        const result *one = find_result(r->layer, r->impl, r->dtype, 1);
        bench_shape s = csv_layer(f, r->layer);
        fprintf(f, "%.6f,%s,%s,0x%x,%d,%d,%.6f,%.6f,%.6f,%.3f,", layer_flops(&s) * 1e-9,
                r->dtype == DT_FP16 ? "fp16" : "fp32", impl_key(r->impl, r->dtype),
                (unsigned)r->mask, r->cores, r->reps, r->median_ms, r->min_ms, r->max_ms,
                r->gflops);
        if (lim > 0 && r->median_ms > 0)
            fprintf(f, "%.2f,%.2f,", 100.0 * r->gflops / lim, lim);
        else
            fprintf(f, ",,");
        if (d && r->median_ms > 0)
            fprintf(f, "%.4f,", d->median_ms / r->median_ms);
        else
            fprintf(f, ",");
        if (one && r->median_ms > 0)
            fprintf(f, "%.4f,", one->median_ms / r->median_ms);
        else
            fprintf(f, ",");
        fprintf(f, "%s,%.4g,\"%s\",\"%s\",", r->ok ? "ok" : "FAIL", r->worst, r->check_desc,
                r->dnn_impl);
        if (r->impl == IMPL_ONEDNN)
            fprintf(f, "%.6f,", r->reorder_ms);
        else
            fprintf(f, ",");
        if (r->impl == IMPL_CONVGRAD)
            fprintf(f, "%zu,", r->ws_bytes);
        else
            fprintf(f, ",");
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
        if (r->impl == IMPL_CONVGRAD)
            fprintf(f, "%zu", r->scratch_bytes);
#endif
        /* the warm burst's figures (median_ms ... above: the interleaved rounds') */
        fprintf(f, ",%d,", r->warm_reps);
        if (r->warm_reps > 0) {
            fprintf(f, "%.6f,%.3f,", r->warm_ms, r->warm_gflops);
            if (lim > 0)
                fprintf(f, "%.2f", 100.0 * r->warm_gflops / lim);
            fputc(',', f);
            if (d && d->warm_reps > 0)
                fprintf(f, "%.4f", d->warm_ms / r->warm_ms);
            fputc(',', f);
            if (one && one->warm_reps > 0)
                fprintf(f, "%.4f", one->warm_ms / r->warm_ms);
        } else {
            fprintf(f, ",,,,");
        }
        csv_end_row(f, 0);
    }
    return csv_close(f, path);
}

/* Plots with gnuplot: GFLOP/s by layer and implementation (at each core count), and
 * speedup against cores. Returns 1 when the PNGs were written. */
int write_plots(const char *out_dir, int no_plots, char *why, size_t whylen)
{
    if (no_plots) {
        snprintf(why, whylen, "--no-plots");
        return 0;
    }
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(why, whylen, "gnuplot not found (apt-get install gnuplot-nox)");
        return 0;
    }
    const char *term = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0
                           ? "pngcairo font ',10'"
                           : "png";
    /* the series: (impl, dtype) pairs that have results */
    int series[NIMPL * 2][2], ns = 0;
    for (int impl = 0; impl < NIMPL; ++impl)
        for (int dt = DT_FP32; dt <= DT_FP16; ++dt) {
            int have = 0;
            for (int i = 0; i < g_nresults; ++i)
                have |= g_results[i].impl == impl && g_results[i].dtype == dt;
            if (have) {
                series[ns][0] = impl;
                series[ns][1] = dt;
                ns++;
            }
        }
    int cores_list[33], nc = 0;
    for (int i = 0; i < g_nresults; ++i) {
        int c = g_results[i].cores, seen = 0;
        for (int k = 0; k < nc; ++k)
            seen |= cores_list[k] == c;
        if (!seen && nc < 33)
            cores_list[nc++] = c;
    }
    for (int a = 0; a < nc; ++a)
        for (int b = a + 1; b < nc; ++b)
            if (cores_list[b] < cores_list[a]) {
                int t = cores_list[a];
                cores_list[a] = cores_list[b];
                cores_list[b] = t;
            }
    int layers_seen[BENCH_MAX_LAYERS], nl = 0;
    for (int li = 0; li < bench_nlayers && li < BENCH_MAX_LAYERS; ++li) {
        int have = 0;
        for (int i = 0; i < g_nresults; ++i)
            have |= g_results[i].layer == li;
        if (have)
            layers_seen[nl++] = li;
    }

    char path[4096];
    /* gflops.dat: one block per core count; rows layers, columns series */
    snprintf(path, sizeof path, "%s/plot_gflops.dat", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    for (int ci = 0; ci < nc; ++ci) {
        fprintf(f, "layer");
        for (int s = 0; s < ns; ++s)
            fprintf(f, " \"%s\"", impl_label(series[s][0], series[s][1]));
        fprintf(f, "\n");
        for (int k = 0; k < nl; ++k) {
            fprintf(f, "%s", bench_layers[layers_seen[k]].name);
            for (int s = 0; s < ns; ++s) {
                const result *r = find_result(layers_seen[k], series[s][0], series[s][1],
                                              cores_list[ci]);
                if (r)
                    fprintf(f, " %.3f", r->gflops);
                else
                    fprintf(f, " -");
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    /* speedup.dat: one block per series; rows cores, columns layers */
    snprintf(path, sizeof path, "%s/plot_speedup.dat", out_dir);
    f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    for (int s = 0; s < ns; ++s) {
        fprintf(f, "cores");
        for (int k = 0; k < nl; ++k)
            fprintf(f, " %s", bench_layers[layers_seen[k]].name);
        fprintf(f, "\n");
        for (int ci = 0; ci < nc; ++ci) {
            fprintf(f, "%d", cores_list[ci]);
            for (int k = 0; k < nl; ++k) {
                const result *one = find_result(layers_seen[k], series[s][0], series[s][1], 1);
                const result *r = find_result(layers_seen[k], series[s][0], series[s][1],
                                              cores_list[ci]);
                if (one && r)
                    fprintf(f, " %.4f", one->median_ms / r->median_ms);
                else
                    fprintf(f, " -");
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n\n");
    }
    fclose(f);

    snprintf(path, sizeof path, "%s/plots.gp", out_dir);
    f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    fprintf(f, "# written by convgrad-bench; run from this directory: gnuplot plots.gp\n");
    fprintf(f, "set terminal %s size 1400,720\nset termoption noenhanced\nset datafile missing '-'\n"
               "set key outside right top\n",
            term);
    fprintf(f, "set style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
               "set xtics rotate by -35 left\nset grid ytics\nset logscale y\n"
               "set ylabel 'GFLOP/s (log scale)'\n");
    for (int ci = 0; ci < nc; ++ci) {
        double lim = fma_limit_for(cores_list[ci]);
        fprintf(f, "set output 'gflops_%dcore%s.png'\n", cores_list[ci],
                cores_list[ci] == 1 ? "" : "s");
        fprintf(f, "set title 'Filter gradient, GFLOP/s by layer and implementation, %d core%s "
                   "(FMA limit %.0f GFLOP/s)'\n",
                cores_list[ci], cores_list[ci] == 1 ? "" : "s", lim);
        fprintf(f, "plot for [c=2:%d] 'plot_gflops.dat' index %d using c:xtic(1) title "
                   "columnheader(c)",
                ns + 1, ci);
        if (lim > 0)
            fprintf(f, ", %.3f with lines lw 2 dt 2 lc rgb 'black' title 'FMA limit'", lim);
        fprintf(f, "\n");
    }
    if (g_ntrain > 0) {
        /* the training step: GFLOP/s by layer, convgrad and oneDNN, one PNG per core count */
        int tl[BENCH_MAX_LAYERS], tc[33];
        const int ntl = train_layers(tl, BENCH_MAX_LAYERS), ntc = train_cores(tc, 33);
        char tpath[4096];
        snprintf(tpath, sizeof tpath, "%s/plot_training.dat", out_dir);
        FILE *t = fopen(tpath, "w");
        if (t) {
            for (int ci = 0; ci < ntc; ++ci) {
                fprintf(t, "layer \"convgrad (cg_conv2d_*)\" \"oneDNN\"\n");
                for (int k = 0; k < ntl; ++k) {
                    fprintf(t, "%s", bench_layers[tl[k]].name);
                    for (int impl = 0; impl < NTRAIN; ++impl) {
                        const train_result *r = find_train(tl[k], impl, tc[ci]);
                        if (r)
                            fprintf(t, " %.3f", r->gflops);
                        else
                            fprintf(t, " -");
                    }
                    fprintf(t, "\n");
                }
                fprintf(t, "\n\n");
            }
            fclose(t);
            for (int ci = 0; ci < ntc; ++ci) {
                double lim = fma_limit_for(tc[ci]);
                fprintf(f, "set output 'training_%dcore%s.png'\n", tc[ci], tc[ci] == 1 ? "" : "s");
                fprintf(f, "set title 'Training step (forward + backward data + backward weights, "
                           "with bias), GFLOP/s by layer, %d core%s (FMA limit %.0f GFLOP/s)'\n",
                        tc[ci], tc[ci] == 1 ? "" : "s", lim);
                fprintf(f, "plot for [c=2:3] 'plot_training.dat' index %d using c:xtic(1) title "
                           "columnheader(c)",
                        ci);
                if (lim > 0)
                    fprintf(f, ", %.3f with lines lw 2 dt 2 lc rgb 'black' title 'FMA limit'", lim);
                fprintf(f, "\n");
            }
        }
    }
    fprintf(f, "unset logscale y\nunset style\nset style data linespoints\nunset xtics\n"
               "set xtics 1\nset xlabel 'cores'\nset ylabel 'speedup over 1 core'\n"
               "set key outside right top font ',8'\n");
    const int rows = (ns + 1) / 2;
    fprintf(f, "set terminal %s size 1400,%d\nset termoption noenhanced\n", term,
            420 * rows + 60);
    fprintf(f, "set output 'speedup.png'\nset multiplot layout %d,%d title 'Speedup against "
               "cores: each implementation over its own 1-core median'\n",
            rows, ns > 1 ? 2 : 1);
    for (int s = 0; s < ns; ++s) {
        fprintf(f, "set title '%s'\n", impl_label(series[s][0], series[s][1]));
        fprintf(f, "set xrange [0.8:%d.2]\nset yrange [0:*]\n", cores_list[nc - 1]);
        fprintf(f, "plot for [c=2:%d] 'plot_speedup.dat' index %d using 1:c title columnheader(c) "
                   "lw 1.5, x title 'ideal' with lines dt 2 lc rgb 'black'\n",
                nl + 1, s);
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);

    char cmd[4300];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp > gnuplot.log 2>&1", out_dir);
    if (system(cmd) != 0) {
        snprintf(why, whylen, "gnuplot failed (see %.200s/gnuplot.log)", out_dir);
        return 0;
    }
    return 1;
}

/* ---- targets ------------------------------------------------------------------------- */

static void target_line(int *met, int *evaluated, int ok, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ok >= 0) {
        (*evaluated)++;
        *met += ok;
    }
    say("  [%s] %s\n", ok < 0 ? "n/a    " : ok ? "met    " : "NOT MET", buf);
}

void report_targets(const overhead_result *ov, int nov)
{
    int met = 0, evaluated = 0;
    const int K = max_cores_measured();
    /* convgrad / oneDNN, geometric means at every core count */
    for (int dt = DT_FP32; dt <= DT_FP16; ++dt) {
        char line[512] = "";
        size_t len = 0;
        for (int c = 1; c <= K; ++c) {
            double logsum = 0;
            int n = 0;
            for (int li = 0; li < bench_nlayers; ++li) {
                const result *a = find_result(li, IMPL_CONVGRAD, dt, c);
                const result *d = find_result(li, IMPL_ONEDNN, DT_FP32, c);
                if (a && d) {
                    logsum += log(judged_ms(d) / judged_ms(a));
                    n++;
                }
            }
            if (n && len < sizeof line)
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%d core%s %.2fx (%d layers)",
                                        len ? ", " : "", c, c == 1 ? "" : "s", exp(logsum / n), n);
        }
        if (len)
            say("\nGeometric mean of oneDNN's time over %s's (>1 = %s faster): %s\n",
                impl_label(IMPL_CONVGRAD, dt), impl_label(IMPL_CONVGRAD, dt), line);
    }
    say("\nTargets, judged on the warm medians (repeated calls; the interleaved medians where a "
        "layer had no warm burst), the interleaved ones in the table beside:\n");

    /* 1: geomean convgrad / oneDNN at max cores >= 1.0, no layer below 0.8 */
    {
        double logsum = 0, worst = INFINITY;
        int n = 0, worst_l = -1;
        for (int li = 0; li < bench_nlayers; ++li) {
            const result *a = find_result(li, IMPL_CONVGRAD, DT_FP32, K);
            const result *d = find_result(li, IMPL_ONEDNN, DT_FP32, K);
            if (!a || !d)
                continue;
            double r = judged_ms(d) / judged_ms(a);
            logsum += log(r);
            n++;
            if (r < worst) {
                worst = r;
                worst_l = li;
            }
        }
        if (n)
            target_line(&met, &evaluated, exp(logsum / n) >= 1.0 && worst >= 0.8,
                        "geomean convgrad/oneDNN at %d cores >= 1.0, none below 0.8: geomean "
                        "%.2fx over %d layers, lowest %.2fx (%s)",
                        K, exp(logsum / n), n, worst, bench_layers[worst_l].name);
        else
            target_line(&met, &evaluated, -1,
                        "geomean convgrad/oneDNN >= 1.0: not evaluated (no oneDNN results)");
    }
    /* 2: 3x3 and 1x1 layers >= 80% of the FMA limit per core used */
    {
        int n = 0, n_ok = 0, worst_l = -1, worst_c = 0;
        double worst = INFINITY;
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = &g_results[i];
            if (r->impl != IMPL_CONVGRAD || r->dtype != DT_FP32 || r->median_ms <= 0 ||
                !is_3x3_or_1x1_dense(&bench_layers[r->layer]))
                continue;
            double lim = fma_limit_for(r->cores);
            if (lim <= 0)
                continue;
            bench_shape s = shape_of(&bench_layers[r->layer]);
            double pct = 100.0 * layer_flops(&s) / (judged_ms(r) * 1e6) / lim;
            n++;
            n_ok += pct >= 80.0;
            if (pct < worst) {
                worst = pct;
                worst_l = r->layer;
                worst_c = r->cores;
            }
        }
        if (n)
            target_line(&met, &evaluated, n_ok == n,
                        "3x3/1x1 layers >= 80%% of the FMA limit (%s) per core used: %d of %d "
                        "(layer, cores) met; lowest %.1f%% (%s, %d core%s)",
                        g_lim.fma_isa, n_ok, n, worst, bench_layers[worst_l].name, worst_c,
                        worst_c == 1 ? "" : "s");
        else
            target_line(&met, &evaluated, -1, "3x3/1x1 >= 80%% of the FMA limit: no such layer run");
    }
    /* 3: depthwise and grouped >= 1.5x oneDNN */
    {
        int n = 0, n_ok = 0, worst_l = -1, worst_c = 0;
        double worst = INFINITY;
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = &g_results[i];
            if (r->impl != IMPL_CONVGRAD || r->dtype != DT_FP32 || r->median_ms <= 0 ||
                bench_layers[r->layer].group == 1)
                continue;
            const result *d = find_result(r->layer, IMPL_ONEDNN, DT_FP32, r->cores);
            if (!d)
                continue;
            double x = judged_ms(d) / judged_ms(r);
            n++;
            n_ok += x >= 1.5;
            if (x < worst) {
                worst = x;
                worst_l = r->layer;
                worst_c = r->cores;
            }
        }
        if (n)
            target_line(&met, &evaluated, n_ok == n,
                        "depthwise and grouped layers >= 1.5x oneDNN: %d of %d (layer, cores) "
                        "met; lowest %.2fx (%s, %d core%s)",
                        n_ok, n, worst, bench_layers[worst_l].name, worst_c, worst_c == 1 ? "" : "s");
        else
            target_line(&met, &evaluated, -1,
                        "depthwise/grouped >= 1.5x oneDNN: not evaluated (no such layer, or no "
                        "oneDNN)");
    }
    /* 4: 1 -> 2 cores speedup >= 1.85x on every layer */
    {
        int n = 0, n_ok = 0, worst_l = -1;
        double worst = INFINITY;
        for (int li = 0; li < bench_nlayers; ++li) {
            const result *a = find_result(li, IMPL_CONVGRAD, DT_FP32, 1);
            const result *b = find_result(li, IMPL_CONVGRAD, DT_FP32, 2);
            if (!a || !b)
                continue;
            double x = judged_ms(a) / judged_ms(b);
            n++;
            n_ok += x >= 1.85;
            if (x < worst) {
                worst = x;
                worst_l = li;
            }
        }
        if (n)
            target_line(&met, &evaluated, n_ok == n,
                        "1 -> 2 cores speedup >= 1.85x on every layer: %d of %d met; lowest %.2fx "
                        "(%s)",
                        n_ok, n, worst, bench_layers[worst_l].name);
        else
            target_line(&met, &evaluated, -1,
                        "1 -> 2 cores speedup: not evaluated (needs 1- and 2-core masks)");
    }
    /* 5: hp_ >= 0.9x fp32 throughput */
    {
        int n = 0, n_ok = 0, worst_l = -1, worst_c = 0;
        double worst = INFINITY;
        for (int i = 0; i < g_nresults; ++i) {
            const result *h = &g_results[i];
            if (h->impl != IMPL_CONVGRAD || h->dtype != DT_FP16 || h->median_ms <= 0)
                continue;
            const result *f = find_result(h->layer, IMPL_CONVGRAD, DT_FP32, h->cores);
            if (!f)
                continue;
            double x = judged_ms(f) / judged_ms(h);
            n++;
            n_ok += x >= 0.9;
            if (x < worst) {
                worst = x;
                worst_l = h->layer;
                worst_c = h->cores;
            }
        }
        if (n)
            target_line(&met, &evaluated, n_ok == n,
                        "hp_ (fp16) >= 0.9x the fp32 throughput: %d of %d (layer, cores) met; "
                        "lowest %.2fx (%s, %d core%s)",
                        n_ok, n, worst, bench_layers[worst_l].name, worst_c, worst_c == 1 ? "" : "s");
        else
            target_line(&met, &evaluated, -1, "hp_ >= 0.9x fp32: not evaluated (--dtype both)");
    }
    /* 6: launch + barrier cost under 5% of the smallest layer's time */
    {
        const overhead_result *o2 = NULL;
        for (int i = 0; i < nov; ++i)
            if (ov[i].cores == 2)
                o2 = &ov[i];
        double smallest = INFINITY;
        int sl = -1;
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = &g_results[i];
            if (r->impl == IMPL_CONVGRAD && r->dtype == DT_FP32 && r->cores == 2 &&
                r->median_ms > 0 && judged_ms(r) < smallest) {
                smallest = judged_ms(r);
                sl = r->layer;
            }
        }
        if (o2 && sl >= 0) {
            double per_call_us = o2->launch_us + 2 * o2->bar_us;
            double pct = per_call_us / (smallest * 1e3) * 100.0;
            target_line(&met, &evaluated, pct < 5.0,
                        "per-call overhead (one launch + 2 barrier rounds, 2 cores: %.1f us) under "
                        "5%% of the smallest layer (%s, %.3f ms at 2 cores): %.2f%%",
                        per_call_us, bench_layers[sl].name, smallest, pct);
        } else {
            target_line(&met, &evaluated, -1,
                        "per-call overhead under 5%% of the smallest layer: not evaluated (needs a "
                        "2-core mask)");
        }
    }
    /* 7: memory reported */
#ifdef CG_BENCH_HAVE_SCRATCH_BYTES
    target_line(&met, &evaluated, 1,
                "memory reported per layer: the caller's workspace and the library's scratch per "
                "core (table above)");
#else
    target_line(&met, &evaluated, 0,
                "memory reported per layer: the caller's workspace only; the library does not "
                "declare cg_grad_filter_scratch_bytes, so its own scratch is not reported");
#endif
    say("  %d of %d evaluated targets met\n", met, evaluated);
}
