# SPDX-License-Identifier: MIT
"""What the Python package adds to a call: each layer of convgrad-bench's
layer set (read from `convgrad-bench --list`), timed through the package and
as the same C call made straight through ctypes on the same arrays, in
interleaved rounds; per layer the two medians and the overhead.

Two calls per layer, both on the default core mask (all this process's CPUs):
  operator       convgrad.conv_grad_filter (fp32, host mode _s), against
                 cg_fp_conv_grad_filter_s with a ConvParameter and workspace
                 made once;
  conv2d_weight  convgrad.conv2d_weight (NHWC; it allocates dw each call),
                 against cg_conv2d_backward_weights with a descriptor made
                 once, into one dw.

    python3 benchmarks/python_overhead.py --bench BUILD/benchmarks/convgrad-bench

Run it inside `flock /tmp/convgrad-bench.lock`. The target: under 5% on
every layer whose C call takes at least 1 ms.
"""
import argparse
import csv
import ctypes
import statistics
import subprocess
import sys
import time

import numpy as np

import convgrad
from convgrad import _cores
from convgrad._lib import ConvParameterStruct, lib

TARGET = 0.05
TARGET_MIN_MS = 1.0


def read_layers(bench):
    """The layers `convgrad-bench --list` prints: name N H W Cin Cout Kh Kw
    sh,sw ph,pw dh,dw group OH OW (dilation counted from 0, as benchdnn)."""
    out = subprocess.run([bench, "--list"], check=True, capture_output=True, text=True).stdout
    layers = []
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) != 14:
            continue
        pair = lambda s: tuple(int(v) for v in s.split(","))
        n, h, w, cin, cout, kh, kw = (int(v) for v in f[1:8])
        (sh, sw), (ph, pw), (dh, dw) = pair(f[8]), pair(f[9]), pair(f[10])
        groups, oh, ow = int(f[11]), int(f[12]), int(f[13])
        # the far pads: what makes the listed OH, OW come out
        pd = max(0, (oh - 1) * sh + (dh + 1) * (kh - 1) + 1 - h - ph)
        pr = max(0, (ow - 1) * sw + (dw + 1) * (kw - 1) + 1 - w - pw)
        layers.append(dict(name=f[0], n=n, h=h, w=w, cin=cin, cout=cout, kernel=(kh, kw),
                           stride=(sh, sw), padding=(ph, pd, pw, pr), dilation=(dh + 1, dw + 1),
                           groups=groups, out=(oh, ow)))
    if not layers:
        sys.exit("python_overhead: no layer in `%s --list`" % bench)
    return layers


def operator_pair(L, x, dy, mask):
    """(the package's call, the same C call through ctypes)."""
    (kh, kw), (top, bottom, left, right) = L["kernel"], L["padding"]
    p = convgrad.ConvParameter(
        L["n"], L["n"], L["h"], L["w"], L["out"][0], L["out"][1], L["cin"], L["cout"], kh, kw,
        group_=L["groups"], pad_l_=left, pad_u_=top, dilation_h_=L["dilation"][0],
        dilation_w_=L["dilation"][1], stride_h_=L["stride"][0], stride_w_=L["stride"][1],
        pad_d_=bottom, pad_r_=right)
    dw = np.zeros((L["cout"], kh, kw, L["cin"] // L["groups"]), np.float32)
    s = p.to_struct(4)
    c_mask = _cores.as_c_int(mask)
    workspace = np.empty(lib.cg_grad_filter_workspace_bytes(ctypes.byref(s), c_mask, 4), np.uint8)
    s.workspace_ = workspace.ctypes.data
    args = (dy.ctypes.data, x.ctypes.data, dw.ctypes.data, None, ctypes.byref(s), c_mask)

    def direct(buffers=(workspace, dw)):  # the addresses' arrays live as long as the call
        status = lib.cg_fp_conv_grad_filter_s(*args)
        assert status == 0, status

    return (lambda: convgrad.conv_grad_filter(dy, x, dw, param=p)), direct


def weight_pair(L, x, dy, mask):
    kw = dict(stride=L["stride"], padding=L["padding"], dilation=L["dilation"], groups=L["groups"])
    conv = convgrad.Convolution("NHWC", x.shape, L["cout"], L["kernel"], **kw)
    dw = np.empty(conv.w_shape, np.float32)
    args = (ctypes.byref(conv.struct), x.ctypes.data, dy.ctypes.data, dw.ctypes.data,
            _cores.as_c_int(mask))

    def direct(buffers=(conv, dw)):  # the addresses' objects live as long as the call
        status = lib.cg_conv2d_backward_weights(*args)
        assert status == 0, status

    return (lambda: convgrad.conv2d_weight(x, dy, L["kernel"], **kw)), direct


CALLS = {"operator": operator_pair, "conv2d_weight": weight_pair}


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="the convgrad-bench executable")
    ap.add_argument("--rounds", type=int, default=41, help="interleaved rounds (default %(default)s)")
    ap.add_argument("--layers", help="a,b,c: only these layers")
    ap.add_argument("--csv", help="write the table here too")
    a = ap.parse_args()
    layers = read_layers(a.bench)
    if a.layers:
        layers = [L for L in layers if L["name"] in a.layers.split(",")]
    mask = convgrad.default_core_mask()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print("python_overhead: convgrad %s, CPU %s, core_mask %#x, %d interleaved rounds, medians"
          % (convgrad.__version__, cpu, mask, a.rounds))
    print("%-15s %-14s %10s %10s %9s  %s" % ("layer", "call", "C ms", "Python ms", "overhead",
                                             "target"))
    rows, missed = [], 0
    rng = np.random.default_rng(1)
    for L in layers:
        x = rng.uniform(-1, 1, (L["n"], L["h"], L["w"], L["cin"])).astype(np.float32)
        dy = rng.uniform(-1, 1, (L["n"], L["out"][0], L["out"][1], L["cout"])).astype(np.float32)
        for call, make in CALLS.items():
            python, direct = make(L, x, dy, mask)
            python(), direct()  # warm: the library's scratch, the caches
            times = {"C": [], "Python": []}
            for r in range(a.rounds):  # alternate which goes first
                order = (("C", direct), ("Python", python)) if r % 2 else (("Python", python), ("C", direct))
                for name, f in order:
                    times[name].append(timed(f))
            c_ms, py_ms = (1e3 * statistics.median(times[k]) for k in ("C", "Python"))
            overhead = py_ms / c_ms - 1
            judged = c_ms >= TARGET_MIN_MS
            verdict = ("met" if overhead < TARGET else "MISSED") if judged else "(under 1 ms)"
            if judged and overhead >= TARGET:
                missed += 1
            print("%-15s %-14s %10.3f %10.3f %8.1f%%  %s" % (L["name"], call, c_ms, py_ms,
                                                            100 * overhead, verdict), flush=True)
            rows.append(dict(layer=L["name"], call=call, c_ms=c_ms, python_ms=py_ms,
                             overhead=overhead))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print("target (overhead < %d%% on every layer of >= %g ms): %s"
          % (100 * TARGET, TARGET_MIN_MS, "met" if not missed else "MISSED on %d" % missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
