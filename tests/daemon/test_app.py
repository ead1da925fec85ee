"""The table's core and its shell, in process: what a request, an outcome or a start writes
to the journal's outbox and to the log (the end-to-end runs are in tests/integration)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.app import TableDaemon
from daemon.broker import free_port
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.journal import Journal
from daemon.logs import configure_logging
from daemon.notify import Notifier
from rules.events import CoverAllResult, DiceRolled, HighestHand


def _craps_config(tmp_path: Path) -> TableConfig:
    return validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "c1.db")},
        }
    )


@pytest.fixture
def craps(tmp_path: Path) -> Iterator[TableCore]:
    """A craps table's core with its journal open and replayed, no MQTT, no driver."""
    config = _craps_config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test")
        core.start()
        yield core


def _responses(core: TableCore, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(m.payload) for m in core.journal.pending(10_000) if m.topic == f"response/{name}"
    ]


@pytest.mark.parametrize("request_id", [7, "r7", 0])
def test_a_response_echoes_the_request_id_as_it_came(
    craps: TableCore, request_id: str | int
) -> None:
    # mqtt-api.md "Requests": the answer holds the request's request_id; daemon/requests.py
    # takes a string or an integer and echoes it as it came: 7 is not "7" to a terminal.
    craps.ingest("dice_reader", DiceRolled(roll_id=11, dice=(2, 3)))
    good = {"operator": "Ann", "roll_id": 11, "clause": 3, "request_id": request_id}
    assert craps.decide("void_roll", json.dumps(good).encode()) > 0
    bad = {"operator": "Ann", "roll_id": 99, "request_id": request_id}
    assert craps.decide("overturn", json.dumps(bad).encode()) == 1  # the answer alone
    [ok] = _responses(craps, "void_roll")
    [error] = _responses(craps, "overturn")
    assert (ok["status"], ok["request_id"]) == ("ok", request_id)
    assert (error["status"], error["request_id"]) == ("error", request_id)


def test_a_bool_request_id_is_not_echoed_as_an_id(craps: TableCore) -> None:
    body = {"operator": "Ann", "roll_id": 1, "request_id": True}
    craps.decide("overturn", json.dumps(body).encode())
    [answer] = _responses(craps, "overturn")
    assert answer["status"] == "error"
    assert answer["request_id"] is None


class _LogStream(io.StringIO):
    """A log stream that says when every one of ``wanted`` has been written."""

    def __init__(self, *wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.seen = asyncio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if all(w in self.getvalue() for w in self.wanted):
            self.seen.set()
        return written


async def test_every_line_the_running_table_logs_names_the_table(tmp_path: Path) -> None:
    # Every line bound to the table (README, "Logs"); the driver's and the MQTT link's
    # lines are logged by their own modules, inside the daemon's tasks.
    stream = _LogStream("open failed", "mqtt broker unreachable")
    configure_logging(fmt="json", level="info", stream=stream)
    config = validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(tmp_path / "unplugged")},
            "mqtt": {"port": free_port()},  # nobody listens: an outage
            "journal": {"path": str(tmp_path / "c1.db")},
        }
    )
    daemon = TableDaemon(config, notifier=Notifier(None))
    try:
        task = asyncio.create_task(daemon.run())
        await stream.seen.wait()
        task.cancel()
        await asyncio.wait({task})
    finally:
        configure_logging(fmt="json", level="info")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(line["event"] == "open failed" for line in lines)  # the driver's own line
    assert [line for line in lines if line.get("table") != "c1"] == []


def test_an_unpublishable_outcome_logs_no_card(tmp_path: Path) -> None:
    # shuffler-icd.md "Card data is secret until it is face up": a flagged round's cards
    # may still be face down, which is why the payload model refuses a flagged result
    # with a hand; the error line must not print the hand the model refused.
    config = validate_config(
        {
            "table": {"id": "p1", "game": "CSP"},
            "shuffler": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "p1.db")},
        }
    )
    stream = io.StringIO()
    configure_logging(fmt="json", level="info", stream=stream)
    journal = Journal.open(config.journal_path)
    try:
        core = TableCore(config, journal, version="test")
        hand = HighestHand(hand="Flush", position="P3", cards=("Qh", "Jh", "Th", "8h", "7h"))
        wrong = CoverAllResult(
            round_id=812,
            game="CSP",
            hands=3,
            outcome="flagged",
            highest=hand,
            pays=None,
            reason="a test",
        )
        core._publish((wrong,), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        journaled = [r for r in journal.records() if r.kind == "daemon"]
    finally:
        journal.close()
        configure_logging(fmt="json", level="info")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [error] = [line for line in lines if line["event"] == "outcome not publishable"]
    assert (error["level"], error["round"]) == ("error", 812)
    assert not re.search(r"Qh|Jh|Th|8h|7h", stream.getvalue())
    assert "Qh" in json.dumps(journaled[0].record)  # kept for review in the journal


def test_a_long_replay_asks_systemd_for_more_start_time(tmp_path: Path) -> None:
    # systemd/lammer@.service: READY comes after the replay, and TimeoutStartSec would
    # kill a start that replays a big journal; EXTEND_TIMEOUT_USEC over a real socket.
    config = _craps_config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        first = TableCore(config, journal, version="test")
        for roll in range(1, 21):
            first.ingest("dice_reader", DiceRolled(roll_id=roll, dice=(1, 2)))
        records = journal.last_seq
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(tmp_path / "notify"))
        listener.setblocking(False)
        with Notifier(str(tmp_path / "notify")) as notifier:
            again = TableDaemon(config, notifier=notifier, replay_extend_every=10)
            with Journal.open(config.journal_path) as journal:
                again.open_core(journal)
        got = []
        with contextlib.suppress(BlockingIOError):
            while True:
                got.append(listener.recv(4096).decode())
    assert records > 20
    assert got == ["EXTEND_TIMEOUT_USEC=30000000"] * (records // 10)
