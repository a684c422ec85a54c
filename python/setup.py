# SPDX-License-Identifier: MIT
"""The parts pyproject.toml cannot say: which libconvgrad.so the installed
package loads, and its version.

CONVGRAD_LIBRARY, set at install time, names the library: the installed
convgrad/_library_path.py records its absolute path, and the package's
version is the library's own (cg_version). Without it the version is read
from ../include/convgrad.h and nothing is recorded (the package then needs
CONVGRAD_LIBRARY at run time)."""
import ctypes
import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.environ.get("CONVGRAD_LIBRARY")
if LIBRARY:
    LIBRARY = os.path.abspath(LIBRARY)
    if not os.path.isfile(LIBRARY):
        raise SystemExit("CONVGRAD_LIBRARY=%s: no such file" % LIBRARY)


def library_version():
    if LIBRARY:
        cg_version = ctypes.CDLL(LIBRARY).cg_version
        cg_version.restype = ctypes.c_char_p
        return cg_version().decode("ascii")
    header = os.path.join(HERE, "..", "include", "convgrad.h")
    if not os.path.isfile(header):
        raise SystemExit("set CONVGRAD_LIBRARY=/path/to/libconvgrad.so to install convgrad")
    with open(header) as f:
        text = f.read()
    parts = [re.search(r"#define CONVGRAD_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class RecordLibrary(build_py):
    """Writes the library's path into the built convgrad/_library_path.py."""

    def run(self):
        super().run()
        if LIBRARY:
            target = os.path.join(self.build_lib, "convgrad", "_library_path.py")
            with open(target, "w") as f:
                f.write("# SPDX-License-Identifier: MIT\n"
                        "# Written by setup.py at install time: the library to load.\n"
                        "LIBRARY = %r\n" % LIBRARY)


setup(version=library_version(), cmdclass={"build_py": RecordLibrary})
