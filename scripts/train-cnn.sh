#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trains the example CNN, from a clean clone on a fresh Debian 12 machine:
#
#   bash scripts/train-cnn.sh [ARGS...]
#
# Installs the build's packages if any is missing (and gnuplot, for the plot:
# best effort), configures and builds the release tree (build/release), then
# runs examples/train_cnn from the repository's root with ARGS passed through.
# The curve, its plot and metadata.csv go to ./train_cnn-out (under the root)
# unless ARGS give another --out (a relative one is under the root too); it
# ends by naming that directory. The exit status is train_cnn's (0 the target
# reached, 1 a failure at run time, such as the target missed, 2 bad usage),
# or, when installing or building fails, that step's.
# --help prints this text, and train_cnn's own when it is built.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CG_ROOT"
build=build/release
tool=$build/examples/train_cnn

# --help: the text above, then the tool's own once it is built
if printf '%s\n' "$@" | grep -qxE -- '--help|-h'; then
    sed -n '3,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    [ ! -x "$tool" ] || { echo && "$tool" --help; }
    exit 0
fi

cg_ensure_deps
cg_ensure_bench_deps
cg_configure "$build" Release ""
cg_build "$build" --target train_cnn

echo "train-cnn: $tool $*"
exec "$tool" "$@"
