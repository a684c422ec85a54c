/* SPDX-License-Identifier: MIT */
/* The communicator, its requests and the reproducible sum (docs/mpi.md).
 *
 * The sum: buf is cut into P chunks by n and P alone; every rank sends each
 * peer that peer's chunk and receives every peer's copy of its own, adds the
 * P copies in rank order 0..P-1, and sends its summed chunk to every peer.
 * MPI moves the floats (point-to-point messages) but never adds them, so the
 * bits depend on the inputs and P only. Every rank also sends every peer its status with its
 * pieces, so a rank that failed before the sum makes all of them skip it and fail alike.
 *
 * Requests run one after another, in the order they were started, on one
 * executor: the comm's own thread when MPI gives MPI_THREAD_MULTIPLE (it makes
 * the MPI calls while the caller computes), else cg_mpi_wait() in the
 * caller's thread. Only the executor touches the scratch and the MPI
 * requests, so neither needs a lock; the queue and the requests'
 * done flags are under the comm's mutex. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_STATUS = 1, TAG_SCATTER = 2, TAG_GATHER = 2 + CGM_MAX_SEGMENTS }; /* + a segment */
enum { ADD_BLOCK = 256 }; /* floats summed at a time, in a buffer that stays in L1 */

struct cg_mpi_request {
    cg_mpi_comm *comm;
    cg_mpi_request *next;     /* in the queue, or in the free list */
    cg_mpi_request *all_next; /* every request the comm has made, to free them */
    cgm_segment seg[CGM_MAX_SEGMENTS];
    int nseg;
    int local; /* this rank's cg_status, sent to every peer */
    int done;  /* under comm->lock */
    cg_status result;
    char detail[CGM_DETAIL_MAX];
    int peer_status[]; /* [P]: every rank's status */
};

struct cg_mpi_comm {
    MPI_Comm work;    /* the sums' messages (the executor's) */
    MPI_Comm control; /* the caller's collectives (a gradient's agreement) */
    int rank, size;
    int threaded; /* the executor is a thread of its own */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work_ready, work_done;
    cg_mpi_request *head, *tail; /* started, not yet run: FIFO */
    int running;                 /* the executor is inside a request */
    atomic_int caller_waits;     /* the caller is inside cg_mpi_wait() */
    int stopping;
    cg_mpi_request *free_list, *all;
    /* The executor's own: grown by the caller only while the queue is empty
     * and nothing runs. */
    float *scratch; /* the peers' copies of this rank's chunks */
    size_t scratch_floats;
    MPI_Request *mreq; /* 2 (P - 1) (1 + CGM_MAX_SEGMENTS) */
};

/* ---- the calling thread's detail --------------------------------------- */

static _Thread_local char last_detail[CGM_DETAIL_MAX];

cg_status cgm_fail(cg_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    va_end(ap);
    return s;
}

cg_status cgm_ok(void)
{
    last_detail[0] = '\0';
    return CG_OK;
}

void cgm_mpi_error_text(char *dst, size_t len, const char *call, int err)
{
    char text[MPI_MAX_ERROR_STRING];
    int textlen = 0;
    if (MPI_Error_string(err, text, &textlen) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", err);
    snprintf(dst, len, "%s: %s", call, text);
}

cg_status cgm_mpi_failed(const char *call, int err)
{
    cgm_mpi_error_text(last_detail, sizeof last_detail, call, err);
    return CG_ERR_MPI;
}

CGM_API const char *cg_mpi_last_error_detail(void)
{
    return last_detail;
}

CGM_API const char *cg_mpi_status_message(cg_status s)
{
    if (s == CG_ERR_MPI)
        return "an MPI call failed";
    if (s == CG_ERR_MPI_MISMATCH)
        return "the ranks' convolution descriptors (or their db) differ";
    return cg_status_message(s);
}

MPI_Comm cgm_control(const cg_mpi_comm *c)
{
    return c->control;
}

int cgm_rank(const cg_mpi_comm *c)
{
    return c->rank;
}

int cgm_size(const cg_mpi_comm *c)
{
    return c->size;
}

CGM_API int cg_mpi_comm_overlaps(const cg_mpi_comm *c)
{
    return c && c->threaded;
}

/* ---- the chunks --------------------------------------------------------- */

/* Chunk q of n floats over P ranks: the first n % P chunks one longer. */
static size_t chunk_start(size_t n, int P, int q)
{
    const size_t base = n / (size_t)P, extra = n % (size_t)P;
    return base * (size_t)q + ((size_t)q < extra ? (size_t)q : extra);
}

static size_t chunk_len(size_t n, int P, int q)
{
    return chunk_start(n, P, q + 1) - chunk_start(n, P, q);
}

/* Where the copy of this rank's chunk from rank q sits among the P - 1 slots. */
static int slot_of(int q, int rank)
{
    return q < rank ? q : q - 1;
}

/* own becomes copy 0 + copy 1 + ... + copy P-1, added in that order, where
 * copy `rank` is own itself and the others are slots of len floats in
 * pieces. */
static void add_in_rank_order(float *own, const float *pieces, size_t len, int P, int rank)
{
    for (size_t i0 = 0; i0 < len; i0 += ADD_BLOCK) {
        const size_t m = len - i0 < ADD_BLOCK ? len - i0 : ADD_BLOCK;
        float acc[ADD_BLOCK];
        for (int q = 0; q < P; q++) {
            const float *v = q == rank ? own + i0 : pieces + (size_t)slot_of(q, rank) * len + i0;
            if (q == 0)
                memcpy(acc, v, m * sizeof *acc);
            else
                for (size_t i = 0; i < m; i++)
                    acc[i] += v[i];
        }
        memcpy(own + i0, acc, m * sizeof *acc);
    }
}

/* The scratch a sum of segs needs: P - 1 copies of the longest chunk (chunk
 * 0) of each, rather than of this rank's own, so that every rank grows its
 * scratch at the same call. */
static size_t scratch_floats_for(const cg_mpi_comm *c, const cgm_segment *segs, int nseg)
{
    size_t floats = 0;
    for (int s = 0; s < nseg; s++)
        floats += (size_t)(c->size - 1) * chunk_len(segs[s].n, c->size, 0);
    return floats;
}

/* ---- one request, on the executor --------------------------------------- */

/* MPI_Waitall that yields the CPU between tests while the caller computes: a
 * blocking MPI wait would hold a CPU the computation may need, and a sleep
 * between tests would hold back the exchange when the CPU is free (shared
 * memory moves in fragments, one per test). While the caller waits, it
 * just tests. */
static int wait_all(cg_mpi_comm *c, int n)
{
    for (;;) {
        int done = 0, err = MPI_Testall(n, c->mreq, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS || done)
            return err;
        if (c->threaded && !atomic_load(&c->caller_waits))
            sched_yield();
    }
}

static void request_fail_mpi(cg_mpi_request *r, const char *call, int err)
{
    r->result = CG_ERR_MPI;
    cgm_mpi_error_text(r->detail, sizeof r->detail, call, err);
}

/* The two exchanges of a sum: every rank's copy of each chunk to the chunk's
 * rank (into the scratch), then each summed chunk from its rank to every
 * rank (in place). Point-to-point both, tested by wait_all as the statuses. */
enum exchange { SCATTER, GATHER };

/* Posts the exchange's messages of every segment from mreq[*k] on. */
static int post_chunks(cg_mpi_comm *c, cg_mpi_request *r, enum exchange x, int *k)
{
    const int P = c->size, me = c->rank;
    float *slots = c->scratch;
    for (int s = 0; s < r->nseg; s++) {
        const cgm_segment *g = &r->seg[s];
        const size_t own = chunk_len(g->n, P, me), own_start = chunk_start(g->n, P, me);
        const int tag = (x == SCATTER ? TAG_SCATTER : TAG_GATHER) + s;
        for (int q = 0; q < P; q++) {
            if (q == me)
                continue;
            const size_t theirs = chunk_len(g->n, P, q), theirs_start = chunk_start(g->n, P, q);
            /* SCATTER: receive q's copy of my chunk, send q my copy of its chunk;
             * GATHER: receive q's summed chunk, send q mine */
            float *in = x == SCATTER ? slots + (size_t)slot_of(q, me) * own : g->buf + theirs_start;
            const size_t in_len = x == SCATTER ? own : theirs;
            float *out = g->buf + (x == SCATTER ? theirs_start : own_start);
            const size_t out_len = x == SCATTER ? theirs : own;
            int err;
            if (in_len > 0 && (err = MPI_Irecv(in, (int)in_len, MPI_FLOAT, q, tag, c->work,
                                               &c->mreq[(*k)++])) != MPI_SUCCESS)
                return err;
            if (out_len > 0 && (err = MPI_Isend(out, (int)out_len, MPI_FLOAT, q, tag, c->work,
                                                &c->mreq[(*k)++])) != MPI_SUCCESS)
                return err;
        }
        slots += (size_t)(P - 1) * own;
    }
    return MPI_SUCCESS;
}

/* Posts the status messages from mreq[*k] on. */
static int post_statuses(cg_mpi_comm *c, cg_mpi_request *r, int *k)
{
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        int err;
        if ((err = MPI_Irecv(&r->peer_status[q], 1, MPI_INT, q, TAG_STATUS, c->work,
                             &c->mreq[(*k)++])) != MPI_SUCCESS ||
            (err = MPI_Isend(&r->local, 1, MPI_INT, q, TAG_STATUS, c->work, &c->mreq[(*k)++])) !=
                MPI_SUCCESS)
            return err;
    }
    return MPI_SUCCESS;
}

/* Runs one exchange (with the statuses too for SCATTER); 0 or the request's
 * MPI failure recorded. */
static int exchange(cg_mpi_comm *c, cg_mpi_request *r, enum exchange x)
{
    int k = 0;
    int err = x == SCATTER ? post_statuses(c, r, &k) : MPI_SUCCESS;
    if (err == MPI_SUCCESS)
        err = post_chunks(c, r, x, &k);
    const int waited = wait_all(c, k); /* what was posted, even after a failure */
    if (err != MPI_SUCCESS || waited != MPI_SUCCESS) {
        request_fail_mpi(r, err != MPI_SUCCESS ? "MPI_Isend/MPI_Irecv" : "MPI_Testall",
                         err != MPI_SUCCESS ? err : waited);
        return -1;
    }
    return 0;
}

/* The lowest rank whose status is not CG_OK, or -1. The same on every rank:
 * every rank has every status. */
static int first_failed_rank(const cg_mpi_request *r, int P)
{
    for (int q = 0; q < P; q++)
        if (r->peer_status[q] != CG_OK)
            return q;
    return -1;
}

static void run_request(cg_mpi_comm *c, cg_mpi_request *r)
{
    const int P = c->size, me = c->rank;
    r->result = CG_OK;
    r->detail[0] = '\0';
    r->peer_status[me] = r->local;
    if (exchange(c, r, SCATTER) != 0)
        return;
    const int failed = first_failed_rank(r, P);
    if (failed >= 0) {
        r->result = (cg_status)r->peer_status[failed];
        snprintf(r->detail, sizeof r->detail, "rank %d: %s", failed,
                 cg_mpi_status_message(r->result));
        return;
    }
    const float *slots = c->scratch;
    for (int s = 0; s < r->nseg; s++) {
        const cgm_segment *g = &r->seg[s];
        const size_t own = chunk_len(g->n, P, me);
        add_in_rank_order(g->buf + chunk_start(g->n, P, me), slots, own, P, me);
        slots += (size_t)(P - 1) * own;
    }
    exchange(c, r, GATHER);
}

/* ---- the executor --------------------------------------------------------- */

/* Takes the oldest started request off the queue (lock held), or NULL. */
static cg_mpi_request *dequeue(cg_mpi_comm *c)
{
    cg_mpi_request *r = c->head;
    if (r) {
        c->head = r->next;
        if (!c->head)
            c->tail = NULL;
        c->running = 1;
    }
    return r;
}

/* Runs r (taken by dequeue) and marks it done (takes the lock). */
static void run_and_finish(cg_mpi_comm *c, cg_mpi_request *r)
{
    run_request(c, r);
    pthread_mutex_lock(&c->lock);
    r->done = 1;
    c->running = 0;
    pthread_cond_broadcast(&c->work_done);
    pthread_mutex_unlock(&c->lock);
}

static void *executor_thread(void *arg)
{
    cg_mpi_comm *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stopping)
            pthread_cond_wait(&c->work_ready, &c->lock);
        cg_mpi_request *r = dequeue(c);
        if (!r)
            break; /* stopping, and nothing left */
        pthread_mutex_unlock(&c->lock);
        run_and_finish(c, r);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Without a thread: runs the queue in the caller's thread until until (NULL:
 * all of it) is done. */
static void run_queue_here(cg_mpi_comm *c, const cg_mpi_request *until)
{
    for (;;) {
        pthread_mutex_lock(&c->lock);
        cg_mpi_request *r = (until && until->done) ? NULL : dequeue(c);
        pthread_mutex_unlock(&c->lock);
        if (!r)
            return;
        run_and_finish(c, r);
    }
}

/* Returns once nothing is queued or running. */
static void drain(cg_mpi_comm *c)
{
    if (!c->threaded) {
        run_queue_here(c, NULL);
        return;
    }
    pthread_mutex_lock(&c->lock);
    while (c->head || c->running)
        pthread_cond_wait(&c->work_done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* ---- the communicator ---------------------------------------------------- */

static void comm_free(cg_mpi_comm *c)
{
    for (cg_mpi_request *r = c->all, *next; r; r = next) {
        next = r->all_next;
        free(r);
    }
    free(c->scratch);
    free(c->mreq);
    pthread_cond_destroy(&c->work_done);
    pthread_cond_destroy(&c->work_ready);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Duplicates comm into *dup, errors returned rather than fatal. */
static int dup_returning_errors(MPI_Comm comm, MPI_Comm *dup)
{
    int err = MPI_Comm_dup(comm, dup);
    if (err != MPI_SUCCESS)
        return err;
    return MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
}

static void comm_free_mpi(MPI_Comm *m)
{
    if (*m != MPI_COMM_NULL)
        MPI_Comm_free(m);
}

/* Stops c's thread, frees its communicators (MPI_COMM_NULL: none) and c. */
static void comm_discard(cg_mpi_comm *c, int thread_started)
{
    if (thread_started) {
        pthread_mutex_lock(&c->lock);
        c->stopping = 1;
        pthread_cond_signal(&c->work_ready);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    comm_free_mpi(&c->work);
    comm_free_mpi(&c->control);
    comm_free(c);
}

CGM_API cg_status cg_mpi_comm_create(MPI_Comm comm, cg_mpi_comm **out)
{
    if (!out)
        return cgm_fail(CG_ERR_NULL_POINTER, "out is NULL");
    *out = NULL;
    /* Every rank takes part in every collective here whatever failed before
     * it, then all agree on the outcome: none is left inside a duplication,
     * and none returns a communicator the others do not have. */
    MPI_Comm work = MPI_COMM_NULL, control = MPI_COMM_NULL;
    const int dup_work = dup_returning_errors(comm, &work);
    const int dup_control = dup_returning_errors(comm, &control);
    int level = MPI_THREAD_SINGLE;
    const int queried = MPI_Query_thread(&level);
    cg_mpi_comm *c = calloc(1, sizeof *c);
    cg_status s = dup_work != MPI_SUCCESS      ? cgm_mpi_failed("MPI_Comm_dup", dup_work)
                  : dup_control != MPI_SUCCESS ? cgm_mpi_failed("MPI_Comm_dup", dup_control)
                  : queried != MPI_SUCCESS     ? cgm_mpi_failed("MPI_Query_thread", queried)
                  : !c ? cgm_fail(CG_ERR_NO_MEMORY, "no memory for the communicator")
                       : CG_OK;
    int thread_started = 0;
    if (c) {
        c->work = work;
        c->control = control;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->work_ready, NULL);
        pthread_cond_init(&c->work_done, NULL);
        MPI_Comm_rank(comm, &c->rank);
        MPI_Comm_size(comm, &c->size);
        c->mreq = malloc(2 * (size_t)c->size * (1 + CGM_MAX_SEGMENTS) * sizeof *c->mreq);
        c->threaded = level == MPI_THREAD_MULTIPLE;
        if (s == CG_OK && !c->mreq)
            s = cgm_fail(CG_ERR_NO_MEMORY, "no memory for the communicator's requests");
        if (s == CG_OK && c->threaded) {
            thread_started = pthread_create(&c->thread, NULL, executor_thread, c) == 0;
            if (!thread_started)
                s = cgm_fail(CG_ERR_NO_MEMORY, "no thread for the communicator");
        }
    }
    /* On comm itself: a duplicate may be missing on a rank whose dup failed. */
    const int ok = s == CG_OK;
    int all_ok = 0;
    const int err = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (err != MPI_SUCCESS && s == CG_OK)
        s = cgm_mpi_failed("MPI_Allreduce", err);
    else if (!all_ok && s == CG_OK)
        s = cgm_fail(CG_ERR_NO_MEMORY, "another rank could not make its communicator");
    if (s != CG_OK) {
        if (c) {
            comm_discard(c, thread_started);
        } else {
            comm_free_mpi(&work);
            comm_free_mpi(&control);
        }
        return s;
    }
    *out = c;
    return cgm_ok();
}

CGM_API void cg_mpi_comm_destroy(cg_mpi_comm *c)
{
    if (!c)
        return;
    drain(c);
    comm_discard(c, c->threaded);
}

/* ---- starting and waiting -------------------------------------------------- */

/* A request from the free list, or a new one (the first few calls only). */
static cg_mpi_request *take_request(cg_mpi_comm *c)
{
    pthread_mutex_lock(&c->lock);
    cg_mpi_request *r = c->free_list;
    if (r)
        c->free_list = r->next;
    pthread_mutex_unlock(&c->lock);
    if (r)
        return r;
    r = calloc(1, sizeof *r + (size_t)c->size * sizeof r->peer_status[0]);
    if (!r)
        return NULL;
    r->comm = c;
    r->all_next = c->all; /* only the caller's thread reads or writes c->all */
    c->all = r;
    return r;
}

/* Makes the scratch hold `floats`. A queued request uses the scratch only
 * while it runs: the thread's may be running, so wait for it; without the
 * thread none runs outside cg_mpi_wait(), and draining here would run the
 * queue, which needs the other ranks while they may be in a collective. */
static cg_status reserve_scratch(cg_mpi_comm *c, size_t floats)
{
    if (floats <= c->scratch_floats)
        return CG_OK;
    if (c->threaded)
        drain(c);
    float *grown = realloc(c->scratch, floats * sizeof *grown);
    if (!grown)
        return cgm_fail(CG_ERR_NO_MEMORY, "no memory for %zu floats of scratch", floats);
    c->scratch = grown;
    c->scratch_floats = floats;
    return CG_OK;
}

cg_status cgm_reserve(cg_mpi_comm *c, const cgm_segment *segs, int nseg, cg_mpi_request **req)
{
    *req = NULL;
    for (int s = 0; s < nseg; s++)
        if (segs[s].n > (size_t)INT_MAX)
            return cgm_fail(CG_ERR_OVERFLOW, "n=%zu exceeds INT_MAX floats", segs[s].n);
    cg_status s = reserve_scratch(c, scratch_floats_for(c, segs, nseg));
    if (s != CG_OK)
        return s;
    if (!(*req = take_request(c)))
        return cgm_fail(CG_ERR_NO_MEMORY, "no memory for a request");
    return cgm_ok();
}

void cgm_release(cg_mpi_comm *c, cg_mpi_request *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&c->lock);
    r->next = c->free_list;
    c->free_list = r;
    pthread_mutex_unlock(&c->lock);
}

void cgm_start(cg_mpi_comm *c, cg_mpi_request *r, const cgm_segment *segs, int nseg,
               cg_status local)
{
    memcpy(r->seg, segs, (size_t)nseg * sizeof *segs);
    r->nseg = nseg;
    r->local = (int)local;
    r->next = NULL;
    if (c->size == 1) { /* the sum is the buffer itself: done, with no message */
        r->result = local;
        snprintf(r->detail, sizeof r->detail, "%s",
                 local == CG_OK ? "" : cg_mpi_status_message(local));
        r->done = 1;
        return;
    }
    r->done = 0;
    pthread_mutex_lock(&c->lock);
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    pthread_cond_signal(&c->work_ready);
    pthread_mutex_unlock(&c->lock);
}

CGM_API cg_status cg_mpi_sum_start(cg_mpi_comm *c, float *buf, size_t n, cg_mpi_request **req)
{
    if (!req)
        return cgm_fail(CG_ERR_NULL_POINTER, "req is NULL");
    *req = NULL;
    if (!c)
        return cgm_fail(CG_ERR_NULL_POINTER, "c is NULL");
    if (n == 0)
        return cgm_ok(); /* nothing to sum, on every rank: no request */
    if (!buf)
        return cgm_fail(CG_ERR_NULL_POINTER, "buf is NULL");
    const cgm_segment seg = {buf, n};
    /* No agreement here: a failure is this rank's alone (docs/mpi.md). */
    cg_status s = cgm_reserve(c, &seg, 1, req);
    if (s != CG_OK)
        return s;
    cgm_start(c, *req, &seg, 1, CG_OK);
    return cgm_ok();
}

CGM_API cg_status cg_mpi_sum(cg_mpi_comm *c, float *buf, size_t n)
{
    cg_mpi_request *req;
    cg_status s = cg_mpi_sum_start(c, buf, n, &req);
    return s != CG_OK ? s : cg_mpi_wait(req);
}

CGM_API cg_status cg_mpi_wait(cg_mpi_request *req)
{
    if (!req)
        return cgm_ok();
    cg_mpi_comm *c = req->comm;
    if (c->threaded) {
        atomic_store(&c->caller_waits, 1);
        pthread_mutex_lock(&c->lock);
        while (!req->done)
            pthread_cond_wait(&c->work_done, &c->lock);
        pthread_mutex_unlock(&c->lock);
        atomic_store(&c->caller_waits, 0);
    } else {
        run_queue_here(c, req);
    }
    const cg_status s = req->result;
    if (s == CG_OK)
        cgm_ok();
    else
        cgm_fail(s, "%s", req->detail);
    cgm_release(c, req);
    return s;
}
