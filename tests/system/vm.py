# SPDX-License-Identifier: MIT
"""The VM layout: the cached guest tree as an ext4 disk (mke2fs -d, no loop mount) booted
under QEMU (TCG: no KVM on these machines) with the tree's own Debian kernel and initrd,
cgroup v2 unified as Debian boots it, the share in through virtio-9p, no network. Writes
to the disk go to a temporary snapshot, so the cached image stays as it was. The guest
reboots once in the same QEMU (no -no-reboot) and powers off at the end; QEMU then exits.
"""

import os
import subprocess
import time

import images
from guest_run import Watch, guest_files, stop_process

RESTART_LINE = b"reboot: Restarting system"


def run(tree, share, work, log, progress, timeout, build_log):
    """Boot the tree in a VM until the guest powers off; returns the Watch."""
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    disk = images.ext4_image(tree, guest_files(), build_log)
    kernel, initrd = images.kernel_files(tree)
    console = os.path.join(work, "console.log")
    argv = ["qemu-system-x86_64", "-machine", "q35", "-accel", "tcg", "-cpu", "max",
            "-smp", "2", "-m", "4G", "-nographic", "-monitor", "none", "-serial", f"file:{console}",
            "-kernel", kernel, "-initrd", initrd,
            "-append", "root=/dev/vda rw console=ttyS0 systemd.show_status=1",
            "-drive", f"file={disk},format=raw,if=virtio,snapshot=on",
            "-virtfs", f"local,path={share},mount_tag=systest,security_model=passthrough,id=systest",
            "-nic", "none"]
    watch = Watch(share, "vm", progress)
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                             cwd=work)
    deadline = time.monotonic() + timeout
    offset = 0
    try:
        while p.poll() is None:
            watch.poll()
            # The kernel's last line before the reboot: the shutdown is over.
            if "reboot-requested" in watch.seen and "reboot shutdown" not in watch.times:
                try:
                    with open(console, "rb") as c:
                        c.seek(offset)
                        chunk = c.read()
                except OSError:
                    chunk = b""
                if RESTART_LINE in chunk:
                    watch.mark("reboot shutdown", "reboot-requested")
                offset += max(0, len(chunk) - len(RESTART_LINE))
            if time.monotonic() > deadline:
                watch.times["timeout"] = timeout
                break
            time.sleep(0.1)
        watch.poll()
        if p.poll() is not None:
            if "poweroff-requested" in watch.seen:
                watch.mark("poweroff", "poweroff-requested")
            watch.times["exit status"] = p.returncode
    finally:
        stop_process(p)
        # The console log goes with the rest of the run's logs.
        subprocess.run(["cp", console, log + ".console"], check=False)
    return watch
