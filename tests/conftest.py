"""Fixtures for the whole suite: a private Mosquitto broker, and hygiene checks.

Each test session starts its own broker on a free port with its own config (never a
shared one); ``set_tcp_nodelay true`` as in every config the project ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Broker:
    """A private Mosquitto on 127.0.0.1; ``stop()`` and ``start()`` simulate an outage
    (same port, so clients reconnect to the same address)."""

    workdir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None

    @property
    def conf(self) -> Path:
        """The broker's own configuration file."""
        return self.workdir / "mosquitto.conf"

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "persistence false\n"
            "set_tcp_nodelay true\n"
            "log_dest stderr\n"
            "log_type error\n"
            "log_type warning\n"
        )
        log = (self.workdir / "mosquitto.log").open("ab")
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited: see {self.workdir / 'mosquitto.log'}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mosquitto did not start listening within 10 s")

    def stop(self) -> None:
        """Stop the broker (clients see the connection drop)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


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
