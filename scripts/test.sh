#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every test, from a clean clone on a fresh Debian 12 machine:
#
#   bash scripts/test.sh
#
#  1. installs the build's packages if any is missing (apt-get; see common.sh);
#  2. configures and builds four trees and runs ctest in each:
#       build/release  Release
#       build/portable Release, -DCONVGRAD_X86_KERNELS=OFF (the reference
#                      kernels only, docs/kernels.md)
#       build/asan     RelWithDebInfo, -DCONVGRAD_SANITIZE=address (ASan + UBSan)
#       build/tsan     RelWithDebInfo, -DCONVGRAD_SANITIZE=thread  (TSan)
#     (the vendor card's two examples, short train_cnn runs on both data
#     sets and, on 2 and 3 MPI ranks, convgrad_mpi's tests and a short
#     train_cnn_mpi run are ctest tests too); runs the release tree's ctest twice more, with
#     CONVGRAD_ISA=avx2 (with an AMD Zen 3's caches, CONVGRAD_CACHES) and
#     CONVGRAD_ISA=ref (the narrower kernel sets; on a
#     CPU without them the library falls back and says so); and runs the two
#     examples once more in the open in the
#     release tree with the full default train_cnn run (it fails below its
#     stated held-out accuracy), and a 30 s fixed-seed convgrad-stress run in
#     the asan and tsan trees (the tsan tree's ctest leaves out the
#     benchmark's runs, the 2-rank training, the single-threaded kernel
#     and packed GEMM tests, the training example's command-line checks and
#     second data set, and the limits' checks); the Python package's pytest suite and a
#     short Fashion-MNIST training in the release tree
#     (scripts/test-python.sh); ctest also checks the version and that the
#     shared libraries export exactly their headers' functions;
#  3. installs the release tree into a temporary prefix and builds a consumer
#     against it with CMake's find_package and with pkg-config, and an MPI
#     consumer both ways, run on 2 ranks (scripts/check-install.sh); builds the API reference in build/release
#     (target docs), which must have no doxygen warning (an undocumented
#     public name); and checks that a plain cmake build without Criterion,
#     doxygen and MPI works and skips them (scripts/check-plain-build.sh);
#  4. builds the two libFuzzer targets with clang in build/fuzz and runs each:
#     its seed corpus once, then a fixed seed for 45 s (fuzz_grad_filter) and
#     25 s (fuzz_conv2d) (tests/fuzz/run.sh): about as many inputs as 30 and
#     20 s ran before the x86 kernels' ASan checks became calls (docs/testing.md).
#
# Prints a time per stage and ends with one line, 'N passed, N failed'
# (', N skipped' when a failed stage kept later ones from running): each ctest
# test counts once, and so does every other stage. Exits non-zero on any
# failure. CONVGRAD_TREES="release asan" runs a subset of the trees (the
# install check needs release; "portable" is the tree without x86 kernels,
# "fuzz" the libFuzzer tree).
set -uo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CG_ROOT" || exit 1

# Sanitizer reports end the run with a stack; values already set are kept.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# ctest runs as many tests at once as there are CPUs: most tests spend much of their time
# on one thread (the double reference, the checks), and the sanitizer trees'
# suites took a quarter to a third less time so (asan 214 -> 136 s).
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$(nproc)}

trees=${CONVGRAD_TREES:-release portable asan tsan fuzz}
logdir=$CG_ROOT/build/logs
mkdir -p "$logdir"

passed=0
failed=0
skipped=0
summary=()
release_built=0

now_ms() { date +%s%3N; }
seconds_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1fs", (b - a) / 1000 }'; }

# note STATUS NAME TIME: one line of the final table.
note() { summary+=("$(printf '%-7s %-46s %s' "$1" "$2" "$3")"); }

# stage NAME COMMAND...: runs one counted stage, timed.
stage() {
    local name=$1
    shift
    echo
    echo "==> $name"
    local t0 rc
    t0=$(now_ms)
    "$@"
    rc=$?
    local t
    t=$(seconds_since "$t0")
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        echo "<== $name: PASS ($t)"
        note PASS "$name" "$t"
    else
        failed=$((failed + 1))
        echo "<== $name: FAIL, exit $rc ($t)"
        note FAIL "$name" "$t"
    fi
    return "$rc"
}

skip() {
    skipped=$((skipped + 1))
    echo "--- $1: skipped ($2)"
    note SKIP "$1" "($2)"
}

# The release tree's suite runs once more under each of these caps; the
# AVX2 run with an AMD Zen 3's caches (CONVGRAD_CACHES: L1, L2, L3), so
# that the plans such a CPU makes (its blocking, which layers pack as they
# go) run on any machine, beside the kernels.
ISA_CAPS="avx2 ref"
AVX2_CACHES=32K,512K,32M
# isa_env ISA: the environment of the run capped at ISA, as env(1) takes it.
isa_env() {
    echo "CONVGRAD_ISA=$1"
    if [ "$1" = avx2 ]; then echo "CONVGRAD_CACHES=$AVX2_CACHES"; fi
}
isa_stage_name() { echo "ctest ($1, $(isa_env "$2" | paste -sd ' '))"; }
skip_isa_stages() {
    local isa
    for isa in $ISA_CAPS; do
        skip "$(isa_stage_name "$1" "$isa")" "$2"
    done
}

is_sanitized() { [ "$1" = asan ] || [ "$1" = tsan ]; }

skip_examples() {
    local ex
    for ex in card_shared_fp32 card_private_fp32 train_cnn; do
        skip "$ex ($1)" "$2"
    done
    skip "python package ($1)" "$2"
}

# ctest_stage TREE [ISA]: runs ctest, with isa_env ISA when given; each
# test counts once.
ctest_stage() {
    local tree=$1 isa=${2:-} name="ctest ($1)" log=$logdir/ctest-$1.log
    local env_isa=() label_filter=()
    if [ "$tree" = tsan ]; then
        # TSan looks for races in the library, which its own tests and
        # convgrad_mpi's drive: the benchmark's runs (label bench) and the
        # 2-rank training took a third of this tree's time (160 of 411 s),
        # and the kernels' and the packed GEMM's tests, which call them on
        # one thread (nothing for TSan to see), a quarter of the rest (77 of
        # 297 s on an Intel Xeon); so do the training example's command-line
        # checks and its second data set (the same training loop as
        # example_train_cnn_quick) and the limits' checks (validation, and
        # the paths test_conv2d drives): 44 of 252 s. The other trees run
        # them all
        label_filter=(-LE bench -E
            '^(train_cnn_mpi_quick|test_kernel_list|test_packed_gemm|example_train_cnn_cli|train_cnn_fashion_quick|test_limits)$')
    fi
    if [ -n "$isa" ]; then
        # the capped reruns are for the kernels: the benchmark's runs (label
        # bench) run on the best set here and on the reference in portable
        label_filter=(-LE bench)
        name=$(isa_stage_name "$tree" "$isa")
        log=$logdir/ctest-$tree-$isa.log
        mapfile -t env_isa < <(isa_env "$isa")
    fi
    echo
    echo "==> $name"
    local t0 rc
    t0=$(now_ms)
    (cd "build/$tree" && env "${env_isa[@]}" ctest --output-on-failure --no-tests=error "${label_filter[@]}") 2>&1 |
        tee "$log"
    rc=${PIPESTATUS[0]}
    local t
    t=$(seconds_since "$t0")
    # "100% tests passed, 0 tests failed out of 7"
    local line total bad
    line=$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        bad=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
        total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
        passed=$((passed + total - bad))
        failed=$((failed + bad))
        # ctest failing with every test passed (it should not): count that too.
        if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then failed=$((failed + 1)); fi
        echo "<== $name: $((total - bad)) of $total passed, exit $rc ($t)"
        note "$([ "$rc" -eq 0 ] && echo PASS || echo FAIL)" "$name: $((total - bad))/$total" "$t"
    else
        failed=$((failed + 1))
        echo "<== $name: FAIL, exit $rc, no ctest summary: no test found, or ctest died ($t)"
        note FAIL "$name: no test result" "$t"
    fi
}

# The sanitizer trees also run convgrad-stress for a while with a fixed seed
# (docs/testing.md, "Stress testing: convgrad-stress"): concurrent launches on
# random masks under ASan+UBSan and TSan. CONVGRAD_STRESS_SECONDS changes
# the time (default 30).
STRESS_SEED=0x5eed57e55
stress_name() { echo "convgrad-stress ${CONVGRAD_STRESS_SECONDS:-30} s ($1)"; }

# stress_run EXE LOG: the run, its output kept in LOG too.
stress_run() {
    "$1" --seconds "${CONVGRAD_STRESS_SECONDS:-30}" --seed "$STRESS_SEED" 2>&1 | tee "$2"
    return "${PIPESTATUS[0]}"
}

# build/fuzz: the libFuzzer targets, built with clang (docs/testing.md, "Fuzzing"):
# fuzz_grad_filter, then fuzz_conv2d, each its own stage.
# CONVGRAD_FUZZ_SECONDS changes fuzz_grad_filter's time (default 45),
# CONVGRAD_FUZZ_CONV2D_SECONDS fuzz_conv2d's (default 25).
fuzz_name() { echo "fuzz: corpus + ${CONVGRAD_FUZZ_SECONDS:-45} s (fuzz)"; }
fuzz_conv2d_name() { echo "fuzz_conv2d: corpus + ${CONVGRAD_FUZZ_CONV2D_SECONDS:-25} s (fuzz)"; }
fuzz_tree() {
    local dir=build/fuzz
    if ! stage "configure (fuzz)" cg_configure "$dir" RelWithDebInfo "" -DCMAKE_C_COMPILER=clang \
        -DCONVGRAD_BUILD_TESTS=OFF -DCONVGRAD_BUILD_EXAMPLES=OFF -DCONVGRAD_BUILD_BENCHMARKS=OFF \
        -DCONVGRAD_MPI=OFF \
        -DCONVGRAD_BUILD_FUZZ=ON; then
        skip "build (fuzz)" "configure failed"
        skip "$(fuzz_name)" "configure failed"
        skip "$(fuzz_conv2d_name)" "configure failed"
        return
    fi
    if ! stage "build (fuzz)" cg_build "$dir" --target fuzz_grad_filter fuzz_conv2d; then
        skip "$(fuzz_name)" "build failed"
        skip "$(fuzz_conv2d_name)" "build failed"
        return
    fi
    stage "$(fuzz_name)" bash tests/fuzz/run.sh "$dir" "${CONVGRAD_FUZZ_SECONDS:-45}"
    cp "$dir/fuzz.log" "$logdir/fuzz.log" 2>/dev/null
    stage "$(fuzz_conv2d_name)" bash tests/fuzz/run.sh "$dir" \
        "${CONVGRAD_FUZZ_CONV2D_SECONDS:-25}" 1 fuzz_conv2d
    cp "$dir/fuzz_conv2d.log" "$logdir/fuzz_conv2d.log" 2>/dev/null
}

run_tree() {
    local tree=$1 type sanitize
    case "$tree" in
    fuzz)
        fuzz_tree
        return
        ;;
    release | portable) type=Release sanitize= ;;
    asan) type=RelWithDebInfo sanitize=address ;;
    tsan) type=RelWithDebInfo sanitize=thread ;;
    *)
        echo "unknown tree '$tree' (release, portable, asan, tsan or fuzz)"
        failed=$((failed + 1))
        return
        ;;
    esac
    local dir=build/$tree extra=()
    [ "$tree" = portable ] && extra=(-DCONVGRAD_X86_KERNELS=OFF)
    if ! stage "configure ($tree)" cg_configure "$dir" "$type" "$sanitize" "${extra[@]}"; then
        skip "build ($tree)" "configure failed"
        skip "ctest ($tree)" "configure failed"
        [ "$tree" = release ] && skip_isa_stages "$tree" "configure failed"
        [ "$tree" = release ] && skip_examples "$tree" "configure failed"
        is_sanitized "$tree" && skip "$(stress_name "$tree")" "configure failed"
        return
    fi
    if ! stage "build ($tree)" cg_build "$dir"; then
        skip "ctest ($tree)" "build failed"
        [ "$tree" = release ] && skip_isa_stages "$tree" "build failed"
        [ "$tree" = release ] && skip_examples "$tree" "build failed"
        is_sanitized "$tree" && skip "$(stress_name "$tree")" "build failed"
        return
    fi
    [ "$tree" = release ] && release_built=1
    ctest_stage "$tree"
    case "$tree" in
    release)
        # the narrower kernel sets on the same tree (docs/kernels.md), then
        # the examples once more in the open, so their printed result is in
        # the log (ctest runs them in every tree)
        local isa ex
        for isa in $ISA_CAPS; do
            ctest_stage "$tree" "$isa"
        done
        for ex in card_shared_fp32 card_private_fp32; do
            stage "$ex ($tree)" "$dir/examples/$ex"
        done
        stage "train_cnn ($tree)" "$dir/examples/train_cnn" --out "$dir/train_cnn"
        stage "python package ($tree)" bash scripts/test-python.sh "$dir"
        ;;
    portable) ;;
    *)
        stage "$(stress_name "$tree")" stress_run "$dir/tests/stress/convgrad-stress" \
            "$logdir/stress-$tree.log"
        ;;
    esac
}

# The API reference (target docs): doxygen on include/convgrad.h must warn
# about nothing, e.g. no undocumented public name; its warnings are printed.
docs_check() {
    local dir=$1 log=$1/docs/doxygen-warnings.log
    rm -f "$log"
    cg_build "$dir" --target docs || return 1
    [ -f "$log" ] || { echo "no $log: did doxygen run?"; return 1; }
    if [ -s "$log" ]; then
        cp "$log" "$logdir/doxygen-warnings.log"
        echo "doxygen warnings ($log):"
        cat "$log"
        return 1
    fi
    echo "no doxygen warning; the reference is $dir/docs/html/index.html"
}

total_t0=$(now_ms)
echo "==> packages"
t0=$(now_ms)
if ! cg_ensure_deps; then
    echo "<== packages: FAIL ($(seconds_since "$t0"))"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "<== packages: done ($(seconds_since "$t0"))"

for tree in $trees; do
    run_tree "$tree"
done

case " $trees " in
*" release "*)
    if [ "$release_built" = 1 ]; then
        stage "install + consumers (release)" bash scripts/check-install.sh build/release
        stage "API reference, docs (release)" docs_check build/release
    else
        skip "install + consumers (release)" "release build failed"
        skip "API reference, docs (release)" "release build failed"
    fi
    stage "plain build, no Criterion" bash scripts/check-plain-build.sh
    ;;
esac

echo
echo "==> summary (logs in build/logs; total $(seconds_since "$total_t0"))"
printf '  %s\n' "${summary[@]}"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ "$skipped" -eq 0 ]
