"""One journal segment per gaming day (daemon/segments.py, daemon/core.py), on an
accelerated clock: segments rotate at the configured hour, are sealed and archived
read-only, chain on each other, expire as configured, and a rotation a crash interrupted
is finished at the next start."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from daemon.app import TableDaemon
from daemon.config import TableConfig, validate_config
from daemon.core import TableCore
from daemon.errors import JournalFileError
from daemon.journal import GENESIS, Journal
from daemon.notify import Notifier
from daemon.segments import (
    archive,
    archive_dir,
    archived,
    expired,
    gaming_day,
    install,
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
    outbox = core.journal  # what the MQTT link holds (daemon.app)
    queued = [m.seq for m in outbox.pending(1000)]
    for seq in queued[:3]:
        outbox.mark_published(seq)
    clock.now += timedelta(hours=2)  # into the next gaming day
    core.tick()
    # Nothing was published meanwhile: the rest are still pending, in the new segment, and
    # the retained ones already published are still there to republish on a reconnect.
    assert core.journal is outbox  # the live segment's Journal goes on in the new file
    header = outbox.first_record()
    assert header is not None
    assert (header.kind, header.record["gaming_day"]) == ("segment", "2026-11-30")
    assert [m.seq for m in outbox.pending(1000)] == queued[3:]
    retained = {m.seq for m in outbox.retained()}
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
        for segment in core.upkeep.take_expired():
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
    for segment in core.upkeep.take_expired():
        asyncio.run(daemon._remove_segment(core, segment))
    assert {s.path for s in before} <= {s.path for s in archived(live)}
    core.journal.close()


def test_a_rotation_a_device_frame_brings_about_also_finds_the_expired_segments(
    tmp_path: Path,
) -> None:
    # The first event of a gaming day may be a frame rather than the timer: whichever
    # rotates the journal, the segments past the retention are found for the shell.
    live = tmp_path / "journal" / "t1.db"
    live.parent.mkdir()
    clock = Clock()
    core = TableCore(
        config_for(live.parent, retention_days=1), open_live(live), version="test", clock=clock
    )
    core.start()
    for n in range(4):
        clock.now += timedelta(days=1)
        roll(core, n + 1)  # before any tick of the new day
    # Gaming day 2026-12-03 now: 11-29, 11-30 and 12-01 are more than a day old; 12-02 is not.
    found = core.upkeep.take_expired()
    assert [s.day for s in found] == [date(2026, 11, 29), date(2026, 11, 30), date(2026, 12, 1)]
    assert core.upkeep.take_expired() == []  # taken once
    core.journal.close()


def rotated(live: Path) -> TableCore:
    """A table started at ``T0`` whose clock then moves two hours on, past the gaming
    day's boundary: its first segment sealed into the archive, a new live one written."""
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    clock.now += timedelta(hours=2)
    core.tick()
    return core


def test_one_writer_across_rotations(live: Path) -> None:
    core = rotated(live)
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


def test_a_gaming_day_may_begin_at_half_past() -> None:
    half_past_six = time(6, 30)
    assert gaming_day(datetime(2026, 11, 30, 6, 29, tzinfo=UTC), half_past_six, UTC) == date(
        2026, 11, 29
    )
    assert gaming_day(datetime(2026, 11, 30, 6, 30, tzinfo=UTC), half_past_six, UTC) == date(
        2026, 11, 30
    )


def test_the_archive_lists_this_tables_segments_among_anything_else_kept_there(
    tmp_path: Path,
) -> None:
    live = tmp_path / "t1.db"
    folder = archive_dir(live)
    folder.mkdir()
    days = [date(2026, 11, 26) + timedelta(days=i) for i in range(4)]
    mine = [folder / f"t1-{100 * i + 1:012d}-{day.isoformat()}.db" for i, day in enumerate(days)]
    # Another table's journal beside this one, WALs moved with their segments, a note.
    others = [folder / f"t2-{100 * i + 1:012d}-{day.isoformat()}.db" for i, day in enumerate(days)]
    others += [p.with_name(p.name + side) for p in mine for side in ("-wal", "-shm")]
    others += [folder / "README.txt", folder / "t1-1-2026-11-26.db"]
    for path in [*others, *mine]:
        path.write_bytes(b"")
    assert [(s.path, s.first_seq, s.day) for s in archived(live)] == [
        (path, 100 * i + 1, day) for i, (path, day) in enumerate(zip(mine, days, strict=True))
    ]


def test_the_next_segment_is_written_beside_the_live_one_as_path_dot_next(live: Path) -> None:
    assert next_path(live) == live.parent / "t1.db.next"


def test_a_table_with_an_hmac_key_writes_its_live_segment_with_it(live: Path) -> None:
    key = b"k" * 32
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live, key=key), version="test", clock=clock)
    core.start()
    roll(core, 1)
    core.close()
    core.journal.close()
    report = verify_journal(live, key=key)
    assert report.hmac
    assert report.intact, report.summary()
    assert not verify_journal(live).intact  # not plain SHA-256: the key was used


def test_a_live_segment_lost_with_an_archive_beside_it_refuses_to_start(live: Path) -> None:
    # The refusal names both paths; a JournalFileError is an OSError.
    core = rotated(live)
    core.journal.close()
    live.unlink()
    with pytest.raises(JournalFileError) as refused:
        open_live(live)
    assert str(refused.value) == (
        f"journal {live} is missing but {live.parent / 'archive'} holds closed segments: "
        "restore the live file (a new one would number records from 1 again)"
    )
    assert refused.value.path == live


def test_reading_a_journal_that_is_not_there_names_its_path(live: Path) -> None:
    with pytest.raises(JournalFileError) as refused:
        list(read_records(live))
    assert str(refused.value) == f"cannot read journal {live}: no such file"
    assert refused.value.path == live


def leftovers(live: Path) -> list[str]:
    """Files of the next segment (or their locks) left beside the live one."""
    return sorted(p.name for p in live.parent.iterdir() if p.name.startswith(live.name + ".next"))


def sealed_journal(live: Path) -> list[tuple[int, str]]:
    """A live segment sealed by a rotation that went no further; its records."""
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=Clock())
    core.start()
    roll(core, 1)
    core.journal.seal({"gaming_day": "2026-11-29"}, ts=T0)
    core.journal.close()
    return [(r.seq, r.kind) for r in read_records(live)]


def test_a_next_segment_cut_short_at_its_creation_is_removed_with_its_side_files(
    live: Path,
) -> None:
    before = sealed_journal(live)
    for suffix in ("", "-wal", "-shm"):  # created, nothing written yet
        live.with_name(live.name + ".next" + suffix).write_bytes(b"")
    open_live(live).close()
    assert leftovers(live) == []
    assert [(r.seq, r.kind) for r in read_records(live)] == before
    assert archived(live) == []


def test_a_next_file_that_no_rotation_wrote_is_never_installed(live: Path) -> None:
    # Its first record is no segment header, though it holds a snapshot: not a rotation's.
    before = sealed_journal(live)
    stray = Journal.open_locked(next_path(live), None)
    stray.append("snapshot", {"table": "somewhere else"}, ts=T0)
    stray.close()
    open_live(live).close()
    assert leftovers(live) == []
    assert [(r.seq, r.kind) for r in read_records(live)] == before
    assert archived(live) == []


def test_open_live_finishes_a_rotation_whose_next_segment_was_written(live: Path) -> None:
    clock = Clock()
    core = TableCore(config_for(live.parent), open_live(live), version="test", clock=clock)
    core.start()
    roll(core, 1)
    clock.now += timedelta(hours=2)
    core.tick()
    core.journal.close()
    [segment] = archived(live)
    records = [(r.seq, r.kind) for r in read_records(live)]
    # A crash before the last two renames: the sealed segment live, the next one beside it.
    os.chmod(segment.path, 0o600)
    os.replace(live, next_path(live))
    os.replace(segment.path, live)
    open_live(live).close()  # no daemon here to start the rotation again
    assert leftovers(live) == []
    assert archived(live) == [segment]  # under its own name: first seq and gaming day
    with Journal.open(live, readonly=True) as journal:
        header = journal.first_record()
        assert header is not None
        assert header.kind == "segment"
        assert header.record["prev_segment"] == segment.path.name
    assert [(r.seq, r.kind) for r in read_records(live)] == records


def sqlite_in_wal(folder: Path) -> tuple[bytes, bytes, bytes]:
    """A database whose committed rows are still in its WAL: its file, WAL and index."""
    folder.mkdir()
    source = folder / "source.db"
    conn = sqlite3.connect(source, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1), (2), (3)")
        files = tuple(source.with_name(source.name + s).read_bytes() for s in ("", "-wal", "-shm"))
    finally:
        conn.close()
    assert files[1]
    return files[0], files[1], files[2]


def names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_a_segment_archived_with_a_wal_not_yet_emptied_takes_it_along(tmp_path: Path) -> None:
    db, wal, shm = sqlite_in_wal(tmp_path / "made")
    live = tmp_path / "journal" / "t1.db"
    live.parent.mkdir()
    for suffix, data in (("", db), ("-wal", wal), ("-shm", shm)):
        live.with_name(live.name + suffix).write_bytes(data)
    target = archive(live, 7, date(2026, 11, 29))
    assert target == archive_dir(live) / "t1-000000000007-2026-11-29.db"
    assert names(archive_dir(live)) == {target.name, target.name + "-wal", target.name + "-shm"}
    assert target.with_name(target.name + "-wal").read_bytes() == wal  # its committed rows
    assert names(live.parent) == {"archive"}  # nothing left to be read as the next segment's
    assert stat.S_IMODE(target.stat().st_mode) == 0o400
    assert stat.S_IMODE(archive_dir(live).stat().st_mode) == 0o700


def test_a_segment_archived_with_an_empty_wal_leaves_it_and_its_index_behind(
    tmp_path: Path,
) -> None:
    db, _wal, shm = sqlite_in_wal(tmp_path / "made")
    live = tmp_path / "journal" / "t1.db"
    live.parent.mkdir()
    for suffix, data in (("", db), ("-wal", b""), ("-shm", shm)):
        live.with_name(live.name + suffix).write_bytes(data)
    target = archive(live, 1, date(2026, 11, 29))
    assert names(archive_dir(live)) == {target.name}
    assert names(live.parent) == {"archive"}


def test_installing_the_next_segment_moves_its_wal_and_index_with_it(tmp_path: Path) -> None:
    db, wal, shm = sqlite_in_wal(tmp_path / "made")
    live = tmp_path / "journal" / "t1.db"
    live.parent.mkdir()
    upcoming = next_path(live)
    for suffix, data in (("", db), ("-wal", wal), ("-shm", shm)):
        upcoming.with_name(upcoming.name + suffix).write_bytes(data)
    install(upcoming, live)
    assert names(live.parent) == {"t1.db", "t1.db-wal", "t1.db-shm"}
    assert live.with_name("t1.db-wal").read_bytes() == wal
    assert live.with_name("t1.db-shm").read_bytes() == shm


def test_retention_by_bytes_stops_exactly_when_the_archive_fits(live: Path) -> None:
    core = make_segments(live, 6, Clock())
    core.journal.close()
    today = date(2026, 12, 5)
    segments = archived(live)
    total = sum(s.size for s in segments)
    # Old enough: 11-29, 11-30 and 12-01. An archive of exactly the cap fits.
    assert expired(live, today=today, retention_days=3, retention_bytes=total) == []
    cap = total - segments[0].size - 1  # the oldest two must go, not three
    assert [s.day for s in expired(live, today=today, retention_days=3, retention_bytes=cap)] == [
        date(2026, 11, 29),
        date(2026, 11, 30),
    ]


def test_records_are_read_across_segments_by_kind_and_after_a_seq(live: Path) -> None:
    core = make_segments(live, 3, Clock())
    core.journal.close()
    every = [(r.seq, r.kind) for r in read_records(live)]
    seals = [(r.seq, r.kind) for r in read_records(live, kind="seal")]
    assert len(seals) == 3
    assert seals == [(seq, kind) for seq, kind in every if kind == "seal"]
    second = segment_paths(live)[1]
    with Journal.open(second, readonly=True) as journal:
        header = journal.first_record()
        assert header is not None
    after = header.seq + 1  # inside the second segment
    assert [(r.seq, r.kind) for r in read_records(live, after_seq=after)] == [
        (seq, kind) for seq, kind in every if seq > after
    ]
