# SPDX-License-Identifier: MIT
"""The shared library, its C types and its errors, through ctypes.

Which libconvgrad.so is loaded: the one CONVGRAD_LIBRARY names when it is
set, else the one recorded when the package was installed (setup.py writes
convgrad/_library_path.py from CONVGRAD_LIBRARY at install time).
"""
import ctypes
import os

from . import _library_path

# cg_status (include/convgrad.h), by value.
STATUS_NAMES = {
    0: "CG_OK",
    -1: "CG_ERR_NULL_POINTER",
    -2: "CG_ERR_BAD_SIZE",
    -3: "CG_ERR_BAD_GROUP",
    -4: "CG_ERR_BAD_STRIDE",
    -5: "CG_ERR_BAD_DILATION",
    -6: "CG_ERR_BAD_PAD",
    -7: "CG_ERR_BATCH_MISMATCH",
    -8: "CG_ERR_BUFFER_TOO_SMALL",
    -9: "CG_ERR_CORE_MASK",
    -10: "CG_ERR_OVERFLOW",
    -11: "CG_ERR_CORE_BUSY",
    -12: "CG_ERR_NO_MEMORY",
    -13: "CG_ERR_THREAD",
    -14: "CG_ERR_BAD_LAYOUT",
    -15: "CG_ERR_INSIDE_LAUNCH",
}
CG_ERR_CORE_BUSY = -11

LAYOUTS = {"NHWC": 0, "NCHW": 1}  # cg_layout

INT_MAX = 2**31 - 1


class Error(RuntimeError):
    """A convgrad call failed: .status (the cg_status value), .name
    ("CG_ERR_BAD_GROUP"), .message (cg_status_message) and .detail
    (cg_last_error_detail: the field at fault and its value)."""

    def __init__(self, status, message, detail):
        self.status = status
        self.name = STATUS_NAMES.get(status, "cg_status %d" % status)
        self.message = message
        self.detail = detail
        text = "%s (%d): %s" % (self.name, status, message)
        super().__init__(text + (": " + detail if detail else ""))


class ConvParameterStruct(ctypes.Structure):
    """struct ConvParameter, field for field."""

    _fields_ = [("workspace_", ctypes.c_void_p)] + [
        (name, ctypes.c_int)
        for name in (
            "output_batch_", "input_batch_", "input_h_", "input_w_", "output_h_",
            "output_w_", "input_channel_", "output_channel_", "kernel_h_", "kernel_w_",
            "group_", "pad_l_", "pad_u_", "dilation_h_", "dilation_w_", "stride_h_",
            "stride_w_", "buffer_size_", "pad_d_", "pad_r_",
        )
    ]


class Conv2dStruct(ctypes.Structure):
    """struct cg_conv2d, field for field (layout is an enum: an int)."""

    _fields_ = [
        (name, ctypes.c_int)
        for name in (
            "layout", "batch", "in_h", "in_w", "in_c", "out_c", "kernel_h", "kernel_w",
            "groups", "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top",
            "pad_bottom", "pad_left", "pad_right",
        )
    ]


def _describe(path):
    if not path:
        return "not set"
    return path + ("" if os.path.exists(path) else ", which does not exist")


def _load():
    env = os.environ.get("CONVGRAD_LIBRARY")
    recorded = _library_path.LIBRARY
    path = env or recorded
    if path and os.path.exists(path):
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            raise ImportError("convgrad: cannot load %s: %s" % (path, e)) from e
    raise ImportError(
        "convgrad: no libconvgrad.so to load: CONVGRAD_LIBRARY is %s, and the path recorded "
        "at install time is %s. Set CONVGRAD_LIBRARY=/path/to/libconvgrad.so, or install "
        "with it set: CONVGRAD_LIBRARY=... pip install --no-build-isolation ./python"
        % (_describe(env), _describe(recorded))
    )


def _declare(lib):
    P = ctypes.c_void_p
    I = ctypes.c_int
    conv = ctypes.POINTER(Conv2dStruct)
    param = ctypes.POINTER(ConvParameterStruct)
    signatures = {
        "cg_version": (ctypes.c_char_p, []),
        "cg_status_message": (ctypes.c_char_p, [I]),
        "cg_last_error_detail": (ctypes.c_char_p, []),
        "cg_conv2d_check": (I, [conv]),
        "cg_conv2d_output_h": (I, [conv]),
        "cg_conv2d_output_w": (I, [conv]),
        "cg_conv2d_forward": (I, [conv, P, P, P, P, I]),
        "cg_conv2d_backward_data": (I, [conv, P, P, P, I]),
        "cg_conv2d_backward_weights": (I, [conv, P, P, P, I]),
        "cg_conv2d_backward_bias": (I, [conv, P, P, I]),
        "cg_conv2d_backward_weights_bias": (I, [conv, P, P, P, P, I]),
        "cg_conv2d_backward": (I, [conv, P, P, P, P, P, P, I]),
        "cg_grad_filter_workspace_bytes": (ctypes.c_size_t, [param, I, ctypes.c_size_t]),
        "cg_grad_filter_min_buffer_size": (I, [param, ctypes.c_size_t]),
        "cg_fp_conv_grad_filter_s": (I, [P, P, P, P, param, I]),
        "cg_hp_conv_grad_filter_s": (I, [P, P, P, P, param, I]),
        "cg_fp_conv_grad_filter_p": (I, [P, P, P, P, param]),
        "cg_hp_conv_grad_filter_p": (I, [P, P, P, P, param]),
    }
    for name, (restype, argtypes) in signatures.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes
    return lib


lib = _declare(_load())
LIBRARY_PATH = lib._name


def raise_for(status):
    """Raises Error for a failed status; the detail is the calling thread's,
    read right after the call (ctypes runs the call on this thread)."""
    if status != 0:
        detail = lib.cg_last_error_detail().decode("utf-8", "replace")
        message = lib.cg_status_message(status).decode("utf-8", "replace")
        raise Error(status, message, detail)


def version():
    """The loaded library's "MAJOR.MINOR.PATCH" (cg_version)."""
    return lib.cg_version().decode("ascii")
