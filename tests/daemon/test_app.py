"""The table's core and its shell, in process: what a request, an outcome or a start writes
to the journal's outbox and to the log (the end-to-end runs are in tests/integration)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import io
import json
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.app import TableDaemon
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.desk import RequestDesk
from daemon.journal import Journal
from daemon.logs import configure_logging
from daemon.notify import Notifier
from daemon.requests import Incoming
from deploy.broker import free_port
from rules.events import (
    CoverAllResult,
    DeviceConnected,
    DeviceHello,
    DiceRolled,
    HighestHand,
    ModeReported,
)


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


@pytest.fixture
def desk(craps: TableCore) -> RequestDesk:
    """The craps table's request desk."""
    return RequestDesk(craps)


def request(name: str, body: object) -> Incoming:
    """A request as the MQTT link hands it on."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Incoming.receive(name, payload)


def _responses(core: TableCore, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(m.payload) for m in core.journal.pending(10_000) if m.topic == f"response/{name}"
    ]


@pytest.mark.parametrize("request_id", [7, "r7", 0])
def test_a_response_echoes_the_request_id_as_it_came(
    craps: TableCore, desk: RequestDesk, request_id: str | int
) -> None:
    # mqtt-api.md "Requests": the answer holds the request's request_id; daemon/requests.py
    # takes a string or an integer and echoes it as it came: 7 is not "7" to a terminal.
    craps.ingest("dice_reader", DiceRolled(roll_id=11, dice=(2, 3)))
    good = {"operator": "Ann", "roll_id": 11, "clause": 3, "request_id": request_id}
    assert desk.decide(request("void_roll", good)).queued > 0
    bad = {"operator": "Ann", "roll_id": 99, "request_id": request_id}
    assert desk.decide(request("overturn", bad)).queued == 1  # the answer alone
    [ok] = _responses(craps, "void_roll")
    [error] = _responses(craps, "overturn")
    assert (ok["status"], ok["request_id"]) == ("ok", request_id)
    assert (error["status"], error["request_id"]) == ("error", request_id)


def test_a_bool_request_id_is_not_echoed_as_an_id(craps: TableCore, desk: RequestDesk) -> None:
    body = {"operator": "Ann", "roll_id": 1, "request_id": True}
    desk.decide(request("overturn", body))
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
    # Every line bound to the table (docs/operators/running.md, "Logs"); the driver's and the
    # MQTT link's lines are logged by their own modules, inside the daemon's tasks.
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
        core.ledger.publish((wrong,), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
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


# --- requests from hostile clients (mqtt-api.md "Requests") -----------------------------


class _Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _records(core: TableCore, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for r in core.journal.records(kind="decision"):
        value = r.record.get(key)
        if isinstance(value, dict):
            found.append(value)
    return found


def test_names_that_cannot_be_answered_are_dropped_and_counted(tmp_path: Path) -> None:
    # A 65,000-character name once made a response topic MQTT cannot carry and ended the
    # daemon for good; such a name is dropped (no response), counted, and reported once a
    # minute at most, in one bounded record.
    clock = _Clock()
    config = _craps_config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        desk = RequestDesk(core)
        before = journal.last_seq
        long_name = "x" * 65_000
        for name in [long_name, "", "Void_Roll", "void roll", "rolldecisión"] * 200:
            assert desk.decide(request(name, {"operator": "Ann", "roll_id": 1})).queued == 0
        assert [m for m in journal.pending(10_000) if m.topic.startswith("response/")] == []
        [report] = _records(core, "dropped_requests")
        assert (report["count"], report["total"]) == (1, 1)  # reported at once, then held
        first = report["first"]
        assert first["name"] == "x" * 80  # bounded
        assert first["name_length"] == 65_000
        assert first["reason"] == "a request name of 65000 characters (at most 64)"
        assert journal.last_seq == before + 1  # one record for a thousand drops
        clock.now += timedelta(seconds=30)
        desk.flush_drops()
        assert len(_records(core, "dropped_requests")) == 1  # not yet a minute
        clock.now += timedelta(seconds=31)
        desk.flush_drops()
        second = _records(core, "dropped_requests")[1]
        assert (second["count"], second["total"]) == (999, 1000)
        assert second["first"]["reason"] == "an empty request name"
        desk.flush_drops()
        assert len(_records(core, "dropped_requests")) == 2  # nothing new to report
        # The table still answers a good request.
        core.ingest("dice_reader", DiceRolled(roll_id=11, dice=(2, 3)))
        desk.decide(request("void_roll", {"operator": "Ann", "roll_id": 11, "clause": 3}))
        assert _responses(core, "void_roll")[-1]["status"] == "ok"


def test_an_unknown_name_of_the_right_shape_is_answered(
    craps: TableCore, desk: RequestDesk
) -> None:
    assert desk.decide(request("reset_table", {"operator": "Ann"})).queued == 1
    [answer] = _responses(craps, "reset_table")
    assert answer["status"] == "error"
    assert answer["error"].startswith("unknown request 'reset_table'")


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 100_000,  # 10^5-deep JSON: refused on its size, never parsed
        json.dumps({"operator": "A" * 5000, "roll_id": 1}).encode(),
        b"\xff" * 4097,
    ],
    ids=["deep", "long", "binary"],
)
def test_a_request_over_4_kib_is_refused_before_parsing(
    craps: TableCore, desk: RequestDesk, payload: bytes
) -> None:
    desk.decide(request("overturn", payload))
    [answer] = _responses(craps, "overturn")
    assert answer["status"] == "error"
    assert answer["error"] == f"the request is {len(payload)} bytes; at most 4096 bytes are allowed"
    [refused] = _records(craps, "rejected")
    assert refused["size"] == len(payload)
    assert refused["sha256"] == hashlib.sha256(payload).hexdigest()
    assert len(refused["head"].encode()) <= 3 * 256  # the first 256 bytes, as text
    assert refused["head"] == payload[:256].decode("utf-8", "replace")


def test_deep_json_within_4_kib_is_a_clear_error(craps: TableCore, desk: RequestDesk) -> None:
    desk.decide(request("overturn", b"[" * 4000))
    [answer] = _responses(craps, "overturn")
    assert answer["error"].startswith("the request is not valid JSON")


# --- the silence probe's answers -----------------------------------------------------


def test_probe_replies_are_journaled_marked_and_change_nothing(tmp_path: Path) -> None:
    config = validate_config(
        {
            "table": {"id": "u1", "game": "UTH"},
            "shuffler": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "u1.db")},
        }
    )
    hello = DeviceHello(device="shuffler", model="IDEAL-SIM", firmware="2.1.0", serial="SN1")
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test")
        core.start()
        core.ingest("shuffler", DeviceConnected(device="shuffler"))
        core.ingest("shuffler", hello, link_seq=1, raw=b"$HELLO...\r\n")
        core.ingest("shuffler", ModeReported(game="UTH"), link_seq=2, raw=b"$MODE...\r\n")
        core.ingest("shuffler", DiceRolled(roll_id=1, dice=(1, 2)), link_seq=3, raw=b"$R\r\n")
        assert "UNEXPECTED_FRAME" in {a.code for a in core.state.alarms}
        before, last = core.state, journal.last_seq
        # The answer to a silence probe: the same HELLO, the same MODE.
        assert core.ingest("shuffler", hello, link_seq=1, raw=b"$H2\r\n", probe=True) == 0
        mode = ModeReported(game="UTH")
        assert core.ingest("shuffler", mode, link_seq=2, raw=b"$M2\r\n", probe=True) == 0
        assert core.state == before  # a probe's HELLO is no restart: the alarm stays
        added = list(journal.records(last))
        assert [r.record for r in added] == [
            {"device": "shuffler", "probe": True, "link_seq": 1, "raw": "$H2\r\n"},
            {"device": "shuffler", "probe": True, "link_seq": 2, "raw": "$M2\r\n"},
        ]
        assert core.last_frames["shuffler"] == (2, b"$M2\r\n")
        # A probe reply that says something new is applied like any frame.
        changed = ModeReported(game="CSP")
        assert core.ingest("shuffler", changed, link_seq=2, raw=b"$M3\r\n", probe=True) > 0
        assert "MODE_MISMATCH" in {a.code for a in core.state.alarms}
        state, frames = core.state, dict(core.last_frames)
    with Journal.open(config.journal_path) as journal:
        again = TableCore(config, journal, version="test")
        assert again.state == state
        assert again.last_frames == frames


def _busy(name: str, body: object, stands_for: int) -> Incoming:
    """A request the gate refused for the rate (daemon.intake), as the link hands it on."""
    return dataclasses.replace(request(name, body), busy=stands_for)


def test_requests_refused_for_the_rate_are_answered_busy_and_counted_not_stored(
    tmp_path: Path,
) -> None:
    # What reaches the core of a flood: one refused request a second to answer busy,
    # standing for the refusals counted before it. The journal keeps the answers and one
    # count a minute, never the requests: their roll ids and operators are not read.
    clock = _Clock()
    config = _craps_config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        desk = RequestDesk(core)
        core.ingest("dice_reader", DiceRolled(roll_id=11, dice=(2, 3)))
        before = journal.last_seq
        body = {"operator": "Mallory", "roll_id": 11, "clause": 3, "request_id": "r-1"}
        assert desk.decide(_busy("void_roll", body, 250)).queued == 1
        [answer] = _responses(core, "void_roll")
        assert (answer["status"], answer["request_id"]) == ("error", "r-1")
        assert answer["error"].startswith("busy: ")
        [report] = _records(core, "busy_requests")
        assert (report["count"], report["total"]) == (250, 250)
        assert journal.last_seq == before + 2  # the count and the answer
        for second in range(1, 50):
            clock.now += timedelta(seconds=1)
            desk.decide(_busy("void_roll", {**body, "request_id": second}, 1000))
            desk.flush_drops()  # the shell's timer: the desk's counts, then the table's tick
            core.tick()
        assert len(_records(core, "busy_requests")) == 1  # not yet a minute
        clock.now += timedelta(seconds=11)
        desk.flush_drops()
        core.tick()
        [_, second_report] = _records(core, "busy_requests")
        assert (second_report["count"], second_report["total"]) == (49_000, 49_250)
        # 50 answers and 2 counts for 49,250 requests; the void was never applied.
        assert len(_responses(core, "void_roll")) == 50
        # Nothing was decided: no decision event, and only each count's first request kept
        # (its first 256 bytes, as for any refused request).
        assert [r for r in journal.records(before, kind="decision") if "event" in r.record] == []
        assert json.dumps([r.record for r in journal.records(before)]).count("Mallory") == 2
        # A name that cannot be answered is counted, not answered.
        assert desk.decide(_busy("Bad Name", body, 3)).queued == 0
        # A payload that is not JSON, or too large, is answered without an id.
        assert desk.decide(_busy("overturn", b"\xff" * 5000, 1)).queued == 1
        assert _responses(core, "overturn")[-1]["request_id"] is None
        # The table still serves a request that is admitted.
        desk.decide(request("void_roll", {"operator": "Ann", "roll_id": 11, "clause": 3}))
        assert _responses(core, "void_roll")[-1]["status"] == "ok"
