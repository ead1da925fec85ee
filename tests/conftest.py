"""Fixtures for the whole suite: a private Mosquitto broker, and hygiene checks.

Each test session starts its own broker on a free port with its own config (never a
shared one); ``set_tcp_nodelay true`` as in every config the project ships.

Every test fails if it leaves a thread, an asyncio task or a file descriptor behind
(pymodbus' autouse hygiene fixtures): a daemon that leaks one per reconnect dies in a week.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from deploy.broker import Broker, free_port

__all__ = ["Broker", "free_port"]


def _open_fds() -> dict[str, str]:
    """Open file descriptors and what they are (the listing's own fd is closed by the
    time it is read, so it drops out)."""
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return fds


@pytest.fixture(autouse=True)
async def no_leaks() -> AsyncIterator[None]:
    """Fail the test if it leaves an asyncio task running or a file descriptor open.

    Autouse, so it is set up before, and checked after, every fixture of the test's own
    (session fixtures such as the broker are older and stay out of the count).
    """
    tasks = asyncio.all_tasks()
    fds = _open_fds()
    yield
    leaked_tasks: set[asyncio.Task[object]] = set()
    leaked_fds: list[str] = []
    for _ in range(200):  # closing transports and processes finish a few iterations later
        leaked_tasks = asyncio.all_tasks() - tasks - {asyncio.current_task()}
        leaked_fds = [what for fd, what in _open_fds().items() if fds.get(fd) != what]
        if not leaked_tasks and not leaked_fds:
            break
        await asyncio.sleep(0.01)
    assert not leaked_tasks, f"leaked tasks: {leaked_tasks}"
    assert not leaked_fds, f"leaked fds: {leaked_fds}"


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One private broker for the session. Do not stop it: use ``mosquitto_private``."""
    broker = Broker(tmp_path_factory.mktemp("mosquitto"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def mosquitto_private(tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own, which the test may stop and start."""
    broker = Broker(tmp_path)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running (pymodbus' hygiene fixture)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 2
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"test leaked threads: {leaked}"
