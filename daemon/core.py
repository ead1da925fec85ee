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
  (``daemon.bad_frames``); ``noise(device, raw, size)`` likewise for bytes outside any
  frame (``NoiseSeen``), in the same bounds;
* ``tick()`` from the shell's timer, every second: alarms that clear after a quiet time
  (``TimePassed``, journaled only when it changed the table, so a replay clears them at
  the same times) and the bad-frame counts of intervals that are over;
* ``decide(incoming)`` for a stickperson's request: checked by the request models
  and by the rules, journaled when legal (with the operator and the time), journaled with
  its reason when refused, and answered on ``response/<name>`` either way.

The table's memory (``daemon.replay.Memory``: its state, each device's last frame, the
retained bodies last published) is one value: an event's transaction keeps the new value,
or, when the journal refuses it, the old one. A request is admitted by one call
(``daemon.requests.admit``), then decided by the rules. The journal's upkeep (rotation at
a new gaming day, retention, snapshots, ``seq`` above the broker's) is
``daemon.upkeep.JournalUpkeep``'s (``upkeep``).

Each returns how many messages it queued, so the async shell (``daemon.app``) knows when
to wake the MQTT link. Nothing here reads a clock but the injected one, starts a task or
touches the network; the shell owns drivers, MQTT, signals and the watchdog.

Log lines (structlog) are bound to the table and to the device, round or roll; no card
still face down is logged at info (``daemon.logs.fact_fields``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import structlog

from contract.payloads import Publication
from contract.requests import BARE_USER, ComponentHmac
from contract.software import Component
from daemon.bad_frames import BadFrameBudget
from daemon.clock import Clock, format_ts, utc_now
from daemon.config import TableConfig
from daemon.intake import BUSY_ERROR
from daemon.journal import Journal
from daemon.logs import TxLog, event_context, fact_fields, outcome_fields
from daemon.publications import info_publication, outcome_publication, state_publications
from daemon.records import to_record
from daemon.replay import Memory, Replay, Settings, reconfigure, start_record
from daemon.requests import (
    AuthenticateAsked,
    DropCounter,
    Dropped,
    Incoming,
    Refused,
    ResendAsked,
    admit,
    classify,
    request_id_of,
    response_publication,
)
from daemon.resend import (
    BACKLOG_ERROR,
    NO_LINK_ERROR,
    RATE_ERROR,
    RESEND_BACKLOG,
    Refuse,
    ResendDesk,
    Resender,
)
from daemon.segments import published_between
from daemon.upkeep import JournalUpkeep
from rules import table
from rules.errors import DecisionError, RulesError
from rules.events import (
    AlarmCleared,
    AlarmRaised,
    BadFrameSeen,
    BrokerLoginChecked,
    CleanStart,
    ClockJumped,
    Device,
    DeviceDisconnected,
    DeviceFact,
    DeviceHello,
    DiskSpaceChecked,
    JournalRefused,
    JournalWritable,
    ModeReported,
    NoiseSeen,
    Outcome,
    SoftwareChecked,
    TimePassed,
)
from rules.table import HostFact

log = structlog.get_logger("lammer.daemon")

AUTHENTICATIONS_PER_MINUTE = 6
"""``request/authenticate`` served per user in any 60 s (each reads every installed file,
tens of milliseconds off the event loop); more are refused with ``AUTH_RATE_ERROR``."""

AUTH_RATE_ERROR = (
    f"at most {AUTHENTICATIONS_PER_MINUTE} authentications a minute per user: ask again in a minute"
)

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
        software_digest: str | None = None,
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
        """The live segment: the same object across rotations (``Journal.replace_file``),
        so it is also the MQTT link's outbox."""
        self.clock = clock
        self.version = version
        self.table_id = config.table.id
        self.health = Health()
        self.log = TxLog(log.bind(table=self.table_id))
        """Lines logged inside a journal transaction come out when it commits (a refused
        transaction is tried again: its lines would say twice what did not happen)."""
        self.settings = Settings(
            game=config.table.game,
            craps_paytable=config.bonus_craps.paytable,
            decks=config.bust_bonus.decks,
            dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
        )
        self._info = info_publication(
            table=self.table_id,
            version=version,
            game=config.table.game,
            craps_paytable=config.bonus_craps.paytable,
            decks=config.bust_bonus.decks,
            dealer_hits_soft_17=config.bust_bonus.dealer_hits_soft_17,
            digest=software_digest,
        )
        self.software_digest = software_digest
        """The installed software's digest computed at start (``contract.software``), or
        None when not computed (a core built by a test)."""
        self.dropped = DropCounter()
        """Requests dropped for a name that cannot be answered (mqtt-api.md "Requests")."""
        self.busy = DropCounter()
        """Requests refused unread because they came faster than the table serves them
        (``daemon.intake``): counted, reported once a minute."""
        self.bad_frames = BadFrameBudget()
        """Which bad frames are journaled and logged in full, and the counts of the rest."""
        self.resender: Resender | None = None
        """Where ``request/resend`` copies go (the MQTT link; set by the shell)."""
        self.resends = ResendDesk()
        """What each user's resends may cost: a rate, copies shared, a budget
        (``daemon.resend``)."""
        self.authentications: dict[str, list[datetime]] = {}
        """Per user, when its recent ``request/authenticate`` were served (the rate)."""
        self.pending_authentication: tuple[Incoming, AuthenticateAsked] | None = None
        """An admitted ``request/authenticate`` the shell is to serve (it reads the files
        off the event loop, then calls ``authenticated``)."""
        self.resend_refused = DropCounter()
        """Resends refused past a user's copy budget and not answered: counted, reported
        once a minute."""
        self._memory = self._load(on_replay_progress, replay_progress_every)
        self.upkeep = JournalUpkeep(
            journal,
            config.journal,
            table=self.table_id,
            settings=self.settings.to_json(),
            snapshot=lambda: self._memory.snapshot(),
            clock=clock,
            log=self.log,
        )
        """Rotation, retention, snapshots, ``seq`` continuity (``daemon.upkeep``)."""
        self._clean_start = self._stopped_cleanly()
        """The last run ended with ``close()``: its stop and snapshot are the last records."""
        self._clock_seen: tuple[datetime, float] | None = None

    # ------------------------------------------------------------------ replay

    @property
    def state(self) -> table.TableState:
        """The table as it is."""
        return self._memory.state

    @property
    def last_frames(self) -> Mapping[Device, LastFrame]:
        """Each device's last journaled frame, as the journal holds it. A frame can be
        journaled and its ACK never reach the device (the daemon died between the two);
        after a restart the device sends it again, and the driver, which starts from this,
        must ACK it without delivering it twice (link-layer.md)."""
        return self._memory.last_frames

    def snapshot(self) -> dict[str, object]:
        """The body a snapshot of the table would have now."""
        return self._memory.snapshot()

    def _remember(self, **changes: Any) -> None:
        self._memory = replace(self._memory, **changes)

    def _load(self, on_progress: Callable[[], object] | None, every: int) -> Memory:
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
        self.replayed = replay.events
        """How many events the start replayed after its snapshot."""
        # A fresh table (a new journal, or another game) is begun again at the start record's
        # time by start(), as a replay of the journal begins it (daemon.replay).
        self._fresh = replay.state is None or replay.state.game != self.settings.game
        # A rotation a crash cut short is finished by start() with the table as the journal
        # left it (its snapshot is what a replay of the sealed segment gives); the daemon's
        # own settings apply after it, from the start record on.
        self._finish_later = self.journal.last_kind() == "seal"
        if not (self._finish_later and replay.state is not None):
            replay.finish(self.settings, self.clock())
        memory = replay.memory()
        self.log.info(
            "journal replayed",
            snapshot=None if snapshot is None else snapshot.seq,
            events=replay.events,
            last_seq=self.journal.last_seq,
            round=table.open_round_id(memory.state),
        )
        return memory

    def _stopped_cleanly(self) -> bool:
        last = self.journal.last_seq
        if last < 2 or self.upkeep.snapshot_seq != last:
            return False
        before = next(iter(self.journal.records(last - 2)), None)
        return before is not None and before.kind == "daemon" and "stop" in before.record

    def start(self) -> int:
        """Begin: a new journal gets its first segment header, a rotation a crash left
        half done is finished, the start is journaled with the table's settings, and no
        device is connected yet, whatever the journal last said; then every retained state
        topic whose content changed goes out."""
        at = self.clock()
        if self.journal.last_seq == 0:
            # The table begins with its journal (a replay starts it at the first record).
            self._remember(state=self.settings.initial_state(at))
            self.upkeep.begin(at)
        elif self.journal.last_kind() == "seal":
            self.upkeep.finish_rotation(at)
        if self._finish_later:
            state = reconfigure(self.state, self.settings, at)
            self._remember(state=state, settings=self.settings)
            self._finish_later = False
        self._journal("daemon", start_record(self.version, self.settings), at=at)
        if self._fresh:
            # Its alarms begin now, not at load.
            self._remember(state=self.settings.initial_state(at))
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

    def close(self) -> None:
        """A clean stop: a ``stop`` record, then a snapshot of the table as it is, so the
        next start replays nothing and knows the stop was clean."""
        at = self.clock()
        with self._batch():
            self._journal("daemon", {"stop": {"version": self.version}}, at=at)
            self.upkeep.snapshot(at)

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
        self.upkeep.rotate_if_new_day(at)
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
                self._remember(last_frames={**self.last_frames, device: (link_seq, raw)})
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
                self._remember(last_frames={**self.last_frames, device: (link_seq, raw)})
            flog = self.log.bind(seq=seq, device=device, **event_context(fact))
            flog.info("device event", fact=type(fact).__name__, **fact_fields(fact))
            try:
                state, outcomes = table.apply(self.state, fact, at=at)
            except RulesError as exc:  # a fact never raises by design; keep running if it does
                flog.error("rules rejected a device fact", error=str(exc))
                return 0
            self._remember(state=state)
            queued = self._publish(outcomes, at)
            self.upkeep.snapshot_if_due(at)
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
        return self._unreadable(device, raw, reason, BadFrameSeen(device=device), len(raw))

    def noise(self, device: Device, raw: bytes, size: int) -> int:
        """Bytes outside any frame (``size`` of them, the first in ``raw``): the rules learn
        of it (``LINK_ERRORS`` when no good frame comes between), and they are kept for
        review as a bad frame is, within the same bounds. Returns the messages queued."""
        reason = f"{size} byte{'s' if size != 1 else ''} outside any frame (noise)"
        return self._unreadable(device, raw, reason, NoiseSeen(device=device), size)

    def _unreadable(
        self, device: Device, raw: bytes, reason: str, fact: BadFrameSeen | NoiseSeen, size: int
    ) -> int:
        at = self.clock()
        new_state, outcomes = table.apply(self.state, fact, at=at)
        changed = new_state != self.state
        full, report = self.bad_frames.admit(device, reason, size, at)
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
                what = "noise" if isinstance(fact, NoiseSeen) else "bad frame"
                self.log.warning(what, seq=seq, device=device, reason=reason, size=size)
            elif changed:  # the replay needs it; the bytes are counted, not kept
                self._journal("device", {"device": device, "event": to_record(fact)}, at=at)
            self._remember(state=new_state)
            return self._publish(outcomes, at) if outcomes else 0

    def tick(self) -> int:
        """The host's timer (the shell calls it every second): a new gaming day rotates
        the journal (``upkeep.take_expired`` then names the segments past the retention),
        drops of unanswerable requests are reported, alarms that clear after a quiet time
        clear, and the bad-frame counts of intervals that are over are kept. Journals the
        ``TimePassed`` only when it changed the table. Returns the number of messages
        queued."""
        at = self.clock()
        self.upkeep.rotate_if_new_day(at)
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
            self._remember(state=new_state)
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
            self._remember(state=new_state)
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
        self.upkeep.rotate_if_new_day(at)
        if incoming.busy:
            return self._answer_busy(incoming, at)
        request = admit(incoming, at=at)
        if isinstance(request, Dropped):
            self._drop(incoming, request.reason, at)
            return 0
        if isinstance(request, Refused):
            return self._refuse(incoming, request.request_id, request.error, at)
        if isinstance(request, ResendAsked):
            return self._resend(incoming, request, at)
        if isinstance(request, AuthenticateAsked):
            return self._authenticate_admit(incoming, request, at)
        name = incoming.name
        rlog = self.log.bind(request=name, request_id=request.request_id)
        decision = request.decision
        try:
            new_state, outcomes = table.apply(self.state, decision, at=at)
        except DecisionError as exc:
            return self._refuse(incoming, request.request_id, str(exc), at)
        with self._batch():
            seq = self._journal("decision", {"event": to_record(decision)}, at=at)
            self._remember(state=new_state)
            queued = self._publish(outcomes, at)
            queued += self._respond(name, request.request_id, None, at)
            self.upkeep.snapshot_if_due(at)
        rlog.info(
            "decision applied",
            seq=seq,
            decision=type(decision).__name__,
            roll=getattr(decision, "roll_id", None),  # an alarm_ack names no roll
            operator=decision.operator,
        )
        return queued

    def _resend(self, incoming: Incoming, asked: ResendAsked, at: datetime) -> int:
        """``request/resend`` (mqtt-api.md 1.3 and 1.4, ``daemon.resend``): the messages
        of the range go to the link as copies (never through the outbox: no new record,
        no new seq), those sent in the last few seconds not again, within the asking
        user's rate and budget; the request and what was sent are journaled, and
        answered. Past the budget, refused: answered now and then, counted otherwise."""
        request, request_id = asked.request, asked.request_id
        user = incoming.user or BARE_USER
        resender = self.resender
        if not self.resends.take_request(user):
            return self._refuse(incoming, request_id, RATE_ERROR, at)
        if resender is None or not resender.connected:
            return self._refuse(incoming, request_id, NO_LINK_ERROR, at)
        if resender.resend_backlog >= RESEND_BACKLOG:
            return self._refuse(incoming, request_id, BACKLOG_ERROR, at)
        found = published_between(
            self.journal, request.from_seq, request.to_seq, key=self.journal.key
        )
        # Only JSON payloads (the outbox holds no other; availability never goes there).
        copies = [m for m in found.messages if m.payload[:1] == b"{"]
        plan = self.resends.plan(user, copies)
        if isinstance(plan, Refuse):
            if plan.answer:
                return self._refuse(incoming, request_id, plan.error, at)
            report = self.resend_refused.add(incoming, plan.error, at)
            if report is not None:
                self._report_resend_refused(report, at)
            return 0
        record: dict[str, object] = {
            "operator": request.operator,
            "request_id": request_id,
            "from_seq": request.from_seq,
            "to_seq": request.to_seq,
            "sent": len(copies),
            "missing_before": found.missing_before,
        }
        if incoming.user is not None:
            record["user"] = incoming.user
        if plan.shared:
            record["shared"] = plan.shared  # in `sent`, published for an earlier request
        with self._batch():
            self._journal("decision", {"resend": record}, at=at)
            queued = self._queue(
                response_publication(
                    incoming.name,
                    request_id,
                    None,
                    table=self.table_id,
                    sent=len(copies),
                    missing_before=found.missing_before,
                ),
                at,
            )
        self.resends.served(user, plan)
        resender.resend(plan.publish)
        self.log.info("resend served", **record)
        return queued

    def _authenticate_admit(
        self, incoming: Incoming, asked: AuthenticateAsked, at: datetime
    ) -> int:
        """A well-formed ``request/authenticate``: within its user's rate it is handed to
        the shell (``pending_authentication``), which reads the files off the event loop;
        past it, refused."""
        user = incoming.user or BARE_USER
        recent = [t for t in self.authentications.get(user, []) if (at - t).total_seconds() < 60]
        if len(recent) >= AUTHENTICATIONS_PER_MINUTE:
            self.authentications[user] = recent
            return self._refuse(incoming, asked.request_id, AUTH_RATE_ERROR, at)
        self.authentications[user] = [*recent, at]
        self.pending_authentication = (incoming, asked)
        return 0

    def authenticated(
        self,
        incoming: Incoming,
        asked: AuthenticateAsked,
        answer: tuple[tuple[Component, ...], str] | str,
    ) -> int:
        """Answer a ``request/authenticate`` with what the shell read: each component's
        HMAC under the seed and the whole's, or the sentence why the files could not be
        read; journaled with who asked (operator, user) and the seed."""
        at = self.clock()
        request, request_id = asked.request, asked.request_id
        if isinstance(answer, str):
            return self._refuse(incoming, request_id, answer, at)
        macs, digest = answer
        record: dict[str, object] = {
            "operator": request.operator,
            "request_id": request_id,
            "user": incoming.user or BARE_USER,
            "seed": request.seed,
            "digest": digest,
            "components": len(macs),
            "software_digest": self.software_digest,
        }
        with self._batch():
            self._journal("decision", {"authenticate": record}, at=at)
            queued = self._queue(
                response_publication(
                    incoming.name,
                    request_id,
                    None,
                    table=self.table_id,
                    seed=request.seed,
                    digest=digest,
                    components=[ComponentHmac(path=c.path, hmac=c.digest) for c in macs],
                ),
                at,
            )
        self.log.info("software authenticated", **record)
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
        busy = self.busy.due(at)
        if busy is not None:
            self._report_busy(busy, at)
        refused = self.resend_refused.due(at)
        if refused is not None:
            self._report_resend_refused(refused, at)

    def _answer_busy(self, incoming: Incoming, at: datetime) -> int:
        """A request refused unread for the rate (``daemon.intake``): counted with those it
        stands for, and answered busy when its name can be answered. The journal holds the
        answer and, once a minute at most, the count (``busy_requests``), not each request."""
        report = self.busy.add(incoming, "busy", at, count=incoming.busy)
        with self._batch():
            if report is not None:
                self._report_busy(report, at)
            if classify(incoming.name) == "malformed":
                return 0
            return self._respond(incoming.name, request_id_of(incoming.payload), BUSY_ERROR, at)

    def _report_busy(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("requests refused unread: more arrive than the table serves", **report)
        self._journal("decision", {"busy_requests": report}, at=at)

    def _report_resend_refused(self, report: dict[str, object], at: datetime) -> None:
        self.log.warning("resends refused past a user's copy budget, counted", **report)
        self._journal("decision", {"resend_refused": report}, at=at)

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
        refuses (a full disk), the memory is the value it was before, so the same event
        can be handled again once the journal works (nothing half done, nothing twice);
        the lines logged inside come out only if it commits."""
        saved = self._memory
        try:
            with self.log.held(), self.upkeep.batch():
                yield
        except BaseException:
            self._memory = saved
            raise

    def _journal(self, kind: str, record: dict[str, Any], *, at: datetime | None = None) -> int:
        return self.journal.append(kind, record, ts=at or self.clock())

    def journal_fault_over(self, since: datetime, error: str, held: int) -> int:
        """The journal works again after refusing since ``since``: the outage goes into
        the record (when, why, how many events waited) and ``JOURNAL_FAULT`` clears, in
        one transaction. Returns the messages queued."""
        at = self.clock()
        with self._batch():
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
            return self._host_fact(JournalWritable(), at)

    def journal_refused(self, error: str) -> int:
        """Raise ``JOURNAL_FAULT`` (``JournalRefused``): the shell calls this once the
        reserve's room is free (``daemon.disk``). Returns the messages queued."""
        return self._host_fact(JournalRefused(error=error), self.clock())

    def journal_writable(self) -> int:
        """Clear a ``JOURNAL_FAULT`` left by a daemon stopped while its journal refused (a
        start writes its records, so the journal writes). Returns the messages queued."""
        return self._host_fact(JournalWritable(), self.clock())

    def broker_login(self, *, refused: bool, user: str | None) -> int:
        """The broker refused the table's login after the start, or takes it again
        (``MQTT_LOGIN_REFUSED``). Returns the messages queued."""
        return self._host_fact(BrokerLoginChecked(refused=refused, user=user), self.clock())

    def software_checked(self, record: dict[str, object], problem: str | None) -> int:
        """The installed software read at start (issue 33): its digest journaled (kind
        ``daemon``, ``software``), and ``SOFTWARE`` raised when ``problem`` (it matches no
        approved manifest), cleared otherwise. Returns the messages queued."""
        at = self.clock()
        with self._batch():
            self._journal("daemon", {"software": record}, at=at)
            return self._host_fact(SoftwareChecked(problem=problem), at)

    def disk_checked(self, free_bytes: int, needed_bytes: int, hours: int) -> int:
        """The free space on the journal's disk against what ``hours`` of its growth need
        (``DISK_LOW``, ``daemon.disk``). Returns the messages queued."""
        fact = DiskSpaceChecked(free_bytes=free_bytes, needed_bytes=needed_bytes, hours=hours)
        return self._host_fact(fact, self.clock())

    def _queue(self, publication: Publication, at: datetime) -> int:
        topic, retained, body = publication
        self.journal.append_publish(topic, body, retained=retained, ts=at)
        if retained:
            self._remember(published={**self._memory.published, topic: body})
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
            assert publication is not None  # noqa: S101  only the alarm outcomes have none
            self.log.info("outcome", topic=publication.topic, **outcome_fields(outcome))
            queued += self._queue(publication, at)
        return queued + self._queue_state(at)

    def _queue_state(self, at: datetime) -> int:
        """Queue every retained state topic whose content changed."""
        queued = 0
        state = self.state
        # Unchanged bodies are not published again (republishing after a reconnect is the
        # MQTT link's job).
        built = state_publications(state, table=self.table_id, since=self._memory.built_from)
        for publication in (self._info, *built):
            if self._memory.published.get(publication.topic) != publication.body:
                queued += self._queue(publication, at)
        self._remember(built_from=state)
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
