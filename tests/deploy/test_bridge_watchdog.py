"""The bridge watchdog's probe and its process handling (``deploy.bridge_watchdog``), on a
real Mosquitto; the whole layout under floor faults is tests/integration/test_bridge_faults.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from deploy.bridge_watchdog import ProbeError, Settings, Watchdog, probe, probe_endpoint
from deploy.broker import Broker, free_port
from foundation.endpoints import Endpoint

ME = pwd.getpwuid(os.geteuid()).pw_name
"""Mosquitto started as root drops to ``mosquitto`` unless told: it could not read tmp_path."""


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(1200):  # 60 s: a bound on a failure
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


def test_the_probe_listener_is_the_first_listener_of_the_file() -> None:
    conf = "# c\nuser x\nlistener 1884 127.0.0.1\nlistener 9 10.0.0.1\n"
    assert probe_endpoint(conf) == Endpoint("127.0.0.1", 1884)
    with pytest.raises(ValueError, match="no 'listener PORT HOST'"):
        probe_endpoint("user x\n")


async def test_the_probe_makes_a_round_trip_through_a_broker(mosquitto: Broker) -> None:
    took = await probe(Endpoint(mosquitto.host, mosquitto.port), 10)
    assert 0 < took < 10


async def test_a_broker_that_never_answers_fails_the_probe_within_its_deadline() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(4096):
                pass
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(TimeoutError):
            await probe(Endpoint("127.0.0.1", port), 0.3)
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.service
async def test_a_refusing_broker_fails_the_probe(tmp_path: Path) -> None:
    """A broker that refuses the probe's topic (an ACL without it) is not answering."""
    port = free_port()
    (tmp_path / "acl").write_text("topic read nothing/#\n")
    conf = tmp_path / "m.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nacl_file {tmp_path / 'acl'}\n"
        f"persistence false\nuser {ME}\n"
    )
    broker = Broker(tmp_path, port=port, config_file=conf)
    broker.start()
    try:
        with pytest.raises((ProbeError, TimeoutError)):
            await probe(Endpoint("127.0.0.1", port), 1.0)
    finally:
        broker.stop()


@pytest.mark.heavy
@pytest.mark.service
async def test_a_hung_broker_is_killed_and_started_again(tmp_path: Path) -> None:
    """SIGSTOP: the broker cannot answer nor act on SIGTERM; the watchdog SIGKILLs it
    after its grace and starts another, which answers."""
    port = free_port()
    (tmp_path / "acl").write_text("topic readwrite lammer-bridge/probe/#\n")
    conf = tmp_path / "bridge.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nacl_file {tmp_path / 'acl'}\n"
        f"persistence false\nuser {ME}\n"
    )
    watchdog = Watchdog(Settings(conf, interval=0.2, deadline=1.0, failures=2, grace=0.5))
    running = asyncio.create_task(watchdog.run())
    try:
        await _until(lambda: watchdog.answering is not None)
        first = watchdog.answering
        assert first is not None
        os.kill(first, signal.SIGSTOP)
        await _until(lambda: watchdog.answering not in (None, first))
        await probe(Endpoint("127.0.0.1", port), 10)
        assert watchdog.kills == 1
        assert watchdog.starts == 2
    finally:
        watchdog.stop()
        async with asyncio.timeout(30):
            await running
    assert watchdog._process is None
