"""One table's synchronous core: journal -> rules -> journal (outbox), with no ``await``.

``TableCore(config, journal)`` replays the open journal through the rules with the
recorded times, so the table (open round, craps series, pending roll, alarms) is exactly
what it was and ``seq`` goes on where it stopped. Then:

* ``start()`` after a restart: no device is connected yet, whatever the journal last said;
  the retained state goes out;
* ``ingest(device, fact)`` for every device fact, in this order and in one SQLite
  transaction (one fsync): the fact is journaled with its device (and the frame's link
  sequence number and bytes), the rules' table machine turns it into a new state and
  outcomes (pure), and every message they publish is written to the journal's outbox with
  its ``seq`` and ``ts``. The caller acknowledges the frame only after ``ingest`` returns,
  so an ACK means the event is durable (see ``daemon.app``);
* ``bad_frame(device, raw, reason)``: the rules learn of it (``BadFrameSeen``, alarm
  ``LINK_ERRORS``; journaled when it changed the table); its bytes and reason are
  journaled and logged in full up to a rate, then counted per interval
  (``daemon.bad_frames``);
* ``tick()`` from the shell's timer, every second: alarms that clear after a quiet time
  (``TimePassed``, journaled only when it changed the table, so a replay clears them at
  the same times) and the bad-frame counts of intervals that are over;
* ``decide(name, payload)`` for a stickperson's request: checked by the request models
  and by the rules, journaled when legal (with the operator and the time), journaled with
  its reason when refused, and answered on ``response/<name>`` either way.

Each returns how many messages it queued, so the async shell (``daemon.app``) knows when
to wake the MQTT link. Nothing here reads a clock but the injected one, starts a task or
touches the network; the shell owns drivers, MQTT, signals and the watchdog.

Log lines (structlog) are bound to the table and to the device, round or roll; no card
still face down is logged at info (``daemon.logs.fact_fields``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import structlog

from contract.payloads import Publication
from contract.requests import MAX_PAYLOAD
from daemon.bad_frames import BadFrameBudget
from daemon.clock import Clock, format_ts, utc_now
from daemon.config import TableConfig
from daemon.journal import GENESIS, Journal
from daemon.logs import event_context, fact_fields, outcome_fields
from daemon.outbox import OutboxMessage
from daemon.publications import info_publication, outcome_publication, state_publications
from daemon.records import to_record
from daemon.replay import Replay, Settings, start_record
from daemon.requests import (
    DropCounter,
    Incoming,
    RequestError,
    classify,
    malformed_reason,
    parse_request,
    response_publication,
)
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
from rules import table
from rules.errors import DecisionError, RulesError
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    CleanStart,
    ClockJumped,
    Device,
    DeviceDisconnected,
    DeviceFact,
    DeviceHello,
    ModeReported,
    Outcome,
    TimePassed,
)
from rules.table import HostFact

log = structlog.get_logger("lammer.daemon")

CLOCK_JUMP_LIMIT = 2.0
"""Seconds the wall clock may move against the steady clock between two looks before it
is a jump (``CLOCK_JUMP``)."""

LastFrame = tuple[int, bytes]
"""A device's last journaled frame: its link sequence number and its bytes."""


@dataclass
class Health:
    """What the watchdog looks at: why the journal did not answer, when it did not."""

    last_error: str | None = None


class TableCore:
    """The table's state, its journal and what it publishes. See the module docstring."""

    def __init__(
        self,
        config: TableConfig,
        journal: Journal,
        *,
        version: str,
        clock: Clock = utc_now,
        on_replay_progress: Callable[[], object] | None = None,
        replay_progress_every: int = 50_000,
    ) -> None:
        """Rebuild the table of ``config`` from ``journal`` (the live segment, open and
        writable): from its latest snapshot, replaying only what follows.

        ``on_replay_progress`` is called every ``replay_progress_every`` records of the
        replay (the shell asks systemd for more start time there).
        """
        self.config = config
        self.journal = journal
        self.clock = clock
        self.version = version
        self.table_id = config.table.id
        self.health = Health()
        self._deferred: list[tuple[Any, str, str, dict[str, Any]]] | None = None
        self.log = TxLog(self, log.bind(table=self.table_id))
        """Lines logged inside a journal transaction come out when it commits (a refused
        transaction is tried again: its lines would say twice what did not happen)."""
        j = config.journal
        self.settings = Settings(
            game=config.table.game,
            craps_paytable=config.bonus_craps.paytable,
            decks=config.bust_bonus.decks,
            dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
        )
        self._day_start, self._zone = j.day_start, j.zone
        self._info = info_publication(
            table=self.table_id,
            version=version,
            game=config.table.game,
            craps_paytable=config.bonus_craps.paytable,
            decks=config.bust_bonus.decks,
            dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
        )
        self.dropped = DropCounter()
        """Requests dropped for a name that cannot be answered (mqtt-api.md "Requests")."""
        self.bad_frames = BadFrameBudget()
        """Which bad frames are journaled and logged in full, and the counts of the rest."""
        self.outbox = LiveOutbox(self)
        """The outbox of the MQTT link: the live segment's, whichever it is."""
        self._table = self._load(on_replay_progress, replay_progress_every)
        self._clean_start = self._stopped_cleanly()
        """The last run ended with ``close()``: its stop and snapshot are the last records."""
        self._clock_seen: tuple[datetime, float] | None = None
        self._snapshot_seq = self._last_snapshot_seq()
        self._snapshot_time = self.clock()
        self._segment_day = self._read_segment_day()
        self._expired: list[Segment] = []
        self._built_from: table.TableState | None = None
        """The table the state topics were last built from (``state_publications``)."""

    # ------------------------------------------------------------------ replay

    @property
    def state(self) -> table.TableState:
        """The table as it is."""
        assert self._table.state is not None  # set by _load
        return self._table.state

    @state.setter
    def state(self, value: table.TableState) -> None:
        self._table.state = value

    @property
    def last_frames(self) -> dict[Device, LastFrame]:
        """Each device's last journaled frame, as the journal holds it. A frame can be
        journaled and its ACK never reach the device (the daemon died between the two);
        after a restart the device sends it again, and the driver, which starts from this,
        must ACK it without delivering it twice (link-layer.md)."""
        return self._table.last_frames

    @property
    def _published_state(self) -> dict[str, dict[str, Any]]:
        # The body last queued on each retained state topic, so an unchanged state is not
        # published again (republishing after a reconnect is the MQTT link's job).
        return self._table.published

    def _load(self, on_progress: Callable[[], object] | None, every: int) -> Replay:
        """The table rebuilt: the latest snapshot of the live segment, then the records
        after it (all of them when there is no snapshot), with the recorded times."""
        snapshot = self.journal.latest_snapshot()
        if snapshot is None:
            replay, after = Replay(self.settings), 0
        else:
            replay, after = Replay.restore(snapshot.record), snapshot.seq
        for count, record in enumerate(self.journal.records(after), start=1):
            if on_progress is not None and count % every == 0:
                on_progress()
            replay.apply(record)
        for seq, error in replay.errors:  # pragma: no cover - decisions are journaled legal
            self.log.error("journal record not replayable", seq=seq, error=error)
        # A fresh table (a new journal, or another game) is begun again at the start record's
        # time by start(), as a replay of the journal begins it (daemon.replay).
        self._fresh = replay.state is None or replay.state.game != self.settings.game
        # A rotation a crash cut short is finished by start() with the table as the journal
        # left it (its snapshot is what a replay of the sealed segment gives); the daemon's
        # own settings apply after it, from the start record on.
        self._finish_later = self.journal.last_kind() == "seal"
        state = (
            replay.state
            if self._finish_later and replay.state is not None
            else replay.finish(self.settings, self.clock())
        )
        self.log.info(
            "journal replayed",
            snapshot=None if snapshot is None else snapshot.seq,
            events=replay.events,
            last_seq=self.journal.last_seq,
            round=table.open_round_id(state),
        )
        return replay

    def _stopped_cleanly(self) -> bool:
        last = self.journal.last_seq
        if last < 2 or self._last_snapshot_seq() != last:
            return False
        before = next(iter(self.journal.records(last - 2)), None)
        return before is not None and before.kind == "daemon" and "stop" in before.record

    def _last_snapshot_seq(self) -> int:
        snapshot = self.journal.latest_snapshot()
        return 0 if snapshot is None else snapshot.seq

    def _read_segment_day(self) -> date | None:
        first = self.journal.first_record()
        if first is None:
            return None
        if first.kind == "segment":
            return date.fromisoformat(str(first.record["gaming_day"]))
        return self._gaming_day(first.ts)

    def _gaming_day(self, at: datetime) -> date:
        return gaming_day(at, self._day_start, self._zone)

    def continue_after(self, seq: int | None) -> None:
        """``seq`` goes on above ``seq`` (the highest the broker retains under this table's
        base topic, ``MqttLink.survey``): a table id used before, with another journal,
        must not publish a ``seq`` displays have seen (mqtt-api.md: never reused). A new
        journal simply begins above it; a journal behind it records the gap."""
        if seq is None or seq <= self.journal.last_seq:
            return
        at = self.clock()
        if self.journal.last_seq == 0:
            self.journal.start_chain(seq, GENESIS)
            self.log.warning("a new journal begins above the broker's retained seq", seq=seq)
            return
        before = self.journal.last_seq
        self.journal.skip_to(seq)
        self._journal(
            "daemon",
            {
                "seq_gap": {
                    "after": before,
                    "to": seq,
                    "reason": "the broker retains messages of this table up to this seq",
                }
            },
            at=at,
        )
        self.log.warning("seq skipped above the broker's retained seq", after=before, to=seq)

    def start(self) -> int:
        """Begin: a new journal gets its first segment header, a rotation a crash left
        half done is finished, the start is journaled with the table's settings, and no
        device is connected yet, whatever the journal last said; then every retained state
        topic whose content changed goes out."""
        at = self.clock()
        if self.journal.last_seq == 0:
            self._journal_header(at)
        elif self.journal.last_kind() == "seal":
            assert self._segment_day is not None  # a sealed segment has records
            self._rotate(max(self._segment_day, self._gaming_day(at)), at, sealed=True)
        if self._finish_later:
            self._table.finish(self.settings, at)
            self._finish_later = False
        self._journal("daemon", start_record(self.version, self.settings), at=at)
        if self._fresh:
            self.state = self.settings.initial_state(at)  # its alarms begin now, not at load
            self._fresh = False
        queued = self._host_fact(CleanStart(), at) if self._clean_start else 0
        for device, device_state in self.state.devices:
            if device_state.connected:
                queued += self.ingest(
                    device, DeviceDisconnected(device=device, reason="lammer restarted")
                )
        with self._batch():
            queued += self._queue_state(self.clock())
        return queued

    # ------------------------------------------------------------------ the journal's upkeep

    def _journal_header(self, at: datetime) -> None:
        """The first record of a table's journal: the first segment, chaining on genesis.
        The table begins with it (a replay starts the table at its first record's time)."""
        day = self._gaming_day(at)
        self.state = self.settings.initial_state(at)
        self.journal.append_segment(
            {
                "table": self.table_id,
                "gaming_day": day.isoformat(),
                "prev_segment": None,
                "prev_hash": GENESIS.hex(),
                "settings": self.settings.to_json(),
            },
            ts=at,
        )
        self._segment_day = day

    def take_expired(self) -> list[Segment]:
        """The closed segments found past the retention since the last call (after a
        rotation), for the shell to remove (``daemon.app``)."""
        found, self._expired = self._expired, []
        return found

    def expired(self, at: datetime | None = None) -> list[Segment]:
        """The closed segments past ``[journal]``'s retention, oldest first."""
        j = self.config.journal
        return expired(
            self.journal.path,
            today=self._gaming_day(at or self.clock()),
            retention_days=j.retention_days,
            retention_bytes=j.retention_bytes,
        )

    def removed(self, segment: Segment, how: str) -> None:
        """Journal that a closed segment left the box (``how``: deleted, or handed to the
        archive command), for the record."""
        self._journal(
            "daemon",
            {
                "segment_removed": {
                    "file": segment.path.name,
                    "first_seq": segment.first_seq,
                    "gaming_day": segment.day.isoformat(),
                    "how": how,
                }
            },
        )

    def _maybe_rotate(self, at: datetime) -> bool:
        day = self._gaming_day(at)
        # Only forwards: a clock set back does not reopen a closed gaming day.
        if self._segment_day is None or day <= self._segment_day:
            return False
        self._rotate(day, at, sealed=False)
        return True

    def _rotate(self, day: date, at: datetime, *, sealed: bool) -> None:
        """Close the live segment and begin the next (``daemon.segments``, "Rotation")."""
        old = self.journal
        old_day = self._segment_day
        assert old_day is not None
        first = old.first_record()
        first_seq = first.seq if first is not None else old.last_seq
        # A rotation the journal refused half way (a full disk) left its seal: not again.
        sealed = sealed or old.last_kind() == "seal"
        if not sealed:
            old.seal(
                {
                    "gaming_day": old_day.isoformat(),
                    "first_seq": first_seq,
                    "last_seq": old.last_seq,
                },
                ts=at,
            )
        seal_seq, seal_hash = old.last_seq, old.last_hash
        live = old.path
        upcoming = next_path(live)
        remove_segment(upcoming)
        archived_as = segment_path(live, first_seq, old_day)
        nxt = Journal.open_locked(upcoming, None, key=old.key)
        try:
            nxt.start_chain(seal_seq, seal_hash)
            nxt.append_segment(
                {
                    "table": self.table_id,
                    "gaming_day": day.isoformat(),
                    "prev_segment": archived_as.name,
                    "prev_first_seq": first_seq,
                    "prev_day": old_day.isoformat(),
                    "prev_hash": seal_hash.hex(),
                    "settings": self.settings.to_json(),
                },
                ts=at,
            )
            nxt.copy_outbox(old)
            nxt.append("snapshot", self._table.snapshot(), ts=at)
        finally:
            nxt.close()
        old.checkpoint()
        lock_fd = old.release()
        archive(live, first_seq, old_day)
        install(upcoming, live)
        self.journal = Journal.open_locked(live, lock_fd, key=old.key)
        self._segment_day = day
        self._snapshot_seq, self._snapshot_time = self.journal.last_seq, at
        self.log.info(
            "journal segment closed",
            gaming_day=old_day.isoformat(),
            archived=str(archived_as),
            last_seq=seal_seq,
            new_day=day.isoformat(),
        )

    def _maybe_snapshot(self, at: datetime) -> None:
        """Snapshot the table (inside the caller's transaction) when enough records or
        time have passed since the last one."""
        j = self.config.journal
        due = self.journal.last_seq - self._snapshot_seq >= j.snapshot_every or (
            (at - self._snapshot_time).total_seconds() >= j.snapshot_interval
            and self.journal.last_seq > self._snapshot_seq
        )
        if due:
            self._snapshot(at)

    def _snapshot(self, at: datetime) -> None:
        self._snapshot_seq = self._journal("snapshot", self._table.snapshot(), at=at)
        self._snapshot_time = at

    def close(self) -> None:
        """A clean stop: a ``stop`` record, then a snapshot of the table as it is, so the
        next start replays nothing and knows the stop was clean."""
        at = self.clock()
        with self._batch():
            self._journal("daemon", {"stop": {"version": self.version}}, at=at)
            self._snapshot(at)

    # ------------------------------------------------------------------ devices

    def ingest(
        self,
        device: Device,
        fact: DeviceFact,
        *,
        link_seq: int | None = None,
        raw: bytes = b"",
        probe: bool = False,
    ) -> int:
        """Journal one device fact, apply it, and queue what it publishes (one
        transaction). Returns the number of messages queued.

        ``probe``: the frame answers the driver's silence probe. A ``HELLO`` from the same
        device and a ``MODE`` the table already knows change nothing: such a frame is
        journaled marked as a probe reply, without an event for the replay (it is not a
        restart: it neither clears ``UNEXPECTED_FRAME`` nor ends the memory of closed
        rounds), and logged at debug. Any other probe reply is applied like any frame."""
        at = self.clock()
        self._maybe_rotate(at)
        if probe and link_seq is not None and self._answers_as_known(device, fact):
            with self._batch():
                seq = self._journal(
                    "device",
                    {
                        "device": device,
                        "probe": True,
                        "link_seq": link_seq,
                        "raw": raw.decode("ascii", "replace"),
                    },
                    at=at,
                )
                self.last_frames[device] = (link_seq, raw)
            self.log.debug("probe reply", seq=seq, device=device, fact=type(fact).__name__)
            return 0
        record: dict[str, Any] = {"device": device, "event": to_record(fact)}
        if probe:
            record["probe"] = True
        if link_seq is not None:
            record["link_seq"] = link_seq
            record["raw"] = raw.decode("ascii", "replace")
        with self._batch():
            seq = self._journal("device", record, at=at)
            if link_seq is not None:
                self.last_frames[device] = (link_seq, raw)
            flog = self.log.bind(seq=seq, device=device, **event_context(fact))
            flog.info("device event", fact=type(fact).__name__, **fact_fields(fact))
            try:
                self.state, outcomes = table.apply(self.state, fact, at=at)
            except RulesError as exc:  # a fact never raises by design; keep running if it does
                flog.error("rules rejected a device fact", error=str(exc))
                return 0
            queued = self._publish(outcomes, at)
            self._maybe_snapshot(at)
            return queued

    def _answers_as_known(self, device: Device, fact: DeviceFact) -> bool:
        """A probe reply that says what the table knows already: the device's HELLO as
        before, or the shuffler's MODE as before."""
        try:
            known = self.state.device(device)
        except KeyError:
            return False
        if isinstance(fact, DeviceHello):
            return known.hello == fact
        if isinstance(fact, ModeReported):
            return known.mode == fact.game
        return False

    def bad_frame(self, device: Device, raw: bytes, reason: str) -> int:
        """A bad frame, already NAKed: the rules learn of it (``LINK_ERRORS``), and it is
        kept for review in full (its bytes and why, one warning line) up to a rate, then
        counted (``daemon.bad_frames``). Returns the number of messages queued."""
        at = self.clock()
        fact = BadFrameSeen(device=device)
        new_state, outcomes = table.apply(self.state, fact, at=at)
        changed = new_state != self.state
        full, report = self.bad_frames.admit(device, reason, len(raw), at)
        if not (full or changed or report):
            return 0  # counted: nothing to journal, the table is as it was
        with self._batch():
            if report is not None:
                self._report_bad_frames(report, at)
            if full:
                # The bytes may hold a secret card (a damaged HAND): journal, never log them.
                seq = self._journal(
                    "device",
                    {
                        "device": device,
                        "event": to_record(fact),
                        "bad_frame": {"device": device, "raw": raw.hex(), "reason": reason},
                    },
                    at=at,
                )
                self.log.warning("bad frame", seq=seq, device=device, reason=reason, size=len(raw))
            elif changed:  # the replay needs it; the bytes are counted, not kept
                self._journal("device", {"device": device, "event": to_record(fact)}, at=at)
            self.state = new_state
            return self._publish(outcomes, at) if outcomes else 0

    def tick(self) -> int:
        """The host's timer (the shell calls it every second): a new gaming day rotates
        the journal (``take_expired`` then names the segments past the retention), drops of
        unanswerable requests are reported, alarms that clear after a quiet time clear, and
        the bad-frame counts of intervals that are over are kept. Journals the
        ``TimePassed`` only when it changed the table. Returns the number of messages
        queued."""
        at = self.clock()
        if self._maybe_rotate(at):
            self._expired = self.expired(at)
        self.flush_drops()
        fact = TimePassed()
        new_state, outcomes = table.apply(self.state, fact, at=at)
        reports = self.bad_frames.due(at)
        if new_state == self.state and not reports:
            return 0
        with self._batch():
            for report in reports:
                self._report_bad_frames(report, at)
            if new_state == self.state:
                return 0
            self._journal("daemon", {"event": to_record(fact)}, at=at)
            self.state = new_state
            return self._publish(outcomes, at) if outcomes else 0

    def watch_clock(self, monotonic: float) -> int:
        """Compare the wall clock with the steady one (``monotonic``, seconds): a jump of
        more than ``CLOCK_JUMP_LIMIT`` between two calls is journaled and raises
        ``CLOCK_JUMP`` (the shell calls this every second). Returns the messages queued."""
        at = self.clock()
        last, self._clock_seen = self._clock_seen, (at, monotonic)
        if last is None:
            return 0
        wall = (at - last[0]).total_seconds()
        jump = wall - (monotonic - last[1])
        if abs(jump) <= CLOCK_JUMP_LIMIT:
            return 0
        self.log.warning("the wall clock jumped", seconds=round(jump, 3))
        return self._host_fact(ClockJumped(milliseconds=round(jump * 1000)), at)

    def _host_fact(self, fact: HostFact, at: datetime) -> int:
        """Apply a host fact; journal it (kind ``daemon``) only when it changed the table."""
        new_state, outcomes = table.apply(self.state, fact, at=at)
        if new_state == self.state:
            return 0
        with self._batch():
            self._journal("daemon", {"event": to_record(fact)}, at=at)
            self.state = new_state
            return self._publish(outcomes, at) if outcomes else 0

    def _report_bad_frames(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("bad frames counted, not kept in full", **report)
        self._journal("device", {"bad_frames": report}, at=at)

    # ------------------------------------------------------------------ requests

    def decide(self, incoming: Incoming) -> int:
        """A stickperson's request from MQTT: check, journal, apply, answer. Returns the
        number of messages queued.

        In this order, before anything parses the payload: the name against the known
        requests; an unknown name of the right shape is answered with an error, a name of
        any other shape is dropped and counted (``DropCounter``); a payload over 4 KiB is
        refused with its size, SHA-256 and first bytes kept for the record."""
        at = self.clock()
        self._maybe_rotate(at)
        name = incoming.name
        if classify(name) == "malformed":
            self._drop(incoming, malformed_reason(name, incoming.name_length), at)
            return 0
        # An unknown name of the right shape is answered on response/<name> by
        # parse_request, with the request's own id when it can be read.
        if incoming.oversize:
            error = f"the request is {incoming.size} bytes; at most {MAX_PAYLOAD} bytes are allowed"
            return self._refuse(incoming, None, error, at)
        try:
            request = parse_request(name, incoming.payload, at=at)
        except RequestError as exc:
            return self._refuse(incoming, exc.request_id, str(exc), at)
        rlog = self.log.bind(request=name, request_id=request.request_id)
        decision = request.decision
        try:
            new_state, outcomes = table.apply(self.state, decision, at=at)
        except DecisionError as exc:
            return self._refuse(incoming, request.request_id, str(exc), at)
        with self._batch():
            seq = self._journal("decision", {"event": to_record(decision)}, at=at)
            self.state = new_state
            queued = self._publish(outcomes, at)
            queued += self._respond(name, request.request_id, None, at)
            self._maybe_snapshot(at)
        rlog.info(
            "decision applied",
            seq=seq,
            decision=type(decision).__name__,
            roll=getattr(decision, "roll_id", None),  # an alarm_ack names no roll
            operator=decision.operator,
        )
        return queued

    def _refuse(
        self,
        incoming: Incoming,
        request_id: str | int | None,
        error: str,
        at: datetime,
    ) -> int:
        """Journal a refused request for the record (who asked what, and why it was
        refused) and answer it; replay skips it (a decision record without an event)."""
        name = incoming.name
        self.log.bind(request=name, request_id=request_id).warning(
            "request rejected", error=error, size=incoming.size
        )
        with self._batch():
            self._journal("decision", {"rejected": {**incoming.summary(), "error": error}}, at=at)
            return self._respond(name, request_id, error, at)

    def _drop(self, incoming: Incoming, reason: str, at: datetime) -> None:
        """Count a request that cannot be answered; the log and the journal hear of drops
        once a minute at most (a flood of them costs one line and one record a minute)."""
        report = self.dropped.add(incoming, reason, at)
        if report is not None:
            self._report_drops(report, at)

    def flush_drops(self) -> None:
        """Report drops counted since the last report, if a minute has passed (the shell
        calls this from its timer, so a flood that stops is still reported)."""
        at = self.clock()
        report = self.dropped.due(at)
        if report is not None:
            self._report_drops(report, at)

    def _report_drops(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("requests dropped: names that cannot be answered", **report)
        self._journal("decision", {"dropped_requests": report}, at=at)

    def _respond(
        self, name: str, request_id: str | int | None, error: str | None, at: datetime
    ) -> int:
        return self._queue(response_publication(name, request_id, error, table=self.table_id), at)

    # ------------------------------------------------------------------ publishing

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        """One journal transaction, and the table's memory with it: when the journal
        refuses (a full disk), what the transaction changed in memory is undone too, so
        the same event can be handled again once the journal works (nothing half done,
        nothing twice)."""
        if self.journal.in_batch:
            with self.journal.batch():
                yield
            return
        saved = (
            self._table.state,
            dict(self._table.last_frames),
            dict(self._table.published),
            self._built_from,
            self._snapshot_seq,
            self._snapshot_time,
        )
        self._deferred = []
        try:
            with self.journal.batch():
                yield
        except BaseException:
            self._deferred = None
            (
                self._table.state,
                frames,
                published,
                self._built_from,
                self._snapshot_seq,
                self._snapshot_time,
            ) = saved
            self._table.last_frames.clear()
            self._table.last_frames.update(frames)
            self._table.published.clear()
            self._table.published.update(published)
            raise
        lines, self._deferred = self._deferred, None
        for logger, level, event, fields in lines or ():
            getattr(logger, level)(event, **fields)

    def _journal(self, kind: str, record: dict[str, Any], *, at: datetime | None = None) -> int:
        return self.journal.append(kind, record, ts=at or self.clock())

    def journal_fault_over(self, since: datetime, error: str, held: int) -> None:
        """The journal works again after refusing since ``since``: the outage goes into
        the record (when, why, how many events waited)."""
        at = self.clock()
        self._journal(
            "daemon",
            {
                "journal_fault": {
                    "since": format_ts(since),
                    "until": format_ts(at),
                    "error": error,
                    "held": held,
                }
            },
            at=at,
        )

    def _queue(self, publication: Publication, at: datetime) -> int:
        topic, retained, body = publication
        self.journal.append_publish(topic, body, retained=retained, ts=at)
        if retained:
            self._published_state[topic] = body
        return 1

    def _publish(self, outcomes: tuple[Outcome, ...], at: datetime) -> int:
        queued = 0
        for outcome in outcomes:
            if isinstance(outcome, AlarmRaised):
                self.log.warning(
                    "alarm raised",
                    code=outcome.code,
                    alarm_device=outcome.device,
                    message=outcome.message,
                )
                continue  # published below as the `alarms` and `state` topics
            if isinstance(outcome, AlarmCleared):
                self.log.info("alarm cleared", code=outcome.code, alarm_device=outcome.device)
                continue
            try:
                publication = outcome_publication(outcome, table=self.table_id)
            except ValueError as exc:
                # A bug between the rules and the payload contract must not stop the table:
                # keep the outcome in the journal for review and go on. Only what names the
                # outcome is logged: the payload model refuses an outcome precisely when it
                # may carry a card still face down (a flagged result with a hand), so its
                # fields stay in the protected journal.
                self.log.error(
                    "outcome not publishable",
                    error=str(exc),
                    outcome=type(outcome).__name__,
                    **event_context(outcome),
                )
                self._journal(
                    "daemon", {"unpublishable": to_record(outcome), "error": str(exc)}, at=at
                )
                continue
            assert publication is not None  # only the alarm outcomes have none
            self.log.info("outcome", topic=publication.topic, **outcome_fields(outcome))
            queued += self._queue(publication, at)
        return queued + self._queue_state(at)

    def _queue_state(self, at: datetime) -> int:
        """Queue every retained state topic whose content changed."""
        queued = 0
        state = self.state
        built = state_publications(state, table=self.table_id, since=self._built_from)
        for publication in (self._info, *built):
            if self._published_state.get(publication.topic) != publication.body:
                queued += self._queue(publication, at)
        self._built_from = state
        return queued

    # ------------------------------------------------------------------ health

    def journal_answers(self) -> bool:
        """True when the journal answers a query (the watchdog's check)."""
        try:
            next(iter(self.journal.records(self.journal.last_seq)), None)
        except Exception as exc:
            self.health.last_error = str(exc)
            return False
        return True


# ---------------------------------------------------------------------- logging


class TxLog:
    """A bound logger whose lines wait for the journal transaction they are logged in."""

    def __init__(self, core: TableCore, logger: Any) -> None:
        self._core = core
        self._logger = logger

    def bind(self, **fields: Any) -> TxLog:
        """More context, as structlog's ``bind``."""
        return TxLog(self._core, self._logger.bind(**fields))

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if self._core._deferred is not None:
            self._core._deferred.append((self._logger, level, event, fields))
        else:
            getattr(self._logger, level)(event, **fields)

    def debug(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("error", event, fields)


# ---------------------------------------------------------------------- the outbox


class LiveOutbox:
    """The MQTT link's outbox: always the live segment's (``Outbox`` of daemon/outbox.py),
    so a rotation does not leave the link holding a closed file."""

    def __init__(self, core: TableCore) -> None:
        self._core = core

    def pending(self, limit: int = 100) -> list[OutboxMessage]:
        """See ``Journal.pending``."""
        return self._core.journal.pending(limit)

    def mark_published(self, *seqs: int) -> None:
        """See ``Journal.mark_published``."""
        self._core.journal.mark_published(*seqs)

    def set_aside(self, seq: int, reason: str) -> None:
        """See ``Journal.set_aside``."""
        self._core.journal.set_aside(seq, reason)

    def retained(self) -> list[OutboxMessage]:
        """See ``Journal.retained``."""
        return self._core.journal.retained()
