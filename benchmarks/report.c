/* SPDX-License-Identifier: MIT */
/* convgrad-bench's reports: the table rows, the rooflines of the memory-bound
 * layers, the performance targets, the CSV files and the gnuplot plots.
 * Everything here reads the results main.c collected (g_results) and the
 * limits it measured (g_lim). */
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

/* The check cell's mark of a convgrad result on 2+ cores: " =1c" when its
 * bits are its 1-core result's, " bits!" when not. */
static const char *bits_mark(int same_bits)
{
    return same_bits == 1 ? " =1c" : same_bits == 0 ? " bits!" : "";
}

/* "%.1f%%" of a share of the FMA loop, or "-" where there is none */
static void fmt_pct(char *buf, size_t len, double pct)
{
    if (pct > 0)
        snprintf(buf, len, "%.1f%%", pct);
    else
        snprintf(buf, len, "-");
}

/* "%.<prec>f<suffix>" of v, or "-" when v <= 0 */
static void fmt_or_dash(char *buf, size_t len, double v, int prec, const char *suffix)
{
    if (v > 0)
        snprintf(buf, len, "%.*f%s", prec, v, suffix);
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
                    fmt_pct(pct, sizeof pct, r->pct_fma);
                    /* the ratios on the judged figures: warm, when both sides have them */
                    const result *d = find_result(li, IMPL_ONEDNN, DT_FP32, r->cores);
                    if (d)
                        snprintf(ratio, sizeof ratio, "%.2fx", judged_ratio(d, r));
                    const result *one = find_result(li, impl, dt, 1);
                    if (one)
                        snprintf(speed, sizeof speed, "%.2fx", judged_ratio(one, r));
                }
                if (r->warm_reps > 0) {
                    snprintf(wmed, sizeof wmed, "%.3f", r->warm_ms);
                    snprintf(wgf, sizeof wgf, "%.1f", r->warm_gflops);
                    fmt_pct(wpct, sizeof wpct, r->warm_pct_fma);
                }
                char chk[48];
                if (r->reps < g_reps_asked)
                    snprintf(chk, sizeof chk, "%s (%d rounds)", r->ok ? "ok" : "FAIL", r->reps);
                else
                    snprintf(chk, sizeof chk, "%s%s", r->ok ? "ok" : "FAIL",
                             bits_mark(r->same_bits));
                say("%-*s %6s  %-13s %5d  %10s %9s %6s %9s %7s  %10s %9s %6s  %s\n", name_width(),
                    first ? L->name : "", gflop, impl_label(impl, dt), r->cores, wmed, wgf, wpct,
                    ratio, speed, med, gf, pct, chk);
                first = 0;
            }
}

/* ---- the roofline ------------------------------------------------------------------ */

/* 1 when the FLOPs over the bytes moved at least fall below the machine balance at
 * `cores` (the FMA limit over the triad bandwidth): the memory bounds the work, not
 * the FMAs. */
static int memory_bound(double flops, double bytes, int cores)
{
    const double fma = fma_limit_for(cores), bw = bandwidth_for(cores);
    return fma > 0 && bw > 0 && bytes > 0 && flops / bytes < fma / bw;
}

/* The share (%) of the measured bandwidth at `cores` that `bytes` in `ms` reach; 0: none. */
static double pct_bandwidth(double bytes, double ms, int cores)
{
    const double bw = bandwidth_for(cores);
    return bw > 0 && ms > 0 ? 100.0 * bytes / (ms * 1e6) / bw : 0;
}

/* The roofline table's columns after the layer's: `what` (dtype or phase), then
 * per group (warm, interleaved) convgrad's and oneDNN's GB/s and share. */
static void roofline_header(const char *what)
{
    const int nw = name_width();
    say("%-*s %5s %5s %7s %7s %8s %10s  %s  %s\n", nw, "", "", "", "", "", "", "",
        "-------- warm (repeated calls) --------", "------------- interleaved -------------");
    say("%-*s %5s %5s %7s %7s %8s %10s  %13s %6s %11s %6s  %13s %6s %11s %6s\n", nw, "layer", what,
        "cores", "FLOP/B", "balance", "min MB", "triad GB/s", "convgrad GB/s", "%BW", "oneDNN GB/s",
        "%BW", "convgrad GB/s", "%BW", "oneDNN GB/s", "%BW");
}

/* One row: `bytes` moved at least in convgrad's and oneDNN's warm and interleaved
 * medians (ms; 0: none, shown '-'). */
static void roofline_row(const char *name, const char *what, int cores, double flops, double bytes,
                         const double cg_ms[2], const double dn_ms[2])
{
    char cells[4][2][16];
    const double ms[4] = {cg_ms[0], dn_ms[0], cg_ms[1], dn_ms[1]};
    for (int k = 0; k < 4; ++k) {
        fmt_or_dash(cells[k][0], sizeof cells[k][0], ms[k] > 0 ? bytes / (ms[k] * 1e6) : 0, 1, "");
        fmt_or_dash(cells[k][1], sizeof cells[k][1], pct_bandwidth(bytes, ms[k], cores), 1, "%");
    }
    say("%-*s %5s %5d %7.2f %7.2f %8.1f %10.1f  %13s %6s %11s %6s  %13s %6s %11s %6s\n",
        name_width(), name, what, cores, flops / bytes, fma_limit_for(cores) / bandwidth_for(cores),
        bytes * 1e-6, bandwidth_for(cores), cells[0][0], cells[0][1], cells[1][0], cells[1][1],
        cells[2][0], cells[2][1], cells[3][0], cells[3][1]);
}

/* A result's warm and interleaved medians (ms; warm 0 when it had no burst). */
static void result_ms(const result *r, double ms[2])
{
    ms[0] = r && r->warm_reps > 0 ? r->warm_ms : 0;
    ms[1] = r ? r->median_ms : 0;
}

void print_roofline_table(void)
{
    const int K = max_cores_measured();
    int rows = 0;
    for (int i = 0; i < g_nresults; ++i) {
        const int li = g_results[i].layer;
        int seen = 0; /* the layers in run order, each once */
        for (int j = 0; j < i; ++j)
            seen |= g_results[j].layer == li;
        if (seen)
            continue;
        bench_shape s = shape_of(&bench_layers[li]);
        int first = 1;
        for (int dt = DT_FP32; dt <= DT_FP16; ++dt)
            for (int c = 1; c <= K; ++c) {
                const result *cg = find_result(li, IMPL_CONVGRAD, dt, c);
                if (!cg || !memory_bound(layer_flops(&s), layer_min_bytes(&s, dt), c))
                    continue;
                /* oneDNN is fp32 only: beside convgrad's fp32 rows */
                const result *dn = dt == DT_FP32 ? find_result(li, IMPL_ONEDNN, DT_FP32, c) : NULL;
                if (!rows++) {
                    say("\nRoofline of the filter gradient: the memory-bound (layer, dtype, "
                        "cores), whose FLOP/B (FLOPs over the bytes it must move at least: x and "
                        "dy read once, dw written once) is below the machine balance (the FMA "
                        "limit over the STREAM triad bandwidth at the same cores)\n");
                    roofline_header("dtype");
                }
                double cms[2], dms[2];
                result_ms(cg, cms);
                result_ms(dn, dms);
                roofline_row(first ? bench_layers[li].name : "", dt == DT_FP16 ? "fp16" : "fp32", c,
                             layer_flops(&s), layer_min_bytes(&s, dt), cms, dms);
                first = 0;
            }
    }
    if (rows)
        say("(min MB: those bytes, 10^6; GB/s: min MB over the median time, a lower bound of "
            "the traffic; %%BW: that over the triad at the same cores, past 100%% where the "
            "tensors stay in the caches; fp16 moves binary16 x, dy and dw, and has no oneDNN "
            "peer)\n");
    else if (bandwidth_for(1) > 0)
        say("\nRoofline of the filter gradient: no (layer, dtype, cores) of the run is "
            "memory-bound (FLOP/B at or above the machine balance)\n");
    else
        say("\nRoofline of the filter gradient: not made (the memory bandwidth was not "
            "measured)\n");
}

/* ---- what the same bits on every core_mask cost ------------------------------------- */

/* convgrad's time over cg any-order's on (layer, cores) - 1, in %: the median
 * of the pairs back to back, else of the judged medians; NAN: not both. */
static double reproducible_cost_pct(int li, int cores)
{
    const result *cg = find_result(li, IMPL_CONVGRAD, DT_FP32, cores);
    const result *any = find_result(li, IMPL_ANY_ORDER, DT_FP32, cores);
    if (!cg || !any)
        return NAN;
    return 100.0 * ((any->cost_ratio > 0 ? any->cost_ratio : judged_ratio(cg, any)) - 1.0);
}

/* Geometric mean of convgrad's time over any-order's at `cores`, as a cost in %;
 * *n the layers. */
static double reproducible_cost_geomean(int cores, int *n)
{
    double logsum = 0;
    *n = 0;
    for (int li = 0; li < bench_nlayers; ++li) {
        const double pct = reproducible_cost_pct(li, cores);
        if (!isnan(pct)) {
            logsum += log1p(pct / 100.0);
            (*n)++;
        }
    }
    return *n ? 100.0 * expm1(logsum / *n) : NAN;
}

void print_reproducible_cost(void)
{
    const int K = max_cores_measured();
    int header = 0;
    for (int li = 0; li < bench_nlayers; ++li)
        for (int c = 1; c <= K; ++c) {
            const double pct = reproducible_cost_pct(li, c);
            if (isnan(pct))
                continue;
            if (!header++) {
                say("\nWhat the same bits on every core_mask cost (fp32 filter gradient): "
                    "convgrad, whose sums are cut by the shape alone, against cg any-order "
                    "(cg_set_reproducible(0): one piece of each sum a core); cost: the median "
                    "of convgrad's time over any-order's in pairs of calls back to back (each "
                    "the best of %d), where a layer had them ('*': of the warm medians "
                    "(interleaved where no burst), shown beside)\n",
                    COST_CALLS);
                say("%-*s %5s %12s %14s %8s\n", name_width(), "layer", "cores", "convgrad ms",
                    "any-order ms", "cost");
            }
            const result *any = find_result(li, IMPL_ANY_ORDER, DT_FP32, c);
            say("%-*s %5d %12.3f %14.3f %+7.1f%%%s\n", name_width(), bench_layers[li].name, c,
                judged_ms(find_result(li, IMPL_CONVGRAD, DT_FP32, c)), judged_ms(any), pct,
                any->cost_ratio > 0 ? "" : " *");
        }
    for (int c = 1; header && c <= K; ++c) {
        int n;
        const double g = reproducible_cost_geomean(c, &n);
        if (n)
            say("%-*s %5d %12s %14s %+7.1f%%  (geometric mean, %d layers)\n", name_width(),
                "all", c, "", "", g, n);
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

/* oneDNN's time over convgrad's for the step (phase -1) or a phase, on the judged
 * figures (judged 1: warm, else interleaved) or the interleaved ones; 0: none. */
static double train_ratio(const train_result *cg, const train_result *dn, int phase, int judged)
{
    if (!cg || !dn || cg->median_ms <= 0 || dn->median_ms <= 0)
        return 0;
    if (judged)
        return train_judged_ratio(dn, cg, phase);
    double a = train_ms(cg, phase, 0), b = train_ms(dn, phase, 0);
    return a > 0 && b > 0 ? b / a : 0;
}

/* The geometric mean of the step's ratio at `cores` over the layers with both
 * sides (*n of them), on the judged figures or the interleaved ones. */
static double train_geomean(int cores, int judged, int *n)
{
    double logsum = 0;
    *n = 0;
    for (int li = 0; li < bench_nlayers; ++li) {
        double x = train_ratio(find_train(li, TRAIN_CONVGRAD, cores),
                               find_train(li, TRAIN_ONEDNN, cores), -1, judged);
        if (x > 0) {
            logsum += log(x);
            (*n)++;
        }
    }
    return *n ? exp(logsum / *n) : 0;
}

/* One group of the training table's columns: convgrad's and oneDNN's step (ms),
 * the ratio, convgrad's GFLOP/s and each phase's ratio; the warm group's times
 * are the bursts' and its ratios the judged figures' (as the filter-gradient
 * table's), the interleaved group's all the rounds'. */
static void train_cells(char *line, size_t len, const train_result *cg, const train_result *dn,
                        double flops, int warm)
{
    char cms[16], dms[16], ratio[16], gf[16], ph[NPHASE][16];
    double a = cg ? train_ms(cg, -1, warm) : 0, b = dn ? train_ms(dn, -1, warm) : 0;
    fmt_or_dash(cms, sizeof cms, a, 3, "");
    fmt_or_dash(dms, sizeof dms, b, 3, "");
    fmt_or_dash(ratio, sizeof ratio, train_ratio(cg, dn, -1, warm), 2, "x");
    fmt_or_dash(gf, sizeof gf, a > 0 ? flops / (a * 1e6) : 0, 1, "");
    for (int k = 0; k < NPHASE; ++k)
        fmt_or_dash(ph[k], sizeof ph[k], train_ratio(cg, dn, k, warm), 2, "x");
    snprintf(line, len, "%11s %10s %7s %8s %7s %7s %7s %7s", cms, dms, ratio, gf, ph[PH_FWD],
             ph[PH_BWD_DATA], ph[PH_BWD_WEIGHTS], ph[PH_BWD]);
}

/* The training step's phases on the (layer, cores) where they are memory-bound:
 * each of the three moves the same bytes at least and does the same FLOPs
 * (forward: x and w read, y written; backward data: dy and w read, dx
 * written; backward weights: the filter gradient's x, dy and dw), so one
 * test covers all; the whole backward does twice the FLOPs and moves dx
 * besides. */
static void print_train_roofline(const int *layers, int nl, const int *cores, int nc)
{
    static const char *const phase[NPHASE] = {"fwd", "bwd-d", "bwd-w", "bwd"};
    int rows = 0;
    for (int a = 0; a < nl; ++a) {
        const int li = layers[a];
        bench_shape s = shape_of(&bench_layers[li]);
        const double flops = layer_flops(&s), bytes = layer_min_bytes(&s, DT_FP32);
        const double dx_bytes = (double)s.n * s.h * s.w * s.cin * sizeof(float);
        int first = 1;
        for (int b = 0; b < nc; ++b) {
            const train_result *cg = find_train(li, TRAIN_CONVGRAD, cores[b]);
            const train_result *dn = find_train(li, TRAIN_ONEDNN, cores[b]);
            if (!cg || !memory_bound(flops, bytes, cores[b]))
                continue;
            if (!rows++) {
                say("\nRoofline of the training step's phases on the memory-bound (layer, cores): "
                    "each phase must move x + dy + w bytes at least (forward: x, w read, y "
                    "written; bwd-d: dy, w read, dx written; bwd-w: x, dy read, dw written) for "
                    "the convolution's FLOPs; bwd, the whole backward (convgrad: "
                    "cg_conv2d_backward): x, dy, w read, dx, dw written, for twice the FLOPs\n");
                roofline_header("phase");
            }
            for (int ph = 0; ph < NPHASE; ++ph) {
                const double cms[2] = {train_ms(cg, ph, 1), train_ms(cg, ph, 0)};
                const double dms[2] = {dn ? train_ms(dn, ph, 1) : 0, dn ? train_ms(dn, ph, 0) : 0};
                const int whole = ph == PH_BWD;
                roofline_row(first ? bench_layers[li].name : "", phase[ph], cores[b],
                             flops * phase_convolutions(ph), bytes + (whole ? dx_bytes : 0), cms,
                             dms);
                first = 0;
            }
        }
    }
    if (rows)
        say("(as the filter gradient's roofline; bwd-w includes the bias gradient on both sides, "
            "its db not counted)\n");
}

void print_train_table(void)
{
    int layers[BENCH_MAX_LAYERS], cores[33];
    const int nl = train_layers(layers, BENCH_MAX_LAYERS), nc = train_cores(cores, 33);
    say("\nTraining step, fp32 NHWC, OHWI weights: convgrad = cg_conv2d_forward (with bias) + "
        "cg_conv2d_backward (dx, dw, db in one call); oneDNN = "
        "forward_training (with bias) + backward data + backward weights (with diff_bias), on as "
        "many threads; warm: the median of a burst of back-to-back steps (--warm-ms); "
        "interleaved: medians of %d timed round%s%s; GFLOP = 3x the convolution's (bias not "
        "counted)\n",
        g_train_reps_asked, g_train_reps_asked == 1 ? "" : "s",
        g_train_reps_asked < g_reps_asked
            ? " (fewer than the filter gradient's, spread evenly over its rounds)"
            : " (the filter gradient's rounds)");
    say("%-15s %6s %5s  %-71s  %-71s\n", "", "", "",
        "------------------------ warm (repeated steps) ------------------------",
        "----------------------------- interleaved -----------------------------");
    char head[160];
    snprintf(head, sizeof head, "%11s %10s %7s %8s %7s %7s %7s %7s", "convgrad ms", "oneDNN ms",
             "ratio", "GFLOP/s", "fwd", "bwd-d", "bwd-w", "bwd");
    say("%-15s %6s %5s  %s  %s  %s\n", "layer", "GFLOP", "cores", head, head, "check");
    for (int a = 0; a < nl; ++a) {
        const int li = layers[a];
        bench_shape s = shape_of(&bench_layers[li]);
        for (int b = 0; b < nc; ++b) {
            const train_result *cg = any_train(li, TRAIN_CONVGRAD, cores[b]);
            const train_result *dn = any_train(li, TRAIN_ONEDNN, cores[b]);
            if (!cg && !dn)
                continue;
            char warm[160], inter[160];
            train_cells(warm, sizeof warm, cg, dn, train_flops(&s), 1);
            train_cells(inter, sizeof inter, cg, dn, train_flops(&s), 0);
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
                snprintf(chk, sizeof chk, "%s%s", ok ? "ok" : "FAIL",
                         bits_mark(cg ? cg->same_bits : -1));
            char gflop[16] = "";
            if (b == 0)
                snprintf(gflop, sizeof gflop, "%.3f", train_flops(&s) * 1e-9);
            say("%-15s %6s %5d  %s  %s  %s\n", b == 0 ? bench_layers[li].name : "", gflop, cores[b],
                warm, inter, chk);
        }
    }
    int have_dnn = 0;
    for (int i = 0; i < g_ntrain; ++i)
        have_dnn |= g_train[i].impl == TRAIN_ONEDNN;
    if (!have_dnn)
        say("(no oneDNN training-step results: %s)\n", onednn_describe());
    say("(ratio: oneDNN's median step time over convgrad's, >1 = convgrad faster, same cores; in "
        "the warm group on the judged figures: the warm ones, the interleaved ones where a step "
        "had no burst ('-' times); GFLOP/s: convgrad's; "
        "fwd, bwd-d, bwd-w: the same ratio for each phase alone (bwd-w includes the bias "
        "gradient on both sides; convgrad's bwd-d and bwd-w: cg_conv2d_backward_data and "
        "cg_conv2d_backward_weights_bias, timed before its step); bwd: the whole backward "
        "(convgrad: cg_conv2d_backward; oneDNN: its bwd-d + bwd-w); oneDNN's weights stay in its "
        "blocked layouts: the reorders "
        "of w into them and of dw to OHWI (for the checks) are not timed)\n");
    for (int judged = 1; judged >= 0; --judged) {
        char line[512] = "";
        size_t len = 0;
        for (int b = 0; b < nc; ++b) {
            int n;
            double g = train_geomean(cores[b], judged, &n);
            if (n && len < sizeof line)
                len +=
                    (size_t)snprintf(line + len, sizeof line - len, "%s%d core%s %.2fx (%d layers)",
                                     len ? ", " : "", cores[b], cores[b] == 1 ? "" : "s", g, n);
        }
        if (len)
            say("Geometric mean of oneDNN's step time over convgrad's (>1 = convgrad faster), %s: "
                "%s\n",
                judged ? "warm (interleaved where no burst)" : "interleaved", line);
    }
    print_train_roofline(layers, nl, cores, nc);
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
            "bwd_ms,ratio_vs_onednn,check,check_worst_err_over_tol,check_detail,onednn_impl,"
            "warm_reps,warm_median_ms,warm_gflops,warm_fwd_ms,warm_bwd_data_ms,"
            "warm_bwd_weights_bias_ms,warm_bwd_ms,warm_ratio_vs_onednn,fwd_pct_fma,"
            "bwd_data_pct_fma,bwd_weights_bias_pct_fma,bwd_pct_fma,warm_fwd_pct_fma,"
            "warm_bwd_data_pct_fma,warm_bwd_weights_bias_pct_fma,warm_bwd_pct_fma");
    csv_end_row(f, 1);
    for (int i = 0; i < g_ntrain; ++i) {
        const train_result *r = &g_train[i];
        const train_result *d = find_train(r->layer, TRAIN_ONEDNN, r->cores);
        bench_shape s = csv_layer(f, r->layer);
        fprintf(f, "%.6f,%s,0x%x,%d,%d,%.6f,%.6f,%.6f,%.3f,%.6f,%.6f,%.6f,%.6f,",
                train_flops(&s) * 1e-9, train_key(r->impl), (unsigned)r->mask, r->cores, r->reps,
                r->median_ms, r->min_ms, r->max_ms, r->gflops, r->phase_ms[PH_FWD],
                r->phase_ms[PH_BWD_DATA], r->phase_ms[PH_BWD_WEIGHTS], r->phase_ms[PH_BWD]);
        if (d && r->median_ms > 0)
            fprintf(f, "%.4f,", d->median_ms / r->median_ms);
        else
            fprintf(f, ",");
        fprintf(f, "%s,%.4g,\"%s\",\"%s\"", r->ok ? "ok" : "FAIL", r->worst, r->check_desc,
                r->dnn_impl);
        /* the warm burst's figures (median_ms ... above: the interleaved rounds') */
        fprintf(f, ",%d,", r->warm_reps);
        if (r->warm_reps > 0) {
            fprintf(f, "%.6f,%.3f,%.6f,%.6f,%.6f,%.6f,", r->warm_ms, r->warm_gflops,
                    r->warm_phase_ms[PH_FWD], r->warm_phase_ms[PH_BWD_DATA],
                    r->warm_phase_ms[PH_BWD_WEIGHTS], r->warm_phase_ms[PH_BWD]);
            if (d && d->warm_reps > 0)
                fprintf(f, "%.4f", train_judged_ratio(d, r, -1));
        } else {
            fprintf(f, ",,,,,,");
        }
        /* each phase's share of the FMA loop timed in its rounds (the targets') */
        for (int warm = 0; warm < 2; ++warm)
            for (int ph = 0; ph < NPHASE; ++ph) {
                const double pct = warm ? r->warm_phase_pct_fma[ph] : r->phase_pct_fma[ph];
                if (pct > 0)
                    fprintf(f, ",%.2f", pct);
                else
                    fputc(',', f);
            }
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
            "warm_speedup_vs_1core,min_bytes,memory_bound,bandwidth_gb_per_s,gb_per_s,"
            "pct_bandwidth,warm_gb_per_s,warm_pct_bandwidth,cost_pairs_ratio");
    csv_end_row(f, 1);
    for (int i = 0; i < g_nresults; ++i) {
        const result *r = &g_results[i];
        const result *d = find_result(r->layer, IMPL_ONEDNN, DT_FP32, r->cores);
        const result *one = find_result(r->layer, r->impl, r->dtype, 1);
        bench_shape s = csv_layer(f, r->layer);
        fprintf(f, "%.6f,%s,%s,0x%x,%d,%d,%.6f,%.6f,%.6f,%.3f,", layer_flops(&s) * 1e-9,
                r->dtype == DT_FP16 ? "fp16" : "fp32", impl_key(r->impl, r->dtype),
                (unsigned)r->mask, r->cores, r->reps, r->median_ms, r->min_ms, r->max_ms,
                r->gflops);
        if (r->pct_fma > 0)
            fprintf(f, "%.2f,%.2f,", r->pct_fma, r->fma_gflops);
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
            if (r->warm_pct_fma > 0)
                fprintf(f, "%.2f", r->warm_pct_fma);
            fputc(',', f);
            if (d && d->warm_reps > 0)
                fprintf(f, "%.4f", judged_ratio(d, r));
            fputc(',', f);
            if (one && one->warm_reps > 0)
                fprintf(f, "%.4f", judged_ratio(one, r));
        } else {
            fprintf(f, ",,,,");
        }
        /* the roofline: the bytes moved at least, their rate, its share of the triad */
        const double bytes = layer_min_bytes(&s, r->dtype), bw = bandwidth_for(r->cores);
        const double ms[2] = {r->median_ms, r->warm_reps > 0 ? r->warm_ms : 0};
        fprintf(f, ",%.0f,%d,", bytes, memory_bound(layer_flops(&s), bytes, r->cores));
        if (bw > 0)
            fprintf(f, "%.3f", bw);
        for (int k = 0; k < 2; ++k) { /* interleaved, then warm */
            fputc(',', f);
            if (ms[k] > 0)
                fprintf(f, "%.3f", bytes / (ms[k] * 1e6));
            fputc(',', f);
            if (ms[k] > 0 && bw > 0)
                fprintf(f, "%.2f", pct_bandwidth(bytes, ms[k], r->cores));
        }
        fputc(',', f); /* any-order: convgrad's time over its own, the pairs' median */
        if (r->cost_ratio > 0)
            fprintf(f, "%.4f", r->cost_ratio);
        csv_end_row(f, 0);
    }
    return csv_close(f, path);
}

/* Plots with gnuplot: GFLOP/s by layer and implementation (at each core count), and
 * speedup against cores, from the figures the targets judge (the warm medians, the
 * interleaved ones where a layer had no warm burst). Returns 1 when the PNGs were
 * written. */
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
                const result *r =
                    find_result(layers_seen[k], series[s][0], series[s][1], cores_list[ci]);
                if (r)
                    fprintf(f, " %.3f", r->gflops * r->median_ms / judged_ms(r));
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
                const result *r =
                    find_result(layers_seen[k], series[s][0], series[s][1], cores_list[ci]);
                if (one && r)
                    fprintf(f, " %.4f", judged_ratio(one, r));
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
    fprintf(f,
            "set terminal %s size 1400,720\nset termoption noenhanced\nset datafile missing '-'\n"
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
        fprintf(f,
                "set title 'Filter gradient, GFLOP/s by layer and implementation, %d core%s "
                "(warm medians; FMA limit %.0f GFLOP/s)'\n",
                cores_list[ci], cores_list[ci] == 1 ? "" : "s", lim);
        fprintf(f,
                "plot for [c=2:%d] 'plot_gflops.dat' index %d using c:xtic(1) title "
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
                            fprintf(t, " %.3f", r->gflops * r->median_ms / train_judged_ms(r, -1));
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
                fprintf(f,
                        "set title 'Training step (forward + backward data + backward weights, "
                        "with bias), GFLOP/s by layer, %d core%s (warm medians; FMA limit "
                        "%.0f GFLOP/s)'\n",
                        tc[ci], tc[ci] == 1 ? "" : "s", lim);
                fprintf(f,
                        "plot for [c=2:3] 'plot_training.dat' index %d using c:xtic(1) title "
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
    fprintf(f, "set terminal %s size 1400,%d\nset termoption noenhanced\n", term, 420 * rows + 60);
    fprintf(f,
            "set output 'speedup.png'\nset multiplot layout %d,%d title 'Speedup against "
            "cores: each implementation over its own 1-core time (warm medians)'\n",
            rows, ns > 1 ? 2 : 1);
    for (int s = 0; s < ns; ++s) {
        fprintf(f, "set title '%s'\n", impl_label(series[s][0], series[s][1]));
        fprintf(f, "set xrange [0.8:%d.2]\nset yrange [0:*]\n", cores_list[nc - 1]);
        fprintf(f,
                "plot for [c=2:%d] 'plot_speedup.dat' index %d using 1:c title columnheader(c) "
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
    __attribute__((format(printf, 4, 5)));
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

/* One target's items (a layer at a core count, or a layer, or a phase of one):
 * how many reach the bar, and the lowest. */
typedef struct tally {
    double bar;
    int pct;           /* the values are percentages (else ratios, "x") */
    const char *items; /* what an item is, for the line: "(layer, cores)", "layers" */
    int n, met;
    double low;
    int low_layer, low_cores; /* low_cores 0: not named */
    const char *low_what;     /* a peer's or a phase's name, or NULL */
} tally;

static tally tally_of(double bar, int pct, const char *items)
{
    tally t = {.bar = bar, .pct = pct, .items = items, .low = INFINITY};
    return t;
}

static void tally_add(tally *t, double value, int layer, int cores, const char *what)
{
    t->n++;
    t->met += value >= t->bar;
    if (value < t->low) {
        t->low = value;
        t->low_layer = layer;
        t->low_cores = cores;
        t->low_what = what;
    }
}

/* 1 when every item reached the bar, 0 when one did not, -1 without items */
static int tally_ok(const tally *t)
{
    return t->n ? t->met == t->n : -1;
}

/* "N of M <items> met; lowest V (layer[, C cores][, what])" */
static const char *tally_text(const tally *t, char *buf, size_t len)
{
    char cores[24] = "", what[64] = "";
    if (t->low_cores > 0)
        snprintf(cores, sizeof cores, ", %d core%s", t->low_cores, t->low_cores == 1 ? "" : "s");
    if (t->low_what)
        snprintf(what, sizeof what, ", %s", t->low_what);
    if (!t->n)
        snprintf(buf, len, "none measured");
    else
        snprintf(buf, len, "%d of %d %s met; lowest %.*f%s (%s%s%s)", t->met, t->n, t->items,
                 t->pct ? 1 : 2, t->low, t->pct ? "%" : "x", bench_layers[t->low_layer].name, cores,
                 what);
    return buf;
}

/* A target that is one tally: "<what>: N of M ... met; lowest ...", or `none`
 * (n/a) when it has no items. */
static void tally_line(int *met, int *evaluated, const tally *t, const char *what, const char *none)
{
    char buf[256];
    if (t->n)
        target_line(met, evaluated, tally_ok(t), "%s: %s", what, tally_text(t, buf, sizeof buf));
    else
        target_line(met, evaluated, -1, "%s", none);
}

/* The share (%) of the FMA loop timed beside it that r reaches, on the
 * judged figures (judged_ms's). */
static double judged_pct_fma(const result *r)
{
    return r->warm_reps > 0 ? r->warm_pct_fma : r->pct_fma;
}

/* The same of a training step's phase (train_judged_ms's). */
static double train_judged_pct_fma(const train_result *r, int phase)
{
    return r->warm_reps > 0 ? r->warm_phase_pct_fma[phase] : r->phase_pct_fma[phase];
}

/* Result i when it is convgrad's fp32 filter gradient on a dense layer (dense 1)
 * or a depthwise or grouped one (dense 0); else NULL. */
static const result *convgrad_fp32(int i, int dense)
{
    const result *r = &g_results[i];
    return r->impl == IMPL_CONVGRAD && r->dtype == DT_FP32 && r->median_ms > 0 &&
                   is_dense(&bench_layers[r->layer]) == dense
               ? r
               : NULL;
}

/* A tally over convgrad's fp32 results on the dense layers (dense 1) or the
 * others: the (impl, dtype) result's time at the same cores over convgrad's
 * (inverse: convgrad's over that one's, a throughput ratio of the other). */
static tally tally_against(double bar, int dense, int impl, int dtype, int inverse)
{
    tally t = tally_of(bar, 0, "(layer, cores)");
    for (int i = 0; i < g_nresults; ++i) {
        const result *r = convgrad_fp32(i, dense);
        const result *o = r ? find_result(r->layer, impl, dtype, r->cores) : NULL;
        if (o)
            tally_add(&t, inverse ? judged_ratio(r, o) : judged_ratio(o, r),
                      r->layer, r->cores, NULL);
    }
    return t;
}

void report_targets(const overhead_result *ov, int nov)
{
    int met = 0, evaluated = 0;
    const int K = max_cores_measured();
    char t1[256], t2[256];
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
                    logsum += log(judged_ratio(d, a));
                    n++;
                }
            }
            if (n && len < sizeof line)
                len +=
                    (size_t)snprintf(line + len, sizeof line - len, "%s%d core%s %.2fx (%d layers)",
                                     len ? ", " : "", c, c == 1 ? "" : "s", exp(logsum / n), n);
        }
        if (len)
            say("\nGeometric mean of oneDNN's time over %s's (>1 = %s faster): %s\n",
                impl_label(IMPL_CONVGRAD, dt), impl_label(IMPL_CONVGRAD, dt), line);
    }
    say("\nTargets, judged on the warm medians (repeated calls; the interleaved medians where a "
        "layer had no warm burst), the interleaved ones in the tables beside; dense = group 1 "
        "(3x3, 1x1, the 7x7 stem, stride 2, dilated, batch 1):\n");

    /* 1: dense layers >= 85% of the FMA limit at 1 core, >= 80% at 2 and more */
    {
        tally one = tally_of(85.0, 1, "(layer, cores)"), more = tally_of(80.0, 1, "(layer, cores)");
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = convgrad_fp32(i, 1);
            if (!r || judged_pct_fma(r) <= 0)
                continue;
            tally_add(r->cores == 1 ? &one : &more, judged_pct_fma(r), r->layer, r->cores, NULL);
        }
        int ok = one.n + more.n ? tally_ok(&one) != 0 && tally_ok(&more) != 0 : -1;
        target_line(
            &met, &evaluated, ok,
            "dense layers' filter gradient (fp32) >= 85%% of the FMA limit (%s, the loop timed in "
            "the same rounds) at 1 core: "
            "%s; >= 80%% at 2 cores and more: %s",
            g_lim.fma_isa ? g_lim.fma_isa : "-", tally_text(&one, t1, sizeof t1),
            tally_text(&more, t2, sizeof t2));
    }
    /* 2: dense layers at least as fast as im2col+BLAS and oneDNN, every layer and core count */
    {
        tally t = tally_of(1.0, 0, "(layer, cores)");
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = convgrad_fp32(i, 1);
            if (!r)
                continue;
            const result *b = find_result(r->layer, IMPL_BASELINE, DT_FP32, r->cores);
            const result *d = find_result(r->layer, IMPL_ONEDNN, DT_FP32, r->cores);
            if (!b || !d)
                continue;
            const result *faster = judged_ratio(b, d) < 1 ? b : d;
            tally_add(&t, judged_ratio(faster, r), r->layer, r->cores,
                      impl_label(faster->impl, DT_FP32));
        }
        tally_line(&met, &evaluated, &t,
                   "dense layers: convgrad at least as fast as im2col+BLAS and oneDNN (the "
                   "faster one's time over convgrad's >= 1.0)",
                   "dense layers at least as fast as im2col+BLAS and oneDNN: not evaluated "
                   "(needs both peers' results on a dense layer)");
    }
    /* 3: the training step against oneDNN: geomean >= 1.25x at 2 cores (the most measured
     * without 2), no dense layer below 1.0x; forward and input-gradient phases >= 75% of
     * the FMA limit on the 3x3 dense layers */
    {
        int tc = 0, have2 = 0;
        for (int i = 0; i < g_ntrain; ++i) {
            have2 |= g_train[i].cores == 2;
            tc = g_train[i].cores > tc ? g_train[i].cores : tc;
        }
        if (have2)
            tc = 2;
        int n = 0;
        const double g = tc ? train_geomean(tc, 1, &n) : 0;
        tally dense_low = tally_of(1.0, 0, "dense layers"),
              phases = tally_of(75.0, 1, "(layer, cores, phase)");
        for (int i = 0; i < g_ntrain; ++i) {
            const train_result *cg = &g_train[i];
            const bench_layer *L = &bench_layers[cg->layer];
            if (cg->impl != TRAIN_CONVGRAD || cg->median_ms <= 0 || !is_dense(L))
                continue;
            double x = train_ratio(cg, find_train(cg->layer, TRAIN_ONEDNN, cg->cores), -1, 1);
            if (cg->cores == tc && x > 0)
                tally_add(&dense_low, x, cg->layer, 0, NULL);
            if (L->kh != 3 || L->kw != 3 || train_judged_pct_fma(cg, PH_FWD) <= 0)
                continue;
            tally_add(&phases, train_judged_pct_fma(cg, PH_FWD), cg->layer, cg->cores, "forward");
            tally_add(&phases, train_judged_pct_fma(cg, PH_BWD_DATA), cg->layer, cg->cores,
                      "input gradient");
        }
        if (n)
            target_line(&met, &evaluated,
                        g >= 1.25 && tally_ok(&dense_low) != 0 && tally_ok(&phases) != 0,
                        "training step vs oneDNN at %d core%s: geomean >= 1.25x: %.2fx over %d "
                        "layers; no dense layer below 1.0x: %s; forward and input-gradient phases "
                        ">= 75%% of the FMA limit on the 3x3 dense layers: %s",
                        tc, tc == 1 ? "" : "s", g, n, tally_text(&dense_low, t1, sizeof t1),
                        tally_text(&phases, t2, sizeof t2));
        else
            target_line(&met, &evaluated, -1,
                        "training step >= 1.25x oneDNN: not evaluated (no training-step results "
                        "of both; --train-reps, oneDNN)");
    }
    /* 4: hp_ >= 0.95x the fp32 throughput on every dense layer */
    {
        tally t = tally_against(0.95, 1, IMPL_CONVGRAD, DT_FP16, 1);
        tally_line(&met, &evaluated, &t,
                   "hp_ (fp16) >= 0.95x the fp32 throughput on every dense layer",
                   "hp_ >= 0.95x fp32 on the dense layers: not evaluated (--dtype both)");
    }
    /* 5: 1 -> 2 cores >= 1.85x on every dense layer; the others for information */
    {
        tally dense = tally_of(1.85, 0, "dense layers"), other = tally_of(1.85, 0, "layers");
        for (int li = 0; li < bench_nlayers; ++li) {
            const result *a = find_result(li, IMPL_CONVGRAD, DT_FP32, 1);
            const result *b = find_result(li, IMPL_CONVGRAD, DT_FP32, 2);
            if (a && b)
                tally_add(is_dense(&bench_layers[li]) ? &dense : &other,
                          judged_ratio(a, b), li, 0, NULL);
        }
        tally_line(&met, &evaluated, &dense,
                   "1 -> 2 cores speedup >= 1.85x on every dense layer (batch 1 included)",
                   "1 -> 2 cores speedup on the dense layers: not evaluated (needs 1- and 2-core "
                   "masks and a dense layer)");
        if (other.n)
            say("  [info   ] not counted: 1 -> 2 cores speedup on the depthwise and grouped layers "
                "(>= 1.85x): %s\n",
                tally_text(&other, t1, sizeof t1));
    }
    /* 6: depthwise and grouped >= 1.5x oneDNN */
    {
        tally t = tally_against(1.5, 0, IMPL_ONEDNN, DT_FP32, 0);
        tally_line(&met, &evaluated, &t, "depthwise and grouped layers >= 1.5x oneDNN",
                   "depthwise/grouped >= 1.5x oneDNN: not evaluated (no such layer, or no "
                   "oneDNN)");
    }
    /* 7: depthwise layers' filter gradient >= 60% of the measured memory bandwidth at 2
     * cores (the memory-bound ones: the roofline's bar applies where the bytes bound it) */
    {
        tally t = tally_of(60.0, 1, "memory-bound depthwise layers");
        for (int i = 0; i < g_nresults; ++i) {
            const result *r = convgrad_fp32(i, 0);
            if (!r || r->cores != 2 || !is_depthwise(&bench_layers[r->layer]))
                continue;
            bench_shape s = shape_of(&bench_layers[r->layer]);
            const double bytes = layer_min_bytes(&s, DT_FP32);
            if (memory_bound(layer_flops(&s), bytes, r->cores))
                tally_add(&t, pct_bandwidth(bytes, judged_ms(r), r->cores), r->layer, 0, NULL);
        }
        char what[256];
        snprintf(what, sizeof what,
                 "depthwise layers' filter gradient (fp32) at 2 cores >= 60%% of the measured "
                 "memory bandwidth (the STREAM triad's %.1f GB/s; bytes: x, dy read and dw "
                 "written once)",
                 bandwidth_for(2));
        tally_line(&met, &evaluated, &t, what,
                   "depthwise layers >= 60% of the memory bandwidth at 2 cores: not evaluated "
                   "(needs a 2-core mask, the bandwidth and a memory-bound depthwise layer)");
    }
    /* 8: launch + barrier cost under 5% of the smallest layer's time */
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
            double per_call_us = o2->call_us;
            double pct = per_call_us / (smallest * 1e3) * 100.0;
            target_line(&met, &evaluated, pct < 5.0,
                        "per-call overhead (the operator on one pixel, 2 cores: %.1f us) under "
                        "5%% of the smallest layer (%s, %.3f ms at 2 cores): %.2f%%",
                        per_call_us, bench_layers[sl].name, smallest, pct);
        } else {
            target_line(&met, &evaluated, -1,
                        "per-call overhead under 5%% of the smallest layer: not evaluated (needs a "
                        "2-core mask)");
        }
    }
    /* 9: the same bits on every mask cost <= 3% on the geometric mean at every core
     * count, <= 10% on every (layer, cores) */
    {
        char line[512] = "";
        size_t len = 0;
        int ok = 1, n_all = 0, n_met = 0, worst_li = -1, worst_c = 0;
        double worst = -INFINITY;
        for (int c = 1; c <= K; ++c) {
            int n;
            const double g = reproducible_cost_geomean(c, &n);
            if (!n)
                continue;
            ok &= g <= 3.0;
            if (len < sizeof line)
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%d core%s %+.1f%%",
                                        len ? ", " : "", c, c == 1 ? "" : "s", g);
            for (int li = 0; li < bench_nlayers; ++li) {
                const double pct = reproducible_cost_pct(li, c);
                if (isnan(pct))
                    continue;
                n_all++;
                n_met += pct <= 10.0;
                if (pct > worst) {
                    worst = pct;
                    worst_li = li;
                    worst_c = c;
                }
            }
        }
        if (n_all)
            target_line(&met, &evaluated, ok && n_met == n_all,
                        "the same bits on every core_mask cost <= 3%% on the geometric mean "
                        "(convgrad's time over cg any-order's): %s; <= 10%% on every (layer, "
                        "cores): %d of %d met, highest %+.1f%% (%s, %d core%s)",
                        line, n_met, n_all, worst, bench_layers[worst_li].name, worst_c,
                        worst_c == 1 ? "" : "s");
        else
            target_line(&met, &evaluated, -1,
                        "the cost of the same bits on every core_mask: not evaluated (no cg "
                        "any-order results)");
    }
    /* 10: memory reported */
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
