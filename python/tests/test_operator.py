# SPDX-License-Identifier: MIT
"""conv_grad_filter (the card's operator), fp32 and fp16, _s and _p, against
float64: out_dw += dw + bias."""
import numpy as np
import pytest

import convgrad
from conftest import ATOL, RTOL, assert_close, nchw_shapes, random_case, reference

# fp16: inputs are exact in float64; each output element is rounded once to
# binary16 (half an ulp: 2**-11 of it), after an fp32 sum.
HALF_RTOL = 2.0**-11


def parameter(case):
    top, bottom, left, right = case["padding"]
    x_shape, w_shape, y_shape = nchw_shapes(case)
    return convgrad.ConvParameter(
        output_batch_=case["n"], input_batch_=case["n"], input_h_=case["h"], input_w_=case["w"],
        output_h_=y_shape[2], output_w_=y_shape[3], input_channel_=case["cin"],
        output_channel_=case["cout"], kernel_h_=case["kernel"][0], kernel_w_=case["kernel"][1],
        group_=case["groups"], pad_l_=left, pad_u_=top, dilation_h_=case["dilation"][0],
        dilation_w_=case["dilation"][1], stride_h_=case["stride"][0], stride_w_=case["stride"][1],
        pad_d_=bottom, pad_r_=right)


def nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("private", [False, True])
@pytest.mark.parametrize("index", range(40))
def test_operator(index, private, dtype, rng):
    case = random_case(rng)
    x_shape, w_shape, y_shape = nchw_shapes(case)
    # values exact in fp16, so that the float64 reference sees what the call sees
    x, dy = (rng.uniform(-1, 1, s).astype(dtype).astype(np.float64) for s in (x_shape, y_shape))
    with_bias = index % 2 == 0
    bias = rng.uniform(-1, 1, case["cout"]).astype(dtype)
    out0 = rng.uniform(-1, 1, (w_shape[0], w_shape[2], w_shape[3], w_shape[1])).astype(dtype)
    zeros = np.zeros(w_shape)
    _, _, dw, _ = reference(case, x, zeros, zeros[:, 0, 0, 0], dy)
    _, _, dw_abs, _ = reference(case, abs(x), zeros, zeros[:, 0, 0, 0], abs(dy))
    expected = out0 + nhwc(dw) + (bias[:, None, None, None] if with_bias else 0)
    bound = np.abs(out0) + nhwc(dw_abs) + (np.abs(bias[:, None, None, None]) if with_bias else 0)

    out_dw = out0.copy()
    result = convgrad.conv_grad_filter(nhwc(dy).astype(dtype), nhwc(x).astype(dtype), out_dw,
                                       bias if with_bias else None, param=parameter(case),
                                       private=private)
    assert result is out_dw
    rtol = RTOL + (HALF_RTOL if dtype == np.float16 else 0)
    assert_close(out_dw, expected, bound, rtol=rtol, atol=ATOL)


def test_parameter_as_dict_and_masks(rng):
    """A dict of the fields works as the class; explicit masks (one core, a
    mask with a hole, more cores than CPUs) give the default mask's result."""
    case = dict(n=2, cin=6, cout=4, groups=2, h=9, w=8, kernel=(3, 2), stride=(1, 2),
                dilation=(2, 1), padding=(1, 0, 2, 1))
    x_shape, w_shape, y_shape = nchw_shapes(case)
    x = nhwc(rng.uniform(-1, 1, x_shape).astype(np.float32))
    dy = nhwc(rng.uniform(-1, 1, y_shape).astype(np.float32))
    dw_shape = (w_shape[0], w_shape[2], w_shape[3], w_shape[1])
    first = convgrad.conv_grad_filter(dy, x, np.zeros(dw_shape, np.float32), param=parameter(case))
    fields = vars(parameter(case))
    for mask in (0b1, 0b101, 0xFF):
        again = convgrad.conv_grad_filter(dy, x, np.zeros(dw_shape, np.float32), param=fields,
                                          core_mask=mask)
        np.testing.assert_allclose(again, first, rtol=1e-5, atol=1e-5)


def test_explicit_buffer_size(rng):
    """buffer_size_ given (bytes, above the bound) works like the default."""
    case = dict(n=1, cin=3, cout=5, groups=1, h=6, w=6, kernel=(3, 3), stride=(1, 1),
                dilation=(1, 1), padding=(1, 1, 1, 1))
    p = parameter(case)
    x_shape, _, y_shape = nchw_shapes(case)
    x = nhwc(rng.uniform(-1, 1, x_shape).astype(np.float32))
    dy = nhwc(rng.uniform(-1, 1, y_shape).astype(np.float32))
    a = convgrad.conv_grad_filter(dy, x, np.zeros((5, 3, 3, 3), np.float32), param=p)
    p.buffer_size_ = 0x10000
    for private in (False, True):
        b = convgrad.conv_grad_filter(dy, x, np.zeros((5, 3, 3, 3), np.float32), param=p,
                                      private=private)
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
