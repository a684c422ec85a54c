/* SPDX-License-Identifier: MIT */
/* convgrad-bench-mpi: what the data-parallel weight gradient costs over MPI
 * (docs/mpi.md).
 *
 * Under mpirun, per layer of convgrad-bench's set (bench_common.h), every
 * rank holding the layer's batch (weak scaling) and running on its own
 * emulated cores: the local weight + bias gradient, the sum alone
 * (cg_mpi_sum of dw and db), a serial step (blocking gradient, then a second
 * local gradient standing in for the next layer's backward) and the
 * overlapped step (cg_mpi_conv2d_backward_weights_start, the same second
 * gradient, cg_mpi_wait). Each figure is the slowest rank's, in interleaved
 * rounds; the table gives medians and OUT/mpi_npP.csv every figure.
 *
 * --model (no mpirun) reads OUT/mpi_np*.csv, fits the latency-bandwidth model
 * of the sum (alpha, beta) to the measured sums, and extrapolates the sum to
 * 8-64 nodes on the networks given (--net), ring and tree allreduce. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "convgrad_mpi.h"
#include "tool_info.h"

#define DEFAULT_OUT TOOL_DEFAULT_OUT("convgrad-bench-mpi")
enum { MAX_LAYERS = 64, MAX_NETS = 8, MAX_ROWS = 1024 };

typedef struct network {
    char name[32];
    double alpha_s, beta_s_per_byte; /* latency; seconds per byte */
} network;

typedef struct options {
    int layers[MAX_LAYERS], nlayers;
    int reps, cores, model;
    const char *out;
    network nets[MAX_NETS];
    int nnets;
} options;

static int rank, nranks;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P convgrad-bench-mpi [--layers a,b] [--reps N] [--cores K] "
            "[--quick] [--out DIR]\n"
            "       convgrad-bench-mpi --model [--out DIR] [--net NAME:ALPHA_US:GBIT_S]...\n"
            "  --layers  built-in layers to run (default: all)\n"
            "  --reps    timed rounds a layer (default 10; --quick 3)\n"
            "  --cores   emulated cores a rank (default 1: mask 0x1)\n"
            "  --out     where mpi_npP.csv is written and --model reads (default %s)\n"
            "  --model   fit alpha, beta to the measured sums and extrapolate to 8-64 nodes\n"
            "  --net     a network for --model (replaces the defaults: 25GbE:25:25, "
            "IB-EDR:1.5:100)\n",
            DEFAULT_OUT);
}

static int layer_index(const char *name)
{
    for (int i = 0; i < bench_nlayers; i++)
        if (strcmp(bench_layers[i].name, name) == 0)
            return i;
    return -1;
}

static int add_net(options *o, const char *spec)
{
    network *n = &o->nets[o->nnets];
    double alpha_us, gbit;
    if (o->nnets == MAX_NETS || sscanf(spec, "%31[^:]:%lf:%lf", n->name, &alpha_us, &gbit) != 3 ||
        alpha_us < 0 || gbit <= 0)
        return -1;
    n->alpha_s = alpha_us * 1e-6;
    n->beta_s_per_byte = 8.0 / (gbit * 1e9);
    o->nnets++;
    return 0;
}

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 10;
    o->cores = 1;
    o->out = DEFAULT_OUT;
    int quick = 0, reps_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0)
            quick = 1;
        else if (strcmp(a, "--model") == 0)
            o->model = 1;
        else if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(TOOL_EXIT_OK);
        } else if (v && strcmp(a, "--reps") == 0 && (o->reps = atoi(v)) > 0 && ++i)
            reps_given = 1;
        else if (v && strcmp(a, "--cores") == 0 && (o->cores = atoi(v)) >= 1 && o->cores <= 32)
            i++;
        else if (v && strcmp(a, "--out") == 0)
            o->out = argv[++i];
        else if (v && strcmp(a, "--net") == 0 && add_net(o, v) == 0)
            i++;
        else if (v && strcmp(a, "--layers") == 0) {
            char *list = strdup(argv[++i]);
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                const int l = layer_index(t);
                if (l < 0 || o->nlayers == MAX_LAYERS) {
                    fprintf(stderr, "convgrad-bench-mpi: unknown layer '%s'\n", t);
                    free(list);
                    return -1;
                }
                o->layers[o->nlayers++] = l;
            }
            free(list);
        } else {
            fprintf(stderr, "convgrad-bench-mpi: bad option '%s'\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (quick && !reps_given)
        o->reps = 3;
    if (!o->nlayers)
        for (int l = 0; l < bench_nlayers && l < MAX_LAYERS; l++)
            o->layers[o->nlayers++] = l;
    if (!o->nnets) {
        add_net(o, "25GbE:25:25");
        add_net(o, "IB-EDR:1.5:100");
    }
    return 0;
}

/* ---- the measurement, under mpirun ------------------------------------------ */

/* The slowest rank's seconds since t0 (every rank calls). */
/* The slowest rank's time since t0; *failed becomes 1 on every rank when it
 * is on any, so that all leave the rounds together. */
static double slowest_since(double t0, int *failed)
{
    double mine[2] = {MPI_Wtime() - t0, *failed}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *failed = all[1] != 0;
    return all[0];
}

/* 1 on every rank when failed is on any. */
static int any_rank(int failed)
{
    int any = failed;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

enum { T_GRAD, T_SUM, T_SERIAL, T_OVERLAP, NT };
static const char *const t_names[NT] = {"grad", "sum", "serial_step", "overlap_step"};

typedef struct layer_buffers {
    cg_conv2d conv;
    float *x, *dy, *dw, *db, *dw2, *db2, *sum;
    size_t dw_n, sum_n;
} layer_buffers;

static int local_gradient(const layer_buffers *b, float *dw, float *db, int mask)
{
    return cg_conv2d_backward_weights_bias(&b->conv, b->x, b->dy, dw, db, mask) != CG_OK;
}

/* One of the four timed operations; 0 on success. */
static int run_op(int op, layer_buffers *b, cg_mpi_comm *c, int mask)
{
    cg_mpi_request *req;
    switch (op) {
    case T_GRAD:
        return local_gradient(b, b->dw, b->db, mask);
    case T_SUM:
        return cg_mpi_sum(c, b->sum, b->sum_n) != CG_OK;
    case T_SERIAL:
        return cg_mpi_conv2d_backward_weights(c, &b->conv, b->x, b->dy, b->dw, b->db, mask) !=
                   CG_OK ||
               local_gradient(b, b->dw2, b->db2, mask);
    default:
        if (cg_mpi_conv2d_backward_weights_start(c, &b->conv, b->x, b->dy, b->dw, b->db, mask,
                                                 &req) != CG_OK)
            return 1;
        return local_gradient(b, b->dw2, b->db2, mask) | (cg_mpi_wait(req) != CG_OK);
    }
}

static float *filled(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) * 0x1p-24f - 0.5f;
    }
    return v;
}

static int measure(const options *o, FILE *csv)
{
    cg_mpi_comm *c;
    if (cg_mpi_comm_create(MPI_COMM_WORLD, &c) != CG_OK) {
        fprintf(stderr, "cg_mpi_comm_create: %s\n", cg_mpi_last_error_detail());
        return 1;
    }
    const int mask = (int)(o->cores == 32 ? 0xFFFFFFFFu : (1u << o->cores) - 1u);
    const int cpus = tool_online_cpus();
    if (rank == 0) {
        printf("convgrad-bench-mpi: %s\nCPU: %s\n", tool_build_text(), tool_cpu_text());
        printf("%d rank(s) x %d emulated core(s) on %d CPU(s)%s; sums %s; %d rounds, medians of "
               "the slowest rank\n",
               nranks, o->cores, cpus,
               nranks * o->cores > cpus ? ": OVERSUBSCRIBED, ranks share CPUs" : "",
               cg_mpi_comm_overlaps(c) ? "on the comm's thread" : "in the wait (no thread)",
               o->reps);
        printf("%-14s %2s %10s %9s %9s %9s %10s %11s %9s %7s\n", "layer", "P", "bytes", "grad ms",
               "sum ms", "sum GB/s", "serial ms", "overlap ms", "saved ms", "hidden");
    }
    int failed = 0;
    for (int li = 0; li < o->nlayers && !failed; li++) {
        const bench_layer *L = &bench_layers[o->layers[li]];
        const bench_shape s = shape_of(L);
        layer_buffers b;
        b.conv = bench_conv2d_of(&s);
        b.dw_n = (size_t)s.cout * s.kh * s.kw * (size_t)(s.cin / s.group);
        b.sum_n = b.dw_n + (size_t)s.cout;
        b.x = filled((size_t)s.n * s.h * s.w * s.cin, 1u + (unsigned)rank);
        b.dy = filled((size_t)s.n * s.oh * s.ow * s.cout, 7u + (unsigned)rank);
        b.dw = malloc(b.dw_n * sizeof(float));
        b.dw2 = malloc(b.dw_n * sizeof(float));
        b.db = malloc((size_t)s.cout * sizeof(float));
        b.db2 = malloc((size_t)s.cout * sizeof(float));
        b.sum = filled(b.sum_n, 3u);
        if ((failed = any_rank(!b.x || !b.dy || !b.dw || !b.dw2 || !b.db || !b.db2 || !b.sum)) &&
            rank == 0)
            fprintf(stderr, "convgrad-bench-mpi: %s: out of memory\n", L->name);
        double t[NT][256];
        const int reps = o->reps < 256 ? o->reps : 256;
        for (int op = 0; op < NT && !failed; op++) /* warm: scratch, requests, caches */
            failed |= run_op(op, &b, c, mask);
        failed = any_rank(failed);
        for (int r = 0; r < reps && !failed; r++)
            for (int op = 0; op < NT; op++) { /* interleaved */
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = MPI_Wtime();
                failed |= run_op(op, &b, c, mask);
                t[op][r] = slowest_since(t0, &failed);
            }
        if (rank == 0 && !failed) {
            double med[NT], best[NT];
            for (int op = 0; op < NT; op++) {
                med[op] = bench_median(t[op], reps);
                best[op] = t[op][0];
            }
            const double bytes = 4.0 * (double)b.sum_n;
            const double saved = med[T_SERIAL] - med[T_OVERLAP];
            char hidden[16] = "-"; /* a sum under 5% of the step: lost in the noise */
            if (nranks > 1 && med[T_SUM] > 0.05 * med[T_SERIAL])
                snprintf(hidden, sizeof hidden, "%.0f%%", 100.0 * saved / med[T_SUM]);
            printf("%-14s %2d %10.0f %9.3f %9.3f %9.2f %10.3f %11.3f %9.3f %7s\n", L->name, nranks,
                   bytes, 1e3 * med[T_GRAD], 1e3 * med[T_SUM], bytes / med[T_SUM] / 1e9,
                   1e3 * med[T_SERIAL], 1e3 * med[T_OVERLAP], 1e3 * saved, hidden);
            for (int op = 0; op < NT; op++)
                fprintf(csv, "%s,%d,%d,%.0f,%s,%.9f,%.9f,%d,%d\n", L->name, nranks, o->cores, bytes,
                        t_names[op], med[op], best[op], reps, nranks * o->cores > cpus);
        }
        free(b.x);
        free(b.dy);
        free(b.dw);
        free(b.dw2);
        free(b.db);
        free(b.db2);
        free(b.sum);
    }
    if (failed && rank == 0)
        fprintf(stderr, "convgrad-bench-mpi: a call failed: %s\n", cg_mpi_last_error_detail());
    if (rank == 0 && nranks > 1)
        printf("saved: serial - overlap; hidden: saved / sum, the share of the sum's time the "
               "overlap hides (-: the sum is under 5%% of the step)\n");
    cg_mpi_comm_destroy(c);
    return failed;
}

/* ---- the model ------------------------------------------------------------------ */

typedef struct row {
    char layer[64];
    int P;
    double bytes, sum_s, grad_s;
} row;

/* The rows of every OUT/mpi_np*.csv: each (layer, P)'s sum and gradient medians. */
static int read_rows(const char *dir, row *rows, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "mpi_np", 6) != 0 || !strstr(e->d_name, ".csv"))
            continue;
        char path[4096], line[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            row r = {0};
            char what[32];
            int P, cores;
            double bytes, med;
            if (sscanf(line, "%63[^,],%d,%d,%lf,%31[^,],%lf", r.layer, &P, &cores, &bytes, what,
                       &med) != 6)
                continue;
            int k = 0;
            while (k < n && !(rows[k].P == P && strcmp(rows[k].layer, r.layer) == 0))
                k++;
            if (k == n) {
                if (n == max)
                    continue;
                rows[n] = r;
                rows[n].P = P;
                rows[n++].bytes = bytes;
            }
            if (strcmp(what, "sum") == 0)
                rows[k].sum_s = med;
            else if (strcmp(what, "grad") == 0)
                rows[k].grad_s = med;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* The component's sum (a reduce-scatter and an allgather, each P - 1 steps of
 * n/P bytes) costs what a ring allreduce does: */
static double ring_s(int P, double n, double alpha, double beta)
{
    return 2.0 * (P - 1) * alpha + 2.0 * (P - 1) / P * n * beta;
}

/* a binomial-tree reduce and broadcast, latency-optimal for small n: */
static double tree_s(int P, double n, double alpha, double beta)
{
    return 2.0 * ceil(log2((double)P)) * (alpha + n * beta);
}

/* Least squares of sum_s = alpha 2(P-1) + beta 2(P-1)/P bytes over the rows
 * measured on P ranks; the number of rows used (0: too few to fit). */
static int fit(const row *rows, int n, int P, double *alpha, double *beta)
{
    double saa = 0, sab = 0, sbb = 0, sat = 0, sbt = 0;
    int used = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].P != P || rows[i].sum_s <= 0)
            continue;
        const double a = 2.0 * (P - 1), b = a / P * rows[i].bytes;
        saa += a * a;
        sab += a * b;
        sbb += b * b;
        sat += a * rows[i].sum_s;
        sbt += b * rows[i].sum_s;
        used++;
    }
    const double det = saa * sbb - sab * sab;
    if (used < 2 || det <= 1e-12 * saa * sbb)
        return 0;
    *alpha = (sat * sbb - sbt * sab) / det;
    *beta = (saa * sbt - sab * sat) / det;
    return used;
}

static int model(const options *o)
{
    static row rows[MAX_ROWS];
    const int n = read_rows(o->out, rows, MAX_ROWS);
    if (n <= 0) {
        fprintf(stderr, "convgrad-bench-mpi --model: no mpi_np*.csv rows in %s\n", o->out);
        return 1;
    }
    /* alpha and beta at each rank count alone: 4 ranks on 2 CPUs share them */
    double alpha = 0, beta = 0;
    int fitted = 0;
    for (int P = 2; P <= 64; P++) {
        double a, b;
        const int used = fit(rows, n, P, &a, &b);
        if (!used)
            continue;
        printf("loopback fit on %d ranks over %d sums: alpha %.2f us, beta %.3f ns/byte "
               "(%.2f GB/s)\n",
               P, used, a * 1e6, b * 1e9, 1.0 / b / 1e9);
        printf("%-14s %2s %10s %10s %10s %6s\n", "layer", "P", "bytes", "sum ms", "model ms",
               "err");
        for (int i = 0; i < n; i++)
            if (rows[i].P == P && rows[i].sum_s > 0) {
                const double m = ring_s(P, rows[i].bytes, a, b);
                printf("%-14s %2d %10.0f %10.3f %10.3f %5.0f%%\n", rows[i].layer, P, rows[i].bytes,
                       1e3 * rows[i].sum_s, 1e3 * m, 100.0 * (m - rows[i].sum_s) / rows[i].sum_s);
            }
        if (!fitted++) {
            alpha = a;
            beta = b;
        }
    }
    if (!fitted) {
        fprintf(stderr, "convgrad-bench-mpi --model: needs sums of 2+ sizes measured on 2+ "
                        "ranks\n");
        return 1;
    }
    printf("(the fewest ranks' fit, alpha %.2f us and %.2f GB/s, is loopback's: shared "
           "memory, not a network)\n",
           alpha * 1e6, 1.0 / beta / 1e9);
    static const int nodes[] = {8, 16, 32, 64};
    for (int k = 0; k < o->nnets; k++) {
        const network *net = &o->nets[k];
        printf("\n%s (alpha %.1f us, %.1f Gb/s): the sum's ms at 8/16/32/64 nodes, ring | tree; "
               "grad: one rank's local gradient (1 rank)\n",
               net->name, net->alpha_s * 1e6, 8.0 / net->beta_s_per_byte / 1e9);
        for (int i = 0; i < n; i++) {
            if (rows[i].P != 1)
                continue;
            printf("%-14s %10.0f B grad %8.3f ms  ring", rows[i].layer, rows[i].bytes,
                   1e3 * rows[i].grad_s);
            for (int j = 0; j < 4; j++)
                printf(" %7.3f",
                       1e3 * ring_s(nodes[j], rows[i].bytes, net->alpha_s, net->beta_s_per_byte));
            printf("  tree");
            for (int j = 0; j < 4; j++)
                printf(" %7.3f",
                       1e3 * tree_s(nodes[j], rows[i].bytes, net->alpha_s, net->beta_s_per_byte));
            printf("\n");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o) != 0)
        return TOOL_EXIT_USAGE;
    if (o.model)
        return model(&o) ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    char abs[4096], path[4200];
    int ok = 1;
    FILE *csv = NULL;
    if (rank == 0) {
        ok = tool_open_out("convgrad-bench-mpi", o.out, argc, argv, abs, sizeof abs) == 0;
        snprintf(path, sizeof path, "%s/mpi_np%d.csv", abs, nranks);
        if (ok && !(csv = fopen(path, "w")))
            ok = 0;
        if (csv)
            fprintf(csv, "layer,ranks,cores,bytes,what,median_s,best_s,reps,oversubscribed\n");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int failed = !ok || measure(&o, csv);
    if (csv && fclose(csv) == 0 && !failed)
        printf("wrote %s\n", path);
    MPI_Finalize();
    return failed ? TOOL_EXIT_FAILURE : TOOL_EXIT_OK;
}
