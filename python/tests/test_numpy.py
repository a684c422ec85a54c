# SPDX-License-Identifier: MIT
"""conv2d, conv2d_input, conv2d_weight and conv2d_bias against float64 torch
on seeded random shapes, both layouts."""
import numpy as np
import pytest

import convgrad
from conftest import assert_close, nchw_shapes, random_case, reference

CASES = 400  # half NHWC, half NCHW


def to_layout(a, layout):
    """An NCHW (or OIHW) array in layout's order, C-contiguous."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1) if layout == "NHWC" else a)


@pytest.mark.parametrize("index", range(CASES))
def test_training_step(index, rng):
    layout = ("NHWC", "NCHW")[index % 2]
    case = random_case(rng)
    x_shape, w_shape, y_shape = nchw_shapes(case)
    x, w, dy = (rng.uniform(-1, 1, s).astype(np.float32) for s in (x_shape, w_shape, y_shape))
    b = rng.uniform(-1, 1, case["cout"]).astype(np.float32)
    refs = reference(case, x, w, b, dy)
    bounds = reference(case, abs(x), abs(w), abs(b), abs(dy))
    kw = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
              groups=case["groups"], layout=layout)
    X, W, DY = (to_layout(a, layout) for a in (x, w, dy))
    got = [
        convgrad.conv2d(X, W, b, **kw),
        convgrad.conv2d_input(DY, W, X.shape, **kw),
        convgrad.conv2d_weight(X, DY, case["kernel"], **kw),
    ]
    for g, ref, bound in zip(got, refs, bounds):
        assert_close(g, to_layout(ref, layout), to_layout(bound, layout))
    db = convgrad.conv2d_bias(DY, **kw)
    assert_close(db, refs[3], bounds[3])
    # the whole backward in one call: the separate calls' bits
    dx, dw, db1 = convgrad.conv2d_backward(X, DY, W, **kw)
    assert dx.tobytes() == got[1].tobytes() and dw.tobytes() == got[2].tobytes()
    assert db1.tobytes() == db.tobytes()
    assert convgrad.conv2d_backward(X, DY, W, bias=False, **kw)[2] is None


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_padding_forms(layout, rng):
    """An int, (h, w) and four values name the same pads."""
    x = rng.uniform(-1, 1, (2, 7, 6, 3) if layout == "NHWC" else (2, 3, 7, 6)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)  # OHWI or OIHW: Kh = Kw = Ci = 3
    one = convgrad.conv2d(x, w, padding=1, layout=layout)
    assert np.array_equal(one, convgrad.conv2d(x, w, padding=(1, 1), layout=layout))
    assert np.array_equal(one, convgrad.conv2d(x, w, padding=[1, 1, 1, 1], layout=layout))
    hw = convgrad.conv2d(x, w, padding=(2, 0), layout=layout)
    assert np.array_equal(hw, convgrad.conv2d(x, w, padding=(2, 2, 0, 0), layout=layout))


def test_outputs_are_new_arrays(rng):
    x = rng.uniform(-1, 1, (1, 5, 5, 2)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 3, 2)).astype(np.float32)
    x0, w0 = x.copy(), w.copy()
    y1, y2 = convgrad.conv2d(x, w), convgrad.conv2d(x, w)
    assert y1.dtype == np.float32 and y1.flags.c_contiguous and not np.shares_memory(y1, y2)
    assert np.array_equal(x, x0) and np.array_equal(w, w0)  # inputs untouched
