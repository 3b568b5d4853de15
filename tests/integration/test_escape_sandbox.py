# SPDX-License-Identifier: MIT
"""The escape battery, inside a session: each test runs a probe through the real stack and
asserts the kernel's answer (privileges, seccomp, network, other sessions, the host, writes,
devices, setuid)."""

import errno
import json
import os
import platform
import secrets
import socket
import stat
import textwrap
import time

import pytest

import paddock_stack as ps


def probe(client, sid, code, **kw):
    """Run Python in the session; it prints one JSON document, which is returned."""
    r = client.run(sid, textwrap.dedent(code).strip("\n") + "\n", **kw)
    assert r.rc == 0, f"probe failed: rc {r.rc}\n{r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def status_fields(text):
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def test_privileges_seccomp_and_capabilities(client, sid):
    st = probe(client, sid, """
        import json
        print(json.dumps(open('/proc/self/status').read()))
    """)
    f = status_fields(st)
    assert f["NoNewPrivs"] == "1"
    assert f["Seccomp"] == "2", "the seccomp filter is not on"
    assert int(f["Seccomp_filters"]) >= 1
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(f[cap], 16) == 0, f"{cap} is {f[cap]}"
    uid = f["Uid"].split()
    assert all(u == uid[0] for u in uid) and uid[0] != "0", f"Uid {f['Uid']}"
    # The same from bash: every interpreter runs under the filter.
    out = client.bash(sid, "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status").stdout
    f = status_fields(out)
    assert (f["NoNewPrivs"], f["Seccomp"], f["CapEff"]) == ("1", "2", "0000000000000000"), out


# x86_64 numbers; the filter is built for the native architecture.
SYSCALLS = {
    "mount": (165, "b'none', b'/tmp', b'tmpfs', 0, None"),
    "umount2": (166, "b'/tmp', 0"),
    "pivot_root": (155, "b'/tmp', b'/tmp'"),
    "unshare": (272, "0x10000000"),  # CLONE_NEWUSER: allowed to anyone without the filter
    "setns": (308, "-1, 0"),
    "ptrace": (101, "0, 0, 0, 0"),  # PTRACE_TRACEME: allowed to anyone without the filter
    "bpf": (321, "0, None, 0"),
    "keyctl": (250, "0, -3, 0"),
    "add_key": (248, "b'user', b'k', b'v', 1, -3"),
    "io_uring_setup": (425, "1, None"),
    "perf_event_open": (298, "None, 0, -1, -1, 0"),
    "userfaultfd": (323, "0"),
    "init_module": (175, "None, 0, b''"),
    "kexec_load": (246, "0, 0, None, 0"),
    "open_by_handle_at": (304, "-1, None, 0"),
    "swapon": (167, "None, 0"),
    "settimeofday": (164, "None, None"),
    "acct": (163, "None"),
}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers are x86_64's")
def test_dangerous_syscalls_fail_with_eperm(client, sid):
    calls = "\n".join(f"            {name!r}: try_call({nr}, {args})," for name, (nr, args) in SYSCALLS.items())
    res = probe(client, sid, """
        import ctypes, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def try_call(nr, *args):
            ctypes.set_errno(0)
            r = libc.syscall(ctypes.c_long(nr), *args)
            return [r, ctypes.get_errno()]
        out = {
%s
            'clone3': try_call(435, None, 0),
            'clone_newuser': try_call(56, 0x10000000 | 17, 0, 0, 0, 0),
            'clone_newns': try_call(56, 0x00020000 | 17, 0, 0, 0, 0),
            'x32_getpid': try_call(0x40000000 | 39),
            'getpid': try_call(39),
        }
        if out['clone_newuser'][0] == 0 or out['clone_newns'][0] == 0:
            os._exit(0)  # a child made despite the filter: the parent reports it
        print(json.dumps(out))
    """ % calls)
    for name in SYSCALLS:
        assert res[name] == [-1, errno.EPERM], f"{name}: {res[name]}"
    # clone3 is ENOSYS so libc falls back to clone, whose flags the filter can see.
    assert res["clone3"] == [-1, errno.ENOSYS], res["clone3"]
    assert res["clone_newuser"] == [-1, errno.EPERM], res["clone_newuser"]
    assert res["clone_newns"] == [-1, errno.EPERM], res["clone_newns"]
    assert res["x32_getpid"] == [-1, errno.EPERM], res["x32_getpid"]
    assert res["getpid"][0] > 0
    # Threads and subprocesses still work (glibc falls back from clone3 to clone).
    r = client.run(sid, "import threading, subprocess\nt = threading.Thread(target=print, args=('t',))\n"
                        "t.start(); t.join()\nprint(subprocess.run(['echo', 'p'], capture_output=True,"
                        " text=True).stdout, end='')")
    assert r.stdout == "t\np\n", r


def test_only_loopback_and_no_route_out(client, sid):
    res = probe(client, sid, """
        import errno, json, socket, time
        out = {'ifaces': [n for _, n in socket.if_nameindex()]}
        def attempt(family, kind, addr):
            s = socket.socket(family, kind)
            s.settimeout(2)
            t0 = time.monotonic()
            try:
                s.connect(addr)
                if kind == socket.SOCK_DGRAM:
                    s.send(b'x')
                return ['connected', time.monotonic() - t0]
            except OSError as e:
                return [e.errno, time.monotonic() - t0]
            finally:
                s.close()
        # TEST-NET-1 and the IPv6 documentation prefix: never anyone's real address.
        out['tcp4'] = attempt(socket.AF_INET, socket.SOCK_STREAM, ('192.0.2.1', 80))
        out['udp4'] = attempt(socket.AF_INET, socket.SOCK_DGRAM, ('192.0.2.1', 53))
        out['tcp6'] = attempt(socket.AF_INET6, socket.SOCK_STREAM, ('2001:db8::1', 80))
        srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
        c = socket.create_connection(srv.getsockname(), timeout=2)
        out['loopback'] = 'ok'
        c.close(); srv.close()
        print(json.dumps(out))
    """)
    assert res["ifaces"] == ["lo"], res["ifaces"]
    for k in ("tcp4", "udp4", "tcp6"):
        err, took = res[k]
        assert err == errno.ENETUNREACH, f"{k}: {err}"
        assert took < 0.5, f"{k} took {took:.2f} s: there must be no route to try"
    assert res["loopback"] == "ok"


def test_only_families_a_namespace_confines(client, sid):
    # AF_VSOCK reaches the hypervisor past any network namespace; AF_PACKET, AF_KEY,
    # AF_ALG and the rest are kernel surface. Every family number is tried, each type.
    res = probe(client, sid, """
        import json, socket
        opened, refused = {}, {}
        for fam in range(0, 128):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW,
                         socket.SOCK_SEQPACKET):
                try:
                    s = socket.socket(fam, kind, 0)
                except OSError as e:
                    refused.setdefault(fam, set()).add(e.errno)
                else:
                    opened.setdefault(fam, []).append(kind)
                    s.close()
        try:
            v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
            v.bind((socket.VMADDR_CID_ANY, 5000))
            vsock = 'bound'
        except OSError as e:
            vsock = e.errno
        try:
            socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9).close()  # NETLINK_AUDIT
            audit = 'opened'
        except OSError as e:
            audit = e.errno
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()  # NETLINK_ROUTE
        print(json.dumps({'opened': sorted(opened), 'vsock': vsock, 'audit': audit,
                          'refused': {f: sorted(e) for f, e in refused.items()}}))
    """)
    allowed = {socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK}
    assert set(res["opened"]) <= allowed, res["opened"]
    assert res["vsock"] == errno.EAFNOSUPPORT, res["vsock"]
    assert res["audit"] == errno.EPROTONOSUPPORT, res["audit"]
    for fam, errs in res["refused"].items():
        if int(fam) not in allowed:
            assert errs == [errno.EAFNOSUPPORT], f"family {fam}: {errs}"


def test_another_session_is_invisible(client, stack):
    a = client.new_session()
    b = client.new_session()
    try:
        tok = secrets.token_hex(8)
        marker = f"marker_{tok}"
        client.bash(b, f"echo {tok} > secret_{tok}; (exec -a {marker} sleep 300) >/dev/null 2>&1 &")
        seen_b = probe(client, b, f"""
            import json, os, time
            found = False
            for _ in range(100):
                for p in os.listdir('/proc'):
                    if p.isdigit():
                        try:
                            if b'{marker}' in open(f'/proc/{{p}}/cmdline', 'rb').read():
                                found = True
                        except OSError:
                            pass
                if found:
                    break
                time.sleep(0.02)
            print(json.dumps(found))
        """)
        assert seen_b, "the marker process did not start in session b (the test cannot judge a)"
        top = os.path.join(stack.state_dir, "workspaces")
        host_ws_b = [os.path.join(top, d) for d in os.listdir(top)
                     if os.path.exists(os.path.join(top, d, f"secret_{tok}"))]
        assert len(host_ws_b) == 1, host_ws_b
        host_ws_b = host_ws_b[0]
        res = probe(client, a, f"""
            import json, os
            cmdlines = []
            for p in os.listdir('/proc'):
                if p.isdigit():
                    try:
                        cmdlines.append(open(f'/proc/{{p}}/cmdline', 'rb').read().decode('utf-8', 'replace'))
                    except OSError:
                        pass
            hits = []
            for top in ('/workspace', '/tmp', '/'):
                for dirpath, dirs, files in os.walk(top):
                    if dirpath.startswith(('/proc', '/usr', '/sys')):
                        dirs[:] = []
                        continue
                    hits += [os.path.join(dirpath, f) for f in files if '{tok}' in f]
            print(json.dumps({{'cmdlines': cmdlines, 'hits': hits,
                               'host_ws': os.path.exists({host_ws_b!r}),
                               'state_dir': os.path.exists({stack.state_dir!r}),
                               'pid1': open('/proc/1/cmdline', 'rb').read().decode()}}))
        """)
        assert not any(marker in c for c in res["cmdlines"]), "a sees b's process"
        assert len(res["cmdlines"]) < 20, res["cmdlines"]
        assert res["hits"] == [], f"a finds b's file: {res['hits']}"
        assert not res["host_ws"] and not res["state_dir"], "the host's state dir is visible"
        assert "paddock-init" in res["pid1"], res["pid1"]
        # And from the files API: a's listing never has b's file.
        r = client.list_files(a)
        assert tok not in r.text
    finally:
        client.destroy(a)
        client.destroy(b)


def test_host_secrets_are_absent(client, sid, stack):
    db_files = [os.path.join(stack.state_dir, n) for n in os.listdir(stack.state_dir)
                if n.endswith((".db", ".sqlite", ".sqlite3", "-wal", "-shm"))]
    assert db_files, f"no SQLite file found in {os.listdir(stack.state_dir)}"
    paths = ["/root", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers",
             os.path.join(stack.run_dir, "sessiond.sock"), os.path.join(stack.run_dir, "fcgi.sock"),
             stack.state_dir, "/var/lib/paddock", "/run/paddock"] + db_files
    res = probe(client, sid, f"""
        import json, os, socket
        out = {{}}
        for p in {paths!r}:
            try:
                with open(p, 'rb') as f:
                    f.read(1)
                out[p] = 'readable'
            except OSError as e:
                out[p] = 'absent' if not os.path.lexists(p) else 'unreadable'
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect({os.path.join(stack.run_dir, "sessiond.sock")!r})
            out['connect'] = 'connected'
        except OSError as e:
            out['connect'] = e.errno
        print(json.dumps(out))
    """)
    for p in paths:
        assert res[p] in ("absent", "unreadable"), f"{p} is {res[p]} in the sandbox"
    assert res["connect"] != "connected", "the sandbox reached sessiond's socket"


# What /proc would tell a session about the host: its boot line and kernel build, kernel
# addresses, other processes' timers and keys, physical memory, hardware and drivers.
# The files read as empty (/dev/null is on them: writes go nowhere), the directories are
# empty and read-only.
PROC_MASKED_FILES = ["kcore", "keys", "key-users", "timer_list", "timer_stats",
                     "latency_stats", "sched_debug", "sysrq-trigger", "cmdline", "config.gz",
                     "bootconfig", "kallsyms", "kmsg", "modules", "vmallocinfo", "slabinfo",
                     "iomem", "ioports", "kpagecount", "kpageflags", "kpagecgroup", "mtrr",
                     # block devices' counters: other sessions' workspaces are loop devices
                     "diskstats", "partitions"]
# fs: /proc/fs/ext4/loopN has every session's workspace (free blocks, options, stats)
PROC_MASKED_DIRS = ["acpi", "asound", "scsi", "driver", "fs"]


def test_host_kernel_details_are_masked(client, sid):
    res = probe(client, sid, f"""
        import json, os
        files, dirs = {{}}, {{}}
        for name in {PROC_MASKED_FILES!r}:
            p = '/proc/' + name
            if not os.path.exists(p):
                continue
            try:
                with open(p, 'rb') as f:
                    files[name] = len(f.read(4096))
            except OSError as e:
                files[name] = 'refused'
        for name in {PROC_MASKED_DIRS!r}:
            p = '/proc/' + name
            if os.path.isdir(p):
                dirs[name] = os.listdir(p)
                try:
                    open(p + '/x', 'w')
                    dirs[name + ' write'] = 'written'
                except OSError:
                    pass
        print(json.dumps({{'files': files, 'dirs': dirs}}))
    """)
    # cmdline, diskstats and /proc/fs exist on every kernel here: the probe saw them at all.
    assert "cmdline" in res["files"] and "diskstats" in res["files"] and "fs" in res["dirs"], res
    for name, got in res["files"].items():
        assert got in (0, "refused"), f"/proc/{name} gave {got}"
    for name, got in res["dirs"].items():
        assert got == [], f"/proc/{name} shows {got}"


def test_mounts_name_no_host_path(stack, client, sid):
    """What the sandbox reads of its mounts names none of paddock's places on the host
    (state dir, lib dir, source tree): its own mounts are file systems of their own (its
    tmpfs roots, /proc, the workspace's ext4), and paddock's lib dir is a copy on a tmpfs."""
    res = probe(client, sid, """
        import json
        rows = []
        for line in open('/proc/self/mountinfo'):
            f = line.split()
            sep = f.index('-')
            rows.append([f[3], f[4], f[sep + 1], line.strip()])
        print(json.dumps(rows))
    """)
    host_paths = {p for p in (stack.state_dir, ps.LIB_DIR, ps.SOURCE_DIR, ps.BUILD_DIR)
                  if p and p != "/"}
    for root, point, fstype, line in res:
        assert not any(h in line for h in host_paths), line
        # paddock's own mounts are file systems of their own, shown from their roots. (The
        # host's /usr and /etc files show their place on the host's file system, which the
        # host's layout decides: a btrfs subvolume, a container's bind.)
        if point in ("/", "/opt/paddock", "/tmp", "/dev", "/proc"):
            assert root == "/" and fstype in ("tmpfs", "proc"), line
        if point == "/workspace":  # workspace_backend = disk: an ext4 on a loop device
            assert root == "/" and fstype in ("tmpfs", "ext4"), line
    assert any(point == "/opt/paddock" and fstype == "tmpfs" for _, point, fstype, _ in res), res


def test_writes_outside_workspace_and_tmp_fail(client, sid):
    res = probe(client, sid, """
        import json, os
        mounts = []
        for line in open('/proc/self/mountinfo'):
            f = line.split()
            mounts.append((f[4], f[5]))
        out = {}
        targets = sorted({m for m, _ in mounts} | {'/', '/usr', '/usr/bin', '/etc', '/opt', '/opt/paddock',
                                                   '/dev', '/proc', '/proc/sys/kernel', '/var', '/root'})
        for d in targets:
            p = os.path.join(d, '.paddock-write-probe')
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.close(fd)
                os.unlink(p)
                out[d] = 'written'
            except OSError as e:
                out[d] = e.errno
        try:
            open('/proc/sys/kernel/hostname', 'w').write('x')
            out['sysctl'] = 'written'
        except OSError as e:
            out['sysctl'] = e.errno
        print(json.dumps({'writes': out, 'mounts': mounts}))
    """)
    writable = sorted(d for d, v in res["writes"].items() if v == "written")
    # /dev/shm: POSIX shared memory (multiprocessing's locks need it), a 16 MiB tmpfs.
    assert writable == ["/dev/shm", "/tmp", "/workspace"], writable
    assert res["writes"]["sysctl"] != "written"
    assert set(res["writes"]) >= {mp for mp, _ in res["mounts"]}, "a mount point was not probed"


def test_mounts_are_nosuid_and_setuid_gives_nothing(client, sid):
    res = probe(client, sid, """
        import json, os, stat, subprocess, time
        mounts = []
        for line in open('/proc/self/mountinfo'):
            f = line.split()
            sep = f.index('-')
            mounts.append([f[4], f[5], f[sep + 3]])
        setuid = sorted(p for p in (os.path.join('/usr/bin', n) for n in os.listdir('/usr/bin'))
                        if os.path.isfile(p) and os.stat(p).st_mode & stat.S_ISUID
                        and os.stat(p).st_uid == 0)
        seen = {}
        # Catch a setuid-root program while it runs and read its ids from /proc.
        for prog in [p for p in setuid if os.path.basename(p) in ('su', 'passwd', 'chfn', 'chsh')][:2]:
            for _ in range(20):
                child = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
                name = os.path.basename(prog)
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline:
                    try:
                        st = open(f'/proc/{child.pid}/status').read()
                    except OSError:
                        break
                    if f'Name:\\t{name}' in st:
                        seen[name] = [l for l in st.splitlines() if l.startswith('Uid:')][0]
                        break
                child.kill(); child.wait()
                if name in seen:
                    break
        print(json.dumps({'mounts': mounts, 'setuid': setuid, 'seen': seen, 'uid': os.getuid()}))
    """)
    for mp, opts, superopts in res["mounts"]:
        if mp.startswith("/proc/") and superopts == "rw":
            continue  # a /dev/null bind over a proc file (masks /proc/kcore and friends)
        assert "nosuid" in opts.split(","), f"{mp} is mounted without nosuid ({opts})"
    assert res["setuid"], "no setuid-root binary in /usr/bin to try"
    assert res["seen"], "no setuid program was caught running"
    for name, line in res["seen"].items():
        ids = line.split()[1:]
        assert ids == [str(res["uid"])] * 4, f"{name} ran with {line}"


def test_device_nodes_are_the_harmless_few(client, sid):
    res = probe(client, sid, """
        import json, os, stat
        devs = []
        for dirpath, dirs, files in os.walk('/dev'):
            for n in dirs + files:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                    devs.append(p)
        made = {}
        for d in ('/workspace', '/tmp', '/dev/shm'):
            try:
                os.mknod(os.path.join(d, 'null2'), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
                made[d] = 'made'
            except OSError as e:
                made[d] = e.errno
        print(json.dumps({'devs': sorted(devs), 'made': made}))
    """)
    assert res["devs"] == sorted(f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom",
                                                        "tty")), res["devs"]
    assert all(v == errno.EPERM for v in res["made"].values()), res["made"]
