"""Snapshots are the table (daemon/replay.py, daemon/core.py): for any history, restoring
any snapshot and replaying what follows equals replaying everything from the first record;
a start replays only what follows the latest snapshot."""

from __future__ import annotations

import io
import itertools
import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.clock import format_ts
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.desk import RequestDesk
from daemon.errors import JournalError
from daemon.journal import Journal
from daemon.logs import configure_logging
from daemon.publications import state_publications
from daemon.replay import Replay, Settings
from daemon.requests import Incoming
from rules.events import Device, DeviceFact, DiceRolled, NoRoll, RollCheck
from tests import strategies as s
from tests.helpers.journal import refuse
from tests.helpers.table_facts import TABLE_FACTS

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves: one second per reading unless told otherwise."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


def config_for(folder: Path, game: str, **journal: Any) -> TableConfig:
    device = "dice_reader" if game == "CRAPS" else "shuffler"
    return validate_config(
        {
            "table": {"id": "t1", "game": game},
            device: {"port": str(folder / "nothing")},
            "journal": {"path": str(folder / "t1.db"), "time_zone": "UTC", **journal},
        }
    )


def _requests() -> st.SearchStrategy[Incoming]:
    # Every request of the contract (tests/strategies.py), on the roll ids the facts use.
    bodies = s.request_bodies(roll_id=st.integers(1, 5))
    return bodies.map(lambda nb: Incoming.receive(nb[0], json.dumps(nb[1]).encode()))


EVENTS = st.lists(st.one_of(TABLE_FACTS, TABLE_FACTS, _requests()), max_size=40)


def play(core: TableCore, events: list[DeviceFact | Incoming]) -> None:
    desk = RequestDesk(core)
    for event in events:
        if isinstance(event, Incoming):
            desk.decide(event)
        else:
            device: Device = getattr(
                event,
                "device",
                "dice_reader" if isinstance(event, DiceRolled | NoRoll | RollCheck) else "shuffler",
            )
            core.ingest(device, event)


def replay(journal: Journal, settings_: Settings, *, until: int | None = None) -> Replay:
    """A replay of every record of the journal (before ``until``), from the first."""
    rebuilt = Replay(settings_)
    for record in journal.records():
        if until is not None and record.seq >= until:
            break
        rebuilt.apply(record)
    return rebuilt


@pytest.fixture
def folder() -> Iterator[Path]:
    # Hypothesis runs many examples in one test: each needs a journal of its own.
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.mark.heavy
@pytest.mark.parametrize("game", ["UTH", "BJ", "CRAPS"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS, every=st.integers(1, 12), data=st.data())
def test_any_snapshot_then_the_rest_equals_a_full_replay(
    game: str, events: list[DeviceFact | Incoming], every: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as name:
        config = config_for(Path(name), game, snapshot_every=every)
        with Journal.open(config.journal_path) as journal:
            core = TableCore(config, journal, version="test", clock=Clock())
            core.start()
            play(core, events)
            core.close()
            final = json.dumps(core.snapshot(), sort_keys=True)
            full = replay(journal, core.settings)
            full.finish(core.settings, T0)
            assert json.dumps(full.snapshot(), sort_keys=True) == final
            snapshots = list(journal.records(kind="snapshot"))
            assert snapshots  # at least the one of the clean stop
            # Every snapshot is the replay of everything before it...
            for snap in snapshots:
                before = replay(journal, core.settings, until=snap.seq)
                assert json.dumps(before.snapshot(), sort_keys=True) == json.dumps(
                    snap.record, sort_keys=True
                ), f"snapshot {snap.seq}"
            # ...and restoring one, then replaying what follows, is the whole table.
            snap = data.draw(st.sampled_from(snapshots))
            restored = Replay.restore(snap.record)
            for record in journal.records(snap.seq):
                restored.apply(record)
            restored.finish(core.settings, T0)
            assert json.dumps(restored.snapshot(), sort_keys=True) == final
            state = core.state
            frames = dict(core.last_frames)
        # A start begins at the latest snapshot: the same table, nothing replayed after it.
        with Journal.open(config.journal_path) as journal:
            again = TableCore(config, journal, version="test", clock=Clock())
            assert again.state == state
            assert again.last_frames == frames
            assert again.replayed == 0


def test_a_commit_the_journal_refuses_leaves_the_table_s_memory_as_it_was(folder: Path) -> None:
    # A full disk refuses a frame's transaction (SQLite's own refusal, as in test_journal):
    # the table, its last frames, the bodies last published and the snapshot taken in it are
    # what they were, and nothing it logged comes out. Handled again once the journal works,
    # the frame leaves the table exactly as a replay of the journal rebuilds it.
    config = config_for(folder, "CRAPS", snapshot_every=1)
    stream = io.StringIO()
    configure_logging(fmt="json", level="info", stream=stream)
    try:
        with Journal.open(config.journal_path) as journal:
            core = TableCore(config, journal, version="test", clock=Clock())
            core.start()
            core.ingest("dice_reader", DiceRolled(roll_id=1, dice=(2, 3)), link_seq=1, raw=b"a")
            state, frames, body = core.state, dict(core.last_frames), core.snapshot()
            snapshot_seq, last_seq = core.upkeep.snapshot_seq, journal.last_seq
            lines = len(stream.getvalue().splitlines())
            refuse(journal, "COMMIT")
            frame = DiceRolled(roll_id=2, dice=(6, 6))
            with pytest.raises(JournalError, match="commit failed"):
                core.ingest("dice_reader", frame, link_seq=2, raw=b"b")
            assert core.state is state
            assert core.last_frames == frames
            assert core.snapshot() == body
            assert (core.upkeep.snapshot_seq, journal.last_seq) == (snapshot_seq, last_seq)
            assert len(stream.getvalue().splitlines()) == lines  # nothing said of roll 2
            journal.reconnect()  # as the shell does (daemon.app): a fresh connection
            assert core.ingest("dice_reader", frame, link_seq=2, raw=b"b") > 0
            assert core.last_frames["dice_reader"] == (2, b"b")
            assert core.upkeep.snapshot_seq == journal.last_seq  # snapshot_every=1
            full = replay(journal, core.settings)
            full.finish(core.settings, T0)
            assert json.dumps(full.snapshot(), sort_keys=True) == json.dumps(
                core.snapshot(), sort_keys=True
            )
    finally:
        configure_logging(fmt="json", level="info")
    rolls = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["roll"] for r in rolls if r["event"] == "device event"] == [1, 2]


@pytest.mark.heavy
def test_a_start_replays_only_what_follows_the_latest_snapshot(folder: Path) -> None:
    config = config_for(folder, "CRAPS", snapshot_every=50)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=Clock())
        core.start()
        for roll in range(1, 1001):
            core.ingest("dice_reader", DiceRolled(roll_id=roll, dice=(roll % 6 + 1, 3)))
        # no clean stop: a SIGKILL
        last = journal.last_seq
        snapshots = [r.seq for r in journal.records(kind="snapshot")]
    assert len(snapshots) >= 1000 * 3 // 50 - 5  # about every 50 records
    assert all(b - a <= 50 + 10 for a, b in itertools.pairwise(snapshots))
    with Journal.open(config.journal_path) as journal:
        again = TableCore(config, journal, version="test", clock=Clock())
        assert 0 < again.replayed <= 50
        assert again.state == core.state
        assert journal.last_seq == last


def test_a_snapshot_is_written_after_its_interval_even_with_few_records(folder: Path) -> None:
    clock = Clock(step=timedelta(minutes=4))
    config = config_for(folder, "CRAPS", snapshot_every=1000, snapshot_interval=600)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clock)
        core.start()
        for roll in range(1, 6):
            core.ingest("dice_reader", DiceRolled(roll_id=roll, dice=(2, 3)))
        times = [r.ts for r in journal.records(kind="snapshot")]
    # One every 600 s of the clock at most while records are written (4 min a reading).
    assert len(times) >= 2
    assert all(b - a <= timedelta(minutes=13) for a, b in itertools.pairwise(times))


def test_changed_pay_table_settings_apply_from_the_start_that_brought_them(
    folder: Path,
) -> None:
    config = config_for(folder, "CRAPS")
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=Clock())
        core.start()
        core.ingest("dice_reader", DiceRolled(roll_id=1, dice=(2, 2)))
        core.close()
    data: dict[str, Any] = {
        "table": {"id": "t1", "game": "CRAPS"},
        "dice_reader": {"port": str(folder / "nothing")},
        "journal": {"path": str(folder / "t1.db"), "time_zone": "UTC"},
        "bonus_craps": {"paytable": 2},
    }
    with Journal.open(config.journal_path) as journal:
        again = TableCore(validate_config(data), journal, version="test", clock=Clock())
        again.start()
        assert again.state.craps is not None
        assert again.state.craps.paytable == 2
        # The lammers of the series survive the change: 4 was hit before it.
        assert 4 in again.state.craps.counted[-1].hit
        full = replay(journal, again.settings)
        assert full.state is not None
        assert full.state.craps is not None
        assert full.state.craps.paytable == 2


def _last_board(journal: Journal) -> dict[str, Any]:
    """The body of the last ``craps/board`` the table published (``seq``, ``ts`` aside)."""
    boards = [
        r.record for r in journal.records(kind="publish") if r.record["topic"] == "craps/board"
    ]
    payload = boards[-1]["payload"]
    assert isinstance(payload, dict)
    return {k: v for k, v in payload.items() if k not in ("seq", "prev_seq", "ts")}


def _arrivals(journal: Journal) -> dict[int, str]:
    """The journaled time of each roll event, by roll id, as ``ts`` is written."""
    times = {}
    for record in journal.records(kind="device"):
        event = record.record.get("event")
        if isinstance(event, dict) and event.get("type") in ("DiceRolled", "RollCheck"):
            times[int(event["roll_id"])] = format_ts(record.ts)
    return times


@pytest.mark.parametrize("every", [1, 1000], ids=["from-a-snapshot", "from-the-records"])
def test_a_restart_rebuilds_the_series_and_since_when_the_check_waits(
    folder: Path, every: int
) -> None:
    # issue 22: craps/board pending_roll.since is the journaled time the CHECK arrived, and
    # the series' times are the rolls' own: a start rebuilds both exactly, long after.
    config = config_for(folder, "CRAPS", snapshot_every=every)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=Clock(step=timedelta(seconds=7)))
        core.start()
        core.ingest("dice_reader", DiceRolled(roll_id=1, dice=(2, 2)))
        core.ingest("dice_reader", DiceRolled(roll_id=2, dice=(5, 6)))
        core.ingest("dice_reader", RollCheck(roll_id=3, dice=(3, 3), reason="BOWL"))
        core.ingest("dice_reader", DiceRolled(roll_id=4, dice=(1, 1)))
        # no clean stop: a SIGKILL
        arrived = _arrivals(journal)
        before = _last_board(journal)
        assert before["pending_roll"]["roll_id"] == 3
        assert before["pending_roll"]["since"] == arrived[3]
        assert [(r["roll_id"], r["at"]) for r in before["series"]] == [
            (1, arrived[1]),
            (2, arrived[2]),
        ]
        assert len(set(arrived.values())) == 4  # four times: a mix-up would show
    later = Clock(start=T0 + timedelta(days=1))
    with Journal.open(config.journal_path) as journal:
        again = TableCore(config, journal, version="test", clock=later)
        assert again.state == core.state
        rebuilt = state_publications(again.state, table="t1")
        board = next(p.body for p in rebuilt if p.topic == "craps/board")
        assert board == before
        # The CHECK decided after the restart: it and the roll behind it count with the
        # times they arrived, not the time of the decision.
        again.start()
        RequestDesk(again).decide(
            Incoming.receive(
                "roll_decision",
                json.dumps({"operator": "stick-1", "roll_id": 3, "decision": "valid"}).encode(),
            )
        )
        after = _last_board(journal)
        assert after["pending_roll"] is None
        assert [(r["roll_id"], r["at"]) for r in after["series"]] == sorted(arrived.items())
