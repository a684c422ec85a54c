# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by scripts/test.sh, scripts/run-main.sh and scripts/check-install.sh:
# the packages the build needs and the one way every tree is configured.
# Source it; it defines functions only (and CG_ROOT).

CG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# clang and libclang-rt-14-dev (libFuzzer's runtime): the fuzz tree, tests/fuzz;
# doxygen: the API reference (target docs); python3-*: the Python package's
# stage (scripts/test-python.sh: a venv over Debian's numpy, torch and pytest;
# python3-wheel for pip's --no-build-isolation build); zlib1g-dev and
# dataset-fashion-mnist: train_cnn's and train_torch.py's Fashion-MNIST runs;
# libopenmpi-dev and openmpi-bin (mpirun): convgrad_mpi and its tests (docs/mpi.md).
CG_APT_PACKAGES=(build-essential cmake pkg-config libopenblas-dev libcriterion-dev
    clang libclang-rt-14-dev doxygen zlib1g-dev dataset-fashion-mnist
    python3-numpy python3-torch python3-pytest python3-venv python3-wheel
    libopenmpi-dev openmpi-bin)
# The benchmark's peer and plots (oneDNN, gnuplot): installed by scripts/run-main.sh
# only (cg_ensure_bench_deps); the build and the tests do without them.
CG_BENCH_PACKAGES=(libdnnl-dev gnuplot-nox)

# Prints the packages (or, off Debian, the tools) that are missing, one a line.
cg_missing_packages() {
    if command -v dpkg-query >/dev/null 2>&1; then
        local p
        for p in "${CG_APT_PACKAGES[@]}"; do
            dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
                echo "$p"
        done
    else
        local t
        for t in cc make cmake pkg-config doxygen; do
            command -v "$t" >/dev/null 2>&1 || echo "$t"
        done
        if command -v pkg-config >/dev/null 2>&1; then
            pkg-config --exists openblas || echo "openblas (pkg-config module)"
            pkg-config --exists criterion || echo "criterion (pkg-config module)"
        fi
    fi
}

# Installs the build's packages when any is missing; does nothing when all are
# there. As root it runs apt-get itself, otherwise through sudo when there is
# one; else it says what to install and fails.
cg_ensure_deps() {
    local missing
    missing=$(cg_missing_packages | tr '\n' ' ')
    missing=${missing% }
    if [ -z "$missing" ]; then
        echo "packages: all present (${CG_APT_PACKAGES[*]})"
        return 0
    fi
    echo "packages: missing: $missing"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "no apt-get here: install the equivalents of ${CG_APT_PACKAGES[*]}" \
            "(a C compiler, make, CMake >= 3.18, pkg-config, OpenBLAS, Criterion, doxygen, zlib," \
            "Fashion-MNIST's gzip'd idx files)" \
            "and rerun" >&2
        return 1
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "not root and no sudo: as root, run" >&2
            echo "  apt-get update && apt-get install -y ${CG_APT_PACKAGES[*]}" >&2
            return 1
        fi
    fi
    "${sudo[@]}" apt-get update &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${CG_APT_PACKAGES[@]}"
}

# Installs the benchmark's optional packages (CG_BENCH_PACKAGES) when any is
# missing. Best effort: convgrad-bench builds and runs without them (it says
# "oneDNN: not available" / "plots skipped"), so a failure here only warns.
cg_ensure_bench_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "packages (benchmark): not a Debian system; install oneDNN and gnuplot" \
            "for the oneDNN peer and the plots"
        return 0
    fi
    local p missing=()
    for p in "${CG_BENCH_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "packages (benchmark): all present (${CG_BENCH_PACKAGES[*]})"
        return 0
    fi
    echo "packages (benchmark): missing: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "warning: not root and no sudo; the benchmark runs without ${missing[*]}" >&2
            return 0
        fi
    fi
    if ! { "${sudo[@]}" apt-get update &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; }; then
        echo "warning: could not install ${missing[*]}; the benchmark runs without them" >&2
    fi
    return 0
}

# cg_configure BUILD_DIR BUILD_TYPE SANITIZE [more cmake args...]
# Every option is passed each time, so a tree never keeps a stale cached value.
# The optional parts are asked for ON, not the default AUTO: with a package
# missing, configuring fails instead of quietly building less
# (cmake/optional.cmake).
cg_configure() {
    local dir=$1 type=$2 sanitize=$3
    shift 3
    cmake -S "$CG_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DCONVGRAD_SANITIZE="$sanitize" \
        -DCONVGRAD_BUILD_TESTS=ON -DCONVGRAD_BUILD_EXAMPLES=ON -DCONVGRAD_BUILD_BENCHMARKS=ON \
        -DCONVGRAD_BUILD_DOCS=ON -DCONVGRAD_MPI=ON "$@"
}

# cg_tmpdir NAME: makes a temporary directory, its path in cg_tmp, removed when
# the script exits (CONVGRAD_KEEP_TMP=1 keeps it, and says where).
cg_tmpdir() {
    cg_tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    if [ "${CONVGRAD_KEEP_TMP:-0}" = 1 ]; then
        echo "$1: keeping $cg_tmp"
    else
        # shellcheck disable=SC2064 # the path is known now
        trap "rm -rf '$cg_tmp'" EXIT
    fi
}

cg_build() {
    cmake --build "$1" -j"$(nproc)" "${@:2}"
}

# Prints the path of the executable built for target $2 in tree $1, if the
# tree defines that target; prints nothing otherwise.
cg_target_executable() {
    local dir=$1 target=$2 targets
    # (Read it all first: grep -q on a pipe would stop cmake early, and
    # under pipefail that SIGPIPE would read as "no such target".)
    targets=$(cmake --build "$dir" --target help 2>/dev/null) || true
    grep -Eq "(^|[[:space:].])${target}([[:space:]:]|$)" <<<"$targets" || return 0
    find "$dir" -type f -name "$target" -perm -u+x 2>/dev/null | head -n 1
}
