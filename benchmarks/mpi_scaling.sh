#!/bin/sh
# SPDX-License-Identifier: MIT
# convgrad-bench-mpi at 1, 2 and 4 ranks on loopback, then its model
# (docs/mpi.md). Each run takes the benchmark lock, so that no two timings
# share the machine.
#
#   sh benchmarks/mpi_scaling.sh BUILD_DIR OUT_DIR [more convgrad-bench-mpi options]
set -eu
build=$1
out=$2
shift 2
bench=$build/benchmarks/convgrad-bench-mpi
for np in 1 2 4; do
    flock /tmp/convgrad-bench.lock mpirun --allow-run-as-root --oversubscribe --mca btl self,vader \
        --mca btl_vader_single_copy_mechanism none -np "$np" "$bench" --out "$out" "$@"
done
"$bench" --model --out "$out" | tee "$out/model.txt"
