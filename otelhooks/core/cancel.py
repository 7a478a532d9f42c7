"""A cancellation signal shared by a run, its hooks and its tools (Pi's ``AbortSignal``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

CancelSource: TypeAlias = Literal["code", "signal", "outside"]


class CancelSignal:
    """Set once; everything waiting on the run stops when it is.

    ``cancel()`` wakes every ``wait()`` and cancels the asyncio tasks that the runtime registered
    while they run a tool or a hook, so a handler that never checks the signal still stops at its
    next ``await``. Callbacks added with ``add_callback`` run once, at the moment of cancellation.
    A signal may be cancelled from any thread of the event loop that created it.
    """

    __slots__ = ("_callbacks", "_cancelled", "_event", "_tasks", "reason")

    def __init__(self) -> None:
        self.reason: str | None = None
        """Why it fired (``None`` until it does); set by :meth:`cancel` only."""
        # Made when first needed: most signals are never watched, waited on or cancelled.
        self._event: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] | None = None
        self._cancelled: set[asyncio.Task[Any]] | None = None  # cancelled by it, not absorbed
        self._callbacks: list[Callable[[str], None]] | None = None

    @property
    def cancelled(self) -> bool:
        """Whether the signal has fired."""
        return self.reason is not None

    def cancel(self, reason: str = "cancelled") -> None:
        """Fire the signal (once; later calls change nothing) and run its callbacks."""
        if self.reason is not None:
            return
        self.reason = reason
        if self._event is not None:
            self._event.set()
        try:
            current = asyncio.current_task()
        except RuntimeError:
            current = None
        for task in list(self._tasks or ()):
            # The task that cancels sees ``cancelled`` at its next check instead: cancelling it
            # would fire at whatever it awaits next, possibly outside the tool or hook.
            if task is not current:
                task.cancel(reason)
                if self._cancelled is None:
                    self._cancelled = set()
                self._cancelled.add(task)
        for callback in self._callbacks or ():
            callback(reason)

    async def wait(self) -> str:
        """Return the reason once the signal is cancelled."""
        if self.reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        assert self.reason is not None
        return self.reason

    def add_callback(self, callback: Callable[[str], None]) -> None:
        """Run ``callback(reason)`` when the signal fires (at once if it already has)."""
        if self.reason is not None:
            callback(self.reason)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def watching(self) -> _Watching:
        """Context manager: while inside, ``cancel()`` cancels the current task."""
        if self._tasks is None:
            self._tasks = set()
        return _Watching(self._tasks)

    def absorbs(self, exc: asyncio.CancelledError | None = None) -> bool:
        """True when a ``CancelledError`` came from this signal alone; it is then absorbed
        (its request taken off the task with ``Task.uncancel``, once however often this is
        asked), and the caller turns it into an ordinary "cancelled" outcome. False for an
        asyncio cancellation from outside, which the caller must re-raise."""
        task = asyncio.current_task()
        if self.reason is None or task is None:
            return False
        if self._cancelled is not None and task in self._cancelled:  # its request is still on it
            self._cancelled.discard(task)
            return task.uncancel() == 0
        return task.cancelling() == 0


class _Watching:
    """Registers the current task with a signal (its set of watched tasks); nests (only the
    outermost one unregisters)."""

    __slots__ = ("_task", "_tasks")

    def __init__(self, tasks: set[asyncio.Task[Any]]) -> None:
        self._tasks = tasks
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> None:
        task = asyncio.current_task()
        if task is not None and task not in self._tasks:
            self._tasks.add(task)
            self._task = task

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._tasks.discard(self._task)


def cancelled_by(signal: CancelSignal) -> CancelSource:
    """Who an ``asyncio.CancelledError`` that just reached the runtime came from: the one rule
    for every phase of a call (hooks, the handler, the runtime's own code).

    * ``"code"``: nobody cancelled the task (``Task.cancelling() == 0``): the hook or handler
      raised it itself, or awaited something that was cancelled. That is the code's fault, like
      any exception: a hook failure, an error result.
    * ``"signal"``: the call's :class:`CancelSignal` fired and cancelled the task, and nothing
      else did; the cancellation is absorbed (:meth:`CancelSignal.absorbs`) and the call ends
      with ``error: cancelled: <reason>``.
    * ``"outside"``: the task itself is being cancelled (its caller gave up): the call's outcome
      is recorded and the cancellation goes on.
    """
    task = asyncio.current_task()
    if task is None or task.cancelling() == 0:
        return "code"
    return "signal" if signal.absorbs() else "outside"
