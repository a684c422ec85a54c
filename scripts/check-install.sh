#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs a convgrad build into a temporary prefix and builds and runs
# tests/install_consumer against it, the way a user's project would find it:
# find_package(convgrad) through CMAKE_PREFIX_PATH, linking convgrad::convgrad.
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
tmp=$(mktemp -d "${TMPDIR:-/tmp}/convgrad-install.XXXXXX")
if [ "${CONVGRAD_KEEP_TMP:-0}" = 1 ]; then
    echo "check-install: keeping $tmp"
else
    trap 'rm -rf "$tmp"' EXIT
fi
prefix=$tmp/prefix

if [ ! -f "$build/CMakeCache.txt" ]; then
    cg_configure "$build" Release ""
fi
cg_build "$build" --target convgrad

echo "check-install: cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix"

# What a user gets: the header, the library and the package files.
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
[ "$fail" = 0 ] || { echo "check-install: FAIL (incomplete install)"; exit 1; }

# A sanitizer tree installs an instrumented library: the consumer needs the
# same runtime.
sanitize=$(sed -n 's/^CONVGRAD_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt")
flags=
case "$sanitize" in
address) flags="-fsanitize=address,undefined" ;;
thread) flags="-fsanitize=thread" ;;
esac

# Only the temporary prefix may provide convgrad: no package registry.
cmake -S "$CG_ROOT/tests/install_consumer" -B "$tmp/consumer" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
found=$(sed -n 's/^convgrad_DIR:[A-Z]*=//p' "$tmp/consumer/CMakeCache.txt")
case "$found" in
"$prefix"/*) echo "check-install: find_package(convgrad) used $found" ;;
*)
    echo "check-install: FAIL: find_package(convgrad) used '$found', not the temporary prefix"
    exit 1
    ;;
esac
cmake --build "$tmp/consumer" -j"$(nproc)"

# The consumer must load the installed library, not the build tree's.
if command -v ldd >/dev/null 2>&1; then
    lib=$(ldd "$tmp/consumer/consumer" | awk '/libconvgrad/ {print $3}')
    if [ -n "$lib" ]; then
        case "$lib" in
        "$prefix"/*) echo "check-install: consumer loads $lib" ;;
        *)
            echo "check-install: FAIL: consumer loads '$lib', not the installed library"
            exit 1
            ;;
        esac
    fi
fi

"$tmp/consumer/consumer"
echo "check-install: PASS"
