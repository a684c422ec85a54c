/* SPDX-License-Identifier: MIT */
/* Uses an installed convgrad_mpi: every rank r holds {r, 1, 2r} and the sum
 * over P ranks must be {P(P-1)/2, P, P(P-1)} on every rank (small integers:
 * exact in any order). Then one data-parallel weight gradient of a 1x1
 * convolution whose answer is known by hand: every rank has one image of one
 * pixel, x = 1, dy = 2, so dw = db = 2P. */
#include <convgrad_mpi.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    int provided, rank, P;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int fail = 0;
    cg_mpi_comm *c = NULL;
    cg_status s = cg_mpi_comm_create(MPI_COMM_WORLD, &c);
    if (s != CG_OK) {
        printf("consumer_mpi: rank %d: cg_mpi_comm_create: %s\n", rank, cg_mpi_last_error_detail());
        MPI_Finalize();
        return 1;
    }
    float v[3] = {(float)rank, 1.0f, 2.0f * (float)rank};
    const float expect[3] = {(float)(P * (P - 1) / 2), (float)P, (float)(P * (P - 1))};
    s = cg_mpi_sum(c, v, 3);
    for (int i = 0; i < 3; i++)
        fail |= s != CG_OK || v[i] != expect[i];

    cg_conv2d conv = {CG_LAYOUT_NHWC, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    const float x = 1.0f, dy = 2.0f;
    float dw = 0.0f, db = 0.0f;
    s = cg_mpi_conv2d_backward_weights(c, &conv, &x, &dy, &dw, &db, 0x1);
    fail |= s != CG_OK || dw != 2.0f * (float)P || db != 2.0f * (float)P;

    printf("consumer_mpi: rank %d of %d: sum {%g, %g, %g}, dw %g, db %g: %s\n", rank, P, v[0], v[1],
           v[2], dw, db, fail ? "FAIL" : "PASS");
    cg_mpi_comm_destroy(c);
    MPI_Finalize();
    return fail;
}
