"""One journal segment per gaming day (daemon/segments.py, daemon/core.py), on an
accelerated clock: segments rotate at the configured hour, are sealed and archived
read-only, chain on each other, expire as configured, and a rotation a crash interrupted
is finished at the next start."""

from __future__ import annotations

import asyncio
import os
import stat
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from daemon.app import TableDaemon
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.journal import GENESIS, Journal
from daemon.notify import Notifier
from daemon.segments import (
    archived,
    expired,
    gaming_day,
    next_path,
    open_live,
    read_records,
    segment_paths,
)
from daemon.verify import verify_journal
from rules.events import DiceRolled

# 2026-11-30 05:00 UTC: an hour before the 06:00 boundary.
T0 = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)


class Clock:
    """A clock the test sets."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def config_for(folder: Path, **journal: object) -> TableConfig:
    return validate_config(
        {
            "table": {"id": "t1", "game": "CRAPS"},
            "dice_reader": {"port": str(folder / "nothing")},
            "journal": {"path": str(folder / "t1.db"), "time_zone": "UTC", **journal},
        }
    )


@pytest.fixture
def live(tmp_path: Path) -> Path:
    return tmp_path / "t1.db"


def roll(core: TableCore, n: int) -> None:
    core.ingest("dice_reader", DiceRolled(roll_id=n, dice=(n % 6 + 1, 2)))


def test_gaming_days_begin_at_the_configured_local_hour() -> None:
    six = time(6, 0)
    assert gaming_day(datetime(2026, 11, 30, 5, 59, tzinfo=UTC), six, UTC) == date(2026, 11, 29)
    assert gaming_day(datetime(2026, 11, 30, 6, 0, tzinfo=UTC), six, UTC) == date(2026, 11, 30)
    # Local time: 06:00 in Chicago is 12:00 UTC in winter.
    chicago = ZoneInfo("America/Chicago")
    assert gaming_day(datetime(2026, 11, 30, 11, 59, tzinfo=UTC), six, chicago) == date(
        2026, 11, 29
    )
    assert gaming_day(datetime(2026, 11, 30, 12, 0, tzinfo=UTC), six, chicago) == date(2026, 11, 30)
    # A day across the change of daylight saving still begins at 06:00 local.
    assert gaming_day(datetime(2026, 3, 8, 11, 0, tzinfo=UTC), six, chicago) == date(2026, 3, 8)


def test_segments_rotate_chain_and_stay_read_only(live: Path) -> None:
    clock = Clock()
    config = config_for(live.parent)
    core = TableCore(config, open_live(live), version="test", clock=clock)
    core.start()
    n = 0
    for _day in range(4):  # four gaming days, a few rolls an hour
        for _hour in range(0, 24, 3):
            n += 1
            roll(core, n)
            clock.now += timedelta(hours=3)
            core.tick()
    core.close()
    core.journal.close()

    segments = archived(live)
    # 05:00 on day 0 belongs to the gaming day before; then one rotation a day.
    assert [s.day for s in segments] == [date(2026, 11, 29) + timedelta(days=i) for i in range(4)]
    for segment in segments:
        assert stat.S_IMODE(segment.path.stat().st_mode) == 0o400  # never written again
        assert not segment.path.with_name(segment.path.name + "-wal").exists()
    # Every record once, in seq order, across the segments; each segment begins with its
    # header, chaining on the seal of the one before.
    records = list(read_records(live))
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    previous_hash = GENESIS
    for path in segment_paths(live):
        with Journal.open(path, readonly=True) as journal:
            raw = list(journal.raw_records())
            header = journal.first_record()
            assert header is not None
            assert header.kind == "segment"
            assert header.record.get("prev_hash") == previous_hash.hex()
            if path != live:
                assert raw[-1].kind == "seal"
            if header.record["prev_segment"] is not None:
                # A rotation begins the new day at a snapshot: a start needs no older file.
                assert raw[1].kind == "snapshot"
            previous_hash = raw[-1].hash
    # Every roll is in the record, exactly once.
    rolled = [r.record.get("event") for r in records if r.kind == "device"]
    assert len([e for e in rolled if isinstance(e, dict) and e["type"] == "DiceRolled"]) == n


def test_the_mqtt_outbox_moves_to_the_new_segment(live: Path) -> None:
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    roll(core, 1)
    queued = [m.seq for m in core.outbox.pending(1000)]
    for seq in queued[:3]:
        core.outbox.mark_published(seq)
    clock.now += timedelta(hours=2)  # into the next gaming day
    core.tick()
    # Nothing was published meanwhile: the rest are still pending, in the new segment, and
    # the retained ones already published are still there to republish on a reconnect.
    assert [m.seq for m in core.outbox.pending(1000)] == queued[3:]
    retained = {m.seq for m in core.outbox.retained()}
    assert retained == {m.seq for m in core.journal.retained()}
    assert retained <= set(queued[:3])
    assert core.journal.first_record() is not None
    core.journal.close()


def test_a_clock_set_back_does_not_reopen_a_closed_day(live: Path) -> None:
    clock = Clock(T0 + timedelta(days=1, hours=2))
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    roll(core, 1)
    clock.now -= timedelta(days=1)  # back into an earlier gaming day
    core.tick()
    roll(core, 2)
    assert archived(live) == []
    core.journal.close()


@pytest.mark.parametrize("stage", ["sealed", "next written", "archived"])
def test_a_rotation_cut_short_is_finished_at_the_next_start(live: Path, stage: str) -> None:
    clock = Clock()
    config = config_for(live.parent)
    core = TableCore(config, open_live(live), version="test", clock=clock)
    core.start()
    roll(core, 1)
    state = core.state
    if stage == "sealed":
        core.journal.seal({"gaming_day": "2026-11-29"}, ts=clock.now)
        core.journal.close()
    else:
        clock.now += timedelta(hours=2)
        core.tick()
        core.journal.close()
        # Undo the last steps of the rotation, as a crash between them would leave it.
        [segment] = archived(live)
        os.chmod(segment.path, 0o600)
        if stage == "next written":
            os.replace(live, next_path(live))
            os.replace(segment.path, live)
        else:
            os.replace(live, next_path(live))
    clock.now = T0 + timedelta(hours=3)
    again = TableCore(config, open_live(live), version="test", clock=clock)
    again.start()
    assert not next_path(live).exists()
    [segment] = archived(live)
    assert segment.day == date(2026, 11, 29)
    assert again.state.craps == state.craps
    roll(again, 2)
    records = list(read_records(live))
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    again.journal.close()


def test_a_live_segment_lost_with_an_archive_beside_it_refuses_to_start(live: Path) -> None:
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    clock.now += timedelta(hours=2)
    core.tick()
    core.journal.close()
    live.unlink()
    with pytest.raises(OSError, match=r"missing but .* holds closed segments"):
        open_live(live)


def make_segments(live: Path, days: int, clock: Clock) -> TableCore:
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    for n in range(days):
        roll(core, n + 1)
        clock.now += timedelta(days=1)
        core.tick()
    return core


def test_retention_by_days_and_bytes_never_removes_a_young_segment(live: Path) -> None:
    clock = Clock()
    core = make_segments(live, 6, clock)
    core.journal.close()
    today = date(2026, 12, 5)
    segments = archived(live)
    assert len(segments) == 6
    by_days = expired(live, today=today, retention_days=3, retention_bytes=None)
    assert [s.day for s in by_days] == [date(2026, 11, 29), date(2026, 11, 30), date(2026, 12, 1)]
    # A byte cap only takes old segments, oldest first, until the archive fits.
    total = sum(s.size for s in segments)
    capped = expired(live, today=today, retention_days=3, retention_bytes=total - 1)
    assert [s.day for s in capped] == [date(2026, 11, 29)]
    assert expired(live, today=today, retention_days=30, retention_bytes=1) == []


def test_expired_segments_go_to_the_archive_command_then_away(tmp_path: Path) -> None:
    live = tmp_path / "journal" / "t1.db"
    live.parent.mkdir()
    copies = tmp_path / "offsite"
    copies.mkdir()
    command = tmp_path / "copy-off.sh"
    command.write_text(f'#!/bin/sh\ncp "$1" {copies}/ && echo "$1" >> {copies}/log\n')
    command.chmod(0o700)
    config = config_for(live.parent, retention_days=2, archive_command=str(command))
    clock = Clock()
    core = TableCore(config, open_live(live), version="test", clock=clock)
    core.start()
    daemon = TableDaemon(config, notifier=Notifier(None), clock=clock)
    removed = []
    for n in range(6):
        roll(core, n + 1)
        clock.now += timedelta(days=1)
        core.tick()
        for segment in core.take_expired():
            asyncio.run(daemon._remove_segment(core, segment))
            removed.append(segment.path.name)
    kept = [s.path.name for s in archived(live)]
    # Gaming day 2026-12-05 now: 11-29 to 12-02 are more than 2 days old; 12-03 and 12-04
    # stay (never a segment within the retention).
    assert len(removed) == 4
    assert len(kept) == 2
    assert sorted(p.name for p in copies.glob("*.db")) == sorted(removed)
    assert not set(kept) & set(removed)
    assert all((date(2026, 12, 5) - s.day).days <= 2 for s in archived(live))
    journaled = [r.record.get("segment_removed") for r in read_records(live, kind="daemon")]
    # Each removal is journaled (in the live segment of its day: a removal record leaves with
    # that segment when it expires in turn).
    files = [j["file"] for j in journaled if isinstance(j, dict)]
    assert files
    assert files == removed[-len(files) :]
    # A failing command keeps the segment (and says so) for the next rotation.
    command.write_text("#!/bin/sh\nexit 3\n")
    before = archived(live)
    clock.now += timedelta(days=1)
    core.tick()
    for segment in core.take_expired():
        asyncio.run(daemon._remove_segment(core, segment))
    assert {s.path for s in before} <= {s.path for s in archived(live)}
    core.journal.close()


def test_one_writer_across_rotations(live: Path) -> None:
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    clock.now += timedelta(hours=2)
    core.tick()
    with pytest.raises(OSError, match="in use by another process"):
        open_live(live)
    core.journal.close()
    open_live(live).close()


@pytest.fixture(autouse=True)
def _utc_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def test_a_cut_rotation_finished_under_new_settings_still_verifies(live: Path) -> None:
    # The rotation's snapshot is the table the sealed segment leaves; the new pay table
    # applies from the start record after it (what a replay of the journal does too).
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    roll(core, 1)
    core.journal.seal({"gaming_day": "2026-11-29"}, ts=clock.now)
    core.journal.close()
    clock.now = T0 + timedelta(hours=3)
    data = {
        "table": {"id": "t1", "game": "CRAPS"},
        "dice_reader": {"port": str(live.parent / "nothing")},
        "journal": {"path": str(live), "time_zone": "UTC"},
        "bonus_craps": {"paytable": 2},
    }
    again = TableCore(validate_config(data), open_live(live), version="test", clock=clock)
    again.start()
    assert again.state.craps is not None
    assert again.state.craps.paytable == 2
    again.close()
    again.journal.close()
    report = verify_journal(live)
    assert report.intact, report.summary()
