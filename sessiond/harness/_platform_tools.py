# SPDX-License-Identifier: MIT
"""The programmatic tools registered for this session.

    from _platform_tools import gmail_list_emails, ToolError
    emails = gmail_list_emails(query="from:alice")

Each tool takes keyword arguments, which become its input (a JSON object), and
returns the content the tool answered. ToolError is raised when the tool
reports an error or the call fails (time out, the tool's server unreachable,
too many calls). Calls leave the sandbox through paddock's session daemon: the
sandbox has no network and holds no credential for them.

The harness fills this module in before each call from the session's
registration; it is importable from the harness's interpreter (not from
another python3 process the code starts).
"""


class ToolError(Exception):
    """A tool reported an error, or the call could not be made."""


_tools = []      # the registration: [{"name", "doc"}], as the harness last saw it
_call = None     # the harness's channel: (name, input) -> (is_error, value)


def _make(name, doc):
    def tool(*args, **kwargs):
        if args:
            raise TypeError(f"{name}() takes keyword arguments only")
        if _call is None:
            raise ToolError("no tool channel in this process")
        is_error, value = _call(name, kwargs)
        if is_error:
            raise ToolError(value)
        return value
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc or None
    return tool


def _set_tools(tools):
    """Make the module's functions those of tools (called by the harness)."""
    global _tools
    if tools == _tools:
        return
    names = globals()
    for old in _tools:
        names.pop(old["name"], None)
    _tools = tools
    for t in tools:
        names[t["name"]] = _make(t["name"], t.get("doc"))


def __dir__():
    return sorted(["ToolError", *(t["name"] for t in _tools)])
