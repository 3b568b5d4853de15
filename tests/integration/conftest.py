# SPDX-License-Identifier: MIT
"""Fixtures of the integration suite: the real stack (one per test file, started
once), extra stacks with other settings, a client and a fresh session per test.
With PADDOCK_TEST_INSTALLED=1 the main stack is the installed package's (paddock_stack).

Not root: the whole file is skipped with exit status 77, which ctest counts as a skip.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import paddock_stack as ps  # noqa: E402


def pytest_configure(config):
    if os.geteuid() != 0:
        pytest.exit("SKIP: the integration tests start sessiond, which needs root "
                    "(namespaces, cgroups, mounts)", returncode=77)
    if config.option.collectonly:
        return
    problems = ps.preflight()
    if problems:
        pytest.exit("cannot start the stack: " + "; ".join(problems), returncode=1)


class Stacks:
    """Stacks of this test process by configuration, started on first use."""

    def __init__(self):
        self.by_name = {}

    def get(self, name, env=None):
        st = self.by_name.get(name)
        if st is None:
            # Installed mode: the main stack is the package's, run by systemd; stacks with
            # other settings run the dev way with the installed programs.
            if ps.INSTALLED and name == "main" and not env:
                st = ps.InstalledStack(name)
            else:
                st = ps.Stack(name, env)
            self.by_name[name] = st
            st.start()
        else:
            assert (env or {}) == st.extra_env, f"stack {name} asked with other settings"
        return st

    def stop_all(self):
        problems = []
        for name, st in self.by_name.items():
            problems += [f"stack {name}: {p}" for p in st.stop()]
        return problems


@pytest.fixture(scope="session")
def stacks():
    s = Stacks()
    yield s
    problems = s.stop_all()
    assert not problems, "teardown found:\n  " + "\n  ".join(problems)


@pytest.fixture(scope="session")
def stack(stacks):
    return stacks.get("main")


@pytest.fixture(scope="session")
def client(stack):
    return ps.Client(stack)


@pytest.fixture
def sid(client):
    """A fresh session, destroyed after the test."""
    s = client.new_session()
    yield s
    r = client.destroy(s)
    assert r.status_code == 204


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if exitstatus in (0, 5) or not ps.STACKS:
        return
    tr = terminalreporter
    tr.section("paddock logs")
    for st in ps.STACKS:
        tr.write_line(f"stack {st.name}: state {st.state_dir}, node {st.node_name}, "
                      f"exit codes {st.exit_codes}")
        tr.write_line(st.logs())
