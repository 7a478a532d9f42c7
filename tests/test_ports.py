"""Free loopback ports are drawn outside the kernel's ephemeral range, and a held port is never
handed out."""

from __future__ import annotations

import socket

import pytest

from otelhooks.cli import ports


def test_ports_come_from_below_the_ephemeral_range_and_are_distinct() -> None:
    drawn = ports.free_ports(50)
    assert len(set(drawn)) == 50
    assert all(ports.LOWEST <= p < ports.ephemeral_start() for p in drawn)
    assert all(ports.bindable(p) for p in drawn)


def test_a_held_port_is_never_drawn() -> None:
    first = ports.free_port()
    span = (first, first + 2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first))
        holder.listen()
        assert not ports.bindable(first)
        if not ports.bindable(first + 1):
            pytest.skip(f"port {first + 1} is taken by another process")
        assert {ports.free_port(span) for _ in range(20)} == {first + 1}
        with pytest.raises(RuntimeError, match="fewer than 2 free ports"):
            ports.free_ports(2, span)


def test_a_span_too_small_is_refused() -> None:
    with pytest.raises(RuntimeError, match="cannot hold 3"):
        ports.free_ports(3, (20000, 20002))


def test_an_unreadable_range_file_means_the_linux_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "RANGE_FILE", ports.Path("/nonexistent/ip_local_port_range"))
    assert ports.ephemeral_start() == 32768
