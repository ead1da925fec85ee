"""The journal's upkeep: one live segment a gaming day, the closed ones past the retention,
the table's snapshots, and ``seq`` above what the broker has seen.

``JournalUpkeep`` owns what the table's core (``daemon.core``) would otherwise do to its
journal between events:

* **Rotation** (``daemon.segments``, "Rotation"): when the clock enters a new gaming day,
  the live segment is sealed, the next one is written beside it (its header chains on the
  seal; the outbox carried over; a snapshot of the table), the sealed one goes to the
  archive and the next one takes its place. The live ``Journal`` is the same object before
  and after (``Journal.replace_file``), so whoever holds it, the MQTT link's outbox
  included, goes on in the new segment. ``finish_rotation`` finishes one a crash cut short.
* **Retention** (``daemon.segments``, "Retention"): after each rotation the closed segments
  past the retention are found; the shell takes them (``take_expired``), hands them to the
  archive command or deletes them, and the removal is journaled (``removed``).
* **Snapshots**: inside the transaction of the event that made one due (every
  ``snapshot_every`` records, or after ``snapshot_interval`` seconds), and at a clean stop.
  The table's state is the core's: ``snapshot`` (a callable) gives its body.
* **``seq`` continuity** (``continue_after``): a journal behind the broker's retained
  ``seq`` goes on above it (mqtt-api.md: a ``seq`` is never reused).

``batch()`` is the journal's transaction with the upkeep's own memory in it: when the
journal refuses the commit, the snapshot it counted is forgotten too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime

from daemon.clock import Clock
from daemon.config import JournalSection
from daemon.journal import GENESIS, Journal
from daemon.logs import TxLog
from daemon.segments import (
    Segment,
    archive,
    expired,
    gaming_day,
    install,
    next_path,
    remove_segment,
    segment_path,
)


class JournalUpkeep:
    """The upkeep of one table's journal (see the module docstring)."""

    def __init__(
        self,
        journal: Journal,
        section: JournalSection,
        *,
        table: str,
        settings: dict[str, object],
        snapshot: Callable[[], dict[str, object]],
        clock: Clock,
        log: TxLog,
    ) -> None:
        """Upkeep of ``journal`` (the live segment, open and writable) under ``[journal]``
        ``section``, for ``table`` with its rules ``settings`` (as journaled in each
        segment's header); ``snapshot()`` is the body of a snapshot of the table now. The
        snapshot interval counts from now."""
        self.journal = journal
        self._clock = clock
        self._section = section
        self._table = table
        self._settings = settings
        self._snapshot_body = snapshot
        self._log = log
        latest = journal.latest_snapshot()
        self.snapshot_seq = 0 if latest is None else latest.seq
        """The ``seq`` of the latest snapshot (0: none yet)."""
        self._snapshot_time = clock()
        self._expired: list[Segment] = []
        first = journal.first_record()
        self.segment_day: date | None = None
        """The gaming day of the live segment (None for a new journal)."""
        if first is not None and first.kind == "segment":
            self.segment_day = date.fromisoformat(str(first.record["gaming_day"]))
        elif first is not None:
            self.segment_day = self.gaming_day(first.ts)

    def gaming_day(self, at: datetime) -> date:
        """The gaming day of ``at`` (``[journal] day_starts``, ``time_zone``)."""
        return gaming_day(at, self._section.day_start, self._section.zone)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One journal transaction; a refused one forgets the snapshot it took."""
        saved = (self.snapshot_seq, self._snapshot_time)
        try:
            with self.journal.batch():
                yield
        except BaseException:
            self.snapshot_seq, self._snapshot_time = saved
            raise

    # ------------------------------------------------------------------ seq

    def continue_after(self, seq: int | None) -> None:
        """``seq`` goes on above ``seq`` (the highest the broker retains under this table's
        base topic, ``MqttLink.survey``): a table id used before, with another journal,
        must not publish a ``seq`` displays have seen (mqtt-api.md: never reused). A new
        journal simply begins above it; a journal behind it records the gap."""
        journal, at = self.journal, self._clock()
        if seq is None or seq <= journal.last_seq:
            return
        if journal.last_seq == 0:
            journal.start_chain(seq, GENESIS)
            self._log.warning("a new journal begins above the broker's retained seq", seq=seq)
            return
        before = journal.last_seq
        journal.skip_to(seq)
        gap: dict[str, object] = {
            "after": before,
            "to": seq,
            "reason": "the broker retains messages of this table up to this seq",
        }
        journal.append("daemon", {"seq_gap": gap}, ts=at)
        self._log.warning("seq skipped above the broker's retained seq", after=before, to=seq)

    # ------------------------------------------------------------------ segments

    def begin(self, at: datetime) -> None:
        """The first record of a table's journal: the first segment, chaining on genesis.
        The table begins with it (a replay starts the table at its first record's time)."""
        day = self.gaming_day(at)
        header: dict[str, object] = {
            "table": self._table,
            "gaming_day": day.isoformat(),
            "prev_segment": None,
            "prev_hash": GENESIS.hex(),
            "settings": self._settings,
        }
        self.journal.append_segment(header, ts=at)
        self.segment_day = day

    def finish_rotation(self, at: datetime) -> None:
        """Finish a rotation a crash cut short after its seal (the live segment's last
        record), with the table as the journal left it."""
        old_day = self.segment_day
        if old_day is None:
            raise RuntimeError("no live segment to finish rotating: a sealed segment has records")
        self._rotate(old_day, max(old_day, self.gaming_day(at)), at, sealed=True)

    def rotate_if_new_day(self, at: datetime) -> bool:
        """Rotate when ``at`` is in a later gaming day than the live segment's; then find
        the closed segments past the retention (``take_expired``). Only forwards: a clock
        set back does not reopen a closed gaming day."""
        day = self.gaming_day(at)
        if self.segment_day is None or day <= self.segment_day:
            return False
        self._rotate(self.segment_day, day, at, sealed=False)
        return True

    def _rotate(self, old_day: date, day: date, at: datetime, *, sealed: bool) -> None:
        """Close the live segment (of ``old_day``) and begin the next (``daemon.segments``,
        "Rotation")."""
        journal = self.journal
        first = journal.first_record()
        first_seq = first.seq if first is not None else journal.last_seq
        # A rotation the journal refused half way (a full disk) left its seal: not again.
        if not (sealed or journal.last_kind() == "seal"):
            summary = {
                "gaming_day": old_day.isoformat(),
                "first_seq": first_seq,
                "last_seq": journal.last_seq,
            }
            journal.seal(summary, ts=at)
        seal_seq, seal_hash = journal.last_seq, journal.last_hash
        live = journal.path
        upcoming = next_path(live)
        remove_segment(upcoming)
        archived_as = segment_path(live, first_seq, old_day)
        nxt = Journal.open_locked(upcoming, None, key=journal.key)
        try:
            nxt.start_chain(seal_seq, seal_hash)
            header: dict[str, object] = {
                "table": self._table,
                "gaming_day": day.isoformat(),
                "prev_segment": archived_as.name,
                "prev_first_seq": first_seq,
                "prev_day": old_day.isoformat(),
                "prev_hash": seal_hash.hex(),
                "settings": self._settings,
            }
            nxt.append_segment(header, ts=at)
            nxt.copy_outbox(journal)
            nxt.append("snapshot", self._snapshot_body(), ts=at)
        finally:
            nxt.close()
        journal.checkpoint()

        def move() -> None:
            archive(live, first_seq, old_day)
            install(upcoming, live)

        journal.replace_file(move)
        self.segment_day = day
        self.snapshot_seq, self._snapshot_time = journal.last_seq, at
        self._expired = self.expired(at)
        self._log.info(
            "journal segment closed",
            gaming_day=old_day.isoformat(),
            archived=str(archived_as),
            last_seq=seal_seq,
            new_day=day.isoformat(),
        )

    # ------------------------------------------------------------------ retention

    def expired(self, at: datetime) -> list[Segment]:
        """The closed segments past ``[journal]``'s retention, oldest first."""
        return expired(
            self.journal.path,
            today=self.gaming_day(at),
            retention_days=self._section.retention_days,
            retention_bytes=self._section.retention_bytes,
        )

    def take_expired(self) -> list[Segment]:
        """The closed segments found past the retention at the last rotation, once, for
        the shell to remove (``daemon.app``)."""
        found, self._expired = self._expired, []
        return found

    def removed(self, segment: Segment, how: str) -> None:
        """Journal that a closed segment left the box (``how``: deleted, or handed to the
        archive command), for the record."""
        gone = {
            "file": segment.path.name,
            "first_seq": segment.first_seq,
            "gaming_day": segment.day.isoformat(),
            "how": how,
        }
        self.journal.append("daemon", {"segment_removed": gone}, ts=self._clock())

    # ------------------------------------------------------------------ snapshots

    def snapshot_if_due(self, at: datetime) -> None:
        """Snapshot the table (inside the caller's transaction) when enough records or
        time have passed since the last one."""
        section, last = self._section, self.journal.last_seq
        due = last - self.snapshot_seq >= section.snapshot_every or (
            (at - self._snapshot_time).total_seconds() >= section.snapshot_interval
            and last > self.snapshot_seq
        )
        if due:
            self.snapshot(at)

    def snapshot(self, at: datetime) -> None:
        """Snapshot the table now (a clean stop; inside the caller's transaction)."""
        self.snapshot_seq = self.journal.append("snapshot", self._snapshot_body(), ts=at)
        self._snapshot_time = at
