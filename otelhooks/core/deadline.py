"""The one timeout mechanism of the runtime: hooks and handlers run under :func:`deadline`.

:func:`deadline` bounds a block of an asyncio task as :func:`asyncio.timeout` does: when the time
is up the task is cancelled and the block raises :class:`TimeoutError` (its ``expired`` says the
timeout was this block's, not a ``TimeoutError`` the code raised); a cancellation from anywhere
else passes through untouched. Instead of a timer per block (a timer handle made, pushed on the
loop's heap and cancelled for every call: on this kind of machine several times the cost of a
whole tool call when nothing records it), one watch per event loop serves every block: it fires
at the earliest deadline still pending (plus its slack), cancels the tasks whose deadline passed
and arms itself for the next one. Blocks that end before their deadline (nearly all) cost an
insertion and a removal. Only the public asyncio API is used (``current_task``, ``Task.cancel``,
``Task.uncancel``, ``Task.cancelling``, ``loop.call_at``).

Contract: a block's timeout fires no earlier than ``timeout`` seconds after it was entered and
at most its slack later: a sixteenth of the timeout, at most 0.25 s (the 180 s default fires within
a quarter of a second; a 0.1 s timeout within 6 ms). Code that holds the event loop (a sync
function called inline) cannot be interrupted by any timer: run it in a worker thread
(:mod:`otelhooks.core.threads`) to bound it.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from asyncio import CancelledError, get_running_loop
from collections.abc import Callable
from types import TracebackType
from typing import Final

_SLACK_FRACTION: Final = 1 / 16
_MAX_SLACK: Final = 0.25


class _Watch:
    """The blocks of one event loop that have a deadline, and its one armed timer."""

    __slots__ = ("armed", "blocks", "clock", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # the watch must not keep its loop alive
        # asyncio's own loops keep time.monotonic(); others (uvloop) their own clock.
        default = getattr(type(loop), "time", None) is asyncio.BaseEventLoop.time
        self.clock: Callable[[], float] = time.monotonic if default else loop.time
        self.blocks: set[Deadline] = set()
        self.armed = math.inf  # when the earliest armed timer fires

    def arm(self, when: float) -> None:
        loop = self.loop()
        if loop is not None:
            self.armed = when
            loop.call_at(when, self._fire, when)

    def _fire(self, when: float) -> None:
        if when == self.armed:
            self.armed = math.inf
        now = self.clock()
        for block in [b for b in self.blocks if b.at <= now]:
            self.blocks.discard(block)
            block.expire()
        earliest = min((b.due for b in self.blocks), default=math.inf)
        if earliest < self.armed:
            self.arm(earliest)


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watch] = weakref.WeakKeyDictionary()
_last: _Watch | None = None  # the watch of the loop that used one last


def _watch(loop: asyncio.AbstractEventLoop) -> _Watch:
    """The watch of ``loop`` (the running loop)."""
    global _last
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = _Watch(loop)
    _last = watch
    return watch


class Deadline:
    """A block of the current task that must end within its timeout (a ``with`` block); with
    no timeout (``None``) it bounds nothing and costs nothing."""

    __slots__ = ("_cancelling", "_task", "_watch", "at", "due", "expired", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = None if timeout is None else max(timeout, 0.0)
        self.expired = False

    def __enter__(self) -> Deadline:
        timeout = self.timeout
        if timeout is None:
            return self
        loop = get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("a deadline must be used inside a task")
        watch = _last
        if watch is None or watch.loop() is not loop:
            watch = _watch(loop)
        self._watch = watch
        self._task = task
        self._cancelling = task.cancelling()
        at = self.at = watch.clock() + timeout
        slack = timeout * _SLACK_FRACTION
        due = self.due = at + (slack if slack < _MAX_SLACK else _MAX_SLACK)
        watch.blocks.add(self)
        if due < watch.armed:
            watch.arm(due)
        return self

    def expire(self) -> None:
        """The time is up: cancel the task (the block turns it into :class:`TimeoutError`)."""
        self.expired = True
        self._task.cancel()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.timeout is None:
            return
        self._watch.blocks.discard(self)
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is CancelledError
        ):
            raise TimeoutError(f"timed out after {self.timeout}s") from exc


_UNBOUNDED: Final = Deadline(None)


def deadline(timeout: float | None) -> Deadline:
    """A ``with`` block of the current task bounded by ``timeout`` seconds (``None``: no bound,
    and nothing to do)."""
    return _UNBOUNDED if timeout is None else Deadline(timeout)
