/* SPDX-License-Identifier: MIT */
/* What the component's two halves share: sum.c (the communicator, its
 * requests, the fixed-order sum and the thread that runs it) and conv2d.c (the
 * data-parallel weight gradient, which agrees on a status before its sum). */
#ifndef CGM_INTERNAL_H
#define CGM_INTERNAL_H

#include "convgrad_mpi.h"

#define CGM_API __attribute__((visibility("default")))

/* The longest detail kept for cg_mpi_last_error_detail(). */
enum { CGM_DETAIL_MAX = 512 };

/* One buffer of a sum; a gradient's request sums dw and db together. */
typedef struct cgm_segment {
    float *buf;
    size_t n;
} cgm_segment;
enum { CGM_MAX_SEGMENTS = 2 };

/* What a sum of segs (nseg <= CGM_MAX_SEGMENTS, every n >= 1) needs: its
 * scratch and *req. A gradient reserves before its agreement, so that a
 * failure here (this rank's alone) is agreed on like a bad descriptor. */
cg_status cgm_reserve(cg_mpi_comm *c, const cgm_segment *segs, int nseg, cg_mpi_request **req);
/* Gives back a reserved request that was not started (NULL: nothing). */
void cgm_release(cg_mpi_comm *c, cg_mpi_request *r);
/* Starts the sum of segs in r, reserved for them. local is this rank's
 * status, exchanged with the pieces: when any rank's is not CG_OK no rank
 * changes its buffers, and every rank's wait returns the lowest such rank's
 * status. */
void cgm_start(cg_mpi_comm *c, cg_mpi_request *r, const cgm_segment *segs, int nseg,
               cg_status local);

/* The communicator on which the caller's thread runs its own collectives
 * (a gradient's agreement), beside the one the sums run on. */
MPI_Comm cgm_control(const cg_mpi_comm *c);
int cgm_rank(const cg_mpi_comm *c);
int cgm_size(const cg_mpi_comm *c);

/* Sets the calling thread's detail (printf-style; "" for success) and
 * returns s. */
cg_status cgm_fail(cg_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cg_status cgm_ok(void);
/* CG_ERR_MPI, the detail naming the call and MPI's own error string. */
cg_status cgm_mpi_failed(const char *call, int err);
/* "call: MPI's error string" into dst. */
void cgm_mpi_error_text(char *dst, size_t len, const char *call, int err);

#endif
