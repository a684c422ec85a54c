# SPDX-License-Identifier: MIT
"""Seeded random convolutions and their float64 PyTorch reference."""
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

# fp32 results are checked element by element against the float64 reference:
#     |got - ref| <= RTOL * ref_abs + ATOL
# where ref_abs is the same operation on |x| and |w| (the sum of the terms'
# magnitudes, which bounds any summation order's rounding).
RTOL = 1e-5
ATOL = 1e-6


def random_case(rng, depthwise=None, symmetric=False):
    """A convolution whose output is at least 1x1: batch 1..3 (1 often),
    groups (1, 2, 3 or depthwise), channels per group 1..5, kernels 1..4
    (kh != kw), stride 1..3, dilation 1..2, four independent pads 0..2 (or,
    symmetric, one per axis)."""
    if depthwise is None:
        depthwise = rng.random() < 0.2
    groups = int(rng.integers(1, 9)) if depthwise else int(rng.choice([1, 1, 2, 3]))
    cin_g = 1 if depthwise else int(rng.integers(1, 6))
    cout_g = int(rng.integers(1, 3)) if depthwise else int(rng.integers(1, 6))
    while True:
        case = dict(
            n=int(rng.choice([1, 1, 2, 3])), cin=groups * cin_g, cout=groups * cout_g,
            groups=groups, h=int(rng.integers(1, 11)), w=int(rng.integers(1, 11)),
            kernel=(int(rng.integers(1, 5)), int(rng.integers(1, 5))),
            stride=(int(rng.integers(1, 4)), int(rng.integers(1, 4))),
            dilation=(int(rng.integers(1, 3)), int(rng.integers(1, 3))),
            padding=tuple(int(p) for p in rng.integers(0, 3, 4)),
        )
        if symmetric:
            top, _, left, _ = case["padding"]
            case["padding"] = (top, top, left, left)
        if min(output_size(case)) >= 1:
            return case


def output_size(case):
    top, bottom, left, right = case["padding"]
    (kh, kw), (sh, sw), (dh, dw) = case["kernel"], case["stride"], case["dilation"]
    oh = (case["h"] + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (case["w"] + left + right - dw * (kw - 1) - 1) // sw + 1
    return oh, ow


def nchw_shapes(case):
    oh, ow = output_size(case)
    kh, kw = case["kernel"]
    return ((case["n"], case["cin"], case["h"], case["w"]),
            (case["cout"], case["cin"] // case["groups"], kh, kw),
            (case["n"], case["cout"], oh, ow))


def reference(case, x, w, b, dy):
    """y, dx, dw, db in float64 for NCHW x, OIHW w (numpy arrays), by torch
    autograd; the four pads through F.pad."""
    top, bottom, left, right = case["padding"]
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    y = F.conv2d(F.pad(xt, (left, right, top, bottom)), wt, bt, case["stride"], 0,
                 case["dilation"], case["groups"])
    y.backward(torch.tensor(dy, dtype=torch.float64))
    return [t.detach().numpy() for t in (y, xt.grad, wt.grad, bt.grad)]


def assert_close(got, ref, ref_abs, rtol=RTOL, atol=ATOL):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got.astype(np.float64) - ref)
    bound = rtol * ref_abs + atol
    worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.size else None
    assert np.all(err <= bound), "worst at %s: got %r, ref %r, bound %r" % (
        worst, got[worst], ref[worst], bound[worst])


@pytest.fixture
def rng(request):
    """A generator seeded by the test's name, so every run draws the same."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
