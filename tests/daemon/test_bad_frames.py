"""What a flood of bad frames, or of device fault codes, costs the running table: an alarm,
and a bounded share of the journal, the log and the broker; the journal still replays to
the same table (the core in process, with a clock the test moves; the real daemon on a pty
is in tests/integration/test_link_errors.py)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.bad_frames import MAX_REASONS, OTHER_REASONS, BadFrameBudget
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.journal import Journal
from daemon.logs import configure_logging
from deploy import broker_config
from rules.events import DeviceConnected, DeviceStatus, DiceRolled

T0 = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)
RAW = b"$ROLL,7,5001,6,5*0000\r\n"  # a bad CRC


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _config(tmp_path: Path) -> TableConfig:
    return validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "c1.db")},
        }
    )


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    configure_logging(fmt="json", level="info", stream=stream)
    yield stream
    configure_logging(fmt="json", level="info")


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _alarms(journal: Journal) -> list[dict[str, Any]]:
    """Every ``alarms`` payload queued, in order."""
    return [json.loads(m.payload) for m in journal.pending(100_000) if m.topic == "alarms"]


def _records(journal: Journal) -> list[dict[str, Any]]:
    return [r.record for r in journal.records()]


# --- the budget alone ------------------------------------------------------------------


def test_the_first_twenty_of_an_interval_are_kept_in_full_the_rest_counted_by_reason() -> None:
    budget = BadFrameBudget(full=20, interval=timedelta(seconds=60))
    decisions = [budget.admit("shuffler", f"reason {i % 12}", 10, T0) for i in range(50)]
    assert [full for full, _ in decisions] == [True] * 20 + [False] * 30
    assert all(report is None for _, report in decisions)
    assert budget.due(T0 + timedelta(seconds=59)) == []
    [report] = budget.due(T0 + timedelta(seconds=60))
    assert report["device"] == "shuffler"
    assert (report["count"], report["bytes"], report["kept_in_full"]) == (30, 300, 20)
    reasons = report["reasons"]
    assert isinstance(reasons, dict)
    assert len(reasons) == MAX_REASONS + 1  # by name, then the others together
    assert sum(reasons.values()) == 30
    assert OTHER_REASONS in reasons
    # A new interval: 20 in full again; its first frame reports nothing (nothing counted).
    assert budget.admit("shuffler", "x", 1, T0 + timedelta(seconds=61)) == (True, None)


def test_a_frame_after_the_interval_brings_the_report_of_the_last() -> None:
    budget = BadFrameBudget(full=1, interval=timedelta(seconds=10))
    budget.admit("dice_reader", "bad CRC", 20, T0)
    budget.admit("dice_reader", "bad CRC", 20, T0 + timedelta(seconds=1))
    full, report = budget.admit("dice_reader", "bad CRC", 20, T0 + timedelta(seconds=11))
    assert full
    assert report is not None
    assert (report["count"], report["reasons"]) == (1, {"bad CRC": 1})
    # A clock stepped back ends the interval too, rather than hold it for hours.
    budget.admit("dice_reader", "bad CRC", 20, T0 + timedelta(seconds=12))
    assert budget.due(T0 - timedelta(hours=2)) != []


# --- the core ----------------------------------------------------------------------------


def test_a_flood_of_bad_frames_raises_link_errors_and_costs_a_bounded_journal_and_log(
    tmp_path: Path, log: io.StringIO
) -> None:
    clock = Clock()
    config = _config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        core.ingest("dice_reader", DeviceConnected(device="dice_reader"))
        before = journal.last_seq
        queued = 0
        for _ in range(3000):  # 100 a second for 30 s
            queued += core.bad_frame("dice_reader", RAW, "bad CRC: the CRC does not match")
            clock.advance(0.01)
            if clock.now.microsecond < 10_000:
                core.tick()  # the shell's timer, every second
        assert queued > 0  # the alarm went out
        [raised] = [a for a in _alarms(journal)[-1]["alarms"] if a["code"] == "LINK_ERRORS"]
        assert raised["device"] == "dice_reader"
        assert raised["stops_payouts"] is False
        records = _records(journal)[before:]
        full = [r for r in records if "bad_frame" in r]
        facts = [r for r in records if r.get("event", {}).get("type") == "BadFrameSeen"]
        assert len(full) == 20  # the first 20 of the interval, with their bytes
        assert full[0]["bad_frame"] == {
            "device": "dice_reader",
            "raw": RAW.hex(),
            "reason": "bad CRC: the CRC does not match",
        }
        # Facts for the replay: the 21 that raised the alarm, then at most one a second.
        assert len(facts) <= 21 + 31
        assert journal.last_seq - before < 100  # for 3000 bad frames
        warnings = [line for line in _lines(log) if line["level"] == "warning"]
        assert [w["event"] for w in warnings].count("bad frame") == 20
        assert len(warnings) <= 20 + 1  # and the alarm

        # Quiet: the interval's counts are reported once; the alarm clears after 60 s.
        for _ in range(65):
            clock.advance(1)
            core.tick()
        [report] = [r["bad_frames"] for r in _records(journal) if "bad_frames" in r]
        assert (report["count"], report["kept_in_full"]) == (2980, 20)
        assert report["reasons"] == {"bad CRC: the CRC does not match": 2980}
        assert [a["code"] for a in _alarms(journal)[-1]["alarms"]] == []
        timer = [r for r in _records(journal) if r.get("event", {}).get("type") == "TimePassed"]
        assert len(timer) == 1  # journaled once: when it cleared the alarm
        idle = journal.last_seq
        for _ in range(100):
            clock.advance(1)
            assert core.tick() == 0
        assert journal.last_seq == idle  # an idle timer writes nothing
        state = core.state
    # The journal replays to the same table: LINK_ERRORS raised and cleared at the same times.
    with Journal.open(config.journal_path) as journal:
        assert TableCore(config, journal, version="test", clock=clock).state == state


def test_replay_in_the_middle_of_a_flood_keeps_the_alarm_and_its_time(tmp_path: Path) -> None:
    clock = Clock()
    config = _config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        for _ in range(500):
            core.bad_frame("dice_reader", RAW, "bad CRC")
            clock.advance(0.013)
        state = core.state
    with Journal.open(config.journal_path) as journal:
        again = TableCore(config, journal, version="test", clock=clock)
        assert again.state == state
        # The alarm clears when it would have: the time of the latest bad frame survived.
        clock.advance(60 - 0.013)
        again.tick()
        assert any(a.code == "LINK_ERRORS" for a in again.state.alarms)
        clock.advance(1.5)
        again.tick()
        assert not any(a.code == "LINK_ERRORS" for a in again.state.alarms)


def test_good_frames_still_count_during_a_flood(tmp_path: Path) -> None:
    clock = Clock()
    config = _config(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        for i in range(100):
            core.bad_frame("dice_reader", RAW, "bad CRC")
            if i % 10 == 0:
                core.ingest("dice_reader", DiceRolled(roll_id=i + 1, dice=(2, 3)))
        rolls = [json.loads(m.payload) for m in journal.pending(10_000) if m.topic == "craps/roll"]
        assert [r["roll_id"] for r in rolls] == list(range(1, 101, 10))


def test_noise_without_a_good_frame_raises_link_errors_kept_as_a_bad_frame_is(
    tmp_path: Path, log: io.StringIO
) -> None:
    # A dice reader at another baud rate than the port: its frames arrive as noise.
    clock = Clock()
    config = _config(tmp_path)
    noise = bytes(range(0x80, 0x80 + 40))
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        core.ingest("dice_reader", DeviceConnected(device="dice_reader"))
        before = journal.last_seq
        for _ in range(5):
            assert core.noise("dice_reader", noise, 40) == 0
            clock.advance(0.5)
        assert not any(a.code == "LINK_ERRORS" for a in core.state.alarms)
        assert core.noise("dice_reader", noise[:7], 700) > 0  # the sixth: the alarm goes out
        [raised] = [a for a in _alarms(journal)[-1]["alarms"] if a["code"] == "LINK_ERRORS"]
        assert raised["device"] == "dice_reader"
        assert "bytes outside any frame (noise)" in raised["message"]
        records = _records(journal)[before:]
        kept = [r["bad_frame"] for r in records if "bad_frame" in r]
        assert kept[0] == {
            "device": "dice_reader",
            "raw": noise.hex(),
            "reason": "40 bytes outside any frame (noise)",
        }
        assert kept[-1]["reason"] == "700 bytes outside any frame (noise)"
        facts = [r["event"] for r in records if "event" in r]
        assert facts[:6] == [{"type": "NoiseSeen", "device": "dice_reader"}] * 6
        warnings = [line for line in _lines(log) if line["level"] == "warning"]
        assert [w["event"] for w in warnings].count("noise") == 6
        assert all(noise.hex() not in json.dumps(w) for w in warnings)  # bytes never logged
        state = core.state
    with Journal.open(config.journal_path) as journal:
        assert TableCore(config, journal, version="test", clock=clock).state == state


# --- device fault codes ------------------------------------------------------------------


@pytest.mark.heavy
def test_four_hundred_fault_codes_keep_every_payload_under_the_bound_the_broker_is_sized_for(
    tmp_path: Path,
) -> None:
    # link-layer.md: a BODY is at most 240 bytes, "STATUS,9999,<code>,<text>" leaves 227 for
    # code and text; text may hold '"' and '\\', which JSON doubles. Codes as long as the
    # rules keep them, and every text longer than they keep, all escaped.
    clock = Clock()
    config = validate_config(
        {
            "table": {"id": "t" * 64, "game": "UTH"},
            "shuffler": {"port": str(tmp_path / "nothing")},
            "journal": {"path": str(tmp_path / "u.db")},
        }
    )
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        size_before = sum(len(m.payload) for m in journal.pending(100_000))
        for i in range(400):
            code = f"{'F' * 60}{i:04d}".replace("0", "Z").translate(
                str.maketrans("123456789", "ABCDEFGHI")
            )
            text = '"\\' * 81  # 162 characters, each escaped
            assert len(f"STATUS,9999,{code},{text}") <= 240
            core.ingest("shuffler", DeviceStatus(device="shuffler", code=code, text=text))
            clock.advance(1)
        messages = journal.pending(100_000)
        state_sizes = [len(m.payload) for m in messages if m.topic in ("state", "alarms")]
        assert max(state_sizes) <= broker_config.LARGEST_PAYLOAD
        # Republished only while something changed: 32 codes, then 32 counted; then nothing.
        assert len(state_sizes) <= 2 * (32 + 32) + 2
        last = json.loads([m for m in messages if m.topic == "alarms"][-1].payload)
        codes = [a["code"] for a in last["alarms"] if a["code"].startswith("DEVICE_FAULT_")]
        assert len(codes) == 33
        assert codes[-1] == "DEVICE_FAULT_OTHER"
        assert not any(a["stops_payouts"] for a in last["alarms"] if a["code"] in codes)
        # What it costs the broker (and the journal's outbox), all 400 frames together.
        assert sum(len(m.payload) for m in messages) - size_before < 2_500_000  # main: 95 MB
