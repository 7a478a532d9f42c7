"""The shared-timer deadlines tool calls run under: the same outcomes as ``asyncio.timeout``
(a timeout, a cancellation from outside, nesting), within the documented slack, one timer for
many calls, and no event loop kept alive; :func:`bounded` with the outcomes of a block entered
before the awaitable's first step."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

from otelhooks.core import deadline as deadline_module
from otelhooks.core.deadline import Deadline, bounded, deadline


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


def test_bounded_returns_what_finishes_without_waiting_and_registers_nothing() -> None:
    async def at_once(value: int) -> int:
        return value

    async def main() -> tuple[list[int], int, int]:
        loop = asyncio.get_running_loop()
        scheduled = len(loop._scheduled)  # type: ignore[attr-defined]
        values = [await bounded(at_once(i), 0.001) for i in range(100)]
        return values, scheduled, len(loop._scheduled)  # type: ignore[attr-defined]

    values, before, after = asyncio.run(main())
    assert values == list(range(100))
    assert before == after == 0


def test_bounded_times_out_counting_the_first_step_and_leaves_nothing_pending() -> None:
    async def busy_then_wait() -> None:
        time.sleep(0.5)  # holds the loop longer than the whole bound
        await asyncio.sleep(30)

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await bounded(busy_then_wait(), 0.4)
        assert _pending_blocks() == 0
        return time.monotonic() - started

    assert 0.5 <= asyncio.run(main()) < 0.5 + 0.3  # at the first wait, not 0.4 s after it


def test_bounded_fires_within_its_slack_on_a_future_and_on_a_coroutine() -> None:
    async def main() -> list[float]:
        lates = []
        loop = asyncio.get_running_loop()
        for make in (lambda: loop.create_future(), lambda: asyncio.sleep(5)):
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await bounded(make(), 0.1)
            lates.append(time.monotonic() - started - 0.1)
        return lates

    for late in asyncio.run(main()):
        assert 0.0 <= late < 0.5  # slack 0.1 / 16 s, plus scheduling


def test_bounded_hands_a_cancellation_to_the_awaitable_and_passes_it_through() -> None:
    seen: list[str] = []

    async def survives_one_cancel() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            current = asyncio.current_task()
            assert current is not None
            current.uncancel()
        await asyncio.sleep(0)
        return "carried on"

    async def waits() -> None:
        await asyncio.sleep(5)

    async def bound_survivor() -> str:
        return await bounded(survives_one_cancel(), 5.0)

    async def bound_waiter() -> None:
        await bounded(waits(), 5.0)

    async def main() -> str:
        task = asyncio.create_task(bound_survivor())
        await asyncio.sleep(0.01)
        task.cancel()
        value = await task
        other = asyncio.create_task(bound_waiter())
        await asyncio.sleep(0.01)
        other.cancel()
        with pytest.raises(asyncio.CancelledError):
            await other
        assert _pending_blocks() == 0
        return value

    assert asyncio.run(main()) == "carried on"
    assert seen == ["cancelled"]


def test_bounded_without_a_timeout_is_the_awaitable_itself() -> None:
    async def value() -> int:
        return 1

    coroutine = value()
    assert bounded(coroutine, None) is coroutine
    assert asyncio.run(coroutine) == 1
