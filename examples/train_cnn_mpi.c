/* SPDX-License-Identifier: MIT */
/* parallel.h over MPI (train_cnn_mpi: train_cnn.c's loop, data-parallel):
 *
 *   mpirun -np 2 train_cnn_mpi [train_cnn's options]
 *
 * Each rank holds the same data and initial weights (from the seed) and
 * takes its slice of every global batch. As the backward pass completes a
 * layer, its gradients' sum over the ranks starts: the linear layers' with
 * cg_mpi_sum_start, each conv layer's with
 * cg_mpi_conv2d_backward_weights_start in place of the local weight and bias
 * gradients, so that it runs while the layer below is computed. The step
 * waits for all of them before the update. The sums are convgrad_mpi's
 * reproducible ones: every rank gets the same bits, so every rank's update
 * gives the same weights, which each epoch's checksum verifies. */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <convgrad_mpi.h>

#include <stdio.h>
#include <stdlib.h>

/* Started sums a step has in flight: two a linear layer, one a conv layer. */
enum { MAX_IN_FLIGHT = 2 * CNN_LAYERS };

struct cnn_parallel {
    int rank, ranks, local_ranks;
    cg_mpi_comm *comm;
    cnn_hooks hooks;
    cg_mpi_request *req[MAX_IN_FLIGHT];
    int nreq;
    cg_status failed; /* a start that failed in this step */
    char text[160];
};

static void record(cnn_parallel *p, cg_status s, cg_mpi_request *r, const char *what)
{
    if (s == CG_OK) {
        p->req[p->nreq++] = r;
        return;
    }
    fprintf(stderr, "train_cnn_mpi: rank %d: %s: %s (%s)\n", p->rank, what,
            cg_mpi_status_message(s), cg_mpi_last_error_detail());
    if (p->failed == CG_OK)
        p->failed = s;
}

static cg_status conv_param_grads(void *ctx, int layer, const cg_conv2d *d, const float *x,
                                  const float *dy, float *dw, float *db, int core_mask)
{
    (void)layer;
    cnn_parallel *p = ctx;
    cg_mpi_request *r = NULL;
    cg_status s = cg_mpi_conv2d_backward_weights_start(p->comm, d, x, dy, dw, db, core_mask, &r);
    record(p, s, r, "cg_mpi_conv2d_backward_weights_start");
    return s;
}

static void grads_ready(void *ctx, int layer, cnn_grads g)
{
    cnn_parallel *p = ctx;
    if (layer == CNN_CONV1 || layer == CNN_CONV2) /* their sums started with their gradients */
        return;
    cg_mpi_request *r = NULL;
    record(p, cg_mpi_sum_start(p->comm, g.dw, g.dw_n, &r), r, "cg_mpi_sum_start (weights)");
    record(p, cg_mpi_sum_start(p->comm, g.db, g.db_n, &r), r, "cg_mpi_sum_start (biases)");
}

cnn_parallel *par_start(int *argc, char ***argv)
{
    static cnn_parallel p;
    int provided, err = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (err != MPI_SUCCESS) {
        fprintf(stderr, "train_cnn_mpi: MPI_Init_thread failed (error %d)\n", err);
        return NULL;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p.ranks);
    MPI_Comm node;
    p.local_ranks = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &p.local_ranks);
        MPI_Comm_free(&node);
    }
    if (cg_mpi_comm_create(MPI_COMM_WORLD, &p.comm) != CG_OK) {
        fprintf(stderr, "train_cnn_mpi: rank %d: cg_mpi_comm_create: %s\n", p.rank,
                cg_mpi_last_error_detail());
        MPI_Finalize();
        return NULL;
    }
    if (p.rank != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "train_cnn_mpi: rank %d: cannot silence stdout\n", p.rank);
    p.hooks =
        (cnn_hooks){.ctx = &p, .conv_param_grads = conv_param_grads, .grads_ready = grads_ready};
    snprintf(p.text, sizeof p.text, "%d MPI ranks, each its slice of every batch; sums %s", p.ranks,
             cg_mpi_comm_overlaps(p.comm) ? "overlapped with the backward pass"
                                          : "in the wait (no MPI_THREAD_MULTIPLE)");
    return &p;
}

int par_rank(const cnn_parallel *p)
{
    return p->rank;
}

int par_ranks(const cnn_parallel *p)
{
    return p->ranks;
}

int par_local_ranks(const cnn_parallel *p)
{
    return p->local_ranks;
}

const char *par_describe(const cnn_parallel *p)
{
    return p->text;
}

const cnn_hooks *par_hooks(cnn_parallel *p)
{
    return &p->hooks;
}

cg_status par_finish_step(cnn_parallel *p, double *loss, int *correct)
{
    cg_status s = p->failed;
    for (int i = 0; i < p->nreq; i++) {
        const cg_status w = cg_mpi_wait(p->req[i]);
        if (w != CG_OK && s == CG_OK) {
            fprintf(stderr, "train_cnn_mpi: rank %d: cg_mpi_wait: %s (%s)\n", p->rank,
                    cg_mpi_status_message(w), cg_mpi_last_error_detail());
            s = w;
        }
    }
    p->nreq = 0;
    p->failed = CG_OK;
    double mine[2] = {*loss, (double)*correct}, all[2];
    if (MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return s != CG_OK ? s : CG_ERR_MPI;
    *loss = all[0];
    *correct = (int)all[1];
    return s;
}

int par_same_weights(cnn_parallel *p, uint64_t checksum)
{
    (void)p;
    unsigned long long mine = checksum, lo, hi;
    MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

void par_end(cnn_parallel *p)
{
    cg_mpi_comm_destroy(p->comm);
    MPI_Finalize();
}

void par_abort(cnn_parallel *p, int code)
{
    (void)p;
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort should not return */
}
