/* SPDX-License-Identifier: MIT */
/* train_cnn: trains a small convolutional network on 28x28 grayscale images,
 * with every convolution (forward, input gradient, weight gradient, bias
 * gradient) computed by convgrad's cg_conv2d_* on the emulated cores of a
 * core mask.
 *
 * The data (--dataset):
 * - generated (the default): images of six shapes (a horizontal bar, a
 *   vertical bar, the two diagonals, a square outline, a cross), each at a
 *   random position, size, thickness and tilt (+-10 degrees), on a random
 *   background level, with a random brightness, a few random specks and
 *   additive Gaussian noise. The training and the held-out sets are generated
 *   from different streams of one seed (--seed), so a run is deterministic.
 * - fashion-mnist: Fashion-MNIST's 60,000 training and 10,000 test images of
 *   10 classes, read from its gzip'd idx files (Debian's dataset-fashion-mnist
 *   in /usr/share/datasets/fashion-mnist, or --data-dir); --train and --test
 *   take the first N.
 * Both are standardised with the training images' mean and deviation.
 *
 * The network:
 *   conv 3x3, 1 -> 16, pad 1  + ReLU + 2x2 max pool   28x28 -> 14x14
 *   conv 3x3, 16 -> 32, pad 1 + ReLU + 2x2 max pool   14x14 -> 7x7
 *   linear 1568 -> 128 + ReLU
 *   linear 128 -> classes (6 or 10), softmax cross-entropy
 * He initialisation, mini-batch SGD with momentum 0.9 and weight decay 5e-4
 * (weights only), the learning rate warmed up linearly over the first 5% of
 * the steps (at least 50, or half of a shorter run), then on a cosine
 * schedule from --lr down to 0, the training set shuffled every epoch. The
 * linear layers run on OpenBLAS's cblas_sgemm (on this thread); ReLU,
 * pooling, the loss and the update are plain C; the convolutions are the
 * library's.
 * The tensors are NHWC with OHWI weights (the library's native layout), or
 * NCHW with OIHW weights under --layout nchw; both start from the same
 * weights, so the two runs follow the same curve up to rounding.
 * The data, the network, its training step and the update are in cnn/
 * (cnn.h), which other programs training the same network share; this file
 * holds the options, the progress, the outputs and the loop over epochs.
 * The loop runs on one process (train_cnn) or data-parallel over MPI ranks
 * (train_cnn_mpi, this file built with train_cnn_mpi.c; parallel.h): the
 * same options, data, network and outputs, each rank computing its slice of
 * every batch, the gradients summed over the ranks, rank 0 printing.
 *
 * The targets (held-out accuracy; the exit status is 1 when it is missed,
 * --help lists them all): the generated task's default run reaches >= 95%,
 * the Fashion-MNIST one >= 90% (docs/training.md has the figures and the CPU
 * they were measured on). Each data set has its own defaults (the table
 * `defaults` below; --help prints them).
 * --quick (a few hundred images, 2 epochs, batch 16) is a smoke test whose
 * target is that the loss falls: the last epoch's mean training loss must be
 * below the first mini-batch's.
 *
 * Outputs in --out DIR (default ./train_cnn-out): metadata.csv (the build, the
 * CPU, the command line, the data set), train_cnn.csv (one row per epoch:
 * losses, accuracies, seconds, seconds in cg_conv2d_* calls, the last learning
 * rate) and, when gnuplot is on PATH, train_cnn.png (loss and accuracy against
 * the epoch) with its script train_cnn.gp. The timings are the machine's: the
 * header names the CPU and the commit. */
#define _POSIX_C_SOURCE 200809L
#include <convgrad.h>

#include "cnn.h"
#include "parallel.h"
#include "tool_info.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef PROGRAM
#define PROGRAM "train_cnn"
#endif

/* The data sets, and each one's defaults: a full run, and --quick's. */
enum { DATA_GENERATED, DATA_FASHION_MNIST, DATA_SETS };
static const char *const dataset_options[DATA_SETS] = {"generated", "fashion-mnist"};

typedef struct run_defaults {
    int train, test, epochs, batch;
    double lr, target; /* target: held-out accuracy in %, none under --quick */
} run_defaults;

static const run_defaults defaults[DATA_SETS][2] = {
    [DATA_GENERATED] = {{8000, 2000, 3, 64, 0.01, 95.0}, {1000, 300, 2, 16, 0.005, 0}},
    [DATA_FASHION_MNIST] = {{60000, 10000, 10, 64, 0.02, 90.0}, {400, 200, 2, 16, 0.01, 0}}};
#define DEF_SEED 1u
#define DEF_OUT TOOL_DEFAULT_OUT(PROGRAM)

/* Exit statuses (tool_info.h): a missed target and an error at run time are
 * both failures; the message says which. */
enum {
    EXIT_TARGET_MISSED = TOOL_EXIT_FAILURE,
    EXIT_ERROR = TOOL_EXIT_FAILURE,
    EXIT_BAD_OPTION = TOOL_EXIT_USAGE
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xcalloc(cnn_parallel *par, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, PROGRAM ": out of memory (%zu x %zu bytes)\n", n, size);
        par_abort(par, EXIT_ERROR);
    }
    return p;
}

/* ---- options ------------------------------------------------------------------ */

typedef struct options {
    int core_mask;
    int cores_given, mask_given;
    int epochs, batch, train, test; /* -1: the default (or --quick's) */
    double lr, target;              /* lr -1: likewise */
    uint64_t seed;
    const char *out_dir;
    cg_layout layout;
    int quick;
    int no_plot;
    int dataset;          /* DATA_* */
    const char *data_dir; /* Fashion-MNIST's files */
} options;

/* The defaults of one data set, as the option lines of --help give them. */
static void usage_defaults(FILE *f, int set)
{
    const run_defaults *d = &defaults[set][0], *q = &defaults[set][1];
    fprintf(f,
            "  %-14s   %d training / %d held-out images, %d epochs, batch %d, lr %g,\n"
            "                   target %.0f%%; --quick: %d / %d images, %d epochs, batch %d,\n"
            "                   lr %g\n",
            dataset_options[set], d->train, d->test, d->epochs, d->batch, d->lr, d->target,
            q->train, q->test, q->epochs, q->batch, q->lr);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROGRAM " [options]\n"
            "\n"
            "Trains a small CNN (conv 3x3 1->16, ReLU, max pool, conv 3x3 16->32, ReLU, max\n"
            "pool, linear 1568->128, ReLU, linear 128->classes, softmax cross-entropy) on 28x28\n"
            "grayscale images: by default\n"
            "synthetic ones of six shapes (horizontal bar, vertical bar, the two diagonals,\n"
            "square outline, cross) at random positions, sizes, thicknesses and tilts, with\n"
            "noise; or Fashion-MNIST's 60,000 training and 10,000 test images of 10 classes\n"
            "(--dataset fashion-mnist). Every convolution (forward, input gradient, weight\n"
            "gradient, bias gradient) runs on convgrad's cg_conv2d_* on the cores of the mask;\n"
            "the linear layers on OpenBLAS's cblas_sgemm; the rest is plain C.\n"
            "\n"
            "Target: a held-out accuracy (the data set's default below; docs/training.md has\n"
            "the figures measured); under --quick, that the training loss falls.\n"
            "\n"
            "  --dataset D      generated (default) or fashion-mnist; each has its defaults:\n");
    for (int set = 0; set < DATA_SETS; ++set)
        usage_defaults(f, set);
    fprintf(f,
            "  --data-dir DIR   where Fashion-MNIST's four .gz idx files are (default %s,\n"
            "                   from Debian's dataset-fashion-mnist)\n"
            "  --cores N        run the convolutions on cores 0..N-1 (1-32; default: one\n"
            "                   per online CPU, shared among the MPI ranks on the machine)\n"
            "  --mask HEX       the core mask itself, e.g. 0x5 (instead of --cores)\n"
            "  --epochs N       passes over the training set\n"
            "  --batch N        mini-batch size\n"
            "  --lr X           peak learning rate: linear warm-up over the first 5%% of the\n"
            "                   steps (at least 50, or half of a shorter run), then cosine\n"
            "                   decay to 0; momentum %.1f, weight decay %g\n"
            "  --train N        training images (Fashion-MNIST: the first N of 60,000)\n"
            "  --test N         held-out images (Fashion-MNIST: the first N of 10,000)\n"
            "  --seed N         seed of the data, the initial weights and the shuffles\n"
            "                   (default %u)\n"
            "  --layout L       nhwc (default, the library's native layout) or nchw\n"
            "  --target P       held-out accuracy in %% to reach (0: none)\n"
            "  --out DIR        where train_cnn.csv, train_cnn.png and metadata.csv (the\n"
            "                   build and the CPU) go (default %s, under the current\n"
            "                   directory)\n"
            "  --no-plot        do not run gnuplot\n"
            "  --quick          smoke test with the data set's --quick defaults above\n"
            "                   (explicit options still apply); the target is that the last\n"
            "                   epoch's mean training loss is below the first mini-batch's\n"
            "  --version        print \"" PROGRAM " VERSION\" (the library's) and exit\n"
            "  --help           this text\n"
            "\n"
            "Exit status: 0 when the target is reached; 1 on a failure at run time (the\n"
            "target missed or the training diverged, the data could not be read, a convgrad\n"
            "call failed, an output could not be written, e.g. an --out that cannot be made,\n"
            "or memory ran out); 2 on bad usage (an unknown option or a bad value).\n",
            CNN_FASHION_MNIST_DIR, (double)CNN_MOMENTUM, (double)CNN_WEIGHT_DECAY,
            (unsigned)DEF_SEED, DEF_OUT);
}

static int bad_option(const char *fmt, const char *a, const char *v)
{
    fprintf(stderr, PROGRAM ": ");
    fprintf(stderr, fmt, a, v);
    fprintf(stderr, "\n(" PROGRAM " --help lists the options)\n");
    return -1;
}

/* A whole decimal integer in [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The default mask: the online CPUs shared among the processes on this
 * machine (at least a core each), so that ranks do not oversubscribe it. */
static int cpus_each(int processes)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN) / processes;
    if (cpus < 1)
        cpus = 1;
    if (cpus > 32)
        cpus = 32;
    return cpus == 32 ? (int)0xFFFFFFFFu : (int)((1u << cpus) - 1);
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = o->batch = o->train = o->test = -1;
    o->lr = o->target = -1;
    o->data_dir = CNN_FASHION_MNIST_DIR;
    o->seed = DEF_SEED;
    o->out_dir = DEF_OUT;
    o->layout = CG_LAYOUT_NHWC;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = NULL;
        char name[64];
        /* --name=value is accepted as well as --name value */
        const char *eq = strchr(a, '=');
        if (eq && a[0] == '-' && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            v = eq + 1;
            a = name;
        }
        int takes_value = !strcmp(a, "--cores") || !strcmp(a, "--mask") || !strcmp(a, "--epochs") ||
                          !strcmp(a, "--batch") || !strcmp(a, "--lr") || !strcmp(a, "--train") ||
                          !strcmp(a, "--test") || !strcmp(a, "--seed") || !strcmp(a, "--out") ||
                          !strcmp(a, "--layout") || !strcmp(a, "--target") ||
                          !strcmp(a, "--dataset") || !strcmp(a, "--data-dir");
        if (takes_value && !v) {
            if (i + 1 >= argc)
                return bad_option("%s needs a value%s", a, "");
            v = argv[++i];
        } else if (!takes_value && v) {
            return bad_option("%s takes no value (got '%s')", a, v);
        }
        long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--version")) {
            printf(PROGRAM " %s\n", cg_version());
            exit(TOOL_EXIT_OK);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--no-plot")) {
            o->no_plot = 1;
        } else if (!strcmp(a, "--cores")) {
            if (parse_long(v, 1, 32, &n))
                return bad_option("%s wants a core count from 1 to 32, not '%s'", a, v);
            o->core_mask = n == 32 ? (int)0xFFFFFFFFu : (int)((1u << n) - 1);
            o->cores_given = 1;
        } else if (!strcmp(a, "--mask")) {
            const char *h = v;
            if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
                h += 2;
            char *end;
            errno = 0;
            unsigned long long m = strtoull(h, &end, 16);
            if (!*h || *end || errno || h[0] == '-' || h[0] == '+' || m == 0 || m > 0xFFFFFFFFull)
                return bad_option("%s wants a non-zero hexadecimal mask of cores 0-31, e.g. "
                                  "0x3, not '%s'",
                                  a, v);
            o->core_mask = (int)(uint32_t)m;
            o->mask_given = 1;
        } else if (!strcmp(a, "--epochs")) {
            if (parse_long(v, 1, 1000, &n))
                return bad_option("%s wants a count from 1 to 1000, not '%s'", a, v);
            o->epochs = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (parse_long(v, 1, 4096, &n))
                return bad_option("%s wants a size from 1 to 4096, not '%s'", a, v);
            o->batch = (int)n;
        } else if (!strcmp(a, "--train")) {
            if (parse_long(v, 1, 1000000, &n))
                return bad_option("%s wants an image count from 1 to 1000000, not '%s'", a, v);
            o->train = (int)n;
        } else if (!strcmp(a, "--test")) {
            if (parse_long(v, 1, 1000000, &n))
                return bad_option("%s wants an image count from 1 to 1000000, not '%s'", a, v);
            o->test = (int)n;
        } else if (!strcmp(a, "--lr") || !strcmp(a, "--target")) {
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            int is_lr = !strcmp(a, "--lr");
            if (!*v || *end || errno || !isfinite(d) ||
                (is_lr ? d <= 0 || d > 10 : d < 0 || d > 100))
                return bad_option(is_lr ? "%s wants a positive rate up to 10, e.g. 0.01, not '%s'"
                                        : "%s wants a percentage from 0 to 100, not '%s'",
                                  a, v);
            if (is_lr)
                o->lr = d;
            else
                o->target = d;
        } else if (!strcmp(a, "--seed")) {
            /* decimal, or hexadecimal after 0x */
            int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
            const char *digits = hex ? v + 2 : v;
            char *end;
            errno = 0;
            unsigned long long s = strtoull(digits, &end, hex ? 16 : 10);
            if (!isxdigit((unsigned char)digits[0]) || *end || errno)
                return bad_option("%s wants a non-negative integer, not '%s'", a, v);
            o->seed = (uint64_t)s;
        } else if (!strcmp(a, "--out")) {
            if (!*v)
                return bad_option("%s wants a directory%s", a, "");
            o->out_dir = v;
        } else if (!strcmp(a, "--dataset")) {
            int k = 0;
            while (k < DATA_SETS && strcmp(v, dataset_options[k]))
                ++k;
            if (k == DATA_SETS)
                return bad_option("%s is generated or fashion-mnist, not '%s'", a, v);
            o->dataset = k;
        } else if (!strcmp(a, "--data-dir")) {
            if (!*v)
                return bad_option("%s wants a directory%s", a, "");
            o->data_dir = v;
        } else if (!strcmp(a, "--layout")) {
            if (!strcmp(v, "nhwc") || !strcmp(v, "NHWC"))
                o->layout = CG_LAYOUT_NHWC;
            else if (!strcmp(v, "nchw") || !strcmp(v, "NCHW"))
                o->layout = CG_LAYOUT_NCHW;
            else
                return bad_option("%s is nhwc or nchw, not '%s'", a, v);
        } else {
            return bad_option("unknown option '%s'%s", a, "");
        }
    }
    if (o->cores_given && o->mask_given)
        return bad_option("%s and %s exclude each other", "--cores", "--mask");
    const run_defaults *def = &defaults[o->dataset][o->quick];
    if (o->lr < 0)
        o->lr = def->lr;
    if (o->target < 0)
        o->target = def->target;
    if (o->epochs < 0)
        o->epochs = def->epochs;
    if (o->batch < 0)
        o->batch = def->batch;
    if (o->train < 0)
        o->train = def->train;
    if (o->test < 0)
        o->test = def->test;
    return 0;
}

/* ---- progress and outputs ------------------------------------------------------ */

/* Within an epoch: on a terminal one line redrawn with \r (at most ten times
 * a second), otherwise a plain line at each quarter of the epoch. */
typedef struct progress {
    int tty;
    double last;
    int next_quarter;
    int width; /* of the line on the terminal */
} progress;

static void progress_update(progress *p, int epoch, int epochs, int b, int nb, double loss)
{
    if (p->tty) {
        double t = now_s();
        if (b < nb && t - p->last < 0.1)
            return;
        p->last = t;
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int fill = (int)((long)WIDTH * b / nb);
        for (int k = 0; k < WIDTH; ++k)
            bar[k] = k < fill ? '#' : '.';
        bar[WIDTH] = 0;
        p->width =
            printf("\r  epoch %d/%d [%s] batch %d/%d  loss %.4f ", epoch, epochs, bar, b, nb, loss);
        fflush(stdout);
    } else if (nb >= 8 && p->next_quarter < 4 && b >= p->next_quarter * nb / 4) {
        printf("  epoch %d/%d: batch %d/%d, running loss %.4f\n", epoch, epochs, b, nb, loss);
        fflush(stdout);
        p->next_quarter++;
    }
}

static void progress_clear(const progress *p)
{
    if (p->tty) {
        printf("\r%*s\r", p->width, "");
        fflush(stdout);
    }
}

typedef struct epoch_row {
    double train_loss, train_acc, test_loss, test_acc, seconds, conv_seconds, lr;
} epoch_row;

static int write_csv(const char *path, const epoch_row *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "epoch,train_loss,train_acc_pct,test_loss,test_acc_pct,seconds,conv_seconds,lr_end\n");
    for (int e = 0; e < n; ++e)
        fprintf(f, "%d,%.6f,%.3f,%.6f,%.3f,%.3f,%.3f,%.6g\n", e + 1, rows[e].train_loss,
                rows[e].train_acc, rows[e].test_loss, rows[e].test_acc, rows[e].seconds,
                rows[e].conv_seconds, rows[e].lr);
    return fclose(f) == 0 ? 0 : -1;
}

/* dir quoted for sh: '...' with each ' written as '\''. */
static int shell_quote(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    if (cap < 3)
        return -1;
    out[k++] = '\'';
    for (; *s; ++s) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t len = piece ? 4 : 1;
        if (k + len + 2 > cap)
            return -1;
        if (piece) {
            memcpy(out + k, piece, len);
        } else {
            out[k] = *s;
        }
        k += len;
    }
    out[k++] = '\'';
    out[k] = 0;
    return 0;
}

/* train_cnn.png from train_cnn.csv with gnuplot: loss and accuracy against
 * the epoch. Returns 1 when the PNG was written, else 0 with the reason. */
static int write_plot(const char *dir, int no_plot, int epochs, double target, const char *title,
                      char *why, size_t whylen)
{
    if (no_plot) {
        snprintf(why, whylen, "--no-plot");
        return 0;
    }
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(why, whylen, "gnuplot not found (apt-get install gnuplot-nox)");
        return 0;
    }
    const char *term = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0
                           ? "pngcairo font ',10'"
                           : "png";
    char path[4200];
    snprintf(path, sizeof path, "%s/train_cnn.gp", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    fprintf(f, "# written by " PROGRAM "; run from this directory: gnuplot train_cnn.gp\n");
    fprintf(f, "set terminal %s size 1200,480\nset termoption noenhanced\n", term);
    fprintf(f, "set output 'train_cnn.png'\nset datafile separator ','\n");
    fprintf(f, "set multiplot layout 1,2 title '%s'\n", title);
    fprintf(f, "set xlabel 'epoch'\nset grid\nset key top right\n");
    if (epochs == 1)
        fprintf(f, "set xrange [0.5:1.5]\n");
    if (epochs <= 20)
        fprintf(f, "set xtics 1\n");
    fprintf(f, "set title 'loss (softmax cross-entropy)'\nset ylabel 'loss'\nset yrange [0:*]\n");
    fprintf(f, "plot 'train_cnn.csv' skip 1 using 1:2 with linespoints lw 2 title 'training', "
               "'' skip 1 using 1:4 with linespoints lw 2 title 'held-out'\n");
    fprintf(f, "set title 'accuracy'\nset ylabel 'accuracy (%%)'\nset yrange [*:100]\n"
               "set key bottom right\n");
    fprintf(f, "plot 'train_cnn.csv' skip 1 using 1:3 with linespoints lw 2 title 'training', "
               "'' skip 1 using 1:5 with linespoints lw 2 title 'held-out'");
    if (target > 0)
        fprintf(f, ", %.3f with lines dt 2 lc rgb 'black' title 'target %.0f%%'", target, target);
    fprintf(f, "\nunset multiplot\n");
    if (fclose(f) != 0) {
        snprintf(why, whylen, "cannot write %.200s", path);
        return 0;
    }
    char quoted[8400], cmd[8600];
    if (shell_quote(dir, quoted, sizeof quoted)) {
        snprintf(why, whylen, "the directory name is too long for the shell command");
        return 0;
    }
    snprintf(cmd, sizeof cmd, "cd %s && gnuplot train_cnn.gp > train_cnn_gnuplot.log 2>&1", quoted);
    if (system(cmd) != 0) {
        snprintf(why, whylen, "gnuplot failed (see %.200s/train_cnn_gnuplot.log)", dir);
        return 0;
    }
    return 1;
}

/* Adds the data set to metadata.csv (tool_open_out wrote the rest). */
static int add_metadata(const char *out, const options *o)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metadata.csv", out);
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    fprintf(f, "dataset,%s\n", dataset_options[o->dataset]);
    if (o->dataset == DATA_FASHION_MNIST) {
        fprintf(f, "data_dir,");
        tool_csv_field(f, o->data_dir);
        fprintf(f, "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o))
        return EXIT_BAD_OPTION;
    cnn_parallel *par = par_start(&argc, &argv);
    if (!par)
        return EXIT_ERROR;
    if (!o.cores_given && !o.mask_given)
        o.core_mask = cpus_each(par_local_ranks(par));
    const int rank = par_rank(par), ranks = par_ranks(par);
    const double t_start = now_s();
    /* every file goes to out (absolute): a bad --out fails here, before the
     * training; rank 0 writes them all */
    char out[4096] = "";
    /* From here a failure on one rank ends every rank (par_abort): the others
     * would wait for it in their next collective. */
    if (rank == 0 && tool_open_out(PROGRAM, o.out_dir, argc, argv, out, sizeof out) != 0)
        par_abort(par, EXIT_ERROR);
    if (rank == 0 && add_metadata(out, &o) != 0) {
        fprintf(stderr, PROGRAM ": cannot write %s/metadata.csv: %s\n", out, strerror(errno));
        par_abort(par, EXIT_ERROR);
    }

    double t0 = now_s();
    cnn_data data;
    if (o.dataset == DATA_FASHION_MNIST ? cnn_data_fashion_mnist(&data, o.data_dir, o.train, o.test)
                                        : cnn_data_generated(&data, o.train, o.test, o.seed))
        par_abort(par, EXIT_ERROR);
    double t_data = now_s() - t0;
    cnn_net *m = cnn_create(o.layout, data.classes, o.batch, o.core_mask);
    if (!m)
        par_abort(par, EXIT_ERROR);

    int ncores = GetCoreNum(o.core_mask);
    const char *layout_name = o.layout == CG_LAYOUT_NHWC ? "NHWC/OHWI" : "NCHW/OIHW";
    printf(PROGRAM ": %s\nCPU: %s\n", tool_build_text(), tool_cpu_text());
    printf(PROGRAM ": %s, %d classes (", data.name, data.classes);
    for (int k = 0; k < data.classes; ++k)
        printf("%s%s", k ? ", " : "", data.class_names[k]);
    printf("), 28x28 images\n");
    printf("  %d training / %d held-out images, seed %llu; %s, %d core%s (mask 0x%x); %s\n",
           o.train, o.test, (unsigned long long)o.seed, layout_name, ncores, ncores == 1 ? "" : "s",
           (unsigned)o.core_mask, par_describe(par));
    printf("  %d epoch%s, batch %d, lr %g (warm-up, cosine to 0), momentum %.1f, weight decay "
           "%g%s\n",
           o.epochs, o.epochs == 1 ? "" : "s", o.batch, o.lr, (double)CNN_MOMENTUM,
           (double)CNN_WEIGHT_DECAY, o.quick ? "; --quick" : "");
    if (o.quick)
        printf("  target: the last epoch's mean training loss below the first batch's\n");
    else if (o.target > 0)
        printf("  target: held-out accuracy >= %.2f%%\n", o.target);
    printf("  data %s in %.2f s\n", o.dataset == DATA_FASHION_MNIST ? "read" : "generated", t_data);
    fflush(stdout);

    cnn_init_params(m, o.seed);
    cnn_shuffle shuffle;
    if (cnn_shuffle_init(&shuffle, o.train, o.seed))
        par_abort(par, EXIT_ERROR);
    float *images = xcalloc(par, (size_t)o.batch * CNN_IMG * CNN_IMG, sizeof(float));
    unsigned char *labels = xcalloc(par, (size_t)o.batch, 1);
    epoch_row *rows = xcalloc(par, (size_t)o.epochs, sizeof(epoch_row));

    const int nb = (o.train + o.batch - 1) / o.batch;
    const long total_steps = (long)nb * o.epochs;
    long step = 0;
    double first_batch_loss = -1;
    progress prog = {.tty = isatty(STDOUT_FILENO)};
    const double t_train = now_s();
    for (int e = 0; e < o.epochs; ++e) {
        const double te = now_s(), conv_before = cnn_conv_seconds(m);
        const int *order = cnn_shuffle_next(&shuffle);
        double loss_sum = 0;
        int correct = 0, seen = 0;
        float lr = 0;
        prog.last = 0;
        prog.next_quarter = 1;
        for (int b = 0; b < nb; ++b) {
            int start = b * o.batch;
            int bs = o.train - start < o.batch ? o.train - start : o.batch;
            /* this rank's slice of the batch; the loss is that of the whole batch */
            const int lo = bs * rank / ranks, mine = bs * (rank + 1) / ranks - lo;
            cnn_gather(&data.train, order + start + lo, mine, images, labels);
            double loss = 0;
            int batch_correct = 0;
            if (cnn_train_step(m, images, labels, mine, bs, par_hooks(par), &loss,
                               &batch_correct) != CG_OK ||
                par_finish_step(par, &loss, &batch_correct) != CG_OK)
                par_abort(par, EXIT_ERROR);
            correct += batch_correct;
            if (!isfinite(loss)) {
                progress_clear(&prog);
                fprintf(stderr,
                        PROGRAM ": the loss is not finite at epoch %d, batch %d: the training "
                                "diverged (try a lower --lr)\n",
                        e + 1, b + 1);
                par_end(par); /* the loss is summed: every rank stops here */
                return EXIT_TARGET_MISSED;
            }
            if (first_batch_loss < 0)
                first_batch_loss = loss / bs;
            loss_sum += loss;
            seen += bs;
            lr = cnn_learning_rate(o.lr, step, total_steps);
            cnn_sgd_step(m, lr);
            step++;
            progress_update(&prog, e + 1, o.epochs, b + 1, nb, loss_sum / seen);
        }
        progress_clear(&prog);
        if (!par_same_weights(par, cnn_checksum(m))) {
            fprintf(stderr,
                    PROGRAM ": rank %d: the weights differ between the ranks after epoch %d\n",
                    rank, e + 1);
            par_end(par); /* every rank got the same minimum and maximum */
            return EXIT_ERROR;
        }
        epoch_row *row = &rows[e];
        row->train_loss = loss_sum / seen;
        row->train_acc = 100.0 * correct / seen;
        row->lr = lr;
        if (cnn_evaluate(m, &data.test, &row->test_loss, &row->test_acc) != CG_OK)
            par_abort(par, EXIT_ERROR);
        row->seconds = now_s() - te;
        row->conv_seconds = cnn_conv_seconds(m) - conv_before;
        printf("epoch %*d/%d  train loss %.4f  acc %6.2f%%  |  held-out loss %.4f  acc %6.2f%%  "
               "|  %.2f s\n",
               o.epochs >= 10 ? 2 : 1, e + 1, o.epochs, row->train_loss, row->train_acc,
               row->test_loss, row->test_acc, row->seconds);
        fflush(stdout);
    }
    const double train_s = now_s() - t_train;
    char path[4200];
    snprintf(path, sizeof path, "%s/train_cnn.csv", out);
    if (rank == 0 && write_csv(path, rows, o.epochs) != 0) {
        fprintf(stderr, PROGRAM ": cannot write %s: %s\n", path, strerror(errno));
        par_abort(par, EXIT_ERROR);
    }
    char why[512], title[256];
    snprintf(title, sizeof title, PROGRAM ": %s, %d training images, seed %llu, %s, %d core%s%s",
             data.name, o.train, (unsigned long long)o.seed, layout_name, ncores,
             ncores == 1 ? "" : "s", ranks > 1 ? " a rank" : "");
    const int plotted = rank == 0 && write_plot(out, o.no_plot, o.epochs, o.quick ? 0 : o.target,
                                                title, why, sizeof why);

    const epoch_row *last = &rows[o.epochs - 1];
    const double total_s = now_s() - t_start;
    printf("held-out accuracy %.2f%% (%d images), loss %.4f\n", last->test_acc, o.test,
           last->test_loss);
    printf("total time %.2f s: data %.2f s, training and evaluation %.2f s, of which %.2f s in "
           "cg_conv2d_* on %d core%s\n",
           total_s, t_data, train_s, cnn_conv_seconds(m), ncores, ncores == 1 ? "" : "s");
    int status = 0;
    if (o.quick) {
        int fell = last->train_loss < first_batch_loss;
        printf("%s: the last epoch's mean training loss %.4f is %s the first batch's %.4f\n",
               fell ? "PASS" : "FAIL", last->train_loss, fell ? "below" : "NOT below",
               first_batch_loss);
        status = fell ? 0 : EXIT_TARGET_MISSED;
    } else if (o.target > 0) {
        int met = last->test_acc >= o.target;
        printf("%s: held-out accuracy %.2f%% %s the target of %.2f%%\n", met ? "PASS" : "FAIL",
               last->test_acc, met ? "reaches" : "is BELOW", o.target);
        status = met ? 0 : EXIT_TARGET_MISSED;
    }

    if (!plotted)
        printf("plot skipped: %s (the curve is in the CSV)\n", why);
    printf("wrote %s: train_cnn.csv (the curve), %smetadata.csv (the build and the CPU)\n", out,
           plotted ? "train_cnn.png (its plot), " : "");

    free(rows);
    free(labels);
    free(images);
    cnn_shuffle_free(&shuffle);
    cnn_data_free(&data);
    cnn_destroy(m);
    par_end(par);
    return status;
}
