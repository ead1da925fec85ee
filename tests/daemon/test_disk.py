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
    MARGIN_BYTES,
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


def _leave(folder: Path, free: int) -> None:
    """Size the file ``filler`` in ``folder`` (allocated, not sparse) so that exactly
    ``free`` bytes of its file system stay free (tmpfs counts in 4 KiB pages)."""
    filler = folder / "filler"
    have = filler.stat().st_blocks * 512 if filler.exists() else 0
    size = have + free_bytes(folder) - free
    assert size >= 0
    with filler.open("ab") as f:
        f.truncate(size)  # a smaller file gives its pages back
        if size:
            os.posix_fallocate(f.fileno(), 0, size)
    assert free_bytes(folder) == free


def test_the_reserve_alone_is_no_proof_that_space_returned(tiny_disk: Path) -> None:
    # Issue 27: the reserve freed for the fault's record leaves exactly the room that
    # allocating it again takes, so with another file holding the disk full the table
    # reopened a second later and closed at the next write, again and again.
    size = margin = 128 * 1024
    reserve = Reserve(tiny_disk / "t1.db.reserve", size=size, margin=margin)
    assert reserve.ensure()
    assert reserve.whole()
    _leave(tiny_disk, 0)  # another process fills the disk
    assert not reserve.returned()  # held whole, but nothing free beyond it
    assert reserve.whole()
    assert reserve.release()  # the fault: the reserve's room takes its record
    assert not reserve.whole()
    assert free_bytes(tiny_disk) == size
    assert not reserve.returned()  # the freed room never counts
    assert not reserve.path.exists()  # and is not taken back: the fault's marks may need it
    assert free_bytes(tiny_disk) == size
    _leave(tiny_disk, size + margin - 4096)  # a page short of the reserve and the margin
    assert not reserve.returned()
    assert not reserve.path.exists()
    _leave(tiny_disk, size + margin)  # space returned: the reserve and another one free
    assert reserve.returned()
    assert reserve.whole()
    assert free_bytes(tiny_disk) == margin  # measured with the reserve held


def test_a_reserve_held_whole_still_needs_the_margin_free(tiny_disk: Path) -> None:
    size, margin = 64 * 1024, 192 * 1024
    reserve = Reserve(tiny_disk / "t1.db.reserve", size=size, margin=margin)
    assert reserve.ensure()
    _leave(tiny_disk, margin - 4096)
    assert not reserve.returned()
    assert reserve.whole()  # kept: it is the table's own room
    _leave(tiny_disk, margin)
    assert reserve.returned()
    assert free_bytes(tiny_disk) == margin  # nothing taken: the reserve was whole already


def test_space_has_not_returned_to_a_reserve_that_cannot_be_made(tmp_path: Path) -> None:
    gone = Reserve(tmp_path / "missing" / "t1.db.reserve", size=4096, margin=4096)
    assert not gone.returned()  # the folder cannot be measured
    link = tmp_path / "t1.db.reserve"
    link.symlink_to(tmp_path / "elsewhere")
    held = Reserve(link, size=4096, margin=4096)
    assert not held.whole()
    assert not held.returned()  # O_NOFOLLOW: never allocated through the symlink
    assert not (tmp_path / "elsewhere").exists()
    sparse = tmp_path / "t2.db.reserve"
    sparse.write_bytes(b"")
    os.truncate(sparse, 8192)  # the right length, no blocks: not held
    assert not Reserve(sparse, size=8192).whole()
    short = tmp_path / "t3.db.reserve"
    short.write_bytes(b"x" * 4096)  # allocated, too short
    assert not Reserve(short, size=8192).whole()
    assert Reserve(short, size=4096).whole()


def test_the_margin_is_another_reserve() -> None:
    assert MARGIN_BYTES == RESERVE_BYTES
    reserve = Reserve(Path("t1.db.reserve"))
    assert (reserve.size, reserve.margin) == (RESERVE_BYTES, MARGIN_BYTES)


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


def test_a_sparse_or_partly_allocated_reserve_is_allocated_whole(tmp_path: Path) -> None:
    # The right length is not enough: a file the disk has not given its blocks holds
    # nothing. 1024 pages, the last one left unallocated (a hole).
    size = 1024 * 4096
    sparse = Reserve(tmp_path / "t1.db.reserve", size=size)
    with sparse.path.open("wb") as f:
        f.truncate(size)
    assert not sparse.whole()
    assert sparse.ensure()
    assert sparse.path.stat().st_blocks * 512 >= size
    partial = Reserve(tmp_path / "t2.db.reserve", size=size)
    with partial.path.open("wb") as f:
        f.write(b"\1" * (size - 4096))
        f.truncate(size)
    blocks = partial.path.stat().st_blocks
    if not blocks * 512 < size <= blocks * 513:
        pytest.skip(f"this file system allocated {blocks} blocks for {size - 4096} bytes")
    assert not partial.whole()  # a page short
    assert partial.ensure()
    assert partial.whole()
    assert partial.path.stat().st_blocks * 512 >= size


def test_a_reserve_that_cannot_be_removed_is_not_said_released(tmp_path: Path) -> None:
    folder = tmp_path / "t1.db.reserve"
    folder.mkdir()  # not a file: unlink refuses it
    assert not Reserve(folder).release()
    assert folder.is_dir()


def test_journal_bytes_counts_the_shared_memory_file_too(tmp_path: Path) -> None:
    journal = tmp_path / "t1.db"
    journal.write_bytes(b"x" * 4096)
    (tmp_path / "t1.db-shm").write_bytes(b"x" * 32768)
    assert journal_bytes(journal) == 4096 + 32768


def test_samples_at_one_instant_are_kept_and_measure_nothing_alone() -> None:
    meter = GrowthMeter(window=3600, floor=0)
    meter.sample(5, 0)
    meter.sample(5, 1000)  # the same instant: no rate from these two
    assert meter.per_hour() == 0
    meter.sample(65, 7000)  # a minute after both: 7000 bytes in 60 s from the first
    assert meter.per_hour() == pytest.approx(7000 * 60)


def test_the_window_keeps_one_sample_older_than_it_and_no_more() -> None:
    # Far from time 0 (a monotonic clock's seconds are large): the window is measured back
    # from now, and only samples older than it by the whole window go.
    meter = GrowthMeter(window=3600, floor=0)
    meter.sample(10_000, 0)
    meter.sample(10_060, 6000)
    meter.sample(10_120, 6000)
    assert meter.per_hour() == pytest.approx(6000 / 120 * 3600)  # all three kept
    # 0, then a jump of 1 MB 10 s later, then nothing for an hour: the sample before the
    # jump goes exactly when the one after it is a whole window old.
    edge = GrowthMeter(window=3600, floor=0)
    edge.sample(0, 0)
    edge.sample(10, 1_000_000)
    edge.sample(3609, 1_000_000)  # 3599 s after the jump: the jump is in the window
    assert edge.per_hour() == pytest.approx(1_000_000 / 3609 * 3600)
    edge.sample(3610, 1_000_000)  # 3600 s after it: the sample before the jump goes
    assert edge.per_hour() == 0
    three = GrowthMeter(window=3600, floor=0)  # the same with three samples only
    three.sample(0, 0)
    three.sample(10, 1_000_000)
    three.sample(3610, 1_000_000)
    assert three.per_hour() == 0
