/* SPDX-License-Identifier: MIT */
/* How train_cnn.c's training loop runs: on one process (parallel_single.c:
 * train_cnn), or data-parallel over MPI ranks (train_cnn_mpi.c:
 * train_cnn_mpi). Each rank takes its slice of every global batch; the
 * backward's hooks sum the layers' gradients over the ranks as they complete,
 * par_finish_step waits for the sums before the update, and every epoch ends
 * by checking that all ranks hold the same weights. Only rank 0 prints and
 * writes the outputs. */
#ifndef CNN_PARALLEL_H
#define CNN_PARALLEL_H

#include "cnn.h"

#include <stdint.h>

typedef struct cnn_parallel cnn_parallel;

/* Starts the processes' collaboration (MPI_Init_thread for MPI); NULL after
 * a message. On ranks other than 0, stdout goes to /dev/null. */
cnn_parallel *par_start(int *argc, char ***argv);
int par_rank(const cnn_parallel *p);
int par_ranks(const cnn_parallel *p);
/* The ranks on this machine (this one included). */
int par_local_ranks(const cnn_parallel *p);
/* For the header: "1 process", or the ranks and how their sums run. */
const char *par_describe(const cnn_parallel *p);
/* The backward pass's hooks; NULL for none. */
const cnn_hooks *par_hooks(cnn_parallel *p);
/* After a step's backward pass: waits for its gradients' sums, and sums the
 * step's loss and correct predictions over the ranks. CG_OK or the failure. */
cg_status par_finish_step(cnn_parallel *p, double *loss, int *correct);
/* 1 when every rank's parameters have this checksum (collective). */
int par_same_weights(cnn_parallel *p, uint64_t checksum);
void par_end(cnn_parallel *p);
/* Ends every process with exit status code at once (MPI_Abort for MPI): for
 * a failure on some ranks only, which the others would wait for. */
_Noreturn void par_abort(cnn_parallel *p, int code);

#endif
