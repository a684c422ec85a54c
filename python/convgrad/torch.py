# SPDX-License-Identifier: MIT
"""PyTorch over convgrad's cg_conv2d_* (NCHW tensors, OIHW weights, float32,
CPU): torch.nn.grad's conv2d_weight and conv2d_input, conv2d (as
torch.nn.functional.conv2d, differentiable), and Conv2d, a drop-in for
torch.nn.Conv2d whose forward and backward run on convgrad.

Contiguous tensors are passed to the library as they are (their data_ptr());
others are first made contiguous (a copy), as torch's own convolutions do.
Tensors of another dtype than float32 (half, double) raise TypeError: the
training-step API is fp32."""
import torch

from ._conv import as_ints, convolution

__all__ = ["Conv2d", "Conv2dFunction", "conv2d", "conv2d_input", "conv2d_weight"]


def _padding(padding, kernel_size, dilation, stride):
    """The four pads from torch's padding argument: an int, a pair, four
    values, "valid" or "same" (torch's split: the extra one at the end)."""
    if padding == "valid":
        return 0
    if padding == "same":
        if any(s != 1 for s in as_ints(stride, 2, "stride")):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pads = []
        for d, k in zip(as_ints(dilation, 2, "dilation"), kernel_size):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return tuple(pads)  # top, bottom, left, right
    if isinstance(padding, str):
        raise ValueError("padding must be 'valid', 'same', an int or a tuple, not %r" % padding)
    return padding


def _convolution(input_shape, weight_shape, stride, padding, dilation, groups):
    """The NCHW Convolution of an input of input_shape and OIHW weights."""
    kernel = tuple(weight_shape[2:])
    return convolution("NCHW", tuple(input_shape), weight_shape[0], kernel, stride,
                       _padding(padding, kernel, dilation, stride), dilation, groups)


def _address(t, name, shape):
    """The data_ptr() of t, a contiguous float32 CPU tensor of that shape."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if t.dtype != torch.float32:
        raise TypeError("%s is %s: convgrad's conv2d is float32 only (convert with .float())"
                        % (name, t.dtype))
    if t.device.type != "cpu":
        raise ValueError("%s is on %s: convgrad runs on the CPU" % (name, t.device))
    if tuple(t.shape) != tuple(shape):
        raise ValueError("%s has shape %s; expected %s" % (name, tuple(t.shape), tuple(shape)))
    return t.data_ptr()


def _new(shape):
    return torch.empty(shape, dtype=torch.float32)


def _weight_grad(conv, x, dy, core_mask):
    dw = _new(conv.w_shape)
    conv.backward_weights(_address(x, "input", conv.x_shape),
                          _address(dy, "grad_output", conv.y_shape), dw.data_ptr(), core_mask)
    return dw


def _input_grad(conv, w, dy, core_mask):
    dx = _new(conv.x_shape)
    conv.backward_data(_address(dy, "grad_output", conv.y_shape),
                       _address(w, "weight", conv.w_shape), dx.data_ptr(), core_mask)
    return dx


class Conv2dFunction(torch.autograd.Function):
    """y = conv(x, weight) + bias on a Convolution; backward gives the
    gradients autograd asks for (needs_input_grad), nothing more."""

    @staticmethod
    def forward(ctx, x, weight, bias, conv, core_mask):
        # held in names: a temporary's memory would be freed before the call
        x, weight = x.contiguous(), weight.contiguous()
        b = None if bias is None else bias.contiguous()
        y = _new(conv.y_shape)
        conv.forward(_address(x, "input", conv.x_shape), _address(weight, "weight", conv.w_shape),
                     None if b is None else _address(b, "bias", conv.b_shape), y.data_ptr(),
                     core_mask)
        ctx.save_for_backward(x, weight)
        ctx.conv, ctx.core_mask, ctx.has_bias = conv, core_mask, bias is not None
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        conv, core_mask, dy = ctx.conv, ctx.core_mask, dy.contiguous()
        dx = dw = db = None
        want_db = ctx.has_bias and ctx.needs_input_grad[2]
        if want_db:
            db = _new(conv.b_shape)
        if ctx.needs_input_grad[0] and ctx.needs_input_grad[1]:  # all in one call
            dx, dw = _new(conv.x_shape), _new(conv.w_shape)
            conv.backward(_address(x, "input", conv.x_shape),
                          _address(dy, "grad_output", conv.y_shape),
                          _address(weight, "weight", conv.w_shape), dx.data_ptr(), dw.data_ptr(),
                          None if db is None else db.data_ptr(), core_mask)
            return dx, dw, db, None, None
        if ctx.needs_input_grad[0]:
            dx = _input_grad(conv, weight, dy, core_mask)
        if ctx.needs_input_grad[1] and want_db:  # one pass over dy for both
            dw = _new(conv.w_shape)
            conv.backward_weights_bias(_address(x, "input", conv.x_shape),
                                       _address(dy, "grad_output", conv.y_shape), dw.data_ptr(),
                                       db.data_ptr(), core_mask)
        elif ctx.needs_input_grad[1]:
            dw = _weight_grad(conv, x, dy, core_mask)
        elif want_db:
            conv.backward_bias(dy.data_ptr(), db.data_ptr(), core_mask)
        return dx, dw, db, None, None


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, core_mask=None):
    """torch.nn.functional.conv2d on convgrad (batched NCHW input), differentiable."""
    conv = _convolution(input.shape, weight.shape, stride, padding, dilation, groups)
    return Conv2dFunction.apply(input, weight, bias, conv, core_mask)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.grad.conv2d_weight on convgrad: the weight gradient, of weight_size."""
    conv = _convolution(input.shape, tuple(weight_size), stride, padding, dilation, groups)
    if conv.w_shape != tuple(weight_size):
        raise ValueError("weight_size %s does not fit input %s with groups=%d (expected %s)"
                         % (tuple(weight_size), tuple(input.shape), groups, conv.w_shape))
    return _weight_grad(conv, input.contiguous(), grad_output.contiguous(), None)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.grad.conv2d_input on convgrad: the input gradient, of input_size."""
    conv = _convolution(tuple(input_size), weight.shape, stride, padding, dilation, groups)
    return _input_grad(conv, weight.contiguous(), grad_output.contiguous(), None)


class Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d with forward and backward on convgrad: the same
    arguments, parameters and state_dict, plus core_mask (None: the default
    mask). padding_mode 'zeros' only; float32 on the CPU only."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None, *,
                 core_mask=None):
        if padding_mode != "zeros":
            raise ValueError("convgrad.torch.Conv2d supports padding_mode='zeros' only, not %r"
                             % padding_mode)
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError("convgrad.torch.Conv2d runs on the CPU, not %s" % device)
        if dtype is not None and dtype != torch.float32:
            raise TypeError("convgrad.torch.Conv2d is float32 only, not %s" % dtype)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)
        self.core_mask = core_mask
        self._convolutions = {}  # input shape -> Convolution

    def forward(self, input):
        unbatched = input.dim() == 3
        if unbatched:
            input = input.unsqueeze(0)
        conv = self._convolutions.get(input.shape)
        if conv is None:
            conv = _convolution(input.shape, self.weight.shape, self.stride, self.padding,
                                self.dilation, self.groups)
            self._convolutions[input.shape] = conv
        y = Conv2dFunction.apply(input, self.weight, self.bias, conv, self.core_mask)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self):
        mask = "" if self.core_mask is None else ", core_mask=%#x" % self.core_mask
        return super().extra_repr() + mask
