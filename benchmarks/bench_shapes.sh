#!/bin/sh
# SPDX-License-Identifier: MIT
# ctest bench_shapes: convgrad-bench --shapes on a sample of benchdnn
# descriptors runs every layer of the file, checks them all ok, and writes the
# warm and interleaved figures, their shares of the FMA loop timed in their
# rounds, the roofline's columns and the kernel set in results.csv, the
# training step's phases' shares in training.csv, the memory bandwidth in the
# limits block and limits.csv, and the roofline; a malformed line exits 2 (bad
# usage) with a message naming the file and the line.
#
#   sh benchmarks/bench_shapes.sh BENCH SHAPES_FILE OUT_DIR
set -u
bench=$1 shapes=$2 out=$3
fail() {
    echo "bench_shapes: FAIL: $*" >&2
    exit 1
}

"$bench" --quick --shapes "$shapes" --reps 1 --masks 1 --dtype fp32 --no-plots \
    --out "$out" >"$out.stdout" 2>"$out.stderr" ||
    fail "the run exited $? (stderr: $(tail -n 3 "$out.stderr"))"
# every named layer of the file has its row
names=$(sed -n 's/.*n"\([^"]*\)".*/\1/p' "$shapes")
[ -n "$names" ] || fail "no n\"name\" in $shapes"
for n in $names; do
    grep -q "^$n " "$out.stdout" || fail "layer $n has no row in the table"
    grep -q "^$n,.*,ok," "$out/results.csv" || fail "layer $n has no ok row in results.csv"
done
grep -q "^All [0-9]* measured results checked: ok." "$out.stdout" || fail "not every result checked ok"
grep -q "warm (repeated calls)" "$out.stdout" || fail "the table does not label its warm figures"
head -n 1 "$out/results.csv" | grep -q "warm_median_ms.*isa_requested,isa_running" ||
    fail "results.csv has no warm_median_ms, isa_requested, isa_running columns"
head -n 1 "$out/results.csv" | grep -q "min_bytes,memory_bound,bandwidth_gb_per_s,gb_per_s," ||
    fail "results.csv has no roofline columns (min_bytes, memory_bound, ..., gb_per_s)"
# rows_without_shares FILE KIND: the first field of each row of FILE (KIND:
# results or training, the CSV of that name) that lacks its shares of the FMA
# loop, its columns read by name (quoted fields, which hold commas, split as
# CSV does)
rows_without_shares() {
    awk -v kind="$2" '
    function split_csv(line, f,    n, i, c, q, cur) {
        n = 0; q = 0; cur = ""
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (c == "\"") q = !q
            else if (c == "," && !q) { f[++n] = cur; cur = "" }
            else cur = cur c
        }
        f[++n] = cur
        return n
    }
    NR == 1 { n = split_csv($0, h); next }
    { split_csv($0, f); for (i = 1; i <= n; i++) v[h[i]] = f[i]
      if (kind == "results" && v["median_ms"] + 0 > 0 &&
          !(v["pct_fma_limit"] + 0 > 0 && v["fma_limit_gflops"] + 0 > 0)) print f[1]
      if (kind == "training" && v["impl"] == "convgrad" &&
          !(v["fwd_pct_fma"] + 0 > 0 && v["bwd_data_pct_fma"] + 0 > 0 &&
            v["bwd_weights_bias_pct_fma"] + 0 > 0 && v["bwd_pct_fma"] + 0 > 0 &&
            (v["warm_reps"] + 0 == 0 || v["warm_fwd_pct_fma"] + 0 > 0))) print f[1] }
    ' "$1"
}
# every timed row has its share of the FMA loop timed in its own rounds, and that loop's GFLOP/s
no_share=$(rows_without_shares "$out/results.csv" results)
[ -z "$no_share" ] || fail "rows without a share of the FMA loop in results.csv: $no_share"
# and every training step of convgrad's has each phase's share (and of its
# warm steps, where it had any: none for a step over 0.5 s, as under ASan)
[ -n "$(sed -n 2p "$out/training.csv")" ] || fail "training.csv has no rows"
no_share=$(rows_without_shares "$out/training.csv" training)
[ -z "$no_share" ] || fail "training steps without their phases' shares of the FMA loop: $no_share"
grep -q "memory bandwidth: copy *[0-9.]* GB/s, triad *[0-9.]* GB/s" "$out.stdout" ||
    fail "the limits block gives no memory bandwidth"
grep -q "^stream_triad,1,,,[0-9]" "$out/limits.csv" ||
    fail "limits.csv has no 1-thread stream_triad GB/s"
grep -q "^Roofline of the filter gradient" "$out.stdout" ||
    fail "no roofline of the filter gradient"

# a malformed line: exit 2, the file and the line number in the message
bad="$out.bad.txt"
printf '# a comment\n\nmb2ic4ih8oc4kh3n"ok"\nmb2ic4ih8oc4kh3zz1\n' >"$bad"
"$bench" --shapes "$bad" --list >"$out.stdout" 2>"$out.stderr"
rc=$?
[ "$rc" -eq 2 ] || fail "a malformed line exited $rc, not 2"
grep -q "$bad:4:.*'zz'" "$out.stderr" || fail "the message does not name line 4 and 'zz': $(cat "$out.stderr")"
echo "bench_shapes: ok ($(echo $names | wc -w) layers)"
