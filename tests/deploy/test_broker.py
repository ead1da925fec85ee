"""Ports for private brokers and clusters: never where outgoing connections take theirs."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from deploy.broker import free_port, listen_ports
from deploy.floor_cluster import free_ranges


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_listen_ports_lie_below_the_ephemeral_range() -> None:
    ports = listen_ports()
    assert ports.stop <= ephemeral_low()
    assert len(ports) >= 2000


def test_a_free_port_is_below_the_ephemeral_range_and_free() -> None:
    rng = random.Random(1)
    for _ in range(50):
        port = free_port(rng=rng)
        assert port < ephemeral_low()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # raises if it was not free


def test_a_port_in_use_is_never_returned() -> None:
    # The generator's first choice is taken: free_port must skip it.
    first = random.Random(7).choice(listen_ports())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert free_port(rng=random.Random(7)) != first


def test_floor_port_ranges_are_below_the_ephemeral_range() -> None:
    rng = random.Random(3)
    for _ in range(20):
        starts = free_ranges(3, rng=rng)
        assert max(starts) + 3 <= ephemeral_low()
        assert min(starts) >= listen_ports().start
