"""The gateway's group commit: a caller is answered only after a flush (the audit log's
``fsync``, then its head) that started after the caller's line was written has finished; callers
waiting together share one flush; a flush that fails fails every caller it would have answered."""

from __future__ import annotations

import asyncio
import threading

from otelhooks.integrations.mcp.records import GroupCommit


class Disk:
    """A flush that blocks until released, counting how often it ran."""

    def __init__(self) -> None:
        self.flushes = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail: Exception | None = None

    def flush(self) -> None:
        self.flushes += 1
        self.started.set()
        self.release.wait(10)
        if self.fail is not None:
            raise self.fail


async def _until(event: threading.Event) -> None:
    for _ in range(1000):
        if event.is_set():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the flush never started")


async def test_a_caller_is_not_answered_by_a_flush_that_started_before_it() -> None:
    disk = Disk()
    commit = GroupCommit(disk.flush)
    first = asyncio.ensure_future(commit.sync())
    await _until(disk.started)
    disk.started.clear()
    later = asyncio.ensure_future(commit.sync())  # its line was written during the first flush
    disk.release.set()
    await first
    await asyncio.sleep(0.05)
    assert disk.flushes == 2  # the later caller waited for a flush of its own
    await later
    commit.close()


async def test_callers_waiting_together_share_one_flush() -> None:
    disk = Disk()
    commit = GroupCommit(disk.flush)
    first = asyncio.ensure_future(commit.sync())
    await _until(disk.started)
    waiting = [asyncio.ensure_future(commit.sync()) for _ in range(20)]
    await asyncio.sleep(0.02)
    assert not any(w.done() for w in waiting)
    disk.release.set()
    await asyncio.gather(first, *waiting)
    assert disk.flushes == 2  # the first caller's, then one for the twenty
    commit.close()


async def test_a_failed_flush_fails_every_caller_waiting_on_it() -> None:
    disk = Disk()
    disk.fail = OSError("disk full")
    disk.release.set()
    commit = GroupCommit(disk.flush)
    results = await asyncio.gather(*(commit.sync() for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    commit.close()


def test_one_commit_serves_event_loops_one_after_another() -> None:
    disk = Disk()
    disk.release.set()
    commit = GroupCommit(disk.flush)
    asyncio.run(commit.sync())
    asyncio.run(commit.sync())
    assert disk.flushes == 2
    commit.close()


async def test_after_close_nothing_is_flushed() -> None:
    disk = Disk()
    disk.release.set()
    commit = GroupCommit(disk.flush)
    await commit.sync()
    commit.close()
    await asyncio.wait_for(commit.sync(), 5)
    assert disk.flushes == 1
