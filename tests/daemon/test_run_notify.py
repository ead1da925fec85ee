"""``lammer run`` under systemd's notify protocol, against a real datagram socket:
READY once the journal is replayed and the loops run, the watchdog fed while healthy,
STOPPING on SIGTERM, and a clean exit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import Broker

LAMMER = str(Path(sys.executable).parent / "lammer")


# A bound on a failure only: on a loaded machine the interpreter's imports alone took over
# 20 s (tests/display/conftest.py's start_web says when).
START_BOUND_S = 120


def _receive_until(sock: socket.socket, wanted: str, deadline: float) -> list[str]:
    got: list[str] = []
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            break
        if any(wanted in g.split("\n") for g in got):
            return got
    raise AssertionError(f"no {wanted!r} from the daemon; got {got}")


def test_ready_watchdog_and_stopping_over_a_real_notify_socket(
    tmp_path: Path, mosquitto: Broker
) -> None:
    master, slave = os.openpty()  # the dice reader's line; nobody answers on it
    notify_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    config = tmp_path / "craps.toml"
    config.write_text(
        '[table]\nid = "notify-t"\ngame = "CRAPS"\n'
        f'[dice_reader]\nport = "{os.ttyname(slave)}"\n'
        f'[mqtt]\nhost = "{mosquitto.host}"\nport = {mosquitto.port}\n'
        f'[journal]\npath = "{tmp_path / "t.db"}"\n'
    )
    env = {**os.environ, "NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "200000"}
    with (tmp_path / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(
            [LAMMER, "run", "--config", str(config)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        got = _receive_until(sock, "READY=1", time.monotonic() + START_BOUND_S)
        assert (tmp_path / "t.db").exists(), "READY before the journal was opened"
        # WATCHDOG_USEC=200 ms: the daemon pings every 100 ms while healthy.
        got = _receive_until(sock, "WATCHDOG=1", time.monotonic() + 5)
        pings = sum(g.split("\n").count("WATCHDOG=1") for g in got)
        got = _receive_until(sock, "WATCHDOG=1", time.monotonic() + 5)
        assert pings + len(got) >= 2
        proc.send_signal(signal.SIGTERM)
        _receive_until(sock, "STOPPING=1", time.monotonic() + 10)
        assert proc.wait(timeout=15) == 0, (tmp_path / "daemon.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        os.close(master)
        os.close(slave)


def test_an_uth_table_builds_its_seven_card_table_before_it_says_ready(
    tmp_path: Path, mosquitto: Broker
) -> None:
    # link-layer.md: the host ACKs within 250 ms, and building the seven-card table on the
    # first Cover All round took 0.2 to 0.5 s: it is built before READY (rules.table.warm_up).
    master, slave = os.openpty()  # the shuffler's line; nobody answers on it
    notify_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    config = tmp_path / "uth.toml"
    config.write_text(
        '[table]\nid = "warm-t"\ngame = "UTH"\n'
        f'[shuffler]\nport = "{os.ttyname(slave)}"\n'
        f'[mqtt]\nhost = "{mosquitto.host}"\nport = {mosquitto.port}\n'
        f'[journal]\npath = "{tmp_path / "t.db"}"\n'
        '[logging]\nformat = "json"\n'
    )
    log_path = tmp_path / "daemon.log"
    env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [LAMMER, "run", "--config", str(config)], env=env, stdout=log, stderr=log
        )
    try:
        _receive_until(sock, "READY=1", time.monotonic() + START_BOUND_S)
        # The daemon writes each log line before it goes on: what READY follows is there.
        events = [json.loads(line) for line in log_path.read_text().splitlines()]
        names = [e["event"] for e in events]
        assert "rules warmed up" in names, names
        warmed = events[names.index("rules warmed up")]
        assert warmed["built"] == ["seven-card hand values"]
        assert names.index("rules warmed up") < names.index("journal replayed")
        # What the start left is collected and frozen before READY too: the first full
        # collections of the running table do not scan it (daemon.app.settle_heap).
        settled = events[names.index("heap settled")]
        assert names.index("journal replayed") < names.index("heap settled")
        assert settled["frozen"] > 10_000
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        os.close(master)
        os.close(slave)
