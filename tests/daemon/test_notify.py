"""systemd notify protocol against a real AF_UNIX datagram socket."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.notify import Notifier


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """systemd's side: a datagram socket bound to a path."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        yield sock, path


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def test_ready_status_watchdog_stopping(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "10000000"}
    with Notifier.from_env(env) as notifier:
        assert notifier.active
        assert notifier.watchdog_interval == 5.0  # half of WatchdogSec=10
        assert notifier.status("replaying journal")
        assert received(sock) == ["STATUS=replaying journal"]
        assert notifier.ready()
        assert received(sock) == ["READY=1"]
        assert notifier.watchdog()
        assert received(sock) == ["WATCHDOG=1"]
        assert notifier.extend_timeout(30)
        assert received(sock) == ["EXTEND_TIMEOUT_USEC=30000000"]
        assert notifier.stopping()
        assert received(sock) == ["STOPPING=1"]
        # A newline would start another field: STATUS stays one line.
        notifier.status("broker down\nREADY=1")
        assert received(sock) == ["STATUS=broker down READY=1"]


def test_abstract_socket() -> None:
    name = f"lammer-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        with Notifier.from_env({"NOTIFY_SOCKET": "@" + name}) as notifier:
            assert notifier.ready()
        assert received(sock) == ["READY=1"]


@pytest.mark.parametrize(
    ("pid", "interval"), [(None, 1.5), ("self", 1.5), ("other", None), ("junk", None)]
)
def test_watchdog_pid(
    listener: tuple[socket.socket, str], pid: str | None, interval: float | None
) -> None:
    env = {"NOTIFY_SOCKET": listener[1], "WATCHDOG_USEC": "3000000"}
    if pid is not None:
        env["WATCHDOG_PID"] = {"self": str(os.getpid()), "other": "1", "junk": "x"}[pid]
    with Notifier.from_env(env) as notifier:
        assert notifier.watchdog_interval == interval


def test_not_under_systemd_is_a_no_op() -> None:
    with Notifier.from_env({"WATCHDOG_USEC": "3000000"}) as notifier:
        assert not notifier.active
        assert notifier.watchdog_interval is None
        assert notifier.ready()
        assert notifier.watchdog()
        assert notifier.stopping()


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path) -> None:
    with Notifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone")}) as notifier:
        assert notifier.active
        assert notifier.ready() is False


def test_close_is_idempotent(listener: tuple[socket.socket, str]) -> None:
    notifier = Notifier.from_env({"NOTIFY_SOCKET": listener[1]})
    notifier.close()
    notifier.close()
    assert not notifier.active
