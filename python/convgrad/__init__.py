# SPDX-License-Identifier: MIT
"""convgrad: 2-D convolutions' training step and the vendor card's filter
gradient operator, on the emulated cores of a core mask, over libconvgrad.so.

NumPy: conv2d, conv2d_input, conv2d_weight, conv2d_bias, conv2d_backward (the
three gradients in one call; float32, NHWC/OHWI or NCHW/OIHW), conv_grad_filter with ConvParameter (float32 and float16).
PyTorch (when torch is installed): convgrad.torch. docs/python.md has the
whole story."""
from ._conv import (Convolution, conv2d, conv2d_backward, conv2d_bias, conv2d_input,
                    conv2d_weight)
from ._cores import default_core_mask
from ._lib import LIBRARY_PATH, Error, version
from ._operator import ConvParameter, conv_grad_filter

__version__ = version()
Error.__module__ = __name__


def __getattr__(name):
    # convgrad.torch is imported on first use, so that convgrad works without torch.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

__all__ = [
    "ConvParameter", "Convolution", "Error", "LIBRARY_PATH", "conv2d", "conv2d_backward", "conv2d_bias",
    "conv2d_input", "conv2d_weight", "conv_grad_filter", "default_core_mask", "version",
]
