# SPDX-License-Identifier: MIT
# The libconvgrad.so this package was installed for. None here in the source
# tree; setup.py writes the installed copy of this file from CONVGRAD_LIBRARY.
LIBRARY = None
