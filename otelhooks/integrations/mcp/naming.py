"""How the proxy names what its upstreams offer, and the patterns its rules match them with.

One rule for tool (and prompt) names, the same whatever the number of upstreams: a tool keeps
its own name, or is served as ``{prefix}_{name}`` when its upstream has a ``prefix``. Two
upstreams that serve the same name are refused at start (a policy must not depend on which of
the two answers). The name is a function of (upstream, the tool's own name) and the policy, so
rules written against it mean the same tool with one upstream or several.

Resource patterns (``resources = ["file:///srv/**"]``) match URIs: ``**`` matches anything,
``*`` and ``?`` anything but ``/``; a ``file:`` URI is matched in its normalized form
(percent-escapes decoded, ``.`` and ``..`` resolved), so ``file:///srv/../etc/passwd`` is
``file:///etc/passwd``.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final
from urllib.parse import unquote, urlsplit

from ...core import TOOL_NAME

_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class ToolRef:
    """A tool as the policy knows it: its upstream and its own name there."""

    upstream: str
    name: str


def exposed_name(name: str, prefix: str | None, separator: str = "_") -> str:
    """The name a tool is served (and registered) under: the prefix, and characters hosts
    refuse replaced; a name too long keeps a hash of the whole, so two cannot collide."""
    full = f"{prefix}{separator}{name}" if prefix else name
    safe = _NAME_CHARS.sub("_", full)
    if TOOL_NAME.fullmatch(safe) is None:  # empty, or longer than 64
        digest = hashlib.sha256(full.encode()).hexdigest()[:8]
        safe = f"{safe[:55]}_{digest}" if safe else f"tool_{digest}"
    return safe


def normalized_uri(uri: str) -> str:
    """``uri`` as resource patterns see it: a ``file:`` URI with its path decoded and
    normalized (``..`` resolved); any other URI unchanged."""
    if not uri.startswith("file:"):
        return uri
    parts = urlsplit(uri)
    path = posixpath.normpath(unquote(parts.path) or "/")
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return f"file://{parts.netloc}{path}"


@lru_cache(maxsize=1024)
def _uri_regex(pattern: str) -> re.Pattern[str]:
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def uri_matches(uri: str, pattern: str) -> bool:
    """Whether ``uri`` (normalized) matches the resource pattern ``pattern``."""
    return _uri_regex(normalized_uri(pattern)).fullmatch(normalized_uri(uri)) is not None
