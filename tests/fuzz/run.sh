#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a libFuzzer target of a fuzz tree (docs/testing.md, "Fuzzing"):
#
#   bash tests/fuzz/run.sh BUILD_DIR [SECONDS] [JOBS] [TARGET]
#
# TARGET is fuzz_grad_filter (the default; seed corpus tests/fuzz/corpus) or
# fuzz_conv2d (tests/fuzz/corpus_conv2d). First replays the checked-in seed
# corpus (-runs=0), then fuzzes for SECONDS (default 45) with a fixed seed
# (CONVGRAD_FUZZ_SEED, default 1) from that corpus. New corpus inputs go to a
# temporary directory (deleted after), never into the repository; a failing
# input is written to BUILD_DIR/fuzz-artifacts/ (fuzz_conv2d's with the
# prefix fuzz_conv2d-). JOBS > 1 runs that many fuzzers in parallel (-fork),
# for long runs by hand. libFuzzer's full output goes to BUILD_DIR/fuzz.log
# (fuzz_conv2d: BUILD_DIR/fuzz_conv2d.log); the last lines (or a failure's
# report) are printed.
set -uo pipefail
dir=${1:?usage: run.sh BUILD_DIR [SECONDS] [JOBS] [TARGET]}
secs=${2:-45}
jobs=${3:-1}
target=${4:-fuzz_grad_filter}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "$target" in
fuzz_grad_filter)
    corpus=$here/corpus
    log=$dir/fuzz.log
    prefix=$dir/fuzz-artifacts/
    ;;
fuzz_conv2d)
    corpus=$here/corpus_conv2d
    log=$dir/fuzz_conv2d.log
    prefix=$dir/fuzz-artifacts/fuzz_conv2d-
    ;;
*)
    echo "unknown fuzz target '$target' (fuzz_grad_filter or fuzz_conv2d)" >&2
    exit 2
    ;;
esac
bin=$dir/tests/fuzz/$target
if [ ! -x "$bin" ]; then
    echo "no $bin: configure with -DCMAKE_C_COMPILER=clang -DCONVGRAD_BUILD_FUZZ=ON and build" \
        "target $target first" >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/convgrad-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/fuzz-artifacts"
opts=(-max_len=256 -timeout=60 -rss_limit_mb=4096 -print_final_stats=1
    "-artifact_prefix=$prefix")
: >"$log"

# run TITLE ARGS...: one libFuzzer run, its output appended to the log.
run() {
    local title=$1 rc start
    shift
    echo "--- $title" | tee -a "$log"
    start=$(wc -l <"$log")
    "$bin" "${opts[@]}" "$@" >>"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "libFuzzer failed (exit $rc); the end of $log:"
        tail -n 120 "$log"
        ls -l "$dir/fuzz-artifacts"
        return "$rc"
    fi
    # the last lines of this run's statistics (a -fork run prints others)
    tail -n +"$((start + 1))" "$log" |
        grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|#[0-9]+: cov|Done [0-9]+ runs|INFO: exiting|stat::(number_of_executed_units|peak_rss_mb))' |
        tail -n 4
}

run "$target: seed corpus: $(find "$corpus" -type f | wc -l) inputs, once each" -runs=0 "$corpus" || exit 1
fork=()
[ "$jobs" -gt 1 ] && fork=(-fork="$jobs" -ignore_crashes=0)
run "$target: fuzzing ${secs} s, seed ${CONVGRAD_FUZZ_SEED:-1}${fork:+, $jobs jobs}" \
    -seed="${CONVGRAD_FUZZ_SEED:-1}" -max_total_time="$secs" "${fork[@]}" "$work" "$corpus" || exit 1
echo "fuzz ($target): no failure"
