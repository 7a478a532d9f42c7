"""Policy before-hooks: rules users configure without writing code.

Each blocks with a reason that tells the model which rule it hit. Argument guards check the named
arguments a call carries (a call without them passes that guard) and offer ``check_tools``: run
against the tools there are, it names a guard whose argument no tool it applies to takes (a typo
that would guard nothing), so that the start can be refused.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, Final, Protocol
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


PATH_LIKE: Final = ("*path*", "paths", "source", "destination", "*file*", "*dir*")
"""Argument names (matched without regard to case) that a path guard takes for paths: in a tool
the guard applies to, such an argument it does not check blocks the tool's calls."""


class ToolLike(Protocol):
    """What a guard reads of a tool: its name and the JSON Schema of its parameters."""

    @property
    def name(self) -> str:
        """The tool's (registered) name."""
        ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON Schema of its arguments."""
        ...


def argument_names(tool: ToolLike) -> tuple[str, ...]:
    """The top-level argument names a tool's schema declares."""
    properties = tool.parameters.get("properties") if tool.parameters else None
    return tuple(properties) if isinstance(properties, Mapping) else ()


class GuardArgumentError(ValueError):
    """A guard whose argument names no argument of any tool it applies to (a typo: it would
    guard nothing)."""


class _ArgumentGuard:
    """A guard of named arguments: ``argument``, its list form (``{argument}s``, and a list
    value under any covered name, each item checked) and every name in ``arguments``. With
    ``tools`` it applies to those tools only (names or globs), however it is registered."""

    name = "argument_guard"

    def __init__(
        self, argument: str, tools: Iterable[str] | None, arguments: Iterable[str] = ()
    ) -> None:
        self.argument = argument
        self.tools = tuple(tools) if tools is not None else None
        names = [argument, f"{argument}s", *arguments]
        self.covered: tuple[str, ...] = tuple(dict.fromkeys(names))
        self._uncovered: dict[str, tuple[int, tuple[str, ...]]] = {}

    def applies_to(self, tool_name: str) -> bool:
        """Whether the guard applies to calls of ``tool_name``."""
        return self.tools is None or _matches(tool_name, self.tools)

    def uncovered(self, tool: ToolLike) -> tuple[str, ...]:
        """Arguments of ``tool`` the guard should check and does not (none but for paths)."""
        return ()

    def check_tools(self, tools: Iterable[ToolLike]) -> list[str]:
        """The problems of this guard against the tools there are: an argument that names no
        argument of any tool it applies to (with the name it probably meant). Empty when it
        fits; the caller refuses to start otherwise."""
        scoped = [t for t in tools if self.applies_to(t.name)]
        if not scoped:
            return []  # a tool pattern that matches nothing is reported as such
        known = sorted({a for t in scoped for a in argument_names(t)})
        if any(name in known for name in self.covered):
            return []
        close = difflib.get_close_matches(self.argument, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        where = ", ".join(sorted(t.name for t in scoped)[:8])
        return [
            f"{self.name} on argument {self.argument!r} names no argument of the tools it "
            f"applies to ({where}): it would guard nothing ({hint}their arguments: "
            f"{', '.join(known) or 'none'})"
        ]

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Check every covered argument the call carries; block a call of a tool with an
        argument the guard should check and does not."""
        tool = ctx.tool_call.name
        if not self.applies_to(tool):
            return None
        missed = self._missed(ctx.tool)
        if missed:
            names = ", ".join(repr(m) for m in missed)
            return block(
                f"{self.name}: {tool!r} takes {names}, which the guard does not check; add "
                "it to the guard's arguments (or limit the guard's tools)"
            )
        for name in self.covered:
            if name not in ctx.args:
                continue
            value = ctx.args[name]
            items = value if isinstance(value, (list, tuple)) else (value,)
            for item in items:
                problem = self._check_item(tool, item)
                if problem is not None:
                    return block(f"argument {name!r} of {tool!r} {problem}")
        return None

    def _missed(self, tool: ToolLike) -> tuple[str, ...]:
        found = self._uncovered.get(tool.name)
        if found is None or found[0] != id(tool.parameters):
            found = (id(tool.parameters), self.uncovered(tool))
            if len(self._uncovered) < 4096:
                self._uncovered[tool.name] = found
        return found[1]

    def _check_item(self, tool: str, value: Any) -> str | None:
        return self.check(value)

    def check(self, value: Any) -> str | None:
        """The problem with one value of a covered argument, or ``None``."""
        raise NotImplementedError


def check_guards(
    guards: Iterable[Any], tools: Sequence[ToolLike]
) -> tuple[list[str], dict[str, list[str]]]:
    """Each guard of ``guards`` (objects with ``check_tools``; others are skipped) against the
    tools there are: the errors (a guard that would guard nothing: refuse to start) and, per
    tool, notes on the arguments a guard should check and does not (its calls are blocked)."""
    errors: list[str] = []
    notes: dict[str, list[str]] = {}
    for guard in guards:
        if not isinstance(guard, _ArgumentGuard):
            continue
        errors.extend(guard.check_tools(tools))
        for tool in tools:
            missed = guard.uncovered(tool) if guard.applies_to(tool.name) else ()
            if missed:
                notes.setdefault(tool.name, []).append(
                    f"{guard.name} on {guard.argument!r} does not check "
                    f"{', '.join(missed)}: its calls are blocked"
                )
    return errors, notes


class PathGuard(_ArgumentGuard):
    """A path argument must name something under ``root``, as the tool's server will resolve
    it.

    * **What is checked:** ``argument``, its list form (``paths`` for ``path``; a list value is
      checked item by item) and each name in ``arguments`` (``["source", "destination"]``). A
      tool the guard applies to that takes another path-like argument (:data:`PATH_LIKE`)
      has its calls blocked, and :meth:`check_tools` names it.
    * **Relative paths** are refused, unless ``relative_to`` says what the server resolves them
      against (``server-filesystem`` resolves them against its first allowed directory).
      ``~`` (a home directory the server expands) and ``..`` segments are always refused:
      servers and kernels do not agree on ``..`` after a symbolic link.
    * **Symbolic links** (``canonical=True``, the default, for servers on this filesystem):
      the path is resolved as the kernel resolves it, and both the path as written and the
      file it leads to must be under the root (itself resolved). A name that exists only up to
      Unicode normalization (a server may match it) is refused. Tools named by
      :meth:`lexical_for` (served from another machine, a URL upstream) get the lexical check
      only: their paths mean nothing on this filesystem.
    * The check happens before the call: a link changed between the check and the server's
      use of it is not caught (see the threat model).
    """

    name = "path_guard"

    def __init__(
        self,
        argument: str,
        root: str,
        *,
        tools: Iterable[str] | None = None,
        arguments: Iterable[str] = (),
        relative_to: str | None = None,
        canonical: bool = True,
    ) -> None:
        super().__init__(argument, tools, arguments)
        self.root = PurePosixPath(os.path.normpath(os.path.abspath(root)))
        self.relative_to = (
            PurePosixPath(os.path.normpath(os.path.abspath(relative_to)))
            if relative_to is not None
            else None
        )
        self.canonical = canonical
        self._lexical: tuple[str, ...] = ()
        self._real_root = PurePosixPath(os.path.realpath(self.root)) if canonical else self.root

    def lexical_for(self, tools: Iterable[str]) -> None:
        """Check the paths of these tools (names or globs) lexically only: their server does
        not see this filesystem."""
        self._lexical = (*self._lexical, *tools)

    def uncovered(self, tool: ToolLike) -> tuple[str, ...]:
        """The path-like arguments of ``tool`` this guard does not check."""
        return tuple(
            a
            for a in argument_names(tool)
            if a not in self.covered and _matches(a.lower(), PATH_LIKE)
        )

    def _check_item(self, tool: str, value: Any) -> str | None:
        lexical = bool(self._lexical) and _matches(tool, self._lexical)
        return self.check(value, resolve=self.canonical and not lexical)

    def check(self, value: Any, *, resolve: bool | None = None) -> str | None:
        """The problem with ``value`` as a path under the root, or ``None``."""
        if not isinstance(value, str) or not value:
            return "must be a path string"
        if "\x00" in value:
            return "must not contain a NUL character"
        path = PurePosixPath(value)
        if value.startswith("~"):
            return f"must not start with '~' (got {value!r})"
        if ".." in path.parts:
            return f"must not contain '..' (got {value!r})"
        if not path.is_absolute():
            if self.relative_to is None:
                return (
                    f"must be an absolute path (got {value!r}: the server resolves a relative "
                    "one against a directory of its own; the guard's relative_to says which)"
                )
            path = self.relative_to / path
        normal = PurePosixPath(os.path.normpath(str(path)))
        if not _under(normal, self.root):
            return f"must stay under {str(self.root)!r} (got {value!r})"
        if not (self.canonical if resolve is None else resolve):
            return None
        real = PurePosixPath(os.path.realpath(normal))
        if not _under(real, self._real_root):
            return (
                f"must stay under {str(self.root)!r} (got {value!r}, which leads to {str(real)!r})"
            )
        twin = _unicode_twin(real)
        if twin is not None:
            return f"names {twin!r} only up to Unicode normalization (got {value!r})"
        return None


def _under(path: PurePosixPath, root: PurePosixPath) -> bool:
    return path == root or root in path.parents


def _unicode_twin(path: PurePosixPath) -> str | None:
    """A directory entry that a missing part of ``path`` matches only up to Unicode
    normalization (a server that matches names that way may follow it)."""
    existing = path
    missing: list[str] = []
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.append(existing.name)
        existing = existing.parent
    if not missing:
        return None
    wanted = unicodedata.normalize("NFC", missing[-1])
    try:
        entries = os.listdir(existing)
    except OSError:
        return None
    for entry in entries:
        if entry != missing[-1] and unicodedata.normalize("NFC", entry) == wanted:
            return str(existing / entry)
    return None


class UrlHostGuard(_ArgumentGuard):
    """A URL argument must be http(s) with a host in ``hosts`` (``*.example.com`` allowed)."""

    name = "url_host_guard"

    def __init__(
        self,
        argument: str,
        hosts: Iterable[str],
        *,
        tools: Iterable[str] | None = None,
        arguments: Iterable[str] = (),
    ) -> None:
        super().__init__(argument, tools, arguments)
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
        arguments: Iterable[str] = (),
    ) -> None:
        super().__init__(argument, tools, arguments)
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
