#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trains the example CNN, from a clean clone on a fresh Debian 12 machine:
#
#   bash scripts/train-cnn.sh [ARGS...]
#
# Installs the build's packages if any is missing (and gnuplot, for the plot:
# best effort), configures and builds the release tree (build/release), then
# runs examples/train_cnn with ARGS passed through (--help lists them). The
# curve goes to build/release/train_cnn unless ARGS name another --out.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CG_ROOT"

build=build/release
cg_ensure_deps
cg_ensure_bench_deps
cg_configure "$build" Release ""
cg_build "$build" --target train_cnn

out=(--out "$build/train_cnn")
for arg in "$@"; do
    case $arg in --out | --out=*) out=() ;; esac
done
echo "train-cnn: $build/examples/train_cnn ${out[*]} $*"
exec "$build/examples/train_cnn" "${out[@]}" "$@"
