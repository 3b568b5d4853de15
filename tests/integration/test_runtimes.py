# SPDX-License-Identifier: MIT
"""Runtime profiles through the whole stack: a profile built with `paddockctl runtime build`
(mmdebstrap from the host's apt sources, cached between runs), registered with
`paddockctl runtime add`, selected by CreateSession's image (and the code plane's), with
its own files, packages and limits; shown by /v1/capabilities, /v1/code/info, /metrics and
paddockctl; unknown images running the default; a removed profile's sessions living on
across a restart; and a hostile tree whose /etc links point at host files, which a
sandbox must not see.
"""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest

import paddock_stack as ps
from code_client import CodeClient

CACHE_DIR = os.environ.get("PADDOCK_TEST_CACHE", "/var/cache/paddock-tests")
# The host's own suite (bookworm), from the host's apt sources. A package the host's Python
# does not have, and a module the host has that the profile
# does not: which tree a session runs on shows in what it can import.
PROFILE_PACKAGES = ["python3-tabulate"]
RECIPE = {"v": 1, "suite": "bookworm", "packages": PROFILE_PACKAGES}
MEMORY = 384 * 1024 * 1024
PIDS = 100

if ps.INSTALLED:
    pytest.skip("builds a Debian tree with mmdebstrap: the dev stack's suite",
                allow_module_level=True)


def ctl(env, *args, check=True):
    r = subprocess.run([ps.PADDOCKCTL_BIN, *args], capture_output=True, text=True, env=env,
                       timeout=900)
    if check:
        assert r.returncode == 0, f"paddockctl {' '.join(args)}: {r.returncode}\n{r.stdout}{r.stderr}"
    return r


def ctl_env(runtimes_dir, state_dir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    env["PADDOCK_RUNTIMES_DIR"] = runtimes_dir
    if state_dir:
        env["PADDOCK_STATE_DIR"] = state_dir
    return env


@pytest.fixture(scope="module")
def tree():
    """The profile's tree: built once by paddockctl runtime build, then taken from the
    cache (a changed recipe builds a new one)."""
    key = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(CACHE_DIR, "runtime-" + key)
    if not os.path.isdir(path):
        os.makedirs(CACHE_DIR, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="paddock-rt-build-")
        try:
            r = ctl(ctl_env(os.path.join(scratch, "runtimes")), "runtime", "build", "cached",
                    "--packages", ",".join(PROFILE_PACKAGES), "--root", path)
            assert "runtime profile 'cached'" in r.stdout, r.stdout
            with open(os.path.join(scratch, "runtimes", "cached.conf")) as f:
                assert f"root = {path}" in f.read()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    assert os.path.isfile(os.path.join(path, "usr/lib/python3/dist-packages/tabulate.py"))
    return path


@pytest.fixture(scope="module")
def secret():
    d = tempfile.mkdtemp(prefix="paddock-rt-secret-")
    with open(os.path.join(d, "secret"), "w") as f:
        f.write("HOST-SECRET-7f3a\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def overlay(tree, prefix, lay):
    """tree with an upper layer that lay(upper) fills, mounted read-only elsewhere: a tree
    of the profile's but for a few files, without copying it."""
    work = tempfile.mkdtemp(prefix=prefix)
    upper, wd, merged = (os.path.join(work, d) for d in ("upper", "wd", "merged"))
    for d in (upper, wd, merged):
        os.makedirs(d)
    lay(upper)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={tree},upperdir={upper},workdir={wd}", merged], check=True)
    try:
        yield merged
    finally:
        subprocess.run(["umount", "-l", merged], check=False)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def hostile(tree, secret):
    """The profile's tree with /etc links out of it: one climbing with .. to a host file,
    an absolute one to a host directory."""
    def lay(upper):
        os.makedirs(os.path.join(upper, "etc"))
        os.symlink("../" * 12 + secret.lstrip("/") + "/secret",
                   os.path.join(upper, "etc/os-release"))
        os.symlink(secret, os.path.join(upper, "etc/fonts"))
    with overlay(tree, "paddock-rt-hostile-", lay) as merged:
        yield merged


@pytest.fixture(scope="module")
def broken(tree):
    """The profile's tree with /etc a file: it passes the start's checks (usr, Python) and
    every sandbox build of it fails."""
    def lay(upper):
        with open(os.path.join(upper, "etc"), "w") as f:
            f.write("not a directory\n")
    with overlay(tree, "paddock-rt-broken-", lay) as merged:
        yield merged


@pytest.fixture(scope="module")
def runtimes_dir(tree, hostile, broken):
    d = tempfile.mkdtemp(prefix="paddock-runtimes-")
    env = ctl_env(d)
    ctl(env, "runtime", "add", "data", "--root", tree, "--pool-size", "1", "--memory",
        str(MEMORY), "--pids", str(PIDS), "--description", "tabulate, no pandas",
        "--kernel-prewarm", "1")
    ctl(env, "runtime", "add", "broken", "--root", broken, "--pool-size", "1")
    ctl(env, "runtime", "add", "hostile", "--root", hostile, "--pool-size", "0")
    # paddockctl refuses a tree that is not there; one removed after it was added is
    # written here as it would have been
    r = ctl(env, "runtime", "add", "missing", "--root", "/nonexistent-tree", check=False)
    assert r.returncode != 0 and "usr directory" in r.stderr, r.stderr
    with open(os.path.join(d, "missing.conf"), "w") as f:
        f.write("root = /nonexistent-tree\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def rt_stack(stacks, runtimes_dir):
    return stacks.get("runtimes", {"PADDOCK_RUNTIMES_DIR": runtimes_dir,
                                   "PADDOCK_KEEP_SESSIONS_ON_EXIT": "true"})


@pytest.fixture(scope="module")
def rc(rt_stack):
    return ps.Client(rt_stack)


WHICH = r'''
import importlib.util
print("tabulate", importlib.util.find_spec("tabulate") is not None)
print("pandas", importlib.util.find_spec("pandas") is not None)
'''


def runtime_of(client, sid):
    """The runtime GET /sessions/{id} (paddock's own route) reports."""
    r = client.request("GET", f"/sessions/{sid}", check=False)
    assert r.status_code == 200, r.text
    return r.json()["runtime"]


def which_tree(client, sid):
    out = client.run(sid, WHICH).stdout
    return {line.split()[0]: line.split()[1] == "True" for line in out.splitlines()}


def test_image_selects_the_profile_and_none_the_default(rc):
    prof = rc.create({"image": "data"}).parsed
    dflt = rc.new_session()
    try:
        assert which_tree(rc, prof["session_id"]) == {"tabulate": True, "pandas": False}
        assert which_tree(rc, dflt) == {"tabulate": False, "pandas": True}
        out = rc.run(prof["session_id"],
                     "import tabulate; print(tabulate.tabulate([[1, 2]], tablefmt='plain'))")
        assert out.stdout.split() == ["1", "2"], out
        # bash and the editor run there too, on the profile's own tools
        assert rc.bash(prof["session_id"], "test -x /usr/bin/python3 && echo yes").stdout.strip() == "yes"
        assert runtime_of(rc, prof["session_id"]) == "data"
        assert runtime_of(rc, dflt) == "default"
    finally:
        rc.destroy(prof["session_id"])
        rc.destroy(dflt)


def test_unknown_image_and_unusable_profile_run_the_default(rc, rt_stack):
    for image in ("no-such-profile", "missing", "default", "../../etc"):
        r = rc.create({"image": image})
        assert r.status_code == 201, (image, r.status_code, r.text)
        sid = r.parsed["session_id"]
        try:
            assert runtime_of(rc, sid) == "default"
            assert which_tree(rc, sid)["pandas"] is True
        finally:
            rc.destroy(sid)
    logs = rt_stack.logs()
    assert "image 'no-such-profile' names no runtime profile" in logs
    assert "runtime profile 'missing' is not used" in logs


FORK_UNTIL_REFUSED = r'''
import subprocess
procs = []
try:
    for i in range(150):
        procs.append(subprocess.Popen(["sleep", "30"]))
    print("all", len(procs))
except OSError:
    print("stopped", len(procs))
for p in procs:
    p.kill()
    p.wait()
'''


def cgroup_limit(stack, sid, v1_file, v2_file):
    rid = stack.sandbox_name(sid)
    for d in ps.cgroups_matching([rid]):
        for name in (v2_file, v1_file):
            p = os.path.join(d, name)
            if os.path.exists(p):
                with open(p) as f:
                    return f.read().strip()
    raise AssertionError(f"no {v2_file}/{v1_file} for {rid}")


def test_profile_limits_apply_to_its_sessions_only(rc, rt_stack):
    prof = rc.new_session(image="data")
    dflt = rc.new_session()
    try:
        assert int(cgroup_limit(rt_stack, prof, "memory.limit_in_bytes", "memory.max")) == MEMORY
        assert int(cgroup_limit(rt_stack, prof, "pids.max", "pids.max")) == PIDS
        assert int(cgroup_limit(rt_stack, dflt, "memory.limit_in_bytes", "memory.max")) != MEMORY
        # what the limit means inside: PIDS processes cannot be had
        out = rc.run(prof, FORK_UNTIL_REFUSED).stdout.split()
        assert out[0] == "stopped" and int(out[1]) < PIDS, out
    finally:
        rc.destroy(prof)
        rc.destroy(dflt)


def test_code_plane_names_a_profile_too(rt_stack):
    code = CodeClient(rt_stack)
    r = code.request("POST", "/v2/code/sessions", {"image": "data"})
    assert r.status_code == 200, r.text
    sid = r.json()["data"]["session_id"]
    assert r.json()["data"]["runtime"] == "data"
    try:
        d = code.run("import tabulate; print('ok')", session_id=sid)
        assert "ok" in json.dumps(d), d
        d = code.run("import tabulate", image="data", stateful=False)
        assert "ModuleNotFoundError" not in json.dumps(d), d
        d = code.run("import tabulate", stateful=False)
        assert "ModuleNotFoundError" in json.dumps(d), d
        bad = code.request("POST", "/v2/code/sessions", {"image": 7})
        assert bad.status_code == 422, bad.text
    finally:
        code.delete(sid)


def test_profiles_are_shown_with_their_pools(rc, rt_stack, runtimes_dir):
    ps.wait_for(lambda: pool_ready(rt_stack, "data") >= 1, 60, "the data pool's sandbox")
    caps = CodeClient(rt_stack).request("GET", "/v1/capabilities").json()["data"]
    names = [r["name"] for r in caps["sandbox"]["runtimes"]]
    assert names == ["default", "broken", "data", "hostile", "missing"], caps["sandbox"]
    data = next(r for r in caps["sandbox"]["runtimes"] if r["name"] == "data")
    assert data["usable"] is True and data["pool_target"] == 1 and data["pool_ready"] >= 1
    # its Python has no IPython: no kernel pool, whatever kernel_prewarm says
    st = rt_stack.daemon_call({"op": "stats"})
    assert next(r for r in st["runtimes"] if r["name"] == "data")["pool_kernel_target"] == 0
    assert data["limits"]["memory_bytes"] == MEMORY and "root" not in data, data
    missing = next(r for r in caps["sandbox"]["runtimes"] if r["name"] == "missing")
    assert missing["usable"] is False and missing["pool_target"] == 0, missing
    info = CodeClient(rt_stack).request("GET", "/v1/code/info").json()["data"]
    assert [r["name"] for r in info["runtimes"]] == names
    metrics = rc.request("GET", "/metrics", check=False).text
    assert 'paddock_runtime_pool_ready{runtime="data",pool="native"} ' in metrics
    assert 'paddock_runtime_usable{runtime="missing"} 0' in metrics
    listing = ctl(rt_stack.env(), "runtime", "list").stdout
    assert "data" in listing and "hostile" in listing and "/nonexistent-tree" in listing, listing


def pool_ready(stack, name):
    st = stack.daemon_call({"op": "stats"})
    return next(r["pool_ready"] for r in st["runtimes"] if r["name"] == name)


def test_a_hostile_tree_cannot_reach_host_files(rc, secret):
    sid = rc.new_session(image="hostile")
    try:
        assert runtime_of(rc, sid) == "hostile"
        out = rc.bash(sid, "cat /etc/os-release /etc/fonts/secret 2>&1; ls -la /etc; "
                           f"cat {secret}/secret 2>&1; true").stdout
        assert "HOST-SECRET" not in out, out
        # the links were left out, not followed: neither name is in the sandbox's /etc
        names = rc.bash(sid, "ls -A /etc").stdout.split()
        assert "os-release" not in names and "fonts" not in names, names
    finally:
        rc.destroy(sid)


def test_bad_profiles_are_refused_by_paddockctl(runtimes_dir, tree):
    env = ctl_env(runtimes_dir)
    for args, why in ((["add", "Bad Name", "--root", tree], "name"),
                      (["add", "default", "--root", tree], "name"),
                      (["add", "rel", "--root", "relative/path"], "absolute"),
                      (["add", "nopy", "--root", "/var"], "usr"),
                      (["add", "huge", "--root", tree, "--pool-size", "-1"], "not valid"),
                      (["add", "data", "--root", tree], "exists"),
                      # build's values go to mmdebstrap as arguments: never as its options
                      (["build", "evil", "--suite", "--customize-hook=touch /tmp/pwned"],
                       "a character such a value does not have"),
                      (["build", "evil", "--packages", "python3 --hook"], "a character"),
                      (["build", "evil", "--mirror", "-x"], "a character"),
                      (["build", "evil", "--root", "relative"], "an absolute path")):
        r = ctl(env, "runtime", *args, check=False)
        assert r.returncode != 0, (args, r.stdout)
        assert why in r.stderr, (args, r.stderr)
    assert sorted(os.listdir(runtimes_dir)) == ["broken.conf", "data.conf", "hostile.conf",
                                                "missing.conf"]
    assert not os.path.exists("/tmp/pwned")


def test_a_profile_whose_builds_fail_is_given_up_and_runs_the_default(rc, rt_stack):
    def broken_state():
        st = rt_stack.daemon_call({"op": "stats"})
        return next(r for r in st["runtimes"] if r["name"] == "broken")
    e = ps.wait_for(lambda: (lambda b: b if not b["usable"] else None)(broken_state()), 60,
                    "the broken profile given up")
    assert e["problem"] == "its builds keep failing" and e["pool_target"] == 0, e
    assert "runtime profile 'broken': 3 builds failed in a row" in rt_stack.logs()
    # its failures paused nothing else: the default and the other profiles still serve
    sid = rc.new_session(image="broken")
    try:
        assert runtime_of(rc, sid) == "default"
        assert rc.run(sid, "print(6 * 7)").stdout.strip() == "42"
    finally:
        rc.destroy(sid)
    other = rc.new_session(image="data")
    assert runtime_of(rc, other) == "data"
    rc.destroy(other)
    metrics = rc.request("GET", "/metrics", check=False).text
    assert 'paddock_runtime_usable{runtime="broken"} 0' in metrics


def test_a_removed_profile_keeps_its_sessions_until_they_end(rc, rt_stack, runtimes_dir):
    sid = rc.new_session(image="data")
    rc.run(sid, "import tabulate; kept = 41")
    r = ctl(ctl_env(runtimes_dir), "runtime", "remove", "data")
    assert "removed" in r.stdout
    rt_stack.kill9("paddock-sessiond")
    rt_stack.restart("paddock-sessiond")
    try:
        out = rc.run(sid, "import tabulate; print(kept + 1)").stdout
        assert out.strip() == "42", out
        assert runtime_of(rc, sid) == "data"
        st = rt_stack.daemon_call({"op": "stats"})
        assert st["retired_runtime_sessions"] == 1, st
        assert "data" not in [x["name"] for x in st["runtimes"]]
        fresh = rc.new_session(image="data")
        assert which_tree(rc, fresh)["pandas"] is True
        rc.destroy(fresh)
    finally:
        rc.destroy(sid)
    assert rt_stack.daemon_call({"op": "stats"})["retired_runtime_sessions"] == 0
