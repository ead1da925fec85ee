"""The journal's disk: room kept for the record of its own failure, and ``DISK_LOW``.

**The reserve.** When the disk is full the journal refuses every write, so the table goes
offline at once (``availability``; nothing needs the journal for that) but cannot record
*why*, nor publish the ``JOURNAL_FAULT`` alarm, since every payload carries a ``seq`` the
journal gives out (mqtt-api.md "Conventions"). So the daemon keeps ``RESERVE_BYTES`` of the
disk allocated in a file beside the journal (``<journal>.reserve``, 0600, its blocks
allocated with ``posix_fallocate``). At the first refused write it deletes the file, and
the room it leaves takes the ``JournalRefused`` record and the ``alarms`` and ``state``
messages that carry ``JOURNAL_FAULT`` to the displays, then the marks of those messages
published. Nothing else is written into it: every event stays held (the device sends its
frame again) until space has really returned (``Reserve.returned``); only then is the held
event written, the fault journaled and cleared, and the table ``online``. A disk someone
else fills meanwhile leaves the alarm unwritten: the table is offline all the same.

**Hysteresis.** Freeing the reserve leaves exactly the room that allocating it again takes,
so "the reserve can be allocated again" alone proves nothing: with another process holding
the disk full, the table went ``online`` a second after the fault and ``offline`` again at
the next write, 11 times in 18 s, when it was tried. Space has returned only when the reserve is
allocated whole again *and* ``MARGIN_BYTES`` more are free beyond it, measured with the
reserve held (so the room the reserve itself left never counts); the reserve is not even
tried before the disk shows both free, so a disk still full keeps the little room the
fault's record left.

**DISK_LOW.** ``GrowthMeter`` measures how fast the journal's files grow (the live segment,
its WAL and the archive, sampled every ``DISK_CHECK_S``, over the last ``GROWTH_WINDOW_S``),
never below ``FLOOR_BYTES_PER_HOUR`` (a busy table, measured:
docs/operators/journal-and-disk.md, "How much disk a table needs"). ``needed_bytes`` is that
rate times ``[journal] disk_low_hours``, plus the reserve and the WAL's bound; the rules
raise ``DISK_LOW`` when the free space is under it (``rules.table``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from daemon.journal import WAL_LIMIT_BYTES

RESERVE_BYTES: Final = 2 * 1024 * 1024
"""Room kept for the record of a full disk: the ``JournalRefused`` record, ``alarms`` and
``state`` (each under 32 KiB) and their marks, in a WAL of 4 KiB pages, many times over."""

MARGIN_BYTES: Final = RESERVE_BYTES
"""Free space beyond the reserve the disk must show before a table held closed by a full
disk reopens (another reserve's worth): room for many rolls, so the table does not reopen
into a disk that refuses the next write."""

DISK_CHECK_S: Final = 60.0
"""Seconds between two measures of the journal's growth and the free space."""

GROWTH_WINDOW_S: Final = 3600.0
"""The journal's growth is measured over the last hour at most."""

FLOOR_BYTES_PER_HOUR: Final = 1_200_000
"""The growth assumed at least (also before any is measured): a busy card table, a round a
minute at about 19 KB a round (bench/bench_disk.py; docs/operators/journal-and-disk.md)."""


def reserve_path(journal: Path) -> Path:
    """Where the reserve of the journal at ``journal`` lives."""
    return journal.with_name(journal.name + ".reserve")


@dataclass
class Reserve:
    """``size`` bytes of the disk held in a file at ``path`` (module docstring)."""

    path: Path
    size: int = RESERVE_BYTES
    margin: int = MARGIN_BYTES

    def ensure(self) -> bool:
        """Allocate the reserve whole (idempotent). False when the disk cannot hold it (a
        full disk): the file is removed then, so a failed attempt holds nothing."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        try:
            os.fchmod(fd, 0o600)
            done = os.fstat(fd)
            if done.st_size >= self.size and done.st_blocks * 512 >= self.size:
                return True
            os.posix_fallocate(fd, 0, self.size)
            os.fsync(fd)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            return False
        finally:
            os.close(fd)

    def whole(self) -> bool:
        """Whether the reserve is held: its file there (not a symlink), ``size`` bytes long
        and allocated, not sparse."""
        try:
            info = os.lstat(self.path)
        except OSError:
            return False
        return (
            stat.S_ISREG(info.st_mode)
            and info.st_size >= self.size
            and info.st_blocks * 512 >= self.size
        )

    def returned(self) -> bool:
        """Whether space has really returned after a full disk (module docstring,
        "Hysteresis"): ``size + margin`` bytes free before the reserve is tried, then the
        reserve allocated whole and ``margin`` bytes still free with it held. A disk that
        cannot be measured has not returned. The reserve, once whole again, is kept."""
        folder = self.path.parent
        try:
            if not self.whole() and (
                free_bytes(folder) < self.size + self.margin or not self.ensure()
            ):
                return False
            return free_bytes(folder) >= self.margin
        except OSError:
            return False

    def release(self) -> bool:
        """Free the reserve; True when there was one to free."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        except OSError:
            return False
        return True


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system of ``folder``."""
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def journal_bytes(journal: Path) -> int:
    """Bytes the journal's files take: the live segment, its WAL, and the archive beside it
    (``daemon.segments``), allocated blocks, not apparent sizes."""
    total = 0
    stem = journal.stem
    candidates = [journal.with_name(journal.name + suffix) for suffix in ("", "-wal", "-shm")]
    archive = journal.parent / "archive"
    with contextlib.suppress(OSError):
        candidates += [p for p in archive.iterdir() if p.name.startswith(f"{stem}-")]
    for path in candidates:
        with contextlib.suppress(OSError):
            total += path.stat().st_blocks * 512
    return total


class GrowthMeter:
    """How fast the journal grows, from samples ``(monotonic seconds, bytes)``: the growth
    between the oldest sample within ``window`` seconds and the newest, never below
    ``floor`` bytes an hour (a shrinking journal, after the retention removed a segment,
    counts as the floor)."""

    def __init__(
        self, *, window: float = GROWTH_WINDOW_S, floor: float = FLOOR_BYTES_PER_HOUR
    ) -> None:
        if not window > 0 or not floor >= 0:
            raise ValueError(f"window must be above 0 and floor 0 or more, got {window}, {floor}")
        self.window = window
        self.floor = floor
        self._samples: deque[tuple[float, int]] = deque()

    def sample(self, now: float, used: int) -> None:
        """One measure of the journal's size at ``now``; samples older than the window go
        (one older than it is kept, so the window is covered whole)."""
        if self._samples and now < self._samples[-1][0]:
            self._samples.clear()  # a clock that went back: measure again
        self._samples.append((now, used))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def per_hour(self) -> float:
        """The growth in bytes an hour (at least ``floor``)."""
        if len(self._samples) < 2:
            return self.floor
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return self.floor
        return max(self.floor, (b1 - b0) / (t1 - t0) * 3600)

    def needed(self, hours: int) -> int:
        """Bytes ``hours`` of growth need, with the reserve and the WAL's bound."""
        return round(self.per_hour() * hours) + RESERVE_BYTES + WAL_LIMIT_BYTES
