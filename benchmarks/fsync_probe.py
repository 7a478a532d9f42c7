"""What making an appended audit line durable costs on this machine's disk, by method, in
interleaved rounds (each method once per round, the order alternating), so that the disk's
moods fall on every method alike:

* ``append+fsync``: what the audit log does (``O_APPEND`` write, ``fsync``);
* ``append+fdatasync``: the same without the inode's times;
* ``fallocate+pwrite+fdatasync``: a preallocated file (unwritten extents) written in place;
* ``zeroed+pwrite+fdatasync``: a file of written zeros overwritten in place (no size or extent
  change: ``fdatasync`` needs no journal commit);
* ``O_DSYNC append``: a file opened with ``O_APPEND | O_DSYNC`` (each ``write`` returns once
  its data, and the size that names it, are durable: no separate call);
* ``O_DSYNC zeroed pwrite``: a file of written zeros opened with ``O_DSYNC``, overwritten in
  place;
* ``append (no sync)``: the write alone.

Each method's CPU time (the calling thread's, system time included) per line is printed beside
its wall-clock percentiles. Then the same ``fsync`` from an event loop, inline and through
``run_in_executor`` (what a thread hand-off adds).
Usage: ``python benchmarks/fsync_probe.py [DIR] [ROUNDS]``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

LINE = b'{"event":"tool_call","x":"' + b"a" * 300 + b'"}\n'
SIZE = 1 << 22

Write = Callable[[int, int], int]


def _append(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


def _fallocated(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, SIZE)
    return fd


def _zeroed(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"\0" * SIZE)
    return fd


def _dsync_append(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_DSYNC, 0o600)


def _dsync_zeroed(path: str) -> int:
    fd = _zeroed(path)
    os.fsync(fd)
    os.close(fd)
    return os.open(path, os.O_RDWR | os.O_DSYNC)


def _in_place(fd: int, offset: int) -> int:
    os.pwrite(fd, LINE, offset)
    return offset + len(LINE)


def _append_fsync(fd: int, offset: int) -> int:
    os.write(fd, LINE)
    os.fsync(fd)
    return offset


def _append_fdatasync(fd: int, offset: int) -> int:
    os.write(fd, LINE)
    os.fdatasync(fd)
    return offset


def _in_place_fdatasync(fd: int, offset: int) -> int:
    os.pwrite(fd, LINE, offset)
    os.fdatasync(fd)
    return offset + len(LINE)


def _append_only(fd: int, offset: int) -> int:
    os.write(fd, LINE)
    return offset


METHODS: list[tuple[str, Callable[[str], int], Write]] = [
    ("append+fsync", _append, _append_fsync),
    ("append+fdatasync", _append, _append_fdatasync),
    ("fallocate+pwrite+fdatasync", _fallocated, _in_place_fdatasync),
    ("zeroed+pwrite+fdatasync", _zeroed, _in_place_fdatasync),
    ("O_DSYNC append", _dsync_append, _append_only),
    ("O_DSYNC zeroed pwrite", _dsync_zeroed, _in_place),
    ("append (no sync)", _append, _append_only),
]


def _summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    quarter = ordered[len(ordered) // 4]
    return (
        f"{name:28s} p50 {statistics.median(ordered):6.3f} ms  p25 {quarter:6.3f}  "
        f"p90 {ordered[int(len(ordered) * 0.9)]:6.3f}  min {ordered[0]:6.3f}"
    )


def methods(folder: str, rounds: int) -> None:
    opened = []
    for index, (_, make, _) in enumerate(METHODS):
        fd = make(os.path.join(folder, f"probe-{index}"))
        os.fsync(fd)
        opened.append(fd)
    offsets = [0] * len(METHODS)
    samples: list[list[float]] = [[] for _ in METHODS]
    cpu = [0.0] * len(METHODS)
    for round_ in range(rounds):
        order = range(len(METHODS)) if round_ % 2 else reversed(range(len(METHODS)))
        for k in order:
            started, used = time.perf_counter(), time.thread_time()
            offsets[k] = METHODS[k][2](opened[k], offsets[k])
            samples[k].append((time.perf_counter() - started) * 1e3)
            cpu[k] += time.thread_time() - used
    for (name, _, _), fd, taken, spent in zip(METHODS, opened, samples, cpu, strict=True):
        os.close(fd)
        print(f"{_summary(name, taken)}  cpu {spent / rounds * 1e3:6.3f}")


async def handoff(folder: str, rounds: int) -> None:
    fd = _append(os.path.join(folder, "probe-loop"))
    loop = asyncio.get_running_loop()
    inline: list[float] = []
    threaded: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        os.write(fd, LINE)
        os.fsync(fd)
        inline.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        os.write(fd, LINE)
        await loop.run_in_executor(None, os.fsync, fd)
        threaded.append((time.perf_counter() - started) * 1e3)
    os.close(fd)
    print(_summary("loop: fsync inline", inline))
    print(_summary("loop: fsync in a thread", threaded))


def main() -> None:
    parent = sys.argv[1] if len(sys.argv) > 1 else None
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=parent) as folder:
        methods(folder, rounds)
        asyncio.run(handoff(folder, rounds))


if __name__ == "__main__":
    main()
