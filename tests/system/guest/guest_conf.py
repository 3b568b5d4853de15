# SPDX-License-Identifier: MIT
"""The guest's paddock settings: the container has no loop devices, so it runs paddock with
workspace_backend = tmpfs, set in /etc/paddock/paddock.conf as docs/operations.md says,
where every program of the package reads it (the daemon, paddockctl, the removal's
--end-sessions)."""

import os


def workspace_backend(layout):
    return "tmpfs" if layout == "container" else "disk"


def prepare_install(layout, src):
    """Before the package is installed: the shipped paddock.conf with the container's line
    added, which the install keeps (--force-confold). Returns the extra apt options."""
    if workspace_backend(layout) == "disk":
        return []
    with open(os.path.join(src, "packaging", "paddock.conf"), encoding="utf-8") as f:
        text = f.read()
    os.makedirs("/etc/paddock", exist_ok=True)
    with open("/etc/paddock/paddock.conf", "w", encoding="utf-8") as f:
        f.write(text + "\n# The system test's container has no loop devices.\n"
                       "workspace_backend = tmpfs\n")
    return ["-o", "Dpkg::Options::=--force-confold"]
