"""The journal's disk (daemon.disk): the reserve on a real file system and on a full tmpfs,
and the growth the ``DISK_LOW`` need is computed from, checked against sums by hand."""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.disk import (
    FLOOR_BYTES_PER_HOUR,
    RESERVE_BYTES,
    GrowthMeter,
    Reserve,
    free_bytes,
    journal_bytes,
    reserve_path,
)
from daemon.journal import WAL_LIMIT_BYTES
from tests.helpers.tmpfs import tmpfs


def test_the_reserve_is_allocated_0600_idempotent_and_released(tmp_path: Path) -> None:
    reserve = Reserve(reserve_path(tmp_path / "t1.db"), size=64 * 1024)
    assert reserve.path == tmp_path / "t1.db.reserve"
    old = os.umask(0o000)  # whatever the umask: 0600
    try:
        assert reserve.ensure()
    finally:
        os.umask(old)
    info = reserve.path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_size == 64 * 1024
    assert info.st_blocks * 512 >= 64 * 1024  # allocated, not a sparse file
    assert reserve.ensure()  # again: nothing changes
    assert reserve.release()
    assert not reserve.path.exists()
    assert not reserve.release()  # nothing to free


def test_a_reserve_path_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("someone's file")
    link = tmp_path / "t1.db.reserve"
    link.symlink_to(target)
    assert not Reserve(link, size=4096).ensure()
    assert target.read_text() == "someone's file"


def test_a_reserve_in_a_folder_that_is_gone_is_refused(tmp_path: Path) -> None:
    assert not Reserve(tmp_path / "missing" / "t1.db.reserve").ensure()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of the test's own (needs root; skipped otherwise)."""
    yield from tmpfs(tmp_path / "tiny", "1m")


def test_a_reserve_the_disk_cannot_hold_takes_nothing(tiny_disk: Path) -> None:
    before = free_bytes(tiny_disk)
    reserve = Reserve(tiny_disk / "t1.db.reserve", size=2 * 1024 * 1024)
    assert not reserve.ensure()
    assert not reserve.path.exists()
    assert free_bytes(tiny_disk) == before
    small = Reserve(tiny_disk / "t1.db.reserve", size=256 * 1024)
    assert small.ensure()
    assert free_bytes(tiny_disk) <= before - 256 * 1024


def test_journal_bytes_counts_the_live_segment_its_wal_and_the_archive(tmp_path: Path) -> None:
    journal = tmp_path / "t1.db"
    (tmp_path / "archive").mkdir()
    sizes = {
        journal: 8192,
        tmp_path / "t1.db-wal": 4096,
        tmp_path / "archive" / "t1-000000000001-2026-11-30.db": 16384,
        tmp_path / "t10.db": 40960,  # another table's journal: not counted
        tmp_path / "archive" / "t10-000000000001-2026-11-30.db": 40960,
    }
    for path, size in sizes.items():
        path.write_bytes(b"x" * size)
    assert journal_bytes(journal) == 8192 + 4096 + 16384
    assert journal_bytes(tmp_path / "missing.db") == 0


def test_growth_is_measured_over_the_window_and_never_below_the_floor() -> None:
    meter = GrowthMeter(window=3600, floor=1000)
    assert meter.per_hour() == 1000  # nothing measured yet
    meter.sample(0, 1_000_000)
    assert meter.per_hour() == 1000
    meter.sample(60, 1_100_000)  # 100 kB a minute: 6 MB an hour
    assert meter.per_hour() == pytest.approx(6_000_000)
    for minute in range(2, 121):  # then 10 kB a minute for two hours
        meter.sample(60 * minute, 1_100_000 + 10_000 * (minute - 1))
    # The window keeps the last hour (and one sample before it): 10 kB a minute.
    assert meter.per_hour() == pytest.approx(600_000)
    meter.sample(7300, 0)  # the retention removed a segment: the journal shrank
    assert meter.per_hour() == 1000
    assert meter.needed(24) == 24 * 1000 + RESERVE_BYTES + WAL_LIMIT_BYTES


def test_a_clock_that_goes_back_starts_the_measure_again() -> None:
    meter = GrowthMeter(window=3600, floor=0)
    meter.sample(100, 0)
    meter.sample(160, 60_000)
    meter.sample(50, 60_000)
    assert meter.per_hour() == 0
    meter.sample(110, 120_000)
    assert meter.per_hour() == pytest.approx(60_000 * 60)


@pytest.mark.parametrize(
    ("window", "floor"), [(0, 1), (-1, 1), (math.nan, 1), (3600, -1), (3600, math.nan)]
)
def test_hostile_settings_are_refused(window: float, floor: float) -> None:
    with pytest.raises(ValueError, match="window must be above 0 and floor 0 or more"):
        GrowthMeter(window=window, floor=floor)


def test_the_default_floor_is_a_day_of_a_busy_table() -> None:
    assert GrowthMeter().needed(24) == 24 * FLOOR_BYTES_PER_HOUR + RESERVE_BYTES + WAL_LIMIT_BYTES
