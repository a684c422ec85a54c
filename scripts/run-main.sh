#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job, from a clean clone on a fresh Debian 12 machine:
#
#   bash scripts/run-main.sh [ARGS...]
#
# Installs the build's packages if any is missing, and the benchmark's (oneDNN
# and gnuplot: CG_BENCH_PACKAGES, best effort), configures and builds the
# release tree (build/release), then runs the benchmark, convgrad-bench, from
# the repository's root with ARGS passed through. Its results go to
# ./convgrad-bench-out (under the root) unless ARGS give another --out (a
# relative one is under the root too); it ends by naming that directory. The
# exit status is convgrad-bench's (0 every check passed, 1 a failure at run
# time, 2 bad usage), or, when installing or building fails, that step's.
# --help prints this text, and convgrad-bench's own when it is built.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CG_ROOT"
build=build/release
tool=$build/benchmarks/convgrad-bench

# --help: the text above, then the tool's own once it is built
if printf '%s\n' "$@" | grep -qxE -- '--help|-h'; then
    sed -n '3,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    [ ! -x "$tool" ] || { echo && "$tool" --help; }
    exit 0
fi

cg_ensure_deps
cg_ensure_bench_deps
cg_configure "$build" Release ""
cg_build "$build"

if [ -z "$(cg_target_executable "$build" convgrad-bench)" ]; then
    echo "run-main: $build has no convgrad-bench target (CONVGRAD_BUILD_BENCHMARKS=OFF?)" >&2
    exit 1
fi
echo "run-main: $tool $*"
exec "$tool" "$@"
