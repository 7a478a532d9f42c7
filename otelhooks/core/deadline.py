"""Timeouts for many concurrent tool calls at the cost of a set insertion each.

:func:`deadline` bounds a block of an asyncio task as :func:`asyncio.timeout` does: when the time
is up the task is cancelled and the block raises :class:`TimeoutError`; a cancellation from
anywhere else passes through untouched. Instead of a timer per block (a timer handle made, pushed
on the loop's heap and cancelled for every call, most of a tool call's cost when nothing records
it), one watch per event loop serves every block: it fires at the earliest deadline still pending
(plus its slack), cancels the tasks whose deadline passed and arms itself for the next one. Blocks
that end before their deadline (nearly all) cost an insertion and a removal.

Contract: a block's timeout fires no earlier than ``timeout`` seconds after it was entered and
at most its slack later: a sixteenth of the timeout, at most 0.25 s (the 180 s default fires within
a quarter of a second; a 0.1 s timeout within 6 ms).

:func:`bounded` awaits one awaitable under such a bound, and registers the bound only when the
awaitable first waits: until then the task holds the loop and no timer could fire, so the outcome
is the one a block entered before the first step gives (the time of that step counts against the
timeout), and an awaitable that finishes without waiting costs no registration at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
import types
import weakref
from asyncio import CancelledError, get_running_loop
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, Final, TypeVar

T = TypeVar("T")

_SLACK_FRACTION: Final = 1 / 16
_MAX_SLACK: Final = 0.25
_NO_DEADLINE: Final = contextlib.nullcontext()

if sys.version_info >= (3, 12):  # asyncio.current_task is C code from 3.12
    _task_of: Callable[[asyncio.AbstractEventLoop], asyncio.Task[object] | None] = (
        asyncio.current_task
    )
else:  # 3.11's is a Python function that looks the loop up again: go to its table directly
    from asyncio.tasks import _current_tasks  # type: ignore[attr-defined]

    _task_of = _current_tasks.get


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
    """A block of the current task that must end within its timeout (a ``with`` block)."""

    __slots__ = ("_cancelling", "_spent", "_task", "_watch", "at", "due", "expired", "timeout")

    def __init__(self, timeout: float, spent: float = 0.0) -> None:
        self.timeout = timeout if timeout > 0.0 else 0.0
        self._spent = spent  # seconds of the timeout used before the block was entered
        self.expired = False

    def __enter__(self) -> Deadline:
        loop = get_running_loop()
        task = _task_of(loop)
        if task is None:
            raise RuntimeError("a deadline must be used inside a task")
        watch = _last
        if watch is None or watch.loop() is not loop:
            watch = _watch(loop)
        self._watch = watch
        self._task = task
        self._cancelling = task.cancelling()
        timeout = self.timeout
        at = self.at = watch.clock() + timeout - self._spent
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
        self._watch.blocks.discard(self)
        if (
            self.expired
            and self._task.uncancel() <= self._cancelling
            and exc_type is CancelledError
        ):
            raise TimeoutError(f"timed out after {self.timeout}s") from exc


def deadline(timeout: float | None) -> contextlib.AbstractContextManager[object]:
    """A ``with`` block of the current task bounded by ``timeout`` seconds (``None``: no bound)."""
    return _NO_DEADLINE if timeout is None else Deadline(timeout)


def bounded(awaitable: Awaitable[T], timeout: float | None) -> Awaitable[T]:
    """``awaitable`` awaited within ``timeout`` seconds (``None``: no bound): the outcomes of
    ``with deadline(timeout): await awaitable``, with the bound registered at the first wait."""
    return awaitable if timeout is None else _bounded(awaitable, timeout)


@types.coroutine
def _bounded(awaitable: Awaitable[T], timeout: float) -> Generator[Any, Any, T]:
    steps: Any = awaitable  # a coroutine object steps itself; anything else through __await__
    if type(steps) is not types.CoroutineType and type(steps) is not types.GeneratorType:
        steps = awaitable.__await__()
    started = time.monotonic()
    try:
        waiting = steps.send(None)
    except StopIteration as done:  # finished without waiting: no timer could have fired
        return done.value  # type: ignore[no-any-return]
    with Deadline(timeout, time.monotonic() - started):
        while True:  # hand the first wait to the task; what it throws in goes on to the awaitable
            try:
                yield waiting
                break
            except BaseException as exc:
                try:
                    waiting = steps.throw(exc)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
        return (yield from steps)  # type: ignore[no-any-return]
