# SPDX-License-Identifier: MIT
"""convgrad.torch against torch: torch.nn.grad's functions on seeded random
shapes (float64 reference), Conv2d loaded from an nn.Conv2d state_dict."""
import copy
import inspect

import numpy as np
import pytest
import torch

import convgrad
import convgrad.torch as cgt
from conftest import assert_close, random_case, nchw_shapes

f64 = torch.float64


@pytest.mark.parametrize("index", range(80))
def test_grad_functions(index, rng):
    case = random_case(rng, symmetric=True)
    x_shape, w_shape, y_shape = nchw_shapes(case)
    x, w, dy = (torch.from_numpy(rng.uniform(-1, 1, s).astype(np.float32)) for s in
                (x_shape, w_shape, y_shape))
    kw = dict(stride=case["stride"], padding=case["padding"][::2], dilation=case["dilation"],
              groups=case["groups"])
    got_w = cgt.conv2d_weight(x, w.shape, dy, **kw)
    ref_w = torch.nn.grad.conv2d_weight(x.to(f64), w.shape, dy.to(f64), **kw).numpy()
    bound = torch.nn.grad.conv2d_weight(x.to(f64).abs(), w.shape, dy.to(f64).abs(), **kw).numpy()
    assert_close(got_w.numpy(), ref_w, bound)
    got_x = cgt.conv2d_input(x.shape, w, dy, **kw)
    ref_x = torch.nn.grad.conv2d_input(x.shape, w.to(f64), dy.to(f64), **kw).numpy()
    bound = torch.nn.grad.conv2d_input(x.shape, w.to(f64).abs(), dy.to(f64).abs(), **kw).numpy()
    assert_close(got_x.numpy(), ref_x, bound)


def test_signatures_match_torch():
    for name in ("conv2d_weight", "conv2d_input"):
        ours = inspect.signature(getattr(cgt, name))
        theirs = inspect.signature(getattr(torch.nn.grad, name))
        assert ours == theirs, (name, ours, theirs)
    assert set(inspect.signature(torch.nn.Conv2d.__init__).parameters) < set(
        inspect.signature(cgt.Conv2d.__init__).parameters)


CONFIGS = [
    dict(in_channels=3, out_channels=8, kernel_size=3, padding=1),
    dict(in_channels=4, out_channels=6, kernel_size=(2, 3), padding="same", dilation=(2, 1)),
    dict(in_channels=4, out_channels=4, kernel_size=4, padding="same"),  # even: uneven pads
    dict(in_channels=6, out_channels=9, kernel_size=3, stride=2, padding="valid", groups=3),
    dict(in_channels=8, out_channels=8, kernel_size=3, padding=(1, 2), groups=8, bias=False),
    dict(in_channels=2, out_channels=5, kernel_size=1, stride=(1, 2)),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join("%s=%s" % kv for kv in c.items()))
@pytest.mark.parametrize("batch", [1, 3])
def test_conv2d_module_matches_nn_conv2d(config, batch):
    torch.manual_seed(1)
    ref = torch.nn.Conv2d(**config)
    ours = cgt.Conv2d(**config)
    ours.load_state_dict(ref.state_dict())
    assert isinstance(ours, torch.nn.Conv2d)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    x = torch.randn(batch, config["in_channels"], 11, 9)
    xr, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
    yr, yo = ref(xr), ours(xo)
    torch.testing.assert_close(yo, yr, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(yr)
    yr.backward(g)
    yo.backward(g)
    torch.testing.assert_close(xo.grad, xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    if ref.bias is not None:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-4, atol=1e-4)
    back = torch.nn.Conv2d(**config)
    back.load_state_dict(ours.state_dict())  # and back again
    torch.testing.assert_close(back(x), yr.detach(), rtol=1e-5, atol=1e-5)


def test_conv2d_module_inputs_it_copies_and_unbatched():
    torch.manual_seed(2)
    ref = torch.nn.Conv2d(3, 4, 3, padding=1)
    ours = cgt.Conv2d(3, 4, 3, padding=1, core_mask=0b1)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)  # not contiguous
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours(x[0]), ref(x[0]), rtol=1e-5, atol=1e-5)  # (C, H, W)
    assert "core_mask=0x1" in repr(ours)
    twin = copy.deepcopy(ours)
    torch.testing.assert_close(twin(x), ref(x), rtol=1e-5, atol=1e-5)


def test_only_input_grad_or_only_weight_grad():
    conv = cgt.Conv2d(2, 3, 3)
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    conv.weight.requires_grad_(False)
    conv.bias.requires_grad_(False)
    conv(x).sum().backward()
    assert x.grad is not None and conv.weight.grad is None
    conv.weight.requires_grad_(True)
    conv(x.detach()).sum().backward()
    assert conv.weight.grad is not None and conv.bias.grad is None


def test_conv2d_module_errors():
    with pytest.raises(ValueError, match="padding_mode"):
        cgt.Conv2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(TypeError, match="float32"):
        cgt.Conv2d(1, 1, 3, dtype=torch.float16)
    with pytest.raises(ValueError, match="strided"):
        cgt.Conv2d(1, 1, 3, stride=2, padding="same")
    conv = cgt.Conv2d(2, 2, 3)
    with pytest.raises(TypeError, match="float32"):
        conv(torch.randn(1, 2, 5, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match="float32"):
        conv.half()(torch.randn(1, 2, 5, 5).half())
    with pytest.raises(convgrad.Error, match="CG_ERR_BAD_SIZE"):
        cgt.Conv2d(2, 2, 3)(torch.randn(1, 2, 2, 2))  # kernel larger than the input
    with pytest.raises(ValueError, match="weight_size"):
        cgt.conv2d_weight(torch.randn(1, 4, 5, 5), (2, 3, 3, 3), torch.randn(1, 2, 3, 3))


def test_functional_conv2d_is_differentiable():
    x = torch.randn(2, 4, 7, 6, dtype=torch.float32, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, requires_grad=True)
    b = torch.randn(12)[::2].requires_grad_()  # not contiguous: convgrad gets a copy
    y = cgt.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), groups=2)
    ref = torch.nn.functional.conv2d(x, w, b, (2, 1), (1, 0), 1, 2)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(y.sum(), (x, w, b))
    refs = torch.autograd.grad(ref.sum(), (x, w, b))
    for g, r in zip(grads, refs):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
