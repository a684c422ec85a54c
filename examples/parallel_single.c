/* SPDX-License-Identifier: MIT */
/* parallel.h for one process (train_cnn): no hooks, nothing to sum. */
#include "parallel.h"

#include <stdlib.h>

struct cnn_parallel {
    int unused;
};

cnn_parallel *par_start(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static cnn_parallel one;
    return &one;
}

int par_rank(const cnn_parallel *p)
{
    (void)p;
    return 0;
}

int par_ranks(const cnn_parallel *p)
{
    (void)p;
    return 1;
}

int par_local_ranks(const cnn_parallel *p)
{
    (void)p;
    return 1;
}

const char *par_describe(const cnn_parallel *p)
{
    (void)p;
    return "1 process";
}

const cnn_hooks *par_hooks(cnn_parallel *p)
{
    (void)p;
    return NULL;
}

cg_status par_finish_step(cnn_parallel *p, double *loss, int *correct)
{
    (void)p;
    (void)loss;
    (void)correct;
    return CG_OK;
}

int par_same_weights(cnn_parallel *p, uint64_t checksum)
{
    (void)p;
    (void)checksum;
    return 1;
}

void par_end(cnn_parallel *p)
{
    (void)p;
}

void par_abort(cnn_parallel *p, int code)
{
    (void)p;
    exit(code);
}
