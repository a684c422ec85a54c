#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_conv2d into tests/fuzz/corpus_conv2d/.

    python3 tests/fuzz/make_corpus_conv2d.py

One small file per seed, named after what it covers: each operation in each
layout on a few shapes (groups, depthwise, stride, dilation, pads, 1x1),
forced small tiles and the library's own, and each error class. The format
is the one fuzz_conv2d.c's decode() reads; every int field is written raw
(byte 0xF0, then 4 bytes little-endian), so a seed means exactly what it
says here. Rerunning rewrites the directory (stale seeds go), except the
regression seeds (regress-*: inputs the fuzzer found, kept as it wrote them).
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_conv2d")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)

# operations, as cg_conv2d_op (flags bits 0-1)
FORWARD, DATA, WEIGHTS, BIAS = 0, 1, 2, 3
OPS = {"fwd": FORWARD, "data": DATA, "weights": WEIGHTS, "bias": BIAS}
NHWC, NCHW = 0, 1
NULLS = {"conv": 0, "in0": 1, "in1": 2, "out": 3}

FIELDS = [  # cg_conv2d's int fields, in struct order
    "layout", "batch", "in_h", "in_w", "in_c", "out_c", "kernel_h", "kernel_w", "groups",
    "stride_h", "stride_w", "dilation_h", "dilation_w",
    "pad_top", "pad_bottom", "pad_left", "pad_right",
]


def raw_int(v):
    return bytes([0xF0]) + struct.pack("<i", v)


def raw_u32(v):
    return bytes([0xF0]) + struct.pack("<I", v & 0xFFFFFFFF)


def shape(n=1, h=4, w=4, cin=1, cout=1, k=(1, 1), g=1, stride=(1, 1), dil=(1, 1),
          pad=(0, 0, 0, 0), layout=NHWC):
    """pad = (top, bottom, left, right)."""
    return {
        "layout": layout, "batch": n, "in_h": h, "in_w": w, "in_c": cin, "out_c": cout,
        "kernel_h": k[0], "kernel_w": k[1], "groups": g, "stride_h": stride[0],
        "stride_w": stride[1], "dilation_h": dil[0], "dilation_w": dil[1],
        "pad_top": pad[0], "pad_bottom": pad[1], "pad_left": pad[2], "pad_right": pad[3],
    }


def encode(c, op=FORWARD, bias=0, misalign=0, null=None, core_mask=1, tile_rows=0, seed=1):
    flags = op | bias << 2 | misalign << 3 | (null is not None) << 4
    out = bytes([flags])
    for f in FIELDS:
        out += raw_int(c[f])
    out += raw_u32(core_mask)
    out += raw_u32(tile_rows)  # tile byte >= 240: the raw value
    if null is not None:
        out += bytes([NULLS[null]])
    out += struct.pack("<I", seed)
    return out


# Valid shapes, each small enough to run against the reference.
GROUPED = shape(n=2, h=5, w=6, cin=4, cout=6, k=(3, 2), g=2, stride=(2, 1), dil=(1, 2),
                pad=(1, 2, 0, 1))
DEPTHWISE = shape(n=2, h=5, w=5, cin=8, cout=8, k=(3, 3), g=8, pad=(1, 1, 1, 1))
ONE_BY_ONE = shape(n=2, h=4, w=3, cin=5, cout=3)
STRIDED = shape(n=1, h=7, w=6, cin=3, cout=4, k=(3, 3), stride=(2, 3), pad=(1, 1, 2, 0))
SHAPES = {"grouped": GROUPED, "depthwise": DEPTHWISE, "1x1": ONE_BY_ONE, "strided": STRIDED}


def seeds():
    s = {}
    masks = [1, 3, 0xF, 0x80000001, 5]
    i = 0
    # every operation x layout x shape, masks, tiles and alignment varied
    for sname, c in SHAPES.items():
        for layout in (NHWC, NCHW):
            for oname, op in OPS.items():
                i += 1
                s[f"ok-{oname}-{sname}-{'nchw' if layout else 'nhwc'}"] = encode(
                    dict(c, layout=layout), op=op, bias=i % 2, misalign=(i // 2) % 2,
                    core_mask=masks[i % len(masks)], tile_rows=[0, 1, 3, 0, 7][i % 5], seed=i)

    # valid corners
    s["ok-fwd-all-32-cores"] = encode(GROUPED, bias=1, core_mask=0xFFFFFFFF)
    s["ok-data-huge-stride-dilation-pad"] = encode(
        shape(n=1, h=3, w=3, cin=2, cout=4, k=(2, 2), stride=(1, INT_MAX), dil=(INT_MAX, 1),
              pad=(INT_MAX, 0, 5, INT_MAX)), op=DATA, core_mask=3)
    s["ok-weights-all-padding"] = encode(
        shape(n=1, h=3, w=3, cin=2, cout=2, k=(2, 2), stride=(INT_MAX, 1), pad=(INT_MAX, 0, 0, 0),
              layout=NCHW), op=WEIGHTS, core_mask=3, tile_rows=1)
    s["ok-data-kernel-larger-than-input"] = encode(
        shape(n=1, h=2, w=2, cin=2, cout=2, k=(4, 3), pad=(1, 2, 1, 1), layout=NCHW), op=DATA)
    s["ok-data-stride-larger-than-kernel"] = encode(
        shape(n=2, h=7, w=5, cin=3, cout=2, k=(2, 1), stride=(3, 4)), op=DATA, tile_rows=2)
    s["ok-fwd-wide-channels"] = encode(
        shape(n=1, h=4, w=4, cin=32, cout=8, k=(3, 3), pad=(1, 1, 1, 1)), bias=1, core_mask=3)
    s["ok-weights-depthwise-dilated"] = encode(
        shape(n=1, h=6, w=6, cin=4, cout=4, k=(3, 3), g=4, dil=(2, 1), pad=(1, 1, 1, 1)),
        op=WEIGHTS, core_mask=7)
    s["ok-bias-many-cores-few-channels"] = encode(
        shape(n=3, h=5, w=5, cin=2, cout=3, k=(2, 2), layout=NCHW), op=BIAS, core_mask=0xFF)
    s["ok-bias-in1-null-ignored"] = encode(ONE_BY_ONE, op=BIAS, null="in1", tile_rows=2)
    s["ok-fwd-big-tile-rows"] = encode(STRIDED, tile_rows=1 << 20, bias=1)

    # error classes
    for j, what in enumerate(NULLS):
        s[f"err-null-{what}"] = encode(GROUPED, op=j % 3, null=what, tile_rows=j % 2 * 3)
    bad = {
        "layout-2": dict(layout=2),
        "layout-negative": dict(layout=-1),
        "layout-int-min": dict(layout=INT_MIN),
        "size-zero-kernel": dict(kernel_h=0),
        "size-negative-input-h": dict(in_h=-3),
        "size-int-min-channels": dict(in_c=INT_MIN),
        "size-zero-batch": dict(batch=0),
        "size-output-below-1": dict(kernel_h=9, dilation_h=1, pad_top=0, pad_bottom=0),
        "size-output-dilated-below-1": dict(kernel_w=3, dilation_w=INT_MAX),
        "group-zero": dict(groups=0),
        "group-not-dividing": dict(groups=3),
        "group-negative": dict(groups=-2),
        "stride-zero": dict(stride_h=0),
        "stride-negative": dict(stride_w=-1),
        "dilation-zero": dict(dilation_w=0),
        "dilation-int-min": dict(dilation_h=INT_MIN),
        "pad-negative-top": dict(pad_top=-1),
        "pad-negative-right": dict(pad_right=-1),
        "pad-int-min-left": dict(pad_left=INT_MIN),
        "overflow-input": dict(in_h=INT_MAX, in_w=INT_MAX, batch=INT_MAX),
        "overflow-plane": dict(in_h=65536, in_w=65536, in_c=1, out_c=1, groups=1),
        "overflow-output-plane": dict(pad_top=INT_MAX - 10, pad_left=INT_MAX - 10),
        "overflow-bound": dict(kernel_h=65536, kernel_w=65536),
        "overflow-everything-int-max": {f: INT_MAX for f in FIELDS if f != "layout"},
        # OH and OW each past INT_MAX: their product must not be formed in int64
        "overflow-plane-product": dict(pad_bottom=INT_MAX, pad_left=INT_MAX, pad_right=INT_MAX),
    }
    for j, (name, change) in enumerate(bad.items()):
        c = dict(GROUPED, layout=j % 2)
        c.update(change)
        s[f"err-{name}"] = encode(c, op=j % 4, bias=j % 3 == 0, core_mask=3,
                                  tile_rows=[0, 2][j % 2], seed=100 + j)
    s["err-core-mask-zero"] = encode(GROUPED, op=WEIGHTS, core_mask=0)
    s["err-core-mask-zero-forced-tiles"] = encode(DEPTHWISE, op=DATA, core_mask=0, tile_rows=1)
    s["err-core-mask-zero-large-valid"] = encode(
        shape(n=4, h=512, w=512, cin=16, cout=16, k=(3, 3)), op=FORWARD, core_mask=0)
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if not f.startswith("regress-"):
            os.remove(os.path.join(OUT, f))
    s = seeds()
    for name, data in s.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(s)} seeds in {os.path.relpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
