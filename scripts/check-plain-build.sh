#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A plain `cmake -S . -B DIR && cmake --build DIR` needs only a C compiler,
# pthreads and OpenBLAS: tests, the API reference (and the benchmark's oneDNN
# peer) are built when their packages are found and skipped with a message
# otherwise (cmake/optional.cmake). Checked on a machine that has those
# packages by hiding them from the build:
#   Criterion  pkg-config, the only way the build looks for it, sees nothing
#              but openblas.pc (PKG_CONFIG_LIBDIR);
#   doxygen    -DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON.
# Then configuring must say both are skipped, the default build (library,
# examples, benchmark) must succeed, and asking for the tests
# (-DCONVGRAD_BUILD_TESTS=ON) must fail with a message naming Criterion.
# Likewise for convgrad_mpi with MPI hidden (-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON,
# configure only): the default skips it, -DCONVGRAD_MPI=ON fails naming MPI.
#
#   scripts/check-plain-build.sh
#
# The temporary trees are removed on exit (CONVGRAD_KEEP_TMP=1 keeps them).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

cg_tmpdir convgrad-plain
tmp=$cg_tmp

fail() {
    echo "check-plain-build: FAIL: $*"
    exit 1
}

mkdir "$tmp/pkgconfig"
ln -s "$(pkg-config --variable=pcfiledir openblas)/openblas.pc" "$tmp/pkgconfig/openblas.pc"
export PKG_CONFIG_LIBDIR=$tmp/pkgconfig
unset PKG_CONFIG_PATH
pkg-config --exists openblas || fail "openblas.pc is not visible through $PKG_CONFIG_LIBDIR"
! pkg-config --exists criterion || fail "criterion.pc is still visible"
hide=(-DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON)

# expect_line LOG TEXT: the configure log has a line with TEXT.
expect_line() {
    if grep -F -- "$2" "$1"; then
        return 0
    fi
    cat "$1"
    fail "no line '$2' in $1"
}

echo "check-plain-build: cmake -S $CG_ROOT -B $tmp/build (Criterion and doxygen hidden)"
cmake -S "$CG_ROOT" -B "$tmp/build" "${hide[@]}" >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log"; fail "a plain configure failed"; }
expect_line "$tmp/configure.log" "convgrad: tests: skipped, Criterion"
expect_line "$tmp/configure.log" "convgrad: API reference (target docs): skipped, doxygen"
echo "check-plain-build: cmake --build $tmp/build"
cg_build "$tmp/build" >"$tmp/build.log" 2>&1 ||
    { tail -n 40 "$tmp/build.log"; fail "a plain build failed"; }
compgen -G "$tmp/build/libconvgrad.*" >/dev/null || fail "no libconvgrad in $tmp/build"
echo "check-plain-build: built $(cd "$tmp/build" && echo libconvgrad.*)"

echo "check-plain-build: cmake ... -DCONVGRAD_BUILD_TESTS=ON must fail"
if cmake -S "$CG_ROOT" -B "$tmp/build-tests" -DCONVGRAD_BUILD_TESTS=ON "${hide[@]}" \
    >"$tmp/configure-tests.log" 2>&1; then
    fail "configuring with -DCONVGRAD_BUILD_TESTS=ON and no Criterion succeeded"
fi
expect_line "$tmp/configure-tests.log" "CONVGRAD_BUILD_TESTS=ON, but Criterion"

# convgrad_mpi the same way: without MPI, AUTO skips it and says so, ON fails.
no_mpi=(-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCONVGRAD_BUILD_TESTS=OFF)
echo "check-plain-build: MPI hidden: the default skips convgrad_mpi, -DCONVGRAD_MPI=ON fails"
cmake -S "$CG_ROOT" -B "$tmp/build-no-mpi" "${no_mpi[@]}" "${hide[@]}" \
    >"$tmp/configure-no-mpi.log" 2>&1 ||
    { cat "$tmp/configure-no-mpi.log"; fail "a configure without MPI failed"; }
expect_line "$tmp/configure-no-mpi.log" "convgrad: convgrad_mpi (MPI): skipped, MPI"
if cmake -S "$CG_ROOT" -B "$tmp/build-mpi-on" -DCONVGRAD_MPI=ON "${no_mpi[@]}" "${hide[@]}" \
    >"$tmp/configure-mpi-on.log" 2>&1; then
    fail "configuring with -DCONVGRAD_MPI=ON and no MPI succeeded"
fi
expect_line "$tmp/configure-mpi-on.log" "CONVGRAD_MPI=ON, but MPI"
echo "check-plain-build: PASS"
