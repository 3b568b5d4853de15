# SPDX-License-Identifier: MIT
"""Entry point of the native Python harness (harness_native.py, which says how
it is started and why).

A script given on the command line is compiled from source at every start;
a module is loaded from its bytecode in __pycache__ when that matches the
source (the build and the packages compile it). Compiling harness_native.py
takes about a fifth of the harness's start, so this file only imports it and
calls main(). Without valid bytecode the import compiles the source as
before: nothing else changes.
"""

import os
import sys

sys.dont_write_bytecode = True    # the lib dir is read-only in the sandbox
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import harness_native
finally:
    # User code must not find the harness's directory on sys.path...
    del sys.path[0]
# ...nor the harness among the modules, as when it ran as __main__ (this name keeps it).
del sys.modules["harness_native"], sys.modules["harness_channel"]

harness_native.main()
