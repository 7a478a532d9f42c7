"""Tool definition pinning: the defence against a server that changes a tool after it was trusted
(a "rug pull": a description that starts to instruct the model, a schema that starts to ask
for more).

The first definition seen of each tool (name, title, description, input and output schema,
annotations) is hashed and stored in the pin file, per upstream. A definition that differs
later is *changed*: the tool is neither listed to hosts (its new description would reach the
model) nor called, and each refusal is logged and audited, until the change is approved with
``otelhooks mcp approve`` (which pins the new definition) or by a policy entry
(``[pinning] approve = { tool = "sha256:…" }``). A tool never seen before is pinned on first
sight (``new_tools = "block"`` refuses it until approved instead).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import mcp.types as mcp_types

from ...core import BeforeDecision, BeforeToolCallContext, block

logger = logging.getLogger("otelhooks.mcp.pinning")

State = Literal["pinned", "new", "changed"]
_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def definition(tool: mcp_types.Tool) -> dict[str, Any]:
    """The parts of a tool's listing that are pinned (what the model and the caller rely on)."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: data[key] for key in _FIELDS if key in data}


def definition_hash(tool: mcp_types.Tool) -> str:
    """``sha256:`` and the hex digest of the pinned parts as canonical JSON."""
    text = json.dumps(definition(tool), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def upstream_key(name: str, target: str) -> str:
    """An upstream's key in the pin file: its name and a digest of its command line or URL, so
    that two different servers given one name do not share pins."""
    return f"{name}@{hashlib.sha256(target.encode()).hexdigest()[:12]}"


def default_pin_file() -> Path:
    """``$XDG_STATE_HOME/otelhooks/mcp-pins.json`` (``~/.local/state/...`` by default)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "otelhooks" / "mcp-pins.json"


@dataclass(frozen=True, slots=True)
class Change:
    """A tool whose definition differs from its pin."""

    upstream: str
    tool: str
    pinned: str
    now: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]


class PinStore:
    """The pin file: per upstream key, per tool, the pinned hash and definition. Writes are
    atomic (a temporary file renamed over the old one)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except ValueError as exc:
            raise ValueError(f"{self.path}: not a pin file: {exc}") from None
        self._pins: dict[str, dict[str, dict[str, Any]]] = data.get("upstreams", {})

    def get(self, upstream: str, tool: str) -> dict[str, Any] | None:
        """The pin of a tool (``hash``, ``definition``, ``pinned`` time), if any."""
        return self._pins.get(upstream, {}).get(tool)

    def pin(self, upstream: str, tool: mcp_types.Tool) -> str:
        """Pin the tool's current definition; returns its hash."""
        digest = definition_hash(tool)
        with self._lock:
            self._pins.setdefault(upstream, {})[tool.name] = {
                "hash": digest,
                "definition": definition(tool),
                "pinned": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            self._save()
        return digest

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "upstreams": self._pins}, indent=2, sort_keys=True)
        fd, temporary = tempfile.mkstemp(prefix=".pins-", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.replace(temporary, self.path)


class Pinning:
    """Checks the tools each upstream lists against the pins, and blocks the changed ones (the
    before-hook ``pinning``)."""

    name = "pinning"

    def __init__(
        self,
        store: PinStore,
        *,
        approved: Mapping[str, str] | None = None,
        new_tools: str = "pin",
    ) -> None:
        self.store = store
        self.approved = dict(approved or {})
        self.new_tools = new_tools
        self._refused: dict[str, Change | None] = {}  # registered name -> why (None: new)
        self._lock = threading.Lock()

    def review(self, upstream: str, tools: Iterable[tuple[str, mcp_types.Tool]]) -> list[Change]:
        """Check an upstream's listing (registered name, listing): pin what is new, note what
        changed; returns the changes."""
        changes = []
        for registered, listing in tools:
            digest = definition_hash(listing)
            pin = self.store.get(upstream, listing.name)
            approved = self.approved.get(registered) == digest
            with self._lock:
                if pin is None:
                    if self.new_tools == "block" and not approved:
                        self._refused[registered] = None
                        logger.warning(
                            "new tool %r of upstream %s refused until approved",
                            registered,
                            upstream,
                        )
                        continue
                    self.store.pin(upstream, listing)
                    self._refused.pop(registered, None)
                    logger.info("pinned the definition of %r (%s)", registered, digest)
                elif pin["hash"] == digest or approved:
                    self._refused.pop(registered, None)
                else:
                    change = Change(
                        upstream,
                        registered,
                        pin["hash"],
                        digest,
                        pin["definition"],
                        definition(listing),
                    )
                    self._refused[registered] = change
                    changes.append(change)
                    logger.warning(
                        "the definition of %r changed since it was pinned (%s, now %s): it is "
                        "hidden and blocked until approved (otelhooks mcp approve)",
                        registered,
                        pin["hash"],
                        digest,
                    )
        return changes

    def refused(self, tool: str) -> bool:
        """Whether ``tool`` is held back (changed, or new and not yet approved)."""
        return tool in self._refused

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Block a call of a tool whose definition changed since it was pinned."""
        name = ctx.tool_call.name
        if name not in self._refused:
            return None
        change = self._refused.get(name)
        if change is None:
            return block(f"tool {name!r} is new and not approved yet (otelhooks mcp approve)")
        return block(
            f"the definition of {name!r} changed since it was pinned ({change.pinned}, now "
            f"{change.now}); it stays blocked until approved (otelhooks mcp approve)"
        )
