#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job, from a clean clone on a fresh Debian 12 machine:
#
#   bash scripts/run-main.sh [ARGS...]
#
# Installs the build's packages if any is missing, and the benchmark's (oneDNN
# and gnuplot: CG_BENCH_PACKAGES, best effort), configures and builds the
# release tree (build/release), then runs the benchmark, convgrad-bench, with
# ARGS passed through (--help lists them; results go to build/release/bench).
# Until the build defines a convgrad-bench target, it runs the vendor card's
# two examples instead (and ARGS are ignored).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CG_ROOT"

build=build/release
cg_ensure_deps
cg_ensure_bench_deps
cg_configure "$build" Release ""
cg_build "$build"

bench=$(cg_target_executable "$build" convgrad-bench)
if [ -n "$bench" ]; then
    echo "run-main: $bench $*"
    exec "$bench" "$@"
fi

echo "run-main: no convgrad-bench target in $build yet; running the card's examples"
[ $# -eq 0 ] || echo "run-main: arguments ignored: $*"
status=0
for ex in card_shared_fp32 card_private_fp32; do
    echo
    echo "==> $ex"
    "$build/examples/$ex" || status=1
done
exit "$status"
