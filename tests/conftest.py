"""Fixtures for the whole suite: a private Mosquitto broker, and hygiene checks.

Each test session starts its own broker on a free port with its own config (never a
shared one); ``set_tcp_nodelay true`` as in every config the project ships.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.broker import Broker, free_port

__all__ = ["Broker", "free_port"]


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
