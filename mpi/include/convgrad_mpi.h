/* SPDX-License-Identifier: MIT */
/**
 * @file convgrad_mpi.h
 * @brief convgrad_mpi: data-parallel weight gradients over MPI, summed in a
 * fixed order so that every rank gets the same bits, run after run.
 *
 * Link convgrad::mpi (CMake) or `pkg-config convgrad-mpi`. docs/mpi.md
 * explains the sum, the overlap and the errors.
 *
 * Threads: the caller initialises MPI. With MPI_THREAD_MULTIPLE a
 * cg_mpi_comm runs its sums on a thread of its own, so a started sum
 * progresses while the caller computes; with any lower level there is no such
 * thread and a started sum runs inside cg_mpi_wait(). Only one thread at a
 * time may call cg_mpi_* functions on one cg_mpi_comm, and every rank must
 * start its sums on it in the same order.
 */
#ifndef CONVGRAD_MPI_H
#define CONVGRAD_MPI_H

#include <convgrad.h>
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status of a failed MPI call inside the component (a cg_status value outside the core
 *  library's range). */
#define CG_ERR_MPI ((cg_status)-100)
/** The ranks' descriptors differ in a field other than batch, or some pass db and
 *  others NULL. */
#define CG_ERR_MPI_MISMATCH ((cg_status)-101)

/** convgrad's handle on a communicator: its own duplicate of comm, and the scratch its sums
 *  use. */
typedef struct cg_mpi_comm cg_mpi_comm;
/** One sum in flight, started by a *_start function and ended by cg_mpi_wait. */
typedef struct cg_mpi_request cg_mpi_request;

/** Collective over comm. */
cg_status cg_mpi_comm_create(MPI_Comm comm, cg_mpi_comm **out);
/** Collective; NULL is a no-op. Every started sum must have been waited for. */
void cg_mpi_comm_destroy(cg_mpi_comm *c);

/** The reproducible sum over the ranks of buf[0..n), in place: every rank gets the same bits,
 *  run after run, whatever MPI's own reduction order. n must agree on every rank. */
cg_status cg_mpi_sum(cg_mpi_comm *c, float *buf, size_t n);
/** cg_mpi_sum(), started: buf is not to be read or written until cg_mpi_wait(*req). */
cg_status cg_mpi_sum_start(cg_mpi_comm *c, float *buf, size_t n, cg_mpi_request **req);
/** Completes a started sum (or gradient); frees the request; NULL is CG_OK. */
cg_status cg_mpi_wait(cg_mpi_request *req);

/**
 * Data-parallel weight gradient (and bias gradient when db != NULL) of conv: each rank computes
 * cg_conv2d_backward_weights (and _bias) on its own shard (conv->batch images of x and dy,
 * which may differ between ranks, 0 included), then dw (db) becomes the reproducible sum over
 * the ranks. Every other field of conv must agree between ranks. A bad descriptor or a
 * mismatch on any rank, or a failed MPI call, makes EVERY rank return an error status (none
 * left waiting). After a bad descriptor or a mismatch dw and db are untouched on every rank.
 */
cg_status cg_mpi_conv2d_backward_weights(cg_mpi_comm *c, const cg_conv2d *conv, const float *x,
                                         const float *dy, float *dw, float *db, int core_mask);
/** The same, non-blocking: computes the local gradients, starts the sum and returns; dw and db
 *  are not to be read or written until cg_mpi_wait(*req). */
cg_status cg_mpi_conv2d_backward_weights_start(cg_mpi_comm *c, const cg_conv2d *conv,
                                               const float *x, const float *dy, float *dw,
                                               float *db, int core_mask, cg_mpi_request **req);
/** What exactly went wrong in the calling thread's last cg_mpi_* call ("" after success),
 *  e.g. "rank 1: group=4 does not divide in_c=6" or MPI's own error string. Never NULL. */
const char *cg_mpi_last_error_detail(void);
/** cg_status_message(), knowing CG_ERR_MPI and CG_ERR_MPI_MISMATCH too. Never NULL. */
const char *cg_mpi_status_message(cg_status s);
/** 1 when c's sums progress on a thread of their own (MPI_THREAD_MULTIPLE), else 0. */
int cg_mpi_comm_overlaps(const cg_mpi_comm *c);

#ifdef __cplusplus
}
#endif

#endif
