#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Python package's stage, for a built tree:
#
#   bash scripts/test-python.sh BUILD_DIR
#
#  1. makes a venv in BUILD_DIR/venv from Debian's /usr/bin/python3 with the
#     system site-packages (numpy, torch, pytest come from Debian);
#  2. installs python/ into it (pip --no-build-isolation, from a copy in
#     BUILD_DIR/python-src so the source tree stays clean), recording
#     BUILD_DIR's libconvgrad.so as the library it loads (CONVGRAD_LIBRARY at
#     install time, docs/python.md);
#  3. runs pytest on python/tests (its summary line last; "no tests
#     collected" fails too);
#  4. runs examples/python/train_torch.py --quick: a few hundred Fashion-MNIST
#     images; it fails unless both runs' loss falls.
# Exits non-zero on any failure.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR (a configured and built tree)" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
library=$(find "$build" -maxdepth 1 -name 'libconvgrad.so' | head -n 1)
if [ -z "$library" ]; then
    echo "test-python: no $build/libconvgrad.so: build the tree (shared library) first" >&2
    exit 1
fi

venv=$build/venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
rm -rf "$build/python-src"
cp -r "$CG_ROOT/python" "$build/python-src"
CONVGRAD_LIBRARY=$library "$venv/bin/pip" install --quiet --no-build-isolation --no-deps \
    --force-reinstall "$build/python-src"
# The tests must see the installed package, not a variable left in the environment.
unset CONVGRAD_LIBRARY CONVGRAD_CORE_MASK
(cd "$build" && "$venv/bin/python" -c \
    'import convgrad; print("convgrad", convgrad.__version__, "from", convgrad.__file__, "on", convgrad.LIBRARY_PATH)')

# pytest exits 5 when it collects nothing: that fails this stage as any failure does.
(cd "$build" && "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE "$CG_ROOT/python/tests")

(cd "$build" && "$venv/bin/python" "$CG_ROOT/examples/python/train_torch.py" --quick \
    --out "$build/train_torch")
