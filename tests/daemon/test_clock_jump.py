"""A wall clock that jumps against the steady clock (set by hand, a time server after a
long drift, a failing clock chip): journaled, CLOCK_JUMP raised, cleared an hour later or
by the next clean start (daemon/core.py ``watch_clock``; rules/table.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.journal import Journal

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Clocks:
    """The wall clock and the steady clock, each moved by the test."""

    def __init__(self) -> None:
        self.wall = T0
        self.steady = 1000.0

    def __call__(self) -> datetime:
        return self.wall

    def tick(self, seconds: float = 1.0, *, wall_extra: timedelta = timedelta()) -> None:
        self.steady += seconds
        self.wall += timedelta(seconds=seconds) + wall_extra


def config_for(folder: Path) -> TableConfig:
    return validate_config(
        {
            "table": {"id": "c1", "game": "CRAPS"},
            "dice_reader": {"port": str(folder / "nothing")},
            "journal": {"path": str(folder / "c1.db")},
        }
    )


def alarm(core: TableCore) -> str | None:
    return next((a.message for a in core.state.alarms if a.code == "CLOCK_JUMP"), None)


def jumps(journal: Journal) -> list[int]:
    found = []
    for record in journal.records(kind="daemon"):
        event = record.record.get("event")
        if isinstance(event, dict) and event.get("type") == "ClockJumped":
            found.append(int(event["milliseconds"]))
    return found


def test_jumps_back_and_forward_are_journaled_and_raise_clock_jump(tmp_path: Path) -> None:
    clocks = Clocks()
    with Journal.open(config_for(tmp_path).journal_path) as journal:
        core = TableCore(config_for(tmp_path), journal, version="test", clock=clocks)
        core.start()
        for _ in range(5):  # steady: nothing
            clocks.tick(1, wall_extra=timedelta(milliseconds=300))  # drift is not a jump
            assert core.watch_clock(clocks.steady) == 0
        assert alarm(core) is None
        clocks.tick(1, wall_extra=timedelta(hours=-2))
        assert core.watch_clock(clocks.steady) > 0  # alarms and state published
        message = alarm(core)
        assert message is not None
        assert message.startswith("the controller's clock jumped back by 2 h")
        clocks.tick(1, wall_extra=timedelta(days=1))
        core.watch_clock(clocks.steady)
        assert (alarm(core) or "").startswith("the controller's clock jumped forward by 1 d")
        assert jumps(journal) == [-7_200_000, 86_400_000]
        published = [m for m in journal.pending(10_000) if m.topic == "alarms"]
        assert b"CLOCK_JUMP" in published[-1].payload
        # Cleared an hour (by the clock after the jump) later, by the host's timer.
        clocks.tick(3599)
        core.watch_clock(clocks.steady)
        core.tick()
        assert alarm(core) is not None
        clocks.tick(2)
        core.watch_clock(clocks.steady)
        core.tick()  # also a new gaming day, a day later: the journal rotates
        assert alarm(core) is None
        core.journal.close()


def test_an_unclean_restart_keeps_clock_jump_and_a_clean_one_clears_it(tmp_path: Path) -> None:
    clocks = Clocks()
    config = config_for(tmp_path)
    with Journal.open(config.journal_path) as journal:
        core = TableCore(config, journal, version="test", clock=clocks)
        core.start()
        core.watch_clock(clocks.steady)
        clocks.tick(1, wall_extra=timedelta(minutes=-30))
        core.watch_clock(clocks.steady)
        assert alarm(core) is not None
        # SIGKILL: no close()
    with Journal.open(config.journal_path) as journal:
        again = TableCore(config, journal, version="test", clock=clocks)
        again.start()
        assert alarm(again) is not None  # replayed: still active
        again.close()  # a clean stop
    with Journal.open(config.journal_path) as journal:
        third = TableCore(config, journal, version="test", clock=clocks)
        third.start()
        assert alarm(third) is None  # the clean start clears it
        cleared = [
            r.record["event"]
            for r in journal.records(kind="daemon")
            if isinstance(r.record.get("event"), dict)
        ]
        assert {"type": "CleanStart"} in cleared
