#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_grad_filter into tests/fuzz/corpus/.

    python3 tests/fuzz/make_corpus.py

One small file per seed, named after what it covers: each path (general,
depthwise, 1x1) in both dtypes through each entry point, and each error
class. The format is the one fuzz_grad_filter.c's decode() reads; every int
field is written raw (byte 0xF0, then 4 bytes little-endian), so a seed means
exactly what it says here. Rerunning rewrites the directory (stale seeds go).

fuzz_conv2d's seed corpus, tests/fuzz/corpus_conv2d/, comes from
make_corpus_conv2d.py, in the same way.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)

# entries, as in the decoder's flags bits 1-2
P_HOST, S_HOST, S_SPMD, P_IN_LAUNCH = 0, 1, 2, 3
# NULL selector
NULLS = {"dy": 0, "x": 1, "dw": 2, "workspace": 3, "param": 4}

FIELDS = [  # ConvParameter's int fields, in struct order
    "output_batch_", "input_batch_", "input_h_", "input_w_", "output_h_", "output_w_",
    "input_channel_", "output_channel_", "kernel_h_", "kernel_w_", "group_",
    "pad_l_", "pad_u_", "dilation_h_", "dilation_w_", "stride_h_", "stride_w_",
    "buffer_size_", "pad_d_", "pad_r_",
]


def raw_int(v):
    return bytes([0xF0]) + struct.pack("<i", v)


def raw_u32(v):
    return bytes([0xF0]) + struct.pack("<I", v & 0xFFFFFFFF)


def min_buffer(p, fp16):
    return 2 * p["kernel_h_"] * p["kernel_w_"] * (p["input_channel_"] // p["group_"]) * (
        2 if fp16 else 4)


def shape(n=1, h=4, w=4, oh=None, ow=None, cin=1, cout=1, k=(1, 1), g=1, pad=(0, 0, 0, 0),
          dil=(1, 1), stride=(1, 1), buf=None):
    """pad = (l, u, d, r); buf None: the lower bound for the dtype."""
    return {
        "output_batch_": n, "input_batch_": n, "input_h_": h, "input_w_": w,
        "output_h_": h if oh is None else oh, "output_w_": w if ow is None else ow,
        "input_channel_": cin, "output_channel_": cout, "kernel_h_": k[0], "kernel_w_": k[1],
        "group_": g, "pad_l_": pad[0], "pad_u_": pad[1], "pad_d_": pad[2], "pad_r_": pad[3],
        "dilation_h_": dil[0], "dilation_w_": dil[1], "stride_h_": stride[0],
        "stride_w_": stride[1], "buffer_size_": buf,
    }


def encode(p, fp16=0, entry=P_HOST, bias=0, status_api=0, misalign=0, null=None, core_mask=1,
           launch=None, seed=1, buf_extra=0):
    """launch: None = the cores of core_mask (SPMD), a core index for
    P_IN_LAUNCH, or a raw mask."""
    p = dict(p)
    if p["buffer_size_"] is None:
        p["buffer_size_"] = min_buffer(p, fp16) + buf_extra
    flags = fp16 | entry << 1 | bias << 3 | status_api << 4 | misalign << 5 | (null is not None) << 6
    out = bytes([flags])
    for f in FIELDS:
        out += raw_int(p[f])
    out += raw_u32(core_mask)
    if entry == P_IN_LAUNCH:
        out += bytes([launch or 0])
    elif launch is None:
        out += bytes([0])
    else:
        out += bytes([3]) + struct.pack("<I", launch & 0xFFFFFFFF)
    if null is not None:
        out += bytes([NULLS[null]])
    out += struct.pack("<I", seed)
    return out


# Three valid shapes, one per path.
GENERAL = shape(n=2, h=5, w=6, oh=3, ow=4, cin=4, cout=6, k=(3, 2), g=2, pad=(1, 0, 2, 0),
                dil=(1, 2), stride=(2, 1))
DEPTHWISE = shape(n=2, h=5, w=5, cin=8, cout=8, k=(3, 3), g=8, pad=(1, 1, 1, 1))
ONE_BY_ONE = shape(n=2, h=4, w=3, cin=5, cout=3)
PATHS = {"general": GENERAL, "depthwise": DEPTHWISE, "1x1": ONE_BY_ONE}
ENTRIES = {"p": P_HOST, "s": S_HOST, "s-spmd": S_SPMD, "p-in-launch": P_IN_LAUNCH}


def seeds():
    s = {}
    # each path x dtype x entry, with bias, status API, masks and alignment varied
    masks = [1, 3, 0xF, 0x80000001]
    i = 0
    for pname, p in PATHS.items():
        for fp16 in (0, 1):
            for ename, entry in ENTRIES.items():
                i += 1
                mask = masks[i % len(masks)]
                s[f"ok-{pname}-{'hp' if fp16 else 'fp'}-{ename}"] = encode(
                    p, fp16=fp16, entry=entry, bias=i % 2, status_api=(i // 2) % 2,
                    misalign=(i // 3) % 2, core_mask=mask, launch=5 if entry == P_IN_LAUNCH else None,
                    seed=i, buf_extra=(i % 3) * 64)

    # valid corners
    s["ok-general-all-32-cores"] = encode(GENERAL, entry=S_HOST, bias=1, core_mask=0xFFFFFFFF)
    s["ok-depthwise-bit31-spmd"] = encode(DEPTHWISE, fp16=1, entry=S_SPMD, core_mask=0x80000000)
    s["ok-spmd-launch-wider-than-mask"] = encode(GENERAL, entry=S_SPMD, core_mask=0x3,
                                                 launch=0x13)
    s["ok-huge-stride-dilation-pad"] = encode(
        # kh = 1 reaches row oh: INT_MAX dilation minus INT_MAX pad
        shape(n=1, h=3, w=3, oh=2, ow=2, cin=2, cout=4, k=(2, 2), pad=(0, INT_MAX, INT_MAX, 5),
              dil=(INT_MAX, 1), stride=(1, INT_MAX)), bias=1)
    s["ok-all-padding"] = encode(
        shape(n=1, h=3, w=3, oh=2, ow=2, cin=2, cout=2, k=(2, 2), pad=(INT_MAX, 0, 0, 0)),
        fp16=1, entry=S_HOST, core_mask=3, bias=1)
    s["ok-output-larger-than-input-1x1"] = encode(shape(n=1, h=2, w=2, oh=5, ow=3, cin=3, cout=2),
                                                 entry=S_HOST, core_mask=3)
    s["ok-kernel-larger-than-input"] = encode(
        shape(n=1, h=2, w=2, oh=2, ow=2, cin=2, cout=2, k=(4, 3), pad=(1, 2, 0, 0)), fp16=1)
    s["ok-p-big-buffer"] = encode(GENERAL, buf_extra=60000)
    s["ok-s-big-buffer"] = encode(DEPTHWISE, entry=S_HOST, core_mask=3, buf_extra=30000)
    # wide rows of dw: `_s` splits dw's columns between the cores
    wide = shape(n=1, h=4, w=4, oh=3, ow=3, cin=32, cout=4, k=(3, 3), pad=(1, 0, 0, 0))
    s["ok-columns-fp-s"] = encode(wide, entry=S_HOST, core_mask=3, bias=1)
    s["ok-columns-hp-s-spmd"] = encode(wide, fp16=1, entry=S_SPMD, core_mask=3)
    many_groups = shape(n=1, h=4, w=4, oh=4, ow=4, cin=16, cout=32, k=(3, 3), g=16,
                        pad=(1, 1, 1, 1))
    s["ok-columns-groups-fp-s"] = encode(many_groups, entry=S_HOST, core_mask=3, misalign=1)
    s["ok-columns-groups-hp-s"] = encode(many_groups, fp16=1, entry=S_HOST, core_mask=1 | 1 << 31,
                                         bias=1)
    s["ok-depthwise-dilated-is-general"] = encode(
        shape(n=1, h=6, w=6, cin=4, cout=4, k=(3, 3), g=4, dil=(2, 1), pad=(1, 1, 1, 1)), fp16=1)

    # error classes
    for what in NULLS:
        s[f"err-null-{what}"] = encode(GENERAL, null=what, entry=S_HOST if what == "dw" else P_HOST)
    bad = {
        "size-zero-kernel": dict(kernel_h_=0),
        "size-negative-input-h": dict(input_h_=-3),
        "size-int-min-channels": dict(input_channel_=INT_MIN),
        "size-zero-output-w": dict(output_w_=0),
        "group-zero": dict(group_=0),
        "group-not-dividing": dict(group_=3),
        "group-negative": dict(group_=-2),
        "stride-zero": dict(stride_h_=0),
        "stride-negative": dict(stride_w_=-1),
        "dilation-zero": dict(dilation_w_=0),
        "dilation-int-min": dict(dilation_h_=INT_MIN),
        "pad-negative-left": dict(pad_l_=-1),
        "pad-negative-down": dict(pad_d_=-1),
        "pad-int-min-right": dict(pad_r_=INT_MIN),
        "batch-mismatch": dict(input_batch_=3),
        "buffer-under-bound-fp32": dict(buffer_size_=min_buffer(GENERAL, 0) - 1),
        "buffer-zero": dict(buffer_size_=0),
        "buffer-negative": dict(buffer_size_=-4096),
        "overflow-input": dict(input_h_=INT_MAX, input_w_=INT_MAX, output_batch_=INT_MAX,
                               input_batch_=INT_MAX, buffer_size_=INT_MAX),
        "overflow-bound": dict(kernel_h_=65536, kernel_w_=65536, buffer_size_=INT_MAX),
        "overflow-everything-int-max": {f: INT_MAX for f in FIELDS},
    }
    for j, (name, change) in enumerate(bad.items()):
        p = dict(GENERAL)
        p.update(change)
        fp16 = 0 if name.endswith("-fp32") else j % 2
        if p["buffer_size_"] is None:
            p["buffer_size_"] = min_buffer(GENERAL, fp16)
        s[f"err-{name}"] = encode(p, fp16=fp16, entry=list(ENTRIES.values())[j % 4],
                                  core_mask=3, bias=j % 3 == 0, seed=100 + j)
    s["err-buffer-under-bound-fp16"] = encode(dict(GENERAL, buffer_size_=min_buffer(GENERAL, 1) - 1),
                                              fp16=1, entry=S_SPMD, core_mask=3)
    s["err-core-mask-zero-host"] = encode(GENERAL, entry=S_HOST, core_mask=0)
    s["err-core-mask-zero-spmd"] = encode(DEPTHWISE, entry=S_SPMD, core_mask=0, launch=0x3)
    s["err-core-mask-outside-launch"] = encode(ONE_BY_ONE, entry=S_SPMD, core_mask=0x7,
                                               launch=0x3)
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    s = seeds()
    for name, data in s.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(s)} seeds in {os.path.relpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
