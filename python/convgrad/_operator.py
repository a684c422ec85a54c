# SPDX-License-Identifier: MIT
"""The vendor card's operator: cg_fp_/cg_hp_conv_grad_filter_s/_p."""
import ctypes
import dataclasses
import threading
from typing import Optional

import numpy as np

from . import _cores
from ._conv import as_int, checked
from ._lib import ConvParameterStruct, lib, raise_for


@dataclasses.dataclass
class ConvParameter:
    """The card's ConvParameter, field for field, without workspace_ (the
    package owns the workspace). buffer_size_ (bytes) None: its lower bound,
    cg_grad_filter_min_buffer_size, for the call's dtype."""

    output_batch_: int
    input_batch_: int
    input_h_: int
    input_w_: int
    output_h_: int
    output_w_: int
    input_channel_: int
    output_channel_: int
    kernel_h_: int
    kernel_w_: int
    group_: int = 1
    pad_l_: int = 0
    pad_u_: int = 0
    dilation_h_: int = 1
    dilation_w_: int = 1
    stride_h_: int = 1
    stride_w_: int = 1
    buffer_size_: Optional[int] = None
    pad_d_: int = 0
    pad_r_: int = 0

    def to_struct(self, dtype_size):
        """The C struct (workspace_ NULL); a buffer_size_ of None becomes its
        lower bound, or stays 0 when the other fields are invalid."""
        s = ConvParameterStruct()
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                setattr(s, field.name, as_int(value, field.name))
        if self.buffer_size_ is None:
            s.buffer_size_ = lib.cg_grad_filter_min_buffer_size(ctypes.byref(s), dtype_size)
        return s


_FUNCTIONS = {  # (dtype, private) -> the status-returning C function
    (np.dtype(np.float32), False): lib.cg_fp_conv_grad_filter_s,
    (np.dtype(np.float16), False): lib.cg_hp_conv_grad_filter_s,
    (np.dtype(np.float32), True): lib.cg_fp_conv_grad_filter_p,
    (np.dtype(np.float16), True): lib.cg_hp_conv_grad_filter_p,
}

_thread = threading.local()


def _workspace(nbytes):
    """The calling thread's workspace, at least nbytes, grown on demand and
    reused: a thread's repeated calls of one shape allocate nothing."""
    buf = getattr(_thread, "workspace", None)
    if buf is None or buf.nbytes < nbytes:
        buf = _thread.workspace = np.empty(max(nbytes, 1), np.uint8)
    return buf.ctypes.data


def _prepared(p, dtype_size):
    """(the C struct, whether it is valid, the arrays' shapes, the workspace
    bytes by mask) of p for the calling thread, made once for each set of
    field values and dtype and then reused: building them costs tens of
    microseconds, a share of a small layer's call. The struct is the
    thread's own, so each call may set its workspace_."""
    try:
        key = (tuple(vars(p).values()), dtype_size)  # the fields, in order
        hash(key)
    except TypeError:  # an unhashable field: to_struct says what is wrong with it
        key = None
    cache = getattr(_thread, "prepared", None)
    if cache is None:
        cache = _thread.prepared = {}
    hit = cache.get(key) if key is not None else None
    if hit is None:
        s = p.to_struct(dtype_size)
        valid = lib.cg_grad_filter_min_buffer_size(ctypes.byref(s), dtype_size) > 0
        hit = (s, valid, _shapes(p) if valid else {}, {})  # the last: mask -> workspace bytes
        if key is not None:
            if len(cache) >= 64:
                cache.clear()
            cache[key] = hit
    return hit


def _as_parameter(param):
    if isinstance(param, ConvParameter):
        return param
    if isinstance(param, dict):
        return ConvParameter(**param)
    raise TypeError("param must be a convgrad.ConvParameter or a dict of its fields, not %s"
                    % type(param).__name__)


def _shapes(p):
    """The arrays' shapes for valid parameters."""
    cout = p.output_channel_
    return {"dy": (p.output_batch_, p.output_h_, p.output_w_, cout),
            "x": (p.input_batch_, p.input_h_, p.input_w_, p.input_channel_),
            "out_dw": (cout, p.kernel_h_, p.kernel_w_, p.input_channel_ // p.group_),
            "bias": (cout,)}


def conv_grad_filter(dy, x, out_dw, bias=None, *, param, core_mask=None, private=False):
    """out_dw += the filter gradient of dy (NHWC) and x (NHWC), plus bias[c]
    once on every element of row c when bias is given; the card's operator.

    Arrays: all float32 (fp_conv_grad_filter) or all float16 (hp_), C-contiguous,
    dy [output_batch_][output_h_][output_w_][output_channel_],
    x [input_batch_][input_h_][input_w_][input_channel_],
    out_dw [output_channel_][kernel_h_][kernel_w_][input_channel_/group_], bias
    [output_channel_]. Host mode _s on the cores of core_mask (default: the
    default mask), or, with private=True, _p on the calling thread (core_mask
    unused). The workspace is the package's: one per thread, reused.
    Returns out_dw."""
    if not isinstance(out_dw, np.ndarray):
        raise TypeError("out_dw must be a numpy.ndarray, not %s" % type(out_dw).__name__)
    function = _FUNCTIONS.get((out_dw.dtype, bool(private)))
    if function is None:
        raise TypeError("out_dw must be float32 or float16, not %s" % out_dw.dtype)
    dtype, p = out_dw.dtype, _as_parameter(param)
    s, valid, shapes, workspace_bytes = _prepared(p, dtype.itemsize)
    addresses = [checked(dy, "dy", shapes.get("dy"), (dtype,)),
                 checked(x, "x", shapes.get("x"), (dtype,)),
                 checked(out_dw, "out_dw", shapes.get("out_dw"), (dtype,), writeable=True),
                 None if bias is None else checked(bias, "bias", shapes.get("bias"), (dtype,))]
    # Invalid fields: the library says which, before it reads or writes
    # anything, so a one-byte workspace will do.
    if private:
        s.workspace_ = _workspace(s.buffer_size_ * 4 if valid and s.buffer_size_ > 0 else 1)
        raise_for(function(*addresses, ctypes.byref(s)))
        return out_dw
    mask = _cores.resolve(core_mask)
    nbytes = workspace_bytes.get(mask)
    if nbytes is None:
        nbytes = workspace_bytes[mask] = lib.cg_grad_filter_workspace_bytes(
            ctypes.byref(s), _cores.as_c_int(mask), dtype.itemsize)
    s.workspace_ = _workspace(nbytes)
    raise_for(_cores.reservations.call(mask, function, *addresses, ctypes.byref(s),
                                       _cores.as_c_int(mask)))
    return out_dw
