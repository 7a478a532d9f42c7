"""Free loopback ports for processes this package starts.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from its ephemeral range, the
same range it takes the local ports of outgoing connections from: between the pick and the
child's bind, any connection on the machine may take it. The ports here are drawn from below
that range, where only an explicit bind can take them, and each is checked free when drawn.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000  # below: ports services are commonly configured on
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (32768, the Linux default, when it cannot
    be read)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound now without address reuse (nothing listens on
    it and no connection holds it)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, span: tuple[int, int] | None = None) -> list[int]:
    """``n`` distinct ports of ``span`` (first, end; default: from 10000 to the ephemeral range)
    that can be bound on 127.0.0.1 now, in random order. A :class:`RuntimeError` when the span
    has fewer than ``n`` such ports."""
    first, end = span or (LOWEST, ephemeral_start())
    if end - first < n:
        raise RuntimeError(f"ports {first}-{end - 1} cannot hold {n} free ports")
    chosen: list[int] = []
    for port in random.sample(range(first, end), min(end - first, 64 * n + 256)):
        if bindable(port):
            chosen.append(port)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"fewer than {n} free ports in {first}-{end - 1}")


def free_port(span: tuple[int, int] | None = None) -> int:
    """One port as :func:`free_ports` draws them."""
    return free_ports(1, span)[0]
