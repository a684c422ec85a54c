#!/bin/sh
# SPDX-License-Identifier: MIT
# ctest bench_mpi_smoke: convgrad-bench-mpi on 2 ranks, one round of two
# layers (a large and a small sum), then --model on what it wrote.
#
#   sh bench_mpi_smoke.sh BENCH OUT_DIR MPIRUN [MPIRUN's options...]
set -eu
bench=$1
out=$2
shift 2
"$@" -np 2 "$bench" --quick --reps 1 --layers r50_3x3_7,mbv1_dw_56 --out "$out"
test -s "$out/mpi_np2.csv"
"$bench" --model --out "$out"
