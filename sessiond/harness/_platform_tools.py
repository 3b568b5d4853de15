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


# The module's own names are dunders, which no tool may be named.
__paddock_tools__ = []   # the registration: [{"name", "doc"}], as the harness last saw it
__paddock_call__ = None  # the harness's channel: (name, input) -> (is_error, value)


def __paddock_make__(name, doc):
    def tool(*args, **kwargs):
        if args:
            raise TypeError(f"{name}() takes keyword arguments only")
        call = globals()["__paddock_call__"]
        if call is None:
            raise ToolError("no tool channel in this process")
        is_error, value = call(name, kwargs)
        if is_error:
            raise ToolError(value)
        return value
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc or None
    return tool


def __paddock_set_tools__(tools):
    """Make the module's functions those of tools (called by the harness)."""
    names = globals()
    if tools == names["__paddock_tools__"]:
        return
    for old in names["__paddock_tools__"]:
        names.pop(old["name"], None)
    names["__paddock_tools__"] = tools
    for t in tools:
        names[t["name"]] = __paddock_make__(t["name"], t.get("doc"))


def __dir__():
    return sorted(["ToolError", *(t["name"] for t in globals()["__paddock_tools__"])])
