/* SPDX-License-Identifier: MIT */
/* The data-parallel weight gradient: every rank checks its descriptor, the
 * ranks agree (one MPI_Allreduce) that all are valid and alike but for
 * batch, each computes its shard's gradient, and the sum starts (sum.c).
 * Nothing is written before the agreement, so a bad descriptor or a mismatch
 * on any rank leaves dw and db untouched everywhere. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The fields that must agree, one int each. (clang-format would reflow the
 * list on every run.) */
/* clang-format off */
#define AGREED_FIELDS(X)                                                            \
    X(layout) X(in_h) X(in_w) X(in_c) X(out_c) X(kernel_h) X(kernel_w) X(groups)   \
    X(stride_h) X(stride_w) X(dilation_h) X(dilation_w)                             \
    X(pad_top) X(pad_bottom) X(pad_left) X(pad_right)
/* clang-format on */
#define FIELD_INDEX(f) FIELD_##f,
enum { AGREED_FIELDS(FIELD_INDEX) FIELD_HAS_DB, NFIELDS };
#define FIELD_NAME(f) #f,
static const char *const field_names[NFIELDS] = {AGREED_FIELDS(FIELD_NAME) "db"};

static void fields_of(const cg_conv2d *conv, const float *db, int *f)
{
#define FIELD_VALUE(name) f[FIELD_##name] = (int)conv->name;
    AGREED_FIELDS(FIELD_VALUE)
#undef FIELD_VALUE
    f[FIELD_HAS_DB] = db != NULL;
}

/* This rank's own checks, writing nothing; the detail in detail. */
static cg_status check_locally(const cg_conv2d *conv, const float *x, const float *dy,
                               const float *dw, int core_mask, char *detail, size_t len)
{
    detail[0] = '\0';
    const char *missing = !conv ? "conv" : !dw ? "dw" : NULL;
    if (!missing && conv->batch > 0)
        missing = !x ? "x" : !dy ? "dy" : NULL;
    if (missing) {
        snprintf(detail, len, "%s is NULL", missing);
        return CG_ERR_NULL_POINTER;
    }
    if (conv->batch < 0) {
        snprintf(detail, len, "batch=%d is negative", conv->batch);
        return CG_ERR_BAD_SIZE;
    }
    /* A rank with no images contributes zeros: its other fields must still
     * make a valid convolution. */
    cg_conv2d one = *conv;
    if (one.batch == 0)
        one.batch = 1;
    cg_status s = cg_conv2d_check(&one);
    if (s != CG_OK) {
        snprintf(detail, len, "%s", cg_last_error_detail());
        return s;
    }
    if (conv->batch > 0 && core_mask == 0) {
        snprintf(detail, len, "core_mask is 0");
        return CG_ERR_CORE_MASK;
    }
    return CG_OK;
}

/* Every rank learns the lowest rank whose checks failed (with its status and
 * detail), or that the fields differ. One MPI_Allreduce (MPI_MIN) of the
 * failing rank and of each field and its complement (so, its maximum); one
 * MPI_Bcast of the detail after a failure. */
static cg_status agree(cg_mpi_comm *c, const cg_conv2d *conv, const float *db, cg_status local,
                       const char *local_detail)
{
    const int P = cgm_size(c), me = cgm_rank(c);
    int f[NFIELDS] = {0};
    if (conv)
        fields_of(conv, db, f);
    int mine[1 + 2 * NFIELDS], all[1 + 2 * NFIELDS];
    mine[0] = local == CG_OK ? P : me;
    for (int i = 0; i < NFIELDS; i++) {
        mine[1 + i] = f[i];
        mine[1 + NFIELDS + i] = ~f[i];
    }
    int err = MPI_Allreduce(mine, all, 1 + 2 * NFIELDS, MPI_INT, MPI_MIN, cgm_control(c));
    if (err != MPI_SUCCESS)
        return cgm_mpi_failed("MPI_Allreduce", err);
    const int failed = all[0];
    if (failed < P) {
        struct {
            int status;
            char detail[CGM_DETAIL_MAX - 32];
        } msg = {(int)local, ""};
        if (me == failed)
            snprintf(msg.detail, sizeof msg.detail, "%s", local_detail);
        if ((err = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, failed, cgm_control(c))) !=
            MPI_SUCCESS)
            return cgm_mpi_failed("MPI_Bcast", err);
        return cgm_fail((cg_status)msg.status, "rank %d: %s", failed, msg.detail);
    }
    for (int i = 0; i < NFIELDS; i++) {
        const int lo = all[1 + i], hi = ~all[1 + NFIELDS + i];
        if (lo != hi)
            return cgm_fail(CG_ERR_MPI_MISMATCH, "%s differs between the ranks (%d to %d)",
                            field_names[i], lo, hi);
    }
    return CG_OK;
}

/* dw's (and db's) local values: the shard's gradients, or zeros for no images. */
static cg_status compute_locally(const cg_conv2d *conv, const float *x, const float *dy, float *dw,
                                 size_t dw_n, float *db, int core_mask)
{
    if (conv->batch == 0) {
        memset(dw, 0, dw_n * sizeof *dw);
        if (db)
            memset(db, 0, (size_t)conv->out_c * sizeof *db);
        return CG_OK;
    }
    return db ? cg_conv2d_backward_weights_bias(conv, x, dy, dw, db, core_mask)
              : cg_conv2d_backward_weights(conv, x, dy, dw, core_mask);
}

CGM_API cg_status cg_mpi_conv2d_backward_weights_start(cg_mpi_comm *c, const cg_conv2d *conv,
                                                       const float *x, const float *dy, float *dw,
                                                       float *db, int core_mask,
                                                       cg_mpi_request **req)
{
    if (!req)
        return cgm_fail(CG_ERR_NULL_POINTER, "req is NULL");
    *req = NULL;
    if (!c)
        return cgm_fail(CG_ERR_NULL_POINTER, "c is NULL");
    char detail[CGM_DETAIL_MAX];
    cg_status s = check_locally(conv, x, dy, dw, core_mask, detail, sizeof detail);
    cgm_segment segs[CGM_MAX_SEGMENTS] = {{0}};
    const int nseg = db ? 2 : 1;
    cg_mpi_request *r = NULL;
    if (s == CG_OK) {
        segs[0] =
            (cgm_segment){dw, (size_t)conv->out_c * (size_t)conv->kernel_h *
                                  (size_t)conv->kernel_w * (size_t)(conv->in_c / conv->groups)};
        segs[1] = (cgm_segment){db, (size_t)conv->out_c};
        /* Before the agreement: a rank short of memory then fails it on every
         * rank, rather than leaving the others waiting for its sum. */
        if ((s = cgm_reserve(c, segs, nseg, &r)) != CG_OK)
            snprintf(detail, sizeof detail, "%s", cg_mpi_last_error_detail());
    }
    if ((s = agree(c, conv, db, s, detail)) != CG_OK) {
        cgm_release(c, r);
        return s;
    }
    /* A failure here (a resource: memory, a thread, a busy core) travels with
     * the sum, so that every rank's wait returns it. */
    const cg_status computed = compute_locally(conv, x, dy, dw, segs[0].n, db, core_mask);
    cgm_start(c, r, segs, nseg, computed);
    *req = r;
    return cgm_ok();
}

CGM_API cg_status cg_mpi_conv2d_backward_weights(cg_mpi_comm *c, const cg_conv2d *conv,
                                                 const float *x, const float *dy, float *dw,
                                                 float *db, int core_mask)
{
    cg_mpi_request *req;
    cg_status s = cg_mpi_conv2d_backward_weights_start(c, conv, x, dy, dw, db, core_mask, &req);
    return s != CG_OK ? s : cg_mpi_wait(req);
}
