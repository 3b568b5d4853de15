# SPDX-License-Identifier: MIT
"""The Python template: an interpreter that has imported a harness (the native one, or
the kernel tier's with IPython) and the configured heavy modules once, and forks each
session's interpreter of that kind from itself,
so that a session starts with those imports done and their pages shared copy-on-write
with every other session's (docs/architecture.md, "Preloaded interpreters").

sessiond starts it as root on the host, in its own process, with:
  fd 3   a SOCK_SEQPACKET socket to sessiond: one JSON object per datagram
  fd 4   the sandboxes' seccomp filter, as compiled BPF (read, then closed)
  env    PADDOCK_LIB_DIR (where the harness is), PADDOCK_TEMPLATE_KIND (native or
         kernel), PADDOCK_PRELOAD (comma-separated module names), PADDOCK_TEMPLATE_DIRECT
         (1: fork in one step where it can, below), MPLBACKEND, MPLCONFIGDIR, HOME, PATH,
         LANG
It never runs user code. Once its imports are done it says
  {"ready": true, "loaded": [...], "failed": {"module": "why"},
   "direct": true or "why it forks in two steps"}
or, when its harness cannot be imported (the kernel tier without IPython),
  {"ready": false, "why": "..."}  and exits.
and then serves, one at a time,
  {"op": "fork", "seq": N, "env": ["K=V", ...], "cwd": "/workspace",
   "lib_dir": "/opt/paddock" (where the sandbox has the harness)}
with the descriptors (SCM_RIGHTS), in order: the sandbox init's pidfd, the harness's
control socket, the write ends of its stdout and stderr pipes, and the session cgroup's
cgroup.procs files (one per hierarchy) opened for writing. The answer is
  {"seq": N, "pid": <host pid>}, with the interpreter's pidfd (SCM_RIGHTS) when it was
  forked in one step,
or {"seq": N, "error": "why"}.

Either way the interpreter is sessiond's child, which reaps it and reads its exit status,
and the sandbox's pid 2.. like any other process there. In one step (the default), the
template enters the sandbox's namespaces (its pid namespace for its children), clones
the interpreter with CLONE_PARENT (its parent is sessiond) and CLONE_PIDFD, and goes
back to its own, so that the interpreter is born in every namespace of the sandbox; it
then joins the session's cgroups. clone3 is not fork(): what glibc's fork() does in the
child (the thread's own tid, its robust-futex list) and Python's os.fork() does around
it (PyOS_BeforeFork and the AfterFork calls, their at-fork handlers) is done here, and
only while the template has a single thread, as glibc's fork() does in a
single-threaded process but for pthread_atfork() handlers of C libraries, which are not
run. Where that cannot be done (another thread, an unknown glibc, PADDOCK_TEMPLATE_DIRECT
not 1, a kernel that refuses clone3), it forks in two steps: a first child joins the
cgroups and enters the namespaces, forks the interpreter and exits, and the interpreter
is reparented to sessiond (a child subreaper).
The interpreter takes what init has, read from the sandbox's /proc: its resource limits,
uid, gid, groups and umask; it drops every capability from its bounding set, changes
its ids (which clears its capabilities), sets no_new_privs, installs the sandboxes'
seccomp filter, and only then runs the harness. Anything that fails on the way ends it
with status 127 before a line of user code has run.
"""

import ctypes
import errno
import gc
import io
import json
import os
import resource
import signal
import socket
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
ENTER = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET

CLONE_PARENT = 0x00008000
CLONE_PIDFD = 0x00001000
CLONE_CHILD_SETTID = 0x01000000
CLONE_CHILD_CLEARTID = 0x00200000
# Where the template goes back to after a clone: every namespace ENTER enters.
HOME_NAMESPACES = ("mnt", "net", "ipc", "uts", "cgroup", "pid_for_children")
SYS_CLONE3 = 435
SYS_GETTID = 186
SYS_GET_ROBUST_LIST = 274
SYS_SET_ROBUST_LIST = 273
X86_64 = os.uname().machine == "x86_64"  # the system call numbers above are its own

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

CTL_FD = 3           # the socket to sessiond
BPF_FD = 4           # the seccomp filter, at start
MAX_FDS = 4 + 8      # pidfd, ctl, out, err and cgroup.procs files (v1: one per hierarchy)
FAILED = 127         # the interpreter's exit status when it could not be made
HIGH_FD = 100        # where a fork's descriptors wait while 0..3 are set

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _read_line(fd):
    """What fd says up to its first newline (or its end): the forking child's word, read
    without waiting for that child to exit."""
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b or b"\n" in b:
            return (b"".join(chunks) + b).split(b"\n", 1)[0]
        chunks.append(b)


# ---------------------------------------------------------------- the interpreter

def _init_status():
    """uid, gid, groups and umask of the sandbox's init (pid 1 of the namespace we are in)."""
    fields = {}
    with open("/proc/1/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    uid, gid = int(fields["Uid"][0]), int(fields["Gid"][0])
    groups = [int(g) for g in fields.get("Groups", [])]
    umask = int(fields["Umask"][0], 8) if "Umask" in fields else 0o022
    return uid, gid, groups, umask


def _rlim_min(a, b):
    if a == resource.RLIM_INFINITY:
        return b
    if b == resource.RLIM_INFINITY:
        return a
    return min(a, b)


def _copy_rlimits():
    """init's limits, from /proc/1/limits, whose lines come in RLIMIT_* order (prlimit()
    on init would need CAP_SYS_RESOURCE, which a container's root may lack)."""
    with open("/proc/1/limits", encoding="ascii") as f:
        lines = f.read().splitlines()[1:]
    for which, line in enumerate(lines):
        # "Max open files            1024                 1024                 files"
        soft, hard = line[26:47].split(), line[47:68].split()
        if not soft or not hard:
            continue
        want = [resource.RLIM_INFINITY if v[0] == "unlimited" else int(v[0])
                for v in (soft, hard)]
        try:
            resource.setrlimit(which, tuple(want))
        except PermissionError:
            # Above our own hard limit (which only CAP_SYS_RESOURCE may raise): stricter.
            ceiling = resource.getrlimit(which)[1]
            resource.setrlimit(which, tuple(_rlim_min(v, ceiling) for v in want))


def _drop_bounding_set():
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"dropping capability {cap}")


def _no_capabilities_left():
    with open("/proc/self/status", encoding="ascii") as f:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in f)
                if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    return len(caps) >= 4 and all(int(v, 16) == 0 for v in caps.values())


def _install_seccomp(bpf):
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
           "seccomp")


def _held_files():
    """Files the imports left open (IPython's /dev/null, a font): (fd, path, flags), for
    each fork to open again in its sandbox (a descriptor of the host's is never passed)."""
    held = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= CTL_FD:
            continue
        try:
            st = os.fstat(fd)
            path = os.readlink(f"/proc/self/fd/{fd}")
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
                flags = int(next(line for line in f if line.startswith("flags:")).split()[1], 8)
        except (OSError, StopIteration, ValueError):
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode):
            held.append((fd, path, flags & (os.O_ACCMODE | os.O_APPEND | os.O_CLOEXEC),
                         (st.st_dev, st.st_ino)))
    return held


def _still_held(fd, ident):
    """Whether fd is still the file the template recorded (a module's fork handler may
    have closed it: matplotlib's drops its fonts in every fork)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def _place_fds(ctl, out, err):
    """0 /dev/null, 1 and 2 the pipes, 3 the control socket, and the files the template's
    imports hold, each opened again by its path in the sandbox (where it is not, its
    number stays closed); nothing else."""
    high = [os.dup2(fd, HIGH_FD + i, inheritable=False) for i, fd in enumerate((ctl, out, err))]
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(high[1], 1)
    os.dup2(high[2], 2)
    os.dup2(high[0], 3)
    keep = []
    for fd, path, flags, ident in _held:
        if not _still_held(fd, ident):
            continue
        try:
            again = os.open(path, flags & ~os.O_CLOEXEC | os.O_CLOEXEC)
        except OSError:
            os.close(fd)
            continue
        os.dup2(again, fd, inheritable=not flags & os.O_CLOEXEC)
        os.close(again)
        keep.append(fd)
    start = 4
    for fd in sorted(keep) + [resource.getrlimit(resource.RLIMIT_NOFILE)[0]]:
        os.closerange(start, fd)
        start = fd + 1


def _fresh_stdio():
    """Stream objects for fds 0, 1 and 2 as Python makes them at start under -u: the
    template's know its own files (it may have been started on a seekable log), not the
    session's pipes. The harness keeps the stdout and stderr it found at import."""
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                             encoding="utf-8")
    out, err = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                 errors="backslashreplace", write_through=True)
                for fd in (1, 2))
    sys.stdin = sys.__stdin__ = stdin
    sys.stdout = sys.__stdout__ = out
    sys.stderr = sys.__stderr__ = err
    _harness._STDOUT, _harness._STDERR = out, err


def _rebind_channel(lib_dir):
    """What the harness's channel module noted at import, as this process would have: its
    pid (a child of user code that comes back to its loop must not answer) and its file
    (it loads the tools module from its directory), which the sandbox has at lib_dir."""
    channel = _harness.serve.__globals__
    channel["_PID"] = os.getpid()
    channel["__file__"] = os.path.join(lib_dir, os.path.basename(channel["__file__"]))


def _reseed():
    """Random state imported in the template is the same in every fork: draw anew (the
    random module reseeds itself at fork)."""
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()


def _become_interpreter(req, ctl, out, err, bpf):
    """In the sandbox's namespaces, pid 2.. of its pid namespace: become a session's
    interpreter like one init starts, then run the harness. Never returns."""
    step = "its descriptors"
    try:
        _place_fds(ctl, out, err)
        _fresh_stdio()
        _rebind_channel(req.get("lib_dir") or "/")
        step = "its signals"
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        step = "init's ids and limits"
        uid, gid, groups, umask = _init_status()
        _copy_rlimits()
        step = "the capability bounding set"
        _drop_bounding_set()
        step = "its ids"
        os.setgroups(groups)
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if uid == 0 or not _no_capabilities_left():
            raise OSError("capabilities remain after the change of ids")
        step = "the seccomp filter"
        _install_seccomp(bpf)
        step = "its directory and environment"
        os.umask(umask)
        os.chdir(req.get("cwd") or "/")
        os.environ.clear()
        for item in req.get("env") or []:
            key, sep, value = item.partition("=")
            if sep and key:
                os.environ[key] = value
        if hasattr(_harness, "set_environment"):
            _harness.set_environment()
        _reseed()
    except BaseException as exc:
        try:
            os.write(2, f"paddock: the interpreter could not be made ({step}): {exc}\n".encode())
        finally:
            os._exit(FAILED)
    try:
        if _shell is not None:
            _harness.main(_shell)
        else:
            _harness.main()
    except BaseException as exc:
        os.write(2, f"paddock: the harness ended: {type(exc).__name__}: {exc}\n".encode())
        os._exit(FAILED)
    os._exit(0)


# ---------------------------------------------------------------- a fork

def _enter_and_fork(req, fds, report_fd, bpf):
    """The first child: into the session's cgroups and namespaces, then fork the
    interpreter (in the sandbox's pid namespace) and say its host pid."""
    pidfd, ctl, out, err, *procs = fds
    for fd in procs:
        os.write(fd, b"0")
        os.close(fd)
    _check(_libc.setns(pidfd, ENTER), "entering the sandbox's namespaces")
    os.close(pidfd)
    child = os.fork()
    if child == 0:
        os.close(report_fd)
        _become_interpreter(req, ctl, out, err, bpf)
    os.write(report_fd, f"{child}\n".encode())


def _fork_in_two_steps(req, fds, sock, bpf):
    """A first child enters the sandbox and forks the interpreter: (answer, first child)."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            os.close(r)
            sock.close()
            _enter_and_fork(req, fds, w, bpf)
            code = 0
        except BaseException as exc:
            try:
                os.write(w, f"error {exc}\n".encode())
            except OSError:
                pass
            code = 1
        os._exit(code)
    os.close(w)
    try:
        said = _read_line(r).decode("utf-8", "replace")
    except BaseException:
        os.waitpid(first, 0)  # no answer will carry it to _serve's wait
        raise
    finally:
        os.close(r)
    if said.isdigit():
        return {"pid": int(said)}, first
    return {"error": said[len("error "):] if said.startswith("error ") else
            "the forking child ended without a word"}, first


class _DirectUnusable(Exception):
    """A fork in one step cannot be made here, and nothing was changed: two steps."""


class _CloneArgs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
                 "stack_size", "tls")]


class _DirectFork:
    """The interpreter cloned straight into the sandbox as sessiond's child (the module's
    docstring says what that takes). Made once, at start, by the template's only thread."""

    def __init__(self):
        if os.environ.get("PADDOCK_TEMPLATE_DIRECT") != "1":
            raise _DirectUnusable("template_direct_fork is off")
        if not X86_64 or ctypes.sizeof(ctypes.c_void_p) != 8:
            raise _DirectUnusable(f"its system call numbers are not known on {os.uname().machine}")
        # A PyDLL keeps the GIL across its calls, as os.fork() does across fork().
        self._libc = ctypes.PyDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long
        self._libc.pthread_self.restype = ctypes.c_void_p
        for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Parent", "PyOS_AfterFork_Child"):
            getattr(ctypes.pythonapi, name).restype = None
        # Where glibc keeps the thread's tid (its debugger's description of its threads):
        # clone3 writes the child's there, as glibc's fork() has the kernel do.
        try:
            bits, count, offset = (ctypes.c_uint32 * 3).in_dll(self._libc, "_thread_db_pthread_tid")
        except ValueError:
            raise _DirectUnusable("glibc does not say where a thread keeps its tid") from None
        self._tid = ctypes.c_int.from_address(self._libc.pthread_self() + offset)
        if (bits, count) != (32, 1) or self._tid.value != self._syscall(SYS_GETTID):
            raise _DirectUnusable("glibc's thread descriptor is not the one expected")
        head, size = ctypes.c_void_p(), ctypes.c_size_t()
        if self._syscall(SYS_GET_ROBUST_LIST, ctypes.c_long(0), ctypes.byref(head),
                         ctypes.byref(size)) != 0 or not head.value:
            raise _DirectUnusable("the thread has no robust-futex list to hand on")
        self._robust = (ctypes.c_void_p(head.value), ctypes.c_size_t(size.value))
        self._pidfd = ctypes.c_int(-1)
        # The child's tid where glibc keeps it, and cleared there at its exit, as glibc's
        # fork() asks of the kernel.
        self._args = _CloneArgs(flags=CLONE_PARENT | CLONE_PIDFD | CLONE_CHILD_SETTID |
                                CLONE_CHILD_CLEARTID,
                                pidfd=ctypes.addressof(self._pidfd),
                                child_tid=ctypes.addressof(self._tid),
                                parent_tid=0)
        self._broken = None

    def _syscall(self, number, *args):
        return self._libc.syscall(ctypes.c_long(number), *args)

    def usable(self):
        """Whether the next fork may be made in one step: with a single thread, glibc's
        fork() takes none of its locks either, so there are none to set right after it."""
        return self._broken is None and len(os.listdir("/proc/self/task")) == 1

    def _clone(self):
        """clone3 as os.fork() forks: the child's pid, 0 in the child. Signals wait. A
        child that fails here ends before it is anything."""
        api = ctypes.pythonapi
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        api.PyOS_BeforeFork()
        pid = self._syscall(SYS_CLONE3, ctypes.byref(self._args),
                            ctypes.c_size_t(ctypes.sizeof(self._args)))
        if pid == 0:
            try:
                self._syscall(SYS_SET_ROBUST_LIST, *self._robust)
                api.PyOS_AfterFork_Child()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            except BaseException:
                os._exit(FAILED)
            return 0
        err = ctypes.get_errno()
        api.PyOS_AfterFork_Parent()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if pid < 0:
            raise OSError(err, f"clone3: {os.strerror(err)}")
        return pid

    def _child(self, req, fds, sock, r, w, bpf):
        """The interpreter, born in the sandbox's namespaces: into the session's cgroups,
        say its pid there, then become the interpreter."""
        pidfd, ctl, out, err, *procs = fds
        try:
            os.close(r)
            sock.close()
            os.close(pidfd)
            for fd in procs:
                os.write(fd, b"0")
                os.close(fd)
            os.write(w, f"{os.getpid()}\n".encode())
            os.close(w)
        except BaseException as exc:
            try:
                os.write(w, f"error {exc}\n".encode())
            finally:
                os._exit(FAILED)
        _become_interpreter(req, ctl, out, err, bpf)

    def _go_home(self, home, pidfd):
        """Back in our own namespaces (home: their descriptors). A template that cannot
        go back is not one to fork from: it ends, killing what it cloned, and sessiond
        starts another."""
        try:
            for fd in home:
                _check(_libc.setns(fd, 0), "going back to the template's namespaces")
            return
        except BaseException:
            try:
                os.write(2, b"harness_template: cannot go back to its own namespaces\n")
                if pidfd >= 0:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os._exit(FAILED)

    def fork(self, req, fds, sock, bpf):
        """(the answer, the interpreter's pidfd or -1)."""
        home = []
        try:
            for ns in HOME_NAMESPACES:
                home.append(os.open(f"/proc/self/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC))
            r, w = os.pipe()
            try:
                pid = self._clone_into(fds[0], home)
            except BaseException:
                os.close(r)
                os.close(w)
                raise
        finally:
            for fd in home:
                os.close(fd)
        if pid == 0:
            self._child(req, fds, sock, r, w, bpf)
        pidfd = self._pidfd.value
        os.close(w)
        try:
            said = _read_line(r).decode("utf-8", "replace")
        except BaseException:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # sessiond reaps it
            os.close(pidfd)
            raise
        finally:
            os.close(r)
        if said.isdigit():
            return {"pid": pid}, pidfd
        os.close(pidfd)
        return {"error": said[len("error "):] if said.startswith("error ") else
                "the interpreter ended without a word"}, -1

    def _clone_into(self, init_pidfd, home):
        """The clone, made from inside the sandbox's namespaces (init's), so that the
        interpreter is born in all of them: no moment where the sandbox sees a process of
        its own in the host's mount or network namespace. We are back home before this
        returns in the template, whatever happens. Between the two setns() the template
        runs only the clone and the before- and after-fork handlers, and opens no path."""
        if _libc.setns(init_pidfd, ENTER) != 0:
            raise _DirectUnusable("setns")  # nothing changed (all or none): two steps say why
        try:
            pid = self._clone()
        except OSError as exc:
            self._go_home(home, -1)
            if exc.errno not in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
                raise  # out of pids or memory: this call fails, as a fork() would
            self._broken = str(exc)  # refused here: for good
            os.write(2, f"harness_template: forking in two steps from now: {exc}\n".encode())
            raise _DirectUnusable(str(exc)) from None
        except BaseException:
            self._go_home(home, -1)
            raise
        if pid != 0:
            self._go_home(home, self._pidfd.value)
        return pid


def _fork(sock, req, fds, bpf):
    """(the answer, a first child to wait for or None, the pidfd to send with it or -1)."""
    if len(fds) < 5:
        raise ValueError("a fork needs init's pidfd, three descriptors and a cgroup")
    if _direct is not None and _direct.usable():
        try:
            reply, pidfd = _direct.fork(req, fds, sock, bpf)
            return reply, None, pidfd
        except _DirectUnusable:
            pass
    reply, first = _fork_in_two_steps(req, fds, sock, bpf)
    return reply, first, -1


def _serve(sock, bpf):
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 65536, MAX_FDS)
        except InterruptedError:
            continue
        if not msg:
            return   # sessiond went away: so do we
        seq = first = None
        pidfd = -1
        try:
            req = json.loads(msg)
            seq = req.get("seq")
            if req.get("op") != "fork":
                raise ValueError("unknown op")
            reply, first, pidfd = _fork(sock, req, fds, bpf)
        except (ValueError, OSError, TypeError, AttributeError) as exc:
            reply = {"error": str(exc)}
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        reply["seq"] = seq
        if pidfd >= 0:
            try:
                socket.send_fds(sock, [json.dumps(reply).encode()], [pidfd])
            finally:
                os.close(pidfd)
        else:
            sock.send(json.dumps(reply).encode())
        if first:
            # The forking child has said its word and is exiting; that exit (unmapping its
            # copy of our address space) is waited for after the answer, not before it.
            # It joined the session's cgroups: it must not stay there as a zombie.
            os.waitpid(first, 0)


# ---------------------------------------------------------------- start

def _setup_site():
    """As the harness does under -S: the site directories, without .pth files."""
    import site
    for d in site.getsitepackages():
        if d not in sys.path and os.path.isdir(d):
            sys.path.append(d)


def _import_harness(lib_dir, kind):
    """The harness module, imported as its entry point would (its directory and its name
    not left where user code would find them), without running it."""
    global _harness
    name = "harness_kernel" if kind == "kernel" else "harness_native"
    sys.path.insert(0, lib_dir)
    try:
        _harness = __import__(name)
        if kind == "kernel":
            # What the kernel harness imports when it makes its shell, in each fork.
            import IPython.core.displayhook  # noqa: F401
            import IPython.core.displaypub  # noqa: F401
            import IPython.core.interactiveshell  # noqa: F401
            import traitlets.config  # noqa: F401
    finally:
        del sys.path[0]
    sys.modules.pop(name, None)
    sys.modules.pop("harness_channel", None)


def _warm_matplotlib():
    """Draw one figure as a session's would be drawn (the kernel tier: as the inline
    backend does), so that forks find fonts looked up and the renderer loaded."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    fig = plt.figure()
    plt.plot([0, 1], [1, 0])
    if _shell is not None:
        from IPython.core.pylabtools import print_figure
        print_figure(fig, "png", bbox_inches="tight")
    else:
        fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


def _make_shell():
    """The kernel tier's IPython shell, made once here: each fork adopts its copy."""
    global _shell
    if hasattr(_harness, "make_shell"):
        _shell = _harness.make_shell()


def _preload(names):
    loaded, failed = [], {}
    for name in names:
        if not name:
            continue
        try:
            __import__(name)
            loaded.append(name)
        except Exception as exc:   # a missing module is not a broken template
            failed[name] = f"{type(exc).__name__}: {exc}"
    return loaded, failed


def main():
    with open(BPF_FD, "rb", closefd=True) as f:
        bpf = f.read()
    if not bpf or len(bpf) % 8:
        raise SystemExit("harness_template: no seccomp filter on fd 4")
    sys.dont_write_bytecode = True
    _setup_site()
    sock = socket.socket(fileno=CTL_FD)
    try:
        _import_harness(os.environ["PADDOCK_LIB_DIR"], os.environ.get("PADDOCK_TEMPLATE_KIND"))
    except ImportError as exc:
        sock.send(json.dumps({"ready": False, "why": f"{type(exc).__name__}: {exc}"}).encode())
        return
    loaded, failed = _preload(os.environ.get("PADDOCK_PRELOAD", "").split(","))
    _make_shell()
    try:
        _warm_matplotlib()
    except Exception as exc:  # a broken backend is the session's to find, not ours
        failed["matplotlib (a first figure)"] = f"{type(exc).__name__}: {exc}"
    global _held
    _held = _held_files()
    # What the imports made is kept, never collected: a collection in a fork would write
    # to every object's header and copy the pages the forks share.
    gc.collect()
    gc.freeze()
    global _direct
    try:
        _direct = _DirectFork()
        direct = True
    except _DirectUnusable as exc:
        direct = str(exc)
    # Started at a low priority for its imports; its forks run at the default.
    os.setpriority(os.PRIO_PROCESS, 0, 0)
    sock.send(json.dumps({"ready": True, "loaded": loaded, "failed": failed,
                          "direct": direct}).encode())
    _serve(sock, bpf)


_harness = None
_held = []       # files the imports left open, (fd, path, flags, (dev, ino))
_shell = None    # the kernel tier's shell, made before any fork
_direct = None   # a _DirectFork, when forks are made in one step

if __name__ == "__main__":
    main()
