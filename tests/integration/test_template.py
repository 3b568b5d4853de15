# SPDX-License-Identifier: MIT
"""The Python template: sessions' Python interpreters are forked from one process that
imported the harness and preload_modules, into each session's sandbox.

A forked interpreter is confined exactly as one init starts (ids, capabilities,
no_new_privs, seccomp, namespaces, cgroup, limits, descriptors, environment) and tries to
break out fail; its preloaded imports are done; its random state is its own; its exit
status is reported; the template holds nothing of any session; when the template dies,
Python starts as before and the template comes back; with python_template off nothing is
preloaded.
"""

import json
import os
import secrets
import signal
import subprocess
import time

import pytest

import paddock_stack as ps
from code_client import CodeClient, outputs_of

STATUS_KEYS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
               "NoNewPrivs", "Seccomp", "Seccomp_filters", "Umask")

# What a process says of itself, as "key value" lines (the same code in Python and bash).
PY_SELF = """
import os, sys
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    if k in %r:
        print(k, ' '.join(v.split()))
for n in ('mnt', 'net', 'ipc', 'uts', 'pid', 'cgroup'):
    print('ns_' + n, os.readlink('/proc/self/ns/' + n))
print('cgroup', open('/proc/self/cgroup').read().replace(chr(10), ';'))
print('limits_as_init', open('/proc/self/limits').read() == open('/proc/1/limits').read())
fds = sorted(os.listdir('/proc/self/fd'), key=int)
print('fds', ' '.join(f for f in fds if int(f) <= 3 or f == '63'))
print('more_fds', ' '.join(os.readlink('/proc/self/fd/' + f) for f in fds if 3 < int(f) != 63))
print('cwd', os.getcwd())
print('env', ' '.join(sorted(os.environ)))
print('preloaded', 'numpy' in sys.modules and 'pandas' in sys.modules)
""" % (STATUS_KEYS,)

KERNEL_SELF = """
import os
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    if k in ('Uid', 'CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp'):
        print(k, ' '.join(v.split()))
print('ppid', os.getppid())
print('limits_as_init', open('/proc/self/limits').read() == open('/proc/1/limits').read())
print('ipython_dir', get_ipython().ipython_dir)
print('cwd', os.getcwd())
"""

BASH_SELF = r"""
grep -E '^(%s):' /proc/self/status | sed -E 's/:[[:space:]]+/ /; s/[[:space:]]+/ /g; s/ $//'
for n in mnt net ipc uts pid cgroup; do echo "ns_$n $(readlink /proc/self/ns/$n)"; done
echo "cgroup $(tr '\n' ';' < /proc/self/cgroup)"
""" % "|".join(STATUS_KEYS)


def as_dict(text):
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in text.splitlines())


def template_kind(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
        return None
    return env.get(b"PADDOCK_TEMPLATE_KIND", b"").decode()


def template_pids(stack, kind="native"):
    """The daemon's template of kind (native or kernel): a list of one, or empty."""
    sd = stack.procs["paddock-sessiond"].pid
    # The interpreters it forked are the daemon's children too, in their sandboxes.
    return [p for p in ps.children(sd)
            if b"harness_template.py" in (ps.cmdline(p) or b"") and not ps.in_own_pid_namespace(p)
            and template_kind(p) == kind]


def wait_for(pred, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def preloaded(client):
    sid = client.new_session()
    try:
        return client.run(sid, "import sys; print('numpy' in sys.modules)").stdout == "True\n"
    finally:
        client.destroy(sid)


@pytest.fixture(scope="module")
def tstack(stacks):
    # Its own stack: one test kills the template. No pool: a pool's sandboxes made while
    # the template started keep the interpreter init gave them.
    return stacks.get("template", {"PADDOCK_POOL_SIZE": "0", "PADDOCK_PYTHON_TEMPLATE": "true"})


@pytest.fixture(scope="module")
def tclient(tstack):
    c = ps.Client(tstack)
    wait_for(lambda: preloaded(c), "the template to serve")
    return c


@pytest.fixture
def sid(tclient):
    s = tclient.new_session()
    yield s
    tclient.destroy(s)


def assert_confined_as_one_init_starts(tclient, sid):
    py = tclient.run(sid, PY_SELF)
    assert py.rc == 0, py.stderr
    me = as_dict(py.stdout)
    # bash is started by init in the same sandbox: the reference.
    sh = tclient.bash(sid, BASH_SELF)
    assert sh.rc == 0, sh.stderr
    ref = as_dict(sh.stdout)
    assert me["preloaded"] == "True", "this interpreter did not come from the template"
    for key in STATUS_KEYS + ("ns_mnt", "ns_net", "ns_ipc", "ns_uts", "ns_pid", "ns_cgroup",
                              "cgroup"):
        assert me.get(key) == ref.get(key), (key, me.get(key), ref.get(key))
    assert me["Uid"].split()[0] != "0" and me["CapEff"] == "0000000000000000"
    assert me["CapBnd"] == "0000000000000000" and me["NoNewPrivs"] == "1"
    assert me["Seccomp"] == "2"
    assert me["limits_as_init"] == "True"
    # 0-2, the listing's own descriptor and the harness's channel; and the files the
    # template's imports keep open, opened again in the sandbox: nothing of the host's.
    assert me["fds"] == "0 1 2 3 63", me["fds"]
    for target in me["more_fds"].split():
        assert target == "/dev/null" or target.startswith("/usr/"), me["more_fds"]
    assert me["cwd"] == "/workspace"
    assert me["env"] == "HOME LANG MPLBACKEND PATH PYTHONDONTWRITEBYTECODE TERM TMPDIR USER"


def template_forks(stack):
    """How many interpreters the daemon's templates made, in one step and in two."""
    forks = stack.daemon_call({"op": "stats"})["template_forks"]
    return forks["direct"], forks["two_steps"]


def forked_interpreters(stack):
    """The daemon's children that are Python forked from a template, in a sandbox."""
    sd = stack.procs["paddock-sessiond"].pid
    return [p for p in ps.children(sd)
            if b"harness_template.py" in (ps.cmdline(p) or b"") and ps.in_own_pid_namespace(p)]


# What glibc's fork() sets in the child, seen from it: its thread's tid where glibc keeps
# it (the CPU clock of the thread is named after that tid).
GLIBC_CHILD = """
import threading, time
clock = time.pthread_getcpuclockid(threading.get_ident())
print(~(clock >> 3) == threading.get_native_id(), time.clock_gettime(clock) > 0)
"""


def test_forked_interpreter_is_confined_as_one_init_starts(tstack, tclient, sid):
    """By default the template clones the interpreter straight into the sandbox, as the
    daemon's child, and is left as it was (in its own namespaces)."""
    before = template_forks(tstack)
    assert_confined_as_one_init_starts(tclient, sid)
    direct, _ = template_forks(tstack)
    assert direct > before[0], (before, direct)
    r = tclient.run(sid, GLIBC_CHILD)
    assert r.stdout == "True True\n", (r.stdout, r.stderr)
    assert forked_interpreters(tstack), "no interpreter of the template is the daemon's child"
    sd = tstack.procs["paddock-sessiond"].pid
    for kind in ("native", "kernel"):
        (pid,) = template_pids(tstack, kind)
        for ns in ("mnt", "net", "ipc", "uts", "cgroup"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") == os.readlink(f"/proc/{sd}/ns/{ns}"), \
                (kind, ns)
        assert os.readlink(f"/proc/{pid}/ns/pid_for_children") == \
            os.readlink(f"/proc/{pid}/ns/pid"), kind


def test_in_two_steps_the_same(stacks):
    """With template_direct_fork off, a first child enters the sandbox and forks the
    interpreter: confined the same, and the daemon's child the same."""
    stack = stacks.get("template-two-steps", {"PADDOCK_POOL_SIZE": "0",
                                              "PADDOCK_PYTHON_TEMPLATE": "true",
                                              "PADDOCK_TEMPLATE_DIRECT_FORK": "false"})
    client = ps.Client(stack)
    wait_for(lambda: preloaded(client), "the template to serve")
    sid = client.new_session()
    try:
        assert_confined_as_one_init_starts(client, sid)
        assert forked_interpreters(stack)
    finally:
        client.destroy(sid)
    direct, two_steps = template_forks(stack)
    assert direct == 0 and two_steps >= 2, (direct, two_steps)


# Run in the sandbox while its Python is made again and again: every new process is
# looked at at once, while it may still be root, and what /proc shows of it compared with
# what the prober sees of itself: its root directory, environment, mount table and
# network. Writes what it found to /workspace/probe.json.
NEWBORN_PROBE = r"""
import json, os, sys, time
own_root = os.stat("/")
def table(path):
    with open(path) as f:
        return sorted(" ".join(l.split()[3:5]) if "mountinfo" in path else l.split(":")[0].strip()
                      for l in f.readlines()[2 if "net/dev" in path else 0:])
own = {what: table(f"/proc/self/{what}") for what in ("mountinfo", "net/dev")}
seen, newborn, as_root, reached = set(os.listdir("/proc")), 0, 0, []
open("/workspace/probe.ready", "w").close()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and not os.path.exists("/workspace/probe.stop"):
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in seen:
            continue
        seen.add(p)
        newborn += 1
        try:
            with open(f"/proc/{p}/status") as f:
                uid = next(l for l in f if l.startswith("Uid:")).split()[1]
        except (OSError, StopIteration):
            continue
        as_root += uid == "0"
        for what in ("mountinfo", "net/dev"):
            try:
                if table(f"/proc/{p}/{what}") != own[what]:
                    reached.append((p, f"a {what} not the sandbox's"))
            except OSError:
                pass
        try:
            st = os.stat(f"/proc/{p}/root/")
            if (st.st_dev, st.st_ino) != (own_root.st_dev, own_root.st_ino):
                reached.append((p, "a root directory not the sandbox's"))
        except OSError:
            pass
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                if b"PADDOCK_" in f.read():
                    reached.append((p, "the template's environment"))
        except OSError:
            pass
with open("/workspace/probe.json", "w") as f:
    json.dump({"newborn": newborn, "as_root": as_root, "reached": reached}, f)
"""


def test_a_new_interpreter_cannot_be_reached_before_it_is_confined(tclient, sid):
    """The interpreter is cloned into the sandbox's pid namespace before it enters the
    mount namespace and changes its ids: the sandbox's processes see its pid then, and
    that is all. A prober watches /proc while Python is made again 40 times."""
    r = tclient.put_file(sid, NEWBORN_PROBE.encode(), path="probe.py")
    assert r.status_code == 201, r.text
    r = tclient.bash(sid, "setsid python3 /workspace/probe.py 120 </dev/null >/dev/null 2>&1 &\n"
                          "for i in $(seq 200); do [ -e probe.ready ] && break; sleep 0.05; done\n"
                          "[ -e probe.ready ]")
    assert r.rc == 0, r.stderr
    for _ in range(40):
        r = tclient.run(sid, "import os\nos._exit(0)")
        assert r.rc == 0, r.stderr
        assert tclient.run(sid, "print(1)").stdout == "1\n"
    tclient.bash(sid, "touch /workspace/probe.stop")
    deadline = time.monotonic() + 30
    while True:
        r = tclient.bash(sid, "cat /workspace/probe.json 2>/dev/null")
        if r.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    seen = json.loads(r.stdout)
    assert seen["reached"] == [], seen
    # It watched the interpreters come (it shares its session's CPU quota with them, so
    # it may miss one between two looks), and caught them while they were still root.
    assert seen["newborn"] >= 20 and seen["as_root"] >= 1, seen


DIRECT_PROBE = """
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import harness_template as ht
try:
    d = ht._DirectFork()
except ht._DirectUnusable as exc:
    print("unusable:", exc)
    raise SystemExit
print("alone", d.usable())
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
print("with a thread", d.usable())
stop.set()
t.join()
# A joined thread leaves /proc/self/task a moment after the join returns.
for _ in range(200):
    if d.usable():
        break
    time.sleep(0.005)
print("alone again", d.usable())
"""


@pytest.mark.parametrize("setting", ["1", "0"])
def test_one_step_only_while_the_template_has_one_thread(setting):
    """A fork in one step skips what glibc's fork() does for other threads: with a second
    thread (a library's pool) the template forks in two steps; off, never in one."""
    harness = os.path.join(ps.SOURCE_DIR, "sessiond", "harness")
    env = {"PATH": "/usr/bin:/bin", "PADDOCK_TEMPLATE_DIRECT": setting}
    out = subprocess.run(["/usr/bin/python3", "-I", "-B", "-c", DIRECT_PROBE, harness], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if setting == "0":
        assert out.stdout == "unusable: template_direct_fork is off\n", out.stdout
    else:
        assert out.stdout == "alone True\nwith a thread False\nalone again True\n", out.stdout


def test_breaking_out_of_a_forked_interpreter_fails(tstack, tclient, sid):
    (template,) = template_pids(tstack)
    code = r"""
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
out = []
# Namespaces: join init's (pid 1) or make new ones; the filter refuses both.
for flags in (0x20000000, 0x00020000, 0x40000000):
    out.append(libc.unshare(flags) == 0)
fd = os.open('/proc/1/ns/net', os.O_RDONLY) if os.access('/proc/1/ns/net', os.R_OK) else -1
out.append(fd >= 0 and libc.setns(fd, 0) == 0)
# Back to root: setuid(0) with no capability left.
try:
    os.setuid(0); out.append(True)
except PermissionError:
    out.append(False)
# The template is not in this pid namespace: its host pid names nothing here.
out.append(os.path.exists('/proc/%d/mem'))
print(out)
""" % template
    r = tclient.run(sid, code)
    assert r.rc == 0, r.stderr
    assert r.stdout == "[False, False, False, False, False, False]\n", r.stdout


def test_preloaded_imports_are_done(tclient, sid):
    r = tclient.run(sid, "import time\nt = time.perf_counter()\n"
                         "import numpy, pandas, matplotlib.pyplot\n"
                         "print(time.perf_counter() - t < 0.05, matplotlib.get_backend())")
    assert r.stdout == "True agg\n", (r.stdout, r.stderr)


def test_a_figure_draws_in_a_fork(tclient, sid):
    """The template drew a figure (fonts loaded): the fork draws with its own open files."""
    r = tclient.run(sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2], [2, 1])\n"
                         "plt.title('a title')\nplt.savefig('p.png')\n"
                         "import os\nprint(os.path.getsize('p.png') > 1000)")
    assert r.stdout == "True\n", (r.stdout, r.stderr)


def test_random_state_is_each_sessions_own(tclient):
    code = "import numpy, random, os\nprint(numpy.random.rand(), random.random(), os.urandom(8).hex())"
    seen = []
    for _ in range(3):
        s = tclient.new_session()
        try:
            r = tclient.run(s, code)
            assert r.rc == 0, r.stderr
            seen.append(r.stdout.split())
        finally:
            tclient.destroy(s)
    for i in range(3):
        assert len({v[i] for v in seen}) == 3, seen


def test_exit_status_is_reported(tclient, sid):
    r = tclient.run(sid, "import os\nos._exit(3)")
    assert r.rc == 3 and "exited with status 3" in r.stderr, (r.rc, r.stderr)
    r = tclient.run(sid, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert r.rc == 137 and "killed by signal 9" in r.stderr, (r.rc, r.stderr)
    assert tclient.run(sid, "print('again')").stdout == "again\n"


@pytest.mark.parametrize("kind", ["native", "kernel"])
def test_template_holds_nothing_of_sessions(tstack, tclient, sid, kind):
    assert tclient.run(sid, "x = 'secret-of-a-session'").rc == 0
    (pid,) = template_pids(tstack, kind)
    fds = sorted(int(f) for f in os.listdir(f"/proc/{pid}/fd"))
    # stdin, the daemon's log on 1 and 2, its socket to the daemon, and files its imports
    # keep open (a font, /dev/null).
    assert fds[:4] == [0, 1, 2, 3], fds
    for fd in fds[4:]:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert target == "/dev/null" or target.startswith("/usr/"), (fd, target)
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = f.read().split(b"\0")
    names = sorted(e.split(b"=", 1)[0].decode() for e in env if e)
    assert names == ["HOME", "IPYTHONDIR", "LANG", "MPLBACKEND", "MPLCONFIGDIR",
                     "PADDOCK_LIB_DIR", "PADDOCK_PRELOAD", "PADDOCK_TEMPLATE_DIRECT",
                     "PADDOCK_TEMPLATE_KIND", "PATH",
                     "PYTHONDONTWRITEBYTECODE"], names


def templates(stack):
    """The daemon's view of its templates, from stats: {"python": state, "kernel": state}."""
    return stack.daemon_call({"op": "stats"})["templates"]


def test_the_template_comes_back_and_python_starts_meanwhile(tstack, tclient):
    (pid,) = template_pids(tstack)
    wait_for(lambda: templates(tstack)["python"] == "ready", "stats to say ready")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: templates(tstack)["python"] in ("down", "starting"),
             "stats to say the template is down")
    # Meanwhile sessions still get Python (from init).
    s = tclient.new_session()
    try:
        assert tclient.run(s, "print(6 * 7)").stdout == "42\n"
    finally:
        tclient.destroy(s)
    wait_for(lambda: template_pids(tstack) and template_pids(tstack) != [pid],
             "a new template")
    wait_for(lambda: preloaded(tclient), "the new template to serve")
    assert templates(tstack)["python"] == "ready"


def test_kernel_tier_comes_from_its_template(tstack, tclient):
    """The code plane's Python (the kernel tier) is forked from the kernel template: the
    same confinement, IPython's shell ready, figures captured as PNG."""
    code = CodeClient(tstack)
    wait_for(lambda: template_pids(tstack, "kernel"), "the kernel template")
    d = code.run(KERNEL_SELF)
    me = as_dict(d["stdout"])
    assert me.get("ppid") == "0", f"not forked from the kernel template: {d}"
    assert me["Uid"].split()[0] != "0" and me["CapEff"] == "0000000000000000", me
    assert me["CapBnd"] == "0000000000000000" and me["NoNewPrivs"] == "1", me
    assert me["Seccomp"] == "2" and me["limits_as_init"] == "True", me
    assert me["ipython_dir"] == "/tmp/.ipython" and me["cwd"] == "/workspace", me
    d = code.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    pngs = [o for o in outputs_of(d, "display_data") if "image/png" in o["data"]]
    assert len(pngs) == 1, d["outputs"]


def test_kernel_tier_fork_starts_with_a_clean_history(tstack, tclient):
    """A forked kernel runs a silent cell before its first request (to take the fork's
    page copies early): the user's first cell is still In[1], with nothing else in the
    shell's history or output cache."""
    code = CodeClient(tstack)
    wait_for(lambda: template_pids(tstack, "kernel"), "the kernel template")
    sid = "fresh-" + secrets.token_hex(4)
    try:
        first = code.run("1+1", session_id=sid)
        assert (first["status"], first["execution_count"]) == ("ok", 1), first
        d = code.run("print(len(In), In[1], list(Out), _)", session_id=sid)
        assert (d["stdout"], d["execution_count"]) == ("3 1+1 [1] 2\n", 2), d
    finally:
        code.delete(sid)


def test_the_pool_is_made_again_from_the_template(stacks):
    """Warm sandboxes made while the template started (their Python from init) are made
    again once it is ready: sessions taken from the pool then have its interpreter."""
    stack = stacks.get("template-pool", {"PADDOCK_POOL_SIZE": "2",
                                         "PADDOCK_PYTHON_TEMPLATE": "true"})
    client = ps.Client(stack)
    log = os.path.join(stack.state_dir, "log", "paddock-sessiond.log")

    def said(text):
        with open(log, encoding="utf-8", errors="replace") as f:
            return text in f.read()

    wait_for(lambda: said("Python template ready"), "the template to be ready")
    wait_for(lambda: stack.daemon_call({"op": "stats"}).get("pool_started", 0) >= 2,
             "the pool to be made again")
    sids = [client.new_session() for _ in range(2)]
    try:
        for sid in sids:
            assert client.run(sid, "import os; print(os.getppid())").stdout == "0\n"
    finally:
        for sid in sids:
            client.destroy(sid)


def test_off_nothing_is_preloaded(stacks):
    stack = stacks.get("template-off", {"PADDOCK_PYTHON_TEMPLATE": "false",
                                        "PADDOCK_POOL_SIZE": "1"})
    client = ps.Client(stack)
    assert template_pids(stack) == [] and template_pids(stack, "kernel") == []
    assert templates(stack) == {"python": "off", "kernel": "off"}
    assert not preloaded(client)
