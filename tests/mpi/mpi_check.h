/* SPDX-License-Identifier: MIT */
/* What the MPI tests share: a failure count, CHECK, seeded data, and the
 * ending every rank agrees on. Each test is a plain program run by ctest
 * under mpirun; it links convgrad::mpi only (the shared library), as a user's
 * program does. */
#ifndef MPI_CHECK_H
#define MPI_CHECK_H

#include "convgrad_mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int mc_failures;
static int mc_rank;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            mc_failures++;                                                                         \
            fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", mc_rank, __FILE__, __LINE__,     \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        cg_status mc_s = (call);                                                                   \
        CHECK(mc_s == CG_OK, "%s: %d (%s) %s", #call, (int)mc_s, cg_mpi_status_message(mc_s),      \
              cg_mpi_last_error_detail());                                                         \
    } while (0)

/* splitmix64: the same stream on every rank for the same seed. */
static inline uint64_t mc_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline void mc_fill(uint64_t seed, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((double)(mc_next(&seed) >> 11) * 0x1p-52 - 1.0);
}

/* Multiples of 1/8 in [-1, 1]: products are multiples of 2^-6 and sums of a
 * few thousand of them are exact in fp32, whatever their order. */
static inline void mc_fill_dyadic(uint64_t seed, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)(mc_next(&seed) % 17) - 8) / 8.0f;
}

/* 1 when every rank holds the same bytes as rank 0 (collective). */
static inline int mc_same_on_every_rank(const void *p, size_t bytes, MPI_Comm comm)
{
    /* FNV-1a over the bytes, compared through MPI_MIN and MPI_MAX. */
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211u;
    unsigned long long lo = h, hi = h, in = h;
    MPI_Allreduce(&in, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm);
    MPI_Allreduce(&in, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    return lo == hi;
}

/* The exit status, the same on every rank: 1 when any rank failed a check. */
static inline int mc_finish(const char *name)
{
    int mine = mc_failures, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mc_rank == 0)
        printf("%s: %s (%d failed checks over all ranks)\n", name, all ? "FAIL" : "PASS", all);
    MPI_Finalize();
    return all ? 1 : 0;
}

/* MPI_Init_thread at `level`; the rank in mc_rank. */
static inline void mc_init(int *argc, char ***argv, int level)
{
    int provided;
    MPI_Init_thread(argc, argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &mc_rank);
}

#endif
