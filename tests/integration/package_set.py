# SPDX-License-Identifier: MIT
"""packaging/package-set, the package set sessions' code expects, as the tests read it."""

import os
import types

import paddock_stack as ps

PATH = os.path.join(ps.SOURCE_DIR, "packaging", "package-set")


def _none(v):
    return None if v == "-" else v


def load(path=PATH):
    """The entries in the file's order: SimpleNamespace(kind, name, module, debian, fedora)."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            kind, name, module, debian, fedora = line.split()
            entries.append(types.SimpleNamespace(kind=kind, name=name, module=_none(module),
                                                 debian=_none(debian), fedora=_none(fedora)))
    return entries


def python_entries():
    return [e for e in load() if e.kind == "python"]


def tool_entries():
    return [e for e in load() if e.kind == "tool"]
