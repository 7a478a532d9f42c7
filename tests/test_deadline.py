"""The one timeout mechanism hooks and handlers run under: the same outcomes as
``asyncio.timeout`` (a timeout, a cancellation from outside, nesting), within the documented
slack, one timer for many calls, no event loop kept alive, and ``expired`` telling its own
timeout from a ``TimeoutError`` the code raised."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

from otelhooks.core import deadline as deadline_module
from otelhooks.core.deadline import Deadline, deadline


async def _sleep_under(timeout: float, sleep: float = 5.0) -> float:
    """Seconds past ``timeout`` at which the block raised TimeoutError."""
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadline(timeout):
        await asyncio.sleep(sleep)
    return time.monotonic() - started - timeout


def test_a_block_times_out_no_earlier_than_its_timeout_and_within_its_slack() -> None:
    late = asyncio.run(_sleep_under(0.1))
    # The slack is 0.1 / 16 s; the rest of the bound is a loaded machine's scheduling.
    assert 0.0 <= late < 0.5


def test_many_concurrent_blocks_each_fire_within_their_own_slack() -> None:
    timeouts = [0.05 + 0.01 * i for i in range(60)]

    async def main() -> list[float]:
        return await asyncio.gather(*(_sleep_under(t) for t in timeouts))

    for timeout, late in zip(timeouts, asyncio.run(main()), strict=True):
        assert 0.0 <= late < 0.5, (timeout, late)  # slack timeout / 16, plus scheduling


def test_a_block_that_ends_in_time_returns_its_value_and_arms_no_timer_of_its_own() -> None:
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        with deadline(180.0):
            await asyncio.sleep(0)
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        for _ in range(1000):
            with deadline(180.0):
                await asyncio.sleep(0)
        return before, len(loop._scheduled)  # type: ignore[attr-defined]

    before, after = asyncio.run(main())
    assert after == before == 1  # the first block's timer serves every later one


def test_a_cancellation_from_outside_passes_through_as_cancellation() -> None:
    async def main() -> None:
        async def body() -> None:
            with deadline(5.0):
                await asyncio.sleep(5)

        task = asyncio.create_task(body())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.parametrize(("outer", "inner"), [(0.05, 5.0), (5.0, 0.05)])
def test_nested_blocks_each_own_their_timeout(outer: float, inner: float) -> None:
    async def main() -> str:
        try:
            with deadline(outer):
                try:
                    with deadline(inner):
                        await asyncio.sleep(5)
                except TimeoutError:
                    return "inner"
        except TimeoutError:
            return "outer"
        return "none"

    assert asyncio.run(main()) == ("outer" if outer < inner else "inner")


def test_a_task_stays_usable_after_its_block_timed_out() -> None:
    async def main() -> int:
        with pytest.raises(TimeoutError), deadline(0.01):
            await asyncio.sleep(1)
        await asyncio.sleep(0.01)  # no cancellation left pending on the task
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    assert asyncio.run(main()) == 0


def test_no_deadline_is_a_no_op_and_a_deadline_needs_a_running_loop() -> None:
    with deadline(None):
        pass
    with pytest.raises(RuntimeError, match="no running event loop"), Deadline(1.0):
        pass


def test_the_watch_keeps_no_event_loop_alive() -> None:
    async def main() -> asyncio.AbstractEventLoop:
        with deadline(180.0):
            await asyncio.sleep(0)
        return asyncio.get_running_loop()

    loop = weakref.ref(asyncio.run(main()))
    gc.collect()
    assert loop() is None


def _pending_blocks() -> int:
    return sum(len(watch.blocks) for watch in deadline_module._watches.values())


def test_expired_tells_the_blocks_timeout_from_the_codes_own() -> None:
    async def main() -> tuple[bool, bool]:
        own = deadline(5.0)
        with pytest.raises(TimeoutError), own:
            raise TimeoutError("the code's own")
        ours = deadline(0.01)
        with pytest.raises(TimeoutError), ours:
            await asyncio.sleep(5)
        assert _pending_blocks() == 0
        return own.expired, ours.expired

    assert asyncio.run(main()) == (False, True)


def test_a_sync_call_that_holds_the_loop_is_not_interrupted_but_counts_against_the_bound() -> None:
    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError), deadline(0.05):
            time.sleep(0.3)  # holds the loop: no timer can fire meanwhile
            await asyncio.sleep(30)  # the first wait: the overdue timeout fires at once
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert 0.3 <= elapsed < 0.3 + 5.0  # long before the 30 s sleep could end
