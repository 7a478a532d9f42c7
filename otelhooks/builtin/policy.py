"""Policy before-hooks: rules users configure without writing code.

Each blocks with a reason that tells the model which rule it hit. Argument guards apply to calls
that carry the named argument; a call without it passes that guard.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from ..core.hooks import BeforeDecision, BeforeToolCallContext, block


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class ToolAllowList:
    """Only tools matching one of ``patterns`` (names or globs) may run: a default-deny policy."""

    name = "allow_list"

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Block a call of a tool no pattern allows."""
        if _matches(ctx.tool_call.name, self.patterns):
            return None
        allowed = ", ".join(self.patterns) or "none"
        return block(f"tool {ctx.tool_call.name!r} is not on the allow-list ({allowed})")


class ToolDenyList:
    """Tools matching one of ``patterns`` (names or globs) never run."""

    name = "deny_list"

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Block a call of a tool a pattern denies."""
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(ctx.tool_call.name, pattern):
                return block(f"tool {ctx.tool_call.name!r} is denied by policy ({pattern})")
        return None


class _ArgumentGuard:
    def __init__(self, argument: str, tools: Iterable[str] | None) -> None:
        self.argument = argument
        self.tools = tuple(tools) if tools is not None else None

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        if self.argument not in ctx.args:
            return None
        problem = self.check(ctx.args[self.argument])
        if problem is None:
            return None
        return block(f"argument {self.argument!r} of {ctx.tool_call.name!r} {problem}")

    def check(self, value: Any) -> str | None:
        raise NotImplementedError


class PathGuard(_ArgumentGuard):
    """A path argument must stay under ``root``: no ``..`` segments, no absolute path elsewhere."""

    name = "path_guard"

    def __init__(self, argument: str, root: str, *, tools: Iterable[str] | None = None) -> None:
        super().__init__(argument, tools)
        self.root = PurePosixPath(os.path.normpath(root))

    def check(self, value: Any) -> str | None:
        """The problem with ``value`` as a path under the root, or ``None``."""
        if not isinstance(value, str):
            return "must be a path string"
        path = PurePosixPath(value)
        if ".." in path.parts:
            return f"must not contain '..' (got {value!r})"
        full = path if path.is_absolute() else self.root / path
        normal = PurePosixPath(os.path.normpath(str(full)))
        if normal != self.root and self.root not in normal.parents:
            return f"must stay under {str(self.root)!r} (got {value!r})"
        return None


class UrlHostGuard(_ArgumentGuard):
    """A URL argument must be http(s) with a host in ``hosts`` (``*.example.com`` allowed)."""

    name = "url_host_guard"

    def __init__(
        self, argument: str, hosts: Iterable[str], *, tools: Iterable[str] | None = None
    ) -> None:
        super().__init__(argument, tools)
        self.hosts = tuple(h.lower() for h in hosts)

    def check(self, value: Any) -> str | None:
        """The problem with ``value`` as a URL to an allowed host, or ``None``."""
        if not isinstance(value, str):
            return "must be a URL string"
        try:
            parts = urlsplit(value)
            host = (parts.hostname or "").lower()
        except ValueError:
            return "is not a valid URL"
        if parts.scheme not in ("http", "https"):
            return f"must be an http(s) URL (got scheme {parts.scheme!r})"
        if not any(fnmatch.fnmatchcase(host, h) for h in self.hosts):
            return f"must point to an allowed host ({', '.join(self.hosts)}); got {host!r}"
        return None


class ArgumentPattern(_ArgumentGuard):
    """An argument must match ``regex`` in full."""

    name = "argument_pattern"

    def __init__(
        self,
        argument: str,
        regex: str,
        *,
        description: str | None = None,
        tools: Iterable[str] | None = None,
    ) -> None:
        super().__init__(argument, tools)
        self.regex = re.compile(regex)
        self.description = description or f"match {regex!r}"

    def check(self, value: Any) -> str | None:
        """The problem with ``value`` against the pattern, or ``None``."""
        if not isinstance(value, str) or self.regex.fullmatch(value) is None:
            return f"must {self.description}"
        return None


class CallLimit:
    """At most ``max_calls`` calls per run of each matching tool (or of all of them together
    with ``shared=True``). Counts are per run (the context snapshot's ``run_id``); a call is
    counted once, when it is first seen (not again when a later hook's rewrite makes it run
    again: ``ctx.recheck``)."""

    name = "call_limit"

    def __init__(
        self, max_calls: int, *, tools: Iterable[str] | None = None, shared: bool = False
    ) -> None:
        self.max_calls = max_calls
        self.tools = tuple(tools) if tools is not None else None
        self.shared = shared
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Count the call; block it once the run reached the limit."""
        key = (ctx.context.run_id, "*" if self.shared else ctx.tool_call.name)
        with self._lock:
            count = self._counts.get(key, 0) + (0 if ctx.recheck else 1)
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > 10_000:  # bounded: old runs are forgotten
                self._counts.popitem(last=False)
        if count > self.max_calls:
            what = "tool calls" if self.shared else f"calls of {ctx.tool_call.name!r}"
            return block(f"limit of {self.max_calls} {what} per run reached")
        return None
