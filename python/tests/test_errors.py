# SPDX-License-Identifier: MIT
"""Bad shapes, dtypes, memory and parameters raise; nothing crashes."""
import os
import subprocess
import sys

import numpy as np
import pytest

import convgrad

F32 = np.float32


def arrays():
    return np.ones((2, 6, 5, 4), F32), np.ones((8, 3, 3, 4), F32)  # NHWC x, OHWI w


def test_error_carries_status_name_and_detail():
    x, _ = arrays()
    with pytest.raises(convgrad.Error) as e:
        convgrad.conv2d(x, np.ones((6, 3, 3, 1), F32), groups=3)  # 3 does not divide 4
    err = e.value
    assert isinstance(err, RuntimeError)
    assert (err.status, err.name) == (-3, "CG_ERR_BAD_GROUP")
    assert "groups=3" in err.detail and "in_c=4" in err.detail
    assert err.message and err.message in str(err) and err.detail in str(err)


@pytest.mark.parametrize("kwargs, status", [
    (dict(padding=-1), "CG_ERR_BAD_PAD"),
    (dict(padding=(0, 0, 0, -2)), "CG_ERR_BAD_PAD"),
    (dict(stride=0), "CG_ERR_BAD_STRIDE"),
    (dict(stride=(1, -1)), "CG_ERR_BAD_STRIDE"),
    (dict(dilation=0), "CG_ERR_BAD_DILATION"),
    (dict(dilation=4), "CG_ERR_BAD_SIZE"),  # the dilated kernel is larger than the input
    (dict(core_mask=0), "CG_ERR_CORE_MASK"),
])
def test_library_statuses(kwargs, status):
    x, w = arrays()
    with pytest.raises(convgrad.Error) as e:
        convgrad.conv2d(x, w, **kwargs)
    assert e.value.name == status


@pytest.mark.parametrize("make, exc, words", [
    (lambda x, w: (x.astype(np.float64), w), TypeError, "float32"),
    (lambda x, w: (x.astype(np.float16), w), TypeError, "float32"),
    (lambda x, w: (x.tolist(), w), TypeError, "numpy.ndarray"),
    (lambda x, w: (x[:, ::2], w), ValueError, "C-contiguous"),
    (lambda x, w: (np.asfortranarray(x), w), ValueError, "C-contiguous"),
    (lambda x, w: (x, w.transpose(0, 2, 1, 3)), ValueError, "C-contiguous"),
    (lambda x, w: (x[0], w), ValueError, "4 dimensions"),
    (lambda x, w: (x, w[:, :, :, :2]), ValueError, "shape"),
])
def test_bad_arrays(make, exc, words):
    x, w = make(*arrays())
    with pytest.raises(exc, match=words):
        convgrad.conv2d(x, w)


def test_unaligned_array():
    raw = np.zeros(2 * 6 * 5 * 4 * 4 + 1, np.uint8)
    x = raw[1:].view(F32).reshape(2, 6, 5, 4)
    assert not x.flags.aligned
    with pytest.raises(ValueError, match="aligned"):
        convgrad.conv2d(x, arrays()[1])


@pytest.mark.parametrize("kwargs, exc", [
    (dict(layout="NCWH"), ValueError),
    (dict(padding=(1, 2, 3)), ValueError),
    (dict(stride=1.5), TypeError),
    (dict(stride=(1, 2, 3)), ValueError),
    (dict(padding=2**31), ValueError),
    (dict(core_mask="3"), TypeError),
    (dict(core_mask=2**32), ValueError),
    (dict(core_mask=-1), ValueError),
])
def test_bad_arguments(kwargs, exc):
    x, w = arrays()
    with pytest.raises(exc):
        convgrad.conv2d(x, w, **kwargs)


def test_gradient_shape_mismatches():
    x, w = arrays()
    dy = convgrad.conv2d(x, w)
    with pytest.raises(ValueError, match="dy has shape"):
        convgrad.conv2d_weight(x, dy[:, :-1].copy(), 3)
    with pytest.raises(ValueError, match="dy has shape"):
        convgrad.conv2d_input(dy, w, (2, 7, 5, 4))
    with pytest.raises(ValueError, match="b has shape"):
        convgrad.conv2d(x, w, np.ones(7, F32))
    with pytest.raises(ValueError, match="4 dimensions"):
        convgrad.conv2d_bias(dy[0])


def card_case():
    p = convgrad.ConvParameter(2, 2, 6, 5, 6, 5, 4, 8, 3, 3, pad_l_=1, pad_u_=1, pad_d_=1, pad_r_=1)
    return (np.ones((2, 6, 5, 8), F32), np.ones((2, 6, 5, 4), F32), np.zeros((8, 3, 3, 4), F32), p)


def test_operator_bad_dtypes_and_shapes():
    dy, x, dw, p = card_case()
    with pytest.raises(TypeError, match="float32 or float16"):
        convgrad.conv_grad_filter(dy, x, dw.astype(np.float64), param=p)
    with pytest.raises(TypeError, match="float32"):
        convgrad.conv_grad_filter(dy.astype(np.float16), x, dw, param=p)
    with pytest.raises(ValueError, match="x has shape"):
        convgrad.conv_grad_filter(dy, x[:, :5].copy(), dw, param=p)
    with pytest.raises(ValueError, match="out_dw has shape"):
        convgrad.conv_grad_filter(dy, x, np.zeros((8, 3, 3, 2), F32), param=p)
    with pytest.raises(ValueError, match="bias has shape"):
        convgrad.conv_grad_filter(dy, x, dw, np.ones(4, F32), param=p)
    dw.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        convgrad.conv_grad_filter(dy, x, dw, param=p)


@pytest.mark.parametrize("field, value, status", [
    ("group_", 3, "CG_ERR_BAD_GROUP"),
    ("input_batch_", 3, "CG_ERR_BATCH_MISMATCH"),
    ("kernel_h_", 0, "CG_ERR_BAD_SIZE"),
    ("stride_w_", 0, "CG_ERR_BAD_STRIDE"),
    ("pad_d_", -1, "CG_ERR_BAD_PAD"),
    ("buffer_size_", 10, "CG_ERR_BUFFER_TOO_SMALL"),
])
@pytest.mark.parametrize("private", [False, True])
def test_operator_bad_parameters_write_nothing(field, value, status, private):
    dy, x, dw, p = card_case()
    setattr(p, field, value)
    dw[:] = 7
    with pytest.raises(convgrad.Error) as e:
        convgrad.conv_grad_filter(dy, x, dw, param=p, private=private)
    assert e.value.name == status and field in e.value.detail
    assert np.all(dw == 7)


def test_operator_bad_param_objects():
    dy, x, dw, p = card_case()
    with pytest.raises(TypeError, match="ConvParameter"):
        convgrad.conv_grad_filter(dy, x, dw, param=(1, 2, 3))
    with pytest.raises(TypeError):
        convgrad.conv_grad_filter(dy, x, dw, param=dict(vars(p), workspace_=0))
    with pytest.raises(ValueError, match="C int"):
        convgrad.conv_grad_filter(dy, x, dw, param=dict(vars(p), input_h_=2**40))
    with pytest.raises(convgrad.Error, match="CG_ERR_CORE_MASK"):
        convgrad.conv_grad_filter(dy, x, dw, param=p, core_mask=0)


def test_missing_library_names_both_sources():
    env = dict(os.environ, CONVGRAD_LIBRARY="/nonexistent/libconvgrad.so")
    r = subprocess.run([sys.executable, "-c", "import convgrad"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "CONVGRAD_LIBRARY is /nonexistent/libconvgrad.so, which does not exist" in r.stderr
    assert "recorded at install time" in r.stderr


def test_version_is_the_librarys():
    assert convgrad.__version__ == convgrad.version()
    assert len(convgrad.__version__.split(".")) == 3
