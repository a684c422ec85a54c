#!/bin/sh
# SPDX-License-Identifier: MIT
# A tool's command line against its --help (ctest bench_cli, example_train_cnn_cli,
# stress_cli):
#
#   sh tests/tool_cli.sh TOOL VERSION [--out [ARGS...]]
#
# --version prints "NAME VERSION" (VERSION: CMake's PROJECT_VERSION) and exits 0;
# --help mentions --version and states the exit statuses; an unknown option exits
# with the bad-usage status. With --out: an --out that cannot be made exits with
# the run-time failure status and a message naming it; then, given ARGS, TOOL ARGS
# run in an empty directory write ./NAME-out/metadata.csv and name that directory's
# absolute path.
set -u
tool=$1 version=$2
shift 2
name=$(basename "$tool")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "tool_cli: $name: FAIL: $*" >&2
    exit 1
}

out=$("$tool" --version)
rc=$?
[ "$rc" -eq 0 ] || fail "--version exited $rc"
[ "$out" = "$name $version" ] || fail "--version printed '$out', not '$name $version'"

help=$("$tool" --help) || fail "--help exited $?"
help=$(printf '%s\n' "$help" | tr -s ' \n' '  ')
case $help in *--version*) ;; *) fail "--help does not mention --version" ;; esac
code_for() { printf '%s\n' "$help" | sed -n "s/.*[^0-9]\([0-9][0-9]*\) on $1.*/\1/p"; }
usage=$(code_for "bad usage")
runtime=$(code_for "a failure at run time")
[ -n "$usage" ] || fail "--help states no 'N on bad usage' exit status"
[ -n "$runtime" ] || fail "--help states no 'N on a failure at run time' exit status"

"$tool" --bogus >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ "$rc" -eq "$usage" ] || fail "--bogus exited $rc, not $usage (bad usage, as --help says)"
grep -q -- --bogus "$tmp/stderr" || fail "--bogus: no message naming the option on stderr"

if [ "${1:-}" = --out ]; then
    shift
    : >"$tmp/file"
    "$tool" --out "$tmp/file/sub" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [ "$rc" -eq "$runtime" ] ||
        fail "an --out under a file exited $rc, not $runtime (a failure at run time)"
    grep -q "$tmp/file/sub" "$tmp/stderr" || fail "an --out under a file: no message naming it"
    if [ $# -gt 0 ]; then
        mkdir "$tmp/run"
        (cd "$tmp/run" && "$tool" "$@") >"$tmp/stdout" 2>"$tmp/stderr" ||
            fail "'$name $*' exited $? (stderr: $(tail -n 3 "$tmp/stderr"))"
        dir="$(cd "$tmp/run" && pwd -P)/$name-out"
        [ -s "$dir/metadata.csv" ] || fail "'$name $*' wrote no ./$name-out/metadata.csv"
        grep -q "$dir" "$tmp/stdout" || fail "'$name $*' does not name $dir"
    fi
fi
echo "tool_cli: $name: ok"
