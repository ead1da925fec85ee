"""A table's journal over the years: one SQLite segment per gaming day, sealed and archived.

``[journal] path`` names the live segment (``t1.db``); closed segments sit in ``archive/``
beside it, named ``<stem>-<first seq, 12 digits>-<gaming day>.db`` so that their names sort
in ``seq`` order, mode 0400 (never written again). A gaming day runs from
``[journal] day_starts`` (default 06:00) local time to the same hour the next day.

Rotation (``daemon.upkeep``), when the daemon's clock enters a new gaming day:

1. the live segment is sealed: a ``seal`` record names its last record's hash;
2. the next segment is written beside it as ``<path>.next``: its first record (``segment``)
   names the sealed segment and the seal's hash, and the chain and ``seq`` go on from
   there; the messages not yet published and the latest retained ones are carried over;
   then a snapshot of the table, so a start never needs an older segment;
3. the sealed segment moves to ``archive/`` (made read-only), and ``.next`` becomes the live
   segment. Each step is a rename or a committed transaction: ``open_live`` finishes a
   rotation a crash interrupted, and one that had not yet committed its next segment is
   started again by the daemon (``sealed`` is true).

Retention (``expired``): a closed segment is expired when it is older than
``retention_days`` and, if ``retention_bytes`` is set, the archive would hold more than that
without it; it is then deleted, or handed to ``archive_command`` first (its path as the one
argument; deleted once the command exits 0). A segment within the retention is never
touched.

``read_records`` reads every segment in ``seq`` order, read-only, also while the daemon
writes: ``lammer journal`` and ``lammer journal verify`` use it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Final

from daemon.errors import JournalError, JournalFileError
from daemon.journal import Journal, JournalRecord, lock
from daemon.outbox import OutboxMessage

ARCHIVE: Final = "archive"
_NAME = re.compile(r"(?P<stem>.+)-(?P<first>\d{12})-(?P<day>\d{4}-\d{2}-\d{2})\.db")


def gaming_day(at: datetime, day_starts: time, tz: tzinfo | None) -> date:
    """The gaming day ``at`` belongs to: days start at ``day_starts`` local time (``tz``,
    or the system's zone when None)."""
    local = at.astimezone(tz)
    start = timedelta(hours=day_starts.hour, minutes=day_starts.minute)
    return (local.replace(tzinfo=None) - start).date()


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A closed segment in the archive."""

    path: Path
    first_seq: int
    day: date

    @property
    def size(self) -> int:
        """Bytes on disk (a WAL moved with it included)."""
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def archive_dir(live: Path) -> Path:
    """Where the closed segments of the journal ``live`` are kept."""
    return live.parent / ARCHIVE


def segment_path(live: Path, first_seq: int, day: date) -> Path:
    """The archive path of a segment whose first record is ``first_seq``."""
    return archive_dir(live) / f"{live.stem}-{first_seq:012d}-{day.isoformat()}.db"


def archived(live: Path) -> list[Segment]:
    """The closed segments of ``live``, oldest first (by their first ``seq``)."""
    folder = archive_dir(live)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _NAME.fullmatch(path.name)
        if match is None or match["stem"] != live.stem:
            continue
        found.append(
            Segment(
                path=path,
                first_seq=int(match["first"]),
                day=date.fromisoformat(match["day"]),
            )
        )
    return sorted(found, key=lambda s: s.first_seq)


def next_path(live: Path) -> Path:
    """Where a rotation writes the next segment before it becomes the live one."""
    return live.with_name(live.name + ".next")


def open_live(live: Path, *, key: bytes | None = None) -> Journal:
    """Open the live segment for writing, finishing a rotation a crash interrupted.

    Raises ``JournalFileError`` when the live segment is missing but the archive holds
    segments (``seq`` would start again: restore the live file instead).
    """
    fd = lock(live)
    try:
        _recover(live, key)
        if not live.exists() and archived(live):
            raise JournalFileError(
                f"journal {live} is missing but {archive_dir(live)} holds closed segments: "
                "restore the live file (a new one would number records from 1 again)",
                path=live,
            )
        return Journal.open_locked(live, fd, key=key)
    except BaseException:
        os.close(fd)
        raise


def _complete(path: Path, key: bytes | None) -> bool:
    """Whether a ``.next`` segment was written to the end (its snapshot committed)."""
    try:
        with Journal.open(path, readonly=True, key=key) as journal:
            first = journal.first_record()
            return (
                first is not None
                and first.kind == "segment"
                and journal.latest_snapshot() is not None
            )
    except JournalError:
        return False


def _recover(live: Path, key: bytes | None) -> None:
    upcoming = next_path(live)
    if not upcoming.exists():
        return
    if not _complete(upcoming, key):
        remove_segment(upcoming)  # the rotation had not committed its next segment: begin again
        return
    if live.exists():
        with Journal.open(live, readonly=True, key=key) as journal:
            sealed = journal.last_kind() == "seal"
            header = None
        if not sealed:  # pragma: no cover - .next is written after the seal
            remove_segment(upcoming)
            return
        with Journal.open(upcoming, readonly=True, key=key) as nxt:
            first = nxt.first_record()
            header = first.record if first is not None else {}
        archive(live, int(str(header.get("prev_first_seq", 0))), _day(header.get("prev_day")))
    install(upcoming, live)


def _day(value: object) -> date:
    return date.fromisoformat(str(value)) if value else date.today()


def archive(live: Path, first_seq: int, day: date) -> Path:
    """Move the sealed live segment into the archive, read-only. Returns its new path."""
    folder = archive_dir(live)
    folder.mkdir(mode=0o700, exist_ok=True)
    target = segment_path(live, first_seq, day)
    wal, shm = (live.with_name(live.name + suffix) for suffix in ("-wal", "-shm"))
    os.replace(live, target)
    if wal.exists() and wal.stat().st_size > 0:
        # The checkpoint could not empty the WAL (a reader held an older snapshot): it holds
        # committed records of this segment, so it goes with it, with its index. Left under
        # the live name it would be lost here and read as the next live segment's.
        os.replace(wal, target.with_name(target.name + "-wal"))
        if shm.exists():
            os.replace(shm, target.with_name(target.name + "-shm"))
    else:
        for side in (wal, shm):  # a reader still open keeps its own (unlinked) index
            if side.exists():
                side.unlink()
    target.chmod(stat.S_IRUSR)
    _fsync_dir(folder)
    _fsync_dir(live.parent)
    return target


def install(upcoming: Path, live: Path) -> None:
    for suffix in ("-wal", "-shm"):
        side = upcoming.with_name(upcoming.name + suffix)
        if side.exists():
            os.replace(side, live.with_name(live.name + suffix))
    os.replace(upcoming, live)
    _fsync_dir(live.parent)


def remove_segment(path: Path) -> None:
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        side = path.with_name(name)
        if side.exists():
            side.unlink()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def expired(
    live: Path, *, today: date, retention_days: int, retention_bytes: int | None
) -> list[Segment]:
    """The closed segments past the retention, oldest first (see the module docstring)."""
    segments = archived(live)
    total = sum(s.size for s in segments)
    out = []
    for segment in segments:
        old = (today - segment.day).days > retention_days
        over = retention_bytes is None or total > retention_bytes
        if not (old and over):
            break  # never one within the retention, and never out of order
        out.append(segment)
        total -= segment.size
    return out


def read_records(
    live: Path,
    *,
    after_seq: int = 0,
    kind: str | None = None,
    key: bytes | None = None,
) -> Iterator[JournalRecord]:
    """Every record of the journal ``live`` (archive and live segment) with ``seq >
    after_seq``, in ``seq`` order, read-only."""
    for path in segment_paths(live):
        with Journal.open(path, readonly=True, key=key) as journal:
            last = after_seq
            for record in journal.records(after_seq, kind=kind):
                last = record.seq
                yield record
            after_seq = max(after_seq, last)


def segment_paths(live: Path) -> list[Path]:
    """The segments of ``live`` in ``seq`` order: the archive's, then the live one."""
    paths = [s.path for s in archived(live)]
    if live.exists():
        paths.append(live)
    if not paths:
        raise JournalFileError(f"cannot read journal {live}: no such file", path=live)
    return paths


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """What the journal still has of a range of ``seq`` (``published_between``)."""

    messages: list[OutboxMessage]
    """The messages published with a ``seq`` in the range, in ``seq`` order, each once."""
    missing_before: int | None
    """Every ``seq`` of the range below this one is no longer in the journal (its segment
    was removed, or it came before this journal began); None when none of it is gone."""


def published_between(live: Journal, from_seq: int, to_seq: int, *, key: bytes | None) -> Found:
    """The messages the table published with ``from_seq <= seq <= to_seq``, from every
    segment it still has (the archive's, read-only, and ``live``, the open live segment).

    Only the segments whose ``seq`` span meets the range are opened (an archived
    segment's name holds its first ``seq``). A message carried over by a rotation sits
    in two segments with the same bytes: it is returned once.
    """
    path = live.path
    segments = archived(path)
    starts = [s.first_seq for s in segments]
    found: dict[int, OutboxMessage] = {}
    for i, segment in enumerate(segments):
        end = starts[i + 1] - 1 if i + 1 < len(segments) else None
        if segment.first_seq > to_seq or (end is not None and end < from_seq):
            continue
        try:
            with Journal.open(segment.path, readonly=True, key=key) as journal:
                for message in journal.published_between(from_seq, to_seq):
                    found.setdefault(message.seq, message)
        except JournalError:
            continue  # removed meanwhile (retention) or unreadable: what it held is missing
    for message in live.published_between(from_seq, to_seq):
        found.setdefault(message.seq, message)
    first = _first_held(segments, live, key)
    missing_before = None if first is None or first <= from_seq else min(first, to_seq + 1)
    return Found(messages=[found[seq] for seq in sorted(found)], missing_before=missing_before)


def _first_held(segments: list[Segment], live: Journal, key: bytes | None) -> int | None:
    for segment in segments:
        try:
            with Journal.open(segment.path, readonly=True, key=key) as journal:
                first = journal.first_seq()
        except JournalError:
            continue
        if first is not None:
            return first
    return live.first_seq()
