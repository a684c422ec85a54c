# SPDX-License-Identifier: MIT
"""The training step, cg_conv2d_*: a descriptor class over raw pointers, and
the NumPy functions built on it."""
import ctypes
import functools
import operator

import numpy as np

from . import _cores
from ._lib import INT_MAX, LAYOUTS, Conv2dStruct, lib, raise_for


def as_int(value, what):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__)) from None
    if not -INT_MAX - 1 <= v <= INT_MAX:
        raise ValueError("%s=%d does not fit in a C int" % (what, v))
    return v


def as_ints(value, n, what):
    """value as a tuple of n ints: one int repeated, or a sequence of n."""
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError("%s must be an int or %d ints, not %r" % (what, n, value))
        return tuple(as_int(v, what) for v in value)
    return (as_int(value, what),) * n


def as_padding(padding):
    """(top, bottom, left, right) from an int, a pair (h, w) or four values."""
    if isinstance(padding, (tuple, list)):
        if len(padding) == 2:
            h, w = as_ints(padding, 2, "padding")
            return h, h, w, w
        if len(padding) != 4:
            raise ValueError("padding must be an int, (h, w) or (top, bottom, left, right), not %r" % (padding,))
    return as_ints(padding, 4, "padding")


def check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError("layout must be one of %s, not %r" % (", ".join(LAYOUTS), layout))


def checked(a, name, shape, dtypes=(np.float32,), writeable=False):
    """The address of array a after checking its type, dtype, shape and
    memory (C-contiguous, aligned): never a copy."""
    if not isinstance(a, np.ndarray):
        raise TypeError("%s must be a numpy.ndarray, not %s" % (name, type(a).__name__))
    if a.dtype not in dtypes:
        raise TypeError(
            "%s must be %s, not %s" % (name, " or ".join(np.dtype(d).name for d in dtypes), a.dtype)
        )
    if shape is not None and a.shape != tuple(shape):
        raise ValueError("%s has shape %s; expected %s" % (name, a.shape, tuple(shape)))
    if not a.flags.c_contiguous or not a.flags.aligned:
        raise ValueError("%s is not C-contiguous and aligned (numpy.ascontiguousarray makes a copy that is)" % name)
    if writeable and not a.flags.writeable:
        raise ValueError("%s is read-only" % name)
    return a.ctypes.data


def four_d(a, name):
    if not isinstance(a, np.ndarray):
        raise TypeError("%s must be a numpy.ndarray, not %s" % (name, type(a).__name__))
    if a.ndim != 4:
        raise ValueError("%s must have 4 dimensions, not %d (shape %s)" % (name, a.ndim, a.shape))
    return a.shape


class Convolution:
    """One cg_conv2d, checked by the library once: the tensors' shapes in its
    layout, and the four functions on raw addresses (ints) of tensors of
    those shapes. Reusable from many threads (the library only reads it)."""

    def __init__(self, layout, input_shape, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1):
        check_layout(layout)
        shape = as_ints(tuple(input_shape), 4, "input_shape")
        if layout == "NHWC":
            n, h, w, c = shape
        else:
            n, c, h, w = shape
        kh, kw = as_ints(kernel_size, 2, "kernel_size")
        sh, sw = as_ints(stride, 2, "stride")
        dh, dw = as_ints(dilation, 2, "dilation")
        top, bottom, left, right = as_padding(padding)
        s = Conv2dStruct(LAYOUTS[layout], n, h, w, c, as_int(out_channels, "out_channels"), kh, kw,
                         as_int(groups, "groups"), sh, sw, dh, dw, top, bottom, left, right)
        raise_for(lib.cg_conv2d_check(ctypes.byref(s)))
        self._args = (layout, input_shape, out_channels, kernel_size, stride, padding, dilation,
                      groups)
        self.struct = s
        self._ref = ctypes.byref(s)
        self.layout = layout
        oc, oh, ow, cg = s.out_c, lib.cg_conv2d_output_h(self._ref), lib.cg_conv2d_output_w(self._ref), c // s.groups
        if layout == "NHWC":
            self.x_shape, self.y_shape, self.w_shape = (n, h, w, c), (n, oh, ow, oc), (oc, kh, kw, cg)
        else:
            self.x_shape, self.y_shape, self.w_shape = (n, c, h, w), (n, oc, oh, ow), (oc, cg, kh, kw)
        self.b_shape = (oc,)

    def __reduce__(self):  # copies and pickles are made again from the arguments
        return (Convolution, self._args)

    def _run(self, function, *addresses, core_mask):
        mask = _cores.resolve(core_mask)
        raise_for(_cores.reservations.call(mask, function, self._ref, *addresses,
                                           _cores.as_c_int(mask)))

    def forward(self, x, w, b, y, core_mask=None):
        self._run(lib.cg_conv2d_forward, x, w, b, y, core_mask=core_mask)

    def backward_data(self, dy, w, dx, core_mask=None):
        self._run(lib.cg_conv2d_backward_data, dy, w, dx, core_mask=core_mask)

    def backward_weights(self, x, dy, dw, core_mask=None):
        self._run(lib.cg_conv2d_backward_weights, x, dy, dw, core_mask=core_mask)

    def backward_bias(self, dy, db, core_mask=None):
        self._run(lib.cg_conv2d_backward_bias, dy, db, core_mask=core_mask)

    def backward_weights_bias(self, x, dy, dw, db, core_mask=None):
        self._run(lib.cg_conv2d_backward_weights_bias, x, dy, dw, db, core_mask=core_mask)

    def backward(self, x, dy, w, dx, dw, db, core_mask=None):
        """dx, dw and db (None: no bias gradient) in one call."""
        self._run(lib.cg_conv2d_backward, x, dy, w, dx, dw, db, core_mask=core_mask)


def _hashable(v):
    return tuple(_hashable(e) for e in v) if isinstance(v, (list, tuple)) else v


@functools.lru_cache(maxsize=256)
def _cached_convolution(*args):
    return Convolution(*args)


def convolution(layout, input_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                groups=1):
    """Convolution(...), made once for each set of arguments and then reused
    (it is read-only): building and checking one costs tens of microseconds,
    a share of a small layer's call. Unhashable arguments go uncached."""
    args = tuple(_hashable(a) for a in (layout, input_shape, out_channels, kernel_size, stride,
                                        padding, dilation, groups))
    try:
        return _cached_convolution(*args)
    except TypeError as e:
        if "unhashable" not in str(e):
            raise
        return Convolution(*args)


def _channel_axis(layout):
    return 3 if layout == "NHWC" else 1


def _kernel_of(w_shape, layout):
    return w_shape[1:3] if layout == "NHWC" else w_shape[2:4]


def conv2d(x, w, b=None, *, stride=1, padding=0, dilation=1, groups=1, layout="NHWC", core_mask=None):
    """y = conv(x, w) + b, a new float32 array. layout "NHWC": x [N][H][W][C],
    w OHWI; "NCHW": x [N][C][H][W], w OIHW. padding: an int, (h, w) or
    (top, bottom, left, right); stride, dilation: an int or (h, w)."""
    x_shape, w_shape = four_d(x, "x"), four_d(w, "w")
    conv = convolution(layout, x_shape, w_shape[0], _kernel_of(w_shape, layout), stride, padding,
                       dilation, groups)
    y = np.empty(conv.y_shape, np.float32)
    conv.forward(checked(x, "x", conv.x_shape), checked(w, "w", conv.w_shape),
                 None if b is None else checked(b, "b", conv.b_shape), y.ctypes.data, core_mask)
    return y


def conv2d_input(dy, w, input_shape, *, stride=1, padding=0, dilation=1, groups=1, layout="NHWC",
                 core_mask=None):
    """dx, the gradient with respect to x (of shape input_shape), a new array."""
    w_shape = four_d(w, "w")
    conv = convolution(layout, input_shape, w_shape[0], _kernel_of(w_shape, layout), stride,
                       padding, dilation, groups)
    dx = np.empty(conv.x_shape, np.float32)
    conv.backward_data(checked(dy, "dy", conv.y_shape), checked(w, "w", conv.w_shape),
                       dx.ctypes.data, core_mask)
    return dx


def conv2d_weight(x, dy, kernel_size, *, stride=1, padding=0, dilation=1, groups=1, layout="NHWC",
                  core_mask=None):
    """dw, the gradient with respect to the weights, in the layout's weight
    order (OHWI or OIHW), a new array. kernel_size: an int or (kh, kw)."""
    check_layout(layout)
    x_shape, dy_shape = four_d(x, "x"), four_d(dy, "dy")
    conv = convolution(layout, x_shape, dy_shape[_channel_axis(layout)],
                       kernel_size, stride, padding, dilation, groups)
    dw = np.empty(conv.w_shape, np.float32)
    conv.backward_weights(checked(x, "x", conv.x_shape), checked(dy, "dy", conv.y_shape),
                          dw.ctypes.data, core_mask)
    return dw


def conv2d_backward(x, dy, w, *, bias=True, stride=1, padding=0, dilation=1, groups=1,
                    layout="NHWC", core_mask=None):
    """(dx, dw, db): the whole backward pass in one call, new arrays with the
    bits of conv2d_input, conv2d_weight and conv2d_bias (db None where bias
    is False). A depthwise NHWC layer of stride 1 reads dy from memory once
    for all three."""
    x_shape, w_shape = four_d(x, "x"), four_d(w, "w")
    conv = convolution(layout, x_shape, w_shape[0], _kernel_of(w_shape, layout), stride, padding,
                       dilation, groups)
    dx, dw = np.empty(conv.x_shape, np.float32), np.empty(conv.w_shape, np.float32)
    db = np.empty(conv.b_shape, np.float32) if bias else None
    conv.backward(checked(x, "x", conv.x_shape), checked(dy, "dy", conv.y_shape),
                  checked(w, "w", conv.w_shape), dx.ctypes.data, dw.ctypes.data,
                  None if db is None else db.ctypes.data, core_mask)
    return dx, dw, db


def conv2d_bias(dy, *, stride=1, padding=0, dilation=1, groups=1, layout="NHWC", core_mask=None):
    """db[c], the sum of dy over every axis but the channels', a new array.
    stride, padding, dilation and groups are accepted as by the other three
    functions and do not change db."""
    del stride, padding, dilation, groups  # db does not depend on them
    check_layout(layout)
    dy_shape = four_d(dy, "dy")
    if layout == "NHWC":
        n, oh, ow, c = dy_shape
        pixels = (n, oh, ow, 1)
    else:
        n, c, oh, ow = dy_shape
        pixels = (n, 1, oh, ow)
    # A 1x1 convolution from one channel to c: its output is shaped as dy.
    conv = convolution(layout, pixels, c, 1)
    db = np.empty(conv.b_shape, np.float32)
    conv.backward_bias(checked(dy, "dy", conv.y_shape), db.ctypes.data, core_mask)
    return db
