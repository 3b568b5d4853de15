# SPDX-License-Identifier: MIT
"""GET /sessions/{id} (a session's handle, now) and GET /health (for a load balancer)."""

import threading
import time

import paddock_stack as ps

from test_otari_sessions import AUTH_ENV, TENANT_ENV


def extension(c, method, path):
    """A call to one of paddock's own routes: their successes are not in the Otari
    document (the tests check their shape), their errors have its Error shape."""
    r = c.request(method, path, check=False)
    if r.status_code >= 400:
        ps.check_response(r.status_code, r.headers, r.content, method, path, c.stack.bearer)
    return r


def lookup(c, sid):
    return extension(c, "GET", f"/sessions/{sid}")


def test_lookup_shows_the_handle_as_it_is_now(client):
    created = client.create().parsed
    sid = created["session_id"]
    r = lookup(client, sid)
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    h = r.json()
    ps.OpenApi.get().validate(h, ps.OpenApi.get().component("SessionHandle"), "lookup")
    for k in ("session_id", "idle_timeout_seconds", "max_lifetime_seconds", "created_at"):
        assert h[k] == created[k], (k, h[k], created[k])
    assert h["running"] is False and h["execution_count"] == 0, h
    assert h["runtime"] == "default", h
    time.sleep(0.05)
    client.run(sid, "x = 1")
    h2 = lookup(client, sid).json()
    assert h2["execution_count"] == 1, h2
    assert h2["last_activity_at"] > h["last_activity_at"], (h, h2)
    # A lookup is not activity: it keeps the session no longer alive.
    h3 = lookup(client, sid).json()
    assert h3["last_activity_at"] == h2["last_activity_at"], (h2, h3)
    assert client.destroy(sid).status_code == 204


def test_lookup_says_a_call_is_running(client, sid):
    started = threading.Event()
    result = {}

    def long_call():
        c = client.clone()
        started.set()
        result["r"] = c.run(sid, "import time; time.sleep(1.5); print('done')")

    t = threading.Thread(target=long_call)
    t.start()
    started.wait()
    seen = False
    deadline = time.time() + 1.2
    while time.time() < deadline and not seen:
        seen = lookup(client, sid).json()["running"]
        time.sleep(0.05)
    t.join()
    assert seen, "the lookup never saw the call running"
    assert result["r"].stdout == "done\n"
    assert lookup(client, sid).json()["running"] is False


def test_lookup_of_an_unknown_or_gone_session_is_404(client):
    sid = client.new_session()
    assert client.destroy(sid).status_code == 204
    for name in (sid, "no-such-session", "x" * 128):
        r = lookup(client, name)
        assert r.status_code == 404, f"{name[:40]}: {r.status_code} {r.text[:200]}"
    r = lookup(client, "not%20an%20id")
    assert r.status_code == 404, f"{r.status_code} {r.text[:200]}"


def test_lookup_sees_only_the_callers_tenant(stacks):
    st = stacks.get("tenant", TENANT_ENV)
    acme = ps.Client(st, headers={"X-Test-Tenant": "acme"})
    other = ps.Client(st, headers={"X-Test-Tenant": "globex"})
    sid = acme.new_session()
    assert lookup(acme, sid).status_code == 200
    r = lookup(other, sid)
    assert r.status_code == 404, f"another tenant looked it up: {r.status_code} {r.text[:200]}"
    assert lookup(ps.Client(st), sid).status_code == 401
    assert acme.destroy(sid).status_code == 204


def health(c):
    return extension(c, "GET", "/health")


def test_health_counts_the_sessions(client, stack):
    r = health(client)
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    h = r.json()
    assert h["status"] == "ok" and h["draining"] is False, h
    assert h["max_sessions"] == int(stack.env().get("PADDOCK_MAX_SESSIONS", "64")), h
    sid = client.new_session()
    h2 = health(client).json()
    assert h2["session_count"] == h["session_count"] + 1, (h, h2)
    assert client.destroy(sid).status_code == 204
    assert health(client).json()["session_count"] == h["session_count"]


def test_health_needs_no_token_and_tells_nothing_else(stacks):
    st = stacks.get("auth", AUTH_ENV)
    anyone = ps.Client(st)
    r = health(anyone)
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    assert set(r.json()) == {"status", "session_count", "max_sessions", "draining"}, r.json()
    # A load balancer's HEAD gets the status alone.
    r = anyone.request("HEAD", "/health", check=False)
    assert r.status_code == 200 and r.content == b"", f"{r.status_code} {r.content[:300]}"
    # Only GET and HEAD /health are open: the other routes still want the token.
    assert anyone.create().status_code == 401
    assert anyone.request("HEAD", "/sessions/x", check=False).status_code == 401
    assert extension(anyone, "POST", "/health").status_code == 401
    assert extension(ps.Client(st, token="tok-alpha-123"), "POST", "/health").status_code == 405


def test_health_is_503_while_sessiond_is_down(stacks):
    st = stacks.get("health-restart")
    c = ps.Client(st)
    assert health(c).status_code == 200
    st.kill9("paddock-sessiond")
    r = health(c)
    assert r.status_code == 503, f"{r.status_code} {r.text[:300]}"
    assert r.json()["status"] == "unavailable", r.json()
    assert "session daemon" in r.json()["detail"], r.json()
    st.restart("paddock-sessiond")
    assert health(c).json()["status"] == "ok"
