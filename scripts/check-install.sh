#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs a convgrad build into a temporary prefix and builds and runs
# tests/install_consumer against it twice, the two ways a user's project would
# find it: find_package(convgrad) through CMAKE_PREFIX_PATH, linking
# convgrad::convgrad; and `cc ... $(pkg-config --cflags --libs convgrad)`
# through PKG_CONFIG_PATH. Each consumer checks that cg_version() is the
# version its package (CMake's, convgrad.pc) gave and the header's. When the
# build has convgrad_mpi (CONVGRAD_MPI on), tests/install_consumer_mpi is
# built the same two ways (find_package(convgrad COMPONENTS mpi), and
# pkg-config convgrad-mpi) and run on 2 ranks under mpirun (loopback).
#
#   scripts/check-install.sh [BUILD_DIR]     (default: build/release)
#
# A BUILD_DIR that is not configured yet is configured (Release) and built.
# Exits non-zero on any failure; the temporary prefix is removed on exit
# (set CONVGRAD_KEEP_TMP=1 to keep it).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build=${1:-$CG_ROOT/build/release}
cg_tmpdir convgrad-install
tmp=$cg_tmp
prefix=$tmp/prefix

if [ ! -f "$build/CMakeCache.txt" ]; then
    cg_configure "$build" Release ""
fi
# The MPI component is part of this check when the tree builds it.
has_mpi=0
targets=$(cmake --build "$build" --target help 2>/dev/null) || true
if grep -Eq '(^|[[:space:].])convgrad_mpi([[:space:]:]|$)' <<<"$targets"; then
    has_mpi=1
    cg_build "$build" --target convgrad convgrad_mpi
else
    cg_build "$build" --target convgrad
fi

echo "check-install: cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix"

# What a user gets: the header, the library, the package files and the licence.
fail=0
expect() {
    if compgen -G "$prefix/$1" >/dev/null; then
        echo "  found    $1"
    else
        echo "  MISSING  $1"
        fail=1
    fi
}
expect include/convgrad.h
expect "lib*/libconvgrad.*"
expect "lib*/cmake/convgrad/convgradConfig.cmake"
expect "lib*/cmake/convgrad/convgradConfigVersion.cmake"
expect "lib*/cmake/convgrad/convgradTargets.cmake"
expect "lib*/pkgconfig/convgrad.pc"
expect share/doc/convgrad/LICENSE
if [ "$has_mpi" = 1 ]; then
    expect include/convgrad_mpi.h
    expect "lib*/libconvgrad_mpi.*"
    expect "lib*/cmake/convgrad/convgradMpiTargets.cmake"
    expect "lib*/pkgconfig/convgrad-mpi.pc"
fi
[ "$fail" = 0 ] || { echo "check-install: FAIL (incomplete install)"; exit 1; }

# A sanitizer tree installs an instrumented library: the consumer needs the
# same runtime.
sanitize=$(sed -n 's/^CONVGRAD_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
flags=
case "$sanitize" in
address) flags="-fsanitize=address,undefined" ;;
thread) flags="-fsanitize=thread" ;;
esac

# check_loads EXE [LIBRARY]: EXE must load the installed LIBRARY (default
# libconvgrad), not the build tree's.
check_loads() {
    command -v ldd >/dev/null 2>&1 || return 0
    local lib
    lib=$(ldd "$1" | awk -v name="${2:-libconvgrad}" 'index($1, name ".so") == 1 {print $3}')
    [ -n "$lib" ] || return 0
    # (pkg-config's libdir reads PREFIX/lib/pkgconfig/../../lib.)
    lib=$(readlink -f "$lib")
    case "$lib" in
    "$(readlink -f "$prefix")"/*) echo "check-install: $(basename "$1") loads $lib" ;;
    *)
        echo "check-install: FAIL: $(basename "$1") loads '$lib', not the installed library"
        exit 1
        ;;
    esac
}

# configure_consumer SOURCE_DIR BUILD_DIR: a consumer project configured
# against the prefix. Only the temporary prefix may provide convgrad: no
# package registry.
configure_consumer() {
    cmake -S "$1" -B "$2" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
}

echo
echo "check-install: consumer 1: CMake, find_package(convgrad)"
configure_consumer "$CG_ROOT/tests/install_consumer" "$tmp/consumer"
found=$(sed -n 's/^convgrad_DIR:[A-Z]*=//p' "$tmp/consumer/CMakeCache.txt")
case "$found" in
"$prefix"/*) echo "check-install: find_package(convgrad) used $found" ;;
*)
    echo "check-install: FAIL: find_package(convgrad) used '$found', not the temporary prefix"
    exit 1
    ;;
esac
cmake --build "$tmp/consumer" -j"$(nproc)"

check_loads "$tmp/consumer/consumer"
"$tmp/consumer/consumer"

echo
echo "check-install: consumer 2: pkg-config, cc \$(pkg-config --cflags --libs convgrad)"
# Only the prefix's convgrad.pc; the system's directories stay for openblas.pc
# (Requires.private).
pcdir=$(dirname "$(compgen -G "$prefix/lib*/pkgconfig/convgrad.pc" | head -n 1)")
export PKG_CONFIG_PATH=$pcdir
pkg-config --validate convgrad
found=$(pkg-config --variable=pcfiledir convgrad)
if [ "$found" != "$pcdir" ]; then
    echo "check-install: FAIL: pkg-config found convgrad.pc in '$found', not $pcdir"
    exit 1
fi
echo "check-install: pkg-config used $found/convgrad.pc"
pc_version=$(pkg-config --modversion convgrad)
# The static fields: what a libconvgrad.a would need as well.
static_libs=$(pkg-config --static --libs convgrad)
echo "check-install: pkg-config --static --libs convgrad: $static_libs"
case " $static_libs " in
*" -lopenblas "*" -lm "* | *" -lm "*" -lopenblas "*) ;;
*)
    echo "check-install: FAIL: the static link flags lack -lopenblas or -lm"
    exit 1
    ;;
esac
# A prefix off the loader's path: the consumer finds the library by its rpath,
# as a user's would.
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -std=c11 -Wall -Wextra -Werror $flags -DCONSUMER_PACKAGE_VERSION="\"$pc_version\"" \
    "$CG_ROOT/tests/install_consumer/main.c" -o "$tmp/consumer-pc" \
    $(pkg-config --cflags --libs convgrad) -Wl,-rpath,"$(pkg-config --variable=libdir convgrad)"
check_loads "$tmp/consumer-pc"
"$tmp/consumer-pc"

if [ "$has_mpi" = 1 ]; then
    # 2 ranks on loopback (shared memory), as root in CI.
    mpirun_2=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2)
    echo
    echo "check-install: consumer 3: CMake, find_package(convgrad COMPONENTS mpi)"
    configure_consumer "$CG_ROOT/tests/install_consumer_mpi" "$tmp/consumer-mpi"
    cmake --build "$tmp/consumer-mpi" -j"$(nproc)"
    check_loads "$tmp/consumer-mpi/consumer_mpi" libconvgrad_mpi
    "${mpirun_2[@]}" "$tmp/consumer-mpi/consumer_mpi"

    echo
    echo "check-install: consumer 4: pkg-config, cc \$(pkg-config --cflags --libs convgrad-mpi)"
    pkg-config --validate convgrad-mpi
    echo "check-install: pkg-config --cflags --libs convgrad-mpi: $(pkg-config --cflags --libs convgrad-mpi)"
    # shellcheck disable=SC2046 # pkg-config's output is a list of flags
    cc -std=c11 -Wall -Wextra -Werror $flags "$CG_ROOT/tests/install_consumer_mpi/main.c" \
        -o "$tmp/consumer-mpi-pc" $(pkg-config --cflags --libs convgrad-mpi) \
        -Wl,-rpath,"$(pkg-config --variable=libdir convgrad-mpi)"
    check_loads "$tmp/consumer-mpi-pc" libconvgrad_mpi
    "${mpirun_2[@]}" "$tmp/consumer-mpi-pc"
fi
echo "check-install: PASS"
