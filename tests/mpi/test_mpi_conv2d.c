/* SPDX-License-Identifier: MIT */
/* cg_mpi_conv2d_backward_weights(_start), run under mpirun on 2 and 3 ranks.
 * Every rank makes the same global batch, takes its shard of whole images,
 * and checks:
 *   - dw and db against one process's gradient over the whole batch: bit for
 *     bit on dyadic data (every sum exact), within fp32 rounding on random
 *     data (how many elements also match bit for bit is printed);
 *   - the same bits on every rank, and in a second run, blocking or started;
 *   - uneven shards, and a rank with no images;
 *   - a bad descriptor, a NULL pointer, a mismatch between the ranks, and a
 *     failure in one rank's own computation: every rank returns the error,
 *     its detail naming the rank; dw untouched where the contract says so. */
#include "mpi_check.h"

#include <math.h>
#include <stdlib.h>

static int P;

typedef struct shape {
    const char *name;
    cg_conv2d conv; /* batch: the global batch */
} shape;

static const shape shapes[] = {
    /*                 layout          N   H   W  ci co kh kw  g sh sw dh dw pt pb pl pr */
    {"nhwc_grouped", {CG_LAYOUT_NHWC, 7, 9, 11, 6, 8, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1}},
    {"nchw_dilated", {CG_LAYOUT_NCHW, 5, 12, 10, 4, 6, 3, 3, 1, 2, 1, 2, 1, 2, 2, 1, 1}},
    {"nhwc_depthwise", {CG_LAYOUT_NHWC, 4, 8, 8, 16, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1}},
    {"nhwc_slices", {CG_LAYOUT_NHWC, 8, 28, 28, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
};

static size_t x_image(const cg_conv2d *c)
{
    return (size_t)c->in_h * c->in_w * c->in_c;
}

static size_t y_image(const cg_conv2d *c)
{
    return (size_t)cg_conv2d_output_h(c) * cg_conv2d_output_w(c) * c->out_c;
}

static size_t dw_elems(const cg_conv2d *c)
{
    return (size_t)c->out_c * c->kernel_h * c->kernel_w * (c->in_c / c->groups);
}

/* Shard boundaries of `batch` images: split 0 even (as even as can be),
 * split 1 with rank 0 given none (the last rank takes the rest). */
static void shard_of(int batch, int split, int rank, int *first, int *count)
{
    if (split == 0) {
        *first = batch * rank / P;
        *count = batch * (rank + 1) / P - *first;
        return;
    }
    const int each = rank == 0 ? 0 : batch / P;
    *first = rank == 0 ? 0 : (rank - 1) * (batch / P);
    *count = rank == P - 1 ? batch - *first : each;
}

typedef struct data {
    float *x, *dy, *dw_ref, *db_ref, *absdw;
} data;

static void data_make(data *d, const cg_conv2d *g, int dyadic)
{
    const size_t nx = (size_t)g->batch * x_image(g), ny = (size_t)g->batch * y_image(g);
    d->x = malloc(nx * sizeof(float));
    d->dy = malloc(ny * sizeof(float));
    d->dw_ref = malloc(dw_elems(g) * sizeof(float));
    d->db_ref = malloc((size_t)g->out_c * sizeof(float));
    d->absdw = malloc(dw_elems(g) * sizeof(float));
    (dyadic ? mc_fill_dyadic : mc_fill)(11, d->x, nx);
    (dyadic ? mc_fill_dyadic : mc_fill)(12, d->dy, ny);
    CHECK_OK(cg_conv2d_backward_weights(g, d->x, d->dy, d->dw_ref, 0x1));
    CHECK_OK(cg_conv2d_backward_bias(g, d->dy, d->db_ref, 0x1));
    /* sum |x| |dy| per element: what bounds the rounding */
    float *ax = malloc(nx * sizeof(float)), *ady = malloc(ny * sizeof(float));
    for (size_t i = 0; i < nx; i++)
        ax[i] = fabsf(d->x[i]);
    for (size_t i = 0; i < ny; i++)
        ady[i] = fabsf(d->dy[i]);
    CHECK_OK(cg_conv2d_backward_weights(g, ax, ady, d->absdw, 0x1));
    free(ax);
    free(ady);
}

static void data_free(data *d)
{
    free(d->x);
    free(d->dy);
    free(d->dw_ref);
    free(d->db_ref);
    free(d->absdw);
}

/* Elements equal in bits to ref; the others checked against the bound of
 * rows * 2^-23 * scale[i] (scale NULL: must all be equal). */
static size_t compare(const char *what, const float *got, const float *ref, const float *scale,
                      size_t n, double rows)
{
    size_t same = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &ref[i], sizeof(float)) == 0) {
            same++;
            continue;
        }
        const double bound = scale ? rows * 0x1p-23 * (double)scale[i] + 1e-30 : 0;
        CHECK(fabs((double)got[i] - (double)ref[i]) <= bound, "%s[%zu] = %a, one process %a", what,
              i, got[i], ref[i]);
    }
    return same;
}

static void test_shape(cg_mpi_comm *c, const shape *s, int split, int dyadic, int started)
{
    const cg_conv2d *g = &s->conv;
    data d;
    data_make(&d, g, dyadic);
    int first, count;
    shard_of(g->batch, split, mc_rank, &first, &count);
    cg_conv2d mine = *g;
    mine.batch = count;
    const float *x = count ? d.x + (size_t)first * x_image(g) : NULL;
    const float *dy = count ? d.dy + (size_t)first * y_image(g) : NULL;
    const size_t n = dw_elems(g);
    float *dw = malloc(n * sizeof(float)), *db = malloc((size_t)g->out_c * sizeof(float));
    float *dw1 = malloc(n * sizeof(float)), *db1 = malloc((size_t)g->out_c * sizeof(float));
    for (int run = 0; run < 2; run++) {
        float *w = run ? dw1 : dw, *b = run ? db1 : db;
        if (started) {
            cg_mpi_request *req = NULL;
            CHECK_OK(cg_mpi_conv2d_backward_weights_start(c, &mine, x, dy, w, b, 0x3, &req));
            CHECK_OK(cg_mpi_wait(req));
        } else {
            CHECK_OK(cg_mpi_conv2d_backward_weights(c, &mine, x, dy, w, b, 0x3));
        }
    }
    char what[128];
    snprintf(what, sizeof what, "%s split %d %s%s: dw", s->name, split,
             dyadic ? "dyadic" : "random", started ? " started" : "");
    CHECK(memcmp(dw, dw1, n * sizeof(float)) == 0, "%s: a second run gave other bits", what);
    CHECK(memcmp(db, db1, (size_t)g->out_c * sizeof(float)) == 0, "%s: db's second run differs",
          what);
    CHECK(mc_same_on_every_rank(dw, n * sizeof(float), MPI_COMM_WORLD), "%s: ranks differ", what);
    CHECK(mc_same_on_every_rank(db, (size_t)g->out_c * sizeof(float), MPI_COMM_WORLD),
          "%s: ranks' db differ", what);
    const double rows = (double)g->batch * cg_conv2d_output_h(g) * cg_conv2d_output_w(g) + P;
    const size_t same = compare(what, dw, d.dw_ref, dyadic ? NULL : d.absdw, n, rows);
    /* db: sums of dy, bounded by the same rows of |dy| <= 1 */
    float *dbscale = malloc((size_t)g->out_c * sizeof(float));
    for (int i = 0; i < g->out_c; i++)
        dbscale[i] = 1.0f;
    const size_t same_b =
        compare(what, db, d.db_ref, dyadic ? NULL : dbscale, (size_t)g->out_c, rows * rows);
    if (mc_rank == 0 && !dyadic && !started)
        printf("%-15s split %d on %d ranks: dw %zu of %zu, db %d of %d elements the same bits as "
               "one process's\n",
               s->name, split, P, same, n, (int)same_b, g->out_c);
    free(dbscale);
    free(dw);
    free(db);
    free(dw1);
    free(db1);
    data_free(&d);
}

/* ---- errors ---------------------------------------------------------------- */

static int untouched(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != 42.0f)
            return 0;
    return 1;
}

/* Every rank calls with its own descriptor and pointers; every rank must
 * return `want` with a detail containing `detail`. */
static void expect_error(cg_mpi_comm *c, const char *what, const cg_conv2d *conv, const float *x,
                         const float *dy, int with_db, cg_status want, const char *detail,
                         int check_untouched)
{
    const cg_conv2d *g = &shapes[0].conv;
    float dw[512], db[64];
    for (size_t i = 0; i < dw_elems(g); i++)
        dw[i] = 42.0f;
    for (int i = 0; i < g->out_c; i++)
        db[i] = 42.0f;
    cg_status s = cg_mpi_conv2d_backward_weights(c, conv, x, dy, dw, with_db ? db : NULL, 0x1);
    CHECK(s == want, "%s: status %d, expected %d (%s)", what, (int)s, (int)want,
          cg_mpi_last_error_detail());
    CHECK(strstr(cg_mpi_last_error_detail(), detail) != NULL, "%s: detail '%s', expected '%s'",
          what, cg_mpi_last_error_detail(), detail);
    if (check_untouched)
        CHECK(untouched(dw, dw_elems(g)) && untouched(db, (size_t)g->out_c), "%s: dw or db written",
              what);
}

typedef struct inside_args {
    cg_mpi_comm *c;
    const cg_conv2d *conv;
    const float *x, *dy;
    float *dw;
    cg_status status;
    char detail[512];
} inside_args;

static void call_inside_launch(void *arg)
{
    inside_args *a = arg;
    a->status = cg_mpi_conv2d_backward_weights(a->c, a->conv, a->x, a->dy, a->dw, NULL, 0x1);
    snprintf(a->detail, sizeof a->detail, "%s", cg_mpi_last_error_detail());
}

static void test_errors(cg_mpi_comm *c)
{
    const cg_conv2d *g = &shapes[0].conv;
    float *x = malloc((size_t)g->batch * x_image(g) * sizeof(float));
    float *dy = malloc((size_t)g->batch * y_image(g) * sizeof(float));
    mc_fill(1, x, (size_t)g->batch * x_image(g));
    mc_fill(2, dy, (size_t)g->batch * y_image(g));
    cg_conv2d conv = *g;
    char want[64];

    conv.groups = mc_rank == 1 ? 4 : g->groups;
    expect_error(c, "bad group on rank 1", &conv, x, dy, 1, CG_ERR_BAD_GROUP, "rank 1: ", 1);
    CHECK(strstr(cg_mpi_last_error_detail(), "group") != NULL, "detail '%s'",
          cg_mpi_last_error_detail());
    conv = *g;

    conv.batch = mc_rank == 0 ? -1 : g->batch;
    expect_error(c, "negative batch on rank 0", &conv, x, dy, 1, CG_ERR_BAD_SIZE,
                 "rank 0: batch=-1", 1);
    conv = *g;

    snprintf(want, sizeof want, "rank %d: x is NULL", P - 1);
    expect_error(c, "x NULL on the last rank", &conv, mc_rank == P - 1 ? NULL : x, dy, 1,
                 CG_ERR_NULL_POINTER, want, 1);

    expect_error(c, "conv NULL on rank 0", mc_rank == 0 ? NULL : &conv, x, dy, 1,
                 CG_ERR_NULL_POINTER, "rank 0: conv is NULL", 1);

    conv.in_h = mc_rank == P - 1 ? g->in_h + 1 : g->in_h;
    expect_error(c, "in_h differs", &conv, x, dy, 1, CG_ERR_MPI_MISMATCH, "in_h", 1);
    conv = *g;

    expect_error(c, "db on some ranks only", &conv, x, dy, mc_rank != 0, CG_ERR_MPI_MISMATCH, "db",
                 1);

    /* different batches are fine: a rank with 0 images needs no x, dy */
    conv.batch = mc_rank == 0 ? 0 : 1;
    expect_error(c, "batch 0 on rank 0, no x", &conv, mc_rank == 0 ? NULL : x,
                 mc_rank == 0 ? NULL : dy, 1, CG_OK, "", 0);
    conv = *g;

    /* A failure in rank 1's own computation, after the agreement (called on
     * an emulated core: CG_ERR_INSIDE_LAUNCH): it travels with the sum. */
    float dw[512];
    inside_args a = {c, &conv, x, dy, dw, CG_OK, ""};
    if (mc_rank == 1)
        CHECK(core_mask_launch(0x1, call_inside_launch, &a) == 0, "launch failed");
    else
        call_inside_launch(&a);
    CHECK(a.status == CG_ERR_INSIDE_LAUNCH, "inside a launch on rank 1: status %d (%s)",
          (int)a.status, a.detail);
    CHECK(strstr(a.detail, "rank 1: ") != NULL, "inside a launch: detail '%s'", a.detail);

    /* and the communicator still works after each of them */
    float one = 1.0f;
    CHECK_OK(cg_mpi_sum(c, &one, 1));
    CHECK(one == (float)P, "sum of ones after the errors: %g", one);
    CHECK(strcmp(cg_mpi_last_error_detail(), "") == 0, "detail after success '%s'",
          cg_mpi_last_error_detail());
    free(x);
    free(dy);
}

int main(int argc, char **argv)
{
    mc_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    cg_mpi_comm *c = NULL;
    CHECK_OK(cg_mpi_comm_create(MPI_COMM_WORLD, &c));
    if (!c)
        return mc_finish("test_mpi_conv2d");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int split = 0; split < 2; split++)
            for (int dyadic = 0; dyadic < 2; dyadic++)
                for (int started = 0; started < 2; started++)
                    test_shape(c, &shapes[i], split, dyadic, started);
    test_errors(c);
    cg_mpi_comm_destroy(c);
    return mc_finish("test_mpi_conv2d");
}
