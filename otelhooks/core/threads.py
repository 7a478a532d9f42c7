"""Worker threads for sync code that must not hold the event loop: sync hooks with a timeout,
and sync handlers marked ``blocking`` or bounded by a timeout of their own.

A thread cannot be stopped from outside, so a timed-out call leaves its thread running until the
code returns. :class:`Workers` keeps such a thread from costing anyone else: it starts a new
thread whenever no idle one is free (where a fixed pool, like the event loop's default executor,
would queue the next call behind the hung ones until it, too, timed out), lets idle threads go
after ``idle_seconds``, and refuses a call with :class:`WorkersExhausted` once ``max_threads``
threads are busy, rather than queueing it. The code runs in a copy of the caller's context
(OpenTelemetry's current span included), as with :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

T = TypeVar("T")

DEFAULT_MAX_THREADS: Final = 256
"""Busy worker threads at most (timed-out calls still running count)."""


class WorkersExhausted(RuntimeError):
    """Every worker thread is busy: the call was refused, not queued."""


_Job = tuple[contextvars.Context, Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class Workers:
    """Threads that run sync calls for an event loop, one call per thread at a time."""

    def __init__(
        self, *, max_threads: int = DEFAULT_MAX_THREADS, idle_seconds: float = 30.0
    ) -> None:
        self.max_threads = max_threads
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    @property
    def threads(self) -> int:
        """Threads alive (busy or idle)."""
        return self._threads

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread; its value or its exception. Cancelling the caller
        stops the wait, not the thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job: _Job = (contextvars.copy_context(), fn, args, future)
        with self._lock:
            spawn = not self._idle
            if not spawn:  # an idle thread takes it
                self._idle -= 1
                self._jobs.put(job)
            elif self._threads >= self.max_threads:
                raise WorkersExhausted(
                    f"all {self.max_threads} worker threads are busy (calls that timed out may "
                    "still be running)"
                )
            else:
                self._threads += 1
        if spawn:
            thread = threading.Thread(
                target=self._work, args=(job,), name="otelhooks-worker", daemon=True
            )
            thread.start()
        return await future

    def _work(self, job: _Job | None) -> None:
        while True:
            if job is not None:
                _run(job)
                with self._lock:
                    self._idle += 1
            try:
                job = self._jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():  # no job was handed to this idle thread meanwhile
                        self._idle -= 1
                        self._threads -= 1
                        return
                job = None


def _run(job: _Job) -> None:
    context, fn, args, future = job
    try:
        value = context.run(fn, *args)
    except BaseException as exc:
        _settle(future, None, exc)
    else:
        _settle(future, value, None)


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    def settle() -> None:
        if future.done():  # the caller stopped waiting (a timeout, a cancellation)
            return
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)

    with contextlib.suppress(RuntimeError):  # the loop closed while it ran: nobody waits
        future.get_loop().call_soon_threadsafe(settle)


WORKERS: Final = Workers()
"""The worker threads the runtime's hooks and handlers share."""
