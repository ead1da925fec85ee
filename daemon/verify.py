"""``lammer journal verify``: show that nobody edited a table's journal.

``verify_journal(live, key=...)`` reads every segment of the journal ``live``
(``daemon.segments.segment_paths``: the archive's, oldest first, then the live one),
read-only and creating nothing, also while the daemon writes, and checks, record by record
in ``seq`` order:

* **seq**: each record follows the one before it (``seq + 1``), across segments too; the
  journal begins at seq 1 unless its first segment is an anchor (below). SQLite's
  ``sqlite_sequence`` of each segment (the highest seq it ever gave out) must not exceed the
  last record left in it: rows deleted at the end of a segment show there.
* **the chain** (``daemon.journal``, "Hash chain"): every record's hash, recomputed from its
  stored text (``Journal.raw_records``, a message with its exact payload from the outbox)
  and the hash before it, equals the stored one. The chain begins at ``GENESIS`` for the
  table's first segment. A ``segment`` record (a segment's header, always its first record)
  names the hash of the last record before it (``prev_hash``), which must be the previous
  segment's last hash; a ``seal`` record names the hash of the record before it
  (``last_hash``) and is the last record of its segment; every closed segment (in the
  archive) ends with one.
* **the anchor**: when the retention removed the oldest segments, the first remaining
  segment's header is where the check begins: its ``prev_hash`` is taken as given and said
  so in the report. The removal must be on record: the daemon journals every segment it
  removes (a ``daemon`` record ``segment_removed``); a missing segment that no checked
  record says was removed is reported as a problem.
* **snapshots**: a full replay (``daemon.replay.Replay``) from the first available record
  (from ``GENESIS``: an empty table with the settings of the journal's first header; from an
  anchor: the snapshot the rotation wrote right after the header) is compared, as JSON,
  with every ``snapshot`` record at its seq.
* **the outbox**: a message the daemon may still publish (not yet published, or the latest
  retained one of its topic) and that a rotation carried over into the live segment must be
  byte for byte the payload of its record in the segment that holds it, and every such
  message must be a ``publish`` record's (the chain covers a payload only in its own
  segment).

The first problem stops the walk (what follows a break cannot be trusted) and is named as
``segment FILE, seq N: what``. What the chain cannot show: a cut at the end of the live
segment when ``sqlite_sequence`` was edited as well (the tail has nothing after it to break),
and, without an HMAC key, a chain rebuilt after an edit by someone who can write the file
(plain SHA-256 needs no secret; the snapshots catch such an edit only when it changes the
table's state). docs/auditors/journal.md says what the key protects against.

Exceptions (``JournalFileError``): a journal that is missing or cannot be read, a file that
is not a lammer journal; the command maps them to exit status 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

from daemon.clock import parse_ts
from daemon.errors import JournalError
from daemon.journal import GENESIS, Journal, JournalRecord, RawRecord, canonical, chain, dumps
from daemon.replay import Replay, Settings
from daemon.segments import segment_paths

REMOVED: Final = "segment_removed"
"""The key of the ``daemon`` record that says a segment left the box (``JournalUpkeep.removed``)."""

_ATTEMPTS: Final = 3  # a rotation while we read changes the files: check again, this often


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """The first thing found wrong: where (segment file, record) and what."""

    segment: Path
    seq: int | None
    what: str

    def __str__(self) -> str:
        where = f"segment {self.segment}" + ("" if self.seq is None else f", seq {self.seq}")
        return f"{where}: {self.what}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """Where a check began when the oldest segments are gone (removed by the retention)."""

    segment: Path
    seq: int
    previous: str  # the file name of the segment before it, as its header names it
    removed_at: int | None  # the seq of the record saying it was removed (None: none does)
    snapshot: int | None  # the seq of the snapshot the replay started from


@dataclass(slots=True, kw_only=True)
class Report:
    """What ``verify_journal`` checked and found."""

    live: Path
    hmac: bool
    segments: list[Path] = field(default_factory=list)
    records: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    snapshots: int = 0
    """Snapshots compared with the replay (the anchor's own snapshot is not one of them)."""
    older_snapshots: int = 0
    """Of those, snapshots of an older lammer, compared without the keys added since."""
    carried: int = 0
    """Messages carried over into the live segment and compared with their records."""
    anchor: Anchor | None = None
    notes: list[str] = field(default_factory=list)
    problem: Problem | None = None

    @property
    def intact(self) -> bool:
        """True when nothing was found wrong."""
        return self.problem is None

    @property
    def chain(self) -> str:
        """The chain's kind: ``hmac-sha256`` (with the table's key) or ``sha256``."""
        return "hmac-sha256" if self.hmac else "sha256"

    def summary(self) -> list[str]:
        """The report as lines for a person (the command prints them)."""
        archived = sum(1 for p in self.segments if p != self.live)
        has_live = self.live in self.segments
        if archived and has_live:
            where = f"{archived:,} in the archive and the live one"
        elif has_live:
            where = "the live one"
        else:
            where = f"{archived:,} in the archive, no live segment"
        span = "" if self.first_seq is None else f" (seq {self.first_seq} to {self.last_seq})"
        lines = [
            f"journal {self.live}",
            f"  segments:  {len(self.segments)} ({where})",
            f"  records:   {self.records}{span}",
            f"  chain:     {self.chain}, "
            + ("from genesis" if self.anchor is None else f"anchored at seq {self.anchor.seq}"),
            f"  snapshots: {self.snapshots} compared with a full replay"
            + (
                f" ({self.older_snapshots} of an older lammer, without the keys added since)"
                if self.older_snapshots
                else ""
            ),
        ]
        if self.carried:
            lines.append(f"  outbox:    {self.carried} carried-over messages match their records")
        if self.anchor is not None:
            a = self.anchor
            removed = (
                "is missing: no record says it was removed"
                if a.removed_at is None
                else f"was removed by the retention (seq {a.removed_at})"
            )
            start = (
                ""
                if a.snapshot is None
                else f"; the replay starts from its snapshot (seq {a.snapshot})"
            )
            lines.append(
                f"  anchor:    {a.segment.name}: its header (seq {a.seq}) is taken as given; "
                f"the segment before it, {a.previous}, {removed}{start}"
            )
        lines.extend(f"  note:      {note}" for note in self.notes)
        return lines


class _Broken(Exception):
    """Ends the walk at the first problem."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def verify_journal(
    live: Path, *, key: bytes | None = None, settings: Settings | None = None
) -> Report:
    """Check the journal whose live segment is ``live`` (see the module docstring).

    ``key`` is the table's HMAC key (``[journal] hmac_key_file``), None for plain SHA-256.
    ``settings`` are the table's, for a journal older than segments whose records before its
    first start record carry none (by default those of its first start record).

    Raises ``JournalFileError`` for a journal that is missing or cannot be read.
    """
    for attempt in range(_ATTEMPTS):
        # A rotation while the walk reads the files moves the live segment into the archive
        # (the walk then sees a gap), and the retention may remove a segment it listed: only
        # a journal whose files stayed put while it was read is judged.
        before = _paths(live)
        try:
            report = _Walk(live, key, settings).run()
        except JournalError:
            if attempt + 1 < _ATTEMPTS and _paths(live) != before:
                continue
            raise
        if report.intact or _paths(live) == report.segments or attempt + 1 == _ATTEMPTS:
            return report
    raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns


def _paths(live: Path) -> list[Path]:
    try:
        return segment_paths(live)
    except JournalError:
        return []


class _Walk:
    """One pass over every segment and record, in ``seq`` order."""

    def __init__(self, live: Path, key: bytes | None, settings: Settings | None) -> None:
        self.live = live
        self.key = key
        self.settings = settings
        self.report = Report(live=live, hmac=key is not None)
        self.previous: bytes | None = None  # the hash of the record before (None: at start)
        self.expected = 1  # the seq the next record must have (read once a record came)
        self.segment: Path = live
        self.prev_segment: Path | None = None
        self.replay: Replay | None = None
        self.anchor_waiting: Anchor | None = None  # the anchor whose snapshot comes next
        self.removed: dict[str, int] = {}  # segment file name -> seq of its removal record
        self.carried: dict[int, bytes] = {}  # live outbox rows carried over: seq -> payload
        self.outbox_own: set[int] = set()  # live outbox rows that must be publish records

    def run(self) -> Report:
        paths = segment_paths(self.live)
        self.report.segments = paths
        self._read_live_outbox(paths[-1])
        try:
            for index, path in enumerate(paths):
                self._segment(path, closed=path != self.live, first=index == 0)
            self._finish(paths[-1])
        except _Broken as broken:
            self.report.problem = broken.problem
        return self.report

    # -- segments -------------------------------------------------------------------------

    def _read_live_outbox(self, path: Path) -> None:
        """The messages the daemon may still publish from the live segment."""
        if path != self.live:
            return  # no live segment: nothing will be published from these files
        with Journal.open(path, readonly=True, key=self.key) as journal:
            first = journal.first_record()
            start = first.seq if first is not None else journal.last_seq + 1
            for message in [*journal.pending(limit=1_000_000), *journal.retained()]:
                if message.seq < start:
                    self.carried[message.seq] = message.payload
                else:
                    self.outbox_own.add(message.seq)

    def _segment(self, path: Path, *, closed: bool, first: bool) -> None:
        self.segment = path
        with Journal.open(path, readonly=True, key=self.key) as journal:
            high_water = journal.last_seq  # sqlite_sequence, read before the records
            last: RawRecord | None = None
            for count, raw in enumerate(journal.raw_records()):
                if last is not None and last.kind == "seal":
                    self._fail(
                        raw.seq, "a record after the seal: a closed segment was written again"
                    )
                self._record(raw, first_of_segment=count == 0)
                last = raw
        if last is None:
            if first and not closed:
                self.report.notes.append("the journal holds no records yet")
                return
            self._fail(None, "the segment holds no records")
        if high_water > last.seq:
            self._fail(
                last.seq,
                f"the segment gave out seq numbers up to {high_water} but ends at {last.seq}: "
                f"records after seq {last.seq} were deleted",
            )
        if closed and last.kind != "seal":
            self._fail(
                last.seq,
                "a segment in the archive must end with a seal: records after this one were "
                "deleted, or the segment was never closed",
            )
        self.prev_segment = path

    def _finish(self, last_path: Path) -> None:
        anchor = self.report.anchor
        if anchor is not None and anchor.removed_at is None:
            removed_at = self.removed.get(anchor.previous)
            if removed_at is None:
                self._fail_at(
                    anchor.segment,
                    anchor.seq,
                    f"the segment before it, {anchor.previous}, is missing and no record of "
                    "the journal says the retention removed it: it was deleted (or not copied "
                    "here with the others)",
                )
            self.report.anchor = Anchor(
                segment=anchor.segment,
                seq=anchor.seq,
                previous=anchor.previous,
                removed_at=removed_at,
                snapshot=anchor.snapshot,
            )
        if self.outbox_own:
            seq = min(self.outbox_own)
            self._fail_at(
                last_path,
                seq,
                "the outbox holds a message for this seq but the journal no publish record "
                "of it: the record was deleted or the message inserted (it would be published)",
            )
        if self.carried:
            self.report.notes.append(
                f"{len(self.carried)} messages carried over into the live segment could not "
                "be compared: the segments of their records were removed"
            )

    # -- records --------------------------------------------------------------------------

    def _record(self, raw: RawRecord, *, first_of_segment: bool) -> None:
        at_start = self.previous is None
        if self.previous is None:
            previous = self._begin(raw)
        else:
            previous = self.previous
            self._follow(raw, previous, first_of_segment=first_of_segment)
        expected = chain(
            previous, canonical(raw.seq, raw.ts, raw.kind, raw.body, raw.payload), self.key
        )
        if expected != raw.hash:
            self._fail(raw.seq, self._mismatch(raw, previous, at_start=at_start))
        if raw.kind == "seal":
            self._seal(raw, previous)
        elif raw.kind == "segment" and not first_of_segment:
            self._fail(raw.seq, "a segment header in the middle of a segment")
        self.previous = raw.hash
        self.expected = raw.seq + 1
        self.report.records += 1
        if self.report.first_seq is None:
            self.report.first_seq = raw.seq
        self.report.last_seq = raw.seq
        self._outbox(raw)
        self._replay(raw)

    def _begin(self, raw: RawRecord) -> bytes:
        """The first record of the walk: where the chain starts (the hash it follows)."""
        if raw.kind != "segment":
            # A journal from before segments (its chain was computed from genesis when it
            # was brought to schema 3).
            if raw.seq != 1:
                self._fail(
                    raw.seq,
                    f"the journal begins at seq {raw.seq}: seq 1 to {raw.seq - 1} were deleted",
                )
            settings = self.settings or self._first_settings()
            self.replay = None if settings is None else Replay(settings)
            return GENESIS
        header = self._body(raw)
        prev_hash = header.get("prev_hash")
        if prev_hash == GENESIS.hex() and header.get("prev_segment") is None:
            if raw.seq != 1:
                self._fail(
                    raw.seq,
                    f"the journal begins at seq {raw.seq}: seq 1 to {raw.seq - 1} were deleted",
                )
            try:
                settings = Settings.from_json(header.get("settings"))
            except ValueError as exc:  # RecordError
                self._fail(raw.seq, f"the header's settings cannot be read: {exc}")
            self.replay = Replay(settings)
            return GENESIS
        try:
            previous = bytes.fromhex(str(prev_hash))
        except ValueError:
            self._fail(raw.seq, f"the segment header's prev_hash {prev_hash!r} is not a hash")
        self.anchor_waiting = self.report.anchor = Anchor(
            segment=self.segment,
            seq=raw.seq,
            previous=str(header.get("prev_segment")),
            removed_at=None,
            snapshot=None,
        )
        return previous

    def _follow(self, raw: RawRecord, previous: bytes, *, first_of_segment: bool) -> None:
        """Any record after the first (``previous`` the hash of the one before): seq
        continuity, and a segment's header."""
        if raw.seq != self.expected:
            last = self.expected - 1
            name = self.prev_segment.name if self.prev_segment else "?"
            if raw.seq < self.expected:  # only across segments: rows come in seq order
                self._fail(
                    raw.seq,
                    f"seq {raw.seq} follows {last}, the last of segment {name}: the segments "
                    "overlap (one was copied in twice, or restored from another journal)",
                )
            if not first_of_segment:
                gap = raw.seq - last - 1
                what = "a record was deleted" if gap == 1 else f"{gap} records were deleted"
                self._fail(raw.seq, f"seq {raw.seq} follows {last}: {what}")
            header = self._body(raw) if raw.kind == "segment" else {}
            names = header.get("prev_segment")
            told = f" (its header names {names} as the segment before it)" if names else ""
            self._fail(
                raw.seq,
                f"seq {raw.seq} follows {last}, the last of segment {name}: records or a whole "
                f"segment are missing{told}",
            )
        if first_of_segment:
            if raw.kind != "segment":
                self._fail(raw.seq, f"the segment begins with a {raw.kind} record, not its header")
            header = self._body(raw)
            if header.get("prev_hash") != previous.hex():
                name = self.prev_segment.name if self.prev_segment else "?"
                self._fail(
                    raw.seq,
                    f"the header's prev_hash is not the hash of the last record of {name}: "
                    "the segments do not follow each other",
                )

    def _seal(self, raw: RawRecord, previous: bytes) -> None:
        body = self._body(raw)
        if body.get("last_hash") != previous.hex():
            self._fail(
                raw.seq,
                f"the seal's last_hash is not the hash of the record before it (seq {raw.seq - 1})",
            )

    def _mismatch(self, raw: RawRecord, previous: bytes, *, at_start: bool) -> str:
        what = "hash does not match: the record was changed, or one before it"
        if not at_start:
            return what
        data = canonical(raw.seq, raw.ts, raw.kind, raw.body, raw.payload)
        if self.key is None:
            return (
                f"{what}; or the journal was written with an HMAC key ([journal] hmac_key_file): "
                "a key may be needed (--key-file, or --config with the table's configuration)"
            )
        if chain(previous, data, None) == raw.hash:
            return (
                "the chain is plain SHA-256, not HMAC: the journal was written without a key; "
                "check it without --key-file"
            )
        return f"{what}; or the key given is not the one the journal was written with"

    # -- the outbox ------------------------------------------------------------------------

    def _outbox(self, raw: RawRecord) -> None:
        if self.segment == self.live:
            if raw.seq in self.outbox_own and raw.kind == "publish":
                self.outbox_own.discard(raw.seq)
            return
        carried = self.carried.pop(raw.seq, None)
        if carried is None:
            return
        if raw.kind != "publish" or raw.payload != carried:
            what = "is not a publish record" if raw.kind != "publish" else "differs from it"
            self._fail_at(
                self.live,
                raw.seq,
                f"the outbox's message carried over from {self.segment.name} {what}: it would "
                "be published altered",
            )
        self.report.carried += 1

    # -- the replay -----------------------------------------------------------------------

    def _replay(self, raw: RawRecord) -> None:
        if raw.kind == "daemon":
            removed = self._body(raw).get(REMOVED)
            if isinstance(removed, dict) and isinstance(removed.get("file"), str):
                self.removed.setdefault(removed["file"], raw.seq)
        anchor = self.anchor_waiting
        if anchor is not None:
            if raw.kind == "segment":
                return  # the anchor's header; its snapshot follows
            if raw.kind != "snapshot":
                self._fail(
                    raw.seq,
                    "the anchor segment's header is not followed by its snapshot (a rotation "
                    "writes one): the replay has nothing to start from",
                )
            try:
                self.replay = Replay.restore(self._body(raw))
            except Exception as exc:  # a hostile body: any error is a finding, not a crash
                self._fail(raw.seq, f"the anchor's snapshot cannot be restored: {_error(exc)}")
            self.anchor_waiting = None
            self.report.anchor = Anchor(
                segment=anchor.segment,
                seq=anchor.seq,
                previous=anchor.previous,
                removed_at=None,
                snapshot=raw.seq,
            )
            return
        replay = self.replay
        if replay is None:
            if raw.kind == "snapshot":
                self._fail(raw.seq, "a snapshot in a journal without settings to replay it")
            return
        if raw.kind == "snapshot":
            self._compare(raw, replay)
            return
        errors = len(replay.errors)
        try:
            replay.apply(_journal_record(raw))
        except Exception as exc:  # a hostile body: any error is a finding, not a crash
            self._fail(raw.seq, f"the record cannot be replayed: {_error(exc)}")
        if len(replay.errors) > errors:
            _, error = replay.errors[-1]
            self._fail(raw.seq, f"the rules refuse this record in the replay: {error}")

    def _compare(self, raw: RawRecord, replay: Replay) -> None:
        stored = self._body(raw)
        if replay.state is None:
            self._fail(raw.seq, "a snapshot before any record of the table")
        computed = json.loads(dumps(replay.snapshot(), "snapshot"))
        older = _as_older(computed, stored)  # ``computed`` itself for a snapshot of today
        if stored != computed and stored == older:
            # A snapshot of an older lammer: it lacks only keys a later version added, and
            # agrees on everything it has. An upgraded daemon went on from it, restored
            # (what it did not keep starts again empty: a craps series, a CHECK's since),
            # so the replay goes on from it too; later snapshots are compared in full.
            self.replay = Replay.restore(stored)
            self.report.older_snapshots += 1
            self.report.snapshots += 1
            return
        if stored != computed:
            where = _difference(stored, older, "")
            self._fail(
                raw.seq,
                f"the snapshot is not the table a replay of the records before it gives "
                f"(first difference at {where or 'the top'}): the snapshot or a record before "
                "it was edited",
            )
        self.report.snapshots += 1

    def _first_settings(self) -> Settings | None:
        """The settings of the journal's first start record (journals from before segments,
        whose first records carry none)."""
        for path in self.report.segments:
            with Journal.open(path, readonly=True, key=self.key) as journal:
                for record in journal.records(kind="daemon"):
                    start = record.record.get("start")
                    if isinstance(start, dict):
                        self.report.notes.append(
                            "the journal begins before segments: the replay takes the "
                            f"settings of its first start record (seq {record.seq})"
                        )
                        return Settings.from_json(start.get("settings"))
        self.report.notes.append("no start record: the table is not replayed")
        return None

    # -- helpers ----------------------------------------------------------------------------

    def _body(self, raw: RawRecord) -> dict[str, Any]:
        try:
            body = json.loads(raw.body)
        except ValueError as exc:
            self._fail(raw.seq, f"the record's body is not JSON: {exc}")
        if not isinstance(body, dict):
            self._fail(raw.seq, "the record's body is not a JSON object")
        return body

    def _fail(self, seq: int | None, what: str) -> NoReturn:
        raise _Broken(Problem(segment=self.segment, seq=seq, what=what))

    def _fail_at(self, segment: Path, seq: int | None, what: str) -> NoReturn:
        raise _Broken(Problem(segment=segment, seq=seq, what=what))


def _journal_record(raw: RawRecord) -> JournalRecord:
    """A record as the replay reads it (``Journal.records`` would read it again)."""
    record = json.loads(raw.body)
    if raw.kind == "publish" and raw.payload is not None:
        record["payload"] = json.loads(raw.payload)
    return JournalRecord(seq=raw.seq, ts=parse_ts(raw.ts), kind=raw.kind, record=record)


ADDED_SNAPSHOT_KEYS: Final = frozenset(
    {
        "acknowledged_by",  # an alarm's acknowledgement (alarm_ack, contract 1.3)
        "acknowledged_at",
        "series",  # a counted roll's series, craps/board's series (an addition)
        "series_count",
        "since",  # a pending CHECK's arrival (pending_roll.since, an addition)
        "at",  # a counted roll's arrival
    }
)
"""Keys a later lammer added to the snapshot's objects: a snapshot of an older lammer lacks
them, and is compared without them (``_as_older``). Any other key missing is a finding."""


def _as_older(computed: object, stored: object) -> object:
    """``computed`` without the ``ADDED_SNAPSHOT_KEYS`` that ``stored`` lacks at the same
    place: the snapshot an older lammer would have written of the same table."""
    if isinstance(computed, dict) and isinstance(stored, dict):
        return {
            key: _as_older(value, stored.get(key))
            for key, value in computed.items()
            if key in stored or key not in ADDED_SNAPSHOT_KEYS
        }
    if isinstance(computed, list) and isinstance(stored, list) and len(computed) == len(stored):
        return [_as_older(c, s) for c, s in zip(computed, stored, strict=True)]
    return computed


def _difference(a: object, b: object, path: str) -> str:
    """The path of the first place where two JSON values differ ('' for the top)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            if k not in a or k not in b or a[k] != b[k]:
                return _difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return path
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _difference(x, y, f"{path}[{i}]")
        return f"{path} (length {len(a)}, the replay's {len(b)})"
    return path


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
