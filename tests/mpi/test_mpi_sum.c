/* SPDX-License-Identifier: MIT */
/* cg_mpi_sum and cg_mpi_sum_start, run under mpirun on 2 and 3 ranks:
 *   - the sum's bits are those of adding the ranks' buffers in rank order
 *     0..P-1, on every rank, for n = 0, 1, below, at and above P, and large;
 *   - several sums in flight at once, waited for in any order, with a
 *     blocking sum and the caller's own MPI call between;
 *   - sums of 3, 2 and 4 floats in flight across a barrier (their scratch
 *     grows at the same start on every rank);
 *   - the started sum progresses while the caller is not in MPI: the wait
 *     after a pause as long as the blocking sum takes clearly less than it.
 *
 *   test_mpi_sum multiple     MPI_THREAD_MULTIPLE: the comm has its thread
 *   test_mpi_sum serialized   MPI_THREAD_SERIALIZED: sums run in the wait;
 *                             the overlap is then only reported */
#define _POSIX_C_SOURCE 200809L
#include "mpi_check.h"

#include <stdlib.h>
#include <time.h>

static int P;

/* Rank q's buffer of sum `seed`. */
static void rank_data(uint64_t seed, int q, float *v, size_t n)
{
    mc_fill(seed * 1000003u + (uint64_t)q, v, n);
}

/* What every rank must get: rank 0's buffer + rank 1's + ..., in that order. */
static void expected_sum(uint64_t seed, float *expect, float *tmp, size_t n)
{
    rank_data(seed, 0, expect, n);
    for (int q = 1; q < P; q++) {
        rank_data(seed, q, tmp, n);
        for (size_t i = 0; i < n; i++)
            expect[i] += tmp[i];
    }
}

typedef struct sum_case {
    uint64_t seed;
    size_t n;
    float *buf, *expect;
} sum_case;

static void case_make(sum_case *k, uint64_t seed, size_t n, float *tmp)
{
    k->seed = seed;
    k->n = n;
    k->buf = malloc((n ? n : 1) * sizeof(float));
    k->expect = malloc((n ? n : 1) * sizeof(float));
    rank_data(seed, mc_rank, k->buf, n);
    expected_sum(seed, k->expect, tmp, n);
}

static void case_check(sum_case *k, const char *what)
{
    size_t bad = k->n;
    for (size_t i = 0; i < k->n && bad == k->n; i++)
        if (memcmp(&k->buf[i], &k->expect[i], sizeof(float)) != 0)
            bad = i;
    CHECK(bad == k->n, "%s n=%zu: element %zu is %a, the rank-order sum %a", what, k->n, bad,
          k->buf[bad], k->expect[bad]);
    CHECK(mc_same_on_every_rank(k->buf, k->n * sizeof(float), MPI_COMM_WORLD),
          "%s n=%zu: the ranks' bits differ", what, k->n);
    free(k->buf);
    free(k->expect);
}

static void test_sizes(cg_mpi_comm *c, float *tmp)
{
    const size_t sizes[] = {0, 1, (size_t)P - 1, (size_t)P, (size_t)P + 1, 1000, (1u << 20) + 7};
    for (int run = 0; run < 2; run++) /* the same bits run after run */
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            sum_case k;
            case_make(&k, 10 + i, sizes[i], tmp);
            CHECK_OK(cg_mpi_sum(c, k.buf, k.n));
            case_check(&k, run ? "cg_mpi_sum (again)" : "cg_mpi_sum");
        }
    /* n = 0 starts nothing: no request, and waiting for it is CG_OK */
    cg_mpi_request *req = (cg_mpi_request *)&req;
    CHECK_OK(cg_mpi_sum_start(c, NULL, 0, &req));
    CHECK(req == NULL, "n=0 gave a request");
    CHECK_OK(cg_mpi_wait(NULL));
    /* a NULL buffer is refused on the calling rank, before any message */
    CHECK(cg_mpi_sum(c, NULL, 5) == CG_ERR_NULL_POINTER, "buf NULL accepted");
    CHECK(strstr(cg_mpi_last_error_detail(), "buf") != NULL, "detail '%s'",
          cg_mpi_last_error_detail());
}

static void test_in_flight(cg_mpi_comm *c, float *tmp)
{
    enum { K = 5 };
    const size_t sizes[K] = {1, 5, 4097, 100003, 3};
    sum_case k[K];
    cg_mpi_request *req[K];
    for (int i = 0; i < K; i++) {
        case_make(&k[i], 100 + i, sizes[i], tmp);
        CHECK_OK(cg_mpi_sum_start(c, k[i].buf, k[i].n, &req[i]));
    }
    /* the caller's own MPI calls while they are in flight (Open MPI may
     * progress them from here) */
    MPI_Barrier(MPI_COMM_WORLD);
    /* a blocking sum behind them */
    sum_case b;
    case_make(&b, 200, 777, tmp);
    CHECK_OK(cg_mpi_sum(c, b.buf, b.n));
    case_check(&b, "blocking behind started sums");
    for (int i = K - 1; i >= 0; i--) { /* waited for in reverse order */
        CHECK_OK(cg_mpi_wait(req[i]));
        case_check(&k[i], "in flight");
    }
}

/* Sums started back to back whose chunks differ by one float between the
 * ranks (n odd), then a collective of the caller's before the waits: every
 * rank must grow its scratch at the same start, or one runs the queue there
 * (no thread) while another is in the barrier. On a comm of its own, so that
 * its scratch starts empty. */
static void test_growth_in_flight(float *tmp)
{
    cg_mpi_comm *c = NULL;
    CHECK_OK(cg_mpi_comm_create(MPI_COMM_WORLD, &c));
    if (!c)
        return;
    enum { K = 3 };
    const size_t sizes[K] = {3, 2, 4};
    sum_case k[K];
    cg_mpi_request *req[K];
    for (int i = 0; i < K; i++) {
        case_make(&k[i], 300 + i, sizes[i], tmp);
        CHECK_OK(cg_mpi_sum_start(c, k[i].buf, k[i].n, &req[i]));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < K; i++) {
        CHECK_OK(cg_mpi_wait(req[i]));
        case_check(&k[i], "scratch grown in flight");
    }
    cg_mpi_comm_destroy(c);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pause_for(double seconds)
{
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&t, NULL);
}

/* The slowest rank's figure, so that every rank pauses alike. */
static double slowest(double t)
{
    double all;
    MPI_Allreduce(&t, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* The caller pauses (a stand-in for compute that leaves the CPUs to the
 * exchange: on 2 CPUs running 2 or 3 ranks a busy compute would leave none)
 * three times as long as a blocking sum takes, then waits: with a progress
 * thread the sum is done by then, without one it all happens in the wait.
 * Best of several tries. Where no try overlapped, the pauses grow to 10 and
 * then 30 sums: ctest runs this test alone (RUN_SERIAL), but the progress
 * threads share the CPUs with whatever else the machine runs, and once got
 * too little in 3 sums' time (a wait of 2.6 ms after a sum of 2.9 ms, a
 * build running beside the suite; under TSan a wait of 17.7 ms after a sum
 * of 32.6 ms at one sum's pause). No thread: the wait takes the sum
 * whatever the pause. */
static void test_overlap(cg_mpi_comm *c, int threaded)
{
    const size_t n = (size_t)1 << 21; /* 8 MiB */
    float *buf = malloc(n * sizeof *buf);
    mc_fill(7, buf, n);
    enum { TRIES = 7 };
    static const int pause_sums[] = {3, 10, 30};
    double sum_s = 1e30, wait_s = 1e30;
    for (int t = 0; t < TRIES; t++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        CHECK_OK(cg_mpi_sum(c, buf, n));
        double s = slowest(now() - t0);
        sum_s = s < sum_s ? s : sum_s;
    }
    int pause = 0;
    for (;; pause++) {
        for (int t = 0; t < TRIES; t++) {
            cg_mpi_request *req;
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK_OK(cg_mpi_sum_start(c, buf, n, &req));
            pause_for(pause_sums[pause] * sum_s);
            double t0 = now();
            CHECK_OK(cg_mpi_wait(req));
            double w = slowest(now() - t0);
            wait_s = w < wait_s ? w : wait_s;
        }
        /* every rank decides alike: wait_s and sum_s are the slowest's */
        if (!threaded || wait_s < 0.5 * sum_s ||
            pause + 1 == (int)(sizeof pause_sums / sizeof *pause_sums))
            break;
    }
    if (mc_rank == 0)
        printf("overlap (%s, %d ranks, %zu floats): blocking sum %.3f ms, wait after a %.3f ms "
               "pause %.3f ms (best of %d)\n",
               threaded ? "progress thread" : "no thread: the sum runs in the wait", P, n,
               1e3 * sum_s, pause_sums[pause] * 1e3 * sum_s, 1e3 * wait_s, TRIES);
    if (threaded)
        CHECK(wait_s < 0.5 * sum_s, "the wait took %.3f ms, the blocking sum %.3f ms: no overlap",
              1e3 * wait_s, 1e3 * sum_s);
    free(buf);
}

int main(int argc, char **argv)
{
    const int multiple = argc > 1 && strcmp(argv[1], "multiple") == 0;
    mc_init(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int provided;
    MPI_Query_thread(&provided);
    cg_mpi_comm *c = NULL;
    CHECK_OK(cg_mpi_comm_create(MPI_COMM_WORLD, &c));
    if (!c)
        return mc_finish("test_mpi_sum");
    CHECK(cg_mpi_comm_overlaps(c) == (provided == MPI_THREAD_MULTIPLE),
          "overlaps %d with thread level %d", cg_mpi_comm_overlaps(c), provided);
    float *tmp = malloc(((1u << 20) + 7) * sizeof *tmp);
    test_sizes(c, tmp);
    test_in_flight(c, tmp);
    test_growth_in_flight(tmp);
    test_overlap(c, cg_mpi_comm_overlaps(c));
    free(tmp);
    cg_mpi_comm_destroy(c);
    cg_mpi_comm_destroy(NULL);
    return mc_finish(multiple ? "test_mpi_sum multiple" : "test_mpi_sum serialized");
}
