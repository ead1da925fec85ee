"""Ports for private brokers and clusters: never where outgoing connections take theirs."""

from __future__ import annotations

import os
import random
import socket
import subprocess
from pathlib import Path

import pytest

from deploy.broker import (
    MIN_SHARE,
    Broker,
    BrokerError,
    PortTaken,
    free_port,
    listen_ports,
    owns_listener,
    wait_serving,
    worker_share,
)
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


def test_a_port_handed_out_is_never_handed_out_again_before_it_is_bound() -> None:
    # A floor's controllers pick their ports minutes before their brokers bind them:
    # the same first choice of the generator, unbound, must not be handed out twice.
    first = free_port(rng=random.Random(11))
    assert free_port(rng=random.Random(11)) != first
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_floor_port_ranges_never_overlap_a_port_handed_out() -> None:
    taken: set[int] = set()
    for _ in range(5):
        for start in free_ranges(3, rng=random.Random(4)):  # the same first choice
            block = set(range(start, start + 3))
            assert not block & taken
            taken |= block
    port = free_port()
    assert port not in taken


def test_each_xdist_worker_picks_from_a_block_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ports = range(10000, 32768)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    blocks = []
    for i in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{i}")
        blocks.append(set(worker_share(ports)))
    assert all(len(b) == len(ports) // 4 for b in blocks)
    assert set.union(*blocks) <= set(ports)
    assert sum(len(b) for b in blocks) == len(set.union(*blocks))  # pairwise disjoint
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw4")  # not one of 4: everything
    assert worker_share(ports) == ports
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(len(ports) // MIN_SHARE + 1))
    assert worker_share(ports) == ports  # blocks too small to share out
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert worker_share(ports) == ports


@pytest.mark.service
def test_a_broker_whose_port_another_process_holds_is_not_taken_for_ready(
    tmp_path: Path,
) -> None:
    # Another process listens on the port the broker was given: mosquitto exits with
    # "Address already in use" while the other one accepts connections.
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        broker = Broker(tmp_path, port=port)
        with pytest.raises(BrokerError, match=f"port {port} is another process's"):
            broker.start()
        assert broker.process is None


@pytest.mark.service
def test_a_running_broker_owns_its_listener(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    broker.start()
    try:
        assert broker.process is not None
        assert owns_listener(broker.process.pid, broker.port) is True
        assert owns_listener(os.getpid(), broker.port) is False
    finally:
        broker.stop()


def test_a_server_is_ready_only_on_a_listener_of_its_own() -> None:
    # What the test harness waits on before it talks to a `lammer web` it started: a child
    # that could not bind is not taken for ready because another process accepts there.
    child = subprocess.Popen(["sleep", "60"])  # a process that listens on nothing
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            assert wait_serving(os.getpid(), "127.0.0.1", port, timeout=5) is True
            with pytest.raises(PortTaken, match=f"port {port} is another process's"):
                wait_serving(child.pid, "127.0.0.1", port, timeout=5)
        assert wait_serving(os.getpid(), "127.0.0.1", port, timeout=0.1) is False  # closed
    finally:
        child.kill()
        child.wait()
