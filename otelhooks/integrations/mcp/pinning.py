"""Tool definition pinning: the defence against a server that changes a tool after it was trusted
(a "rug pull": a description that starts to instruct the model, a schema that starts to ask
for more).

The first definition seen of each tool (name, title, description, input and output schema,
annotations) is pinned in the store (:mod:`otelhooks.builtin.store`), per upstream, with its
canonical digest (:func:`otelhooks.core.digest.content_digest`). A definition that differs later
is *changed*: the tool is neither listed to hosts (its new description would reach the model)
nor called, each refusal is logged and audited, and the change is recorded in the store for
review, until it is approved with ``otelhooks mcp approve`` (which pins the new definition) or by
a policy entry (``[pinning] approve = { tool = "sha256:…" }``). A tool never seen before is
pinned on first sight (``new_tools = "block"`` holds it back until approved instead).

**Blocks belong to the upstream sessions that saw the change.** Each set of upstream sessions
(one per host, or per identity; the stdio relay's one server) is an *owner* here, named by its
key (``UpstreamSet.key``, carried by each call as ``Caller.upstream_set``): what one owner's
upstream lists never lifts another owner's block. A block stays until the store holds an
approval of the very definition the owner's upstream lists (a pin written after the one it was
found to differ from); a server that changes a tool and then changes it back stays blocked. A
running gateway reads the store again when its revision moves, at most every ``refresh``
seconds (default 0.5), so an approval made by another process is honoured within a second.

A call whose caller names no upstream set is blocked when any owner holds the tool back: an
unknown owner gets the strictest answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import mcp.types as mcp_types

from ...builtin.store import (
    Definition,
    Pin,
    SQLiteStore,
    Store,
    StoreError,
    default_store_file,
)
from ...core import BeforeDecision, BeforeToolCallContext, block
from ...core import digest as canonical
from .access import current_caller

logger = logging.getLogger("otelhooks.mcp.pinning")

_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
REFRESH_INTERVAL: Final = 0.5
"""Seconds between two looks at the store's revision (an approval is seen within this)."""


def definition(tool: mcp_types.Tool) -> dict[str, Any]:
    """The parts of a tool's listing that are pinned (what the model and the caller rely on)."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: data[key] for key in _FIELDS if key in data}


def definition_hash(tool: mcp_types.Tool) -> str:
    """``sha256:`` and the hex digest of the pinned parts as canonical JSON (RFC 8785)."""
    return canonical.content_digest(definition(tool))


def seen_of(upstream: str, tool: mcp_types.Tool) -> Definition:
    """A tool's definition as ``upstream`` lists it, with its digest."""
    return Definition(upstream, tool.name, definition_hash(tool), definition(tool))


def upstream_key(name: str, target: str) -> str:
    """An upstream's key in the store: its name and a digest of its command line or URL, so
    that two different servers given one name do not share pins."""
    return f"{name}@{hashlib.sha256(target.encode()).hexdigest()[:12]}"


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
    """The pins as the pinning sees them, over a :class:`~otelhooks.builtin.store.Store` (an
    SQLite file when given a path)."""

    def __init__(self, store: Store | str | os.PathLike[str]) -> None:
        self.store: Store = SQLiteStore(store) if isinstance(store, (str, os.PathLike)) else store

    def get(self, upstream: str, tool: str) -> dict[str, Any] | None:
        """The pin of a tool (``hash``, ``definition``, ``pinned`` time, ``by``), if any."""
        pin = self.store.get_pin(upstream, tool)
        if pin is None:
            return None
        return {
            "hash": pin.digest,
            "definition": dict(pin.definition),
            "pinned": pin.pinned_at,
            "by": pin.pinned_by,
        }

    def pin(self, upstream: str, tool: mcp_types.Tool) -> str:
        """Pin the tool's definition unless a pin is there already; returns the pinned hash
        (another's, when it was first)."""
        return self.store.pin(seen_of(upstream, tool)).digest

    def import_file(self, path: str | os.PathLike[str]) -> int:
        """Pin the definitions of a pin file of an earlier version (JSON) that the store does
        not hold yet; returns how many. Their digests are computed again, canonically."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return 0
        except ValueError as exc:
            raise StoreError(f"{path}: not a pin file: {exc}") from None
        count = 0
        for upstream, tools in (data.get("upstreams") or {}).items():
            for tool, pin in tools.items():
                found = pin.get("definition") if isinstance(pin, dict) else None
                if not isinstance(found, dict) or self.store.get_pin(upstream, tool):
                    continue
                self.store.pin(Definition(upstream, tool, canonical.content_digest(found), found))
                count += 1
        return count

    def close(self) -> None:
        """Release the store."""
        self.store.close()


@dataclass(slots=True)
class _Block:
    change: Change | None  # None: a new tool held back
    since: int  # the version of the pin it was found to differ from (0: none)


@dataclass(slots=True)
class _Owner:
    seen: dict[str, Definition] = field(default_factory=dict)
    blocked: dict[str, _Block] = field(default_factory=dict)


class Pinning:
    """Checks the tools each upstream lists against the pins, and blocks the changed ones per
    owner (the before-hook ``pinning``; see the module's docs)."""

    name = "pinning"

    def __init__(
        self,
        store: PinStore,
        *,
        approved: Mapping[str, str] | None = None,
        new_tools: str = "pin",
        refresh: float = REFRESH_INTERVAL,
    ) -> None:
        self.store = store
        self.approved = dict(approved or {})
        self.new_tools = new_tools
        self.refresh = refresh
        self._owners: dict[str, _Owner] = {}
        self._lock = threading.RLock()
        self._revision = -1
        self._checked = 0.0

    # -- reviewing listings ----------------------------------------------------------------

    def review(
        self, upstream: str, tools: Iterable[tuple[str, mcp_types.Tool]], *, owner: str
    ) -> list[Change]:
        """Check one upstream's listing (registered name, listing) as ``owner`` sees it: pin
        what is new, hold back what changed; returns the changes found now."""
        changes = []
        with self._lock:
            state = self._owners.setdefault(owner, _Owner())
            for registered, listing in tools:
                seen = seen_of(upstream, listing)
                state.seen[registered] = seen
                try:
                    change = self._judge(state, registered, seen)
                except (StoreError, OSError, ValueError) as exc:  # fail closed
                    logger.error("pin store: %s: %r held back", exc, registered)
                    state.blocked[registered] = _Block(None, 0)
                    continue
                if change is not None:
                    changes.append(change)
        return changes

    def _judge(
        self,
        state: _Owner,
        registered: str,
        seen: Definition,
        pins: Mapping[tuple[str, str], Pin] | None = None,
    ) -> Change | None:
        store = self.store.store
        approved = self.approved.get(registered) == seen.digest
        pin = (
            store.get_pin(seen.upstream, seen.tool)
            if pins is None
            else pins.get((seen.upstream, seen.tool))
        )
        if pin is None:
            if self.new_tools == "block" and not approved:
                if registered not in state.blocked:
                    logger.warning(
                        "new tool %r of upstream %s held back until approved "
                        "(otelhooks mcp approve)",
                        registered,
                        seen.upstream,
                    )
                    store.report_change(seen, registered=registered, pinned=None)
                state.blocked[registered] = _Block(None, 0)
                return None
            pin = store.pin(seen)
            if pin.digest == seen.digest:
                logger.info("pinned the definition of %r (%s)", registered, seen.digest)
        held = state.blocked.get(registered)
        if approved or (pin.digest == seen.digest and (held is None or pin.version > held.since)):
            state.blocked.pop(registered, None)
            return None
        if pin.digest == seen.digest:  # changed back: still held until approved
            return None
        change = Change(
            seen.upstream, registered, pin.digest, seen.digest, pin.definition, seen.definition
        )
        if held is None or held.change is None or held.change.now != seen.digest:
            logger.warning(
                "the definition of %r changed since it was pinned (%s, now %s): it is hidden "
                "and blocked until approved (otelhooks mcp approve)",
                registered,
                pin.digest,
                seen.digest,
            )
            store.report_change(seen, registered=registered, pinned=pin.digest)
        state.blocked[registered] = _Block(change, max(pin.version, held.since if held else 0))
        return change

    # -- the store moving under us -------------------------------------------------------------

    def _refresh(self) -> None:
        """Judge every listing seen again when the store's revision moved: lift the blocks
        it now approves, and hold back what no longer matches a pin approved since."""
        now = time.monotonic()
        if now - self._checked < self.refresh:
            return
        self._checked = now
        try:
            revision = self.store.store.revision()
        except (StoreError, OSError, ValueError) as exc:
            logger.error("pin store: %s", exc)
            return
        if revision == self._revision:
            return
        with self._lock:
            self._revision = revision
            try:
                pins = {(p.upstream, p.tool): p for p in self.store.store.pins()}
            except (StoreError, OSError, ValueError) as exc:
                logger.error("pin store: %s", exc)
                return
            for state in list(self._owners.values()):
                for registered, seen in list(state.seen.items()):
                    with contextlib.suppress(StoreError, OSError, ValueError):
                        self._judge(state, registered, seen, pins)

    # -- what hosts see ------------------------------------------------------------------------

    def refused(self, tool: str, owner: str | None) -> bool:
        """Whether ``tool`` is held back for ``owner`` (for any owner when it is ``None``)."""
        self._refresh()
        with self._lock:
            if owner is None:
                return any(tool in state.blocked for state in self._owners.values())
            state = self._owners.get(owner)
            return state is not None and tool in state.blocked

    def changes(self, owner: str) -> dict[str, Change | None]:
        """What ``owner`` holds back: registered name -> change (``None``: new)."""
        self._refresh()
        with self._lock:
            state = self._owners.get(owner)
            return {} if state is None else {k: b.change for k, b in state.blocked.items()}

    def forget(self, owner: str) -> None:
        """Drop an owner's state (its upstream sessions closed)."""
        with self._lock:
            self._owners.pop(owner, None)

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeDecision | None:
        """Block a call of a tool held back for the calling owner."""
        name = ctx.tool_call.name
        caller = current_caller()
        owner = caller.upstream_set if caller is not None else None
        if not self.refused(name, owner):
            return None
        with self._lock:
            states = [self._owners.get(owner)] if owner is not None else self._owners.values()
            held = next((s.blocked[name] for s in states if s and name in s.blocked), None)
        change = held.change if held is not None else None
        if change is None:
            return block(f"tool {name!r} is new and not approved yet (otelhooks mcp approve)")
        return block(
            f"the definition of {name!r} changed since it was pinned ({change.pinned}, now "
            f"{change.now}); it stays blocked until approved (otelhooks mcp approve)"
        )


def open_pins(store_file: str | os.PathLike[str] | None) -> PinStore:
    """The pins of the store at ``store_file`` (default: :func:`default_store_file`)."""
    return PinStore(store_file or default_store_file())
